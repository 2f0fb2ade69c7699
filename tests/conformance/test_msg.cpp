// SPDX-License-Identifier: MIT
// weft — conformance: messages between two endpoints of one process.
#include "fixture.hpp"

#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace conformance {
namespace {

class msg : public provider_test {};

class source : public provider_test {
  uint64_t extra_caps() const override { return FI_SOURCE; }
};

TEST_P(msg, send_and_receive_every_form) {
  auto [cq, ea, eb, a, b] = open_two_eps();
  ASSERT_TRUE(ea && eb);
  char rbuf[64];
  fi_context rctx, sctx;
  fi_cq_data_entry e;
  for (int form = 0; form < 4; ++form) {
    std::memset(rbuf, 0, sizeof rbuf);
    std::string text = "message form " + std::to_string(form);
    ASSERT_EQ(fi_recv(eb, rbuf, sizeof rbuf, nullptr, FI_ADDR_UNSPEC, &rctx), 0);
    iovec iov[2] = {{text.data(), 4}, {text.data() + 4, text.size() + 1 - 4}};
    switch (form) {
      case 0: ASSERT_EQ(fi_send(ea, text.c_str(), text.size() + 1, nullptr, b, &sctx), 0); break;
      case 1: ASSERT_EQ(fi_sendv(ea, iov, nullptr, 2, b, &sctx), 0); break;
      case 2: {
        fi_msg m{};
        m.msg_iov = iov;
        m.iov_count = 2;
        m.addr = b;
        m.context = &sctx;
        ASSERT_EQ(fi_sendmsg(ea, &m, FI_COMPLETION), 0);
        break;
      }
      case 3: ASSERT_EQ(fi_inject(ea, text.c_str(), text.size() + 1, b), 0); break;
    }
    bool got_send = form == 3, got_recv = false;
    while (!got_send || !got_recv) {
      ASSERT_EQ(read_one(cq, &e), 1);
      if (e.flags & FI_RECV) {
        EXPECT_EQ(e.op_context, &rctx);
        EXPECT_EQ(e.len, text.size() + 1);
        EXPECT_EQ(e.flags & (FI_RECV | FI_MSG), uint64_t(FI_RECV | FI_MSG));
        EXPECT_STREQ(rbuf, text.c_str());
        got_recv = true;
      } else {
        EXPECT_EQ(e.op_context, &sctx);
        EXPECT_TRUE(e.flags & FI_SEND);
        got_send = true;
      }
    }
  }
  fi_cq_data_entry none;
  EXPECT_EQ(fi_cq_read(cq, &none, 1), -FI_EAGAIN);
}

// FI_MORE is a hint: a send that carries it and is followed by nothing
// still arrives, promptly. The sender's CQ is read (its progress driven)
// only under manual progress; under automatic progress nothing of the
// application's runs on the sender's side, and a send held for the next
// FI_MORE-less one waited for the progress thread's next timer (2 s: Open
// MPI's one-sided tests over tcp crawled). Delivery takes milliseconds; the
// bound is a second.
TEST_P(msg, a_send_with_fi_more_and_nothing_after_it_still_arrives) {
  fid_cq* ca = open_cq();
  fid_cq* cb = open_cq();
  open_av();
  fi_addr_t a = FI_ADDR_NOTAVAIL, b = FI_ADDR_NOTAVAIL;
  fid_ep* ea = open_ep(ca, &a);
  fid_ep* eb = open_ep(cb, &b);
  ASSERT_TRUE(ea && eb);
  char in[16] = {};
  fi_context rctx, sctx;
  const bool sender_polls = GetParam().progress != FI_PROGRESS_AUTO;
  // A first message sets up whatever connection the provider makes, so the
  // FI_MORE send finds its path idle.
  ASSERT_EQ(fi_recv(eb, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &rctx), 0);
  ASSERT_EQ(fi_send(ea, "warm", 5, nullptr, b, &sctx), 0);
  {
    int got_a = 0, got_b = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while ((!got_a || !got_b) && std::chrono::steady_clock::now() < deadline) {
      fi_cq_data_entry w;
      if (fi_cq_read(ca, &w, 1) == 1) ++got_a;
      if (fi_cq_read(cb, &w, 1) == 1) ++got_b;
    }
    ASSERT_TRUE(got_a && got_b) << "the first message did not go through";
  }
  ASSERT_EQ(fi_recv(eb, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &rctx), 0);
  iovec iov{const_cast<char*>("more"), 5};
  fi_msg m{&iov, nullptr, 1, b, &sctx, 0};
  ASSERT_EQ(fi_sendmsg(ea, &m, FI_MORE | FI_COMPLETION), 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  fi_cq_data_entry e{};
  ssize_t n = 0;
  while (n != 1 && std::chrono::steady_clock::now() < deadline) {
    if (sender_polls) {
      fi_cq_data_entry s;
      (void)fi_cq_read(ca, &s, 1);
    }
    n = fi_cq_read(cb, &e, 1);
  }
  ASSERT_EQ(n, 1) << "the FI_MORE send did not leave within a second";
  EXPECT_EQ(e.op_context, &rctx);
  EXPECT_STREQ(in, "more");
}

// The top bits of an operation's flags name no flag of fi_msg(3); weft's
// providers use one internally (no completion). An application that sets
// them in fi_sendmsg / fi_tsendmsg gets its completion, or a refusal: never
// an accepted send whose completion silently never comes (tcp's once did).
TEST_P(msg, unnamed_high_flag_bits_never_drop_a_completion) {
  auto [cq, ea, eb, a, b] = open_two_eps();
  ASSERT_TRUE(ea && eb);
  for (uint64_t bit : {1ULL << 61, 1ULL << 62, 1ULL << 63}) {
    const int n = __builtin_ctzll(bit);
    char in[16] = {};
    fi_context rctx, sctx;
    ASSERT_EQ(fi_recv(eb, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &rctx), 0);
    iovec iov{const_cast<char*>("high"), 5};
    fi_msg m{&iov, nullptr, 1, b, &sctx, 0};
    ssize_t r = fi_sendmsg(ea, &m, FI_COMPLETION | bit);
    fi_cq_data_entry e{};
    if (r != 0) {
      EXPECT_EQ(r, -FI_EBADFLAGS) << "bit " << n;
      ASSERT_EQ(fi_cancel(&eb->fid, &rctx), 0);
      ASSERT_EQ(read_one(cq, &e), -FI_EAVAIL) << "bit " << n << ": the cancelled receive";
      fi_cq_err_entry err{};
      ASSERT_EQ(fi_cq_readerr(cq, &err, 0), 1);
      continue;
    }
    bool sent = false, got = false;
    for (int i = 0; i < 2 && read_one(cq, &e) == 1; ++i) {
      sent |= e.op_context == &sctx;
      got |= e.op_context == &rctx;
    }
    EXPECT_TRUE(got) << "bit " << n << ": the message did not arrive";
    EXPECT_TRUE(sent) << "bit " << n << ": no send completion";
    EXPECT_STREQ(in, "high");
  }
}

TEST_P(msg, scatter_receive) {
  auto [cq, ea, eb, a, b] = open_two_eps();
  char p1[3], p2[64] = {};
  iovec riov[2] = {{p1, sizeof p1}, {p2, sizeof p2}};
  ASSERT_EQ(fi_recvv(eb, riov, nullptr, 2, FI_ADDR_UNSPEC, nullptr), 0);
  ASSERT_EQ(fi_inject(ea, "abcdefgh", 9, b), 0);
  fi_cq_data_entry e;
  ASSERT_EQ(read_one(cq, &e), 1);
  EXPECT_EQ(e.len, 9u);
  EXPECT_EQ(std::memcmp(p1, "abc", 3), 0);
  EXPECT_STREQ(p2, "defgh");
}

// Zero-byte messages name no buffer (MPI barriers send them from NULL). The
// first ones on a fresh pair are sent before any connection exists, so a
// connection-oriented provider queues them and keeps what an inject sent.
TEST_P(msg, zero_byte_messages_from_null_buffers) {
  auto [cq, ea, eb, a, b] = open_two_eps();
  ASSERT_TRUE(ea && eb);
  fi_context r1, r2, s2;
  ASSERT_EQ(fi_recv(eb, nullptr, 0, nullptr, FI_ADDR_UNSPEC, &r1), 0);
  ASSERT_EQ(fi_recv(eb, nullptr, 0, nullptr, FI_ADDR_UNSPEC, &r2), 0);
  ASSERT_EQ(fi_inject(ea, nullptr, 0, b), 0);
  ASSERT_EQ(fi_send(ea, nullptr, 0, nullptr, b, &s2), 0);
  int recvs = 0, sends = 0;
  while (recvs + sends < 3) {
    fi_cq_data_entry e;
    ASSERT_EQ(read_one(cq, &e), 1);
    if (e.flags & FI_RECV) {
      EXPECT_EQ(e.op_context, recvs == 0 ? &r1 : &r2) << "in posting order";
      EXPECT_EQ(e.len, 0u);
      ++recvs;
    } else {
      EXPECT_EQ(e.op_context, &s2);
      ++sends;
    }
  }
  EXPECT_EQ(sends, 1);
}

// A null buffer with a length is refused where it is posted, in every form
// (a provider copying in user space would otherwise fault on it, later and
// inside progress), and the endpoint goes on working.
TEST_P(msg, null_buffer_with_a_length_is_refused) {
  auto [cq, ea, eb, a, b] = open_two_eps();
  ASSERT_TRUE(ea && eb);
  fi_context ctx;
  EXPECT_EQ(fi_recv(eb, nullptr, 8, nullptr, FI_ADDR_UNSPEC, &ctx), -FI_EINVAL);
  EXPECT_EQ(fi_send(ea, nullptr, 8, nullptr, b, &ctx), -FI_EINVAL);
  EXPECT_EQ(fi_inject(ea, nullptr, 8, b), -FI_EINVAL);
  if (info->domain_attr->cq_data_size) {
    EXPECT_EQ(fi_senddata(ea, nullptr, 8, nullptr, 1, b, &ctx), -FI_EINVAL);
  }
  EXPECT_EQ(fi_send(ea, nullptr, 1 << 20, nullptr, b, &ctx), -FI_EINVAL);
  char one = 'x';
  iovec v[2] = {{&one, 1}, {nullptr, 4}};
  EXPECT_EQ(fi_sendv(ea, v, nullptr, 2, b, &ctx), -FI_EINVAL);
  EXPECT_EQ(fi_recvv(eb, v, nullptr, 2, FI_ADDR_UNSPEC, &ctx), -FI_EINVAL);
  // Still usable.
  char in = 0;
  fi_context r, s;
  ASSERT_EQ(fi_recv(eb, &in, 1, nullptr, FI_ADDR_UNSPEC, &r), 0);
  ASSERT_EQ(fi_send(ea, &one, 1, nullptr, b, &s), 0);
  int got = 0;
  while (got < 2) {
    fi_cq_data_entry e;
    ASSERT_EQ(read_one(cq, &e), 1);
    ++got;
  }
  EXPECT_EQ(in, 'x');
}

TEST_P(source, address_of_a_receive) {
  auto [cq, ea, eb, a, b] = open_two_eps();
  char buf[8];
  ASSERT_EQ(fi_recv(eb, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  ASSERT_EQ(fi_inject(ea, "x", 1, b), 0);
  fi_cq_data_entry e;
  fi_addr_t src = FI_ADDR_UNSPEC;
  ASSERT_EQ(read_one(cq, &e, &src), 1);
  EXPECT_EQ(src, a);
}

TEST_P(msg, truncation_is_an_error_completion) {
  auto [cq, ea, eb, a, b] = open_two_eps();
  char small[4];
  fi_context ctx;
  ASSERT_EQ(fi_recv(eb, small, sizeof small, nullptr, FI_ADDR_UNSPEC, &ctx), 0);
  ASSERT_EQ(fi_inject(ea, "0123456789", 10, b), 0);
  fi_cq_data_entry e;
  ASSERT_EQ(read_one(cq, &e), -FI_EAVAIL);
  fi_cq_err_entry err{};
  ASSERT_EQ(fi_cq_readerr(cq, &err, 0), 1);
  EXPECT_EQ(err.err, FI_ETRUNC);
  EXPECT_EQ(err.op_context, &ctx);
  EXPECT_EQ(err.len, sizeof small);
  EXPECT_EQ(err.olen, 6u);
  EXPECT_EQ(std::memcmp(small, "0123", 4), 0);
  EXPECT_EQ(fi_cq_readerr(cq, &err, 0), -FI_EAGAIN);
  EXPECT_EQ(fi_cq_read(cq, &e, 1), -FI_EAGAIN);
}

TEST_P(msg, cancel_a_receive) {
  fid_cq* cq = open_cq();
  open_av();
  fi_addr_t a;
  fid_ep* ea = open_ep(cq, &a);
  char buf[8];
  fi_context ctx;
  ASSERT_EQ(fi_recv(ea, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, &ctx), 0);
  ASSERT_EQ(fi_cancel(&ea->fid, &ctx), 0);
  fi_cq_data_entry e;
  ASSERT_EQ(fi_cq_read(cq, &e, 1), -FI_EAVAIL);
  fi_cq_err_entry err{};
  ASSERT_EQ(fi_cq_readerr(cq, &err, 0), 1);
  EXPECT_EQ(err.err, FI_ECANCELED);
  EXPECT_EQ(err.op_context, &ctx);
  EXPECT_EQ(fi_cancel(&ea->fid, &ctx), -FI_ENOENT);
}

// FI_SELECTIVE_COMPLETION on both directions: only operations carrying
// FI_COMPLETION write a completion. Two sends (one silent) into two
// receives (one silent): both messages land, and exactly the two operations
// that asked report, the receive with its length.
TEST_P(msg, selective_completion) {
  fid_cq* cq = open_cq();
  open_av();
  fid_ep* ep = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
  eps.push_back(ep);
  ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION), 0);
  ASSERT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
  ASSERT_EQ(fi_enable(ep), 0);
  char name[64];
  size_t len = sizeof name;
  ASSERT_EQ(fi_getname(&ep->fid, name, &len), 0);
  fi_addr_t self;
  ASSERT_EQ(fi_av_insert(av, name, 1, &self, 0, nullptr), 1);
  char quiet_buf[8] = {}, loud_buf[8] = {};
  fi_context quiet_rx, loud_rx, s1, s2;
  // The silent receive first, so on an ordered provider the silent send lands in it.
  ASSERT_EQ(fi_recv(ep, quiet_buf, sizeof quiet_buf, nullptr, FI_ADDR_UNSPEC, &quiet_rx), 0);
  iovec riov{loud_buf, sizeof loud_buf};
  fi_msg rm{};
  rm.msg_iov = &riov;
  rm.iov_count = 1;
  rm.addr = FI_ADDR_UNSPEC;
  rm.context = &loud_rx;
  ASSERT_EQ(fi_recvmsg(ep, nullptr, 0), -FI_EINVAL);
  ASSERT_EQ(fi_recvmsg(ep, &rm, FI_COMPLETION), 0);
  ASSERT_EQ(fi_send(ep, "a", 1, nullptr, self, &s1), 0);  // no FI_COMPLETION: silent
  iovec iov{const_cast<char*>("b"), 1};
  fi_msg m{};
  m.msg_iov = &iov;
  m.iov_count = 1;
  m.addr = self;
  m.context = &s2;
  ASSERT_EQ(fi_sendmsg(ep, &m, FI_COMPLETION), 0);
  std::vector<fi_cq_data_entry> seen;
  fi_cq_data_entry e;
  auto count = [&](void* c) {
    return std::count_if(seen.begin(), seen.end(),
                         [c](const fi_cq_data_entry& x) { return x.op_context == c; });
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline && !(count(&s2) && count(&loud_rx)))
    if (fi_cq_read(cq, &e, 1) == 1) seen.push_back(e);
  for (int i = 0; i < 1000; ++i)  // anything else would be queued by now
    if (fi_cq_read(cq, &e, 1) == 1) seen.push_back(e);
  EXPECT_EQ(count(&s1), 0);
  EXPECT_EQ(count(&quiet_rx), 0);
  ASSERT_EQ(count(&s2), 1);
  ASSERT_EQ(count(&loud_rx), 1) << "the receive posted with FI_COMPLETION never completed";
  EXPECT_EQ(seen.size(), 2u);
  for (const fi_cq_data_entry& x : seen)
    if (x.op_context == &loud_rx) {
      EXPECT_TRUE(x.flags & FI_RECV);
      EXPECT_EQ(x.len, 1u);
    }
  // Both messages landed, one in each buffer (in either order: datagrams
  // may be reordered).
  std::string got{quiet_buf[0], loud_buf[0]};
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, "ab");
}

TEST_P(msg, data_path_before_enable_is_opbadstate) {
  fid_ep* ep = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
  eps.push_back(ep);
  char buf[4];
  EXPECT_EQ(fi_send(ep, buf, 1, nullptr, 0, nullptr), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_recv(ep, buf, 1, nullptr, 0, nullptr), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_enable(ep), -FI_ENOAV);  // nothing bound
}

// A full CQ holds data back; nothing is dropped (the datagrams wait in the
// socket until the application makes room).
TEST_P(msg, full_cq_loses_nothing) {
  fid_cq* cq = open_cq(FI_CQ_FORMAT_DATA, FI_WAIT_NONE, 4);
  open_av();
  fi_addr_t a, b;
  fid_ep* ea = open_ep(cq, &a);
  fid_ep* eb = open_ep(cq, &b);
  constexpr int n = 12;
  char bufs[n][8];
  for (auto& buf : bufs) ASSERT_EQ(fi_recv(eb, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  for (int i = 0; i < n; ++i) {
    char msg[8];
    snprintf(msg, sizeof msg, "m%d", i);
    ASSERT_EQ(fi_inject(ea, msg, sizeof msg, b), 0);
  }
  int got = 0;
  fi_cq_data_entry e[2];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (got < n && std::chrono::steady_clock::now() < deadline) {
    ssize_t r = fi_cq_read(cq, e, 2);
    if (r > 0) got += static_cast<int>(r);
    else ASSERT_EQ(r, -FI_EAGAIN);
  }
  EXPECT_EQ(got, n);
  for (int i = 0; i < n; ++i) {
    char want[8];
    snprintf(want, sizeof want, "m%d", i);
    EXPECT_STREQ(bufs[i], want);
  }
}

// The same with the messages already queued unexpected when the receives
// come: each receive takes one at once, so the completions are written while
// the application reads nothing. Past the CQ's room they wait, in order,
// and none is lost (shm lost them before).
TEST_P(msg, full_cq_loses_nothing_when_receives_take_queued_messages) {
  fid_cq* cq = open_cq(FI_CQ_FORMAT_DATA, FI_WAIT_NONE, 4);
  open_av();
  fi_addr_t a, b;
  fid_ep* ea = open_ep(cq, &a);
  fid_ep* eb = open_ep(cq, &b);
  constexpr int n = 12;
  for (int i = 0; i < n; ++i) {
    char msg[8];
    snprintf(msg, sizeof msg, "q%d", i);
    ASSERT_EQ(fi_inject(ea, msg, sizeof msg, b), 0);
  }
  // Progress with nothing posted: the messages arrive and wait unexpected.
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  while (std::chrono::steady_clock::now() < until) fi_cq_read(cq, nullptr, 0);
  char bufs[n][8] = {};
  fi_context ctx[n];
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(fi_recv(eb, bufs[i], sizeof bufs[i], nullptr, FI_ADDR_UNSPEC, &ctx[i]), 0);
  std::vector<void*> order;
  fi_cq_data_entry e[2];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (order.size() < size_t(n) && std::chrono::steady_clock::now() < deadline) {
    ssize_t r = fi_cq_read(cq, e, 2);
    if (r > 0) {
      for (ssize_t k = 0; k < r; ++k) order.push_back(e[k].op_context);
    } else {
      ASSERT_EQ(r, -FI_EAGAIN);
    }
  }
  ASSERT_EQ(order.size(), size_t(n)) << "receive completions lost";
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(order[i], &ctx[i]) << i;
    char want[8];
    snprintf(want, sizeof want, "q%d", i);
    EXPECT_STREQ(bufs[i], want);
  }
}

// Two receivers share one small receive CQ, each driven by a thread of its
// own (FI_THREAD_SAFE; each also has a transmit CQ of its own, which its
// thread reads). A receiver that found room in the shared CQ before taking
// a message may find that room taken by the other by the time it writes the
// completion: it must keep the completion until there is room, never drop
// it (shm's per-message path dropped it). Every message completes one
// receive.
TEST_P(msg, a_receive_cq_shared_by_two_busy_endpoints_loses_nothing) {
  if (GetParam().threading != FI_THREAD_SAFE) GTEST_SKIP() << "threads on one CQ: FI_THREAD_SAFE";
  if (info->ep_attr->type != FI_EP_RDM) GTEST_SKIP() << "reliable endpoints only";
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  constexpr int per_receiver = 4000;
#else
  constexpr int per_receiver = 20000;
#endif
  constexpr int window = 8;
  fid_cq* shared = open_cq(FI_CQ_FORMAT_DATA, FI_WAIT_NONE, 2);
  fid_cq* own[2] = {open_cq(), open_cq()};
  fid_cq* scq = open_cq();
  open_av();
  fi_addr_t s_addr, r_addr[2];
  fid_ep* sender = open_ep(scq, &s_addr);
  fid_ep* r[2];
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(fi_endpoint(domain, info, &r[i], nullptr), 0);
    eps.push_back(r[i]);
    ASSERT_EQ(fi_ep_bind(r[i], &shared->fid, FI_RECV), 0);
    ASSERT_EQ(fi_ep_bind(r[i], &own[i]->fid, FI_TRANSMIT), 0);
    ASSERT_EQ(fi_ep_bind(r[i], &av->fid, 0), 0);
    ASSERT_EQ(fi_enable(r[i]), 0);
    char name[128];
    size_t len = sizeof name;
    ASSERT_EQ(fi_getname(&r[i]->fid, name, &len), 0);
    ASSERT_EQ(fi_av_insert(av, name, 1, &r_addr[i], 0, nullptr), 1);
  }
  char bufs[2][window][8];
  fi_context ctx[2][window];
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < window; ++k)
      ASSERT_EQ(fi_recv(r[i], bufs[i][k], 8, nullptr, FI_ADDR_UNSPEC, &ctx[i][k]), 0);

