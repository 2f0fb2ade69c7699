// SPDX-License-Identifier: MIT
// weft — conformance: messages from a peer that is not yet in the receiver's
// address vector. They are queued with an unknown source; once the receiver
// inserts the peer, a directed receive for the new fi_addr must match them,
// and FI_SOURCE completions must name that address. fi_av_remove makes the
// removed peer's queued messages unknown again (docs/decisions.md).
//
// Each side has its own AV, so the receiver B can be ignorant of the sender
// A while A knows B.
#include "fixture.hpp"

#include <rdma/fi_tagged.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace conformance {
namespace {

constexpr uint64_t the_tag = 0x5eed;
constexpr uint64_t marker_tag = 0x3a3a;

// One endpoint with its own AV and its own transmit and receive CQs.
struct lone_ep {
  fid_ep* ep = nullptr;
  fid_av* av = nullptr;
  fid_cq *tx = nullptr, *rx = nullptr;
  ~lone_ep() {
    if (ep) { EXPECT_EQ(fi_close(&ep->fid), 0); }
    if (av) { EXPECT_EQ(fi_close(&av->fid), 0); }
  }
};

class unknown_source_base : public provider_test {
 protected:
  bool named() const { return extra_caps() & FI_SOURCE; }

  void SetUp() override {
    provider_test::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (info->ep_attr->type != FI_EP_RDM) GTEST_SKIP() << "reliable unconnected endpoints only";
  }

  void open(lone_ep& s) {
    s.tx = open_cq(FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 512);
    s.rx = open_cq(FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 512);
    fi_av_attr attr{};
    attr.type = FI_AV_TABLE;
    ASSERT_EQ(fi_av_open(domain, &attr, &s.av, nullptr), 0);
    ASSERT_EQ(fi_endpoint(domain, info, &s.ep, nullptr), 0);
    ASSERT_EQ(fi_ep_bind(s.ep, &s.tx->fid, FI_TRANSMIT), 0);
    ASSERT_EQ(fi_ep_bind(s.ep, &s.rx->fid, FI_RECV), 0);
    ASSERT_EQ(fi_ep_bind(s.ep, &s.av->fid, 0), 0);
    ASSERT_EQ(fi_enable(s.ep), 0);
  }
  // Inserts `of`'s name into `into`'s AV.
  fi_addr_t insert(lone_ep& into, lone_ep& of) {
    char name[128];
    size_t len = sizeof name;
    EXPECT_EQ(fi_getname(&of.ep->fid, name, &len), 0);
    fi_addr_t a = FI_ADDR_NOTAVAIL;
    EXPECT_EQ(fi_av_insert(into.av, name, 1, &a, 0, nullptr), 1);
    return a;
  }

