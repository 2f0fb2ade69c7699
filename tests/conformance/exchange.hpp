// SPDX-License-Identifier: MIT
// weft — conformance: traffic between two endpoints, whatever connects them
// (an AV, or a connection): completions are collected from every CQ
// involved, so a test waits for the one it wants while progress is driven
// on both sides.
#pragma once

#include "provider_param.hpp"

#include <rdma/fi_tagged.h>

#include <chrono>
#include <optional>
#include <vector>

namespace conformance {

struct completion {
  bool error = false;
  fi_cq_tagged_entry e{};
  fi_cq_err_entry err{};
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  void* context() const { return error ? err.op_context : e.op_context; }
};

class traffic {
 public:
  // tx sends to `dest` on rx; the CQs must be FI_CQ_FORMAT_TAGGED.
  traffic(fid_ep* tx, fid_ep* rx, fi_addr_t dest, std::vector<fid_cq*> cqs)
      : tx(tx), rx(rx), dest(dest), cqs_(std::move(cqs)) {}

  // Drives every CQ until a completion for `ctx` arrives; nullopt after
  // the timeout.
  std::optional<completion> wait(void* ctx,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      for (size_t i = 0; i < seen.size(); ++i)
        if (seen[i].context() == ctx) {
          completion c = seen[i];
          seen.erase(seen.begin() + static_cast<long>(i));
          return c;
        }
      if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
      poll();
    }
  }
  // One read of every CQ.
  void poll() {
    for (fid_cq* cq : cqs_) {
      completion c;
      ssize_t r = fi_cq_readfrom(cq, &c.e, 1, &c.src);
      if (r == 1) {
        seen.push_back(c);
      } else if (r == -FI_EAVAIL) {
        c.error = true;
        if (fi_cq_readerr(cq, &c.err, 0) == 1) seen.push_back(c);
      }
    }
  }

  fid_ep* tx;
  fid_ep* rx;
  fi_addr_t dest;
  std::vector<completion> seen;

 private:
  std::vector<fid_cq*> cqs_;
};

inline std::vector<char> pattern(size_t n, unsigned seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>(i * 131 + seed * 7 + (i >> 12));
  return v;
}

// One message of `size` bytes, tagged or not, with the receive posted first
// (or after the send when `unexpected`): content, length, flags, tag.
inline void exchange(traffic& t, size_t size, bool tagged, bool unexpected = false) {
  SCOPED_TRACE(testing::Message() << size << " bytes, " << (tagged ? "tagged" : "untagged")
                                  << (unexpected ? ", unexpected" : ""));
  std::vector<char> out = pattern(size, static_cast<unsigned>(size % 251));
  std::vector<char> in(size + 16, 0);
  fi_context sctx, rctx;
  const uint64_t tag = 0x1234567800000000ull + size;
  auto post = [&] {
    if (tagged)
      ASSERT_EQ(fi_trecv(t.rx, in.data(), size, nullptr, FI_ADDR_UNSPEC, tag, 0, &rctx), 0);
    else
      ASSERT_EQ(fi_recv(t.rx, in.data(), size, nullptr, FI_ADDR_UNSPEC, &rctx), 0);
  };
  if (!unexpected) post();
  if (tagged)
    ASSERT_EQ(fi_tsend(t.tx, out.data(), size, nullptr, t.dest, tag, &sctx), 0);
  else
    ASSERT_EQ(fi_send(t.tx, out.data(), size, nullptr, t.dest, &sctx), 0);
  if (unexpected) {
    // The message travels (and, at the receiver, arrives) before the
    // receive exists. Its send may complete only once it is received.
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
    while (std::chrono::steady_clock::now() < until) t.poll();
    post();
  }
  auto r = t.wait(&rctx);
  ASSERT_TRUE(r.has_value()) << "no receive completion";
  ASSERT_FALSE(r->error) << fi_strerror(r->err.err);
  EXPECT_EQ(r->e.len, size);
  EXPECT_TRUE(r->e.flags & FI_RECV);
  EXPECT_TRUE(r->e.flags & (tagged ? FI_TAGGED : FI_MSG));
  if (tagged) {
    EXPECT_EQ(r->e.tag, tag);
  }
  EXPECT_TRUE(std::equal(out.begin(), out.end(), in.begin())) << "payload differs";
  EXPECT_EQ(in[size], 0) << "wrote past the message";
  auto s = t.wait(&sctx);
  ASSERT_TRUE(s && !s->error);
  EXPECT_TRUE(s->e.flags & FI_SEND);
}

