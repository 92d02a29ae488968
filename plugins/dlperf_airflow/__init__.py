"""Airflow wiring of dlperf: the Docker runtime (through the Docker provider's hook) and the DAG's steps.

Everything about benchmarks themselves lives in ``dlperf_core``; this package only adapts it to Airflow.
"""
