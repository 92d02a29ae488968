#!/usr/bin/env bash
# dlperf-check-env: the `check-env` service of docker-compose.yaml, which every other service waits for.
# Refuses (exit 1, one line on stderr) while a secret in .env is still .env.example's value or shorter than 8
# characters, naming each such variable; says nothing and exits 0 otherwise.
# Usage: dlperf-check-env NAME...   (the values come from the environment compose passes in)
set -euo pipefail
EXAMPLE_VALUE="change-me"
bad=()
for name in "$@"; do
  value="${!name-}"
  if [ "$value" = "$EXAMPLE_VALUE" ]; then
    bad+=("$name (still '$EXAMPLE_VALUE')")
  elif [ "${#value}" -lt 8 ]; then
    bad+=("$name (under 8 characters)")
  fi
done
if [ "${#bad[@]}" -gt 0 ]; then
  msg="refusing to start: replace in .env: $(IFS=,; echo "${bad[*]}" | sed 's/,/, /g') (scripts/new-env.sh writes a .env with new secrets)"
  echo "$msg" >&2
  exit 1
fi
echo "check-env: every secret is set"
