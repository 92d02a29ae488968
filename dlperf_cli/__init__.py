"""The ``dlperf`` command line: run suites through the real DAG in-process, parse logs, read results."""
