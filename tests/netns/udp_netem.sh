#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# weft — udp FI_EP_RDM between two hosts over a hostile network: a server
# and a client, each in a network namespace of its own, joined by a veth
# pair whose both ends `tc netem` makes lose 5% of packets, reorder 10%,
# duplicate 1% and delay them by 2 ms (issue 16's network).
# weft_netns_peer (WEFT_NETNS_PROV=udp, WEFT_NETNS_BIG=1) echoes messages
# from 0 B to 16 MiB byte for byte, streams 200 sequenced messages that must
# arrive once each and in order with nothing more after them, writes and
# reads a registered window and runs 100 fetch-adds, whose results must
# each see all the ones before.
#
#   tests/netns/udp_netem.sh <build dir>
#
# Exit status: 0 all well, 1 a failure, 77 (skip) when namespaces, veth
# links or netem cannot be had here (not root, no `ip` or `tc`, no sch_netem
# in the kernel). WEFT_NETEM_OPTIONAL=1 runs over the plain veth instead of
# skipping when netem is missing (to check the rest of this script).
set -u

build=${1:?usage: udp_netem.sh <build dir>}
peer=
for p in "$build/tests/weft_netns_peer" "$build/weft_netns_peer"; do
  [ -x "$p" ] && peer=$p && break
done
[ -n "$peer" ] || { echo "udp_netem.sh: no weft_netns_peer under $build" >&2; exit 1; }

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "not root: network namespaces cannot be created"
command -v ip >/dev/null || skip "no \`ip\` tool (iproute2)"
command -v tc >/dev/null || skip "no \`tc\` tool (iproute2)"

ns_a=weft-usrv-$$
ns_b=weft-ucli-$$
work=$(mktemp -d)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill -9 "$server_pid" 2>/dev/null
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

ip netns add "$ns_a" 2>"$work/err" || skip "cannot create a network namespace: $(cat "$work/err")"
ip netns add "$ns_b" 2>"$work/err" || skip "cannot create a network namespace: $(cat "$work/err")"
ip link add uveth-srv netns "$ns_a" type veth peer name uveth-cli netns "$ns_b" 2>"$work/err" ||
  skip "cannot create a veth pair: $(cat "$work/err")"
set -e
ip -n "$ns_a" addr add 10.92.0.1/24 dev uveth-srv
ip -n "$ns_b" addr add 10.92.0.2/24 dev uveth-cli
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set uveth-srv up
ip -n "$ns_b" link set uveth-cli up
set +e

netem="delay 2ms loss 5% reorder 10% duplicate 1%"
shaped=yes
for pair in "$ns_a uveth-srv" "$ns_b uveth-cli"; do
  set -- $pair
  # shellcheck disable=SC2086
  if ! ip netns exec "$1" tc qdisc add dev "$2" root netem $netem 2>"$work/err"; then
    [ "${WEFT_NETEM_OPTIONAL:-0}" = 1 ] || skip "tc netem is not available here: $(cat "$work/err")"
    shaped=no
  fi
done
echo "network: ${netem} on both ends: ${shaped}"

status=0
port=7481
ready=$work/ready
ip netns exec "$ns_a" env FI_UDP_IFACE=uveth-srv WEFT_NETNS_PROV=udp WEFT_NETNS_BIG=1 \
  "$peer" server rdm 10.92.0.1 "$port" "$ready" &
server_pid=$!
for _ in $(seq 100); do
  [ -e "$ready" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.05
done
if [ ! -e "$ready" ]; then
  echo "FAIL: the udp rdm server never got ready"
  status=1
else
  ip netns exec "$ns_b" env FI_UDP_IFACE=uveth-cli WEFT_NETNS_PROV=udp WEFT_NETNS_BIG=1 \
    timeout 240 "$peer" client rdm 10.92.0.2 "$port" 10.92.0.1 || status=1
fi
wait "$server_pid" || status=1
server_pid=
if [ "$shaped" = yes ]; then
  for pair in "$ns_a uveth-srv" "$ns_b uveth-cli"; do
    set -- $pair
    ip netns exec "$1" tc -s qdisc show dev "$2" | sed -n '1,3p'
  done
fi
[ "$status" = 0 ] && echo "PASS: udp rdm across a lossy, reordering, duplicating link"
exit "$status"
