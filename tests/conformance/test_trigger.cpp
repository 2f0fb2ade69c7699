// SPDX-License-Identifier: MIT
// weft — triggered operations and deferred work (fi_trigger(3)), on every
// provider: a transfer posted with FI_TRIGGER, or queued on the domain with
// FI_QUEUE_WORK, starts when its counter (successes plus errors) reaches
// its threshold, in threshold order, never before; cancelled or flushed
// work completes with FI_ECANCELED and never starts; closing an endpoint or
// a counter cancels what names it (docs/decisions.md, "Triggered work").
#include "fixture.hpp"
#include "log_recorder.hpp"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_trigger.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace conformance {
namespace {

constexpr uint64_t transfer_caps =
    FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

// One completion as a test sees it.
struct comp {
  void* ctx;
  uint64_t flags;
  int err;  // 0, or the error of an error completion
};

class trigger : public provider_test {
 protected:
  uint64_t extra_caps() const override {
    const caps_table* t = caps_of(GetParam());
    return FI_TRIGGER | (t ? t->offers & transfer_caps : 0);
  }
  bool has(uint64_t cap) const { return (info->caps & cap) == cap; }

  void TearDown() override {
    // Endpoints first (their close cancels their work onto the CQs), then
    // counters, then what the fixture owns.
    for (auto it = eps.rbegin(); it != eps.rend(); ++it) EXPECT_EQ(fi_close(&(*it)->fid), 0);
    eps.clear();
    for (fid_mr* m : mrs) EXPECT_EQ(fi_close(&m->fid), 0);
    for (fid_cntr* c : cntrs) EXPECT_EQ(fi_close(&c->fid), 0);
    provider_test::TearDown();
  }

  fid_cntr* open_cntr(fid_domain* d = nullptr) {
    fi_cntr_attr a{};
    a.events = FI_CNTR_EVENTS_COMP;
    a.wait_obj = FI_WAIT_NONE;
    fid_cntr* c = nullptr;
    EXPECT_EQ(fi_cntr_open(d ? d : domain, &a, &c, nullptr), 0);
    if (c && !d) cntrs.push_back(c);
    return c;
  }
  // An enabled endpoint on `cq` and the AV, with `cntr` bound for
  // `cntr_flags` when given, opened from `i` (default: the test's info).
  fid_ep* open_ep_with(fid_cq* cq, fi_addr_t* self, fid_cntr* cntr = nullptr,
                       uint64_t cntr_flags = 0, fi_info* i = nullptr) {
    return open_ep(cq, self, cntr ? &cntr->fid : nullptr, i, nullptr, cntr_flags);
  }

  // Completions read from `cq` until `want` arrived or `ms` passed.
  std::vector<comp> collect(fid_cq* cq, size_t want, int ms = 5000) {
    std::vector<comp> got;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
      fi_cq_data_entry e;
      ssize_t n = fi_cq_read(cq, &e, 1);
      if (n == 1) got.push_back({e.op_context, e.flags, 0});
      if (n == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        if (fi_cq_readerr(cq, &err, 0) == 1) got.push_back({err.op_context, err.flags, err.err});
      }
    }
    return got;
  }
  // Runs progress (reads `cq`; what it finds goes to `got`) until counter
  // `c` reaches `n` or 5 s pass; the counter's value.
  uint64_t await(fid_cntr* c, uint64_t n, fid_cq* cq, std::vector<comp>& got) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    uint64_t v = fi_cntr_read(c);
    while (v < n && std::chrono::steady_clock::now() < deadline) {
      std::vector<comp> more = collect(cq, SIZE_MAX, 1);
      got.insert(got.end(), more.begin(), more.end());
      v = fi_cntr_read(c);
    }
    return v;
  }
  // What arrives within `ms` when nothing should.
  std::vector<comp> quiet(fid_cq* cq, int ms = 100) { return collect(cq, SIZE_MAX, ms); }
  static const comp* find(const std::vector<comp>& v, const void* ctx) {
    for (const comp& c : v)
      if (c.ctx == ctx) return &c;
    return nullptr;
  }

  static void threshold(fi_triggered_context2& tc, fid_cntr* c, size_t t) {
    std::memset(&tc, 0, sizeof tc);
    tc.event_type = FI_TRIGGER_THRESHOLD;
    tc.trigger.threshold.cntr = c;
    tc.trigger.threshold.threshold = t;
  }
  // A triggered fi_sendmsg of `s` (its iovec and fi_msg are gone when the
  // call returns: the engine keeps its own copy).
  ssize_t trig_send(fid_ep* ep, const char* s, fi_addr_t dest, fid_cntr* c, size_t t,
                    fi_triggered_context2* tc) {
    threshold(*tc, c, t);
    iovec iov{const_cast<char*>(s), std::strlen(s) + 1};
    fi_msg m{};
    m.msg_iov = &iov;
    m.iov_count = 1;
    m.addr = dest;
    m.context = tc;
    return fi_sendmsg(ep, &m, FI_TRIGGER);
  }

  // A registered target buffer at the receiving endpoint.
  struct target {
    uint64_t base;
    uint64_t key;
  };
  target reg(void* buf, size_t len) {
    fid_mr* mr = nullptr;
    EXPECT_EQ(fi_mr_reg(domain, buf, len, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, mrs.size() + 1, 0,
                        &mr, nullptr),
              0);
    if (!mr) return {0, 0};
    mrs.push_back(mr);
    uint64_t base =
        info->domain_attr->mr_mode & FI_MR_VIRT_ADDR ? reinterpret_cast<uint64_t>(buf) : 0;
    return {base, fi_mr_key(mr)};
  }

  std::vector<fid_cntr*> cntrs;
  std::vector<fid_mr*> mrs;
};

