// SPDX-License-Identifier: MIT
// weft — conformance: an application's logger imported with fi_import_log
// (fi_ext.h) receives the library's log lines, among them fi_getinfo's
// refusal lines (what `fi_info --explain` prints).
#include "provider_param.hpp"

#include <rdma/fi_ext.h>

#include <mutex>
#include <vector>

namespace conformance {
namespace {

// The imported logger stays for the life of the process (there is no
// un-import); it records only while a test asks it to.
std::mutex lines_lock;
std::vector<std::string> lines;
bool recording = false;

int rec_enabled(const fi_provider*, fi_log_level level, fi_log_subsys, uint64_t) {
  std::lock_guard g{lines_lock};
  return recording && level <= FI_LOG_INFO;
}
int rec_ready(const fi_provider* p, fi_log_level level, fi_log_subsys s, uint64_t f, uint64_t*) {
  return rec_enabled(p, level, s, f);
}
void rec_log(const fi_provider* prov, fi_log_level, fi_log_subsys, const char*, int,
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
  int ret;
};

TEST(logging_import, refusals_reach_the_applications_logger) {
  recorder rec;
  ASSERT_EQ(rec.ret, 0);
  fi_info* hints = fi_allocinfo();
  hints->fabric_attr->prov_name = strdup("udp");
  hints->ep_attr->type = FI_EP_MSG;
  fi_info* info = nullptr;
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info), -FI_ENODATA);
  auto got = rec.with("rejects the hints");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].rfind("udp|", 0), 0u) << got[0];  // logged as the provider
  EXPECT_NE(got[0].find("at ep_attr->type: asked FI_EP_MSG, offers FI_EP_DGRAM"),
            std::string::npos)
      << got[0];
  fi_freeinfo(hints);
}

TEST(logging_import, what_is_not_a_logger_is_refused) {
  fi_ops_log ops = {sizeof(fi_ops_log), nullptr, nullptr, nullptr};  // no callbacks
  fid_logging logger = {{}, &ops};
  EXPECT_EQ(fi_import_log(FI_VERSION(1, 17), 0, &logger), -FI_EINVAL);
  fid* f = nullptr;
  EXPECT_EQ(fi_open(FI_VERSION(1, 17), "logging", nullptr, 0, 1, &f, nullptr), -FI_EBADFLAGS);
  ASSERT_EQ(fi_open(FI_VERSION(1, 17), "logging", nullptr, 0, 0, &f, nullptr), 0);
  fid other = {FI_CLASS_EP, nullptr, nullptr};
  EXPECT_EQ(fi_import_fid(f, &other, 0), -FI_EINVAL);
  EXPECT_EQ(fi_close(f), 0);
}

}  // namespace
}  // namespace conformance