  // Drives every endpoint's progress (their transmit CQs), counting send
  // completions into `sent`.
  void drive(std::vector<lone_ep*> all) {
    for (lone_ep* s : all) {
      fi_cq_tagged_entry e;
      ssize_t n = fi_cq_read(s->tx, &e, 1);
      if (n == 1) ++sent;
      ASSERT_TRUE(n == 1 || n == -FI_EAGAIN) << fi_strerror(static_cast<int>(-n));
    }
  }
  // Waits for one receive completion on `r`, driving `all` meanwhile.
  void wait_recv(lone_ep& r, std::vector<lone_ep*> all, fi_cq_tagged_entry* out,
                 fi_addr_t* src) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      ssize_t n = fi_cq_readfrom(r.rx, out, 1, src);
      if (n == 1) return;
      ASSERT_EQ(n, -FI_EAGAIN) << fi_strerror(static_cast<int>(-n));
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "a receive never completed";
      drive(all);
      if (HasFatalFailure()) return;
    }
  }
  void wait_sent(size_t n, std::vector<lone_ep*> all) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (sent < n) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "sends never completed";
      drive(all);
      if (HasFatalFailure()) return;
    }
  }
  // Runs `r`'s progress for a moment: what was sent to it lands as
  // unexpected messages.
  void soak(std::vector<lone_ep*> all) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
    while (std::chrono::steady_clock::now() < until) {
      drive(all);
      if (HasFatalFailure()) return;
    }
  }

  static uint8_t byte_of(size_t msg, size_t i) { return static_cast<uint8_t>(msg * 31 + i * 7 + 1); }

  // Sends message number `msg`; while the provider answers -FI_EAGAIN,
  // drives `all` (the receiver must drain for the sender to go on).
  void send(lone_ep& s, fi_addr_t to, size_t msg, size_t size, bool tagged, uint64_t tag,
            std::vector<std::vector<uint8_t>>& bufs, std::vector<lone_ep*> all) {
    bufs.emplace_back(size);
    for (size_t i = 0; i < size; ++i) bufs.back()[i] = byte_of(msg, i);
    void* p = bufs.back().data();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      ssize_t r = tagged ? fi_tsend(s.ep, p, size, nullptr, to, tag, nullptr)
                         : fi_send(s.ep, p, size, nullptr, to, nullptr);
      if (r == 0) return;
      ASSERT_EQ(r, -FI_EAGAIN) << fi_strerror(static_cast<int>(-r));
      ASSERT_LT(std::chrono::steady_clock::now(), deadline);
      drive(all);
      if (HasFatalFailure()) return;
    }
  }
  // Posts a receive of `size` bytes from `from` into `buf`.
  void post(lone_ep& r, fi_addr_t from, std::vector<uint8_t>& buf, bool tagged, uint64_t tag) {
    ssize_t rc = tagged ? fi_trecv(r.ep, buf.data(), buf.size(), nullptr, from, tag, 0, &buf)
                        : fi_recv(r.ep, buf.data(), buf.size(), nullptr, from, &buf);
    ASSERT_EQ(rc, 0) << fi_strerror(static_cast<int>(-rc));
  }
  void check(const std::vector<uint8_t>& buf, size_t msg, size_t size) {
    for (size_t i = 0; i < size; ++i)
      if (buf[i] != byte_of(msg, i)) {
        ADD_FAILURE() << "message " << msg << " byte " << i << " wrong";
        return;
      }
  }

  // The sequence: A knows B, B does not know A. A sends 1 + queued
  // messages; B takes the first with a wildcard receive (source unknown),
  // inserts A, and takes the rest with receives directed at A's new address.
  // Then B answers A through that address.
  void run(size_t size, size_t queued, bool tagged) {
    SCOPED_TRACE(testing::Message() << "size " << size << ", queued " << queued
                                    << (tagged ? ", tagged" : ", untagged"));
    lone_ep a, b;
    open(a);
    open(b);
    ASSERT_FALSE(HasFatalFailure());
    const fi_addr_t b_at_a = insert(a, b);
    std::vector<std::vector<uint8_t>> out;
    out.reserve(queued + 2);
    std::vector<lone_ep*> both{&a, &b};
    sent = 0;
    for (size_t m = 0; m <= queued; ++m) {
      send(a, b_at_a, m, size, tagged, the_tag, out, both);
      ASSERT_FALSE(HasFatalFailure());
    }
    // Tagged: a last message with another tag, received first, proves that
    // everything before it reached B (one sender's messages arrive in order).
    if (tagged) send(a, b_at_a, queued + 1, 8, true, marker_tag, out, both);
    ASSERT_FALSE(HasFatalFailure());
    std::vector<uint8_t> marker(8), first(size);
    fi_cq_tagged_entry ce{};
    fi_addr_t src = 0;
    if (tagged) {
      post(b, FI_ADDR_UNSPEC, marker, true, marker_tag);
      wait_recv(b, both, &ce, &src);
      ASSERT_FALSE(HasFatalFailure());
      EXPECT_EQ(ce.op_context, &marker);
    }
    post(b, FI_ADDR_UNSPEC, first, tagged, the_tag);
    wait_recv(b, both, &ce, &src);
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_EQ(ce.op_context, &first);
    EXPECT_EQ(ce.len, size);
    check(first, 0, size);
    if (named()) { EXPECT_EQ(src, FI_ADDR_NOTAVAIL) << "A is not in B's AV yet"; }
    soak(both);  // untagged: the rest arrive unexpected
    ASSERT_FALSE(HasFatalFailure());

    const fi_addr_t a_at_b = insert(b, a);
    ASSERT_NE(a_at_b, FI_ADDR_NOTAVAIL);
    std::vector<std::vector<uint8_t>> in(queued, std::vector<uint8_t>(size));
    for (size_t m = 0; m < queued; ++m) {
      post(b, a_at_b, in[m], tagged, the_tag);
      ASSERT_FALSE(HasFatalFailure());
    }
    for (size_t m = 0; m < queued; ++m) {
      wait_recv(b, both, &ce, &src);
      ASSERT_FALSE(HasFatalFailure()) << "directed receive " << m << " of " << queued;
      ASSERT_EQ(ce.op_context, &in[m]) << "in post order";
      EXPECT_EQ(ce.len, size);
      check(in[m], m + 1, size);
      if (named()) { EXPECT_EQ(src, a_at_b); }
    }
    wait_sent(queued + 1 + tagged, both);
    ASSERT_FALSE(HasFatalFailure());

    // B answers A through the inserted address.
    std::vector<uint8_t> back(size);
    post(a, FI_ADDR_UNSPEC, back, tagged, the_tag);
    send(b, a_at_b, 7, size, tagged, the_tag, out, both);
    wait_recv(a, both, &ce, &src);
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_EQ(ce.op_context, &back);
    check(back, 7, size);
    if (named()) { EXPECT_EQ(src, b_at_a); }
    wait_sent(queued + 2 + tagged, both);
  }

  // The sizes the sequence runs at: tiny, just above the inject size, and
  // far above any eager limit (a rendezvous or a streamed message).
  std::vector<size_t> sizes() const {
    std::vector<size_t> s{8};
    size_t inject = info->tx_attr->inject_size;
    if (inject + 1 <= info->ep_attr->max_msg_size && inject + 1 > 8) s.push_back(inject + 1);
    if (size_t big = size_t{1} << 20; big <= info->ep_attr->max_msg_size) s.push_back(big);
    return s;
  }
  void run_all(bool tagged) {
    for (size_t size : sizes())
      for (size_t queued : {size_t{1}, size_t{2}, size_t{100}}) {
        if (size > 65536 && queued > 2) continue;  // 100 MiB of unexpected data proves nothing more
        run(size, queued, tagged);
        if (HasFatalFailure()) return;
      }
  }

  size_t sent = 0;
};

