// SPDX-License-Identifier: MIT
// weft — peer CQs and peer counters (fi_peer(3)) on util's objects: the test
// plays the owner, with a fid_peer_cq and a fid_peer_cntr that record what
// the peer hands them, and writes completions as a provider would.
#include <gtest/gtest.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/providers/fi_peer.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "util/cntr.hpp"
#include "util/cq.hpp"
#include "util/domain.hpp"
#include "util/endpoint.hpp"
#include "util/fabric.hpp"
#include "util_env.hpp"

using namespace weft;
using namespace weft::util;

namespace {

fi_provider& test_prov = *test_env::provider();

// The owner's CQ: records every write, and refuses (-FI_EAGAIN) once it
// holds `room` completions, like a full CQ, or (refuse_every) every n-th
// write, like a CQ its reader drains now and then. Peers write from their
// own threads (fi_peer(3)), so it locks, as a real owner does.
struct owner_cq : fid_peer_cq {
  struct rec {
    void* context;
    uint64_t flags;
    size_t len;
    void* buf;
    uint64_t data, tag;
    fi_addr_t src;
    int err;  // nonzero: came through writeerr
    std::vector<uint8_t> err_data;
  };
  std::vector<rec> got;
  size_t room = SIZE_MAX;
  unsigned refuse_every = 0;
  unsigned calls = 0;
  std::mutex m;

  size_t count() {
    std::lock_guard g{m};
    return got.size();
  }
  bool refuse() { return got.size() >= room || (refuse_every && ++calls % refuse_every == 0); }
  static owner_cq* self(fid_peer_cq* c) { return static_cast<owner_cq*>(c); }
  static ssize_t write(fid_peer_cq* c, void* ctx, uint64_t flags, size_t len, void* buf,
                       uint64_t data, uint64_t tag, fi_addr_t src) {
    owner_cq* o = self(c);
    std::lock_guard g{o->m};
    if (o->refuse()) return -FI_EAGAIN;
    o->got.push_back({ctx, flags, len, buf, data, tag, src, 0, {}});
    return 0;
  }
  static ssize_t writeerr(fid_peer_cq* c, const fi_cq_err_entry* e) {
    owner_cq* o = self(c);
    std::lock_guard g{o->m};
    if (o->refuse()) return -FI_EAGAIN;
    auto* d = static_cast<const uint8_t*>(e->err_data);
    o->got.push_back({e->op_context, e->flags, e->len, e->buf, e->data, e->tag, e->src_addr, e->err,
                      std::vector<uint8_t>(d, d + e->err_data_size)});
    return 0;
  }
  fi_ops_cq_owner ops{sizeof(fi_ops_cq_owner), write, writeerr};
  fi_peer_cq_context ctx{sizeof(fi_peer_cq_context), this};

  owner_cq() : fid_peer_cq{} {
    fid.fclass = FI_CLASS_PEER_CQ;
    owner_ops = &ops;
  }
};

struct owner_cntr : fid_peer_cntr {
  uint64_t incs = 0, errs = 0;
  static void inc(fid_peer_cntr* c) { ++static_cast<owner_cntr*>(c)->incs; }
  static void incerr(fid_peer_cntr* c) { ++static_cast<owner_cntr*>(c)->errs; }
  fi_ops_cntr_owner ops{sizeof(fi_ops_cntr_owner), inc, incerr};
  fi_peer_cntr_context ctx{sizeof(fi_peer_cntr_context), this};

