#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# weft — two hosts over real TCP: a server and a client, each in a network
# namespace of its own, joined by a veth pair (10.91.0.1/24 and .2/24).
# weft_netns_peer exchanges messages, fi_write / fi_read and fi_fetch_atomic
# between the two addresses, over FI_EP_RDM and then FI_EP_MSG endpoints of
# the tcp provider. FI_TCP_IFACE names each side's veth, so interface
# selection must pick it.
#
# Then a host that crashes and comes back at the same address (FI_EP_RDM):
# the server sends to a peer at 10.91.0.2, the link is cut, the peer killed
# and its namespace replaced (so no end of stream ever reaches the server),
# and the new peer, at the same address and port, speaks first: the server,
# its connection to the dead peer still looking established, must serve it.
#
#   tests/netns/run.sh <build dir>
#
# Exit status: 0 all well, 1 a failure, 77 (skip) when namespaces or veth
# links cannot be made here (not root, no CAP_SYS_ADMIN, no `ip`).
set -u

build=${1:?usage: run.sh <build dir>}
peer=
for p in "$build/tests/weft_netns_peer" "$build/weft_netns_peer"; do
  [ -x "$p" ] && peer=$p && break
done
[ -n "$peer" ] || { echo "run.sh: no weft_netns_peer under $build" >&2; exit 1; }

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "not root: network namespaces cannot be created"
command -v ip >/dev/null || skip "no \`ip\` tool (iproute2)"