TEST_P(trigger, sends_start_at_their_thresholds_in_order_and_never_early) {
  two_eps t = open_two_eps();
  ASSERT_TRUE(t.ea && t.eb);
  fid_cntr* c = open_cntr();
  char in[3][8] = {};
  fi_context rctx[3];
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(fi_recv(t.eb, in[i], sizeof in[i], nullptr, FI_ADDR_UNSPEC, &rctx[i]), 0);
  // Submitted out of threshold order.
  static const char* const payload[] = {"three", "one", "two"};
  const size_t at[] = {3, 1, 2};
  fi_triggered_context2 tc[3];
  for (int i = 0; i < 3; ++i) ASSERT_EQ(trig_send(t.ea, payload[i], t.b, c, at[i], &tc[i]), 0);
  EXPECT_TRUE(quiet(t.cq).empty()) << "a triggered send started before its counter moved";

  const int fired[] = {1, 2, 0};  // which one each step starts
  for (int k = 0; k < 3; ++k) {
    ASSERT_EQ(fi_cntr_add(c, 1), 0);
    std::vector<comp> got = collect(t.cq, 2);
    ASSERT_EQ(got.size(), 2u) << "step " << k;
    // The send's completion carries its fi_triggered_context.
    const comp* s = find(got, &tc[fired[k]]);
    ASSERT_NE(s, nullptr) << "step " << k;
    EXPECT_EQ(s->err, 0);
    EXPECT_TRUE(s->flags & FI_SEND);
    ASSERT_NE(find(got, &rctx[k]), nullptr);
    EXPECT_STREQ(in[k], payload[fired[k]]);
    EXPECT_TRUE(quiet(t.cq, 50).empty()) << "more than one send started at step " << k;
  }
}

TEST_P(trigger, a_counter_jumping_past_several_thresholds_starts_them_in_threshold_order) {
  two_eps t = open_two_eps();
  ASSERT_TRUE(t.ea && t.eb);
  fid_cntr* c = open_cntr();
  char in[4][8] = {};
  fi_context rctx[4];
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(fi_recv(t.eb, in[i], sizeof in[i], nullptr, FI_ADDR_UNSPEC, &rctx[i]), 0);
  static const char* const payload[] = {"five", "two", "four", "two2"};
  const size_t at[] = {5, 2, 4, 2};  // equal thresholds: submission order
  fi_triggered_context2 tc[4];
  for (int i = 0; i < 4; ++i) ASSERT_EQ(trig_send(t.ea, payload[i], t.b, c, at[i], &tc[i]), 0);
  ASSERT_EQ(fi_cntr_add(c, 1), 0);
  EXPECT_TRUE(quiet(t.cq).empty());
  ASSERT_EQ(fi_cntr_set(c, 9), 0);
  std::vector<comp> got = collect(t.cq, 8);
  ASSERT_EQ(got.size(), 8u);
  EXPECT_STREQ(in[0], "two");
  EXPECT_STREQ(in[1], "two2");
  EXPECT_STREQ(in[2], "four");
  EXPECT_STREQ(in[3], "five");
}

// The counter is advanced by the provider's progress (a receive completing,
// counted under the endpoint's lock): the triggered send starts from that
// progress call, without the application touching the counter.
TEST_P(trigger, starts_from_the_progress_that_advances_its_counter) {
  fid_cq* cq = open_cq();
  open_av();
  fid_cntr* rc = open_cntr();
  fi_addr_t a, b;
  fid_ep* ea = open_ep_with(cq, &a);
  fid_ep* eb = open_ep_with(cq, &b, rc, FI_RECV);
  ASSERT_TRUE(ea && eb);
  char in[2][8] = {};
  fi_context rctx[2], sctx;
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(fi_recv(eb, in[i], sizeof in[i], nullptr, FI_ADDR_UNSPEC, &rctx[i]), 0);
  // eb answers ea once ea's message has arrived.
  fi_triggered_context2 tc;
  ASSERT_EQ(trig_send(ea, "second", b, rc, 1, &tc), 0);
  EXPECT_TRUE(quiet(cq).empty());
  ASSERT_EQ(fi_send(ea, "first", 6, nullptr, b, &sctx), 0);
  std::vector<comp> got = collect(cq, 4);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_NE(find(got, &tc), nullptr);
  EXPECT_STREQ(in[0], "first");
  EXPECT_STREQ(in[1], "second");
  EXPECT_EQ(fi_cntr_read(rc), 2u);
}

