# dlperf: the two commands a new user needs are `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo demo-seeds test chaos lint docs venv services images bench growth clean

$(VENV)/.installed: requirements.lock requirements-lint.lock requirements-docs.lock docker/airflow/requirements-celery.lock pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --no-deps -r requirements.lock
	# the Celery executor, as in the Airflow image (node-routing test: one Celery worker per stand-in node)
	$(PY) -m pip install -q --no-deps -r docker/airflow/requirements-celery.lock
	# the tools of `make lint`
	$(PY) -m pip install -q --no-deps -r requirements-lint.lock
	# MkDocs, for `make docs`
	$(PY) -m pip install -q --no-deps -r requirements-docs.lock
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

venv: $(VENV)/.installed

## Run suites/smoke.yaml on the local runtime with SQLite and print the table (no servers needed).
demo: venv
	$(VENV)/bin/dlperf run suites/smoke.yaml --runtime local

## Every seed framework trains for real on CPU: builds the framework CPU images (needs root and a Docker
## engine, started if missing), runs suites/seeds-cpu.yaml on two stand-in nodes and prints the tables.
demo-seeds: venv
	bash scripts/build-images.sh
	$(VENV)/bin/dlperf run suites/seeds-cpu.yaml --runtime docker

## Start what the tests need (PostgreSQL, Docker engine, locally built images), then run pytest on TEST_WORKERS
## pytest-xdist workers (default 2, this machine class's cores; 0: one process). The tests that start containers on
## the Docker Engine run one after another on one worker (tests/conftest.py: ENGINE_TESTS), the others share both.
## Each test's seconds go to TEST_REPORT (JUnit XML): `bench/ci_durations.py $(TEST_REPORT)` sums them per file.
TEST_WORKERS ?= 2
TEST_REPORT ?= .dlperf/test-report.xml
test: venv services
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup --durations=25 \
	  --junitxml=$(TEST_REPORT) $(PYTEST_ARGS)

## The deployment loses parts mid-night (tests/chaos/, docs/reliability.md): every fault; `make test` (CI) runs
## those that fit its time (worker kill, results database, scheduler and api-server restarts).
## Also the Slurm test cluster's job past its time limit (tests/e2e/test_slurm_cluster.py, 1-2 minutes) and a dlperf
## case run past it (tests/e2e/test_slurm_e2e.py, about 95 s), and the DAG deferring on a bash stand-in of Slurm
## (tests/airflow_plugin/test_slurm_deferral.py, about 2 minutes; CI runs the DAG on the real test cluster instead).
chaos: venv services
	DLPERF_CHAOS=all $(PY) -m pytest -q -p no:cacheprovider tests/chaos \
	  tests/e2e/test_slurm_cluster.py::test_e_a_job_past_its_time_limit_ends_timeout \
	  tests/e2e/test_slurm_e2e.py::test_f_a_case_past_its_time_limit_fails_with_timeouts_reason \
	  tests/airflow_plugin/test_slurm_deferral.py::test_a_slurm_case_defers_while_its_job_runs_and_is_stored_as_any_other \
	  $(PYTEST_ARGS)

## Lint (ruff), format check (ruff format) and type check (mypy), configured in pyproject.toml; all three run,
## the target fails if any does. scripts/lint-fix.sh applies ruff's safe fixes and formatting.
lint: venv
	@status=0; \
	$(VENV)/bin/ruff check . || status=1; \
	$(VENV)/bin/ruff format --check . || status=1; \
	$(VENV)/bin/mypy || status=1; \
	exit $$status

## Build the docs site (mkdocs.yml, pages in docs/) into .site/ in strict mode: a broken link or anchor, or a
## page missing from the nav, fails it.
docs: venv
	$(VENV)/bin/mkdocs build --strict --site-dir .site

services:
	bash scripts/ensure-postgres.sh
	bash scripts/ensure-docker.sh
	bash scripts/ensure-sshd.sh
	bash scripts/ensure-registry.sh
	bash scripts/ensure-redis.sh
	bash scripts/ensure-chromium.sh
	bash scripts/ensure-compose.sh >/dev/null
	bash scripts/build-images.sh

images:
	bash scripts/build-images.sh

## Benchmarks (figures, not tests): see docs/benchmarks.md
bench: venv
	$(PY) bench/parse_speed.py
	$(PY) bench/dag_parse_time.py
	$(PY) bench/harness_transparency.py
	$(PY) bench/orchestration_overhead.py
	$(PY) bench/detection_quality.py
	bash scripts/ensure-postgres.sh
	$(PY) bench/views_at_scale.py

## How the cost grows (docs/benchmarks.md (h)): a night of 10 to 1,000 case runs on the embedded runtime and on
## the tests' CeleryExecutor deployment, and a case over 2, 4 and 8 stand-in nodes (about 20 minutes on 2 cores).
growth: venv services
	$(PY) bench/growth.py --sizes 10,100,1000
	$(PY) bench/growth.py --executor celery --sizes 10,100
	$(PY) bench/growth_nodes.py --nodes 2,4,8

clean:
	rm -rf $(VENV) .dlperf .site
