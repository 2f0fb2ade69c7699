// SPDX-License-Identifier: MIT
// weft — unit tests of util/net's host checks (shm's answer to a node).
#include "util/net.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace weft::util {
namespace {

sockaddr_storage parse(const char* text) {
  sockaddr_storage ss{};
  auto* in = reinterpret_cast<sockaddr_in*>(&ss);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, text, &in->sin_addr) == 1) ss.ss_family = AF_INET;
  else if (inet_pton(AF_INET6, text, &in6->sin6_addr) == 1) ss.ss_family = AF_INET6;
  return ss;
}

bool local(const char* text) {
  sockaddr_storage ss = parse(text);
  return is_local_address(reinterpret_cast<sockaddr*>(&ss));
}

TEST(net, loopback_and_any_are_local) {
  for (const char* a : {"127.0.0.1", "127.255.0.9", "::1", "::ffff:127.0.0.1", "0.0.0.0", "::"})
    EXPECT_TRUE(local(a)) << a;
}

TEST(net, other_addresses_are_not) {
  for (const char* a : {"192.0.2.1", "2001:db8::1", "::ffff:192.0.2.1", "128.0.0.1"})
    EXPECT_FALSE(local(a)) << a;
}

TEST(net, interface_addresses_are_local) {
  ifaddrs* list = nullptr;
  ASSERT_EQ(getifaddrs(&list), 0);
  int seen = 0;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
      continue;
    EXPECT_TRUE(is_local_address(i->ifa_addr)) << i->ifa_name;
    ++seen;
  }
  freeifaddrs(list);
  EXPECT_GT(seen, 0);
}

TEST(net, names_of_this_host) {
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  EXPECT_TRUE(names_this_host(host, false));
  EXPECT_TRUE(names_this_host("localhost", false));
  EXPECT_TRUE(names_this_host("LOCALHOST", false));
  EXPECT_TRUE(names_this_host("127.0.0.1", true));
  EXPECT_TRUE(names_this_host("::1", true));
  // With or without the domain part, either way round.
  std::string h = host;
  if (h.find('.') == std::string::npos) EXPECT_TRUE(names_this_host((h + ".example.").c_str(), false));
  else EXPECT_TRUE(names_this_host(h.substr(0, h.find('.')).c_str(), false));
}

TEST(net, names_elsewhere) {
  EXPECT_FALSE(names_this_host(nullptr, false));
  EXPECT_FALSE(names_this_host("", false));
  EXPECT_FALSE(names_this_host("192.0.2.1", false));
  EXPECT_FALSE(names_this_host("no-such-host.invalid", false));
  EXPECT_FALSE(names_this_host("localhost", true));  // FI_NUMERICHOST: not a number
  EXPECT_FALSE(names_this_host("not-this-host-either", true));
}

}  // namespace
}  // namespace weft::util