TEST_P(trigger, a_triggered_receive_is_posted_at_its_threshold) {
  two_eps t = open_two_eps();
  ASSERT_TRUE(t.ea && t.eb);
  fid_cntr* c = open_cntr();
  char tin[8] = {}, pin[8] = {};
  fi_triggered_context2 tc;
  threshold(tc, c, 1);
  iovec iov{tin, sizeof tin};
  fi_msg m{};
  m.msg_iov = &iov;
  m.iov_count = 1;
  m.addr = FI_ADDR_UNSPEC;
  m.context = &tc;
  ASSERT_EQ(fi_recvmsg(t.eb, &m, FI_TRIGGER), 0);
  // Not posted yet: a receive posted after it takes the first message.
  fi_context pctx, s1, s2;
  ASSERT_EQ(fi_recv(t.eb, pin, sizeof pin, nullptr, FI_ADDR_UNSPEC, &pctx), 0);
  ASSERT_EQ(fi_send(t.ea, "plain", 6, nullptr, t.b, &s1), 0);
  std::vector<comp> got = collect(t.cq, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_NE(find(got, &pctx), nullptr);
  EXPECT_STREQ(pin, "plain");
  EXPECT_EQ(tin[0], 0);
  ASSERT_EQ(fi_cntr_add(c, 1), 0);
  ASSERT_EQ(fi_send(t.ea, "trig", 5, nullptr, t.b, &s2), 0);
  got = collect(t.cq, 2);
  ASSERT_EQ(got.size(), 2u);
  const comp* r = find(got, &tc);
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(r->flags & FI_RECV);
  EXPECT_STREQ(tin, "trig");
}

TEST_P(trigger, tagged_sends_start_at_their_thresholds) {
  if (!has(FI_TAGGED)) GTEST_SKIP() << "no FI_TAGGED on " << GetParam().name();
  two_eps t = open_two_eps();
  ASSERT_TRUE(t.ea && t.eb);
  fid_cntr* c = open_cntr();
  char in7[8] = {}, in8[8] = {};
  fi_context r7, r8;
  ASSERT_EQ(fi_trecv(t.eb, in7, sizeof in7, nullptr, FI_ADDR_UNSPEC, 7, 0, &r7), 0);
  ASSERT_EQ(fi_trecv(t.eb, in8, sizeof in8, nullptr, FI_ADDR_UNSPEC, 8, 0, &r8), 0);
  fi_triggered_context2 tc[2];
  const char* payload[] = {"seven", "eight"};
  const uint64_t tags[] = {7, 8};
  const size_t at[] = {2, 1};
  for (int i = 0; i < 2; ++i) {
    threshold(tc[i], c, at[i]);
    iovec iov{const_cast<char*>(payload[i]), 6};
    fi_msg_tagged m{};
    m.msg_iov = &iov;
    m.iov_count = 1;
    m.addr = t.b;
    m.tag = tags[i];
    m.context = &tc[i];
    ASSERT_EQ(fi_tsendmsg(t.ea, &m, FI_TRIGGER), 0);
  }
  EXPECT_TRUE(quiet(t.cq).empty());
  ASSERT_EQ(fi_cntr_add(c, 1), 0);
  std::vector<comp> got = collect(t.cq, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_NE(find(got, &tc[1]), nullptr);
  EXPECT_STREQ(in8, "eight");
  EXPECT_EQ(in7[0], 0);
  EXPECT_TRUE(quiet(t.cq, 50).empty());
  ASSERT_EQ(fi_cntr_add(c, 1), 0);
  got = collect(t.cq, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_NE(find(got, &tc[0]), nullptr);
  EXPECT_STREQ(in7, "seven");
}

TEST_P(trigger, writes_atomics_and_reads_start_at_their_thresholds) {
  if (!has(FI_RMA) || !has(FI_ATOMIC))
    GTEST_SKIP() << "no FI_RMA and FI_ATOMIC on " << GetParam().name();
  two_eps t = open_two_eps();
  ASSERT_TRUE(t.ea && t.eb);
  fid_cntr* c = open_cntr();
  alignas(8) uint64_t mem[2] = {0, 0};
  target tg = reg(mem, sizeof mem);
  uint64_t src = 0x1122334455667788ULL, opd = 7, back = 0;
  fi_triggered_context2 tw, ta, tr;

  iovec wiov{&src, 8};
  fi_rma_iov wr{tg.base, 8, tg.key};
  fi_msg_rma wm{&wiov, nullptr, 1, t.b, &wr, 1, &tw, 0};
  threshold(tw, c, 1);
  ASSERT_EQ(fi_writemsg(t.ea, &wm, FI_TRIGGER), 0);

  fi_ioc aiov{&opd, 1};
  fi_rma_ioc ar{tg.base + 8, 1, tg.key};
  fi_msg_atomic am{&aiov, nullptr, 1, t.b, &ar, 1, FI_UINT64, FI_SUM, &ta, 0};
  threshold(ta, c, 2);
  ASSERT_EQ(fi_atomicmsg(t.ea, &am, FI_TRIGGER), 0);

  iovec riov{&back, 8};
  fi_msg_rma rm{&riov, nullptr, 1, t.b, &wr, 1, &tr, 0};
  threshold(tr, c, 3);
  ASSERT_EQ(fi_readmsg(t.ea, &rm, FI_TRIGGER), 0);

  EXPECT_TRUE(quiet(t.cq).empty());
  EXPECT_EQ(mem[0], 0u);
  EXPECT_EQ(mem[1], 0u);

  ASSERT_EQ(fi_cntr_add(c, 1), 0);
  std::vector<comp> got = collect(t.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].ctx, &tw);
  EXPECT_EQ(got[0].err, 0);
  EXPECT_EQ(mem[0], src);
  EXPECT_EQ(mem[1], 0u);

  ASSERT_EQ(fi_cntr_add(c, 1), 0);
  got = collect(t.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].ctx, &ta);
  EXPECT_EQ(mem[1], 7u);
  EXPECT_EQ(back, 0u);

  ASSERT_EQ(fi_cntr_add(c, 1), 0);
  got = collect(t.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].ctx, &tr);
  EXPECT_EQ(back, src);
}

// Every fi_op_type the configuration can carry, queued on the domain in
// one row of thresholds; the completion counter counts each transfer.
TEST_P(trigger, deferred_work_of_every_operation_type) {
  two_eps t = open_two_eps();
  ASSERT_TRUE(t.ea && t.eb);
  fid_cntr* trig = open_cntr();
  fid_cntr* done = open_cntr();
  fid_cntr* x = open_cntr();
  std::vector<fi_deferred_work> works(16);
  size_t next = 0;
  auto work = [&](fi_op_type type, fid_cntr* completion) -> fi_deferred_work& {
    fi_deferred_work& w = works[next++];
    std::memset(&w, 0, sizeof w);
    w.threshold = next;
    w.triggering_cntr = trig;
    w.completion_cntr = completion;
    w.op_type = type;
    return w;
  };
  // Each step: fi_cntr_add(trig, 1); then `completions` entries on the CQ
  // (only requests with FI_COMPLETION report there: fi_trigger(3)), the
  // completion counter at `done` once the transfers completed, and `check`.
  struct step {
    size_t completions;
    uint64_t done;
    std::function<void(const std::vector<comp>&)> check;
  };
  std::vector<step> steps;
  uint64_t completed = 0;

  char in[16] = {}, tin[16] = {};
  fi_context rctx, sctx, trctx, tsctx;
  iovec rio{in, sizeof in}, sio{const_cast<char*>("deferred"), 9};
  // Messages ask for their completions, RMA and atomics do not.
  fi_op_msg recv_op{t.eb, {&rio, nullptr, 1, FI_ADDR_UNSPEC, &rctx, 0}, FI_COMPLETION};
  fi_op_msg send_op{t.ea, {&sio, nullptr, 1, t.b, &sctx, 0}, FI_COMPLETION};
  {
    fi_deferred_work& r = work(FI_OP_RECV, done);
    r.op.msg = &recv_op;
    ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &r), 0);
    steps.push_back({0, completed, nullptr});  // posted, nothing arrived yet
    fi_deferred_work& s = work(FI_OP_SEND, done);
    s.op.msg = &send_op;
    ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &s), 0);
    completed += 2;
    steps.push_back({2, completed, [&](const std::vector<comp>& got) {
                       EXPECT_NE(find(got, &rctx), nullptr);
                       EXPECT_NE(find(got, &sctx), nullptr);
                       EXPECT_STREQ(in, "deferred");
                     }});
  }
  iovec trio{tin, sizeof tin}, tsio{const_cast<char*>("tagged"), 7};
  fi_op_tagged trecv_op{t.eb, {&trio, nullptr, 1, FI_ADDR_UNSPEC, 3, 0, &trctx, 0},
                        FI_COMPLETION};
  fi_op_tagged tsend_op{t.ea, {&tsio, nullptr, 1, t.b, 3, 0, &tsctx, 0}, FI_COMPLETION};
  if (has(FI_TAGGED)) {
    fi_deferred_work& r = work(FI_OP_TRECV, done);
    r.op.tagged = &trecv_op;
    ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &r), 0);
    steps.push_back({0, completed, nullptr});
    fi_deferred_work& s = work(FI_OP_TSEND, done);
    s.op.tagged = &tsend_op;
    ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &s), 0);
    completed += 2;
    steps.push_back({2, completed, [&](const std::vector<comp>& got) {
                       EXPECT_NE(find(got, &trctx), nullptr);
                       EXPECT_STREQ(tin, "tagged");
                     }});
  }
  alignas(8) uint64_t mem[4] = {0, 0, 0, 0};
  uint64_t src = 0xabcdef, back = 0, opd = 5, fetched = 99, cmpv = 5, swapv = 77, old = 99;
  iovec wio{&src, 8}, bio{&back, 8};
  fi_context wctx, rdctx, actx, fctx, cctx;
  fi_rma_iov r0{};
  fi_rma_ioc a1{}, a2{};
  fi_ioc oio{&opd, 1}, fio{&fetched, 1}, cio{&cmpv, 1}, sw{&swapv, 1}, oldio{&old, 1};
  fi_op_rma write_op{}, read_op{};
  fi_op_atomic atomic_op{};
  fi_op_fetch_atomic fetch_op{};
  fi_op_compare_atomic cmp_op{};
  if (has(FI_RMA) && has(FI_ATOMIC)) {
    target tg = reg(mem, sizeof mem);
    r0 = {tg.base, 8, tg.key};
    a1 = {tg.base + 8, 1, tg.key};
    a2 = {tg.base + 16, 1, tg.key};
    write_op = {t.ea, {&wio, nullptr, 1, t.b, &r0, 1, &wctx, 0}, 0};
    read_op = {t.ea, {&bio, nullptr, 1, t.b, &r0, 1, &rdctx, 0}, 0};
    atomic_op = {t.ea, {&oio, nullptr, 1, t.b, &a1, 1, FI_UINT64, FI_SUM, &actx, 0}, 0};
    fetch_op = {t.ea, {&oio, nullptr, 1, t.b, &a1, 1, FI_UINT64, FI_SUM, &fctx, 0},
                {&fio, nullptr, 1}, 0};
    cmp_op = {t.ea, {&sw, nullptr, 1, t.b, &a2, 1, FI_UINT64, FI_CSWAP, &cctx, 0},
              {&oldio, nullptr, 1}, {&cio, nullptr, 1}, 0};
    mem[2] = 5;
    fi_deferred_work& w = work(FI_OP_WRITE, done);
    w.op.rma = &write_op;
    ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &w), 0);
    steps.push_back({0, ++completed, [&](const std::vector<comp>&) { EXPECT_EQ(mem[0], src); }});
    fi_deferred_work& r = work(FI_OP_READ, done);
    r.op.rma = &read_op;
    ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &r), 0);
    steps.push_back({0, ++completed, [&](const std::vector<comp>&) { EXPECT_EQ(back, src); }});
    fi_deferred_work& a = work(FI_OP_ATOMIC, done);
    a.op.atomic = &atomic_op;
    ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &a), 0);
    steps.push_back({0, ++completed, [&](const std::vector<comp>&) { EXPECT_EQ(mem[1], 5u); }});
    fi_deferred_work& f = work(FI_OP_FETCH_ATOMIC, done);
    f.op.fetch_atomic = &fetch_op;
    ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &f), 0);
    steps.push_back({0, ++completed, [&](const std::vector<comp>&) {
                       EXPECT_EQ(fetched, 5u);
                       EXPECT_EQ(mem[1], 10u);
                     }});
    fi_deferred_work& cw = work(FI_OP_COMPARE_ATOMIC, done);
    cw.op.compare_atomic = &cmp_op;
    ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &cw), 0);
    steps.push_back({0, ++completed, [&](const std::vector<comp>&) {
                       EXPECT_EQ(old, 5u);
                       EXPECT_EQ(mem[2], 77u);
                     }});
  }
  fi_op_cntr add_op{x, 3}, set_op{x, 40};
  fi_deferred_work& add = work(FI_OP_CNTR_ADD, nullptr);
  add.op.cntr = &add_op;
  ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &add), 0);
  steps.push_back({0, completed, [&](const std::vector<comp>&) { EXPECT_EQ(fi_cntr_read(x), 3u); }});
  fi_deferred_work& set = work(FI_OP_CNTR_SET, nullptr);
  set.op.cntr = &set_op;
  ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &set), 0);
  steps.push_back({0, completed, [&](const std::vector<comp>&) { EXPECT_EQ(fi_cntr_read(x), 40u); }});

  EXPECT_TRUE(quiet(t.cq).empty());
  EXPECT_EQ(fi_cntr_read(done), 0u);
  EXPECT_EQ(fi_cntr_read(x), 0u);
  EXPECT_EQ(mem[0], 0u);
  for (size_t k = 0; k < steps.size(); ++k) {
    SCOPED_TRACE("step " + std::to_string(k + 1));
    ASSERT_EQ(fi_cntr_add(trig, 1), 0);
    std::vector<comp> got = collect(t.cq, steps[k].completions);
    // A transfer counts once it completed; counter operations do not count.
    EXPECT_EQ(await(done, steps[k].done, t.cq, got), steps[k].done);
    std::vector<comp> late = quiet(t.cq, 30);
    got.insert(got.end(), late.begin(), late.end());
    ASSERT_EQ(got.size(), steps[k].completions) << "only requests with FI_COMPLETION report";
    for (const comp& g : got) EXPECT_EQ(g.err, 0);
    EXPECT_EQ(fi_cntr_read(done), steps[k].done);
    if (steps[k].check) steps[k].check(got);
  }
}

