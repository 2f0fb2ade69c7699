#!/usr/bin/env bash
# Configures and builds weft. Usage: build.sh <build dir> [extra cmake args]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$1; shift
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$dir" -j2
