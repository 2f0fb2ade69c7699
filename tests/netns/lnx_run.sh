#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# weft — lnx (fi_lnx(7)) across processes, with weft_lnx_peer (lnx_peer.cpp):
#
#  1. one host: 4 ranks in this namespace, lnx asked for by name in the
#     hints (FI_LNX_PROV_LINKS unset); then 3 ranks with FI_PROVIDER=lnx and
#     FI_LNX_PROV_LINKS=shm+tcp:lo. Every route must go through shm. Needs
#     no privilege.
#  2. two hosts: namespaces A and B joined by a veth pair (10.92.0.1/24 and
#     .2/24: not run.sh's subnet or names, so both tests may run at once),
#     ranks 0 and 1 in A, 2 and 3 in B, FI_LNX_PROV_LINKS=shm+tcp:<veth> on
#     each side. Pairs inside a namespace must go through shm, pairs across
#     through tcp; FI_AV_MAP this time.
#  4. (below 3) two rails: a second veth pair, FI_LNX_PROV_LINKS=
#     shm+tcp:<veth>,<veth2> on each side; pairs across use the rail both
#     their ends chose.
#  3. a peer killed mid-transfer, in the same layout: rank 3 (B) exchanges
#     1 MiB messages both ways with all others (rank 2 through shm, ranks 0
#     and 1 through tcp) and is SIGKILLed; the survivors' sends to it must
#     fail, no send or receive may hang, and the survivors must still talk
#     to each other.
#
# Routes are read from lnx's FI_LOG_LEVEL=info lines "fi_addr N: through P",
# each process saying which rank is which fi_addr on its stdout.
#
#   tests/netns/lnx_run.sh <build dir>
#
# Exit status: 0 all well, 1 a failure, 77 (skip) when the one-host part
# passed but namespaces or veth links cannot be made here (not root, no `ip`).
set -u

build=${1:?usage: lnx_run.sh <build dir>}
peer=
for p in "$build/tests/weft_lnx_peer" "$build/weft_lnx_peer"; do
  [ -x "$p" ] && peer=$p && break
done
[ -n "$peer" ] || { echo "lnx_run.sh: no weft_lnx_peer under $build" >&2; exit 1; }

