// SPDX-License-Identifier: MIT
// weft — util::load_params (params.hpp): a provider's parameter table is
// defined for fi_getparams, values set in the environment reach the config,
// and a value a row refuses keeps the default with one log line naming the
// variable and the reason.
#include "util/params.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "../core/log_capture.hpp"
#include "util_env.hpp"

namespace weft::util {
namespace {

// The util tests' provider, named "test": its parameters are FI_TEST_*.
fi_provider* prov() { return test_env::provider(); }

struct cfg {
  std::string name = "default";
  std::string dir = "/dev/shm";
  bool flag = true;
  int count = 10;
  size_t bytes = 4096;
  int zero_or_more = 5;
};

const char* twice(cfg& c, const param_value& v) {
  c.count = static_cast<int>(v.number) * 2;
  return nullptr;
}

constexpr param<cfg> table[] = {
    {"name", FI_PARAM_STRING, "a name (default: default)", store<&cfg::name>},
    {"dir", FI_PARAM_STRING, "a directory (default: /dev/shm)", not_empty<&cfg::dir>},
    {"flag", FI_PARAM_BOOL, "a switch (default: 1)", store<&cfg::flag>},
    {"count", FI_PARAM_INT, "doubled (default: 10)", twice},
    {"bytes", FI_PARAM_SIZE_T, "at least 1 (default: 4096)", at_least<&cfg::bytes, 1>},
    {"zero_or_more", FI_PARAM_INT, "not negative (default: 5)", at_least<&cfg::zero_or_more, 0>},
};

const char* const vars[] = {"FI_TEST_NAME",  "FI_TEST_DIR",   "FI_TEST_FLAG",
                            "FI_TEST_COUNT", "FI_TEST_BYTES", "FI_TEST_ZERO_OR_MORE"};

class params_table : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : vars) ::unsetenv(v);
  }
  void TearDown() override { SetUp(); }
};

TEST_F(params_table, unset_values_keep_the_defaults_and_every_row_is_listed) {
  cfg c;
  test::log_capture log(FI_LOG_WARN);
  load_params(prov(), table, c);
  EXPECT_EQ(c.name, "default");
  EXPECT_EQ(c.dir, "/dev/shm");
  EXPECT_TRUE(c.flag);
  EXPECT_EQ(c.count, 10);
  EXPECT_EQ(c.bytes, 4096u);
  EXPECT_EQ(log.text(), "");
  fi_param* list = nullptr;
  int n = 0;
  ASSERT_EQ(fi_getparams(&list, &n), 0);
  int ours = 0;
  for (int i = 0; i < n; ++i) {
    std::string name = list[i].name;
    if (name.rfind("FI_TEST_", 0) != 0) continue;
    ++ours;
    EXPECT_NE(list[i].help_string, nullptr);
    if (name == "FI_TEST_BYTES") {
      EXPECT_EQ(list[i].type, FI_PARAM_SIZE_T);
      EXPECT_STREQ(list[i].help_string, "at least 1 (default: 4096)");
    }
  }
  fi_freeparams(list);
  EXPECT_EQ(ours, 6);
}

TEST_F(params_table, values_set_reach_the_config) {
  ::setenv("FI_TEST_NAME", "", 1);  // an empty string is a value for store
  ::setenv("FI_TEST_DIR", "/tmp/x", 1);
  ::setenv("FI_TEST_FLAG", "off", 1);
  ::setenv("FI_TEST_COUNT", "21", 1);
  ::setenv("FI_TEST_BYTES", "65536", 1);
  ::setenv("FI_TEST_ZERO_OR_MORE", "0", 1);
  cfg c;
  test::log_capture log(FI_LOG_WARN);
  load_params(prov(), table, c);
  EXPECT_EQ(c.name, "");
  EXPECT_EQ(c.dir, "/tmp/x");
  EXPECT_FALSE(c.flag);
  EXPECT_EQ(c.count, 42);
  EXPECT_EQ(c.bytes, 65536u);
  EXPECT_EQ(c.zero_or_more, 0);
  EXPECT_EQ(log.text(), "");
}

TEST_F(params_table, a_refused_value_keeps_the_default_and_says_why_once) {
  ::setenv("FI_TEST_DIR", "", 1);
  ::setenv("FI_TEST_BYTES", "0", 1);
  ::setenv("FI_TEST_ZERO_OR_MORE", "-1", 1);
  ::setenv("FI_TEST_COUNT", "many", 1);  // does not parse: fi_param_get says so
  cfg c;
  test::log_capture log(FI_LOG_WARN);
  load_params(prov(), table, c);
  EXPECT_EQ(c.dir, "/dev/shm");
  EXPECT_EQ(c.bytes, 4096u);
  EXPECT_EQ(c.zero_or_more, 5);
  EXPECT_EQ(c.count, 10);
  EXPECT_EQ(log.lines_with("FI_TEST_DIR= is refused (it is empty)").size(), 1u);
  EXPECT_EQ(log.lines_with("FI_TEST_BYTES=0 is refused (it must be at least 1)").size(), 1u);
  EXPECT_EQ(log.lines_with("FI_TEST_ZERO_OR_MORE=-1 is refused (it must not be negative)").size(),
            1u);
  EXPECT_EQ(log.lines_with("FI_TEST_COUNT=many").size(), 1u);
}

TEST_F(params_table, a_size_beyond_what_a_row_can_hold_is_refused) {
  ::setenv("FI_TEST_BYTES", "18446744073709551615", 1);
  cfg c;
  test::log_capture log(FI_LOG_WARN);
  load_params(prov(), table, c);
  EXPECT_EQ(c.bytes, 4096u);
  EXPECT_EQ(log.lines_with("FI_TEST_BYTES=18446744073709551615 is refused (it is too large)").size(),
            1u);
}

}  // namespace
}  // namespace weft::util
