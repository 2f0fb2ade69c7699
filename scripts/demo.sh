#!/usr/bin/env bash
# What weft is for, on a fresh Debian 12 machine: installs what it needs,
# builds weft's libfabric.so.1 and tools (no tests) into build-demo/, shows
# Debian's own fi_info running on weft's library, then times Debian's own
# fi_pingpong over shm and tcp on weft and on Debian's libfabric, interleaved
# in one run (bench/demo.py), and prints the ratios and the path of a plot.
# About 80 s once the packages are installed and ccache is warm, about two
# and a half minutes with an empty cache (README.md).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/deps.sh
SECONDS=0
echo "== building weft (library and tools, no tests) into build-demo/"
bash scripts/build.sh build-demo -DWEFT_TESTS=OFF
built=$SECONDS
weft=$root/build-demo/src
echo "built in ${built} s"
echo
echo "== Debian's /usr/bin/fi_info, unchanged, with weft first on LD_LIBRARY_PATH"
LD_LIBRARY_PATH=$weft ldd /usr/bin/fi_info | grep libfabric
LD_LIBRARY_PATH=$weft /usr/bin/fi_info --version
LD_LIBRARY_PATH=$weft /usr/bin/fi_info -l
echo "(on Debian's own libfabric the same binary lists: $(/usr/bin/fi_info -l | sed -n 's/:$//p' | tr '\n' ' '))"
echo
echo "== weft's provider parameters (fi_info -e; man/fi_shm.7, fi_tcp.7, fi_udp.7)"
LD_LIBRARY_PATH=$weft /usr/bin/fi_info -e | sed -n 's/^# \(FI_[A-Z_]*\): .*/\1/p' | tr '\n' ' '
echo
echo
echo "== Debian's fi_pingpong on weft and on Debian's libfabric, shm and tcp"
python3 bench/demo.py --weft-lib "$weft" --out "$root/build-demo/results"
echo
echo "demo: build ${built} s, fi_info and ping-pongs $((SECONDS - built)) s"
