"""dlperf core library: suites and plans, framework adapters, parsing, statistics, storage, reports.

No Airflow import anywhere in this package: ``dags/`` and ``plugins/`` wire it into Airflow.
Importing the package itself is cheap (the training workload imports only torch).
"""

__version__ = "0.1.0"