  std::atomic<bool> stop{false};
  std::vector<std::thread> drivers;
  for (int i = 0; i < 2; ++i)
    drivers.emplace_back([&, i] {
      while (!stop.load(std::memory_order_relaxed)) fi_cq_read(own[i], nullptr, 0);
    });
  std::atomic<int> sent{0};
  std::thread send_thread([&] {
    for (int k = 0; k < 2 * per_receiver && !stop.load(std::memory_order_relaxed);) {
      uint64_t v = uint64_t(k);
      ssize_t rc = fi_inject(sender, &v, sizeof v, r_addr[k % 2]);
      if (rc == -FI_EAGAIN) {
        fi_cq_read(scq, nullptr, 0);
        continue;
      }
      if (rc != 0) break;
      sent.store(++k, std::memory_order_relaxed);
    }
    // Manual progress: what the provider took may still need the sender's
    // calls to leave (a socket's backlog, a retransmission).
    while (!stop.load(std::memory_order_relaxed)) fi_cq_read(scq, nullptr, 0);
  });
  int got[2] = {0, 0};
  bool posted[2][window];
  std::fill(&posted[0][0], &posted[0][0] + 2 * window, true);
  auto last = std::chrono::steady_clock::now();
  while (got[0] + got[1] < 2 * per_receiver &&
         std::chrono::steady_clock::now() - last < std::chrono::seconds(5)) {
    fi_cq_data_entry e;
    ssize_t n = fi_cq_read(shared, &e, 1);
    if (n == -FI_EAGAIN) continue;
    if (n != 1) {
      ADD_FAILURE() << "fi_cq_read: " << n;
      break;
    }
    last = std::chrono::steady_clock::now();
    const int i = e.op_context >= &ctx[1][0] ? 1 : 0;
    const auto k = static_cast<fi_context*>(e.op_context) - &ctx[i][0];
    if (k < 0 || k >= window) {
      ADD_FAILURE() << "a completion for no receive of ours";
      break;
    }
    if (!posted[i][k]) {
      ADD_FAILURE() << "a second completion for one receive";
      break;
    }
    ++got[i];
    EXPECT_EQ(e.len, 8u);
    posted[i][k] = false;
    ssize_t rc;
    while ((rc = fi_recv(r[i], bufs[i][k], 8, nullptr, FI_ADDR_UNSPEC, e.op_context)) ==
           -FI_EAGAIN) {
    }
    posted[i][k] = rc == 0;
    if (rc != 0) {
      ADD_FAILURE() << "fi_recv: " << rc;
      break;
    }
  }
  stop = true;
  send_thread.join();
  for (auto& t : drivers) t.join();
  EXPECT_EQ(sent.load(), 2 * per_receiver);
  EXPECT_EQ(got[0], per_receiver) << "receive completions lost (first receiver)";
  EXPECT_EQ(got[1], per_receiver) << "receive completions lost (second receiver)";
}

