#!/usr/bin/env bash
# timing/cluster/tsr_gpt2.sbatch on a real Slurm: a one-node cluster on
# localhost (Debian's slurm-wlm, its own munged, key and socket), started and
# stopped here, everything in one temporary directory.
#  1. a d2 job with a one-minute time limit and --signal=B:USR1@55 gets the
#     signal from Slurm's time limit, tsr_gpt2 saves its state, the script
#     requeues the job, the next run resumes: at least one requeue, every step
#     run once, the per-step losses equal an uninterrupted run's;
#  2. the same script with TSR_LAUNCH=mpirun, stopped by
#     scancel --batch --signal=USR1 after its first steps, requeued, resumed:
#     losses equal again;
#  3. bad inputs (a non-numeric TSR_MAX_REQUEUES, --save in the arguments, an
#     unknown TSR_LAUNCH): the job fails with a message, nothing runs.
# The steps of job 1 are sized from a calibration run so that the run lasts
# about 50 s on this machine: Slurm checks time limits every 30 s, so the
# signal comes 5-35 s after a run starts, and at least one run is stopped.
# usage: check_slurm.sh SBATCH_SCRIPT TSR_GPT2 [MPIRUN]
# exit 77 (skipped) without slurm-wlm and munge, or when not root (slurmd).
set -u

missing=""
for c in slurmctld slurmd sbatch scontrol squeue scancel srun munged mungekey; do
  command -v "$c" > /dev/null 2>&1 || PATH=$PATH:/usr/sbin command -v "$c" > /dev/null 2>&1 || missing="$missing $c"
done
if [ -n "$missing" ]; then
  echo "SKIPPED: no$missing: install Debian's slurm-wlm and munge (.ci/install-deps does)"
  exit 77
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIPPED: slurmd must run as root to start jobs"
  exit 77
fi
export PATH=$PATH:/usr/sbin
script=$(realpath -- "$1") && exe=$(realpath -- "$2") || exit 1
mpirun=${3:-}

# nothing from the caller's environment: no Slurm job or options around us,
# caches and homes of our own
for v in $(compgen -e); do
  case $v in SLURM_*|SBATCH_*|SRUN_*|SALLOC_*|SQUEUE_*|SCONTROL_*|PMI_*|PMIX_*|OMPI_*|STARPU_*|TSR_*) unset "$v" ;; esac
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tsr_slurm.XXXXXX") || exit 1
chmod 755 "$tmp" # munged: every directory above its socket must be searchable
mkdir -p "$tmp"/{home,cache,starpu,munge,run,state,spool,log,job} && chmod 700 "$tmp/munge"
export HOME=$tmp/home XDG_CACHE_HOME=$tmp/cache TSR_CACHE_DIR=$tmp/cache STARPU_HOME=$tmp/starpu STARPU_SILENT=1
export SLURM_CONF=$tmp/slurm.conf OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
start=$(date +%s)
pass=0; fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAILED: $*"; }
log() { echo "[$(( $(date +%s) - start )) s] $*"; }

