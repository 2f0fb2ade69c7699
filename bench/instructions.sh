#!/usr/bin/env bash
# Instructions per message, weft vs Debian's libfabric: bench/self_inject.c
# (built once, against Debian's headers) runs under callgrind for N and 11N
# iterations on each library; (I(11N) - I(N)) / 10N removes start-up costs.
# Usage: instructions.sh [provider] [extra self_inject args...]
#   instructions.sh udp          FI_EP_DGRAM, FI_MSG
#   instructions.sh shm          FI_EP_RDM (the default for every provider but udp)
#   instructions.sh shm -t       tagged: fi_trecv + fi_tinject
# The endpoint sends to its own address (fi_getname, inserted in its AV).
# WEFT_LIB: the folder of weft's libfabric.so.1 (default: build/src).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
prov=${1:-udp}; shift || true
extra=("$@")
case " ${extra[*]-} " in
  *" -e "*) ;;
  *) [ "$prov" = udp ] || extra+=(-e rdm) ;;
esac
n=2000
exe=$(mktemp /tmp/weft-self-inject.XXXXXX)
trap 'rm -f "$exe" /tmp/weft-cg.$$.*' EXIT
gcc -O2 -o "$exe" "$root/bench/self_inject.c" -lfabric
count() { # libdir iterations
  LD_LIBRARY_PATH=$1 valgrind --tool=callgrind --callgrind-out-file=/tmp/weft-cg.$$.$2 \
    "$exe" -p "$prov" -n "$2" ${extra[@]+"${extra[@]}"} >/dev/null 2>&1
  callgrind_annotate /tmp/weft-cg.$$.$2 | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}
echo "| library | instructions per message |"
echo "| --- | ---: |"
for lib in "${WEFT_LIB:-$root/build/src}" /usr/lib/x86_64-linux-gnu; do
  a=$(count "$lib" $n); b=$(count "$lib" $((11 * n)))
  name=weft; [ "$lib" = /usr/lib/x86_64-linux-gnu ] && name=libfabric
  echo "| $name | $(( (b - a) / (10 * n) )) |"
done
