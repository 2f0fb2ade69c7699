#!/usr/bin/env bash
# weft's own fi_info: --explain tells, per provider, the first hint it
# rejected; the other options keep working.
# Usage: fi_info_explain.sh <weft library dir> <weft tools dir>
set -u
if [ -n "${WEFT_PRELOAD:-}" ]; then export LD_PRELOAD=$WEFT_PRELOAD; fi
lib=$1 tools=$2
fail=0 pass=0
check() { # name, command...
  local name=$1; shift
  if "$@"; then pass=$((pass + 1)); else echo "FAIL: $name"; fail=$((fail + 1)); fi
}
run() { LD_LIBRARY_PATH=$lib "$tools/fi_info" "$@"; }

out=$(run --explain -p udp -t FI_EP_MSG 2>/dev/null); rc=$?
echo "$out"
check "udp asked for FI_EP_MSG: the endpoint type is named" \
  grep -q "^udp: ep_attr->type: asked FI_EP_MSG, offers FI_EP_DGRAM$" <<<"$out"
check "nothing found exits non-zero" test $rc -ne 0

out=$(run -x -c "FI_MSG|FI_COLLECTIVE" 2>/dev/null)
echo "$out"
for p in udp tcp shm; do
  check "$p names caps for FI_COLLECTIVE" grep -q "^$p: caps: FI_COLLECTIVE not offered$" <<<"$out"
  check "$p: one line" test "$(grep -c "^$p: " <<<"$out")" -eq 1
done

out=$(run -x -p shm -n 192.0.2.1 2>/dev/null)
check "shm names a node elsewhere" grep -q "^shm: node: 192.0.2.1" <<<"$out"

out=$(run -x -p udp); rc=$?
check "a provider that answers is listed, not explained" grep -q "provider: udp" <<<"$out"
check "... and exits 0" test $rc -eq 0
check "... with no refusal line" test -z "$(grep '^udp: ' <<<"$out")"

# The other options still work.
list=$(run -l)
check "-l lists shm" grep -q "^shm:" <<<"$list"
# -l names the data progress models each provider offers: manual everywhere,
# automatic where the provider has a progress thread.
for p in udp shm tcp; do
  models=$(grep -A2 "^$p:" <<<"$list" | grep "^    data progress:")
  check "-l: $p offers manual and automatic data progress" \
    test "$models" = "    data progress: FI_PROGRESS_MANUAL FI_PROGRESS_AUTO"
done
check "-l: every provider names its progress models" \
  test "$(grep -c "^    data progress: FI_PROGRESS_MANUAL" <<<"$list")" -eq "$(grep -c "^[a-z]*:$" <<<"$list")"
check "-p tcp -t FI_EP_MSG" grep -q "type: FI_EP_MSG" <<<"$(run -p tcp -t FI_EP_MSG)"
check "-e lists FI_TCP_IFACE" grep -q "FI_TCP_IFACE" <<<"$(run -e)"
check "-i filters verbose output" grep -q "FI_EP_DGRAM" <<<"$(run -p udp -i FI_EP_DGRAM)"
check "-p shm -n 127.0.0.1" grep -q "provider: shm" <<<"$(run -p shm -n 127.0.0.1)"

echo "fi_info --explain: $pass passed, $fail failed"
[ $fail -eq 0 ]
