// SPDX-License-Identifier: MIT
// weft — the built-in providers and the FI_PROVIDER filter.
#include "core/registry.hpp"

#include "core/log.hpp"

#include <strings.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace weft::core {

namespace {

bool same_name(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

// FI_PROVIDER: a comma list of provider names; a leading '^' excludes them.
bool env_allows(std::string_view name) {
  const char* env = std::getenv("FI_PROVIDER");
  if (!env || !*env) return true;
  std::string_view list{env};
  bool exclude = false;
  if (list.front() == '^') {
    exclude = true;
    list.remove_prefix(1);
  }
  while (!list.empty()) {
    auto comma = list.find(',');
    auto item = list.substr(0, comma);
    // A layered name in the list ("tcp;ofi_rxm") names its core provider.
    item = item.substr(0, item.find(';'));
    if (same_name(item, name)) return !exclude;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return exclude;
}

struct active_list {
  std::vector<fi_provider*> provs;
  active_list() {
    for (provider_init init : builtin_providers()) {
      fi_provider* p = init();
      if (!p || !p->name) continue;
      if (!env_allows(p->name)) {
        WEFT_INFO(core_provider(), FI_LOG_CORE, "provider %s excluded by FI_PROVIDER", p->name);
        continue;
      }
      provs.push_back(p);
    }
  }
  ~active_list() {
    for (fi_provider* p : provs)
      if (p->cleanup) p->cleanup();
  }
};

active_list& active() {
  static active_list list;
  return list;
}

}  // namespace

std::span<fi_provider* const> active_providers() noexcept {
  try {
    return active().provs;
  } catch (...) {
    return {};
  }
}

fi_provider* find_provider(std::string_view name) noexcept {
  name = name.substr(0, name.find(';'));
  for (fi_provider* p : active_providers())
    if (same_name(p->name, name)) return p;
  return nullptr;
}

fi_provider* find_builtin_provider(std::string_view name) noexcept {
  for (provider_init init : builtin_providers())
    if (fi_provider* p = init(); p && p->name && same_name(p->name, name)) return p;
  return nullptr;
}

bool provider_name_matches(std::string_view hint, const fi_provider& prov) noexcept {
  // weft's providers implement every endpoint type natively; a layered name
  // such as "tcp;ofi_rxm" asks for tcp's reliable endpoints, which tcp gives.
  auto first = hint.substr(0, hint.find(';'));
  if (!same_name(first, prov.name)) return false;
  for (auto rest = hint.substr(first.size()); !rest.empty();) {
    rest.remove_prefix(1);  // the ';'
    auto util = rest.substr(0, rest.find(';'));
    if (!same_name(util, "ofi_rxm") && !same_name(util, "ofi_rxd")) return false;
    rest.remove_prefix(util.size());
  }
  return true;
}

}  // namespace weft::core
