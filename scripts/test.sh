#!/usr/bin/env bash
# Builds weft and runs every test: the regular build, then the same tests in
# an AddressSanitizer + UndefinedBehaviorSanitizer build, the unit and
# conformance tests in a ThreadSanitizer build, and the wire-parser fuzzer.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/deps.sh"
cd "$root"
status=0
failed=()  # the phases that failed, and their failing tests: printed last
start=$(date +%s)
phase() { echo "== $1 ($(( $(date +%s) - start )) s in)"; }
# A ctest run's failures, for the summary: its LastTestsFailed log, and from
# the run's full log the lines that say what failed (gtest's failure
# messages, sanitizer reports), so the summary at the end of a long log
# names the assertion and not only the test binary.
note_ctest() { # build dir, phase name
  local log=$1/Testing/Temporary/LastTestsFailed.log
  local all=$1/Testing/Temporary/LastTest.log
  failed+=("$2")
  [ -f "$log" ] && while IFS= read -r t; do failed+=("  $t"); done <"$log"
  if [ -f "$all" ]; then
    while IFS= read -r t; do failed+=("    $t"); done < <(
      grep -a -E -A12 ': Failure$|^\[  FAILED  \]|WARNING: ThreadSanitizer|ERROR: (Address|Leak)Sanitizer|runtime error:|^SUMMARY: |Segmentation fault|Timeout' "$all" |
        head -200)
  fi
  status=1
}

phase "build (RelWithDebInfo)"
bash scripts/build.sh build
phase "tests"
ctest --test-dir build --output-on-failure -j2 || note_ctest build "tests (regular build)"

phase "build (ASan + UBSan)"
bash scripts/build.sh build-asan -DWEFT_SANITIZE=address,undefined
phase "tests under ASan + UBSan"
# Debian's binaries are not instrumented: the sanitizer runtime must load first.
asan_rt=$(g++ -print-file-name=libasan.so)
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  WEFT_PRELOAD="$asan_rt" ctest --test-dir build-asan --output-on-failure -j2 ||
  note_ctest build-asan "tests under ASan + UBSan"

phase "build (ThreadSanitizer)"
bash scripts/build.sh build-tsan -DWEFT_SANITIZE=thread
phase "unit and conformance tests under ThreadSanitizer"
# The compat tests run Debian's uninstrumented binaries: not under TSan.
# Tests fork children that open their own fabrics while the parent's
# progress threads run (automatic progress): allowed, the children never
# touch the parent's objects.
TSAN_OPTIONS=halt_on_error=1:die_after_fork=0 ctest --test-dir build-tsan --output-on-failure -j2 -E '^compat' \
  || note_ctest build-tsan "tests under ThreadSanitizer"

# The fuzzers' progress lines go to a log; its tail is shown on a failure.
fuzz() { # name, script, seconds
  local log=build-fuzz/$1.log
  mkdir -p build-fuzz
  if bash "$2" "$3" >"$log" 2>&1; then
    grep -E '^Done|stat::number_of_executed_units' "$log" || true
  else
    tail -60 "$log"
    failed+=("fuzz: $1 ($log)")
    status=1
  fi
}
phase "fuzz: tcp frame reader, 30 s"
fuzz tcp_frame fuzz/run_tcp_frame.sh 30
phase "fuzz: reliable datagrams (udp RDM), 20 s"
fuzz rd fuzz/run_rd.sh 20

phase "done"
if [ $status -ne 0 ]; then
  echo "== FAILED:"
  printf '%s\n' "${failed[@]}"
else
  echo "== every phase passed"
fi
exit $status
