#!/usr/bin/env bash
# The benchmark scripts fail loudly: a run that cannot be what it claims
# exits non-zero, prints no table and leaves no results folder.
#   1. weft's library folder is empty: without a check the "weft" runs would
#      fall through to Debian's library and report its numbers as weft's.
#   2. weft's folder holds a copy of Debian's library (so the library check
#      passes) and the provider does not exist: every benchmark program
#      fails at fi_getinfo, and the script must say so, not print ~0.
# Needs neither weft's build nor a quiet machine: every case ends within a
# second or two. Usage: scripts_fail_loudly.sh [source root]
set -u
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
system_lib=/usr/lib/x86_64-linux-gnu
[ -e "$system_lib/libfabric.so.1" ] ||
  { echo "SKIP: Debian's libfabric is not installed (apt-get install libfabric-dev)"; exit 77; }
for tool in gcc g++ python3 ldd; do
  command -v $tool >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done
tmp=$(mktemp -d /tmp/weft-bench-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/empty" "$tmp/copy"
# A copy, not a link: a different file, so the scripts cannot tell it is
# Debian's and run it as weft's.
cp "$(readlink -f "$system_lib/libfabric.so.1")" "$tmp/copy/libfabric.so.1"
fail=0

# run_script <script> <weft folder> [args...]: the Python scripts take
# --weft-lib and --out, instructions.sh WEFT_LIB and RESULTS; the results
# folder is $tmp/out. (A hang is ctest's timeout.)
run_script() {
  local script=$1 lib=$2
  shift 2
  case $script in
    *.py) python3 "$root/bench/$script" --weft-lib "$lib" --out "$tmp/out" "$@" ;;
    *) WEFT_LIB=$lib RESULTS=$tmp/out bash "$root/bench/$script" "$@" ;;
  esac
}

# expect_failure <name> <pattern the output must hold> <script> <weft folder> [args...]
expect_failure() {
  local name=$1 pattern=$2
  shift 2
  rm -rf "$tmp/out" && mkdir "$tmp/out"
  run_script "$@" >"$tmp/log" 2>&1
  local rc=$? problems=()
  [ $rc -ne 0 ] || problems+=("exited 0")
  grep -q -- "$pattern" "$tmp/log" || problems+=("no \"$pattern\" in its output")
  ! grep -q '^|' "$tmp/log" || problems+=("printed a table")
  [ -z "$(ls -A "$tmp/out")" ] || problems+=("left a results folder: $(ls "$tmp/out")")
  if [ ${#problems[@]} -eq 0 ]; then
    echo "ok: $name (exit $rc)"
  else
    fail=1
    echo "FAIL: $name: $(IFS=';'; echo "${problems[*]}")"
    sed 's/^/  | /' "$tmp/log" | tail -20
  fi
}

have_pingpong=1
[ -x /usr/bin/fi_pingpong ] || { have_pingpong=0; echo "skip: pingpong.py (no /usr/bin/fi_pingpong; apt-get install libfabric-bin)"; }

# 1. No libfabric.so.1 in weft's folder.
missing="no libfabric.so.1 in $tmp/empty"
[ $have_pingpong = 0 ] ||
  expect_failure "pingpong.py, empty weft folder" "$missing" \
    pingpong.py "$tmp/empty" --provider udp --endpoint dgram --sizes 8 --iters 10 --reps 1
[ $have_pingpong = 0 ] ||
  expect_failure "demo.py, empty weft folder" "$missing" \
    demo.py "$tmp/empty" --sizes 8 --iters 10 --reps 1
expect_failure "msgrate.py, empty weft folder" "$missing" \
  msgrate.py "$tmp/empty" --provider shm --windows 10 --warm 1 --reps 1
expect_failure "msgrate.py --ops latency, empty weft folder" "$missing" \
  msgrate.py "$tmp/empty" --provider shm --ops latency --windows 10 --warm 1 --reps 1
[ $have_pingpong = 0 ] ||
  expect_failure "oversub.py, empty weft folder" "$missing" \
    oversub.py "$tmp/empty" --reps 1 --iters 10 --messages 10
expect_failure "av_scale.py, empty weft folder" "$missing" \
  av_scale.py "$tmp/empty" --provider udp --peers 10 --reps 1
expect_failure "peer_scale.py, empty weft folder" "$missing" \
  peer_scale.py "$tmp/empty" --peers 4 --procs 2 --reps 1
expect_failure "instructions.sh, empty weft folder" "$missing" \
  instructions.sh "$tmp/empty" udp
expect_failure "ctx_rate.py, empty weft folder" "$missing" \
  ctx_rate.py "$tmp/empty" --messages 10 --reps 1
expect_failure "srx_conns.py, empty weft folder" "$missing" \
  srx_conns.py "$tmp/empty" --connections 2 --reps 1

# 2. The libraries are there, the benchmark programs fail (fi_getinfo finds
# no such provider).
[ $have_pingpong = 0 ] ||
  expect_failure "pingpong.py, failing fi_pingpong" "fi_pingpong failed" \
    pingpong.py "$tmp/copy" --provider nosuch --endpoint rdm --sizes 8 --iters 10 --reps 1
# demo.py has no --provider: FI_PROVIDER hides every provider from both libraries.
[ $have_pingpong = 0 ] ||
  FI_PROVIDER=nosuch expect_failure "demo.py, failing fi_pingpong" "fi_pingpong failed" \
    demo.py "$tmp/copy" --sizes 8 --iters 10 --reps 1
[ $have_pingpong = 0 ] ||
  expect_failure "oversub.py, failing fi_pingpong" "fi_pingpong failed" \
    oversub.py "$tmp/copy" --provider nosuch --reps 1 --iters 10 --messages 10
expect_failure "msgrate.py, failing msgrate" "msgrate failed" \
  msgrate.py "$tmp/copy" --provider nosuch --windows 10 --warm 1 --reps 1
expect_failure "av_scale.py, failing av_scale" "av_scale failed" \
  av_scale.py "$tmp/copy" --provider nosuch --peers 10 --reps 1
# peer_scale.py has no --provider: FI_PROVIDER hides every provider.
FI_PROVIDER=nosuch expect_failure "peer_scale.py, failing peer_scale" "peer_scale failed" \
  peer_scale.py "$tmp/copy" --peers 4 --procs 2 --reps 1
expect_failure "ctx_rate.py, failing ctx_rate" "ctx_rate -m sep failed" \
  ctx_rate.py "$tmp/copy" --provider nosuch --messages 10 --reps 1
# srx_conns.py has no --provider: FI_PROVIDER hides every provider.
FI_PROVIDER=nosuch expect_failure "srx_conns.py, failing srx_conns" "srx_conns -m srx failed" \
  srx_conns.py "$tmp/copy" --connections 2 --reps 1
if command -v valgrind >/dev/null && command -v callgrind_annotate >/dev/null; then
  expect_failure "instructions.sh, failing self_inject" "self_inject -n 2000 failed" \
    instructions.sh "$tmp/copy" nosuch
else
  echo "skip: instructions.sh with a failing self_inject (valgrind is not installed)"
fi

[ $fail -eq 0 ] && echo "every benchmark script failed loudly"
exit $fail
