// SPDX-License-Identifier: MIT
// weft — shm, tcp (RDM) and udp (RDM) as peer providers (fi_peer(3)), the way a link
// provider uses them: the test plays the owner, with its own completion
// queue (a fid_peer_cq that records writes), counter (a fid_peer_cntr that
// counts) and receive context (a util::srx behind a fid_peer_srx whose
// owner_ops count the calls), opens the provider's peer CQ and peer SRX on
// them and binds two endpoints whose addresses carry user ids
// (FI_AV_USER_ID). Every completion must reach the owner's CQ, every
// receive must come from the owner's queue, and senders must be named by
// their user ids.
#include "util/srx.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_peer.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace {

using weft::util::with_lock_policy;

// ---- the owner ----------------------------------------------------------------

struct owner_cq : fid_peer_cq {
  struct rec {
    void* context;
    uint64_t flags;
    size_t len;
    void* buf;
    uint64_t data, tag;
    fi_addr_t src;
    int err;
  };
  std::vector<rec> got;

  size_t room = SIZE_MAX;  // beyond it the owner answers -FI_EAGAIN, like a full CQ

  static ssize_t write(fid_peer_cq* c, void* ctx, uint64_t flags, size_t len, void* buf,
                       uint64_t data, uint64_t tag, fi_addr_t src) {
    if (static_cast<owner_cq*>(c)->got.size() >= static_cast<owner_cq*>(c)->room) return -FI_EAGAIN;
    static_cast<owner_cq*>(c)->got.push_back({ctx, flags, len, buf, data, tag, src, 0});
    return 0;
  }
  static ssize_t writeerr(fid_peer_cq* c, const fi_cq_err_entry* e) {
    if (static_cast<owner_cq*>(c)->got.size() >= static_cast<owner_cq*>(c)->room) return -FI_EAGAIN;
    static_cast<owner_cq*>(c)->got.push_back(
        {e->op_context, e->flags, e->len, e->buf, e->data, e->tag, e->src_addr, e->err});
    return 0;
  }
  fi_ops_cq_owner ops{sizeof(fi_ops_cq_owner), write, writeerr};
  fi_peer_cq_context ctx{sizeof(fi_peer_cq_context), this};

  owner_cq() : fid_peer_cq{} {
    fid.fclass = FI_CLASS_PEER_CQ;
    owner_ops = &ops;
  }
  const rec* find(void* context) const {
    for (const rec& r : got)
      if (r.context == context) return &r;
    return nullptr;
  }
};

// The owner's receive context: a matching engine of its own, its owner_ops
// wrapped to count what the peer calls. The engine compares addresses as the
// peer reports them (user ids): no AV of its own.
struct owner_srx {
  weft::util::srx engine;
  fid_peer_srx* face;
  fi_ops_srx_owner real;
  fi_ops_srx_owner counting{sizeof(fi_ops_srx_owner), get_msg,    get_tag,   queue_msg,
                            queue_tag,                foreach_unspec, free_entry};
  fi_peer_srx_context ctx{sizeof(fi_peer_srx_context), nullptr};
  fi_threading threading;
  int gets = 0, queued_msg = 0, queued_tag = 0, freed = 0, foreach_calls = 0;
  fi_addr_t last_src = FI_ADDR_UNSPEC;
  // Matched entries handed to the peer, with the owner's list links as they
  // were: the peer may use only peer_context of an owner's entry (the links
  // are the owner's), so they must come back unchanged.
  std::map<fi_peer_rx_entry*, std::pair<fi_peer_rx_entry*, fi_peer_rx_entry*>> handed;
  int links_touched = 0;

