// SPDX-License-Identifier: MIT
// weft — fi_param_define, fi_param_get, fi_getparams, fi_freeparams.
#include "core/param.hpp"

#include "core/api.hpp"
#include "core/errc.hpp"
#include "core/log.hpp"
#include "core/registry.hpp"

#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace weft::core {

namespace {

struct param_def {
  std::string env;  // FI_<PROV>_<NAME>
  fi_param_type type;
  std::string help;
};

// The registry is process state by nature: fi_getparams lists every parameter
// that any provider (or the application) has defined so far.
struct registry {
  std::mutex lock;
  std::vector<param_def> defs;
};

registry& params() {
  static registry r;
  return r;
}

bool parse_bool(const char* s, int* out) {
  static constexpr const char* yes[] = {"1", "yes", "true", "on", "y"};
  static constexpr const char* no[] = {"0", "no", "false", "off", "n"};
  for (auto y : yes)
    if (strcasecmp(s, y) == 0) return *out = 1, true;
  for (auto n : no)
    if (strcasecmp(s, n) == 0) return *out = 0, true;
  return false;
}

}  // namespace

std::string param_env_name(const fi_provider* prov, const char* name) {
  std::string env = "FI_";
  if (prov && prov->name && std::strcmp(prov->name, "core") != 0) {
    for (const char* p = prov->name; *p; ++p)
      env += (*p == ';' || *p == '-') ? '_' : static_cast<char>(std::toupper(*p));
    env += '_';
  }
  for (const char* p = name; *p; ++p) env += static_cast<char>(std::toupper(*p));
  return env;
}

}  // namespace weft::core

using namespace weft;
using namespace weft::core;

extern "C" {

WEFT_EXPORT int fi_param_define(const struct fi_provider* provider, const char* param_name,
                                enum fi_param_type type, const char* help_string_fmt, ...) {
  if (!param_name || !*param_name || !help_string_fmt) return to_fi(errc::inval);
  if (raw_enum(type) < FI_PARAM_STRING || raw_enum(type) > FI_PARAM_SIZE_T) {
    WEFT_WARN(provider, FI_LOG_CORE, "fi_param_define %s: unknown type %d", param_name,
              raw_enum(type));
    return to_fi(errc::inval);
  }
  char help[1024];
  va_list ap;
  va_start(ap, help_string_fmt);
  vsnprintf(help, sizeof help, help_string_fmt, ap);
  va_end(ap);
  return abi_guard([&]() -> int {
    auto env = param_env_name(provider, param_name);
    auto& reg = params();
    std::lock_guard g{reg.lock};
    for (auto& d : reg.defs)
      if (d.env == env) {
        d.type = type;  // redefinition updates; no duplicate rows in fi_info -e
        d.help = help;
        return 0;
      }
    reg.defs.push_back({std::move(env), type, help});
    return 0;
  });
}

WEFT_EXPORT int fi_param_get(struct fi_provider* provider, const char* param_name, void* value) {
  if (!param_name || !value) return to_fi(errc::inval);
  auto env = param_env_name(provider, param_name);
  fi_param_type type;
  {
    auto& reg = params();
    std::lock_guard g{reg.lock};
    const param_def* found = nullptr;
    for (auto& d : reg.defs)
      if (d.env == env) found = &d;
    if (!found) {
      WEFT_WARN(provider, FI_LOG_CORE, "parameter %s was never defined", env.c_str());
      return to_fi(errc::noent);
    }
    type = found->type;
  }
  const char* s = std::getenv(env.c_str());
  if (!s) return to_fi(errc::nodata);
  switch (type) {
    case FI_PARAM_STRING:
      *static_cast<char**>(value) = const_cast<char*>(s);
      return 0;
    case FI_PARAM_INT: {
      char* end = nullptr;
      long v = std::strtol(s, &end, 0);
      if (end == s || *end) break;
      *static_cast<int*>(value) = static_cast<int>(v);
      return 0;
    }
    case FI_PARAM_BOOL:
      if (parse_bool(s, static_cast<int*>(value))) return 0;
      break;
    case FI_PARAM_SIZE_T: {
      char* end = nullptr;
      unsigned long long v = std::strtoull(s, &end, 0);
      if (end == s || *end || *s == '-') break;
      *static_cast<size_t*>(value) = static_cast<size_t>(v);
      return 0;
    }
  }
  WEFT_WARN(provider, FI_LOG_CORE, "%s=%s is not a valid value", env.c_str(), s);
  return to_fi(errc::inval);
}

WEFT_EXPORT int fi_getparams(struct fi_param** params_out, int* count) {
  if (!params_out || !count) return to_fi(errc::inval);
  // Providers define their parameters when they are initialised: list them
  // all (fi_info -e), not only those of providers some fi_getinfo touched.
  (void)active_providers();
  auto& reg = params();
  std::lock_guard g{reg.lock};
  size_t n = reg.defs.size();
  // One block: the array (NULL-name terminated) followed by nothing else;
  // strings are duplicated so fi_freeparams can release them one by one.
  auto* out = static_cast<fi_param*>(std::calloc(n + 1, sizeof(fi_param)));
  if (!out) return to_fi(errc::nomem);
  for (size_t i = 0; i < n; ++i) {
    auto& d = reg.defs[i];
    out[i].name = strdup(d.env.c_str());
    out[i].type = d.type;
    out[i].help_string = strdup(d.help.c_str());
    const char* v = std::getenv(d.env.c_str());
    out[i].value = v ? strdup(v) : nullptr;
    if (!out[i].name || !out[i].help_string || (v && !out[i].value)) {
      fi_freeparams(out);
      return to_fi(errc::nomem);
    }
  }
  *params_out = out;
  *count = static_cast<int>(n);
  return 0;
}

WEFT_EXPORT void fi_freeparams(struct fi_param* params_in) {
  if (!params_in) return;
  for (fi_param* p = params_in; p->name; ++p) {
    std::free(const_cast<char*>(p->name));
    std::free(const_cast<char*>(p->help_string));
    std::free(const_cast<char*>(p->value));
  }
  std::free(params_in);
}

}  // extern "C"
