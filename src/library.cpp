// SPDX-License-Identifier: MIT
// weft — the one place that knows every built-in provider. The core depends
// on none of them; it asks this table.
#include "core/registry.hpp"

fi_provider* weft_udp_provider() noexcept;
fi_provider* weft_shm_provider() noexcept;
fi_provider* weft_tcp_provider() noexcept;
fi_provider* weft_lnx_provider() noexcept;

namespace weft::core {

std::span<const provider_init> builtin_providers() noexcept {
  static constexpr provider_init table[] = {
      &weft_udp_provider,
      &weft_shm_provider,
      &weft_tcp_provider,
      // Last: it links the others, and answers only when asked (lnx.hpp).
      &weft_lnx_provider,
  };
  return table;
}

}  // namespace weft::core