  static weft::util::srx_attr attr_for(fi_threading t) {
    weft::util::srx_attr a;
    a.threading = t;
    a.directed_recv = true;
    return a;
  }
  explicit owner_srx(fi_threading t) : engine(attr_for(t)), threading(t) {
    face = engine.add_peer(nullptr, this);
    real = *face->owner_ops;
    face->owner_ops = &counting;
    ctx.srx = face;
  }
  static owner_srx* of(fid_peer_srx* s) { return static_cast<owner_srx*>(s->ep_fid.fid.context); }
  // The peer's callbacks, watched: an entry started is handed to the peer.
  fi_ops_srx_peer peer_real{};
  fi_ops_srx_peer watching{sizeof(fi_ops_srx_peer), start_msg, start_tag, discard_msg, discard_tag};
  void watch_peer() {
    peer_real = *face->peer_ops;
    face->peer_ops = &watching;
  }
  static int start_msg(fi_peer_rx_entry* e) {
    handing(e->srx, 0, e);
    return of(e->srx)->peer_real.start_msg(e);
  }
  static int start_tag(fi_peer_rx_entry* e) {
    handing(e->srx, 0, e);
    return of(e->srx)->peer_real.start_tag(e);
  }
  static int discard_msg(fi_peer_rx_entry* e) { return of(e->srx)->peer_real.discard_msg(e); }
  static int discard_tag(fi_peer_rx_entry* e) { return of(e->srx)->peer_real.discard_tag(e); }
  static int handing(fid_peer_srx* s, int r, fi_peer_rx_entry* e) {
    if (r == 0) of(s)->handed[e] = {e->next, e->prev};
    return r;
  }
  static int get_msg(fid_peer_srx* s, fi_peer_match_attr* a, fi_peer_rx_entry** e) {
    of(s)->gets++;
    of(s)->last_src = a->addr;
    int r = of(s)->real.get_msg(s, a, e);
    return handing(s, r, *e);
  }
  static int get_tag(fid_peer_srx* s, fi_peer_match_attr* a, fi_peer_rx_entry** e) {
    of(s)->gets++;
    of(s)->last_src = a->addr;
    int r = of(s)->real.get_tag(s, a, e);
    return handing(s, r, *e);
  }
  static int queue_msg(fi_peer_rx_entry* e) {
    of(e->srx)->queued_msg++;
    return of(e->srx)->real.queue_msg(e);
  }
  static int queue_tag(fi_peer_rx_entry* e) {
    of(e->srx)->queued_tag++;
    return of(e->srx)->real.queue_tag(e);
  }
  static void foreach_unspec(fid_peer_srx* s, fi_addr_t (*f)(fi_peer_rx_entry*)) {
    of(s)->foreach_calls++;
    of(s)->real.foreach_unspec_addr(s, f);
  }
  static void free_entry(fi_peer_rx_entry* e) {
    of(e->srx)->freed++;
    auto& h = of(e->srx)->handed;
    if (auto it = h.find(e); it != h.end()) {
      if (e->next != it->second.first || e->prev != it->second.second) of(e->srx)->links_touched++;
      h.erase(it);
    }
    of(e->srx)->real.free_entry(e);
  }

  // The application's receives, posted to the owner.
  ssize_t recv(void* buf, size_t len, fi_addr_t src, void* ctx) {
    iovec iov{buf, len};
    return with_lock_policy(threading, [&]<class L>() {
      return engine.post_msg<L>(&iov, nullptr, 1, src, ctx, 0);
    });
  }
  ssize_t trecv(void* buf, size_t len, uint64_t tag, void* ctx, uint64_t flags = 0) {
    iovec iov{buf, len};
    return with_lock_policy(threading, [&]<class L>() {
      return engine.post_tag<L>(&iov, nullptr, buf ? 1 : 0, FI_ADDR_UNSPEC, tag, 0, ctx, flags);
    });
  }
  weft::util::srx_stats stats() {
    return with_lock_policy(threading, [&]<class L>() { return engine.stats<L>(); });
  }
};

// The owner's counter: counts what the peer hands it.
struct owner_cntr : fid_peer_cntr {
  int incs = 0, errs = 0;
  static void inc(fid_peer_cntr* c) { static_cast<owner_cntr*>(c)->incs++; }
  static void incerr(fid_peer_cntr* c) { static_cast<owner_cntr*>(c)->errs++; }
  fi_ops_cntr_owner ops{sizeof(fi_ops_cntr_owner), inc, incerr};
  fi_peer_cntr_context ctx{sizeof(fi_peer_cntr_context), this};
  owner_cntr() : fid_peer_cntr{} {
    fid.fclass = FI_CLASS_PEER_CNTR;
    owner_ops = &ops;
  }
};