ns_a=weft-srv-$$
ns_b=weft-cli-$$
ns_c=weft-cli2-$$
work=$(mktemp -d)
server_pid=
peer_pid=
cleanup() {
  [ -n "$server_pid" ] && kill -9 "$server_pid" 2>/dev/null
  [ -n "$peer_pid" ] && kill -9 "$peer_pid" 2>/dev/null
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
  ip netns del "$ns_c" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

ip netns add "$ns_a" 2>"$work/err" || skip "cannot create a network namespace: $(cat "$work/err")"
ip netns add "$ns_b" 2>"$work/err" || skip "cannot create a network namespace: $(cat "$work/err")"
ip link add veth-srv netns "$ns_a" type veth peer name veth-cli netns "$ns_b" 2>"$work/err" ||
  skip "cannot create a veth pair: $(cat "$work/err")"
set -e
ip -n "$ns_a" addr add 10.91.0.1/24 dev veth-srv
ip -n "$ns_b" addr add 10.91.0.2/24 dev veth-cli
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set veth-srv up
ip -n "$ns_b" link set veth-cli up
set +e

# The link is up when the client reaches the server's address.
for _ in $(seq 50); do
  ip netns exec "$ns_b" ping -c1 -W1 10.91.0.1 >/dev/null 2>&1 && break
  command -v ping >/dev/null || { sleep 0.5; break; }
  sleep 0.1
done

status=0
port=7471
for type in rdm msg; do
  ready=$work/ready-$type
  ip netns exec "$ns_a" env FI_TCP_IFACE=veth-srv "$peer" server "$type" 10.91.0.1 "$port" \
    "$ready" &
  server_pid=$!
  for _ in $(seq 100); do
    [ -e "$ready" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
  done
  if [ ! -e "$ready" ]; then
    echo "FAIL ($type): the server did not start"
    status=1
  else
    timeout 50 ip netns exec "$ns_b" env FI_TCP_IFACE=veth-cli "$peer" client "$type" \
      10.91.0.2 "$port" 10.91.0.1
    client=$?
    [ "$client" = 0 ] || { echo "FAIL ($type): client exit status $client"; status=1; }
  fi
  # The server ends once it has judged the client's work (or fails).
  for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.05; done
  kill -9 "$server_pid" 2>/dev/null
  wait "$server_pid"
  server=$?
  server_pid=
  [ "$server" = 0 ] || { echo "FAIL ($type): server exit status $server"; status=1; }
  port=$((port + 1))
done

# A host that crashes and comes back.
crash=$work/crash
mkdir -p "$crash"
ip netns exec "$ns_a" env FI_TCP_IFACE=veth-srv "$peer" crash-a rdm 10.91.0.1 7481 \
  10.91.0.2 7482 "$crash" &
server_pid=$!
ip netns exec "$ns_b" env FI_TCP_IFACE=veth-cli "$peer" crash-b rdm 10.91.0.2 7482 \
  10.91.0.1 7481 "$crash" &
peer_pid=$!
for _ in $(seq 200); do
  [ -e "$crash/b-pinged" ] && break
  kill -0 "$server_pid" 2>/dev/null && kill -0 "$peer_pid" 2>/dev/null || break
  sleep 0.05
done
if [ ! -e "$crash/b-pinged" ]; then
  echo "FAIL (crash): the first peer never got the server's message"
  status=1
else
  # The link goes first, so the dying peer's end of stream reaches no one;
  # deleting one end of a veth pair deletes both.
  ip -n "$ns_a" link del veth-srv
  kill -9 "$peer_pid"; wait "$peer_pid" 2>/dev/null; peer_pid=
  ip netns del "$ns_b"
  set -e
  ip netns add "$ns_c"
  ip link add veth-srv netns "$ns_a" type veth peer name veth-cli netns "$ns_c"
  ip -n "$ns_a" addr add 10.91.0.1/24 dev veth-srv
  ip -n "$ns_c" addr add 10.91.0.2/24 dev veth-cli
  ip -n "$ns_c" link set lo up
  ip -n "$ns_a" link set veth-srv up
  ip -n "$ns_c" link set veth-cli up
  set +e
  # A short connection deadline: refused, the new peer would wait for a
  # connection from the server that never comes, and fail with FI_ETIMEDOUT.
  timeout 50 ip netns exec "$ns_c" env FI_TCP_IFACE=veth-cli FI_TCP_CONN_TIMEOUT=4000 "$peer" \
    crash-b2 rdm 10.91.0.2 7482 10.91.0.1 7481 "$crash"
  rc=$?
  [ "$rc" = 0 ] || { echo "FAIL (crash): the peer that came back: exit status $rc"; status=1; }
fi
for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.05; done
kill -9 "$server_pid" 2>/dev/null
wait "$server_pid"
rc=$?
server_pid=
[ "$rc" = 0 ] || { echo "FAIL (crash): server exit status $rc"; status=1; }

# A host that goes silent: its link cut while its process lives on, so no
# end of stream and no reset ever arrive. With FI_TCP_KEEPALIVE=1 a send
# waiting for its delivery acknowledgement fails within seconds.
silent=$work/silent
mkdir -p "$silent"
ip netns exec "$ns_c" env FI_TCP_IFACE=veth-cli FI_TCP_KEEPALIVE=1 "$peer" silent-b rdm \
  10.91.0.2 7492 10.91.0.1 7491 "$silent" &
peer_pid=$!
timeout 45 ip netns exec "$ns_a" env FI_TCP_IFACE=veth-srv FI_TCP_KEEPALIVE=1 "$peer" silent-a \
  rdm 10.91.0.1 7491 10.91.0.2 7492 "$silent" &
server_pid=$!
for _ in $(seq 400); do
  [ -e "$silent/b-pinged" ] && break
  kill -0 "$server_pid" 2>/dev/null && kill -0 "$peer_pid" 2>/dev/null || break
  sleep 0.05
done
if [ -e "$silent/b-pinged" ]; then
  ip -n "$ns_c" link set veth-cli down
  touch "$silent/cut"
else
  echo "FAIL (silent): the peer never got the first message"
  status=1
fi
wait "$server_pid"
rc=$?
server_pid=
[ "$rc" = 0 ] || { echo "FAIL (silent): exit status $rc"; status=1; }
kill -9 "$peer_pid" 2>/dev/null; wait "$peer_pid" 2>/dev/null; peer_pid=

[ "$status" = 0 ] && echo "PASS: rdm and msg between two namespaces, a host that came back, a host that went silent"
exit "$status"