// Posting more receives than the receive queue holds is -FI_EAGAIN.
TEST_P(msg, full_receive_queue_is_eagain) {
  fid_cq* cq = open_cq();
  open_av();
  fi_addr_t a;
  fid_ep* ep = open_ep(cq, &a);
  char buf[4];
  size_t posted = 0;
  ssize_t r = 0;
  while ((r = fi_recv(ep, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, nullptr)) == 0 &&
         posted <= info->rx_attr->size * 4)
    ++posted;
  EXPECT_EQ(r, -FI_EAGAIN);
  EXPECT_GE(posted, info->rx_attr->size);
  EXPECT_EQ(fi_rx_size_left(ep), 0);
}

TEST_P(msg, binding_the_wrong_class_is_einval) {
  fid_ep* ep = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
  eps.push_back(ep);
  EXPECT_EQ(fi_ep_bind(ep, &fabric->fid, 0), -FI_EINVAL);
  EXPECT_EQ(fi_ep_bind(ep, &domain->fid, 0), -FI_EINVAL);
  EXPECT_EQ(fi_ep_bind(ep, &ep->fid, 0), -FI_EINVAL);
  fid_cq* cq = open_cq();
  EXPECT_EQ(fi_ep_bind(ep, &cq->fid, 0), -FI_EINVAL);             // no direction
  EXPECT_EQ(fi_ep_bind(ep, &cq->fid, 1ULL << 62), -FI_EBADFLAGS);  // unknown flag
  EXPECT_EQ(fi_ep_bind(ep, &cq->fid, FI_RECV), 0);
  EXPECT_EQ(fi_ep_bind(ep, &cq->fid, FI_RECV), -FI_EINVAL);  // one CQ per direction
}