// ---- a provider under that owner -------------------------------------------------

constexpr fi_addr_t id_a = 1000, id_b = 2000;

// The provider's name and the domain's threading.
using peer_param = std::tuple<std::string, fi_threading>;

class peer_provider : public ::testing::TestWithParam<peer_param> {
 protected:
  const std::string& prov() const { return std::get<0>(GetParam()); }
  bool shm() const { return prov() == "shm"; }
  void SetUp() override {
    fi_info* hints = fi_allocinfo();
    hints->caps = FI_MSG | FI_TAGGED | FI_SOURCE | FI_PEER | FI_AV_USER_ID;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->threading = std::get<1>(GetParam());
    hints->fabric_attr->prov_name = strdup(prov().c_str());
    // tcp and udp: loopback, which every host has.
    const char* node = shm() ? nullptr : "127.0.0.1";
    if (!shm()) hints->addr_format = FI_SOCKADDR_IN;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 21), node, nullptr, node ? FI_SOURCE : 0, hints, &info), 0);
    fi_freeinfo(hints);
    EXPECT_TRUE(info->caps & FI_PEER);
    EXPECT_TRUE(info->caps & FI_AV_USER_ID);
    ASSERT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
    ASSERT_EQ(fi_domain(fabric, info, &domain, nullptr), 0);
    owner = std::make_unique<owner_srx>(info->domain_attr->threading);

    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    ca.size = 64;
    ca.flags = FI_PEER;
    ASSERT_EQ(fi_cq_open(domain, &ca, &cq, &ocq.ctx), 0);
    fi_rx_attr ra{};
    ra.op_flags = FI_PEER;
    ASSERT_EQ(fi_srx_context(domain, &ra, &srx, &owner->ctx), 0);
    EXPECT_NE(owner->face->peer_ops, nullptr);
    EXPECT_NE(owner->face->peer_ops->start_msg, nullptr);
    owner->watch_peer();
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    ASSERT_EQ(fi_av_open(domain, &aa, &av, nullptr), 0);
    a = open_ep();
    b = open_ep();
    ASSERT_TRUE(a && b);
    addr_a = insert(a, id_a);
    addr_b = insert(b, id_b);
  }
  void TearDown() override {
    for (fid_ep* e : {b, a}) {
      if (e) {
        EXPECT_EQ(fi_close(&e->fid), 0);
      }
    }
    for (fid* f : {srx ? &srx->fid : nullptr, av ? &av->fid : nullptr, cq ? &cq->fid : nullptr,
                   domain ? &domain->fid : nullptr, fabric ? &fabric->fid : nullptr}) {
      if (f) {
        EXPECT_EQ(fi_close(f), 0);
      }
    }
    if (owner) {
      EXPECT_EQ(owner->stats().unexpected, 0u) << "closed endpoints leave nothing queued";
      EXPECT_EQ(owner->stats().pool_available, owner->stats().pool_capacity)
          << "every entry went back to the owner";
      EXPECT_EQ(owner->links_touched, 0) << "the owner's list links are the owner's";
    }
    fi_freeinfo(info);
  }

  fid_ep* open_ep() {
    fid_ep* ep = nullptr;
    EXPECT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
    if (!ep) return nullptr;
    EXPECT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    EXPECT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
    EXPECT_EQ(fi_ep_bind(ep, &srx->fid, 0), 0);
    EXPECT_EQ(fi_enable(ep), 0);
    return ep;
  }
  fi_addr_t insert(fid_ep* ep, fi_addr_t id) {
    char name[128] = {};
    size_t len = sizeof name;
    EXPECT_EQ(fi_getname(&ep->fid, name, &len), 0);
    fi_addr_t addr = id;
    EXPECT_EQ(fi_av_insert(av, name, 1, &addr, FI_AV_USER_ID, nullptr), 1);
    EXPECT_NE(addr, id) << "fi_addr comes back as the address to send to";
    return addr;
  }
  // Drives progress the way an owner does, until `done` or a few seconds.
  template <class P>
  bool drive(P&& done) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done()) {
      if (fi_cq_read(cq, nullptr, 0) != 0) return false;
      if (std::chrono::steady_clock::now() > deadline) return false;
    }
    return true;
  }
  bool has(void* ctx) {
    return drive([&] { return ocq.find(ctx) != nullptr; });
  }

  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  owner_cq ocq;
  std::unique_ptr<owner_srx> owner;
  fid_cq* cq = nullptr;
  fid_ep* srx = nullptr;
  fid_av* av = nullptr;
  fid_ep* a = nullptr;
  fid_ep* b = nullptr;
  fi_addr_t addr_a = FI_ADDR_NOTAVAIL, addr_b = FI_ADDR_NOTAVAIL;
};

