// SPDX-License-Identifier: MIT
// weft — the built-in providers and the FI_PROVIDER filter.
#pragma once

#include <rdma/fabric.h>
#include <rdma/providers/fi_prov.h>

#include <span>
#include <string_view>

namespace weft::core {

using provider_init = fi_provider* (*)() noexcept;

// Defined where the library is linked together (src/library.cpp), the one
// place that knows every provider: the core itself depends on none.
std::span<const provider_init> builtin_providers() noexcept;

// The providers FI_PROVIDER allows, initialised once, in registry order.
std::span<fi_provider* const> active_providers() noexcept;

// The provider named exactly `name` (case-insensitive), or nullptr.
fi_provider* find_provider(std::string_view name) noexcept;

// The built-in provider named `name`, whether or not FI_PROVIDER lets the
// application see it: a link provider (lnx) reaches its cores through it.
fi_provider* find_builtin_provider(std::string_view name) noexcept;

// Whether a provider name from hints ("tcp", "tcp;ofi_rxm") selects `prov`.
bool provider_name_matches(std::string_view hint, const fi_provider& prov) noexcept;

}  // namespace weft::core
