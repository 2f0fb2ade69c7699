#!/usr/bin/env bash
# Open MPI's point-to-point path (pml cm, mtl ofi) on weft's tcp provider,
# or on lnx: builds p2p.c with mpicc and runs it on 2 and 4 ranks of this
# machine.
#   tcp: FI_PROVIDER=tcp, and Open MPI's exclusion of tcp lifted.
#   lnx: nothing set. weft offers its default link, shm+tcp, to every
#        caller, and Open MPI, with its default exclude list (shm, tcp,
#        udp, ...), must pick lnx by itself; every rank's peers must be
#        reached through shm.
# Usage: run_p2p.sh <weft library dir> [tcp|lnx]
set -u
lib=${1:?usage: run_p2p.sh <weft library dir> [tcp|lnx]}
prov=${2:-tcp}
case $prov in
  tcp) path=(--mca mtl_ofi_provider_exclude "" -x FI_PROVIDER=tcp) ;;
  lnx) path=() ;;
  *) echo "FAIL: unknown provider $prov"; exit 1 ;;
esac
for tool in mpicc mpirun; do
  command -v $tool >/dev/null 2>&1 || {
    echo "SKIP: $tool not found (apt-get install openmpi-bin libopenmpi-dev)"; exit 77; }
done
here=$(cd "$(dirname "$0")" && pwd)
[ -e "$lib/libfabric.so.1" ] || { echo "FAIL: $lib/libfabric.so.1 does not exist"; exit 1; }
lib=$(cd "$lib" && pwd)
# Open MPI's OFI mtl is the only way in: without it there is nothing to test.
if command -v ompi_info >/dev/null 2>&1 && ! ompi_info | grep -q 'MCA mtl: ofi'; then
  echo "SKIP: this Open MPI has no OFI mtl"; exit 77
fi

# A sanitizer build of weft inside an uninstrumented Open MPI: the ASan
# runtime must be loaded first (leak reports would be Open MPI's: off);
# the TSan runtime cannot be loaded that way at all.
deps=$(ldd "$lib/libfabric.so.1")
if grep -q libtsan <<<"$deps"; then
  echo "SKIP: weft built with ThreadSanitizer cannot run inside an uninstrumented Open MPI"; exit 77
fi
sanitizer=()
asan_rt=$(awk '/libasan\.so/ {print $3}' <<<"$deps")
if [ -n "$asan_rt" ]; then
  sanitizer=(-x LD_PRELOAD="${WEFT_PRELOAD:-$asan_rt}"
             -x ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
fi

tmp=$(mktemp -d /tmp/weft-mpi.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mpicc -std=c99 -O2 -g -Wall -Wextra -Werror -I"$here" -o "$tmp/p2p" "$here/p2p.c" "$here/mpi_check.c" ||
  { echo "FAIL: mpicc could not build p2p.c"; exit 1; }

# Containers run as root; mpirun refuses that without both variables.
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Everything by mca parameter on the command line, nothing from the user's
# or the system's Open MPI configuration files (Debian's turns the OFI mtl
# off) or environment.
unset $(env | awk -F= '/^OMPI_MCA_/ {print $1}')
export OMPI_MCA_mca_base_param_files=/dev/null
export PMIX_MCA_mca_base_param_files=/dev/null

run() { # ranks
  local n=$1 out=$tmp/out.$1 rc start end
  start=$(date +%s.%N)
  # pml cm + mtl ofi name the only path Open MPI may take (it aborts if the
  # OFI mtl cannot start). mtl_ofi_provider_exclude drops Open MPI's default
  # exclusion of tcp. FI_PROVIDER=tcp leaves weft only its tcp provider;
  # WEFT_LIB_DIR lets every rank prove that weft's library is the one
  # mapped. Ranks yield when idle: 4 busy-polling ranks on 2 cores otherwise
  # starve the rank that has something to do. btl self: no btl may load a
  # second transport behind the test's back. A session directory of its own:
  # two mpiruns started together otherwise race to create the same one.
  timeout -k 10 300 mpirun --allow-run-as-root --oversubscribe -np "$n" \
    --mca orte_tmpdir_base "$tmp" --bind-to none --mca pml cm --mca mtl ofi \
    --mca btl self --mca osc '^ucx' --mca mpi_yield_when_idle 1 \
    --mca mtl_base_verbose 10 "${path[@]}" \
    -x LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    -x WEFT_LIB_DIR="$lib" -x FI_LOG_LEVEL=info "${sanitizer[@]}" \
    "$tmp/p2p" </dev/null >"$out" 2>&1
  rc=$?
  end=$(date +%s.%N)
  # The selection and info lines prove the path; show the rest.
  grep -v -E '^\[[^]]*\] (mca:|mca: |select: |[^ ]*mtl_ofi_component)|^weft:[0-9]+:[a-z]*:core:|^libfabric:[0-9]+:' "$out"
  printf 'p2p on %d ranks: exit %d, %.1f s\n' "$n" $rc "$(echo "$end - $start" | bc)"
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "FAIL: $n ranks timed out"; return 1
  fi
  [ $rc -eq 0 ] || { echo "FAIL: $n ranks exited with $rc"; return 1; }
  grep -q "p2p: all passed on $n ranks" "$out" || { echo "FAIL: $n ranks did not finish"; return 1; }
  # Open MPI's word that every rank runs the OFI mtl, and weft's (its log
  # lines start with "weft:<pid>:") that every rank offered tcp alone, or
  # that every rank chose lnx and reached its peers through shm.
  local selected ours
  selected=$(grep -c 'select: component ofi selected' "$out")
  [ "$selected" -eq "$n" ] || { echo "FAIL: mtl ofi selected on $selected of $n ranks"; return 1; }
  if [ "$prov" = tcp ]; then
    ours=$(grep -E '^weft:[0-9]+:core:.*excluded by FI_PROVIDER' "$out" |
      cut -d: -f2 | sort -u | wc -l)
    [ "$ours" -eq "$n" ] || { echo "FAIL: weft's tcp-only line seen from $ours of $n ranks"; return 1; }
  else
    local chose
    chose=$(grep -c 'mtl:ofi:provider: shm+tcp:' "$out")
    [ "$chose" -eq "$n" ] || { echo "FAIL: Open MPI chose lnx on $chose of $n ranks"; return 1; }
    ours=$(grep -E '^weft:[0-9]+:lnx:.*through shm' "$out" | cut -d: -f2 | sort -u | wc -l)
    [ "$ours" -eq "$n" ] || { echo "FAIL: routes through shm seen from $ours of $n ranks"; return 1; }
    if grep -qE '^weft:[0-9]+:lnx:.*through tcp' "$out"; then
      echo "FAIL: a peer on this host was reached through tcp"; return 1
    fi
  fi
  if grep -q '^libfabric:[0-9]*:' "$out"; then
    echo "FAIL: another libfabric logged:"; grep '^libfabric:' "$out" | head -5; return 1
  fi
}

fail=0
run 2 || fail=1
run 4 || fail=1
[ $fail -eq 0 ] && echo "p2p ($prov): passed on 2 and 4 ranks"
exit $fail