INSTANTIATE_TEST_SUITE_P(
    providers, peer_provider,
    ::testing::Combine(::testing::Values("shm", "tcp", "udp"),
                       ::testing::Values(FI_THREAD_DOMAIN, FI_THREAD_SAFE)),
    [](const ::testing::TestParamInfo<peer_param>& p) {
      return std::get<0>(p.param) +
             (std::get<1>(p.param) == FI_THREAD_SAFE ? "_thread_safe" : "_thread_domain");
    });

TEST_P(peer_provider, a_posted_receive_completes_on_the_owner_cq) {
  char buf[64] = {};
  fi_context rctx, sctx;
  ASSERT_EQ(owner->recv(buf, sizeof buf, FI_ADDR_UNSPEC, &rctx), 0);
  ASSERT_EQ(fi_send(a, "hello", 5, nullptr, addr_b, &sctx), 0);
  ASSERT_TRUE(has(&rctx));
  ASSERT_TRUE(has(&sctx));
  const auto* r = ocq.find(&rctx);
  EXPECT_EQ(r->flags, FI_MSG | FI_RECV);
  EXPECT_EQ(r->len, 5u);
  EXPECT_EQ(r->buf, buf);
  EXPECT_EQ(r->src, id_a) << "the sender by its user id";
  EXPECT_EQ(r->err, 0);
  EXPECT_EQ(std::string(buf, 5), "hello");
  const auto* s = ocq.find(&sctx);
  EXPECT_EQ(s->flags, FI_MSG | FI_SEND);
  EXPECT_EQ(s->err, 0);
  EXPECT_EQ(owner->last_src, id_a) << "the owner matches in user ids too";
  EXPECT_EQ(owner->gets, 1);
  EXPECT_EQ(owner->queued_msg, 0);
  EXPECT_EQ(owner->freed, 1);
  EXPECT_EQ(ocq.got.size(), 2u);
  EXPECT_FALSE(weft::util::cq::from(cq)->has_events()) << "nothing stays in the provider's CQ";
}

TEST_P(peer_provider, tagged_with_data_and_a_directed_receive) {
  char buf[16] = {};
  fi_context rctx, sctx, dctx, d2ctx;
  ASSERT_EQ(owner->trecv(buf, sizeof buf, 0x55, &rctx), 0);
  ASSERT_EQ(fi_tsenddata(b, "tagged", 6, nullptr, 0xda7a, addr_a, 0x55, &sctx), 0);
  ASSERT_TRUE(has(&rctx));
  const auto* r = ocq.find(&rctx);
  EXPECT_EQ(r->flags, FI_TAGGED | FI_RECV | FI_REMOTE_CQ_DATA);
  EXPECT_EQ(r->tag, 0x55u);
  EXPECT_EQ(r->data, 0xda7au);
  EXPECT_EQ(r->len, 6u);
  EXPECT_EQ(r->src, id_b);
  ASSERT_TRUE(has(&sctx));
  EXPECT_EQ(ocq.find(&sctx)->flags, FI_TAGGED | FI_SEND);
  // A receive directed at b's user id takes only b's message.
  char d[8] = {}, d2[8] = {};
  ASSERT_EQ(owner->recv(d, sizeof d, id_b, &dctx), 0);
  ASSERT_EQ(owner->recv(d2, sizeof d2, id_a, &d2ctx), 0);
  ASSERT_EQ(fi_inject(a, "from a", 6, addr_b), 0);
  ASSERT_TRUE(has(&d2ctx));
  EXPECT_EQ(ocq.find(&dctx), nullptr);
  ASSERT_EQ(fi_inject(b, "from b", 6, addr_a), 0);
  ASSERT_TRUE(has(&dctx));
  EXPECT_EQ(std::string(d, 6), "from b");
  EXPECT_EQ(std::string(d2, 6), "from a");
}

