# What the multihost tests share; each sources it after setting `cluster` (scripts/cluster.sh).
#
#   cluster_up                 takes the machine's cluster lock, builds 2 hosts x 2 ranks at
#                              10 Gbit/s, and at exit removes it and stops a job still in
#                              $launched; exits with cluster.sh's status (77: skipped) if it fails
#   wait_for_commit STEP LOG   waits up to 120 s for the committed checkpoint of update STEP in
#                              ./checkpoints while the job $launched runs; fails showing LOG if not
launched=0

cluster_up() {
  exec 9>/run/strata-cluster.lock && flock -w 600 9  # one cluster per machine: other tests wait
  trap '((launched)) && kill -TERM "$launched" 2>/dev/null; wait; bash "$cluster" down >/dev/null 2>&1 || true' EXIT
  local status=0
  bash "$cluster" up --hosts 2 --slots 2 --rate 10gbit || status=$?
  [ "$status" = 0 ] || exit "$status"
}

wait_for_commit() {
  local step=$1 log=$2 commit
  commit=checkpoints/step-$(printf %012d "$step")/commit.ckpt
  for ((i = 0; ; ++i)); do
    [[ -e $commit ]] && return 0
    kill -0 "$launched" 2>/dev/null || { cat "$log"; echo "FAIL: the job ended before checkpoint $step was committed"; exit 1; }
    ((i < 1200)) || { cat "$log"; echo "FAIL: no checkpoint of update $step after 120 s"; exit 1; }
    sleep 0.1
  done
}
