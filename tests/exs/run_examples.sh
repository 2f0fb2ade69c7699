#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# libexs's example programs, run as a user would: exs_ping and exs_blast
# (client and server, both socket types, and -K over kernel sockets), and
# exs_echo answering exs_ping's messages from 1 byte to 4 MiB (exs_ping
# checks the answer byte for byte). First on one host (loopback), then on
# "two hosts": two network namespaces joined by a veth pair (10.92.0.1 and
# .2). The two-host half is skipped, with its reason, where namespaces
# cannot be made; the one-host half always runs.
#
#   tests/exs/run_examples.sh <build dir>
set -u
build=${1:?usage: run_examples.sh <build dir>}
bin=$build/examples/exs
for p in exs_ping exs_blast exs_echo; do
  [ -x "$bin/$p" ] || { echo "run_examples.sh: no $p under $bin" >&2; exit 1; }
done
export EXS_PROVIDER=tcp
work=$(mktemp -d)
ns_a=exs-srv-$$
ns_b=exs-cli-$$
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
status=0
port=17480

# run <label> <server netns or ""> <client netns or ""> <server addr> <prog> <args...>
run() {
  local label=$1 sns=$2 cns=$3 addr=$4 prog=$5
  shift 5
  port=$((port + 1))
  local sx=() cx=()
  [ -n "$sns" ] && sx=(ip netns exec "$sns")
  [ -n "$cns" ] && cx=(ip netns exec "$cns")
  "${sx[@]}" timeout 60 "$bin/$prog" -p "$port" "$@" >"$work/srv.out" 2>&1 &
  local spid=$!
  pids+=("$spid")
  local out=
  for _ in $(seq 50); do  # the server may take a moment to listen
    if out=$("${cx[@]}" timeout 60 "$bin/$prog" -p "$port" "$@" "$addr" 2>&1); then break; fi
    grep -q "refused" <<<"$out" || break
    sleep 0.1
  done
  if ! wait "$spid"; then
    echo "FAIL $label: server: $(cat "$work/srv.out")"
    status=1
  elif ! grep -q "$prog:" <<<"$out"; then
    echo "FAIL $label: client: $out"
    status=1
  else
    echo "ok   $label: $out"
  fi
}

# echo <label> <server netns> <client netns> <addr> <type>: exs_echo serves
# exs_ping clients of every size, then is stopped.
echo_sizes() {
  local label=$1 sns=$2 cns=$3 addr=$4 type=$5
  port=$((port + 1))
  local sx=() cx=()
  [ -n "$sns" ] && sx=(ip netns exec "$sns")
  [ -n "$cns" ] && cx=(ip netns exec "$cns")
  "${sx[@]}" "$bin/exs_echo" -t "$type" -p "$port" >"$work/echo.out" 2>&1 &
  local epid=$!
  pids+=("$epid")
  for _ in $(seq 50); do grep -q listening "$work/echo.out" && break; sleep 0.1; done
  for size in 1 100 4096 65536 1048576 4194304; do
    local out
    if out=$("${cx[@]}" timeout 60 "$bin/exs_ping" -t "$type" -p "$port" -s "$size" -n 5 "$addr" 2>&1); then
      echo "ok   $label echo $type $size B"
    else
      echo "FAIL $label echo $type $size B: $out"
      status=1
    fi
  done
  kill "$epid" 2>/dev/null
  wait "$epid" 2>/dev/null
}

suite() {
  local where=$1 sns=$2 cns=$3 addr=$4
  for type in stream seqpacket; do
    run "$where ping $type" "$sns" "$cns" "$addr" exs_ping -t "$type" -n 2000
    run "$where blast $type 64KiB" "$sns" "$cns" "$addr" exs_blast -t "$type" -s 65536 -n 2000
    run "$where blast $type 1MiB" "$sns" "$cns" "$addr" exs_blast -t "$type" -s 1048576 -n 200
    echo_sizes "$where" "$sns" "$cns" "$addr" "$type"
  done
  run "$where ping kernel" "$sns" "$cns" "$addr" exs_ping -K -n 2000
  run "$where blast kernel" "$sns" "$cns" "$addr" exs_blast -K -s 65536 -n 2000
}

suite "one host" "" "" 127.0.0.1

two_hosts() {
  [ "$(id -u)" = 0 ] || { echo "SKIP two hosts: not root"; return; }
  command -v ip >/dev/null || { echo "SKIP two hosts: no ip tool"; return; }
  ip netns add "$ns_a" 2>"$work/err" || { echo "SKIP two hosts: $(cat "$work/err")"; return; }
  ip netns add "$ns_b" 2>"$work/err" || { echo "SKIP two hosts: $(cat "$work/err")"; return; }
  ip link add exs-srv netns "$ns_a" type veth peer name exs-cli netns "$ns_b" 2>"$work/err" ||
    { echo "SKIP two hosts: $(cat "$work/err")"; return; }
  ip -n "$ns_a" addr add 10.92.0.1/24 dev exs-srv
  ip -n "$ns_b" addr add 10.92.0.2/24 dev exs-cli
  for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
  ip -n "$ns_a" link set exs-srv up
  ip -n "$ns_b" link set exs-cli up
  sleep 0.2
  suite "two hosts" "$ns_a" "$ns_b" 10.92.0.1
}
two_hosts
exit $status