  owner_cntr() : fid_peer_cntr{} {
    fid.fclass = FI_CLASS_PEER_CNTR;
    owner_ops = &ops;
  }
};

class peer_test : public ::testing::TestWithParam<fi_threading> {
 public:
  void SetUp() override {
    env_.open(GetParam());
    fab_ = env_.fab;
    dom_ = env_.dom;
  }
  void TearDown() override {
    for (fid* f : open_) EXPECT_EQ(fi_close(f), 0);
    env_.close();
  }
  fid_cq* open_cq(owner_cq& o, size_t size = 8) {
    fi_cq_attr a{};
    a.format = FI_CQ_FORMAT_TAGGED;
    a.size = size;
    a.flags = FI_PEER;
    fid_cq* c = nullptr;
    EXPECT_EQ(fi_cq_open(dom_, &a, &c, &o.ctx), 0);
    if (c) open_.push_back(&c->fid);
    return c;
  }
  // A provider's write, under the domain's lock policy.
  template <class F>
  auto as_provider(F&& f) {
    return with_lock_policy(dom_->lock_threading(), f);
  }
  bool write(fid_cq* c, const cq_entry& e) {
    return as_provider([&]<class L>() { return cq::from(c)->write<L>(e); });
  }
  bool write_error(fid_cq* c, const fi_cq_err_entry& e) {
    return as_provider([&]<class L>() { return cq::from(c)->write_error<L>(e); });
  }
  bool has_room(fid_cq* c) {
    return as_provider([&]<class L>() { return cq::from(c)->has_room<L>(); });
  }
  // An owner that is util's own (cq_forward, as lnx's are) over a CQ of its
  // own (`target`, of target_size entries; 0: the default), and a peer CQ
  // of it (`peer`, of peer_size entries). The caller closes both.
  struct forwarded {
    fid_cq* target = nullptr;
    fid_cq* peer = nullptr;
    std::atomic<bool> refused{false};
    cq_forward fwd;
  };
  void open_forwarded(forwarded& f, size_t target_size, size_t peer_size, bool share) {
    fi_cq_attr ta{};
    ta.format = FI_CQ_FORMAT_TAGGED;
    ta.size = target_size;
    ASSERT_EQ(fi_cq_open(dom_, &ta, &f.target, nullptr), 0);
    f.fwd.fid.fclass = FI_CLASS_PEER_CQ;
    f.fwd.owner_ops =
        with_lock_kind(dom_->locks(), []<class L>() { return cq_forward::forward_ops<L>(); });
    f.fwd.target = cq::from(f.target);
    f.fwd.refused = &f.refused;
    f.fwd.ctx.cq = &f.fwd;
    f.fwd.share_progress = share;
    fi_cq_attr a{};
    a.format = FI_CQ_FORMAT_TAGGED;
    a.size = peer_size;
    a.flags = FI_PEER;
    ASSERT_EQ(fi_cq_open(dom_, &a, &f.peer, &f.fwd.ctx), 0);
  }

