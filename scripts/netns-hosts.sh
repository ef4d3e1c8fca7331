#!/bin/sh
# Hosts made on this machine for MPI across a real network stack (docs/mpi.md,
# "Hosts as network namespaces"; as root, iproute2):
#
#   netns-hosts.sh up PREFIX N       N namespaces PREFIX-h0..h<N-1>, each with
#                                    eth0 = 10.77.0.<i+1>/24, joined by a bridge
#                                    in PREFIX-sw (veth pairs)
#   netns-hosts.sh down PREFIX       end the processes left in them, remove them
#   netns-hosts.sh shape PREFIX RATE tbf at RATE (e.g. 1gbit) on every host's
#                                    eth0 egress; RATE "none" removes it
#   netns-hosts.sh agent HOST CMD... Open MPI's launch agent (plm_rsh_agent),
#                                    standing in for ssh: runs CMD, a remote
#                                    shell's command line, in the namespace of
#                                    HOST (10.77.0.<i+1>), PREFIX from
#                                    $PARLE_NETNS_PREFIX
set -eu
SUBNET=10.77.0

ns_host() { # HOST -> the namespace's index
    case $1 in
    "$SUBNET".*) echo $((${1##*.} - 1)) ;;
    *) echo "netns-hosts.sh: $1 is not a host of $SUBNET.0/24" >&2; exit 1 ;;
    esac
}

hosts() { # PREFIX: the host namespaces that exist
    ip netns list | sed -n "s/^\($1-h[0-9]*\)\( .*\)\{0,1\}$/\1/p"
}

case ${1:-} in
up)
    p=$2 n=$3
    ip netns add "$p-sw"
    ip -n "$p-sw" link add br0 type bridge
    ip -n "$p-sw" link set br0 up
    i=0
    while [ "$i" -lt "$n" ]; do
        ip netns add "$p-h$i"
        ip link add eth0 netns "$p-h$i" type veth peer name "h$i" netns "$p-sw"
        ip -n "$p-sw" link set "h$i" master br0
        ip -n "$p-sw" link set "h$i" up
        ip -n "$p-h$i" addr add "$SUBNET.$((i + 1))/24" dev eth0
        ip -n "$p-h$i" link set eth0 up
        ip -n "$p-h$i" link set lo up
        i=$((i + 1))
    done
    ;;
down)
    p=$2
    for ns in $(hosts "$p") "$p-sw"; do
        [ -e "/run/netns/$ns" ] || continue
        for pid in $(ip netns pids "$ns"); do
            kill -KILL "$pid" 2>/dev/null || true
        done
        ip netns del "$ns"
    done
    ;;
shape)
    p=$2 rate=$3
    for ns in $(hosts "$p"); do
        tc -n "$ns" qdisc del dev eth0 root 2>/dev/null || true
        # burst: at least rate x 1 ms (a timer tick's worth), or the
        # shaper cannot reach its rate.
        [ "$rate" = none ] ||
            tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst 2mb latency 100ms
    done
    ;;
agent)
    host=$2
    shift 2
    exec ip netns exec "${PARLE_NETNS_PREFIX:?}-h$(ns_host "$host")" sh -c "$*"
    ;;
*)
    echo "usage: netns-hosts.sh up PREFIX N | down PREFIX | shape PREFIX RATE | agent HOST CMD..." >&2
    exit 2
    ;;
esac
