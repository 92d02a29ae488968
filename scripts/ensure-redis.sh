#!/usr/bin/env bash
# Make sure a Redis server answers on 127.0.0.1:6379 (the Celery broker of the node-routing test).
# These machines run Debian's redis-server already; where none answers, start one that keeps nothing on disk.
set -euo pipefail
ping() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }
ping && exit 0
if ! command -v redis-server >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get install -y -q redis-server >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q redis-server >/dev/null; }
  else
    echo "ensure-redis: redis-server is not installed" >&2; exit 1
  fi
fi
redis-server --bind 127.0.0.1 --port 6379 --save '' --appendonly no --daemonize yes >/dev/null
for _ in $(seq 1 50); do ping && exit 0; sleep 0.2; done
echo "ensure-redis: redis-server did not answer on 127.0.0.1:6379" >&2
exit 1