TEST_P(msg, bad_input) {
  fid_cq* cq = open_cq();
  open_av();
  fi_addr_t a;
  fid_ep* ep = open_ep(cq, &a);
  char buf[4];
  // An address the AV never gave out.
  EXPECT_EQ(fi_send(ep, buf, 1, nullptr, 12345, nullptr), -FI_EINVAL);
  // Too many iovs, too large a message.
  iovec iov[64] = {};
  EXPECT_EQ(fi_sendv(ep, iov, nullptr, 64, a, nullptr), -FI_EINVAL);
  // The length is refused before the buffer is touched.
  EXPECT_EQ(fi_send(ep, buf, info->ep_attr->max_msg_size + 1, nullptr, a, nullptr), -FI_EMSGSIZE);
  // Binding the wrong class of object, or after enable.
  EXPECT_EQ(fi_ep_bind(ep, &domain->fid, 0), -FI_EOPBADSTATE);
  // A CQ still bound cannot close; neither can the AV.
  EXPECT_EQ(fi_close(&cq->fid), -FI_EBUSY);
  EXPECT_EQ(fi_close(&av->fid), -FI_EBUSY);
  // Unknown options.
  size_t len = 0;
  EXPECT_EQ(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, 9999, buf, &len), -FI_ENOPROTOOPT);
  size_t min = 0;
  len = sizeof min;
  EXPECT_EQ(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, &len), 0);
}