// FI_PEEK, FI_PEEK | FI_CLAIM then FI_CLAIM, FI_PEEK | FI_DISCARD.
inline void peek_claim_discard(traffic& t) {
  fi_context s1, s2;
  ASSERT_EQ(fi_tsend(t.tx, "first", 6, nullptr, t.dest, 1, &s1), 0);
  ASSERT_EQ(fi_tsend(t.tx, "second!", 8, nullptr, t.dest, 2, &s2), 0);
  ASSERT_TRUE(t.wait(&s1).has_value());
  ASSERT_TRUE(t.wait(&s2).has_value());
  auto peek = [&](uint64_t tag, uint64_t flags, fi_context* ctx) -> std::optional<completion> {
    iovec iov{nullptr, 0};
    fi_msg_tagged m{};
    m.msg_iov = &iov;
    m.iov_count = 0;
    m.addr = FI_ADDR_UNSPEC;
    m.tag = tag;
    m.context = ctx;
    // The sends are complete at the sender; retry until the message is here.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
      EXPECT_EQ(fi_trecvmsg(t.rx, &m, FI_PEEK | flags), 0);
      auto c = t.wait(ctx);
      if (!c || !c->error || c->err.err != FI_ENOMSG) return c;
      if (std::chrono::steady_clock::now() > deadline) return c;
    }
  };
  fi_context p;
  auto c = peek(1, 0, &p);
  ASSERT_TRUE(c && !c->error);
  EXPECT_EQ(c->e.len, 6u);
  EXPECT_EQ(c->e.tag, 1u);
  // Peeking leaves it; claiming takes it for the FI_CLAIM receive.
  fi_context claim;
  c = peek(1, FI_CLAIM, &claim);
  ASSERT_TRUE(c && !c->error);
  char buf[16] = {};
  iovec iov{buf, sizeof buf};
  fi_msg_tagged m{};
  m.msg_iov = &iov;
  m.iov_count = 1;
  m.addr = FI_ADDR_UNSPEC;
  m.tag = 1;
  m.context = &claim;
  ASSERT_EQ(fi_trecvmsg(t.rx, &m, FI_CLAIM), 0);
  c = t.wait(&claim);
  ASSERT_TRUE(c && !c->error);
  EXPECT_STREQ(buf, "first");
  // Discarded: gone, and a later peek misses.
  fi_context d;
  c = peek(2, FI_DISCARD, &d);
  ASSERT_TRUE(c && !c->error);
  EXPECT_EQ(c->e.len, 8u);
  fi_context miss;
  iovec none{nullptr, 0};
  m.msg_iov = &none;
  m.iov_count = 0;
  m.tag = 2;
  m.context = &miss;
  ASSERT_EQ(fi_trecvmsg(t.rx, &m, FI_PEEK), 0);
  c = t.wait(&miss);
  ASSERT_TRUE(c && c->error);
  EXPECT_EQ(c->err.err, FI_ENOMSG);
}

// fi_senddata, fi_tsenddata, fi_injectdata, fi_sendmsg with FI_REMOTE_CQ_DATA.
inline void remote_cq_data(traffic& t) {
  char in[4][8] = {};
  fi_context r[4], s[3];
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(fi_recv(t.rx, in[i], sizeof in[i], nullptr, FI_ADDR_UNSPEC, &r[i]), 0);
  ASSERT_EQ(fi_trecv(t.rx, in[2], sizeof in[2], nullptr, FI_ADDR_UNSPEC, 9, 0, &r[2]), 0);
  ASSERT_EQ(fi_recv(t.rx, in[3], sizeof in[3], nullptr, FI_ADDR_UNSPEC, &r[3]), 0);
  ASSERT_EQ(fi_senddata(t.tx, "a", 2, nullptr, 0xdeadbeefcafef00dull, t.dest, &s[0]), 0);
  ASSERT_EQ(fi_injectdata(t.tx, "b", 2, 7, t.dest), 0);
  ASSERT_EQ(fi_tsenddata(t.tx, "c", 2, nullptr, 8, t.dest, 9, &s[1]), 0);
  iovec iov{const_cast<char*>("d"), 2};
  fi_msg m{};
  m.msg_iov = &iov;
  m.iov_count = 1;
  m.addr = t.dest;
  m.context = &s[2];
  m.data = 10;
  ASSERT_EQ(fi_sendmsg(t.tx, &m, FI_REMOTE_CQ_DATA | FI_COMPLETION), 0);
  const uint64_t want[4] = {0xdeadbeefcafef00dull, 7, 8, 10};
  for (int i = 0; i < 4; ++i) {
    auto c = t.wait(&r[i]);
    ASSERT_TRUE(c && !c->error) << i;
    EXPECT_TRUE(c->e.flags & FI_REMOTE_CQ_DATA) << i;
    EXPECT_EQ(c->e.data, want[i]) << i;
    EXPECT_EQ(in[i][0], "abcd"[i]);
  }
  for (auto& x : s) ASSERT_TRUE(t.wait(&x).has_value());
}

}  // namespace conformance
