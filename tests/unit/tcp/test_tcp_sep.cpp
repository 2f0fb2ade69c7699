// SPDX-License-Identifier: MIT
// weft — tcp's scalable endpoints at the socket level (src/prov/tcp/sep.cpp):
// the block of ports behind the one address. What the contexts carry is
// the conformance suite's (conformance/test_sep.cpp).
#include "tcp_fixture.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace tcp_test {
namespace {

class tcp_sep : public rdm_fixture {
 protected:
  // The fixture's info asking for `n` contexts of each kind at `port`.
  fi_info* at_port(uint16_t port, size_t n) {
    fi_info* i = fi_dupinfo(info);
    i->ep_attr->tx_ctx_cnt = n;
    i->ep_attr->rx_ctx_cnt = n;
    auto* sin = static_cast<sockaddr_in*>(i->src_addr);
    sin->sin_port = htons(port);
    return i;
  }
  // Whether something listens on 127.0.0.1:port.
  static bool listening(uint16_t port) {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(s);
    return ok;
  }
  // A port the kernel just gave out, with the next `n` ports free too
  // (checked by binding them; released before returning).
  static uint16_t free_block(size_t n) {
    for (int attempt = 0; attempt < 50; ++attempt) {
      sockaddr_in at{};
      int l = loopback_listener(at);
      if (l < 0) return 0;
      uint16_t p = ntohs(at.sin_port);
      ::close(l);
      // Free means bindable (as the provider binds: SO_REUSEADDR), not only
      // "nothing listens": a parallel test's connection may hold a port.
      bool free = p + n <= 65535;
      int held[8];
      size_t k = 0;
      for (; free && k < n && k < 8; ++k) {
        held[k] = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        ::setsockopt(held[k], SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(uint16_t(p + k));
        free = ::bind(held[k], reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      }
      for (size_t j = 0; j < k; ++j) ::close(held[j]);
      if (free) return p;
    }
    return 0;
  }
};

// A port asked for in src_addr is the endpoint's address, and its receive
// contexts' ports follow it, all listening from fi_scalable_ep on.
TEST_F(tcp_sep, a_port_asked_for_is_the_address_and_the_block_follows_it) {
  const uint16_t p = free_block(3);
  ASSERT_NE(p, 0);
  fi_info* i = at_port(p, 3);
  fid_ep* sep = nullptr;
  ASSERT_EQ(fi_scalable_ep(domain, i, &sep, nullptr), 0);
  fi_freeinfo(i);
  sockaddr_in name{};
  size_t len = sizeof name;
  ASSERT_EQ(fi_getname(&sep->fid, &name, &len), 0);
  EXPECT_EQ(ntohs(name.sin_port), p);
  for (uint16_t k = 0; k < 3; ++k) EXPECT_TRUE(listening(uint16_t(p + k))) << k;
  EXPECT_EQ(fi_close(&sep->fid), 0);
  for (uint16_t k = 0; k < 3; ++k) EXPECT_FALSE(listening(uint16_t(p + k))) << k;
}

// A block one of whose ports another socket holds is refused, logged, and
// leaves nothing listening.
TEST_F(tcp_sep, a_block_another_socket_holds_part_of_is_refused) {
  // Another test running meanwhile may take a port between free_block and
  // the bind: a fresh block then.
  uint16_t p = 0;
  int other = -1;
  for (int attempt = 0; attempt < 20 && other < 0; ++attempt) {
    p = free_block(2);
    ASSERT_NE(p, 0);
    other = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(uint16_t(p + 1));
    if (::bind(other, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(other);
      other = -1;
    }
  }
  ASSERT_GE(other, 0) << "no two free ports in 20 tries";
  ASSERT_EQ(::listen(other, 1), 0);
  fi_info* i = at_port(p, 2);
  fid_ep* sep = nullptr;
  EXPECT_EQ(fi_scalable_ep(domain, i, &sep, nullptr), -FI_EADDRINUSE);
  EXPECT_EQ(sep, nullptr);
  fi_freeinfo(i);
  EXPECT_FALSE(listening(p)) << "the part already taken was let go";
  ::close(other);
}

// A receive context closed gives its port up; opened again, it listens
// there again, and the scalable endpoint's address is unchanged.
TEST_F(tcp_sep, a_receive_context_opened_again_listens_again) {
  fi_info* i = at_port(0, 2);
  fid_ep* sep = nullptr;
  ASSERT_EQ(fi_scalable_ep(domain, i, &sep, nullptr), 0);
  fi_freeinfo(i);
  sockaddr_in name{};
  size_t len = sizeof name;
  ASSERT_EQ(fi_getname(&sep->fid, &name, &len), 0);
  const uint16_t p = ntohs(name.sin_port);
  ASSERT_NE(p, 0);
  fid_ep* rx = nullptr;
  ASSERT_EQ(fi_rx_context(sep, 1, nullptr, &rx, nullptr), 0);
  sockaddr_in ctx_name{};
  len = sizeof ctx_name;
  ASSERT_EQ(fi_getname(&rx->fid, &ctx_name, &len), 0);
  EXPECT_EQ(ntohs(ctx_name.sin_port), p) << "a context is named by its scalable endpoint";
  ASSERT_EQ(fi_close(&rx->fid), 0);
  EXPECT_FALSE(listening(uint16_t(p + 1)));
  ASSERT_EQ(fi_rx_context(sep, 1, nullptr, &rx, nullptr), 0);
  EXPECT_TRUE(listening(uint16_t(p + 1)));
  ASSERT_EQ(fi_close(&rx->fid), 0);
  EXPECT_EQ(fi_close(&sep->fid), 0);
}

// An FI_EP_MSG domain has no contexts: fi_scalable_ep and AVs with
// rx_ctx_bits are not offered there.
TEST(tcp_sep_msg, a_msg_domain_offers_no_contexts) {
  fi_info* info = loopback_info(FI_EP_MSG);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->domain_attr->max_ep_tx_ctx, 1u);
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  ASSERT_EQ(weft_tcp_provider()->fabric(info->fabric_attr, &fabric, nullptr), 0);
  ASSERT_EQ(fi_domain(fabric, info, &domain, nullptr), 0);
  fid_ep* sep = nullptr;
  EXPECT_EQ(fi_scalable_ep(domain, info, &sep, nullptr), -FI_ENOSYS);
  fi_av_attr attr{};
  attr.type = FI_AV_TABLE;
  attr.rx_ctx_bits = 2;
  fid_av* av = nullptr;
  EXPECT_EQ(fi_av_open(domain, &attr, &av, nullptr), -FI_ENOSYS);
  EXPECT_EQ(fi_close(&domain->fid), 0);
  EXPECT_EQ(fi_close(&fabric->fid), 0);
  fi_freeinfo(info);
}

}  // namespace
}  // namespace tcp_test
