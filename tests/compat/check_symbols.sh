#!/usr/bin/env bash
# The exported interface of libfabric.so.1: exactly the API functions, with
# the version nodes of libfabric's ABI (compat.md), and nothing else.
# Usage: check_symbols.sh <path to libfabric.so.1>
set -u
lib=$1
expected="fi_dupinfo FABRIC_1.0
fi_dupinfo FABRIC_1.1
fi_dupinfo FABRIC_1.2
fi_dupinfo FABRIC_1.3
fi_dupinfo FABRIC_1.7
fi_dupinfo FABRIC_1.8
fi_dupinfo FABRIC_1.9 default
fi_fabric FABRIC_1.0
fi_fabric FABRIC_1.1 default
fi_fabric2 FABRIC_1.8 default
fi_freeinfo FABRIC_1.0
fi_freeinfo FABRIC_1.1
fi_freeinfo FABRIC_1.2
fi_freeinfo FABRIC_1.3
fi_freeinfo FABRIC_1.7
fi_freeinfo FABRIC_1.8
fi_freeinfo FABRIC_1.9 default
fi_freeparams FABRIC_1.0 default
fi_getinfo FABRIC_1.0
fi_getinfo FABRIC_1.1
fi_getinfo FABRIC_1.2
fi_getinfo FABRIC_1.3
fi_getinfo FABRIC_1.7
fi_getinfo FABRIC_1.8
fi_getinfo FABRIC_1.9 default
fi_getparams FABRIC_1.0 default
fi_log FABRIC_1.0 default
fi_log_enabled FABRIC_1.0 default
fi_log_ready FABRIC_1.6 default
fi_open FABRIC_1.5 default
fi_param_define FABRIC_1.0 default
fi_param_get FABRIC_1.0 default
fi_strerror FABRIC_1.0 default
fi_tostr FABRIC_1.0 default
fi_tostr_r FABRIC_1.4 default
fi_version FABRIC_1.0 default"
# objdump -T: defined dynamic symbols; "(NODE)" marks a hidden (compat)
# version, a bare NODE the default one. Version definitions themselves
# (the NODE NODE lines) are not symbols of the API.
actual=$(objdump -T "$lib" | awk '$0 !~ /\*UND\*/ && NF >= 7 {
    ver = $(NF-1); name = $NF
    if (ver == name) next
    if (ver ~ /^\(/) { gsub(/[()]/, "", ver); print name, ver }
    else print name, ver, "default" }' | sort)
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
status=0
if [ "$soname" != "libfabric.so.1" ]; then
  echo "FAIL: SONAME is '$soname', not libfabric.so.1"; status=1
fi
if [ "$actual" != "$expected" ]; then
  echo "FAIL: exported symbols differ (< expected, > actual):"
  diff <(echo "$expected") <(echo "$actual")
  status=1
fi
n=$(echo "$expected" | wc -l)
if [ $status -eq 0 ]; then echo "symbols: $((n + 1)) passed, 0 failed"; else echo "symbols: 0 passed, 1 failed"; fi
exit $status
