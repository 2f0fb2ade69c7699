// SPDX-License-Identifier: MIT
// weft — unit tests of fi_info copying across ABI versions (core/info).
#include "core/info.hpp"

#include <rdma/fi_domain.h>

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace weft::core {
namespace {

TEST(info_layout, prefixes_grow_with_the_abi) {
  EXPECT_EQ(abi_1_0.info, 112u);  // before fi_info.nic
  EXPECT_EQ(abi_1_2.info, 120u);
  EXPECT_EQ(abi_1_0.tx, 72u);  // before tx_attr.tclass
  EXPECT_EQ(abi_1_3.tx, 80u);
  EXPECT_EQ(abi_1_0.ep, 80u);  // before the auth key fields
  EXPECT_EQ(abi_1_1.ep, 96u);
  EXPECT_EQ(abi_1_0.domain, 120u);
  EXPECT_EQ(abi_1_1.domain, 184u);
  EXPECT_EQ(abi_1_3.domain, 192u);  // Debian's 1.17
  EXPECT_EQ(abi_1_7.domain, 200u);
  EXPECT_EQ(abi_1_8.domain, 208u);
  EXPECT_EQ(abi_current.domain, 224u);
  EXPECT_EQ(abi_1_0.fabric, 28u);  // before fabric_attr.api_version
  EXPECT_EQ(abi_current.info, sizeof(fi_info));
}

// An old caller's hints: only the prefix is theirs, the rest of each block
// is someone else's memory (filled with a poison pattern here).
TEST(info_layout, old_callers_structs_are_read_only_to_their_size) {
  std::vector<uint8_t> dom(sizeof(fi_domain_attr), 0xA5), tx(sizeof(fi_tx_attr), 0xA5);
  auto* d = reinterpret_cast<fi_domain_attr*>(dom.data());
  std::memset(d, 0, abi_1_3.domain);
  d->threading = FI_THREAD_DOMAIN;
  d->tclass = 7;
  auto* t = reinterpret_cast<fi_tx_attr*>(tx.data());
  std::memset(t, 0, abi_1_0.tx);
  t->inject_size = 64;
  fi_info src{};
  fi_rx_attr rx{};
  fi_ep_attr ep{};
  fi_fabric_attr fab{};
  src.domain_attr = d;
  src.tx_attr = t;
  src.rx_attr = &rx;
  src.ep_attr = &ep;
  src.fabric_attr = &fab;
  fi_info* copy = dup_info(&src, abi_1_0);
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->domain_attr->threading, FI_THREAD_DOMAIN);
  EXPECT_EQ(copy->domain_attr->tclass, 0u);          // 1.0 had no tclass
  EXPECT_EQ(copy->domain_attr->max_cntr_value, 0u);  // not the poison
  EXPECT_EQ(copy->tx_attr->inject_size, 64u);
  EXPECT_EQ(copy->tx_attr->tclass, 0u);
  free_info(copy);

  copy = dup_info(&src, abi_1_3);
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->domain_attr->tclass, 7u);
  EXPECT_EQ(copy->domain_attr->max_ep_auth_key, 0u);
  free_info(copy);
}

TEST(info_layout, dup_copies_strings_addresses_and_keys) {
  fi_info* a = dup_info(nullptr, abi_current);
  ASSERT_NE(a, nullptr);
  a->fabric_attr->name = strdup("net");
  a->fabric_attr->prov_name = strdup("udp");
  a->domain_attr->name = strdup("lo");
  uint8_t key[3] = {1, 2, 3};
  a->domain_attr->auth_key = static_cast<uint8_t*>(malloc(3));
  std::memcpy(a->domain_attr->auth_key, key, 3);
  a->domain_attr->auth_key_size = 3;
  a->src_addr = malloc(16);
  std::memset(a->src_addr, 9, 16);
  a->src_addrlen = 16;
  fi_info* b = dup_info(a, abi_current);
  ASSERT_NE(b, nullptr);
  EXPECT_STREQ(b->fabric_attr->name, "net");
  EXPECT_NE(b->fabric_attr->name, a->fabric_attr->name);
  EXPECT_STREQ(b->domain_attr->name, "lo");
  EXPECT_EQ(std::memcmp(b->domain_attr->auth_key, key, 3), 0);
  EXPECT_NE(b->domain_attr->auth_key, a->domain_attr->auth_key);
  EXPECT_EQ(std::memcmp(b->src_addr, a->src_addr, 16), 0);
  EXPECT_EQ(b->dest_addr, nullptr);
  free_info(a);
  free_info(b);
}

TEST(info_layout, list_copy_keeps_order) {
  fi_info* a = dup_info(nullptr, abi_current);
  a->next = dup_info(nullptr, abi_current);
  a->caps = 1;
  a->next->caps = 2;
  fi_info* b = dup_info_list(a);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(b->next, nullptr);
  EXPECT_EQ(b->caps, 1u);
  EXPECT_EQ(b->next->caps, 2u);
  EXPECT_EQ(b->next->next, nullptr);
  free_info(a);
  free_info(b);
}

}  // namespace
}  // namespace weft::core
