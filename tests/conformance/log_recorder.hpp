// SPDX-License-Identifier: MIT
// weft — a logger imported with fi_import_log (fi_ext.h) that records the
// library's log lines while a test holds a `recorder`, so a test can check
// that a refusal was logged, and how.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_ext.h>
#include <rdma/providers/fi_log.h>

#include <mutex>
#include <string>
#include <vector>

namespace conformance {

// The imported logger stays for the life of the process (there is no
// un-import); it records only while a test asks it to.
inline std::mutex lines_lock;
inline std::vector<std::string> lines;
inline bool recording = false;

inline int rec_enabled(const fi_provider*, fi_log_level level, fi_log_subsys, uint64_t) {
  std::lock_guard g{lines_lock};
  return recording && level <= FI_LOG_INFO;
}
inline int rec_ready(const fi_provider* p, fi_log_level level, fi_log_subsys s, uint64_t f,
                     uint64_t*) {
  return rec_enabled(p, level, s, f);
}
inline void rec_log(const fi_provider* prov, fi_log_level, fi_log_subsys, const char*, int,
                    const char* msg) {
  std::lock_guard g{lines_lock};
  if (recording) lines.push_back(std::string(prov && prov->name ? prov->name : "?") + "|" + msg);
}

struct recorder {
  recorder() {
    static fi_ops_log ops = {sizeof(fi_ops_log), rec_enabled, rec_ready, rec_log};
    static fid_logging logger = {{}, &ops};
    ret = fi_import_log(FI_VERSION(1, 17), 0, &logger);
    std::lock_guard g{lines_lock};
    lines.clear();
    recording = true;
  }
  ~recorder() {
    std::lock_guard g{lines_lock};
    recording = false;
  }
  std::vector<std::string> with(const std::string& needle) {
    std::lock_guard g{lines_lock};
    std::vector<std::string> out;
    for (auto& l : lines)
      if (l.find(needle) != std::string::npos) out.push_back(l);
    return out;
  }
  size_t lines_count() {
    std::lock_guard g{lines_lock};
    return lines.size();
  }
  int ret;
};

}  // namespace conformance