// fi_trigger(3): a deferred transfer's completion counter counts its
// completion, not its start, and the endpoint reports it only when the
// request carries FI_COMPLETION. A deferred receive is started long before
// its message comes.
TEST_P(trigger, deferred_transfers_count_on_completion_and_report_only_when_asked) {
  two_eps t = open_two_eps();
  ASSERT_TRUE(t.ea && t.eb);
  fid_cntr* go = open_cntr();
  fid_cntr* done = open_cntr();
  fid_cntr* shown = open_cntr();
  char in[16] = {}, in2[16] = {};
  fi_context rctx, rctx2;
  iovec rio{in, sizeof in}, rio2{in2, sizeof in2};
  fi_op_msg quiet_recv{t.eb, {&rio, nullptr, 1, FI_ADDR_UNSPEC, &rctx, 0}, 0};
  fi_op_msg shown_recv{t.eb, {&rio2, nullptr, 1, FI_ADDR_UNSPEC, &rctx2, 0}, FI_COMPLETION};
  fi_deferred_work a{}, b{};
  a = {{}, 1, go, done, FI_OP_RECV, {}};
  a.op.msg = &quiet_recv;
  b = {{}, 1, go, shown, FI_OP_RECV, {}};
  b.op.msg = &shown_recv;
  ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &a), 0);
  ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &b), 0);
  ASSERT_EQ(fi_cntr_add(go, 1), 0);  // both receives are posted now
  EXPECT_TRUE(quiet(t.cq).empty());
  EXPECT_EQ(fi_cntr_read(done), 0u) << "counted when started, not when completed";
  EXPECT_EQ(fi_cntr_read(shown), 0u);
  fi_context s1, s2;
  ASSERT_EQ(fi_send(t.ea, "first", 6, nullptr, t.b, &s1), 0);
  ASSERT_EQ(fi_send(t.ea, "second", 7, nullptr, t.b, &s2), 0);
  std::vector<comp> got;
  EXPECT_EQ(await(done, 1, t.cq, got), 1u);
  EXPECT_EQ(await(shown, 1, t.cq, got), 1u);
  std::vector<comp> rest = collect(t.cq, 3 - std::min<size_t>(got.size(), 3));
  got.insert(got.end(), rest.begin(), rest.end());
  std::vector<comp> extra = quiet(t.cq, 30);
  got.insert(got.end(), extra.begin(), extra.end());
  // The two sends and the receive that asked; not the quiet receive.
  EXPECT_EQ(got.size(), 3u);
  EXPECT_NE(find(got, &s1), nullptr);
  EXPECT_NE(find(got, &s2), nullptr);
  EXPECT_NE(find(got, &rctx2), nullptr);
  EXPECT_EQ(find(got, &rctx), nullptr) << "a deferred receive without FI_COMPLETION reported";
  EXPECT_STREQ(in, "first");
  EXPECT_STREQ(in2, "second");
}

