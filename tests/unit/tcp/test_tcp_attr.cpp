// SPDX-License-Identifier: MIT
// weft — tcp: what fi_getinfo advertises about tags is what matching does.
#include "tcp_fixture.hpp"

namespace tcp_test {
namespace {

// fi_endpoint(3): leading 0 bits of mem_tag_format are tag bits the
// provider ignores. Applications size their tag layouts from it: Open MPI's
// OFI mtl counts the leading zeros and refuses the provider when too few bits
// are left (with 0, none are), so every one of the 64 bits must be reported.
TEST(tcp_attr, tagged_endpoints_report_all_64_tag_bits) {
  for (fi_ep_type type : {FI_EP_RDM, FI_EP_MSG}) {
    fi_info* info = loopback_info(type);
    ASSERT_NE(info, nullptr);
    for (fi_info* i = info; i; i = i->next) {
      ASSERT_TRUE(i->caps & FI_TAGGED);
      EXPECT_TRUE(i->ep_attr->mem_tag_format >> 63)
          << "type " << type << ": mem_tag_format 0x" << std::hex << i->ep_attr->mem_tag_format
          << " ignores the top tag bits";
    }
    fi_freeinfo(info);
  }
}

// An application's own format in the hints comes back (every format fits in
// 64 bits matched under any mask).
TEST(tcp_attr, a_requested_tag_format_is_granted) {
  fi_info* hints = fi_allocinfo();
  hints->caps = FI_TAGGED;
  hints->ep_attr->type = FI_EP_RDM;
  hints->addr_format = FI_SOCKADDR_IN;
  hints->ep_attr->mem_tag_format = 0x0000ffff0000ffffULL;
  fi_info* info = nullptr;
  ASSERT_EQ(weft_tcp_provider()->getinfo(FI_VERSION(1, 17), "127.0.0.1", nullptr, FI_SOURCE, hints,
                                         &info),
            0);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->ep_attr->mem_tag_format, 0x0000ffff0000ffffULL);
  fi_freeinfo(info);
  fi_freeinfo(hints);
}

class tcp_tags : public rdm_fixture {};

// The advertisement is true: each of the 64 bits takes part in matching
// unless the ignore mask names it.
TEST_F(tcp_tags, every_advertised_tag_bit_is_matched) {
  fi_addr_t a, b;
  fid_ep* ea = open_ep(&a);
  fid_ep* eb = open_ep(&b);
  ASSERT_TRUE(ea && eb);
  for (int bit = 0; bit < 64; ++bit) {
    const uint64_t t = 1ULL << bit;
    char zero = 0, one = 0, masked = 0;
    fi_context rz, ro, rm, s1, s0, s2;
    // Posted in this order, the receive for tag 0 would take the message
    // tagged t if bit `bit` were not compared.
    ASSERT_EQ(fi_trecv(eb, &zero, 1, nullptr, FI_ADDR_UNSPEC, 0, 0, &rz), 0);
    ASSERT_EQ(fi_trecv(eb, &one, 1, nullptr, FI_ADDR_UNSPEC, t, 0, &ro), 0);
    ASSERT_EQ(fi_tsend(ea, "1", 1, nullptr, b, t, &s1), 0);
    ASSERT_EQ(fi_tsend(ea, "0", 1, nullptr, b, 0, &s0), 0);
    for (void* ctx : {static_cast<void*>(&rz), static_cast<void*>(&ro), static_cast<void*>(&s1),
                      static_cast<void*>(&s0)})
      ASSERT_EQ(wait_for(ctx), 1) << "bit " << bit;
    EXPECT_EQ(one, '1') << "bit " << bit;
    EXPECT_EQ(zero, '0') << "bit " << bit;
    // With the bit in the ignore mask, tag 0 takes the message tagged t.
    ASSERT_EQ(fi_trecv(eb, &masked, 1, nullptr, FI_ADDR_UNSPEC, 0, t, &rm), 0);
    ASSERT_EQ(fi_tsend(ea, "m", 1, nullptr, b, t, &s2), 0);
    ASSERT_EQ(wait_for(&rm), 1) << "bit " << bit;
    ASSERT_EQ(wait_for(&s2), 1) << "bit " << bit;
    EXPECT_EQ(masked, 'm') << "bit " << bit;
  }
}

}  // namespace
}  // namespace tcp_test
