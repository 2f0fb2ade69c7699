#!/usr/bin/env bash
# Open MPI's one-sided path (osc rdma over btl ofi) on weft's shm or tcp
# provider: builds the test (osc.c, osc_rma.c, osc_atomic.c) and the
# osc_trace.so shim, and runs the test on 2 and 4 ranks of this machine:
# with osc_rdma_acc_use_amo false (accumulates by fi_compare_atomic loops)
# and true (the default: by fi_fetch_atomic); on shm also with
# FI_SHM_SINGLE_COPY=0 (RMA through bounce buffers instead of
# process_vm_readv/writev); and its threaded test under
# MPI_THREAD_MULTIPLE.
# On lnx (FI_LNX_PROV_LINKS=shm+tcp:lo): every rank's peers through shm, the
# windows' RMA and atomics passed through lnx to it. Last, on 4 ranks, btl
# ofi with 4 contexts per module, which makes it open scalable endpoints.
# Usage: run_osc.sh <weft library dir> <shm|tcp|lnx>
set -u
lib=${1:?usage: run_osc.sh <weft library dir> <shm|tcp|lnx>}
prov=${2:?usage: run_osc.sh <weft library dir> <shm|tcp|lnx>}
links=
case $prov in
  shm | tcp) ;;
  lnx) links=shm+tcp:lo ;;
  *) echo "FAIL: provider must be shm, tcp or lnx, not $prov"; exit 1 ;;
esac
for tool in mpicc mpirun cc; do
  command -v $tool >/dev/null 2>&1 || {
    echo "SKIP: $tool not found (apt-get install openmpi-bin libopenmpi-dev gcc)"; exit 77; }
done
here=$(cd "$(dirname "$0")" && pwd)
include=$(cd "$here/../../include" && pwd)
[ -e "$lib/libfabric.so.1" ] || { echo "FAIL: $lib/libfabric.so.1 does not exist"; exit 1; }
lib=$(cd "$lib" && pwd)

# Everything by mca parameter on the command line, nothing from the user's
# or the system's Open MPI configuration files (Debian's turns btl ofi off)
# or environment; ompi_info too.
unset $(env | awk -F= '/^OMPI_MCA_/ {print $1}')
export OMPI_MCA_mca_base_param_files=/dev/null
export PMIX_MCA_mca_base_param_files=/dev/null
# btl ofi and osc rdma are the only way in: without them nothing to test.
if command -v ompi_info >/dev/null 2>&1; then
  components=$(ompi_info)
  grep -q 'MCA btl: ofi' <<<"$components" || { echo "SKIP: this Open MPI has no OFI btl"; exit 77; }
  grep -q 'MCA osc: rdma' <<<"$components" || { echo "SKIP: this Open MPI has no osc rdma"; exit 77; }
fi

# A sanitizer build of weft inside an uninstrumented Open MPI: the ASan
# runtime must be loaded first (leak reports would be Open MPI's: off);
# the TSan runtime cannot be loaded that way at all.
deps=$(ldd "$lib/libfabric.so.1")
if grep -q libtsan <<<"$deps"; then
  echo "SKIP: weft built with ThreadSanitizer cannot run inside an uninstrumented Open MPI"; exit 77
