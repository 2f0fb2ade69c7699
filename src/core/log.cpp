// SPDX-License-Identifier: MIT
// weft — fi_log, fi_log_enabled, fi_log_ready and the environment that steers them.
#include "core/log.hpp"
#include "core/api.hpp"
#include "core/errc.hpp"

#include <rdma/fi_errno.h>
#include <rdma/fi_ext.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>
#include <mutex>
#include <vector>
#include <unistd.h>

namespace weft::core {

int log_level_max = -1;

namespace {

// A comma list of names; a leading '^' turns it into an exclusion list.
struct name_filter {
  std::vector<std::string> names;
  bool exclude = false;

  void parse(const char* text) {
    if (!text || !*text) return;
    std::string_view s{text};
    if (s.front() == '^') {
      exclude = true;
      s.remove_prefix(1);
    }
    while (!s.empty()) {
      auto comma = s.find(',');
      auto item = s.substr(0, comma);
      if (!item.empty()) names.emplace_back(item);
      if (comma == std::string_view::npos) break;
      s.remove_prefix(comma + 1);
    }
  }
  bool allows(std::string_view name) const {
    if (names.empty()) return true;
    for (auto& n : names)
      if (strncasecmp(n.c_str(), name.data(), name.size()) == 0 && n.size() == name.size())
        return !exclude;
    return exclude;
  }
};

constexpr const char* level_names[] = {"warn", "trace", "info", "debug"};
constexpr const char* subsys_names[] = {"core",    "fabric", "domain", "ep_ctrl", "ep_data",
                                        "av",      "cq",     "eq",     "mr",      "cntr"};

struct log_config {
  name_filter provs;
  unsigned subsys_mask = ~0u;
};

log_config& config() {
  static log_config cfg;
  return cfg;
}

fi_provider core_prov = {};

__attribute__((constructor)) void init_logging() {
  core_prov.name = const_cast<char*>("core");
  if (const char* level = std::getenv("FI_LOG_LEVEL")) {
    for (int i = 0; i < 4; ++i)
      if (strcasecmp(level, level_names[i]) == 0) log_level_max = i;
  }
  auto& cfg = config();
  cfg.provs.parse(std::getenv("FI_LOG_PROV"));
  if (const char* sub = std::getenv("FI_LOG_SUBSYS")) {
    name_filter f;
    f.parse(sub);
    cfg.subsys_mask = 0;
    for (unsigned i = 0; i < std::size(subsys_names); ++i)
      if (f.allows(subsys_names[i])) cfg.subsys_mask |= 1u << i;
  }
}

// An application's logger (fi_import_log, fi_ext.h): a copy of its ops, so
// the caller's struct need not outlive the call. Once installed, every
// fi_log* call asks it; a later import replaces it.
fi_ops_log imported_ops{};
std::atomic<bool> imported{false};
std::mutex import_lock;

int logging_bind(fid* self, fid* bfid, uint64_t flags) noexcept {
  (void)self;
  auto* lf = reinterpret_cast<fid_logging*>(bfid);  // fid is its first member
  if (flags || !bfid || bfid->fclass != FI_CLASS_LOG || !lf->ops ||
      lf->ops->size < sizeof(fi_ops_log) || !lf->ops->enabled || !lf->ops->log) {
    WEFT_WARN(&core_prov, FI_LOG_CORE,
              "fi_import_log: needs an FI_CLASS_LOG object with enabled and log, no flags");
    return to_fi(weft::errc::inval);
  }
  std::lock_guard g{import_lock};
  imported.store(false, std::memory_order_release);
  imported_ops = *lf->ops;
  imported.store(true, std::memory_order_release);
  // Every level reaches fi_log_enabled, which asks the application.
  log_level_max = FI_LOG_DEBUG;
  return 0;
}

// The "logging" object only carries the import; it owns nothing. Closing it
// leaves the import in effect (fi_ext.h).
int logging_close(fid*) noexcept { return 0; }
int logging_control(fid*, int, void*) noexcept { return to_fi(weft::errc::nosys); }
int logging_ops_open(fid*, const char*, uint64_t, void**, void*) noexcept {
  return to_fi(weft::errc::nosys);
}
int logging_tostr(const fid*, char*, size_t) noexcept { return to_fi(weft::errc::nosys); }
int logging_ops_set(fid*, const char*, uint64_t, void*, void*) noexcept {
  return to_fi(weft::errc::nosys);
}

fi_ops logging_ops = {
    .size = sizeof(fi_ops),
    .close = logging_close,
    .bind = logging_bind,
    .control = logging_control,
    .ops_open = logging_ops_open,
    .tostr = logging_tostr,
    .ops_set = logging_ops_set,
};

fid logging_object = {FI_CLASS_LOG, nullptr, &logging_ops};

}  // namespace

fi_provider* core_provider() noexcept { return &core_prov; }

fid* logging_fid() noexcept { return &logging_object; }

}  // namespace weft::core

using namespace weft::core;
using weft::raw_enum;

extern "C" {

WEFT_EXPORT int fi_log_enabled(const struct fi_provider* prov,
                                                          enum fi_log_level level,
                                                          enum fi_log_subsys subsys) {
  if (imported.load(std::memory_order_acquire))
    return imported_ops.enabled(prov, level, subsys, 0);
  int lv = raw_enum(level), ss = raw_enum(subsys);  // from C callers: any int
  if (lv > log_level_max || lv < 0) return 0;
  auto& cfg = config();
  if (ss >= 0 && ss < 32 && !(cfg.subsys_mask & (1u << ss))) return 0;
  const char* name = prov && prov->name ? prov->name : "core";
  return cfg.provs.allows(name);
}

WEFT_EXPORT int fi_log_ready(const struct fi_provider* prov,
                                                        enum fi_log_level level,
                                                        enum fi_log_subsys subsys,
                                                        uint64_t* showtime) {
  if (imported.load(std::memory_order_acquire) && imported_ops.ready)
    return imported_ops.ready(prov, level, subsys, 0, showtime);
  if (!fi_log_enabled(prov, level, subsys)) return 0;
  if (!showtime) return 1;
  // Rate limiting for callers that log in loops: at most one line per second.
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  uint64_t now = static_cast<uint64_t>(ts.tv_sec) * 1000;
  if (now < *showtime) return 0;
  *showtime = now + 1000;
  return 1;
}

WEFT_EXPORT void fi_log(const struct fi_provider* prov,
                                                   enum fi_log_level level,
                                                   enum fi_log_subsys subsys, const char* func,
                                                   int line, const char* fmt, ...) {
  int saved_errno = errno;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (imported.load(std::memory_order_acquire)) {
    imported_ops.log(prov, level, subsys, func, line, msg);
    errno = saved_errno;
    return;
  }
  size_t n = strlen(msg);
  const char* nl = (n && msg[n - 1] == '\n') ? "" : "\n";
  int lv = raw_enum(level), ss = raw_enum(subsys);
  const char* lvl = (lv >= 0 && lv < 4) ? level_names[lv] : "?";
  const char* sub = (ss >= 0 && static_cast<size_t>(ss) < std::size(subsys_names))
                        ? subsys_names[ss]
                        : "?";
  std::fprintf(stderr, "weft:%d:%s:%s:%s():%d<%s> %s%s", static_cast<int>(getpid()),
               prov && prov->name ? prov->name : "core", sub, func ? func : "?", line, lvl, msg,
               nl);
  errno = saved_errno;
}

}  // extern "C"