  test_env::domain_pair env_;
  fabric* fab_ = nullptr;
  domain* dom_ = nullptr;
  std::vector<fid*> open_;
};

INSTANTIATE_TEST_SUITE_P(threading, peer_test,
                         ::testing::Values(FI_THREAD_DOMAIN, FI_THREAD_SAFE));

TEST_P(peer_test, cq_open_checks_the_owner) {
  fi_cq_attr a{};
  a.flags = FI_PEER;
  fid_cq* c = nullptr;
  EXPECT_EQ(fi_cq_open(dom_, &a, &c, nullptr), -FI_EINVAL);
  owner_cq o;
  fi_peer_cq_context small{sizeof(fi_peer_cq_context) - 1, &o};
  EXPECT_EQ(fi_cq_open(dom_, &a, &c, &small), -FI_EINVAL);
  fi_peer_cq_context none{sizeof(fi_peer_cq_context), nullptr};
  EXPECT_EQ(fi_cq_open(dom_, &a, &c, &none), -FI_EINVAL);
  o.ops.writeerr = nullptr;
  EXPECT_EQ(fi_cq_open(dom_, &a, &c, &o.ctx), -FI_EINVAL);
  o.owner_ops = nullptr;
  EXPECT_EQ(fi_cq_open(dom_, &a, &c, &o.ctx), -FI_EINVAL);
  a.flags = FI_PEER | (uint64_t{1} << 60);
  EXPECT_EQ(fi_cq_open(dom_, &a, &c, &o.ctx), -FI_EBADFLAGS);
}

TEST_P(peer_test, cq_completions_reach_the_owner_in_order) {
  owner_cq o;
  fid_cq* c = open_cq(o);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(cq::from(c)->owner(), &o);
  int ctx[3];
  char buf[4];
  ASSERT_TRUE(write(c, {&ctx[0], FI_MSG | FI_RECV, 3, buf, 0, 0, 17, 0}));
  fi_cq_err_entry err{};
  err.op_context = &ctx[1];
  err.flags = FI_TAGGED | FI_RECV;
  err.tag = 0x99;
  err.err = FI_ETRUNC;
  err.src_addr = 18;
  uint8_t blob[3] = {1, 2, 3};
  err.err_data = blob;
  err.err_data_size = sizeof blob;
  ASSERT_TRUE(write_error(c, err));
  std::memset(blob, 0, sizeof blob);  // the CQ kept its own copy
  ASSERT_TRUE(write(c, {&ctx[2], FI_TAGGED | FI_RECV | FI_REMOTE_CQ_DATA, 4, buf, 0xda7a, 0x7a9,
                        FI_ADDR_NOTAVAIL, 0}));
  // Straight through, as fi_peer(7) has it: one write into the owner each.
  ASSERT_EQ(o.got.size(), 3u);
  EXPECT_EQ(o.got[0].context, &ctx[0]);
  EXPECT_EQ(o.got[0].flags, FI_MSG | FI_RECV);
  EXPECT_EQ(o.got[0].len, 3u);
  EXPECT_EQ(o.got[0].buf, buf);
  EXPECT_EQ(o.got[0].src, 17u);
  EXPECT_EQ(o.got[0].err, 0);
  EXPECT_EQ(o.got[1].context, &ctx[1]);
  EXPECT_EQ(o.got[1].err, FI_ETRUNC);
  EXPECT_EQ(o.got[1].tag, 0x99u);
  EXPECT_EQ(o.got[1].src, 18u);
  EXPECT_EQ(o.got[1].err_data, (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(o.got[2].data, 0xda7au);
  EXPECT_EQ(o.got[2].tag, 0x7a9u);
  EXPECT_EQ(o.got[2].flags, FI_TAGGED | FI_RECV | FI_REMOTE_CQ_DATA);

  EXPECT_EQ(fi_cq_read(c, nullptr, 0), 0);
  EXPECT_EQ(o.got.size(), 3u) << "each completion once: reading hands nothing over again";
}

TEST_P(peer_test, cq_cannot_be_read_but_by_driving_progress) {
  owner_cq o;
  fid_cq* c = open_cq(o);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(write(c, {nullptr, FI_SEND | FI_MSG, 0, nullptr, 0, 0, FI_ADDR_NOTAVAIL, 0}));
  fi_cq_tagged_entry e[2];
  fi_addr_t src[2];
  fi_cq_err_entry err{};
  EXPECT_EQ(fi_cq_read(c, e, 2), -FI_ENOSYS);
  EXPECT_EQ(fi_cq_readfrom(c, e, 2, src), -FI_ENOSYS);
  EXPECT_EQ(fi_cq_readerr(c, &err, 0), -FI_ENOSYS);
  EXPECT_EQ(fi_cq_sread(c, e, 1, nullptr, 0), -FI_ENOSYS);
  EXPECT_EQ(fi_cq_sreadfrom(c, e, 1, src, nullptr, 0), -FI_ENOSYS);
  EXPECT_EQ(fi_cq_readfrom(c, nullptr, 0, nullptr), 0);
  EXPECT_EQ(o.got.size(), 1u) << "the owner has it, once";
}

// A full owner pushes back: what it refused waits in the peer's ring, in
// order, and the ring fills so that the provider stops (has_room). Once the
// ring holds anything, later completions queue behind it even when the owner
// has room again, so none overtakes; the owner's read drains them.
TEST_P(peer_test, cq_owner_backpressure_loses_nothing) {
  owner_cq o;
  o.room = 2;
  fid_cq* c = open_cq(o, 4);
  ASSERT_NE(c, nullptr);
  int ctx[7];
  for (int i = 0; i < 6; ++i)
    ASSERT_TRUE(write(c, {&ctx[i], FI_SEND | FI_MSG, 0, nullptr, 0, 0, 0, 0})) << i;
  EXPECT_EQ(o.got.size(), 2u) << "the first two went straight through";
  EXPECT_FALSE(has_room(c));
  EXPECT_FALSE(write(c, {nullptr, FI_SEND, 0, nullptr, 0, 0, 0, 0}));
  EXPECT_EQ(fi_cq_read(c, nullptr, 0), 0);
  EXPECT_EQ(o.got.size(), 2u) << "the owner is still full";
  o.room = 3;
  EXPECT_EQ(fi_cq_read(c, nullptr, 0), 0);
  ASSERT_EQ(o.got.size(), 3u);
  EXPECT_TRUE(has_room(c));
  o.room = SIZE_MAX;
  ASSERT_TRUE(write(c, {&ctx[6], FI_SEND | FI_MSG, 0, nullptr, 0, 0, 0, 0}));
  EXPECT_EQ(o.got.size(), 3u) << "queued behind the three still waiting";
  EXPECT_EQ(fi_cq_read(c, nullptr, 0), 0);
  ASSERT_EQ(o.got.size(), 7u);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(o.got[i].context, &ctx[i]) << i;
}

// An owner that is util's own CQ (cq_forward, as lnx's are): completions go
// straight into it; once it is full the owner is told (refused) and the
// rest wait in the peer CQ, in order, until a read hands them over.
TEST_P(peer_test, cq_an_owner_of_util_is_written_straight_into_and_holds_back_in_order) {
  forwarded f;
  ASSERT_NO_FATAL_FAILURE(open_forwarded(f, 2, 8, false));
  fid_cq *target = f.target, *c = f.peer;
  std::atomic<bool>& refused = f.refused;
  int ctx[4];
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(write(c, {&ctx[i], FI_RECV | FI_TAGGED, 1, nullptr, 0, uint64_t(i), 7, 0})) << i;
  EXPECT_TRUE(refused.load()) << "the owner was full at the third";
  fi_cq_tagged_entry got[4];
  ASSERT_EQ(fi_cq_read(target, got, 4), 2);
  EXPECT_EQ(got[0].op_context, &ctx[0]);
  EXPECT_EQ(got[1].op_context, &ctx[1]);
  EXPECT_EQ(got[1].tag, 1u);
  EXPECT_EQ(fi_cq_read(c, nullptr, 0), 0);  // hands the waiting two over
  ASSERT_EQ(fi_cq_read(target, got, 4), 2);
  EXPECT_EQ(got[0].op_context, &ctx[2]);
  EXPECT_EQ(got[1].op_context, &ctx[3]);
  EXPECT_EQ(got[1].tag, 3u);
  EXPECT_EQ(fi_close(&c->fid), 0);
  EXPECT_EQ(fi_close(&target->fid), 0);
}

// An endpoint's progress hook that counts its runs.
struct counting_ep {
  int runs = 0;
  static void run(void* p) noexcept { ++static_cast<counting_ep*>(p)->runs; }
};

// share_progress: the hooks of endpoints bound to the peer CQ go on the
// target's list, so reading the target drives them (lnx's shm core) and
// reading the peer CQ does not; without it, the other way round.
TEST_P(peer_test, cq_an_owner_of_util_may_take_the_peers_progress_hooks) {
  for (bool share : {true, false}) {
    SCOPED_TRACE(share ? "shared" : "not shared");
    forwarded f;
    ASSERT_NO_FATAL_FAILURE(open_forwarded(f, 0, 0, share));
    fid_cq *target = f.target, *c = f.peer;
    EXPECT_EQ(f.fwd.progress_shared, share);
    counting_ep ep;
    cq::from(c)->progress().add({&counting_ep::run, &ep});  // what fi_ep_bind does
    fi_cq_tagged_entry got;
    EXPECT_EQ(fi_cq_read(target, &got, 1), -FI_EAGAIN);
    EXPECT_EQ(ep.runs, share ? 1 : 0);
    EXPECT_EQ(fi_cq_read(c, nullptr, 0), 0);
    EXPECT_EQ(ep.runs, 1);
    cq::from(c)->progress().remove(&ep);  // what closing the endpoint does
    EXPECT_EQ(fi_cq_read(target, &got, 1), -FI_EAGAIN);
    EXPECT_EQ(fi_cq_read(c, nullptr, 0), 0);
    EXPECT_EQ(ep.runs, 1);
    EXPECT_EQ(fi_close(&c->fid), 0);
    EXPECT_EQ(fi_close(&target->fid), 0);
  }
}

// fi_ep_bind of a peer CQ whose owner is util's own, of the same lock
// policy: the endpoint writes into the owner's CQ itself and asks it for
// room (tx_cq/rx_cq), while the peer CQ stays what it bound (its wait
// object, tx_bound/rx_bound); with share_progress its hook is on the
// owner's list. A peer CQ of a foreign owner is written as bound.
TEST_P(peer_test, cq_an_endpoint_bound_to_a_peer_of_util_writes_into_the_owners_cq) {
  forwarded f;
  ASSERT_NO_FATAL_FAILURE(open_forwarded(f, 2, 0, true));
  fid_cq *target = f.target, *c = f.peer;
  std::atomic<bool>& refused = f.refused;
  EXPECT_EQ(cq::from(c)->write_target(), cq::from(target));

  counting_ep ep;
  {
    ep_bindings b;
    ASSERT_EQ(b.bind(*dom_, &c->fid, FI_TRANSMIT | FI_RECV, {&counting_ep::run, &ep}, -1), 0);
    EXPECT_EQ(b.tx_cq.get(), cq::from(target));
    EXPECT_EQ(b.rx_cq.get(), cq::from(target));
    EXPECT_EQ(b.tx_bound(), cq::from(c));
    EXPECT_EQ(b.rx_bound(), cq::from(c));
    EXPECT_EQ(fi_close(&c->fid), -FI_EBUSY) << "the endpoint holds the peer CQ it bound";
    // Room is the owner's: two entries, then the endpoint holds back.
    int ctx[2];
    for (int i = 0; i < 2; ++i) {
      EXPECT_TRUE(has_room(b.rx_cq.get()));
      EXPECT_TRUE(write(b.rx_cq.get(), {&ctx[i], FI_RECV | FI_MSG, 1, nullptr, 0, 0, 5, 0}));
    }
    EXPECT_FALSE(has_room(b.rx_cq.get()));
    EXPECT_FALSE(refused.load()) << "nothing went through the peer CQ";
    fi_cq_tagged_entry got[2];
    ASSERT_EQ(fi_cq_read(target, got, 2), 2);  // runs the endpoint's hook too
    EXPECT_EQ(got[0].op_context, &ctx[0]);
    EXPECT_EQ(got[1].op_context, &ctx[1]);
    EXPECT_EQ(ep.runs, 1);
    b.unbind(&ep, -1);
    EXPECT_EQ(fi_cq_read(target, got, 2), -FI_EAGAIN);
    EXPECT_EQ(ep.runs, 1) << "unbinding took the hook off the owner's list";
  }
  EXPECT_EQ(fi_close(&c->fid), 0);

  owner_cq o;  // a foreign owner: the endpoint writes into the peer CQ
  fid_cq* foreign = open_cq(o);
  ASSERT_NE(foreign, nullptr);
  EXPECT_EQ(cq::from(foreign)->write_target(), cq::from(foreign));
  {
    ep_bindings b;
    ASSERT_EQ(b.bind(*dom_, &foreign->fid, FI_RECV, {&counting_ep::run, &ep}, -1), 0);
    EXPECT_EQ(b.rx_cq.get(), cq::from(foreign));
    EXPECT_EQ(b.rx_bound(), cq::from(foreign));
    b.unbind(&ep, -1);
  }
  EXPECT_EQ(fi_close(&target->fid), 0);
}

// Progress runs first: what a bound endpoint completes during the owner's
// call is delivered by that same call.
TEST_P(peer_test, cq_progress_then_delivery_in_one_call) {
  owner_cq o;
  fid_cq* c = open_cq(o);
  ASSERT_NE(c, nullptr);
  struct fake_ep {
    peer_test* t;
    fid_cq* c;
    int ctx = 0;
    static void run(void* p) noexcept {
      auto* ep = static_cast<fake_ep*>(p);
      ep->t->write(ep->c, {&ep->ctx, FI_RECV | FI_MSG, 1, nullptr, 0, 0, 5, 0});
    }
  } ep{this, c};
  cq::from(c)->progress().add({&fake_ep::run, &ep});
  EXPECT_EQ(fi_cq_read(c, nullptr, 0), 0);
  ASSERT_EQ(o.got.size(), 1u);
  EXPECT_EQ(o.got[0].context, &ep.ctx);
  cq::from(c)->progress().remove(&ep);
}

// A provider thread writing (straight into the owner) while the owner's
// thread drives and hands over what the owner refused now and then:
// everything arrives once, in order, whatever the interleaving.
TEST_P(peer_test, cq_writer_and_owner_on_two_threads) {
  if (GetParam() != FI_THREAD_SAFE) GTEST_SKIP() << "one thread per domain";
  owner_cq o;
  o.refuse_every = 7;
  fid_cq* c = open_cq(o, 64);
  ASSERT_NE(c, nullptr);
  constexpr uintptr_t n = 20000;
  std::thread writer([&] {
    for (uintptr_t i = 1; i <= n;) {
      if (write(c, {reinterpret_cast<void*>(i), FI_SEND, 0, nullptr, 0, 0, 0, 0})) ++i;
    }
  });
  while (o.count() < n) ASSERT_EQ(fi_cq_read(c, nullptr, 0), 0);
  writer.join();
  for (uintptr_t i = 0; i < n; ++i)
    ASSERT_EQ(o.got[i].context, reinterpret_cast<void*>(i + 1));
}

TEST_P(peer_test, cntr_counts_reach_the_owner) {
  fi_cntr_attr a{};
  a.events = FI_CNTR_EVENTS_COMP;
  a.flags = FI_PEER;
  fid_cntr* c = nullptr;
  EXPECT_EQ(fi_cntr_open(dom_, &a, &c, nullptr), -FI_EINVAL);
  owner_cntr o;
  o.ops.incerr = nullptr;
  EXPECT_EQ(fi_cntr_open(dom_, &a, &c, &o.ctx), -FI_EINVAL);
  o.ops.incerr = owner_cntr::incerr;
  ASSERT_EQ(fi_cntr_open(dom_, &a, &c, &o.ctx), 0);
  open_.push_back(&c->fid);
  cntr& p = *cntr::from(c);
  EXPECT_EQ(p.owner(), &o);
  p.inc();
  p.add(2);
  p.inc_err();
  EXPECT_EQ(o.incs, 3u) << "passed on at once, as fi_peer(7) has it";
  EXPECT_EQ(o.errs, 1u);
  EXPECT_EQ(fi_cntr_read(c), 3u);
  EXPECT_EQ(o.incs, 3u) << "reading drives progress and passes nothing again";
  p.inc_err();
  EXPECT_EQ(o.errs, 2u);
  fi_cntr_readerr(c);
  fi_cntr_read(c);
  EXPECT_EQ(o.incs, 3u) << "each increment once";
  EXPECT_EQ(o.errs, 2u);
  EXPECT_EQ(fi_cntr_add(c, 1), -FI_ENOSYS);
  EXPECT_EQ(fi_cntr_set(c, 1), -FI_ENOSYS);
  EXPECT_EQ(fi_cntr_adderr(c, 1), -FI_ENOSYS);
  EXPECT_EQ(fi_cntr_seterr(c, 1), -FI_ENOSYS);
  EXPECT_EQ(fi_cntr_wait(c, 1, 0), -FI_ENOSYS);
}

}  // namespace
