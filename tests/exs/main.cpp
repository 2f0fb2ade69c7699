// SPDX-License-Identifier: MIT
// libexs tests: the provider is fixed (tcp, over loopback) so the tests do
// not depend on the environment; a child mode serves the tests that kill a
// peer process.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

int exs_test_child(int argc, char** argv);

int main(int argc, char** argv) {
  setenv("EXS_PROVIDER", "tcp", 1);
  if (argc > 1 && std::strcmp(argv[1], "--child") == 0) return exs_test_child(argc, argv);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
