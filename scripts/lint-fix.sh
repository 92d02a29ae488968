#!/usr/bin/env bash
# The automatic part of a lint sweep: ruff's safe fixes (import order, pyupgrade, unused imports, ...), then
# ruff format, over the whole repository (configuration: pyproject.toml). Unsafe fixes are never applied.
# What it cannot fix is listed at the end (`ruff check`, then `mypy`): fix those by hand, then `make lint`.
#
#   bash scripts/lint-fix.sh          # the whole repository
#   bash scripts/lint-fix.sh PATH...  # only these files or folders (mypy still checks its configured files)
#
# Run it on a clean work tree (it rewrites files in place: review with `git diff`) and commit its result on
# its own, so that formatting stays apart from real changes in the history.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
[[ -x "$VENV/bin/ruff" && -x "$VENV/bin/mypy" ]] || make venv || exit 1
paths=("${@:-.}")

"$VENV/bin/ruff" check --fix --exit-zero --silent "${paths[@]}"  # safe fixes only (no --unsafe-fixes)
"$VENV/bin/ruff" format "${paths[@]}" || exit 1
"$VENV/bin/ruff" check --fix --exit-zero --silent "${paths[@]}"  # anything formatting brought up again

status=0
echo "== left for a person: ruff check"
"$VENV/bin/ruff" check --output-format concise "${paths[@]}" || status=1
echo "== left for a person: mypy"
"$VENV/bin/mypy" || status=1
exit $status
