#!/usr/bin/env bash
# Installs what building and testing weft needs on Debian 12, only if missing.
set -eu
pkgs=(cmake ninja-build g++ pkg-config python3 libgtest-dev googletest
      libfabric-dev libfabric-bin gdb gnuplot-nox ccache clang libclang-rt-14-dev
      openmpi-bin libopenmpi-dev valgrind)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi
