// SPDX-License-Identifier: MIT
// weft — unit tests of the parameter registry and logging filters.
#include "core/log.hpp"
#include "core/param.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_prov.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace weft::core {
namespace {

fi_provider test_prov = [] {
  fi_provider p{};
  p.name = const_cast<char*>("unit_prov");
  return p;
}();

TEST(param, env_names) {
  EXPECT_EQ(param_env_name(&test_prov, "iface"), "FI_UNIT_PROV_IFACE");
  EXPECT_EQ(param_env_name(nullptr, "log_level"), "FI_LOG_LEVEL");
}

TEST(param, define_get_and_list) {
  ASSERT_EQ(fi_param_define(&test_prov, "count", FI_PARAM_INT, "a %s", "number"), 0);
  ASSERT_EQ(fi_param_define(&test_prov, "flag", FI_PARAM_BOOL, "a flag"), 0);
  ASSERT_EQ(fi_param_define(&test_prov, "size", FI_PARAM_SIZE_T, "a size"), 0);
  ASSERT_EQ(fi_param_define(&test_prov, "name", FI_PARAM_STRING, "a name"), 0);
  int i = 0;
  EXPECT_EQ(fi_param_get_int(&test_prov, "count", &i), -FI_ENODATA);
  setenv("FI_UNIT_PROV_COUNT", "42", 1);
  setenv("FI_UNIT_PROV_FLAG", "yes", 1);
  setenv("FI_UNIT_PROV_SIZE", "4096", 1);
  setenv("FI_UNIT_PROV_NAME", "lo", 1);
  EXPECT_EQ(fi_param_get_int(&test_prov, "count", &i), 0);
  EXPECT_EQ(i, 42);
  int b = 0;
  EXPECT_EQ(fi_param_get_bool(&test_prov, "flag", &b), 0);
  EXPECT_EQ(b, 1);
  size_t s = 0;
  EXPECT_EQ(fi_param_get_size_t(&test_prov, "size", &s), 0);
  EXPECT_EQ(s, 4096u);
  char* str = nullptr;
  EXPECT_EQ(fi_param_get_str(&test_prov, "name", &str), 0);
  EXPECT_STREQ(str, "lo");

  setenv("FI_UNIT_PROV_COUNT", "forty", 1);
  EXPECT_EQ(fi_param_get_int(&test_prov, "count", &i), -FI_EINVAL);
  setenv("FI_UNIT_PROV_SIZE", "-1", 1);
  EXPECT_EQ(fi_param_get_size_t(&test_prov, "size", &s), -FI_EINVAL);
  EXPECT_EQ(fi_param_get_int(&test_prov, "never_defined", &i), -FI_ENOENT);

  fi_param* list = nullptr;
  int count = 0;
  ASSERT_EQ(fi_getparams(&list, &count), 0);
  int found = 0;
  for (int k = 0; k < count; ++k)
    if (std::strcmp(list[k].name, "FI_UNIT_PROV_NAME") == 0) {
      ++found;
      EXPECT_STREQ(list[k].value, "lo");
      EXPECT_STREQ(list[k].help_string, "a name");
    }
  EXPECT_EQ(found, 1);
  EXPECT_EQ(list[count].name, nullptr);
  fi_freeparams(list);
  // Redefinition updates in place: still one row.
  ASSERT_EQ(fi_param_define(&test_prov, "name", FI_PARAM_STRING, "renamed"), 0);
  ASSERT_EQ(fi_getparams(&list, &count), 0);
  found = 0;
  for (int k = 0; k < count; ++k) found += std::strcmp(list[k].name, "FI_UNIT_PROV_NAME") == 0;
  EXPECT_EQ(found, 1);
  fi_freeparams(list);
}

TEST(param, bad_input) {
  EXPECT_EQ(fi_param_define(&test_prov, nullptr, FI_PARAM_INT, "x"), -FI_EINVAL);
  EXPECT_EQ(fi_param_define(&test_prov, "x", static_cast<fi_param_type>(99), "x"), -FI_EINVAL);
  EXPECT_EQ(fi_param_get(&test_prov, "x", nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_getparams(nullptr, nullptr), -FI_EINVAL);
  fi_freeparams(nullptr);
}

TEST(log, disabled_levels_are_off) {
  // The test runs without FI_LOG_LEVEL: nothing is enabled.
  if (std::getenv("FI_LOG_LEVEL")) GTEST_SKIP() << "FI_LOG_LEVEL is set";
  EXPECT_FALSE(fi_log_enabled(&test_prov, FI_LOG_WARN, FI_LOG_CORE));
  EXPECT_FALSE(log_on(&test_prov, FI_LOG_WARN, FI_LOG_CORE));
  uint64_t showtime = 0;
  EXPECT_FALSE(fi_log_ready(&test_prov, FI_LOG_WARN, FI_LOG_CORE, &showtime));
}

}  // namespace
}  // namespace weft::core
