// SPDX-License-Identifier: MIT
// weft — marks the functions libfabric.so.1 exports; everything else stays hidden.
#pragma once

#define WEFT_EXPORT __attribute__((visibility("default")))
