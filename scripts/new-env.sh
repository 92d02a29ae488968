#!/usr/bin/env bash
# new-env.sh: print a .env for docker-compose.yaml: .env.example with every `change-me` secret replaced by a new
# random one (the Fernet key in Fernet's own format), DOCKER_GID set to this host's Docker socket group, and a
# value given as a NAME=VALUE argument, or set (non-empty) in the environment, taken as given (as compose
# itself lets the shell's environment win over .env).
#
#   scripts/new-env.sh > .env
#   scripts/new-env.sh DLPERF_PUBLISH_ADDR=127.0.0.2 > .env     # publish on another loopback address
#   DLPERF_PUBLISH_ADDR=127.0.0.2 scripts/new-env.sh > .env     # the same
#
# It never overwrites a file itself: an existing .env holds the secrets of an existing deployment (its
# database volume was initialised with them).
# A given value with a character the shell would read (&, a space, quotes, ...) is written in single quotes, so
# that `set -a; . ./.env` reads it as compose does (e.g. AIRFLOW_CONN_SMTP_DEFAULT=smtp://...?a=1&b=2).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
EXAMPLE="$REPO/.env.example"

random_secret() { head -c 36 /dev/urandom | base64 | tr '+/' '-_'; }  # 48 URL-safe characters
fernet_key() { head -c 32 /dev/urandom | base64 | tr '+/' '-_'; }     # 32 bytes, URL-safe base64
given() {  # given NAME VALUE: the .env line, VALUE in single quotes where the shell would read a character of it
  if [[ "$2" =~ ^[A-Za-z0-9_./:@%,+=~-]*$ ]]; then echo "$1=$2"
  elif [[ "$2" == *"'"* ]]; then echo "new-env.sh: $1: a value with a single quote cannot be written" >&2; exit 2
  else echo "$1='$2'"; fi
}

declare -A set_to=()
for arg in "$@"; do
  case "$arg" in
    [A-Z_]*=*) set_to["${arg%%=*}"]="${arg#*=}" ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "new-env.sh: expected NAME=VALUE, got: $arg" >&2; exit 2 ;;
  esac
done
if [ -z "${set_to[DOCKER_GID]+x}" ] && [ -S /var/run/docker.sock ]; then
  set_to[DOCKER_GID]="$(stat -c %g /var/run/docker.sock)"
fi

while IFS= read -r line || [ -n "$line" ]; do
  name="${line%%=*}"
  if [[ "$line" =~ ^[A-Z0-9_]+= ]] && [ -n "${set_to[$name]+x}" ]; then
    given "$name" "${set_to[$name]}"
    unset "set_to[$name]"
  elif [[ "$line" =~ ^[A-Z0-9_]+= ]] && [ -n "${!name:-}" ]; then
    given "$name" "${!name}"
  elif [[ "$line" =~ ^AIRFLOW_FERNET_KEY=change-me$ ]]; then
    echo "AIRFLOW_FERNET_KEY=$(fernet_key)"
  elif [[ "$line" =~ ^[A-Z0-9_]+=change-me$ ]]; then
    echo "$name=$(random_secret)"
  else
    printf '%s\n' "$line"
  fi
done < "$EXAMPLE"
for name in "${!set_to[@]}"; do given "$name" "${set_to[$name]}"; done
