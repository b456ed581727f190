# Sourced by the tests that restart a job after a fault: the run it must equal bit for bit.
# A restart on fewer ranks sums in another order from its checkpoint on, so the reference is
# the same schedule without the fault: <ranks> ranks up to the update the restart resumed
# from (--stop-after), then <restart ranks> from that checkpoint. Writes reference.bin.
#
#   same_schedule_without_fault <ranks> <restart ranks> <resumed update> <mpirun and flags...> -- <program and flags...>
same_schedule_without_fault() {
  local ranks=$1 restart_ranks=$2 resumed=$3
  shift 3
  local launch=()
  while [[ $1 != -- ]]; do launch+=("$1"); shift; done
  shift
  echo "== the same schedule without a fault: $ranks ranks to update $resumed, then $restart_ranks"
  "${launch[@]}" -n "$ranks" "$@" --checkpoint-dir reference --stop-after "$resumed" >/dev/null
  "${launch[@]}" -n "$restart_ranks" "$@" --checkpoint-dir reference --save-params reference.bin | tail -1
}
