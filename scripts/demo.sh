#!/usr/bin/env bash
# Builds weft and shows it: fi_info listing weft's providers, then a
# two-process ping-pong over the udp provider with latency and bandwidth.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/deps.sh"
cd "$root"
bash scripts/build.sh build
export LD_LIBRARY_PATH=$root/build/src
echo "== fi_info -l (weft's providers)"
build/tools/fi_info -l
echo
echo "== fi_info -p udp"
build/tools/fi_info -p udp
echo
echo "== fi_pingpong -p udp: server and client in two processes"
port=$((10000 + RANDOM % 20000))  # below the ephemeral ports (32768 on)
log=$(mktemp)
taskset -c 0 build/tools/fi_pingpong -p udp -e dgram -B $port -I 1000 -S all >"$log" 2>&1 &
server=$!
sleep 0.5
echo "(client side; one-way latency is usec/xfer)"
taskset -c 1 build/tools/fi_pingpong -p udp -e dgram -P $port -I 1000 -S all 127.0.0.1
wait $server || { echo "server failed:"; cat "$log"; exit 1; }
rm -f "$log"
