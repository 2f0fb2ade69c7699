#!/bin/sh
# SPDX-License-Identifier: MIT
# Builds and runs the libFuzzer target for the tcp frame reader.
#   fuzz/run_tcp_frame.sh [seconds]   (default 60)
# Needs clang++ with the fuzzer runtime (Debian 12: clang-14 and
# libclang-rt-14-dev). Builds into $BUILD (default build-fuzz/ at the top of
# the repository); the corpus grows in $BUILD/corpus/tcp_frame, seeded from
# fuzz/corpus/tcp_frame (regenerated from the builder when empty). Crashing
# inputs are written to $BUILD/artifacts/.
set -eu

secs=${1:-60}
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build-fuzz}
cxx=${CXX_FUZZ:-clang++}
seeds=$top/fuzz/corpus/tcp_frame
mkdir -p "$build/corpus/tcp_frame" "$build/artifacts" "$seeds"

flags="-std=c++20 -g -O1 -fno-omit-frame-pointer -I$top/include -I$top/src"

if [ -z "$(ls -A "$seeds")" ]; then
  $cxx $flags -o "$build/tcp_frame_corpus" "$top/fuzz/tcp_frame_corpus.cpp" \
    "$top/src/prov/tcp/frame.cpp"
  "$build/tcp_frame_corpus" "$seeds"
fi

$cxx $flags -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -o "$build/tcp_frame_fuzz" "$top/fuzz/tcp_frame_fuzz.cpp" "$top/src/prov/tcp/frame.cpp"

# -malloc_limit_mb: neither the reader nor this target allocates, so any large
# allocation is a bug (an allocation sized from a received field).
exec "$build/tcp_frame_fuzz" -max_total_time="$secs" -print_final_stats=1 \
  -malloc_limit_mb=16 -max_len=4096 -artifact_prefix="$build/artifacts/" \
  "$build/corpus/tcp_frame" "$seeds"
