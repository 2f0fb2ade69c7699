// SPDX-License-Identifier: MIT
// weft — util::rd::held_ack (rd_held_ack.hpp): what an endpoint holds is
// taken back by it, or sent by the keeper when the endpoint stops calling,
// and never both.
#include "util/rd_held_ack.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace weft::util::rd {
namespace {

class held_ack_test : public testing::Test {
 protected:
  void SetUp() override {
    for (int* s : {&from, &to}) {
      *s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      ASSERT_GE(*s, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ASSERT_EQ(::bind(*s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    }
    socklen_t len = sizeof to_name;
    ASSERT_EQ(::getsockname(to, reinterpret_cast<sockaddr*>(&to_name), &len), 0);
    ack.set_socket(from);
  }
  void TearDown() override {
    ack.close();
    ::close(from);
    ::close(to);
  }
  dgram stamped(uint32_t n) {
    dgram h{};
    h.magic = magic;
    h.version = version;
    h.kind = uint8_t(kind::ack);
    h.ack = n;
    return h;
  }
  bool hold(const void* peer, uint32_t n) {
    return ack.hold(peer, stamped(n), reinterpret_cast<const sockaddr*>(&to_name),
                    sizeof to_name);
  }
  // The acknowledgement number of the next datagram within `ms`, or -1.
  long next_ack(int ms) {
    pollfd p{to, POLLIN, 0};
    if (::poll(&p, 1, ms) != 1) return -1;
    dgram h{};
    if (::recv(to, &h, sizeof h, 0) != ssize_t(sizeof h)) return -2;
    return long(h.ack);
  }

  int from = -1, to = -1;
  sockaddr_in to_name{};
  held_ack ack;
  int peer_a = 0, peer_b = 0;  // identities only
};

TEST_F(held_ack_test, the_endpoint_takes_back_what_it_holds_and_the_keeper_sends_nothing) {
  ASSERT_TRUE(hold(&peer_a, 7));
  EXPECT_TRUE(ack.holds(&peer_a));
  EXPECT_FALSE(ack.holds(&peer_b));
  EXPECT_EQ(ack.take(), &peer_a);
  EXPECT_EQ(ack.take(), nullptr);
  EXPECT_FALSE(ack.holds(&peer_a));
  // Longer than the keeper's slowest look and the tick after it.
  const int ms = int((keeper_slow_us + 4 * keeper_tick_us) / 1000) + 20;
  EXPECT_EQ(next_ack(ms), -1) << "the keeper sent what was taken back";
}

TEST_F(held_ack_test, the_keeper_sends_what_stays_held_once) {
  // A quiet keeper (asleep) is woken by the hold.
  std::this_thread::sleep_for(std::chrono::microseconds(keeper_quiet_us + 20'000));
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(hold(&peer_a, 42));
  EXPECT_EQ(next_ack(2000), 42);
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, std::chrono::microseconds(keeper_tick_us))
      << "sent before it was held a whole tick";
  // It was sent, so the endpoint gets nothing back, and nothing more goes.
  EXPECT_EQ(ack.take(), nullptr);
  EXPECT_EQ(next_ack(30), -1);
  // A later hold is the endpoint's again.
  ASSERT_TRUE(hold(&peer_b, 43));
  EXPECT_EQ(ack.take(), &peer_b);
}

TEST_F(held_ack_test, a_busy_keeper_sends_within_its_slowest_look) {
  // Holds taken back at once keep the keeper looking slowly; one left held
  // goes within keeper_slow_us and a tick (with room for a loaded machine).
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(hold(&peer_a, uint32_t(i)));
    ASSERT_EQ(ack.take(), &peer_a);
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  ASSERT_TRUE(hold(&peer_a, 1000));
  EXPECT_EQ(next_ack(int(keeper_slow_us / 1000) * 20), 1000);
}

TEST_F(held_ack_test, after_close_the_keeper_no_longer_sends) {
  ASSERT_TRUE(hold(&peer_a, 5));
  ASSERT_EQ(ack.take(), &peer_a);
  ack.close();
  // An endpoint holds only while registered: hold registers again.
  ASSERT_TRUE(hold(&peer_a, 6));
  ack.close();
  const int ms = int((keeper_slow_us + 4 * keeper_tick_us) / 1000) + 20;
  EXPECT_EQ(next_ack(ms), -1) << "the keeper sent for a closed endpoint";
}

TEST_F(held_ack_test, a_hold_without_a_socket_is_refused) {
  held_ack none;
  const dgram h = stamped(1);
  EXPECT_FALSE(none.hold(&peer_a, h, reinterpret_cast<const sockaddr*>(&to_name),
                         sizeof to_name));
  EXPECT_EQ(none.take(), nullptr);
}

}  // namespace
}  // namespace weft::util::rd