TEST_P(peer_provider, unexpected_messages_are_queued_at_the_owner_and_started_by_it) {
  std::vector<char> big(100'000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = char(i * 7);
  fi_context s1, s2;
  ASSERT_EQ(fi_send(a, "early", 5, nullptr, addr_b, &s1), 0);
  ASSERT_EQ(fi_tsend(a, big.data(), big.size(), nullptr, addr_b, 0x77, &s2), 0);
  ASSERT_TRUE(drive([&] { return owner->queued_msg == 1 && owner->queued_tag == 1; }));
  EXPECT_EQ(owner->stats().unexpected, 2u);
  // shm: a large send completes once received (tcp's once written).
  if (shm()) {
    EXPECT_EQ(ocq.find(&s2), nullptr) << "a large send completes once received";
  }

  char small[8] = {};
  std::vector<char> got(big.size());
  fi_context r1, r2;
  ASSERT_EQ(owner->recv(small, sizeof small, FI_ADDR_UNSPEC, &r1), 0);  // start_msg
  ASSERT_EQ(owner->trecv(got.data(), got.size(), 0x77, &r2), 0);        // start_tag
  ASSERT_TRUE(has(&r1));
  ASSERT_TRUE(has(&r2));
  ASSERT_TRUE(has(&s2));
  EXPECT_EQ(std::string(small, 5), "early");
  EXPECT_EQ(ocq.find(&r1)->len, 5u);
  EXPECT_EQ(ocq.find(&r1)->src, id_a);
  EXPECT_EQ(ocq.find(&r2)->len, big.size());
  EXPECT_EQ(ocq.find(&r2)->tag, 0x77u);
  EXPECT_EQ(ocq.find(&r2)->src, id_a);
  EXPECT_EQ(ocq.find(&r2)->err, 0);
  EXPECT_EQ(got, big);
  EXPECT_EQ(ocq.find(&s2)->err, 0);
  EXPECT_EQ(owner->stats().unexpected, 0u);
}

// A sender the endpoints' AV does not hold yet: its messages reach the owner
// with an unknown source; the insert makes the provider tell the owner
// (foreach_unspec_addr), and a receive directed at the new user id takes them.
TEST_P(peer_provider, an_insert_tells_the_owner_to_name_the_unknown_sender) {
  constexpr fi_addr_t id_c = 3000;
  fi_av_attr aa{};
  aa.type = FI_AV_TABLE;
  fid_av* av_c = nullptr;
  ASSERT_EQ(fi_av_open(domain, &aa, &av_c, nullptr), 0);
  fid_ep* c = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &c, nullptr), 0);
  ASSERT_EQ(fi_ep_bind(c, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
  ASSERT_EQ(fi_ep_bind(c, &av_c->fid, 0), 0);
  ASSERT_EQ(fi_ep_bind(c, &srx->fid, 0), 0);
  ASSERT_EQ(fi_enable(c), 0);
  char name[128] = {};
  size_t len = sizeof name;
  ASSERT_EQ(fi_getname(&b->fid, name, &len), 0);
  fi_addr_t b_at_c = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(fi_av_insert(av_c, name, 1, &b_at_c, 0, nullptr), 1);

  fi_context s1;
  ASSERT_EQ(fi_send(c, "stranger", 8, nullptr, b_at_c, &s1), 0);
  ASSERT_TRUE(drive([&] { return owner->queued_msg == 1; }));
  EXPECT_EQ(owner->last_src, FI_ADDR_NOTAVAIL);
  const int before = owner->foreach_calls;
  len = sizeof name;
  ASSERT_EQ(fi_getname(&c->fid, name, &len), 0);
  fi_addr_t addr_c = id_c;
  ASSERT_EQ(fi_av_insert(av, name, 1, &addr_c, FI_AV_USER_ID, nullptr), 1);
  EXPECT_GT(owner->foreach_calls, before);

  char got[8] = {};
  fi_context r1;
  ASSERT_EQ(owner->recv(got, sizeof got, id_c, &r1), 0);
  ASSERT_TRUE(has(&r1));
  EXPECT_EQ(std::string(got, 8), "stranger");
  EXPECT_EQ(ocq.find(&r1)->src, id_c);
  ASSERT_TRUE(has(&s1));
  EXPECT_EQ(fi_close(&c->fid), 0);
  EXPECT_EQ(fi_close(&av_c->fid), 0);
}

TEST_P(peer_provider, discarded_messages_complete_nothing) {
  std::vector<char> big(50'000, 'x');
  fi_context s2;
  ASSERT_EQ(fi_tinject(a, "drop me", 7, addr_b, 0x10), 0);
  ASSERT_EQ(fi_tsend(a, big.data(), big.size(), nullptr, addr_b, 0x11, &s2), 0);
  ASSERT_TRUE(drive([&] { return owner->queued_tag == 2; }));
  int freed = owner->freed;
  fi_context p1, p2;
  // FI_PEEK | FI_DISCARD: the owner hands each to the provider's discard_tag.
  ASSERT_EQ(owner->trecv(nullptr, 0, 0x10, &p1, FI_PEEK | FI_DISCARD), 0);
  ASSERT_EQ(owner->trecv(nullptr, 0, 0x11, &p2, FI_PEEK | FI_DISCARD), 0);
  EXPECT_EQ(owner->freed, freed + 2) << "discard gives the entries back";
  EXPECT_EQ(owner->stats().unexpected, 0u);
  // The large sender learns its message was taken (and dropped).
  ASSERT_TRUE(has(&s2));
  EXPECT_EQ(ocq.find(&s2)->err, 0);
  for (auto& r : ocq.got) EXPECT_FALSE(r.flags & FI_RECV) << "no receive completion";
}

TEST_P(peer_provider, closing_an_endpoint_withdraws_what_it_queued) {
  ASSERT_EQ(fi_inject(a, "orphan", 6, addr_b), 0);
  ASSERT_TRUE(drive([&] { return owner->queued_msg == 1; }));
  EXPECT_EQ(owner->stats().unexpected, 1u);
  EXPECT_EQ(fi_close(&srx->fid), -FI_EBUSY) << "bound endpoints hold it";
  EXPECT_EQ(fi_close(&b->fid), 0);
  b = nullptr;
  EXPECT_EQ(owner->stats().unexpected, 0u);
  // A receive posted now finds nothing of the closed endpoint's.
  char buf[8];
  fi_context r;
  ASSERT_EQ(owner->recv(buf, sizeof buf, FI_ADDR_UNSPEC, &r), 0);
  for (int i = 0; i < 10; ++i) fi_cq_read(cq, nullptr, 0);
  EXPECT_EQ(ocq.find(&r), nullptr);
  with_lock_policy(owner->threading, [&]<class L>() { owner->engine.cancel<L>(&r); });
}

TEST_P(peer_provider, receives_belong_to_the_owner_and_the_cq_to_its_reader) {
  char buf[8];
  EXPECT_EQ(fi_recv(b, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, nullptr), -FI_ENOSYS);
  EXPECT_EQ(fi_trecv(b, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, 0, 0, nullptr), -FI_ENOSYS);
  EXPECT_EQ(b->ops->rx_size_left(b), -FI_ENOSYS);
  fi_cq_tagged_entry e;
  EXPECT_EQ(fi_cq_read(cq, &e, 1), -FI_ENOSYS);
  // The peer SRX takes no receives either: they go to the owner.
  EXPECT_EQ(fi_recv(srx, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, nullptr), -FI_ENOSYS);
  // Sends still work.
  fi_context s;
  ASSERT_EQ(fi_send(a, "x", 1, nullptr, addr_b, &s), 0);
  EXPECT_TRUE(has(&s));
}

TEST_P(peer_provider, srx_context_and_bind_check_their_input) {
  fi_rx_attr ra{};
  fid_ep* s = nullptr;
  // Without FI_PEER it is the application's own shared receive context.
  ASSERT_EQ(fi_srx_context(domain, &ra, &s, &owner->ctx), 0);
  EXPECT_EQ(s->fid.fclass, static_cast<size_t>(FI_CLASS_SRX_CTX));
  EXPECT_EQ(fi_close(&s->fid), 0);
  s = nullptr;
  ra.op_flags = FI_PEER;
  EXPECT_EQ(fi_srx_context(domain, &ra, &s, nullptr), -FI_EINVAL);
  fi_peer_srx_context small{sizeof(fi_peer_srx_context) - 1, owner->face};
  EXPECT_EQ(fi_srx_context(domain, &ra, &s, &small), -FI_EINVAL);
  fi_ops_srx_owner partial = owner->counting;
  partial.queue_tag = nullptr;
  fid_peer_srx lacking = *owner->face;
  lacking.owner_ops = &partial;
  fi_peer_srx_context lacking_ctx{sizeof(fi_peer_srx_context), &lacking};
  EXPECT_EQ(fi_srx_context(domain, &ra, &s, &lacking_ctx), -FI_EINVAL);

  fid_ep* ep = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
  EXPECT_EQ(fi_ep_bind(ep, &srx->fid, FI_RECV), -FI_EBADFLAGS);
  ASSERT_EQ(fi_ep_bind(ep, &srx->fid, 0), 0);
  EXPECT_EQ(fi_ep_bind(ep, &srx->fid, 0), -FI_EINVAL) << "one receive context per endpoint";
  fid_ep* other = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &other, nullptr), 0);
  // A receive context the provider did not open (here the owner's own) is refused.
  EXPECT_EQ(fi_ep_bind(other, &owner->face->ep_fid.fid, 0), -FI_EINVAL);
  // So is one opened on another domain.
  fid_domain* dom2 = nullptr;
  ASSERT_EQ(fi_domain(fabric, info, &dom2, nullptr), 0);
  owner_srx owner2(info->domain_attr->threading);
  fid_ep* srx2 = nullptr;
  ASSERT_EQ(fi_srx_context(dom2, &ra, &srx2, &owner2.ctx), 0);
  EXPECT_EQ(fi_ep_bind(other, &srx2->fid, 0), -FI_EINVAL);
  EXPECT_EQ(fi_close(&other->fid), 0);
  EXPECT_EQ(fi_close(&ep->fid), 0);
  EXPECT_EQ(fi_close(&srx2->fid), 0);
  EXPECT_EQ(fi_close(&dom2->fid), 0);
}