pids=()
cleanup() {
  local p
  if [ -n "${ctld_up:-}" ]; then
    scancel --quiet --full --signal=KILL --user=root 2> /dev/null
    scancel --quiet --user=root 2> /dev/null
    for _ in $(seq 20); do [ -z "$(squeue -h -t running,completing 2> /dev/null)" ] && break; sleep 1; done
  fi
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
  for p in "${pids[@]}"; do
    for _ in $(seq 20); do kill -0 "$p" 2> /dev/null || break; sleep 0.5; done
    kill -0 "$p" 2> /dev/null && { echo "FAILED: daemon $p did not stop: killed"; kill -9 "$p"; fail=$((fail + 1)); }
  done
  # nothing of the jobs may outlive the cluster
  local f c
  for f in /proc/[0-9]*/cmdline; do
    p=${f#/proc/}; p=${p%/cmdline}
    [ "$p" = $$ ] && continue
    c=$( { tr '\0' ' ' < "$f"; } 2> /dev/null)
    case $c in *"$tmp"*)
      echo "FAILED: process $p of the test still runs: $c"
      kill -9 "$p" 2> /dev/null; fail=$((fail + 1)) ;;
    esac
  done
  if [ $fail -gt 0 ]; then
    for f in "$tmp"/log/*.log "$tmp"/job/*.out; do [ -f "$f" ] && { echo "== $f"; tail -n 25 "$f"; }; done
  fi
  rm -rf "$tmp"
  log "$pass checks passed, $fail failed"
  [ $fail -eq 0 ] && exit 0 || exit 1
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# ---- the cluster ------------------------------------------------------------
port_free() { ! (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null; }
base=0
for _ in $(seq 50); do
  p=$((20000 + RANDOM % 40000))
  port_free "$p" && port_free $((p + 1)) && { base=$p; break; }
done
[ $base -gt 0 ] || { bad "no free port pair on localhost"; exit 1; }
ncpu=$(nproc)
# cred_expire: also how long a requeued job waits before it may start again
# (Slurm's default 120 s)
cat > "$SLURM_CONF" <<EOF
ClusterName=tsrtest
SlurmctldHost=localhost
SlurmctldPort=$base
SlurmdPort=$((base + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/run/munge.sock,cred_expire=5
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/run/slurmctld.pid
SlurmdPidFile=$tmp/run/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
InactiveLimit=0
MinJobAge=600
KillWait=10
Waittime=0
NodeName=localhost CPUs=$ncpu RealMemory=500 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=10 State=UP
EOF
mungekey --create --keyfile="$tmp/munge/munge.key" > /dev/null 2>&1 || { bad "mungekey failed"; exit 1; }
munged -F -S "$tmp/run/munge.sock" --key-file="$tmp/munge/munge.key" --log-file="$tmp/log/munged.log" \
  --pid-file="$tmp/run/munged.pid" --seed-file="$tmp/munge/seed" > "$tmp/log/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$tmp/run/munge.sock" ] && break; sleep 0.1; done
[ -S "$tmp/run/munge.sock" ] || { bad "munged did not start: $(cat "$tmp/log/munged.out")"; exit 1; }
slurmctld -D -i -f "$SLURM_CONF" > "$tmp/log/slurmctld.out" 2>&1 &
pids+=($!)
ctld_up=1
slurmd -D -N localhost -f "$SLURM_CONF" > "$tmp/log/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 60); do
  [ "$(sinfo -h -n localhost -o %T 2> /dev/null)" = idle ] && break; sleep 0.5
done
[ "$(sinfo -h -n localhost -o %T 2> /dev/null)" = idle ] || { bad "the node did not come up: $(sinfo 2>&1)"; exit 1; }
log "Slurm 22.05 cluster up (ports $base, $((base + 1))), $ncpu CPUs"

# job_field JOB FIELD: a field of scontrol show job
job_field() { scontrol -o show job "$1" 2> /dev/null | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# wait_job JOB SECONDS: until the job has ended; prints its final state
wait_job() {
  local s
  for _ in $(seq "$2"); do
    s=$(job_field "$1" JobState)
    case $s in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED) echo "$s"; return ;; esac
    sleep 1
  done
  echo "still ${s:-unknown} after $2 s"
}
# losses DIR: step,loss of every run's CSV, in step order
losses() { cat "$1"/steps-*.csv 2> /dev/null | grep -v '^step' | cut -d, -f1,2 | sort -t, -k1,1n; }
train=(--model d2 -B 4 -T 64 --val-every 0 --sample-every 0 --quiet)

# ---- 1. the time limit: signal, save, requeue, resume ------------------------
"$exe" "${train[@]}" --steps 6 --csv "$tmp/cal.csv" > "$tmp/log/cal.log" 2>&1 || bad "calibration run exited $?"
ms=$(tail -n +2 "$tmp/cal.csv" | awk -F, '$6 == "steady" { print $3 }' | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
[[ $ms =~ ^[0-9]+(\.[0-9]+)?$ ]] || { bad "no step time in the calibration run: $(cat "$tmp/log/cal.log")"; exit 1; }
steps=$(awk -v ms="$ms" 'BEGIN { n = int(50000 / ms) + 1; if (n < 20) n = 20; if (n > 3000) n = 3000; print n }')
log "step $ms ms: $steps steps (about 50 s)"
"$exe" "${train[@]}" --steps "$steps" --csv "$tmp/ref.csv" > "$tmp/log/ref.log" 2>&1 || bad "reference run exited $?"
want=$(tail -n +2 "$tmp/ref.csv" | cut -d, -f1,2)
log "uninterrupted run: $(echo "$want" | wc -l) steps, final $(echo "$want" | tail -n 1)"

mkdir -p "$tmp/job/limit"
id=$(cd "$tmp/job" && TSR_GPT2=$exe TSR_CSV_DIR=$tmp/job/limit sbatch --parsable --time=1 --signal=B:USR1@55 \
     --output="$tmp/job/limit.out" "$script" "$tmp/job/limit.state" "${train[@]}" --steps "$steps" 2>&1)
[[ $id =~ ^[0-9]+$ ]] || { bad "sbatch: $id"; exit 1; }
end=$(wait_job "$id" 200)
restarts=$(job_field "$id" Restarts)
log "job $id: $end, $restarts requeue(s), exit $(job_field "$id" ExitCode)"
[ "$end" = COMPLETED ] && ok || bad "time-limited job $id ended $end"
[[ $restarts =~ ^[1-9][0-9]*$ ]] && ok || bad "job $id was not requeued (Restarts=$restarts): the signal did not stop it"
grep -q "USR1 at" "$tmp/job/limit.out" && grep -q "resuming from" "$tmp/job/limit.out" && ok ||
  bad "no USR1 and resume in the job's output"
got=$(losses "$tmp/job/limit")
[ -n "$want" ] && [ "$got" = "$want" ] && ok ||
  bad "losses of the requeued job differ from the uninterrupted run's: $(diff <(echo "$want") <(echo "$got") | head -n 6)"
grep "interrupted\|resuming\|requeueing" "$tmp/job/limit.out" | sed 's/^/    /'

# ---- 2. mpirun as the launcher, USR1 from scancel ---------------------------
if [ -n "$mpirun" ] && command -v "$mpirun" > /dev/null; then
  mkdir -p "$tmp/job/mpi"
  # 40 steps of the reference: stopped after its first 2 with a signal,
  # resumed (with 8, about 0.6 s, a loaded machine finished the run before
  # the signal went through scancel, slurmd and mpirun)
  mpi_steps=40
  id=$(cd "$tmp/job" && TSR_GPT2=$exe TSR_LAUNCH=mpirun TSR_CSV_DIR=$tmp/job/mpi sbatch --parsable --time=5 \
       --output="$tmp/job/mpi.out" "$script" "$tmp/job/mpi.state" "${train[@]}" --steps $mpi_steps 2>&1)
  [[ $id =~ ^[0-9]+$ ]] || { bad "sbatch: $id"; exit 1; }
  for _ in $(seq 120); do
    [ "$(cat "$tmp"/job/mpi/steps-*.csv 2> /dev/null | grep -c '^[0-9]')" -ge 2 ] && break; sleep 0.5
  done
  scancel --batch --signal=USR1 "$id" || bad "scancel --signal=USR1 $id failed"
  end=$(wait_job "$id" 120)
  restarts=$(job_field "$id" Restarts)
  log "mpirun job $id: $end, $restarts requeue(s)"
  [ "$end" = COMPLETED ] && [[ $restarts =~ ^[1-9][0-9]*$ ]] && ok || bad "mpirun job $id: $end, Restarts=$restarts"
  got=$(losses "$tmp/job/mpi")
  [ "$got" = "$(echo "$want" | head -n $mpi_steps)" ] && ok ||
    bad "losses of the mpirun job differ: $(diff <(echo "$want" | head -n $mpi_steps) <(echo "$got") | head -n 6)"
fi

# ---- 3. bad inputs: a message, no run ----------------------------------------
bad_job() { # bad_job NAME PATTERN env... -- args...
  local name=$1 pattern=$2 envs=() args=()
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  id=$(cd "$tmp/job" && env TSR_GPT2="$exe" "${envs[@]}" sbatch --parsable --time=1 --output="$tmp/job/$name.out" \
       "$script" "$@" 2>&1)
  [[ $id =~ ^[0-9]+$ ]] || { bad "sbatch: $id"; return; }
  end=$(wait_job "$id" 30)
  if [ "$end" = FAILED ] && grep -q -- "$pattern" "$tmp/job/$name.out" && ! grep -q "^runtime:" "$tmp/job/$name.out"; then ok
  else bad "$name: job $end, output: $(cat "$tmp/job/$name.out")"; fi
}
bad_job requeues "TSR_MAX_REQUEUES" 'TSR_MAX_REQUEUES=1;reboot' -- "$tmp/job/b.state" --steps 1
bad_job save "passes --save" -- "$tmp/job/b.state" --save "$tmp/job/other.state"
bad_job launch "TSR_LAUNCH" 'TSR_LAUNCH=$(touch x)' -- "$tmp/job/b.state" --steps 1
bad_job octal "SLURM_CPUS_PER_TASK\|cores per rank" TSR_CPUS_PER_RANK=08 -- "$tmp/job/b.state" --steps 1
[ ! -e "$tmp/job/b.state" ] && [ ! -e "$tmp/job/x" ] && ok || bad "a refused job left a state or ran a command"
