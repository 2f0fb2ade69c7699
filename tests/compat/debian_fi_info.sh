#!/usr/bin/env bash
# Debian's own fi_info (libfabric-bin, built for 1.17) run on weft's library.
# Usage: debian_fi_info.sh <weft library dir> <weft tools dir>
set -u
# Under the sanitizer build weft's library needs the ASan runtime loaded
# first; leaks of Debian's uninstrumented binaries are not ours to report.
if [ -n "${WEFT_PRELOAD:-}" ]; then
  export LD_PRELOAD=$WEFT_PRELOAD
  export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
fi
lib=$1
fi_info=/usr/bin/fi_info
[ -x "$fi_info" ] || { echo "SKIP: $fi_info not installed (apt-get install libfabric-bin)"; exit 77; }
fail=0 pass=0
check() { # name, command...
  local name=$1; shift
  if "$@"; then pass=$((pass + 1)); else echo "FAIL: $name"; fail=$((fail + 1)); fi
}
run() { LD_LIBRARY_PATH=$lib "$fi_info" "$@"; }

# Proof of which library ran: weft's version string names weft.
version=$(run --version)
echo "$version"
check "fi_info --version names weft" grep -q "weft" <<<"$version"

list=$(run -l)
echo "$list"
check "fi_info -l lists udp" grep -q "^udp:" <<<"$list"
check "fi_info -l lists shm" grep -q "^shm:" <<<"$list"
check "fi_info -l lists tcp" grep -q "^tcp:" <<<"$list"

verbose=$(run -p udp -v)
check "fi_info -p udp -v exits 0" test $? -eq 0
check "fi_info -p udp -v prints fi_info" grep -q "^fi_info:" <<<"$verbose"
check "fi_info -p udp -v names udp" grep -q "prov_name: udp" <<<"$verbose"
check "fi_info -p udp -v shows FI_EP_DGRAM" grep -q "FI_EP_DGRAM" <<<"$verbose"

tcp=$(run -p tcp -v)
check "fi_info -p tcp -v shows FI_EP_MSG" grep -q "FI_EP_MSG" <<<"$tcp"
check "fi_info -p tcp -v shows FI_EP_RDM" grep -q "FI_EP_RDM" <<<"$tcp"

shm=$(run -p shm -v)
check "fi_info -p shm -v shows FI_EP_RDM" grep -q "FI_EP_RDM" <<<"$shm"
check "fi_info -p shm -v shows FI_ADDR_STR" grep -q "FI_ADDR_STR" <<<"$shm"

# shm accepts a node that names this host (its answer keeps shm's own
# addressing) and refuses one that cannot be local.
shm_node=$(run -p shm -n 127.0.0.1)
check "fi_info -p shm -n 127.0.0.1 lists shm" grep -q "provider: shm" <<<"$shm_node"
shm_src=$(run -p shm -s localhost -P 4711)
check "fi_info -p shm -s localhost -P 4711 lists shm" grep -q "provider: shm" <<<"$shm_src"
run -p shm -n 192.0.2.1 >/dev/null 2>&1
check "fi_info -p shm -n 192.0.2.1 finds nothing" test $? -ne 0

short=$(run -p udp)
check "fi_info -p udp short form" grep -q "provider: udp" <<<"$short"

env=$(run -e)
check "fi_info -e shows FI_UDP_IFACE" grep -q "FI_UDP_IFACE" <<<"$env"
check "fi_info -e shows FI_TCP_IFACE" grep -q "FI_TCP_IFACE" <<<"$env"
check "fi_info -e shows FI_TCP_CONN_TIMEOUT" grep -q "FI_TCP_CONN_TIMEOUT" <<<"$env"
check "fi_info -e shows FI_SHM_SINGLE_COPY" grep -q "FI_SHM_SINGLE_COPY" <<<"$env"
# Every row of every provider's parameter table (src/prov/*/init.cpp).
for v in FI_UDP_RDM_PEER_TIMEOUT_MS FI_UDP_RDM_UNEXP_LIMIT FI_UDP_RDM_PEER_IDLE_MS \
         FI_UDP_RDM_ACK_HOLD FI_TCP_KEEPALIVE FI_TCP_UNEXP_LIMIT FI_TCP_LOCAL_CC \
         FI_TCP_LOCAL_STREAM FI_SHM_SPLIT_COPY FI_SHM_AUTO_SPIN_US FI_SHM_AUTO_HANDOFF \
         FI_SHM_DIR FI_LNX_PROV_LINKS; do
  check "fi_info -e shows $v" grep -q "$v" <<<"$env"
done
# A value a provider refuses keeps the default and says so, once.
refused=$(FI_LOG_LEVEL=warn FI_TCP_CONN_TIMEOUT=0 FI_SHM_DIR= run -l 2>&1)
check "FI_TCP_CONN_TIMEOUT=0 is refused with its reason" \
  test "$(grep -c 'FI_TCP_CONN_TIMEOUT=0 is refused (it must be at least 1)' <<<"$refused")" -eq 1
check "FI_SHM_DIR= is refused with its reason" \
  test "$(grep -c 'FI_SHM_DIR= is refused (it is empty)' <<<"$refused")" -eq 1

# Parameters and FI_PROVIDER steer what fi_getinfo offers.
only_lo=$(FI_UDP_IFACE=lo run -p udp)
check "FI_UDP_IFACE=lo keeps only lo" test "$(grep -c 'domain:' <<<"$only_lo")" -ge 1
check "FI_UDP_IFACE=lo drops other interfaces" test -z "$(grep 'domain:' <<<"$only_lo" | grep -v 'domain: lo$')"
tcp_lo=$(FI_TCP_IFACE=lo run -p tcp)
check "FI_TCP_IFACE=lo drops other interfaces" test -z "$(grep 'domain:' <<<"$tcp_lo" | grep -v 'domain: lo$')"
excluded=$(FI_PROVIDER=^udp run -l 2>&1)
check "FI_PROVIDER=^udp excludes udp" test -z "$(grep '^udp:' <<<"$excluded")"
chosen=$(FI_PROVIDER=udp run -l 2>&1)
check "FI_PROVIDER=udp lists udp" grep -q '^udp:' <<<"$chosen"

# A provider weft does not have is an error, not a crash.
run -p no_such_provider >/dev/null 2>&1
rc=$?
check "unknown provider fails cleanly (exit $rc)" test $rc -ne 0 -a $rc -lt 128

echo "debian fi_info: $pass passed, $fail failed"
[ $fail -eq 0 ]