// The owner's CQ refuses for a while: receives the owner starts then (queued
// messages taken by new receives) are held back, in order, without writing
// into the owner's entries beyond peer_context, and delivered once the owner
// takes completions again.
TEST_P(peer_provider, a_full_owner_cq_holds_receive_completions_back_in_order) {
  constexpr int early = 10, late = 64;  // late: the peer CQ's ring (64) fills
  constexpr int n = early + late;
  auto text = [](int i) {
    char m[8] = {};
    std::snprintf(m, sizeof m, "m%d", i);
    return std::string(m, sizeof m);
  };
  for (int i = 0; i < early; ++i) ASSERT_EQ(fi_inject(a, text(i).data(), 8, addr_b), 0);
  ASSERT_TRUE(drive([&] { return owner->queued_msg == early; }));
  ocq.room = 0;
  std::vector<fi_context> sctx(late);
  std::vector<std::string> sent(late);  // live until their sends complete
  for (int i = 0; i < late; ++i) {
    ssize_t r;
    sent[i] = text(early + i);
    while ((r = fi_send(a, sent[i].data(), 8, nullptr, addr_b, &sctx[i])) == -FI_EAGAIN)
      fi_cq_read(cq, nullptr, 0);
    ASSERT_EQ(r, 0);
  }
  for (int i = 0; i < 200; ++i) fi_cq_read(cq, nullptr, 0);
  EXPECT_TRUE(ocq.got.empty());
  // Each takes a queued message: the provider starts it with no room left.
  std::vector<fi_context> rctx(n);
  std::vector<char> bufs(n * 8);
  for (int i = 0; i < n; ++i) ASSERT_EQ(owner->recv(&bufs[i * 8], 8, FI_ADDR_UNSPEC, &rctx[i]), 0);
  for (int i = 0; i < 50; ++i) fi_cq_read(cq, nullptr, 0);
  ocq.room = SIZE_MAX;
  ASSERT_TRUE(drive([&] { return ocq.got.size() == size_t(n + late); })) << ocq.got.size();
  std::vector<void*> order;
  for (const auto& r : ocq.got)
    if (r.flags & FI_RECV) order.push_back(r.context);
  ASSERT_EQ(order.size(), size_t(n));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(order[i], &rctx[i]) << i;
    EXPECT_EQ(std::string(&bufs[i * 8], 8), text(i)) << i;
  }
  EXPECT_EQ(owner->links_touched, 0);
}