fi
preload=""
asan=()
asan_rt=$(awk '/libasan\.so/ {print $3}' <<<"$deps")
if [ -n "$asan_rt" ]; then
  preload="${WEFT_PRELOAD:-$asan_rt}:"
  asan=(-x ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
fi

tmp=$(mktemp -d /tmp/weft-osc.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mpicc -std=c99 -O2 -g -Wall -Wextra -Werror -pthread -I"$here" -o "$tmp/osc" \
  "$here/osc.c" "$here/osc_rma.c" "$here/osc_atomic.c" "$here/mpi_check.c" ||
  { echo "FAIL: mpicc could not build osc.c, osc_rma.c, osc_atomic.c"; exit 1; }
# The shim counts the RMA and atomic calls Open MPI makes on libfabric
# endpoints (osc_trace.c); built against weft's headers.
cc -std=c11 -O2 -g -Wall -Wextra -Werror -shared -fPIC -I"$include" -I"$here" \
  -o "$tmp/osc_trace.so" "$here/osc_trace.c" -ldl ||
  { echo "FAIL: cc could not build osc_trace.c"; exit 1; }
preload="$preload$tmp/osc_trace.so"

# Containers run as root; mpirun refuses that without both variables.
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

run() { # ranks acc_use_amo single_copy single|multiple [contexts]
  local n=$1 amo=$2 copy=$3 threads=$4 ctxs=${5:-1} out=$tmp/out.$1.$2.$3.$4.${5:-1} rc start end
  start=$(date +%s.%N)
  # pml ob1 with btl tcp for the two-sided traffic (and self); btl ofi is
  # in one-sided mode (its default) and carries the windows' traffic.
  # btl_ofi_provider_exclude "" drops Open MPI's default exclusion of shm
  # and tcp; FI_PROVIDER leaves weft only the provider under test. osc rdma
  # is the only one-sided component allowed: it needs a btl with RDMA and
  # atomics that reaches every rank, which only btl ofi is here, and there
  # is no osc pt2pt to fall back to (windows would fail to be created).
  # osc.c checks the rest: weft's library mapped, btl ofi loaded, every
  # fabric of this provider, and each test's bytes and atomics counted on
  # the libfabric endpoints by osc_trace.so. Ranks yield when idle: 4
  # busy-polling ranks on 2 cores otherwise starve the one with work. A
  # session directory of its own: two mpiruns started together otherwise
  # race to create the same one.
  timeout -k 10 240 mpirun --allow-run-as-root --oversubscribe -np "$n" \
    --mca orte_tmpdir_base "$tmp" --bind-to none \
    --mca pml ob1 --mca btl self,tcp,ofi --mca btl_ofi_provider_exclude "" \
    --mca osc rdma --mca osc_rdma_acc_use_amo "$amo" --mca mpi_yield_when_idle 1 \
    --mca btl_ofi_num_contexts_per_module "$ctxs" \
    -x FI_PROVIDER="$prov" -x FI_LNX_PROV_LINKS="$links" -x FI_SHM_SINGLE_COPY="$copy" -x LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    -x WEFT_LIB_DIR="$lib" -x FI_LOG_LEVEL=info -x LD_PRELOAD="$preload" "${asan[@]}" \
    "$tmp/osc" "$threads" </dev/null >"$out" 2>&1
  rc=$?
  end=$(date +%s.%N)
  grep -v -E '^weft:[0-9]+:[a-z]*:core:|^libfabric:[0-9]+:' "$out"
  printf 'osc on %d ranks (%s%s, osc_rdma_acc_use_amo %s%s%s): exit %d, %.1f s\n' "$n" "$prov" \
    "$([ "$copy" = 0 ] && echo ', bounce buffers')" "$amo" \
    "$([ "$threads" = multiple ] && echo ', MPI_THREAD_MULTIPLE')" \
    "$([ "$ctxs" != 1 ] && echo ", $ctxs contexts per module: scalable endpoints")" \
    $rc "$(echo "$end - $start" | bc)"
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "FAIL: $n ranks timed out"; return 1
  fi
  [ $rc -eq 0 ] || { echo "FAIL: $n ranks exited with $rc"; return 1; }
  grep -q "osc: all passed on $n ranks" "$out" || { echo "FAIL: $n ranks did not finish"; return 1; }
  # weft's word (its log lines start with "weft:<pid>:") that every rank
  # offered this provider alone.
  local only
  only=$(grep -E '^weft:[0-9]+:core:.*excluded by FI_PROVIDER' "$out" | cut -d: -f2 | sort -u | wc -l)
  [ "$only" -eq "$n" ] || { echo "FAIL: weft's FI_PROVIDER line seen from $only of $n ranks"; return 1; }
  # More than one context per module: btl ofi opened a scalable endpoint of
  # this provider on every rank (util::scalable_ep's line).
  if [ "$ctxs" != 1 ]; then
    local seps
    seps=$(grep -E "^weft:[0-9]+:$prov:ep_ctrl:.*fi_scalable_ep: $ctxs transmit and $ctxs receive" "$out" |
      cut -d: -f2 | sort -u | wc -l)
    [ "$seps" -eq "$n" ] || { echo "FAIL: a $prov scalable endpoint seen from $seps of $n ranks"; return 1; }
  fi
  if [ "$copy" = 0 ] && ! grep -q 'through bounce buffers (FI_SHM_SINGLE_COPY=0)' "$out"; then
    echo "FAIL: FI_SHM_SINGLE_COPY=0 did not make shm use bounce buffers"; return 1
  fi
  if grep -q '^libfabric:[0-9]*:' "$out"; then
    echo "FAIL: another libfabric logged:"; grep '^libfabric:' "$out" | head -5; return 1
  fi
}

fail=0
for n in 2 4; do
  for amo in false true; do
    run $n $amo 1 single || fail=1
  done
  if [ "$prov" = shm ]; then run $n true 0 single || fail=1; fi
  run $n true 1 multiple || fail=1
done
# btl ofi over scalable endpoints: 4 contexts per module, each rank's
# windows served through a scalable endpoint's contexts.
run 4 true 1 single 4 || fail=1
[ $fail -eq 0 ] && echo "osc ($prov): passed on 2 and 4 ranks"
exit $fail
