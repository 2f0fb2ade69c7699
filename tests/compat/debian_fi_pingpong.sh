#!/usr/bin/env bash
# Debian's fi_pingpong (libfabric-bin) and weft's, every pairing, all on
# weft's library. Usage: debian_fi_pingpong.sh <weft library dir> <weft tools dir>
set -u
# Under the sanitizer build weft's library needs the ASan runtime loaded
# first; leaks of Debian's uninstrumented binaries are not ours to report.
if [ -n "${WEFT_PRELOAD:-}" ]; then
  export LD_PRELOAD=$WEFT_PRELOAD
  export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
fi
lib=$1 tools=$2
deb=/usr/bin/fi_pingpong ours=$tools/fi_pingpong
[ -x "$deb" ] || { echo "SKIP: $deb not installed (apt-get install libfabric-bin)"; exit 77; }
[ -x "$ours" ] || { echo "FAIL: $ours not built"; exit 1; }
fail=0 pass=0
# Proof of which library runs: the dynamic linker resolves libfabric.so.1 to
# weft's build for both binaries.
for bin in "$deb" "$ours"; do
  resolved=$(LD_LIBRARY_PATH=$lib ldd "$bin" | awk '/libfabric.so.1/ {print $3}')
  if [ "$(readlink -f "$resolved")" != "$(readlink -f "$lib/libfabric.so.1")" ]; then
    echo "FAIL: $bin would load $resolved, not weft's $lib/libfabric.so.1"; exit 1
  fi
done
# fi_pingpong's out-of-band port: below the kernel's ephemeral range, where
# the connections of tests running alongside take theirs (a port picked
# inside it was once taken by one: "Address already in use"), and picked
# again if something holds it anyway.
ephemeral_low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
[ "$ephemeral_low" -gt 12000 ] 2>/dev/null || ephemeral_low=32768

# Five round trips of every size (-S all, up to 6 MiB) with checks (-c):
# every size and path is crossed; twenty took 150 s of a CI run's test time.
pair() { # server client provider endpoint mode
  local server=$1 client=$2 prov=$3 ep=$4 mode=$5
  local args=(-p "$prov" -e "$ep" -m "$mode" -I 5 -S all -c)
  local attempt crc src
  for attempt in 1 2 3; do
    local port=$((10000 + RANDOM % (ephemeral_low - 10000)))
    LD_LIBRARY_PATH=$lib timeout 60 "$server" "${args[@]}" -B $port >/tmp/weft-pp-server.$$ 2>&1 &
    local spid=$!
    sleep 0.3
    LD_LIBRARY_PATH=$lib timeout 60 "$client" "${args[@]}" -P $port 127.0.0.1 >/tmp/weft-pp-client.$$ 2>&1
    crc=$?
    wait $spid
    src=$?
    if [ $src -ne 0 ] && [ $attempt -lt 3 ] && grep -q "Address already in use" /tmp/weft-pp-server.$$; then
      echo "note: port $port in use, another one"
      continue
    fi
    break
  done
  local name="$(basename "$(dirname "$server")")/$(basename "$server") <- $(basename "$(dirname "$client")")/$(basename "$client") $prov $ep $mode"
  if [ $crc -eq 0 ] && [ $src -eq 0 ] && grep -q "usec/xfer" /tmp/weft-pp-client.$$; then
    pass=$((pass + 1)); echo "ok: $name"
  else
    fail=$((fail + 1)); echo "FAIL: $name (client $crc, server $src)"
    sed 's/^/  client| /' /tmp/weft-pp-client.$$ | tail -20
    sed 's/^/  server| /' /tmp/weft-pp-server.$$ | tail -20
  fi
  rm -f /tmp/weft-pp-server.$$ /tmp/weft-pp-client.$$
}

for combo in "$deb $ours" "$ours $deb" "$ours $ours" "$deb $deb"; do
  set -- $combo
  pair "$1" "$2" udp dgram msg
  pair "$1" "$2" udp rdm msg
  pair "$1" "$2" udp rdm tagged
  pair "$1" "$2" shm rdm msg
  pair "$1" "$2" shm rdm tagged
  pair "$1" "$2" lnx rdm msg
  pair "$1" "$2" lnx rdm tagged
  for ep in msg rdm; do
    for mode in msg tagged; do
      pair "$1" "$2" tcp $ep $mode
    done
  done
done

echo "fi_pingpong pairings: $pass passed, $fail failed"
[ $fail -eq 0 ]
