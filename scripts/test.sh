#!/usr/bin/env bash
# Builds weft and runs every test: the regular build, then the same tests in
# an AddressSanitizer + UndefinedBehaviorSanitizer build, the unit and
# conformance tests in a ThreadSanitizer build, and the wire-parser fuzzer.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/deps.sh"
cd "$root"
status=0

echo "== build (RelWithDebInfo)"
bash scripts/build.sh build
echo "== tests"
ctest --test-dir build --output-on-failure -j2 || status=1

echo "== build (ASan + UBSan)"
bash scripts/build.sh build-asan -DWEFT_SANITIZE=address,undefined
echo "== tests under ASan + UBSan"
# Debian's binaries are not instrumented: the sanitizer runtime must load first.
asan_rt=$(g++ -print-file-name=libasan.so)
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  WEFT_PRELOAD="$asan_rt" ctest --test-dir build-asan --output-on-failure -j2 || status=1

echo "== build (ThreadSanitizer)"
bash scripts/build.sh build-tsan -DWEFT_SANITIZE=thread
echo "== unit and conformance tests under ThreadSanitizer"
# The compat tests run Debian's uninstrumented binaries: not under TSan.
# Tests fork children that open their own fabrics while the parent's
# progress threads run (automatic progress): allowed, the children never
# touch the parent's objects.
TSAN_OPTIONS=halt_on_error=1:die_after_fork=0 ctest --test-dir build-tsan --output-on-failure -j2 -E '^compat' \
  || status=1

echo "== fuzz: tcp frame reader, 30 s"
bash fuzz/run_tcp_frame.sh 30 || status=1
echo "== fuzz: reliable datagrams (udp RDM), 20 s"
bash fuzz/run_rd.sh 20 || status=1

exit $status
