#!/usr/bin/env bash
# check-test-budget.sh SECONDS: fail when the test suite's wall time (SECONDS, measured by .ci/run) is over its
# budget on this machine class (2 cores, 24 GiB). Two limits:
#   - the budget, DLPERF_TEST_BUDGET_S (default 2100 s) at the speed of the machine it was set on, scaled by this
#     machine's speed: a 10-million-iteration Python loop took REFERENCE_LOOP_S there; a slower CPU of the same
#     class (sessions of this project have had CPUs of different speeds) gets a proportionally larger budget, a
#     faster one no smaller. This catches a change that slows the tests down, when it is made.
#   - the ceiling, DLPERF_TEST_CEILING_S (default 3000 s) whatever the speed: past it a fresh machine's CI
#     (installs and image builds, about 15 minutes more) nears the 90-minute limit past which nothing lands.
# docs/ci.md says where the time goes and what to cut.
set -euo pipefail
loop() {
  python3 -c '
import time
best = None
for _ in range(3):
    t = time.perf_counter()
    x = 0
    for i in range(10_000_000):
        x += i
    best = min(best or 1e9, time.perf_counter() - t)
print(f"{best:.3f}")'
}
if [ "${1:-}" = "--loop" ]; then loop; exit 0; fi  # .ci/run times the loop before the tests too
seconds="${1:?usage: check-test-budget.sh SECONDS}"
budget="${DLPERF_TEST_BUDGET_S:-2100}"
ceiling="${DLPERF_TEST_CEILING_S:-3000}"
REFERENCE_LOOP_S=0.64 # AMD EPYC, 2 cores, 2026-11-28: the machine docs/ci.md's figures come from
loop_s="$(loop)"
# the machine's speed can change during a session: the slower of the loop before the tests (DLPERF_LOOP_BEFORE_S,
# set by .ci/run) and now is the speed the tests ran at
before="${DLPERF_LOOP_BEFORE_S:-0}"
loop_s="$(awk -v a="$loop_s" -v b="$before" 'BEGIN { printf "%.3f", (a > b ? a : b) }')"
scaled="$(awk -v b="$budget" -v l="$loop_s" -v r="$REFERENCE_LOOP_S" 'BEGIN { s = l / r; if (s < 1) s = 1; printf "%d", b * s }')"
limit=$((scaled < ceiling ? scaled : ceiling))
echo "check-test-budget: the tests took ${seconds} s; budget ${budget} s at the reference speed, ${scaled} s here" \
  "(a 10M-iteration Python loop: ${loop_s} s here, ${REFERENCE_LOOP_S} s there), ceiling ${ceiling} s"
if [ "$seconds" -gt "$limit" ]; then
  echo "check-test-budget: over the limit of ${limit} s (DLPERF_TEST_BUDGET_S, DLPERF_TEST_CEILING_S;" \
    "docs/ci.md: where the time goes and what to cut)" >&2
  exit 1
fi
