// SPDX-License-Identifier: MIT
// weft — the shm provider's addresses: names given out by fi_getname, the
// 16-byte AV entries kept for them, and the forms fi_av_insert accepts.
#include "prov/shm/shm.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <string>

namespace weft::shm {
namespace {

std::string name_for(uint32_t uid, uint64_t pidns, uint64_t pid, uint64_t index) {
  return "fi_shm://weft-shm-" + std::to_string(uid) + "-" + std::to_string(pidns) + "-" +
         std::to_string(pid) + "-" + std::to_string(index);
}
const uint32_t me = static_cast<uint32_t>(geteuid());

TEST(shm_address, names_round_trip_at_one_length) {
  addr_entry e{4242, 4026531836u, 7, 1, 0};
  char buf[name_bytes];
  format_name(e, buf);
  EXPECT_EQ(std::string(buf), name_for(me, 4026531836u, 4242, 7));
  // Padded with NULs to the full length: names have one stride.
  for (size_t i = std::strlen(buf); i < name_bytes; ++i) ASSERT_EQ(buf[i], 0);
  addr_entry back{};
  ASSERT_TRUE(parse_name(buf, name_bytes, back));
  EXPECT_EQ(back, e);
  // The longest name still fits, with its NUL.
  addr_entry big{INT32_MAX, UINT32_MAX, UINT32_MAX, 1, 0};
  format_name(big, buf);
  ASSERT_TRUE(parse_name(buf, name_bytes, back));
  EXPECT_EQ(back, big);
  EXPECT_EQ(region_name_of(e), "weft-shm-" + std::to_string(me) + "-4026531836-4242-7");
}

TEST(shm_address, malformed_names_are_refused) {
  addr_entry e{};
  for (const std::string& bad :
       {std::string("fi_shm://"), std::string("fi_sockaddr_in://127.0.0.1:1"),
        name_for(me, 1, 2, 3) + "x", name_for(me, 1, 0, 3), name_for(me + 1, 1, 2, 3),
        name_for(me, uint64_t{1} << 32, 2, 3), name_for(me, 1, uint64_t{1} << 31, 3),
        name_for(me, 1, 2, uint64_t{1} << 32), std::string("fi_shm://weft-shm-") + "-1-2-3",
        std::string("fi_shm://weft-shm-0--1-2-3"), std::string("fi_shm://other-1-2-3-4")})
    EXPECT_FALSE(parse_name(bad.c_str(), bad.size() + 1, e)) << bad;
  // Not NUL-terminated within the length given.
  std::string ok = name_for(me, 1, 2, 3);
  EXPECT_FALSE(parse_name(ok.c_str(), ok.size(), e));
  EXPECT_TRUE(parse_name(ok.c_str(), ok.size() + 1, e));
  EXPECT_FALSE(parse_name(nullptr, 10, e));
}

TEST(shm_address, codec_takes_names_and_refuses_anything_else) {
  const util::av_codec& c = addr_codec;
  EXPECT_EQ(c.addr_format, static_cast<uint32_t>(FI_ADDR_STR));
  EXPECT_EQ(c.entry_size, 16u);
  char name[name_bytes];
  format_name({99, 5, 1, 1, 0}, name);
  EXPECT_EQ(c.stride(name), name_bytes);
  uint8_t a[16], b[16];
  ASSERT_EQ(c.encode(name, a), 0);
  // A name given at its own length (strlen + 1) works as well.
  std::string exact(name);
  ASSERT_EQ(c.encode(exact.c_str(), b), 0);
  EXPECT_EQ(std::memcmp(a, b, 16), 0);
  // Binary addresses of other formats and pointers are refused, not read.
  const char* ptrs[] = {name};
  EXPECT_NE(c.encode(ptrs, b), 0);
  uint8_t sin[16] = {2, 0, 0x13, 0x88, 127, 0, 0, 1};
  EXPECT_NE(c.encode(sin, b), 0);
  // The live marker the AV relies on is never zero.
  EXPECT_NE(a[c.live_offset] | a[c.live_offset + 1], 0);
  char out[name_bytes + 8];
  EXPECT_EQ(c.decode(a, out, sizeof out), name_bytes);
  EXPECT_STREQ(out, name);
  char text[128];
  EXPECT_EQ(c.straddr(name, text, sizeof text), std::strlen(name) + 1);
  EXPECT_STREQ(text, name);
  char tiny[8];
  EXPECT_EQ(c.straddr(name, tiny, sizeof tiny), std::strlen(name) + 1);
  EXPECT_EQ(std::strlen(tiny), 7u);
  // A zeroed buffer is no address.
  char zeros[name_bytes] = {};
  EXPECT_NE(c.encode(zeros, a), 0);
  EXPECT_EQ(c.resolve(name, nullptr, b), 0);
  EXPECT_NE(c.resolve(name, "1", b), 0);
  EXPECT_NE(c.hash(a), c.hash(reinterpret_cast<const uint8_t*>("0123456789abcdef")));
}

TEST(shm_address, rendezvous_headers_stay_small) {
  // A large message's header with every iovec fits two ring slots.
  EXPECT_LE(proto::slots_for(sizeof(proto::rts_payload) + max_iov * sizeof(proto::rts_iov)), 2u);
  EXPECT_EQ(proto::slots_for(sizeof(proto::rts_payload)), 1u);
  // An inline message of the inject size fits a default ring with room left.
  EXPECT_LT(proto::slots_for(inline_max), proto::default_ring_slots);
}

}  // namespace
}  // namespace weft::shm
