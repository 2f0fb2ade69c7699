// SPDX-License-Identifier: MIT
// weft — logging inside the library: FI_LOG_LEVEL / FI_LOG_PROV / FI_LOG_SUBSYS.
#pragma once

#include <rdma/fabric.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

namespace weft::core {

// Highest level printed, or -1 when logging is off; read once at load.
extern int log_level_max;

// The provider the core itself logs as ("core").
fi_provider* core_provider() noexcept;

// fi_open("logging"): the object an application's logger is imported into
// (fi_import_log, fi_ext.h).
fid* logging_fid() noexcept;

// One predictable branch when logging is off; the full filter otherwise.
inline bool log_on(const fi_provider* prov, fi_log_level level, fi_log_subsys subsys) noexcept {
  return static_cast<int>(level) <= log_level_max && fi_log_enabled(prov, level, subsys);
}

}  // namespace weft::core

#define WEFT_LOG(prov, level, subsys, ...)                                      \
  do {                                                                          \
    if (::weft::core::log_on((prov), (level), (subsys)))                        \
      fi_log((prov), (level), (subsys), __func__, __LINE__, __VA_ARGS__);       \
  } while (0)
#define WEFT_WARN(prov, subsys, ...) WEFT_LOG(prov, FI_LOG_WARN, subsys, __VA_ARGS__)
#define WEFT_INFO(prov, subsys, ...) WEFT_LOG(prov, FI_LOG_INFO, subsys, __VA_ARGS__)
#define WEFT_DBG(prov, subsys, ...) WEFT_LOG(prov, FI_LOG_DEBUG, subsys, __VA_ARGS__)
