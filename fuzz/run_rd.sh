#!/bin/sh
# SPDX-License-Identifier: MIT
# Builds and runs the libFuzzer target for reliable datagrams (util/rd_*).
#   fuzz/run_rd.sh [seconds]   (default 60)
# Needs clang++ with the fuzzer runtime (Debian 12: clang-14 and
# libclang-rt-14-dev). Builds into $BUILD (default build-fuzz/); the corpus
# grows in $BUILD/corpus/rd, seeded from fuzz/corpus/rd. Crashing inputs are
# written to $BUILD/artifacts/.
set -eu

secs=${1:-60}
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build-fuzz}
cxx=${CXX_FUZZ:-clang++}
seeds=$top/fuzz/corpus/rd
mkdir -p "$build/corpus/rd" "$build/artifacts" "$seeds"

flags="-std=c++20 -g -O1 -fno-omit-frame-pointer -I$top/include -I$top/src"

$cxx $flags -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -o "$build/rd_fuzz" "$top/fuzz/rd_fuzz.cpp" "$top/src/util/rd_link.cpp"

# The link allocates one ring of 32 flights; anything large is a bug.
exec "$build/rd_fuzz" -max_total_time="$secs" -print_final_stats=1 \
  -malloc_limit_mb=16 -max_len=2048 -artifact_prefix="$build/artifacts/" \
  "$build/corpus/rd" "$seeds"