class multi_recv : public provider_test {
  uint64_t extra_caps() const override { return FI_MULTI_RECV; }
};

TEST_P(multi_recv, fills_one_buffer) {
  ASSERT_TRUE(info->caps & FI_MULTI_RECV);
  auto [cq, ea, eb, a, b] = open_two_eps();
  size_t min = 16;
  ASSERT_EQ(fi_setopt(&eb->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof min), 0);
  char big[30];  // 10 + 10 leaves 10 < 16: the second receive releases it
  iovec iov{big, sizeof big};
  fi_msg m{};
  m.msg_iov = &iov;
  m.iov_count = 1;
  m.addr = FI_ADDR_UNSPEC;
  fi_context ctx;
  m.context = &ctx;
  ASSERT_EQ(fi_recvmsg(eb, &m, FI_MULTI_RECV), 0);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(fi_inject(ea, "0123456789", 10, b), 0);
  fi_cq_data_entry e1, e2;
  ASSERT_EQ(read_one(cq, &e1), 1);
  ASSERT_EQ(read_one(cq, &e2), 1);
  EXPECT_EQ(e1.buf, big);
  EXPECT_EQ(e2.buf, big + 10);
  EXPECT_FALSE(e1.flags & FI_MULTI_RECV);
  EXPECT_TRUE(e2.flags & FI_MULTI_RECV);
}

