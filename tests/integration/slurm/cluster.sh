#!/bin/bash
# A real Slurm cluster of two nodes on this machine, for the Slurm tests (host-notes
# section 10's recipe): network namespaces ctl (slurmctld, the clients), n1 and n2 (a slurmd
# each, with its own hostname and /etc/hosts), munge, ctr's SPANK plugin in plugstack.conf.
#   cluster.sh up DIR PLUGIN CTR   bring it up under DIR (as root), the plugin running CTR;
#                              DIR/skip names why not
#   cluster.sh down DIR        stop the daemons, delete the namespaces, remove DIR
#   cluster.sh client DIR USER CMD...   run a client command (srun, sbatch, ...) in ctl as USER
# `up` always exits 0: a machine that cannot run the cluster gets DIR/skip with the
# reason, and each Slurm test skips with it.
set -eEuo pipefail  # -E: the ERR trap of up() holds in the functions it calls
action=$1 dir=$2

# nsrun NS CMD...: CMD in network namespace NS, own UTS and mount namespaces; there
# DIR/node-local is NS's own directory DIR/tmp/NS (1777), the node's local disk: what ctr
# keeps per node (ctr.conf 'image cache dir = DIR/node-local/cache-%u') stays on that node.
nsrun() {
  local ns=$1
  shift
  nsenter --net=/run/netns/"$ns" unshare --uts --mount --propagation private sh -c \
    'mount --bind "$1" /etc/hosts && mount --bind "$3" "$4" && hostname "$2" && shift 4 && exec "$@"' \
    sh "$dir/hosts" "$ns" "$dir/tmp/$ns" "$dir/node-local" "$@"
}

