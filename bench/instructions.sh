#!/usr/bin/env bash
# Instructions per message, weft vs Debian's libfabric: bench/self_inject.c
# (built once, against Debian's headers) runs under callgrind for N and 11N
# iterations on each library; (I(11N) - I(N)) / 10N removes start-up costs.
# Usage: instructions.sh [provider] [extra self_inject args...]
#   instructions.sh udp          FI_EP_DGRAM, FI_MSG
#   instructions.sh shm          FI_EP_RDM (the default for every provider but udp)
#   instructions.sh shm -t       tagged: fi_trecv + fi_tinject
# The endpoint sends to its own address (fi_getname, inserted in its AV) and
# checks every message it receives.
# WEFT_LIB: the folder of weft's libfabric.so.1 (default: build/src).
# SYSTEM_LIB: the folder of Debian's (default: /usr/lib/x86_64-linux-gnu).
# RESULTS: where the results folder goes (default: bench/results); it gets
# results.md and env.txt (how the run was produced, bench/record.py).
# The order alternates: weft then libfabric for N, libfabric then weft for 11N.
# A run that fails (self_inject or valgrind exits non-zero or hangs, or does not
# report its messages checked), a weft folder without its own
# libfabric.so.1, or a count that is not a number: status 1, no number.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
started=$(date -Iseconds)
cmdline=("$0" "$@")
prov=${1:-udp}; shift || true
extra=("$@")
case " ${extra[*]-} " in
  *" -e "*) ;;
  *) [ "$prov" = udp ] || extra+=(-e rdm) ;;
esac
weft_lib=${WEFT_LIB:-$root/build/src}
system_lib=${SYSTEM_LIB:-/usr/lib/x86_64-linux-gnu}
results=${RESULTS:-$root/bench/results}
n=2000
die() { echo "error: $*" >&2; exit 1; }
tmp=$(mktemp -d /tmp/weft-instructions.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
exe=$tmp/self_inject
gcc -O2 -o "$exe" "$root/bench/self_inject.c" -lfabric
# Which file each run loads: weft's folder must hold its own library (else
# the "weft" runs would fall through to Debian's), and the two must differ.
libs=$(python3 "$root/bench/record.py" libraries "$exe" weft="$weft_lib" libfabric="$system_lib") ||
  exit 1
echo "$libs" | sed 's/=/: /'
command -v valgrind >/dev/null || die "valgrind is not installed (apt-get install valgrind)"
command -v callgrind_annotate >/dev/null || die "callgrind_annotate is not installed"

count() { # libdir iterations: prints the program's total instructions
  local out=$tmp/cg.$2.$(basename "$1") log=$tmp/log.$2.$(basename "$1")
  # A hang is a failure too: a few seconds' work, ten minutes at most.
  if ! LD_LIBRARY_PATH=$1 timeout 600 valgrind --tool=callgrind --callgrind-out-file="$out" \
      "$exe" -p "$prov" -n "$2" ${extra[@]+"${extra[@]}"} >"$log" 2>&1; then
    sed 's/^/  | /' "$log" >&2
    die "self_inject -n $2 failed (or timed out) on $1"
  fi
  grep -q "^$2 messages of .* every one checked$" "$log" ||
    { sed 's/^/  | /' "$log" >&2; die "self_inject -n $2 on $1 did not report its messages checked"; }
  local total
  total=$(callgrind_annotate "$out" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  [[ $total =~ ^[0-9]+$ ]] && [ "$total" -gt 0 ] || die "no instruction count for $1 (-n $2)"
  echo "$total"
}

declare -A small big
small[weft]=$(count "$weft_lib" $n)
small[libfabric]=$(count "$system_lib" $n)
big[libfabric]=$(count "$system_lib" $((11 * n)))
big[weft]=$(count "$weft_lib" $((11 * n)))
table="| library | instructions per message |
| --- | ---: |"
for name in weft libfabric; do
  per=$(( (big[$name] - small[$name]) / (10 * n) ))
  [ "$per" -gt 0 ] || die "$name: $per instructions per message (${small[$name]} for $n, ${big[$name]} for $((11 * n)))"
  table+="
| $name | $per |"
done
# Written in the scratch folder, moved into place once complete.
name=$(date +%Y%m%d-%H%M%S)-instructions-$prov
out=$tmp/$name
mkdir -p "$out"
{
  echo "# Instructions per message, $prov: weft vs Debian libfabric"
  echo
  echo "\`${cmdline[*]}\` — bench/self_inject.c (built against Debian's headers; every message"
  echo "checked) under callgrind for $n and $((11 * n)) messages on each library; per message ="
  echo "(I($((11 * n))) - I($n)) / $((10 * n)). self_inject arguments: \`-p $prov ${extra[*]-}\`."
  echo
  echo "$libs" | sed 's/^\([^=]*\)=\(.*\)$/- \1: `\2`/'
  python3 - "$root" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1] + "/bench")
from record import Record
print("\n".join(Record(argv=[]).summary()))
EOF
  echo
  echo "$table"
} >"$out/results.md"
lib_args=()
while IFS= read -r line; do lib_args+=(--lib "$line"); done <<<"$libs"
python3 "$root/bench/record.py" write "$out" --started "$started" "${lib_args[@]}" \
  --order "$n messages: weft, libfabric" --order "$((11 * n)) messages: libfabric, weft" \
  -- "${cmdline[@]}"
mkdir -p "$results"
mv "$out" "$results/$name"
echo "$table"
echo
echo "written to $results/$name"
