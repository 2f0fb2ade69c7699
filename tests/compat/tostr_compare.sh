#!/usr/bin/env bash
# fi_tostr byte for byte: tostr_compare.c, built against the system's
# libfabric headers, run on Debian's libfabric 1.17 and on weft's library;
# the two outputs must be identical.
# Usage: tostr_compare.sh <weft library dir>
# Exit: 0 identical, 1 different (the diff is printed), 77 skipped.
#
# Differences weft keeps on purpose, so the program does not exercise them:
# - names 1.17 lacks: API 2.x values (FI_PROGRESS_CONTROL_UNIFIED,
#   FI_ADDR_UCX, FI_PROTO_COLL..LNX, FI_FLOAT16.., FI_DIFF, FI_VOID, FI_NOOP,
#   capability bits 41-46 and 48 as FI_EXACT_DIRECTED_RECV for 2.x callers,
#   FI_COMMIT_COMPLETE, FI_PEER_TRANSFER, FI_COLLECTIVE completions) and
#   FI_PROTO_MXM / FI_PROTO_MRAIL, which 1.17 prints as "Unknown";
# - fi_info of an API >= 2.0 caller also shows the domain fields 2.x added;
# - domain pointers print in full (1.17 prints only their low 32 bits);
# - an object whose fi_ops::tostr fails prints as "fid: <address>" (1.17
#   keeps whatever the op wrote), and a handle or NIC that prints itself is
#   placed where its line goes (1.17 writes it over the start of the text);
# - an address shorter than its format needs prints nothing (1.17 reads past
#   the given length);
# - a cut text (fi_tostr_r with a short buffer) is a prefix that fills the
#   buffer (1.17 leaves a byte unused and can garble a flag list at the cut);
# - FI_TYPE_VERSION is weft's version, "<api>.0 (weft <version>)".
set -u
# Under the sanitizer build weft's library needs the ASan runtime loaded
# first; leaks of the uninstrumented test program are not ours to report.
preload=()
if [ -n "${WEFT_PRELOAD:-}" ]; then
  preload=(env "LD_PRELOAD=$WEFT_PRELOAD" "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
fi
[ $# -ge 1 ] || { echo "usage: $0 <weft library dir> [ignored...]" >&2; exit 2; }
lib=$(cd "$1" 2>/dev/null && pwd) || { echo "FAIL: no directory $1"; exit 1; }
[ -e "$lib/libfabric.so.1" ] || { echo "FAIL: $lib/libfabric.so.1 not found"; exit 1; }
src=$(dirname "$0")/tostr_compare.c

[ -f /usr/include/rdma/fabric.h ] ||
  { echo "SKIP: system libfabric headers missing (apt-get install libfabric-dev)"; exit 77; }
cc=${CC:-cc}
command -v "$cc" >/dev/null || { echo "SKIP: no C compiler ($cc)"; exit 77; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The system's headers and library only: no weft include path, and the
# system run must not find weft through the environment.
if ! "$cc" -std=gnu11 -O1 -o "$work/tostr_compare" "$src" -lfabric 2>"$work/cc.log"; then
  cat "$work/cc.log"
  echo "FAIL: tostr_compare.c does not build against the system headers"
  exit 1
fi

env -u LD_LIBRARY_PATH -u LD_PRELOAD "$work/tostr_compare" >"$work/system.txt" 2>"$work/system.id"
rc_sys=$?
LD_LIBRARY_PATH=$lib "${preload[@]}" "$work/tostr_compare" >"$work/weft.txt" 2>"$work/weft.id"
rc_weft=$?

# Proof of which library each run used (the program reports fi_version()
# and fi_tostr(FI_TYPE_VERSION) on stderr).
echo "system run: $(head -n1 "$work/system.id") (exit $rc_sys)"
echo "weft run:   $(head -n1 "$work/weft.id") (exit $rc_weft)"
if grep -q "weft" "$work/system.id"; then
  echo "FAIL: the system run loaded weft's library"; exit 1
fi
if ! grep -q "fi_version() 1.17," "$work/system.id"; then
  echo "SKIP: the system library is not libfabric 1.17; its text is not the reference"
  exit 77
fi
if ! grep -q "(weft " "$work/weft.id"; then
  cat "$work/weft.id"
  echo "FAIL: the weft run did not load weft's library from $lib"; exit 1
fi
if [ $rc_sys -ne 0 ]; then
  tail -n 20 "$work/system.txt"; echo "FAIL: the program's own checks failed on the system library"; exit 1
fi

if ! diff -u --label "libfabric 1.17" --label "weft" "$work/system.txt" "$work/weft.txt"; then
  [ $rc_weft -ne 0 ] && sed -n '2,$p' "$work/weft.id"
  echo "FAIL: fi_tostr output differs ($(grep -c '^==' "$work/system.txt") cases)"
  exit 1
fi
if [ $rc_weft -ne 0 ]; then
  cat "$work/weft.id"; echo "FAIL: the program exited $rc_weft on weft's library"; exit 1
fi
echo "PASS: $(grep -c '^==' "$work/system.txt") cases, $(wc -c <"$work/system.txt") bytes identical"
