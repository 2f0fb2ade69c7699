#!/usr/bin/env bash
# Instructions per message, weft vs Debian's libfabric: bench/self_inject.c
# (built once, against Debian's headers) runs under callgrind for N and 11N
# iterations on each library; (I(11N) - I(N)) / 10N removes start-up costs.
# Usage: instructions.sh [provider] [extra self_inject args...]
#   instructions.sh udp          FI_EP_DGRAM, FI_MSG
#   instructions.sh shm          FI_EP_RDM (the default for every provider but udp)
#   instructions.sh shm -t       tagged: fi_trecv + fi_tinject
# COMPARE=contexts: weft against itself instead, a plain endpoint against a
# scalable endpoint's transmit and receive contexts (self_inject -x); Debian's
# libfabric has no scalable endpoints on shm, tcp or udp to compare.
# COMPARE=provider:NAME: weft through `provider` against weft through NAME
# (instructions.sh lnx -t with COMPARE=provider:shm: what the link costs over
# shm used directly; Debian's libfabric 1.17 has no lnx).
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

count() { # libdir iterations [self_inject args]: prints the program's total instructions
  local lib=$1 iters=$2 prov=${COUNT_PROV:-$prov}
  shift 2
  local out=$tmp/cg.$prov.$iters.$(basename "$lib")$* log=$tmp/log.$prov.$iters.$(basename "$lib")$*
  local what="self_inject -n $iters${*:+ $*}"
  # A hang is a failure too: a few seconds' work, ten minutes at most.
  if ! LD_LIBRARY_PATH=$lib timeout 600 valgrind --tool=callgrind --callgrind-out-file="$out" \
      "$exe" -p "$prov" -n "$iters" ${extra[@]+"${extra[@]}"} "$@" >"$log" 2>&1; then
    sed 's/^/  | /' "$log" >&2
    die "$what failed (or timed out) on $lib (provider $prov)"
  fi
  grep -q "^$iters messages of .* every one checked$" "$log" ||
    { sed 's/^/  | /' "$log" >&2; die "$what on $lib did not report its messages checked"; }
  local total
  total=$(callgrind_annotate "$out" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  [[ $total =~ ^[0-9]+$ ]] && [ "$total" -gt 0 ] || die "no instruction count for $lib ($what)"
  echo "$total"
}

declare -A small big
if [[ ${COMPARE:-libfabric} == provider:* ]]; then
  other=${COMPARE#provider:}
  [ -n "$other" ] && [ "$other" != "$prov" ] || die "COMPARE=provider:NAME needs another provider"
  names=("$prov" "$other")
  small[$prov]=$(count "$weft_lib" $n)
  small[$other]=$(COUNT_PROV=$other count "$weft_lib" $n)
  big[$other]=$(COUNT_PROV=$other count "$weft_lib" $((11 * n)))
  big[$prov]=$(count "$weft_lib" $((11 * n)))
  title="weft through $prov vs weft through $other"
  first="$prov, $other"
  column="weft through"
  tag=instructions-vs-$other
elif [ "${COMPARE:-libfabric}" = contexts ]; then
  names=(endpoint contexts)
  small[endpoint]=$(count "$weft_lib" $n)
  small[contexts]=$(count "$weft_lib" $n -x)
  big[contexts]=$(count "$weft_lib" $((11 * n)) -x)
  big[endpoint]=$(count "$weft_lib" $((11 * n)))
  title="weft, a plain endpoint vs a scalable endpoint's contexts"
  first="endpoint, contexts"
  column="weft through"
  tag=contexts
else
  names=(weft libfabric)
  small[weft]=$(count "$weft_lib" $n)
  small[libfabric]=$(count "$system_lib" $n)
  big[libfabric]=$(count "$system_lib" $((11 * n)))
  big[weft]=$(count "$weft_lib" $((11 * n)))
  title="weft vs Debian libfabric"
  first="weft, libfabric"
  column=library
  tag=instructions
fi
table="| $column | instructions per message |
| --- | ---: |"
for name in "${names[@]}"; do
  per=$(( (big[$name] - small[$name]) / (10 * n) ))
  [ "$per" -gt 0 ] || die "$name: $per instructions per message (${small[$name]} for $n, ${big[$name]} for $((11 * n)))"
  table+="
| $name | $per |"
done
# Written in the scratch folder, moved into place once complete.
name=$(date +%Y%m%d-%H%M%S)-$tag-$prov
out=$tmp/$name
mkdir -p "$out"
{
  echo "# Instructions per message, $prov: $title"
  echo
  echo "\`${cmdline[*]}\` — bench/self_inject.c (built against Debian's headers; every message"
  echo "checked) under callgrind for $n and $((11 * n)) messages on each; per message ="
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
  --order "$n messages: $first" --order "$((11 * n)) messages: $(echo "$first" | awk -F', ' '{print $2 ", " $1}')" \
  -- "${cmdline[@]}"
mkdir -p "$results"
mv "$out" "$results/$name"
echo "$table"
echo
echo "written to $results/$name"