// fi_trigger(3): deferred work does not update the endpoint's counters
// either, unless the request carries FI_COMPLETION, or the endpoint's
// counter is the request's completion_cntr (then it counts once).
TEST_P(trigger, deferred_transfers_leave_endpoint_counters_alone_unless_asked) {
  fid_cq* cq = open_cq();
  open_av();
  fid_cntr* ca = open_cntr();  // a's sends, writes and reads
  fid_cntr* cb = open_cntr();  // b's receives
  const bool rma = has(FI_RMA);
  fi_addr_t a = FI_ADDR_NOTAVAIL, b = FI_ADDR_NOTAVAIL;
  fid_ep* ea = open_ep_with(cq, &a, ca, FI_SEND | (rma ? FI_WRITE | FI_READ : 0));
  fid_ep* eb = open_ep_with(cq, &b, cb, FI_RECV);
  ASSERT_TRUE(ea && eb);
  fid_cntr* go = open_cntr();
  fid_cntr* done = open_cntr();
  char in[3][16] = {};
  fi_context rctx[3], sctx[3];
  iovec rio[3] = {{in[0], 16}, {in[1], 16}, {in[2], 16}};
  iovec sio[3] = {{const_cast<char*>("quiet"), 6},
                  {const_cast<char*>("asked"), 6},
                  {const_cast<char*>("own"), 4}};
  // Round k: a deferred receive at b and a deferred send from a, both at
  // threshold k + 1.
  const uint64_t flags[3] = {0, FI_COMPLETION, 0};
  fid_cntr* rcount[3] = {done, done, cb};  // round 3: the endpoints' own counters
  fid_cntr* scount[3] = {done, done, ca};
  fi_op_msg rop[3], sop[3];
  fi_deferred_work rw[3], sw[3];
  for (int k = 0; k < 3; ++k) {
    rop[k] = {eb, {&rio[k], nullptr, 1, FI_ADDR_UNSPEC, &rctx[k], 0}, flags[k]};
    sop[k] = {ea, {&sio[k], nullptr, 1, b, &sctx[k], 0}, flags[k]};
    rw[k] = {{}, uint64_t(k + 1), go, rcount[k], FI_OP_RECV, {}};
    rw[k].op.msg = &rop[k];
    sw[k] = {{}, uint64_t(k + 1), go, scount[k], FI_OP_SEND, {}};
    sw[k].op.msg = &sop[k];
    ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &rw[k]), 0);
    ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &sw[k]), 0);
  }
  std::vector<comp> got;
  // 1: neither asks: the completion counter counts both, the endpoint nothing.
  ASSERT_EQ(fi_cntr_add(go, 1), 0);
  EXPECT_EQ(await(done, 2, cq, got), 2u);
  std::vector<comp> more = quiet(cq, 50);
  got.insert(got.end(), more.begin(), more.end());
  EXPECT_TRUE(got.empty());
  EXPECT_STREQ(in[0], "quiet");
  EXPECT_EQ(fi_cntr_read(ca), 0u) << "a quiet deferred send counted on the send counter";
  EXPECT_EQ(fi_cntr_read(cb), 0u) << "a quiet deferred receive counted on the receive counter";
  // 2: FI_COMPLETION: reported and counted as any transfer.
  got.clear();
  ASSERT_EQ(fi_cntr_add(go, 1), 0);
  EXPECT_EQ(await(done, 4, cq, got), 4u);
  EXPECT_EQ(await(ca, 1, cq, got), 1u);
  EXPECT_EQ(await(cb, 1, cq, got), 1u);
  std::vector<comp> rest = collect(cq, 2 - std::min<size_t>(got.size(), 2));
  got.insert(got.end(), rest.begin(), rest.end());
  EXPECT_EQ(got.size(), 2u);
  EXPECT_NE(find(got, &rctx[1]), nullptr);
  EXPECT_NE(find(got, &sctx[1]), nullptr);
  // 3: the endpoint's counter is the completion counter: one count each.
  got.clear();
  ASSERT_EQ(fi_cntr_add(go, 1), 0);
  EXPECT_EQ(await(ca, 2, cq, got), 2u);
  EXPECT_EQ(await(cb, 2, cq, got), 2u);
  more = quiet(cq, 50);
  got.insert(got.end(), more.begin(), more.end());
  EXPECT_TRUE(got.empty());
  EXPECT_STREQ(in[2], "own");
  EXPECT_EQ(fi_cntr_read(ca), 2u) << "counted twice: by the endpoint and as completion counter";
  EXPECT_EQ(fi_cntr_read(cb), 2u) << "counted twice: by the endpoint and as completion counter";
  EXPECT_EQ(fi_cntr_read(done), 4u);
  if (!rma) return;
  // RMA: a quiet deferred write and read leave a's counter alone.
  alignas(8) uint64_t mem = 0, src = 0x5eed, back = 0;
  target tg = reg(&mem, sizeof mem);
  fi_rma_iov r0{tg.base, 8, tg.key};
  iovec wio{&src, 8}, bio{&back, 8};
  fi_context wctx, rdctx;
  fi_op_rma wop{ea, {&wio, nullptr, 1, b, &r0, 1, &wctx, 0}, 0};
  fi_op_rma rdop{ea, {&bio, nullptr, 1, b, &r0, 1, &rdctx, 0}, 0};
  fi_deferred_work w{}, r{};
  w = {{}, 4, go, done, FI_OP_WRITE, {}};
  w.op.rma = &wop;
  r = {{}, 5, go, done, FI_OP_READ, {}};
  r.op.rma = &rdop;
  ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &w), 0);
  ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &r), 0);
  ASSERT_EQ(fi_cntr_add(go, 1), 0);
  EXPECT_EQ(await(done, 5, cq, got), 5u);
  ASSERT_EQ(fi_cntr_add(go, 1), 0);
  EXPECT_EQ(await(done, 6, cq, got), 6u);
  more = quiet(cq, 50);
  got.insert(got.end(), more.begin(), more.end());
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(mem, src);
  EXPECT_EQ(back, src);
  EXPECT_EQ(fi_cntr_read(ca), 2u) << "a quiet deferred write or read counted";
}

// Work A's effect is what work B waits for, and B's completion counter is
// what C waits for: one fi_cntr_add runs the whole chain.
TEST_P(trigger, deferred_work_chains_through_counters) {
  two_eps t = open_two_eps();
  ASSERT_TRUE(t.ea && t.eb);
  fid_cntr* go = open_cntr();
  fid_cntr* x = open_cntr();
  fid_cntr* sent = open_cntr();
  fid_cntr* y = open_cntr();
  char in[16] = {};
  fi_context rctx, sctx;
  ASSERT_EQ(fi_recv(t.eb, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &rctx), 0);
  iovec sio{const_cast<char*>("chained"), 8};
  fi_op_msg send_op{t.ea, {&sio, nullptr, 1, t.b, &sctx, 0}, 0};
  fi_op_cntr add_op{x, 5}, set_op{y, 42};
  fi_deferred_work a{}, b{}, c{};
  a = {{}, 1, go, nullptr, FI_OP_CNTR_ADD, {}};
  a.op.cntr = &add_op;
  b = {{}, 5, x, sent, FI_OP_SEND, {}};
  b.op.msg = &send_op;
  c = {{}, 1, sent, nullptr, FI_OP_CNTR_SET, {}};
  c.op.cntr = &set_op;
  for (fi_deferred_work* w : {&c, &b, &a}) ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, w), 0);
  EXPECT_TRUE(quiet(t.cq).empty());
  EXPECT_EQ(fi_cntr_read(y), 0u);
  ASSERT_EQ(fi_cntr_add(go, 1), 0);
  // Under automatic progress the domain's thread may be the one issuing
  // the ready work (fi_cntr_add then leaves it to the thread): awaited,
  // not read at once.
  std::vector<comp> got;
  EXPECT_EQ(await(x, 5, t.cq, got), 5u);
  // The send counts when it completes, and that starts the last link.
  EXPECT_EQ(await(sent, 1, t.cq, got), 1u);
  EXPECT_EQ(await(y, 42, t.cq, got), 42u);
  std::vector<comp> late = collect(t.cq, 1 - std::min<size_t>(got.size(), 1), 5000);
  got.insert(got.end(), late.begin(), late.end());
  std::vector<comp> extra = quiet(t.cq, 30);
  got.insert(got.end(), extra.begin(), extra.end());
  // Only the application's own receive: the deferred send reports nothing.
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].ctx, &rctx);
  EXPECT_STREQ(in, "chained");
  // Done work is the application's again: cancelling it finds nothing.
  EXPECT_EQ(fi_control(&domain->fid, FI_CANCEL_WORK, &b), -FI_ENOENT);
}

