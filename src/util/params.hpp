// SPDX-License-Identifier: MIT
// weft — a provider's parameters as one declarative table (fi_param(3)).
//
// Each row names a parameter (FI_<PROV>_<NAME> in the environment), its
// type and help (what fi_getparams and `fi_info -e` show), and how a value
// the user set goes into the provider's config: stored as it is, or checked
// first. load_params defines every row and reads the values once, at the
// provider's registration; a value that does not parse (fi_param_get logs
// it) or that its row refuses leaves the default, with one log line saying
// which and why. The defaults are the config's own initialisers, so the
// table, the config struct and the help texts are the whole story.
//
//   constexpr util::param<config> params[] = {
//       {"iface", FI_PARAM_STRING, "Restrict ... (default: all)",
//        util::store<&config::iface>},
//       {"conn_timeout", FI_PARAM_INT, "Milliseconds ... (default: 10000)",
//        util::at_least<&config::conn_timeout_ms, 1>},
//   };
//   util::load_params(&provider(), params, the_config);
#pragma once

#include <rdma/fabric.h>
#include <rdma/providers/fi_prov.h>

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "core/log.hpp"
#include "core/param.hpp"

namespace weft::util {

// A value the user set, as its row's type reads it.
struct param_value {
  long long number = 0;       // FI_PARAM_INT, FI_PARAM_BOOL (0 or 1), FI_PARAM_SIZE_T
  const char* text = nullptr;  // FI_PARAM_STRING (never null)
  const char* env = nullptr;   // the variable that set it (FI_<PROV>_<NAME>), for log lines
};

template <class Config>
struct param {
  const char* name;
  fi_param_type type;
  const char* help;
  // Takes `v` into `c`; nullptr (taken) or why it is refused.
  const char* (*take)(Config& c, const param_value& v);
};

namespace param_detail {
template <class M>
struct member;
template <class C, class T>
struct member<T C::*> {
  using owner = C;
  using type = T;
};
template <auto Field>
using owner_t = typename member<decltype(Field)>::owner;
template <auto Field>
using type_t = typename member<decltype(Field)>::type;
}  // namespace param_detail

// The value as it is: a bool, a number, or a string (empty included).
template <auto Field>
const char* store(param_detail::owner_t<Field>& c, const param_value& v) {
  using T = param_detail::type_t<Field>;
  if constexpr (std::is_same_v<T, std::string>)
    c.*Field = v.text;
  else if constexpr (std::is_same_v<T, bool>)
    c.*Field = v.number != 0;
  else
    c.*Field = static_cast<T>(v.number);
  return nullptr;
}

// A number of at least Min (and, for a field narrower than the value,
// one that fits it).
template <auto Field, long long Min>
const char* at_least(param_detail::owner_t<Field>& c, const param_value& v) {
  using T = param_detail::type_t<Field>;
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  if (v.number < Min)
    return Min == 0   ? "it must not be negative"
           : Min == 1 ? "it must be at least 1"
                      : "it is below the least allowed";
  if constexpr (sizeof(T) < sizeof(long long))
    if (v.number > static_cast<long long>(std::numeric_limits<T>::max())) return "it is too large";
  c.*Field = static_cast<T>(v.number);
  return nullptr;
}

// A string that is not empty.
template <auto Field>
const char* not_empty(param_detail::owner_t<Field>& c, const param_value& v) {
  if (!*v.text) return "it is empty";
  c.*Field = v.text;
  return nullptr;
}

// Defines every row of `table` for `prov`, and reads the values set into
// `c`. A row's take runs only for a value the user set.
template <class Config, size_t N>
void load_params(const fi_provider* prov, const param<Config> (&table)[N], Config& c) {
  auto* p = const_cast<fi_provider*>(prov);
  for (const param<Config>& row : table) {
    fi_param_define(prov, row.name, row.type, "%s", row.help);
    const std::string env = core::param_env_name(prov, row.name);
    param_value v;
    v.env = env.c_str();
    int ret = -FI_ENODATA;
    std::string shown;
    switch (row.type) {
      case FI_PARAM_STRING: {
        char* s = nullptr;
        ret = fi_param_get_str(p, row.name, &s);
        if (ret == 0 && !s) ret = -FI_ENODATA;
        v.text = s;
        shown = s ? s : "";
        break;
      }
      case FI_PARAM_INT:
      case FI_PARAM_BOOL: {
        int i = 0;
        ret = row.type == FI_PARAM_INT ? fi_param_get_int(p, row.name, &i)
                                       : fi_param_get_bool(p, row.name, &i);
        v.number = i;
        shown = std::to_string(i);
        break;
      }
      case FI_PARAM_SIZE_T: {
        size_t z = 0;
        ret = fi_param_get_size_t(p, row.name, &z);
        shown = std::to_string(z);
        if (ret == 0 && z > static_cast<size_t>(INT64_MAX)) {
          WEFT_WARN(prov, FI_LOG_CORE, "%s=%s is refused (it is too large): the default is kept",
                    env.c_str(), shown.c_str());
          continue;
        }
        v.number = static_cast<long long>(z);
        break;
      }
    }
    if (ret != 0) continue;  // not set, or not parsed (logged by fi_param_get)
    if (const char* why = row.take(c, v))
      WEFT_WARN(prov, FI_LOG_CORE, "%s=%s is refused (%s): the default is kept", env.c_str(),
                shown.c_str(), why);
  }
}

}  // namespace weft::util