class unknown_source : public unknown_source_base {
  uint64_t extra_caps() const override { return FI_TAGGED | FI_DIRECTED_RECV; }
};
class unknown_source_named : public unknown_source_base {
  uint64_t extra_caps() const override { return FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE; }
};

TEST_P(unknown_source, tagged_messages_match_a_directed_receive_once_the_sender_is_inserted) {
  run_all(true);
}
TEST_P(unknown_source, messages_match_a_directed_receive_once_the_sender_is_inserted) {
  run_all(false);
}
TEST_P(unknown_source_named, tagged_messages_report_the_sender_once_it_is_inserted) {
  run_all(true);
}
TEST_P(unknown_source_named, messages_report_the_sender_once_it_is_inserted) {
  run_all(false);
}

// Two unknown senders, inserted one after the other: each directed receive
// gets only its own sender's messages.
TEST_P(unknown_source_named, two_unknown_senders_are_told_apart_as_each_is_inserted) {
  lone_ep a1, a2, b;
  open(a1);
  open(a2);
  open(b);
  ASSERT_FALSE(HasFatalFailure());
  const fi_addr_t b1 = insert(a1, b), b2 = insert(a2, b);
  std::vector<lone_ep*> all{&a1, &a2, &b};
  std::vector<std::vector<uint8_t>> out;
  out.reserve(8);
  sent = 0;
  // a1 sends messages 0, 1; a2 sends 10, 11; then markers 2 and 12.
  for (size_t m : {0, 1}) send(a1, b1, m, 64, true, the_tag, out, all);
  for (size_t m : {10, 11}) send(a2, b2, m, 64, true, the_tag, out, all);
  send(a1, b1, 2, 8, true, marker_tag, out, all);
  send(a2, b2, 12, 8, true, marker_tag, out, all);
  ASSERT_FALSE(HasFatalFailure());
  fi_cq_tagged_entry ce{};
  fi_addr_t src = 0;
  std::vector<uint8_t> m1(8), m2(8);
  post(b, FI_ADDR_UNSPEC, m1, true, marker_tag);
  post(b, FI_ADDR_UNSPEC, m2, true, marker_tag);
  for (int i = 0; i < 2; ++i) {
    wait_recv(b, all, &ce, &src);
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_EQ(src, FI_ADDR_NOTAVAIL);
  }
  // a2 first: only its messages, in order, though a1's may be older.
  const fi_addr_t at2 = insert(b, a2);
  std::vector<std::vector<uint8_t>> in(4, std::vector<uint8_t>(64));
  post(b, at2, in[0], true, the_tag);
  post(b, at2, in[1], true, the_tag);
  for (size_t k = 0; k < 2; ++k) {
    wait_recv(b, all, &ce, &src);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(ce.op_context, &in[k]);
    EXPECT_EQ(src, at2);
    check(in[k], 10 + k, 64);
  }
  const fi_addr_t at1 = insert(b, a1);
  ASSERT_NE(at1, at2);
  post(b, at1, in[2], true, the_tag);
  post(b, at1, in[3], true, the_tag);
  for (size_t k = 2; k < 4; ++k) {
    wait_recv(b, all, &ce, &src);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(ce.op_context, &in[k]);
    EXPECT_EQ(src, at1);
    check(in[k], k - 2, 64);
  }
  wait_sent(6, all);
}

