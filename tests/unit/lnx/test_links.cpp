// SPDX-License-Identifier: MIT
// weft — FI_LNX_PROV_LINKS as lnx reads it (lnx::parse_links): libfabric's
// syntax, every malformed form refused with a reason and no link kept.
#include "prov/lnx/lnx.hpp"

#include <gtest/gtest.h>

namespace {

using weft::lnx::parse_links;

TEST(lnx_links, the_documented_forms_are_read) {
  auto c = parse_links("shm+tcp");
  ASSERT_TRUE(c.error.empty()) << c.error;
  ASSERT_EQ(c.links.size(), 1u);
  EXPECT_EQ(c.links[0].name(), "shm+tcp");

  c = parse_links("tcp:lo+shm");
  ASSERT_TRUE(c.error.empty()) << c.error;
  EXPECT_EQ(c.links[0].name(), "shm+tcp:lo") << "shared memory first";
  EXPECT_EQ(c.links[0].members[1].domain, "lo");

  // Multi-rail: one member per domain of tcp, in the order named.
  c = parse_links("tcp:eth0,eth1+shm");
  ASSERT_TRUE(c.error.empty()) << c.error;
  ASSERT_EQ(c.links[0].members.size(), 3u);
  EXPECT_EQ(c.links[0].members[1].domain, "eth0");
  EXPECT_EQ(c.links[0].members[2].domain, "eth1");
  EXPECT_EQ(c.links[0].name(), "shm+tcp:eth0,eth1") << "read back as it was written";
  c = parse_links("tcp:a,b");
  ASSERT_TRUE(c.error.empty()) << c.error;
  EXPECT_EQ(c.links[0].name(), "tcp:a,b") << "two rails alone make a link";

  c = parse_links("shm+tcp:eth0|shm+tcp:lo");
  ASSERT_TRUE(c.error.empty()) << c.error;
  ASSERT_EQ(c.links.size(), 2u);
  EXPECT_EQ(c.links[1].name(), "shm+tcp:lo");
}

TEST(lnx_links, malformed_or_unsupported_links_are_refused_with_a_reason) {
  for (const char* bad : {"", "shm", "shm+", "+tcp", "shm++tcp", "shm+tcp|", "|shm+tcp",
                          "shm+tcp:", "shm+shm", "shm+udp", "verbs+tcp", "shm+tcp:eth0,",
                          "shm+tcp:,eth0", "shm+tcp:eth0,eth0", "shm:a,b+tcp",
                          "shm+tcp:a,b,c,d,e", "shm+tcp:a+tcp:b", "tcp:a",
                          "shm+tcp+tcp:lo", "shm:x+tcp|tcp"}) {
    auto c = parse_links(bad);
    EXPECT_FALSE(c.error.empty()) << "'" << bad << "' accepted";
    EXPECT_TRUE(c.links.empty()) << "'" << bad << "' kept a link";
  }
}

}  // namespace