TEST_P(trigger, cancelled_and_flushed_work_completes_with_ecanceled_and_never_starts) {
  two_eps t = open_two_eps();
  ASSERT_TRUE(t.ea && t.eb);
  fid_cntr* go = open_cntr();
  fid_cntr* other = open_cntr();
  fid_cntr* x = open_cntr();
  char in[16] = {};
  fi_context rctx, wctx;
  ASSERT_EQ(fi_recv(t.eb, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &rctx), 0);
  iovec sio{const_cast<char*>("never"), 6};
  fi_op_msg send_op{t.ea, {&sio, nullptr, 1, t.b, &wctx, 0}, 0};
  fi_deferred_work w{};
  w.threshold = 1;
  w.triggering_cntr = go;
  w.op_type = FI_OP_SEND;
  w.op.msg = &send_op;
  ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &w), 0);
  // Queued twice is refused.
  EXPECT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &w), -FI_EINVAL);
  fi_triggered_context2 tc, tc_other;
  ASSERT_EQ(trig_send(t.ea, "never2", t.b, go, 2, &tc), 0);
  ASSERT_EQ(trig_send(t.ea, "other", t.b, other, 1, &tc_other), 0);
  fi_op_cntr add_op{x, 1};
  fi_deferred_work wa{};
  wa.threshold = 1;
  wa.triggering_cntr = go;
  wa.op_type = FI_OP_CNTR_ADD;
  wa.op.cntr = &add_op;
  ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &wa), 0);

  ASSERT_EQ(fi_control(&domain->fid, FI_CANCEL_WORK, &w), 0);
  std::vector<comp> got = collect(t.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].ctx, &wctx);
  EXPECT_EQ(got[0].err, FI_ECANCELED);
  EXPECT_TRUE(got[0].flags & FI_SEND);
  EXPECT_EQ(fi_control(&domain->fid, FI_CANCEL_WORK, &w), -FI_ENOENT);

  // Flushing what waits on `go` leaves what waits on `other`.
  fi_deferred_work by_go{};
  by_go.triggering_cntr = go;
  ASSERT_EQ(fi_control(&domain->fid, FI_FLUSH_WORK, &by_go), 0);
  got = collect(t.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].ctx, &tc);
  EXPECT_EQ(got[0].err, FI_ECANCELED);
  EXPECT_EQ(fi_control(&domain->fid, FI_CANCEL_WORK, &wa), -FI_ENOENT);

  ASSERT_EQ(fi_control(&domain->fid, FI_FLUSH_WORK, nullptr), 0);
  got = collect(t.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].ctx, &tc_other);
  EXPECT_EQ(got[0].err, FI_ECANCELED);

  ASSERT_EQ(fi_cntr_add(go, 10), 0);
  ASSERT_EQ(fi_cntr_add(other, 10), 0);
  EXPECT_TRUE(quiet(t.cq, 200).empty());
  EXPECT_EQ(in[0], 0);
  EXPECT_EQ(fi_cntr_read(x), 0u);
}

