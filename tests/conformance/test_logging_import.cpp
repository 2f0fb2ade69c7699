// SPDX-License-Identifier: MIT
// weft — conformance: an application's logger imported with fi_import_log
// (fi_ext.h) receives the library's log lines, among them fi_getinfo's
// refusal lines (what `fi_info --explain` prints).
#include "log_recorder.hpp"
#include "provider_param.hpp"

namespace conformance {
namespace {

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