ns_a=weft-lnx-a-$$
ns_b=weft-lnx-b-$$
veth_a=wlnx-a
veth_b=wlnx-b
work=$(mktemp -d)
pids=()
cleanup() {
  # Each rank runs under `timeout`, which leads a process group of its own.
  for p in "${pids[@]}"; do kill -9 -- "-$p" "$p" 2>/dev/null; done
  if [ -n "${victim_pid:-}" ]; then
    kill -9 "$victim_pid" 2>/dev/null
    # A killed process leaves its shm region (>100 MB) behind until the next
    # shm endpoint on this host reclaims it: not left to chance here.
    rm -f /dev/shm/weft-shm-*-"$victim_pid"-* /dev/shm/weft-shmw-*-"$victim_pid"-*
  fi
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
  # LNX_RUN_KEEP=1 keeps every rank's output, for a diagnosis.
  if [ -n "${LNX_RUN_KEEP:-}" ]; then echo "outputs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

status=0
failures=0
fail() { echo "FAIL ($part): $*"; status=1; failures=$((failures + 1)); }

# Shows what a rank said, for a failure's diagnosis (its log without the
# lnx/shm/tcp info lines, which are many).
show() {
  local dir=$1 r=$2
  echo "---- rank $r stdout:"; cat "$dir/out.$r"
  echo "---- rank $r stderr:"; grep -v '<info>' "$dir/err.$r" | tail -20
}

# launch <dir> <rank> <nranks> <prefix...> -- <peer args...>: one rank in the
# background, bounded by `timeout`, its pid appended to pids.
launch() {
  local dir=$1 r=$2 n=$3; shift 3
  local prefix=()
  while [ "$1" != -- ]; do prefix+=("$1"); shift; done
  shift
  "${prefix[@]}" env FI_LOG_LEVEL=info LNX_PEER_TIMEOUT=20 timeout -k 5 40 \
    "$peer" "$r" "$n" "$dir" "$@" >"$dir/out.$r" 2>"$dir/err.$r" &
  pids+=($!)
}

# wait_all <dir> <ranks...>: each rank of `pids` (same order) must exit 0.
wait_all() {
  local dir=$1; shift
  local i=0 r rc
  for r in "$@"; do
    wait "${pids[$i]}"
    rc=$?
    if [ "$rc" != 0 ]; then
      if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        fail "rank $r hung (ended by timeout, status $rc)"
      else
        fail "rank $r: exit status $rc"
      fi
      show "$dir" "$r"
    fi
    i=$((i + 1))
  done
  pids=()
}

# check_route <dir> <rank> <peer rank> shm|tcp: rank's route to peer, from
# its "rank K is fi_addr N" line and lnx's "fi_addr N: through P" lines.
check_route() {
  local dir=$1 r=$2 k=$3 want=$4
  local fa
  fa=$(sed -n "s/^weft_lnx_peer $r: rank $k is fi_addr \([0-9]*\)\$/\1/p" "$dir/out.$r")
  if [ -z "$fa" ]; then fail "rank $r did not say which fi_addr rank $k is"; return; fi
  local got
  got=$(sed -n "s/.*<info> fi_addr $fa: through \([a-z]*\)\$/\1/p" "$dir/err.$r" | sort -u | tr '\n' ' ')
  [ "$got" = "$want " ] ||
    fail "rank $r reaches rank $k (fi_addr $fa) through '${got% }', expected $want"
}

# ---- 1. one host ------------------------------------------------------------------
part="one host"
dir=$work/one
mkdir -p "$dir"
start=$SECONDS
for r in 0 1 2 3; do launch "$dir" "$r" 4 -- table; done
wait_all "$dir" 0 1 2 3
for r in 0 1 2 3; do
  for k in 0 1 2 3; do check_route "$dir" "$r" "$k" shm; done
  grep -q 'through tcp' "$dir/err.$r" && fail "rank $r routed a peer through tcp"
done
dir=$work/one-env
mkdir -p "$dir"
for r in 0 1 2; do
  launch "$dir" "$r" 3 env FI_PROVIDER=lnx FI_LNX_PROV_LINKS=shm+tcp:lo -- table
done
wait_all "$dir" 0 1 2
for r in 0 1 2; do
  grep -q "lnx domain shm+tcp:lo," "$dir/out.$r" ||
    fail "rank $r did not open the link shm+tcp:lo (FI_LNX_PROV_LINKS)"
  for k in 0 1 2; do check_route "$dir" "$r" "$k" shm; done
  grep -q 'through tcp' "$dir/err.$r" && fail "rank $r routed a peer through tcp"
done
one_status=$status
[ "$status" = 0 ] &&
  echo "PASS (one host): 4 ranks by name, 3 by FI_PROVIDER=lnx, every route through shm, all data checked ($((SECONDS - start)) s)"

# ---- namespaces ---------------------------------------------------------------------
skip_ns() {
  echo "SKIP (two hosts, peer killed): $*"
  [ "$one_status" = 0 ] && exit 77
  exit 1
}
[ "$(id -u)" = 0 ] || skip_ns "not root: network namespaces cannot be created"
command -v ip >/dev/null || skip_ns "no \`ip\` tool (iproute2)"
ip netns add "$ns_a" 2>"$work/err" || skip_ns "cannot create a network namespace: $(cat "$work/err")"
ip netns add "$ns_b" 2>"$work/err" || skip_ns "cannot create a network namespace: $(cat "$work/err")"
ip link add "$veth_a" netns "$ns_a" type veth peer name "$veth_b" netns "$ns_b" 2>"$work/err" ||
  skip_ns "cannot create a veth pair: $(cat "$work/err")"
set -e
ip -n "$ns_a" addr add 10.92.0.1/24 dev "$veth_a"
ip -n "$ns_b" addr add 10.92.0.2/24 dev "$veth_b"
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "$veth_a" up
ip -n "$ns_b" link set "$veth_b" up
set +e
# wait_up <veth in A> <veth in B>: a veth must carry traffic before tcp's
# first connection: wait until both ends report the link up (no ping here
# necessarily).
wait_up() {
  for _ in $(seq 50); do
    ip -n "$ns_a" link show "$1" | grep -q 'state UP' &&
      ip -n "$ns_b" link show "$2" | grep -q 'state UP' && return
    sleep 0.1
  done
}
wait_up "$veth_a" "$veth_b"

in_a=(ip netns exec "$ns_a" env "FI_LNX_PROV_LINKS=shm+tcp:$veth_a")
in_b=(ip netns exec "$ns_b" env "FI_LNX_PROV_LINKS=shm+tcp:$veth_b")
side() { [ "$1" -lt 2 ] && echo a || echo b; }

# ---- 2. two hosts -----------------------------------------------------------------
part="two hosts"
dir=$work/two
mkdir -p "$dir"
start=$SECONDS
failures_before=$failures
launch "$dir" 0 4 "${in_a[@]}" -- map
launch "$dir" 1 4 "${in_a[@]}" -- map
launch "$dir" 2 4 "${in_b[@]}" -- map
launch "$dir" 3 4 "${in_b[@]}" -- map
wait_all "$dir" 0 1 2 3
for r in 0 1 2 3; do
  [ "$(side "$r")" = a ] && veth=$veth_a || veth=$veth_b
  grep -q "lnx domain shm+tcp:$veth," "$dir/out.$r" ||
    fail "rank $r did not open the link shm+tcp:$veth (FI_LNX_PROV_LINKS)"
  for k in 0 1 2 3; do
    [ "$(side "$r")" = "$(side "$k")" ] && want=shm || want=tcp
    check_route "$dir" "$r" "$k" "$want"
  done
done
[ "$failures" = "$failures_before" ] &&
  echo "PASS (two hosts): shm inside each namespace, tcp across, all data checked ($((SECONDS - start)) s)"

# ---- 3. a peer killed mid-transfer ------------------------------------------------
part="peer killed"
dir=$work/kill
mkdir -p "$dir"
start=$SECONDS
failures_before=$failures
launch "$dir" 0 4 "${in_a[@]}" -- table kill=3
launch "$dir" 1 4 "${in_a[@]}" -- table kill=3
launch "$dir" 2 4 "${in_b[@]}" -- table kill=3
launch "$dir" 3 4 "${in_b[@]}" -- table kill=3
victim_pid=
for _ in $(seq 300); do
  [ -s "$dir/victim.receiving" ] && victim_pid=$(cat "$dir/victim.receiving") && break
  kill -0 "${pids[3]}" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$victim_pid" ]; then
  fail "rank 3 never received from every rank"
  show "$dir" 3
else
  # Mid-transfer: the senders keep 4 MiB each outstanding to it.
  sleep 0.2
  kill -9 "$victim_pid"
fi
wait "${pids[3]}" 2>/dev/null
unset 'pids[3]'
wait_all "$dir" 0 1 2
for r in 0 1 2; do grep -h 'sends to killed rank' "$dir/out.$r"; done
check_route "$dir" 2 3 shm
check_route "$dir" 0 3 tcp
[ "$failures" = "$failures_before" ] &&
  echo "PASS (peer killed): every survivor's sends to the killed rank failed, none hung; the survivors still talk ($((SECONDS - start)) s)"

# ---- 4. two rails -------------------------------------------------------------------
# A second veth pair between the namespaces (10.93.0.1/24 and .2/24) and
# FI_LNX_PROV_LINKS=shm+tcp:<veth>,<veth2> on each side: pairs inside a
# namespace through shm, pairs across through tcp on one of the two rails,
# the same rail at both ends of each pair (fi_lnx(7)).
part="two rails"
dir=$work/rails
mkdir -p "$dir"
start=$SECONDS
failures_before=$failures
veth_a2=wlnx-a2
veth_b2=wlnx-b2
if ip link add "$veth_a2" netns "$ns_a" type veth peer name "$veth_b2" netns "$ns_b" 2>"$work/err" &&
   ip -n "$ns_a" addr add 10.93.0.1/24 dev "$veth_a2" &&
   ip -n "$ns_b" addr add 10.93.0.2/24 dev "$veth_b2" &&
   ip -n "$ns_a" link set "$veth_a2" up && ip -n "$ns_b" link set "$veth_b2" up; then
  wait_up "$veth_a2" "$veth_b2"
  rails_a=(ip netns exec "$ns_a" env "FI_LNX_PROV_LINKS=shm+tcp:$veth_a,$veth_a2")
  rails_b=(ip netns exec "$ns_b" env "FI_LNX_PROV_LINKS=shm+tcp:$veth_b,$veth_b2")
  launch "$dir" 0 4 "${rails_a[@]}" -- map
  launch "$dir" 1 4 "${rails_a[@]}" -- map
  launch "$dir" 2 4 "${rails_b[@]}" -- map
  launch "$dir" 3 4 "${rails_b[@]}" -- map
  wait_all "$dir" 0 1 2 3
  # rail_of <rank> <peer rank>: the rail rank's lnx chose for the peer.
  rail_of() {
    local fa
    fa=$(sed -n "s/^weft_lnx_peer $1: rank $2 is fi_addr \([0-9]*\)\$/\1/p" "$dir/out.$1")
    sed -n "s/.*<info> fi_addr $fa: rail \([0-9]*\) of 2, .*/\1/p" "$dir/err.$1" | sort -u
  }
  for r in 0 1 2 3; do
    [ "$(side "$r")" = a ] && want="shm+tcp:$veth_a,$veth_a2" || want="shm+tcp:$veth_b,$veth_b2"
    grep -q "lnx domain $want," "$dir/out.$r" || fail "rank $r did not open the link $want"
    for k in 0 1 2 3; do
      if [ "$(side "$r")" = "$(side "$k")" ]; then
        check_route "$dir" "$r" "$k" shm
        continue
      fi
      check_route "$dir" "$r" "$k" tcp
      mine=$(rail_of "$r" "$k")
      theirs=$(rail_of "$k" "$r")
      case $mine in 0 | 1) ;; *) fail "rank $r names no one rail for rank $k ('$mine')" ;; esac
      [ "$mine" = "$theirs" ] ||
        fail "ranks $r and $k chose different rails for each other ($mine, $theirs)"
    done
  done
  used=$(for r in 0 1; do for k in 2 3; do rail_of "$r" "$k"; done; done | sort -u | tr '\n' ' ')
  [ "$failures" = "$failures_before" ] &&
    echo "PASS (two rails): shm inside each namespace, tcp across on the rail both ends chose (rails used: ${used% }), all data checked ($((SECONDS - start)) s)"
else
  fail "cannot create the second veth pair: $(cat "$work/err")"
fi

[ "$status" = 0 ] && echo "PASS: lnx on one host, across two namespaces, with a peer killed, and on two rails"
exit "$status"