// A counter opened with FI_PEER: sends and receives count at the owner,
// a truncated receive as an error.
TEST_P(peer_provider, a_peer_counter_counts_at_the_owner) {
  owner_cntr oc;
  fi_cntr_attr ca{};
  ca.events = FI_CNTR_EVENTS_COMP;
  ca.flags = FI_PEER;
  fid_cntr* cntr = nullptr;
  EXPECT_EQ(fi_cntr_open(domain, &ca, &cntr, nullptr), -FI_EINVAL) << "no fi_peer_cntr_context";
  ASSERT_EQ(fi_cntr_open(domain, &ca, &cntr, &oc.ctx), 0);
  fid_ep* c = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &c, nullptr), 0);
  ASSERT_EQ(fi_ep_bind(c, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
  ASSERT_EQ(fi_ep_bind(c, &cntr->fid, FI_SEND | FI_RECV), 0);
  ASSERT_EQ(fi_ep_bind(c, &av->fid, 0), 0);
  ASSERT_EQ(fi_ep_bind(c, &srx->fid, 0), 0);
  ASSERT_EQ(fi_enable(c), 0);
  const fi_addr_t addr_c = insert(c, 3000);
  // The owner reads its peer counters: that passes the counts on.
  auto counted = [&](int incs, int errs) {
    return drive([&] {
      fi_cntr_read(cntr);
      fi_cntr_readerr(cntr);
      return oc.incs == incs && oc.errs == errs;
    });
  };

  fi_context s1;
  ASSERT_EQ(fi_send(c, "to a", 4, nullptr, addr_a, &s1), 0);
  ASSERT_TRUE(counted(1, 0));
  // a's message to c: c's receive counter.
  char buf[8] = {};
  fi_context r1;
  ASSERT_EQ(owner->recv(buf, sizeof buf, id_a, &r1), 0);  // not c's message to a
  ASSERT_EQ(fi_inject(a, "to c", 4, addr_c), 0);
  ASSERT_TRUE(counted(2, 0));
  ASSERT_TRUE(has(&r1));
  EXPECT_EQ(ocq.find(&r1)->src, id_a);
  // A receive too small for the message: an error at the owner's counter.
  fi_context r2;
  ASSERT_EQ(owner->recv(buf, 2, id_a, &r2), 0);
  ASSERT_EQ(fi_inject(a, "truncated", 9, addr_c), 0);
  ASSERT_TRUE(counted(2, 1));
  ASSERT_TRUE(has(&r2));
  EXPECT_EQ(ocq.find(&r2)->err, FI_ETRUNC);
  EXPECT_EQ(oc.incs, 2);
  // c's message to a (s1) was queued at the owner: take it.
  char got[8] = {};
  fi_context r3;
  ASSERT_EQ(owner->recv(got, sizeof got, FI_ADDR_UNSPEC, &r3), 0);
  ASSERT_TRUE(has(&r3));
  EXPECT_EQ(std::string(got, 4), "to a");
  EXPECT_EQ(ocq.find(&r3)->src, fi_addr_t{3000});
  EXPECT_EQ(fi_close(&c->fid), 0);
  EXPECT_EQ(fi_close(&cntr->fid), 0);
}

}  // namespace
