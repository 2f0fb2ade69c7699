#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# libexs on another implementation of the libfabric API: libexs and its
# exs_echo and exs_ping built against Debian's libfabric-dev and linked to
# Debian's libfabric.so.1 (tests/compat/CMakeLists.txt), run over each of
# Debian's FI_EP_MSG providers that work on loopback: tcp, and sockets, which
# binds a passive endpoint only at fi_listen (libexs then learns its port
# there). exs_ping checks every answer byte for byte; both socket types,
# messages from 1 byte to 4 MiB (sockets: 1 byte and 64 KiB).
#
#   tests/compat/debian_exs.sh <dir of the Debian-linked libexs and programs>
set -u
dir=${1:?usage: debian_exs.sh <dir>}
# Only this build's libexs and the system's libfabric: nothing of weft's.
export LD_LIBRARY_PATH=$dir
unset FI_PROVIDER FI_PROVIDER_PATH
# Leaks inside Debian's library (an AddressSanitizer build of this test)
# are not libexs's to report; libexs's own are checked on weft (exs_tests).
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
lib=$(ldd "$dir/exs_ping" | awk '$1 == "libfabric.so.1" { print $3 }')
case "$lib" in
  /usr/lib*|/lib*) ;;
  *) echo "debian_exs.sh: exs_ping does not load Debian's libfabric.so.1 (${lib:-none})" >&2; exit 1 ;;
esac
provs=
if command -v fi_info >/dev/null; then
  for p in tcp sockets; do
    fi_info -p "$p" -t FI_EP_MSG >/dev/null 2>&1 && provs="$provs $p"
  done
fi
if [ -z "$provs" ]; then
  echo "debian_exs.sh: skipped: Debian's fi_info lists no tcp or sockets FI_EP_MSG provider"
  exit 77
fi
work=$(mktemp -d)
server=
cleanup() {
  [ -n "$server" ] && kill -9 "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
status=0
port=$((20000 + $$ % 20000))
for prov in $provs; do
  export EXS_PROVIDER=$prov
  for type in seqpacket stream; do
    port=$((port + 1))
    "$dir/exs_echo" -t "$type" -p "$port" >"$work/echo.$type" 2>&1 &
    server=$!
    # Up when it says it listens.
    for _ in $(seq 100); do
      grep -q listening "$work/echo.$type" 2>/dev/null && break
      sleep 0.1
    done
    if ! grep -q listening "$work/echo.$type"; then
      echo "FAIL $prov $type: exs_echo did not start on Debian's libfabric:"; cat "$work/echo.$type"
      status=1
      kill -9 "$server" 2>/dev/null; server=
      continue
    fi
    # (sockets: the bind path is what it adds, and its progress is slow and
    # busy: small messages only.)
    sizes="1 4096 65536 1048576 4194304"
    [ "$prov" = sockets ] && sizes="1 65536"
    for size in $sizes; do
      if out=$(timeout 60 "$dir/exs_ping" -t "$type" -p "$port" -s "$size" -n 5 127.0.0.1 2>&1); then
        echo "ok $prov $type $size: ${out##*$'\n'}"
      else
        echo "FAIL $prov $type $size: $out"
        status=1
      fi
    done
    # SIGKILL: an echo server lingering on a busy provider's threads would
    # hold the machine (one did once, under AddressSanitizer, for the test's
    # whole timeout).
    kill -9 "$server" 2>/dev/null
    wait "$server" 2>/dev/null
    server=
  done
done
exit $status
