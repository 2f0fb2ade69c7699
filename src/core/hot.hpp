// SPDX-License-Identifier: MIT
// weft — marks for the per-message path.
//
// WEFT_ALWAYS_INLINE: a function the per-message path calls once, whose call
// (saving and restoring callee-saved registers, passing a dozen arguments)
// would cost as much as its body. Used sparingly, where the instruction
// counts of bench/instructions.sh showed the call itself.
#pragma once

#define WEFT_ALWAYS_INLINE [[gnu::always_inline]] inline
