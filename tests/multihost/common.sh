# What the multihost tests share; each sources it after setting `cluster` (scripts/cluster.sh).
#
#   cluster_up                 takes the machine's cluster lock, builds 2 hosts x 2 ranks at
#                              10 Gbit/s, and at exit removes it and stops a job still in
#                              $launched; exits with cluster.sh's status (77: skipped) if it fails
#   expect_ranks_by_host       fails unless -np 4 puts ranks 0-1 on strata-h0 and 2-3 on strata-h1,
#                              each rank on its host's cores (where the machine has a core per host)
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
  local placement rank host cores expected
  placement=$(bash "$cluster" run -np 4 sh -c 'echo $OMPI_COMM_WORLD_RANK $(hostname) $(taskset -pc $$ | sed "s/.*: //")' | sort)
  echo "ranks, hosts and cores: $(paste -sd';' <<<"$placement")"
  [ "$(cut -d' ' -f1-2 <<<"$placement" | paste -sd' ')" = "0 strata-h0 1 strata-h0 2 strata-h1 3 strata-h1" ] ||
    { echo "expected ranks 0 and 1 on strata-h0, 2 and 3 on strata-h1" >&2; exit 1; }
  # cluster.sh up gives each host cores of its own where there is a core per host; elsewhere
  # the hosts share all of them.
  local h0 h1
  h0=$(bash "$cluster" cores 0) h1=$(bash "$cluster" cores 1)
  if (($(nproc) >= 2)) && [ "$h0" = "$h1" ]; then
    echo "expected each host on cores of its own on $(nproc) cores, not both on $h0" >&2
    exit 1
  fi
  while read -r rank host cores; do
    expected=$(bash "$cluster" cores "${host#strata-h}")
    [ "$cores" = "$expected" ] || { echo "rank $rank of $host runs on cores $cores, not its host's $expected" >&2; exit 1; }
  done <<<"$placement"
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
