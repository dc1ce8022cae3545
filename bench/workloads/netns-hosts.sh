#!/bin/sh
# Two simulated hosts for multi-node MPI on one machine (host-notes.md section 2): network
# namespaces n1 (10.99.0.1) and n2 (10.99.0.2) on the bridge br-mpi (10.99.0.254), each with
# an interface named mpi0. mpirun stays in the root namespace and reaches the "hosts"
# through this script as its rsh agent.
#   netns-hosts.sh up          create them (idempotent)
#   netns-hosts.sh down        remove everything 'up' made (idempotent)
#   netns-hosts.sh agent HOST COMMAND...   the fake ssh: runs COMMAND in HOST's namespace
#   netns-hosts.sh status      exit 0 when both namespaces and the bridge are there
# Use with:
#   mpirun -np 2 -H 10.99.0.1,10.99.0.2 --bind-to none \
#     --mca plm_rsh_agent "/path/netns-hosts.sh agent" --mca oob_tcp_if_include 10.99.0.0/24 \
#     --mca btl self,vader,tcp --mca btl_tcp_if_include 10.99.0.0/24 PROGRAM
# --bind-to none matters: otherwise each orted binds its rank to core 0 and both "hosts"
# share one CPU (about 4 ms per message). Root only (ip netns needs CAP_SYS_ADMIN).
set -eu

bridge=br-mpi
subnet=10.99.0

usage() { sed -n '2,17s/^# \{0,1\}//p' "$0"; }
die() { echo "netns-hosts: $*" >&2; exit 1; }
need_root() { [ "$(id -u)" = 0 ] || die "$1 needs root (ip netns, veth and bridge creation); run it as root"; }
have_ns() { ip netns list 2>/dev/null | grep -qw "^$1"; }

case ${1:-} in
up)
  need_root up
  # Without iproute2 there are no "hosts": the suite's skip (exit 77), not a failure.
  command -v ip >/dev/null || { echo "skip: ip (iproute2) not found: no network-namespace hosts" >&2; exit 77; }
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    ip link add "$bridge" type bridge
    ip addr add "$subnet.254/24" dev "$bridge"
  fi
  ip link set "$bridge" up
  for i in 1 2; do
    have_ns "n$i" || ip netns add "n$i"
    if ! ip -n "n$i" link show mpi0 >/dev/null 2>&1; then
      ip link del "veth$i" 2>/dev/null || true # a half-made pair from an interrupted run
      ip link add "veth$i" type veth peer name mpi0 netns "n$i"
    fi
    ip link set "veth$i" master "$bridge" up
    ip -n "n$i" addr replace "$subnet.$i/24" dev mpi0
    ip -n "n$i" link set mpi0 up
    ip -n "n$i" link set lo up
  done
  echo "netns-hosts: n1=$subnet.1 n2=$subnet.2 on $bridge" >&2
  ;;
down)
  need_root down
  for i in 1 2; do
    if have_ns "n$i"; then ip netns del "n$i"; fi
    ip link del "veth$i" 2>/dev/null || true
  done
  if ip link show "$bridge" >/dev/null 2>&1; then ip link del "$bridge"; fi
  ;;
status)
  have_ns n1 && have_ns n2 && ip link show "$bridge" >/dev/null 2>&1
  ;;
agent)
  # Called by Open MPI's plm_rsh as: agent HOST orted ARGS... The arguments form one shell
  # command line that the remote side evaluates, as ssh does.
  [ $# -ge 3 ] || die "agent: usage: agent HOST COMMAND..."
  need_root agent
  host=$2
  shift 2
  case $host in
    n1|"$subnet.1") ns=n1 ;;
    n2|"$subnet.2") ns=n2 ;;
    *) echo "netns-hosts agent: unknown host $host (n1, n2, $subnet.1, $subnet.2)" >&2; exit 255 ;;
  esac
  # Its own UTS namespace gives each "host" a distinct hostname.
  exec ip netns exec "$ns" unshare --uts sh -c "hostname $ns; $*"
  ;;
-h|--help|help) usage ;;
*) usage >&2; exit 2 ;;
esac