TEST_P(trigger, bad_requests_are_refused_logged_once_and_change_nothing) {
  recorder rec;
  two_eps t = open_two_eps();
  ASSERT_TRUE(t.ea && t.eb);
  fid_cntr* c = open_cntr();
  char in[16] = {};
  fi_context rctx;
  ASSERT_EQ(fi_recv(t.eb, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &rctx), 0);
  auto lines = [&] { return rec.with("").size(); };
  auto refused = [&](const char* what, auto&& call, int expect) {
    size_t before = lines();
    EXPECT_EQ(call(), expect) << what;
    EXPECT_EQ(lines(), before + 1) << what << ": one log line";
  };

  // A counter of another domain.
  fid_domain* d2 = nullptr;
  ASSERT_EQ(fi_domain(fabric, info, &d2, nullptr), 0);
  fid_cntr* foreign = open_cntr(d2);
  ASSERT_NE(foreign, nullptr);
  fi_triggered_context2 tc;
  refused("FI_TRIGGER on another domain's counter",
          [&] { return trig_send(t.ea, "x", t.b, foreign, 1, &tc); }, -FI_EINVAL);
  iovec sio{const_cast<char*>("x"), 2};
  fi_op_msg send_op{t.ea, {&sio, nullptr, 1, t.b, nullptr, 0}, 0};
  fi_deferred_work w{};
  w.threshold = 1;
  w.triggering_cntr = foreign;
  w.op_type = FI_OP_SEND;
  w.op.msg = &send_op;
  refused("FI_QUEUE_WORK on another domain's counter",
          [&] { return fi_control(&domain->fid, FI_QUEUE_WORK, &w); }, -FI_EINVAL);
  w.triggering_cntr = c;
  w.completion_cntr = foreign;
  refused("a completion counter of another domain",
          [&] { return fi_control(&domain->fid, FI_QUEUE_WORK, &w); }, -FI_EINVAL);
  w.completion_cntr = nullptr;

  // No context, an XPU trigger, an unknown event.
  fi_msg m{};
  m.msg_iov = &sio;
  m.iov_count = 1;
  m.addr = t.b;
  refused("FI_TRIGGER without a context", [&] { return fi_sendmsg(t.ea, &m, FI_TRIGGER); },
          -FI_EINVAL);
  threshold(tc, c, 1);
  tc.event_type = FI_TRIGGER_XPU;
  m.context = &tc;
  refused("FI_TRIGGER_XPU", [&] { return fi_sendmsg(t.ea, &m, FI_TRIGGER); }, -FI_ENOSYS);
  int bogus = 77;
  std::memcpy(&tc.event_type, &bogus, sizeof bogus);
  refused("an unknown trigger event", [&] { return fi_sendmsg(t.ea, &m, FI_TRIGGER); },
          -FI_EINVAL);

  // Unknown operation type, no operation, counter operations with a
  // completion counter, cancelling what is not queued.
  bogus = 99;
  std::memcpy(&w.op_type, &bogus, sizeof bogus);
  refused("an unknown op_type", [&] { return fi_control(&domain->fid, FI_QUEUE_WORK, &w); },
          -FI_EINVAL);
  w.op_type = FI_OP_SEND;
  w.op.msg = nullptr;
  refused("no operation", [&] { return fi_control(&domain->fid, FI_QUEUE_WORK, &w); },
          -FI_EINVAL);
  fi_op_cntr cop{c, 1};
  w.op_type = FI_OP_CNTR_ADD;
  w.op.cntr = &cop;
  w.completion_cntr = c;
  refused("a counter operation with a completion counter",
          [&] { return fi_control(&domain->fid, FI_QUEUE_WORK, &w); }, -FI_EINVAL);
  refused("cancelling work not queued",
          [&] { return fi_control(&domain->fid, FI_CANCEL_WORK, &w); }, -FI_ENOENT);
  refused("FI_QUEUE_WORK without a request",
          [&] { return fi_control(&domain->fid, FI_QUEUE_WORK, nullptr); }, -FI_EINVAL);

  // An endpoint opened without FI_TRIGGER.
  fi_info* plain = fi_dupinfo(info);
  plain->caps &= ~FI_TRIGGER;
  plain->tx_attr->caps &= ~FI_TRIGGER;
  plain->rx_attr->caps &= ~FI_TRIGGER;
  fi_addr_t pa;
  fid_ep* ep = open_ep_with(t.cq, &pa, nullptr, 0, plain);
  fi_freeinfo(plain);
  ASSERT_NE(ep, nullptr);
  refused("FI_TRIGGER on an endpoint without the capability",
          [&] { return trig_send(ep, "x", t.b, c, 1, &tc); }, -FI_EINVAL);
  send_op.ep = ep;
  w = {};
  w.threshold = 1;
  w.triggering_cntr = c;
  w.op_type = FI_OP_SEND;
  w.op.msg = &send_op;
  refused("deferred work on an endpoint without the capability",
          [&] { return fi_control(&domain->fid, FI_QUEUE_WORK, &w); }, -FI_EINVAL);

  // Nothing was queued: the counter moving starts nothing.
  ASSERT_EQ(fi_cntr_add(c, 5), 0);
  EXPECT_EQ(fi_cntr_read(c), 5u);
  EXPECT_TRUE(quiet(t.cq, 200).empty());
  EXPECT_EQ(in[0], 0);
  EXPECT_EQ(fi_close(&foreign->fid), 0);
  EXPECT_EQ(fi_close(&d2->fid), 0);
}

TEST_P(trigger, closing_an_endpoint_or_counter_with_work_queued_cancels_it) {
  fid_cq* cq = open_cq();
  open_av();
  fi_addr_t a, b;
  fid_ep* ea = open_ep_with(cq, &a);
  fid_ep* eb = open_ep_with(cq, &b);
  ASSERT_TRUE(ea && eb);
  fid_cntr* go = open_cntr();
  fid_cntr* late = open_cntr();
  fid_cntr* x = open_cntr();
  fi_triggered_context2 tc;
  ASSERT_EQ(trig_send(ea, "gone", b, go, 1, &tc), 0);
  fi_context wctx;
  iovec sio{const_cast<char*>("gone"), 5};
  fi_op_msg send_op{ea, {&sio, nullptr, 1, b, &wctx, 0}, 0};
  fi_deferred_work w{};
  w.threshold = 1;
  w.triggering_cntr = go;
  w.op_type = FI_OP_SEND;
  w.op.msg = &send_op;
  ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &w), 0);
  fi_op_cntr add_op{x, 1};
  fi_deferred_work wa{};
  wa.threshold = 1;
  wa.triggering_cntr = go;
  wa.op_type = FI_OP_CNTR_ADD;
  wa.op.cntr = &add_op;
  ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &wa), 0);
  // Left queued for the fixture's teardown: closing `late` cancels it.
  fi_op_cntr set_op{x, 9};
  fi_deferred_work wl{};
  wl.threshold = 3;
  wl.triggering_cntr = late;
  wl.op_type = FI_OP_CNTR_SET;
  wl.op.cntr = &set_op;
  ASSERT_EQ(fi_control(&domain->fid, FI_QUEUE_WORK, &wl), 0);

  // The endpoint's close cancels its two sends onto the CQ.
  ASSERT_EQ(fi_close(&ea->fid), 0);
  eps.erase(std::find(eps.begin(), eps.end(), ea));
  std::vector<comp> got = collect(cq, 2);
  ASSERT_EQ(got.size(), 2u);
  for (const void* ctx : {static_cast<const void*>(&tc), static_cast<const void*>(&wctx)}) {
    const comp* g = find(got, ctx);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->err, FI_ECANCELED);
  }
  // The counter's close cancels the counter operation waiting on it.
  ASSERT_EQ(fi_close(&go->fid), 0);
  cntrs.erase(std::find(cntrs.begin(), cntrs.end(), go));
  EXPECT_EQ(fi_control(&domain->fid, FI_CANCEL_WORK, &wa), -FI_ENOENT);
  EXPECT_EQ(fi_cntr_read(x), 0u);
  EXPECT_TRUE(quiet(cq).empty());
}

INSTANTIATE_TEST_SUITE_P(all, trigger, testing::ValuesIn(all_configs), config_name);

}  // namespace
}  // namespace conformance
