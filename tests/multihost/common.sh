# What the multihost tests share; each sources it after setting `cluster` (scripts/cluster.sh).
#
#   cluster_up                 takes the machine's cluster lock, builds 2 hosts x 2 ranks at
#                              10 Gbit/s, and at exit removes it and stops a job still in
#                              $launched; exits with cluster.sh's status (77: skipped) if it fails
#   expect_ranks_by_host       fails unless -np 4 puts ranks 0-1 on strata-h0 and 2-3 on strata-h1
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

expect_ranks_by_host() {
  local placement
  placement=$(bash "$cluster" run -np 4 sh -c 'echo $OMPI_COMM_WORLD_RANK $(hostname)' | sort | paste -sd' ')
  echo "ranks and hosts: $placement"
  [ "$placement" = "0 strata-h0 1 strata-h0 2 strata-h1 3 strata-h1" ] ||
    { echo "expected ranks 0 and 1 on strata-h0, 2 and 3 on strata-h1" >&2; exit 1; }
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