// The same exchange over IPv6 loopback, where the host has it.
TEST(msg_ipv6, loopback_exchange) {
  fi_info* hints = hints_for({"udp", FI_EP_DGRAM, FI_THREAD_DOMAIN});
  hints->addr_format = FI_SOCKADDR_IN6;
  fi_info* info = nullptr;
  if (fi_getinfo(FI_VERSION(1, 17), "::1", nullptr, FI_SOURCE, hints, &info) != 0) {
    fi_freeinfo(hints);
    GTEST_SKIP() << "no IPv6 loopback here";
  }
  EXPECT_EQ(info->addr_format, static_cast<uint32_t>(FI_SOCKADDR_IN6));
  EXPECT_EQ(info->src_addrlen, sizeof(sockaddr_in6));
  fid_fabric* fab;
  fid_domain* dom;
  fid_cq* cq;
  fid_av* av;
  ASSERT_EQ(fi_fabric(info->fabric_attr, &fab, nullptr), 0);
  ASSERT_EQ(fi_domain(fab, info, &dom, nullptr), 0);
  fi_cq_attr cattr{};
  cattr.format = FI_CQ_FORMAT_DATA;
  ASSERT_EQ(fi_cq_open(dom, &cattr, &cq, nullptr), 0);
  fi_av_attr aattr{};
  aattr.type = FI_AV_MAP;
  ASSERT_EQ(fi_av_open(dom, &aattr, &av, nullptr), 0);
  fid_ep* ep[2];
  fi_addr_t addr[2];
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(fi_endpoint(dom, info, &ep[i], nullptr), 0);
    ASSERT_EQ(fi_ep_bind(ep[i], &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_ep_bind(ep[i], &av->fid, 0), 0);
    ASSERT_EQ(fi_enable(ep[i]), 0);
    sockaddr_in6 name{};
    size_t len = sizeof name;
    ASSERT_EQ(fi_getname(&ep[i]->fid, &name, &len), 0);
    EXPECT_EQ(name.sin6_family, AF_INET6);
    ASSERT_EQ(fi_av_insert(av, &name, 1, &addr[i], 0, nullptr), 1);
  }
  char buf[16] = {};
  ASSERT_EQ(fi_recv(ep[1], buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  ASSERT_EQ(fi_inject(ep[0], "over v6", 8, addr[1]), 0);
  fi_cq_data_entry e;
  ssize_t n = -FI_EAGAIN;
  for (int i = 0; i < 1000000 && n == -FI_EAGAIN; ++i) n = fi_cq_read(cq, &e, 1);
  EXPECT_EQ(n, 1);
  EXPECT_STREQ(buf, "over v6");
  for (fid_ep* e2 : ep) EXPECT_EQ(fi_close(&e2->fid), 0);
  EXPECT_EQ(fi_close(&av->fid), 0);
  EXPECT_EQ(fi_close(&cq->fid), 0);
  EXPECT_EQ(fi_close(&dom->fid), 0);
  EXPECT_EQ(fi_close(&fab->fid), 0);
  fi_freeinfo(info);
  fi_freeinfo(hints);
}

INSTANTIATE_TEST_SUITE_P(all, msg, testing::ValuesIn(all_configs), config_name);
INSTANTIATE_TEST_SUITE_P(all, source, testing::ValuesIn(all_configs), config_name);
INSTANTIATE_TEST_SUITE_P(all, multi_recv, testing::ValuesIn(all_configs), config_name);

}  // namespace
}  // namespace conformance