down() {
  local f pid ns c
  # The daemons remove their pid files as they end: read them all first.
  local pids=""
  for f in "$dir"/run/*.pid; do
    pid=$(cat "$f" 2>/dev/null) && pids="$pids $pid"
  done
  for pid in $pids; do kill "$pid" 2>/dev/null || true; done
  for pid in $pids; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
  done
  # What the daemons leave when they go first: the slurmstepds of a job that still ran (a
  # test that failed mid-job), and their tasks. Everything in the nodes' namespaces goes.
  for ns in n1 n2 ctl; do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
  done
  for ns in n1 n2 ctl; do ip netns del "$ns" 2>/dev/null || true; done
  for c in /sys/fs/cgroup/*/slurm_n1 /sys/fs/cgroup/*/slurm_n2; do
    [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  rm -rf "$dir"
}

skip() {
  mkdir -p "$dir"
  echo "$*" > "$dir/skip"
  echo "SKIP (cluster): $*"
  exit 0
}

up() {
  local plugin=$1 ctr=$2 bin n
  [ "$(id -u)" = 0 ] || skip "needs root to start slurmctld, slurmd and munged"
  for bin in slurmctld slurmd srun sbatch munged ip nsenter; do
    command -v "$bin" >/dev/null || skip "$bin is not installed (apt-get install slurmctld slurmd slurm-client munge)"
  done
  [ -f "$plugin" ] || skip "ctr's SPANK plugin was not built ($plugin: libslurm-dev missing at configure time)"
  for n in ctl n1 n2; do
    ! ip netns list | grep -qw "$n" || skip "network namespace $n exists already (another cluster runs?)"
  done
  rm -rf "$dir"
  mkdir -p "$dir"/{etc,run,log,state,node-local} "$dir"/spool/{n1,n2} "$dir"/tmp/{ctl,n1,n2}
  chmod 1777 "$dir"/tmp/{ctl,n1,n2}
  trap 'echo "cluster.sh: bringing the cluster up failed at line $LINENO" >&2; down; skip "the cluster could not be brought up (see the lines above)"' ERR
  chmod 755 "$dir" "$dir/etc"
  printf '127.0.0.1 localhost\n10.222.0.1 ctl\n10.222.0.11 n1\n10.222.0.12 n2\n' > "$dir/hosts"
  chmod 644 "$dir/hosts"
  ip netns add ctl
  ip -n ctl link add br0 type bridge
  ip -n ctl addr add 10.222.0.1/24 dev br0
  ip -n ctl link set br0 up
  ip -n ctl link set lo up
  local i=10
  for n in n1 n2; do
    i=$((i + 1))
    ip netns add "$n"
    ip -n ctl link add "v$n" type veth peer name eth0 netns "$n"
    ip -n ctl link set "v$n" master br0 up
    ip -n "$n" addr add "10.222.0.$i/24" dev eth0
    ip -n "$n" link set eth0 up
    ip -n "$n" link set lo up
    mkdir -p "$dir/tmp/$n"
    chmod 1777 "$dir/tmp/$n"
  done
  # Process tracking by cgroup, as most sites run Slurm (a job's steps and the job itself
  # end by their freezer cgroups), where the v1 freezer is mounted: Slurm 22.05's cgroup/v2
  # plugin needs systemd. Else (or CTR_SLURM_PROCTRACK=linuxproc) by the process tree.
  # DIR/proctrack names the one in use.
  local cgroup_conf="CgroupPlugin=cgroup/v1" proctrack=linuxproc track="ProctrackType=proctrack/linuxproc
TaskPlugin=task/none"
  if [ "${CTR_SLURM_PROCTRACK:-cgroup}" = cgroup ] &&
    grep -qE '^([^ ]+ ){4}/sys/fs/cgroup/freezer .* - cgroup ' /proc/self/mountinfo; then
    proctrack=cgroup
    track="ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
PrologFlags=contain"
  fi
  echo "$proctrack" > "$dir/proctrack"
  cat > "$dir/etc/slurm.conf" <<CONF
ClusterName=ctrtest
SlurmctldHost=ctl(10.222.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
TmpFS=$dir/tmp/%n
SlurmdParameters=config_overrides
MailProg=/bin/true
$track
PlugStackConfig=$dir/etc/plugstack.conf
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
KillWait=5
GresTypes=gpu
NodeName=n1 NodeAddr=10.222.0.11 NodeHostname=n1 CPUs=2 RealMemory=1000 Gres=gpu:1 State=UNKNOWN
NodeName=n2 NodeAddr=10.222.0.12 NodeHostname=n2 CPUs=2 RealMemory=1000 Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=10 State=UP OverSubscribe=YES
CONF
  echo "$cgroup_conf" > "$dir/etc/cgroup.conf"
  # One "GPU" per node, so that steps can be allocated one (--gpus): Slurm needs a device
  # file for it and this machine has no GPU, so /dev/null stands in (nothing opens it; the
  # plugin's GPU default is tested with an NVIDIA driver fixture through CTR_HOST_ROOT).
  echo "Name=gpu File=/dev/null" > "$dir/etc/gres.conf"
  # The build tree's ctr-slurm-entrypoint (--container-entrypoint) is beside its ctr.
  echo "required $plugin ctr=$ctr entrypoint=$(dirname "$ctr")/ctr-slurm-entrypoint" > "$dir/etc/plugstack.conf"
  chmod 644 "$dir"/etc/*
  mkdir -p /run/munge
  chown munge:munge /run/munge
  # Debian's munge makes its key when installed; where it did not, one owned by munge
  # (munged refuses any other).
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null || create-munge-key -f
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
  fi
  if ! pgrep -x munged >/dev/null; then
    runuser -u munge -- munged --pid-file=/run/munge/munged.pid
    cp /run/munge/munged.pid "$dir/run/munged.pid" 2>/dev/null || true
  fi
  export SLURM_CONF=$dir/etc/slurm.conf
  nsrun ctl slurmctld -i -f "$SLURM_CONF"
  for n in n1 n2; do nsrun "$n" slurmd -f "$SLURM_CONF" -N "$n"; done
  for _ in $(seq 200); do
    if [ "$(client sinfo -h -o '%t' -N 2>/dev/null | grep -c idle)" = 2 ]; then
      echo "cluster up (proctrack/$(cat "$dir/proctrack")): $(client sinfo -h -N -o '%N %t' | tr '\n' ' ')"
      return 0
    fi
    sleep 0.1
  done
  echo "the cluster did not come up; slurmctld's log:" >&2
  tail -20 "$dir/log/slurmctld.log" >&2 || true
  tail -20 "$dir"/log/slurmd-*.log >&2 || true
  down
  skip "slurmctld and the two slurmd did not come up within 20 s (see the log above)"
}

client() {  # client [USER] CMD...
  SLURM_CONF=$dir/etc/slurm.conf nsenter --net=/run/netns/ctl "$@"
}

case $action in
  up)
    # A node whose cgroups Slurm's plugins cannot use (a controller it needs missing) gets
    # the cluster with process tracking by the process tree instead, said in the output.
    ( up "$3" "$4" )
    if [ -e "$dir/skip" ] && [ "${CTR_SLURM_PROCTRACK:-cgroup}" = cgroup ] && grep -q "come up\|brought up" "$dir/skip"; then
      echo "cluster.sh: not up with proctrack/cgroup ($(cat "$dir/skip")): trying proctrack/linuxproc"
      rm -rf "$dir"
      CTR_SLURM_PROCTRACK=linuxproc up "$3" "$4"
    fi ;;
  down) down ;;
  client) shift 2; client "$@" ;;
  *) echo "usage: cluster.sh up DIR PLUGIN | down DIR | client DIR CMD..." >&2; exit 2 ;;
esac
