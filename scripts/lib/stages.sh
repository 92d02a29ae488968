# stages.sh: time the stages of a script and print them at its end (sourced by .ci/run).
#
#   stage NAME CMD...        run CMD in the foreground as stage NAME
#   stage_bg NAME LOG CMD... start CMD in the background as stage NAME, its output to LOG
#   stage_wait NAME          wait for a background stage; its log is printed, its exit status returned
#   stage_summary            the table: each stage's start (minutes from the script's start), seconds and status
#   STAGE_SECONDS[NAME]      a finished stage's wall seconds
#
# Each stage's line is written to $STAGES_FILE when it ends, so the table holds every stage that ended,
# even when a later one failed (call stage_summary from an EXIT trap).
STAGES_T0=$(date +%s)
STAGES_FILE="$(mktemp "${TMPDIR:-/tmp}/dlperf-stages.XXXXXX")"
declare -A STAGE_PIDS=() STAGE_LOGS=() STAGE_STARTS=() STAGE_SECONDS=()

_stage_record() {  # NAME START RC
  local now
  now=$(date +%s)
  STAGE_SECONDS[$1]=$((now - $2))
  printf '%-22s %6.1f %7d  %s\n' "$1" "$(awk -v a="$2" -v b="$STAGES_T0" 'BEGIN { print (a - b) / 60 }')" \
    "$((now - $2))" "$([ "$3" -eq 0 ] && echo ok || echo "FAILED (exit $3)")" >>"$STAGES_FILE"
}

stage() {
  local name="$1" start rc=0
  shift
  start=$(date +%s)
  echo "=== stage $name: $*" >&2
  "$@" || rc=$?
  _stage_record "$name" "$start" "$rc"
  return "$rc"
}

stage_bg() {
  local name="$1" log="$2"
  shift 2
  STAGE_STARTS[$name]=$(date +%s)
  STAGE_LOGS[$name]="$log"
  echo "=== stage $name (in the background, log $log): $*" >&2
  "$@" >"$log" 2>&1 &
  STAGE_PIDS[$name]=$!
}

stage_wait() {
  local name="$1" rc=0
  wait "${STAGE_PIDS[$name]}" || rc=$?
  _stage_record "$name" "${STAGE_STARTS[$name]}" "$rc"
  echo "=== stage $name (background) ended, exit $rc; its log:" >&2
  cat "${STAGE_LOGS[$name]}" >&2
  return "$rc"
}

stage_summary() {
  local total=$(($(date +%s) - STAGES_T0))
  echo
  echo "=== stage times (start: minutes after the start; seconds of wall time; background stages overlap)"
  printf '%-22s %6s %7s  %s\n' stage start seconds status
  cat "$STAGES_FILE"
  printf '%-22s %6s %7d  (%.1f min)\n' total "" "$total" "$(awk -v t="$total" 'BEGIN { print t / 60 }')"
  rm -f "$STAGES_FILE"
}