// fi_av_remove of a sender whose messages are queued: they become unknown
// again (a wildcard receive still gets them, FI_SOURCE says
// FI_ADDR_NOTAVAIL, a receive directed elsewhere does not), and inserting
// the sender again gives them its new address.
TEST_P(unknown_source_named, a_removed_sender_s_queued_messages_are_unknown_until_inserted_again) {
  lone_ep a, b, c;
  open(a);
  open(b);
  open(c);
  ASSERT_FALSE(HasFatalFailure());
  const fi_addr_t b_at_a = insert(a, b);
  fi_addr_t a_at_b = insert(b, a);
  const fi_addr_t c_at_b = insert(b, c);  // holds the index a's removal frees
  std::vector<lone_ep*> all{&a, &b, &c};
  std::vector<std::vector<uint8_t>> out;
  out.reserve(4);
  sent = 0;
  for (size_t m : {0, 1, 2}) send(a, b_at_a, m, 64, true, the_tag, out, all);
  send(a, b_at_a, 3, 8, true, marker_tag, out, all);
  ASSERT_FALSE(HasFatalFailure());
  fi_cq_tagged_entry ce{};
  fi_addr_t src = 0;
  std::vector<uint8_t> marker(8);
  post(b, a_at_b, marker, true, marker_tag);
  wait_recv(b, all, &ce, &src);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(src, a_at_b);

  ASSERT_EQ(fi_av_remove(b.av, &a_at_b, 1, 0), 0);
  std::vector<std::vector<uint8_t>> in(3, std::vector<uint8_t>(64));
  // A receive directed at another peer must not take them.
  post(b, c_at_b, in[2], true, the_tag);
  post(b, FI_ADDR_UNSPEC, in[0], true, the_tag);
  wait_recv(b, all, &ce, &src);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_EQ(ce.op_context, &in[0]);
  EXPECT_EQ(src, FI_ADDR_NOTAVAIL);
  check(in[0], 0, 64);

  a_at_b = insert(b, a);
  post(b, a_at_b, in[1], true, the_tag);
  wait_recv(b, all, &ce, &src);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_EQ(ce.op_context, &in[1]);
  EXPECT_EQ(src, a_at_b);
  check(in[1], 1, 64);
  // The third is a's too: c's receive stays posted until cancelled.
  fi_cq_tagged_entry none;
  for (int i = 0; i < 100; ++i) ASSERT_EQ(fi_cq_read(b.rx, &none, 1), -FI_EAGAIN);
  ASSERT_EQ(fi_cancel(&b.ep->fid, &in[2]), 0);
  wait_sent(4, {&a, &b});
}

INSTANTIATE_TEST_SUITE_P(all, unknown_source, testing::ValuesIn(all_configs), config_name);
INSTANTIATE_TEST_SUITE_P(all, unknown_source_named, testing::ValuesIn(all_configs), config_name);

}  // namespace
}  // namespace conformance
