// SPDX-License-Identifier: MIT
// weft — unit tests of the receive-matching engine (util/srx): receives
// posted by an "endpoint", messages delivered by a fake peer provider through
// the fid_peer_srx owner_ops, completions read back with fi_cq_read. Every
// case runs under both lock policies.
#include <gtest/gtest.h>
#include <rdma/fi_eq.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "util/cq.hpp"
#include "util/domain.hpp"
#include "util/fabric.hpp"
#include "util_env.hpp"
#include "util/srx.hpp"

using namespace weft;
using namespace weft::util;

namespace {

fi_provider& test_prov = *test_env::provider();

template <class Lock>
constexpr fi_threading threading_of =
    std::is_same_v<Lock, null_lock> ? FI_THREAD_DOMAIN : FI_THREAD_SAFE;

// A peer provider in miniature: messages it cannot place yet are kept as
// heap strings in peer_context; start_* copies them out and completes.
template <class Lock>
struct fake_peer {
  struct event {
    char kind;  // 'S' start, 'D' discard
    bool tagged;
    void* context;
    std::string data;
  };
  fid_peer_srx* face = nullptr;
  cq* rx_cq = nullptr;
  bool yield_before_queue = false;  // widens the get/queue window in threaded runs
  std::mutex m;
  std::vector<event> events;

  static fake_peer* self(fi_peer_rx_entry* e) {
    return static_cast<fake_peer*>(e->srx->ep_fid.fid.context);
  }
  static std::string take(fi_peer_rx_entry* e) {
    auto* s = static_cast<std::string*>(e->peer_context);
    std::string d = std::move(*s);
    delete s;
    return d;
  }
  static int start(fi_peer_rx_entry* e, bool tagged) {
    std::string d = take(e);
    self(e)->record({'S', tagged, e->context, d});
    self(e)->finish(e, d);
    return 0;
  }
  static int discard(fi_peer_rx_entry* e, bool tagged) {
    std::string d = take(e);
    self(e)->record({'D', tagged, e->context, d});
    e->srx->owner_ops->free_entry(e);
    return 0;
  }
  static int start_msg(fi_peer_rx_entry* e) { return start(e, false); }
  static int start_tag(fi_peer_rx_entry* e) { return start(e, true); }
  static int discard_msg(fi_peer_rx_entry* e) { return discard(e, false); }
  static int discard_tag(fi_peer_rx_entry* e) { return discard(e, true); }
  static constexpr fi_ops_srx_peer ops = {sizeof(fi_ops_srx_peer), start_msg, start_tag,
                                          discard_msg, discard_tag};

  void record(event ev) {
    std::lock_guard g{m};
    events.push_back(std::move(ev));
  }
  // What the peer does once a buffer is known: copy, complete, give back.
  void finish(fi_peer_rx_entry* e, const std::string& d) {
    size_t done = 0;
    for (size_t i = 0; i < e->count && done < d.size(); ++i) {
      size_t n = std::min(e->iov[i].iov_len, d.size() - done);
      std::memcpy(e->iov[i].iov_base, d.data() + done, n);
      done += n;
    }
    constexpr uint64_t mask = FI_MSG | FI_TAGGED | FI_RECV | FI_MULTI_RECV | FI_REMOTE_CQ_DATA;
    cq_entry c{e->context, e->flags & mask, done,    e->count ? e->iov[0].iov_base : nullptr,
               e->cq_data, e->tag,          e->addr, 0};
    EXPECT_TRUE(rx_cq->write<Lock>(c));
    face->owner_ops->free_entry(e);
  }
  // First half of a delivery: ask for a match. On -FI_ENOENT the entry is
  // prepared but not queued yet (see queue()).
  int get(fi_addr_t addr, uint64_t tag, const std::string& d, bool tagged,
          std::optional<uint64_t> data, fi_peer_rx_entry** e) {
    fi_peer_match_attr a{addr, d.size(), tag};
    int r = tagged ? face->owner_ops->get_tag(face, &a, e) : face->owner_ops->get_msg(face, &a, e);
    if (r == 0 || r == -FI_ENOENT) {
      if (data) {
        (*e)->flags |= FI_REMOTE_CQ_DATA;
        (*e)->cq_data = *data;
      }
    }
    if (r == 0) finish(*e, d);
    if (r == -FI_ENOENT) (*e)->peer_context = new std::string(d);
    return r;
  }
  int queue(fi_peer_rx_entry* e, bool tagged) {
    return tagged ? face->owner_ops->queue_tag(e) : face->owner_ops->queue_msg(e);
  }
  // A whole delivery: 0 matched a posted receive, 1 queued as unexpected.
  int deliver(fi_addr_t addr, const std::string& d, bool tagged = false, uint64_t tag = 0,
              std::optional<uint64_t> data = {}) {
    fi_peer_rx_entry* e = nullptr;
    int r = get(addr, tag, d, tagged, data, &e);
    if (r == -FI_ENOENT) {
      if (yield_before_queue) std::this_thread::yield();
      EXPECT_EQ(queue(e, tagged), 0);
      return 1;
    }
    return r;
  }
  size_t count(char kind) {
    std::lock_guard g{m};
    size_t n = 0;
    for (auto& ev : events) n += ev.kind == kind;
    return n;
  }
};

template <class Lock>
class srx_test : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.open(threading_of<Lock>);
    fab_ = env_.fab;
    dom_ = env_.dom;
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    ca.size = 16384;
    ASSERT_EQ(fi_cq_open(dom_, &ca, &cq_fid_, nullptr), 0);
    make({});
  }
  void TearDown() override {
    if (engine_) engine_->template shutdown<Lock>();
    engine_.reset();
    EXPECT_EQ(fi_close(&cq_fid_->fid), 0);
    env_.close();
  }
  void make(srx_attr a) {
    if (engine_) engine_->template shutdown<Lock>();
    a.prov = &test_prov;
    a.rx_cq = cq::from(cq_fid_);
    a.threading = threading_of<Lock>;
    engine_ = std::make_unique<srx>(a);
    peer_ = std::make_unique<fake_peer<Lock>>();
    peer_->face = engine_->add_peer(&fake_peer<Lock>::ops, peer_.get());
    peer_->rx_cq = cq::from(cq_fid_);
  }
  ssize_t post(std::string& buf, void* ctx, fi_addr_t src = FI_ADDR_UNSPEC, uint64_t flags = 0) {
    iovec iov{buf.data(), buf.size()};
    return engine_->template post_msg<Lock>(&iov, nullptr, 1, src, ctx, flags);
  }
  ssize_t tpost(std::string& buf, void* ctx, uint64_t tag, uint64_t ignore = 0, uint64_t flags = 0,
                fi_addr_t src = FI_ADDR_UNSPEC) {
    iovec iov{buf.data(), buf.size()};
    return engine_->template post_tag<Lock>(&iov, nullptr, buf.empty() ? 0 : 1, src, tag, ignore,
                                            ctx, flags);
  }
  std::vector<fi_cq_tagged_entry> drain() {
    std::vector<fi_cq_tagged_entry> out;
    fi_cq_tagged_entry e[16];
    ssize_t n;
    while ((n = fi_cq_read(cq_fid_, e, 16)) > 0) out.insert(out.end(), e, e + n);
    EXPECT_TRUE(n == -FI_EAGAIN || n == -FI_EAVAIL) << n;
    return out;
  }
  std::optional<fi_cq_err_entry> error() {
    fi_cq_err_entry e{};
    if (fi_cq_readerr(cq_fid_, &e, 0) != 1) return {};
    return e;
  }
  srx_stats stats() { return engine_->template stats<Lock>(); }

  test_env::domain_pair env_;
  fabric* fab_ = nullptr;
  domain* dom_ = nullptr;
  fid_cq* cq_fid_ = nullptr;
  std::unique_ptr<srx> engine_;
  std::unique_ptr<fake_peer<Lock>> peer_;
  int ctx_[16] = {};
};

using policies = ::testing::Types<null_lock, mutex_lock>;
TYPED_TEST_SUITE(srx_test, policies);

void* ctx(int (&c)[16], int i) {
  return &c[i];
}

TYPED_TEST(srx_test, face_is_a_filled_peer_srx) {
  fid_peer_srx* f = this->peer_->face;
  EXPECT_EQ(f->ep_fid.fid.fclass, FI_CLASS_SRX_CTX);
  EXPECT_EQ(srx::of(f), this->engine_.get());
  ASSERT_NE(f->owner_ops, nullptr);
  EXPECT_EQ(f->owner_ops->size, sizeof(fi_ops_srx_owner));
  EXPECT_NE(f->owner_ops->foreach_unspec_addr, nullptr);
  EXPECT_EQ(f->peer_ops->size, sizeof(fi_ops_srx_peer));
  EXPECT_EQ(f->ep_fid.msg->recv(&f->ep_fid, nullptr, 0, nullptr, 0, nullptr), -FI_ENOSYS);
  fi_peer_rx_entry* e = nullptr;
  EXPECT_EQ(f->owner_ops->get_msg(f, nullptr, &e), -FI_EINVAL);
}

TYPED_TEST(srx_test, posted_receives_match_in_post_order) {
  std::string b[3] = {std::string(8, 0), std::string(8, 0), std::string(8, 0)};
  for (int i = 0; i < 3; ++i) ASSERT_EQ(this->post(b[i], ctx(this->ctx_, i)), 0);
  for (std::string m : {"one", "two", "three"}) EXPECT_EQ(this->peer_->deliver(5, m), 0);
  auto c = this->drain();
  ASSERT_EQ(c.size(), 3u);
  const char* want[] = {"one", "two", "three"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(c[i].op_context, ctx(this->ctx_, i));
    EXPECT_EQ(c[i].flags, FI_MSG | FI_RECV);
    EXPECT_EQ(c[i].len, strlen(want[i]));
    EXPECT_STREQ(b[i].c_str(), want[i]);
  }
  EXPECT_EQ(this->stats().posted, 0u);
}

TYPED_TEST(srx_test, unexpected_messages_match_in_arrival_order) {
  for (std::string m : {"a1", "b22", "c333"}) EXPECT_EQ(this->peer_->deliver(1, m), 1);
  EXPECT_EQ(this->stats().unexpected, 3u);
  EXPECT_TRUE(this->drain().empty());
  std::string b[3] = {std::string(8, 0), std::string(8, 0), std::string(8, 0)};
  for (int i = 0; i < 3; ++i) ASSERT_EQ(this->post(b[i], ctx(this->ctx_, i)), 0);
  EXPECT_STREQ(b[0].c_str(), "a1");
  EXPECT_STREQ(b[1].c_str(), "b22");
  EXPECT_STREQ(b[2].c_str(), "c333");
  auto& ev = this->peer_->events;
  ASSERT_EQ(ev.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ev[i].kind, 'S');
    EXPECT_FALSE(ev[i].tagged);
    EXPECT_EQ(ev[i].context, ctx(this->ctx_, i));
  }
  EXPECT_EQ(this->drain().size(), 3u);
  EXPECT_EQ(this->stats().unexpected, 0u);
}

TYPED_TEST(srx_test, directed_receive_honours_the_source) {
  srx_attr a;
  a.directed_recv = true;
  this->make(a);
  std::string from2(8, 0), any(8, 0);
  ASSERT_EQ(this->post(from2, ctx(this->ctx_, 0), 2), 0);
  ASSERT_EQ(this->post(any, ctx(this->ctx_, 1)), 0);
  EXPECT_EQ(this->peer_->deliver(1, "from1"), 0);  // skips the receive for 2
  EXPECT_STREQ(any.c_str(), "from1");
  EXPECT_EQ(this->peer_->deliver(3, "from3"), 1);  // nothing left for 3
  EXPECT_EQ(this->peer_->deliver(2, "from2"), 0);
  EXPECT_STREQ(from2.c_str(), "from2");
  // Unexpected side: a receive for 3 takes 3's message, not the older one.
  EXPECT_EQ(this->peer_->deliver(4, "from4"), 1);
  std::string b(8, 0);
  ASSERT_EQ(this->post(b, ctx(this->ctx_, 2), 4), 0);
  EXPECT_STREQ(b.c_str(), "from4");
  EXPECT_EQ(this->stats().unexpected, 1u);
}

// The owner's own fast path (take_posted / recycle) picks what get_* would.
TYPED_TEST(srx_test, take_posted_takes_the_oldest_match_only) {
  using L = TypeParam;
  srx_attr a;
  a.directed_recv = true;
  this->make(a);
  std::string t1(8, 0), t2(8, 0), t2b(8, 0), any(8, 0);
  ASSERT_EQ(this->tpost(t1, ctx(this->ctx_, 0), 1), 0);
  ASSERT_EQ(this->tpost(t2, ctx(this->ctx_, 1), 2, 0, 0, 7), 0);  // only from 7
  ASSERT_EQ(this->tpost(t2b, ctx(this->ctx_, 2), 2), 0);
  // Not the oldest (tag 1), nor the one for source 7: the third.
  srx_entry* e = this->engine_->template take_posted<L>(5, 2, true);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->rx.context, ctx(this->ctx_, 2));
  EXPECT_EQ(e->rx.iov[0].iov_base, t2b.data());
  EXPECT_EQ(this->stats().posted, 2u);
  this->engine_->template recycle<L>(e);
  EXPECT_EQ(this->engine_->template take_posted<L>(5, 9, true), nullptr);  // no tag 9
  EXPECT_EQ(this->engine_->template take_posted<L>(5, 0, false), nullptr);  // no message receive
  e = this->engine_->template take_posted<L>(7, 2, true);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->rx.context, ctx(this->ctx_, 1));
  this->engine_->template recycle<L>(e);
  // A multi-receive buffer first in line is left to get_*, which carves it.
  std::string big(64, 0);
  ASSERT_EQ(this->post(big, ctx(this->ctx_, 3), FI_ADDR_UNSPEC, FI_MULTI_RECV), 0);
  ASSERT_EQ(this->post(any, ctx(this->ctx_, 4)), 0);
  EXPECT_EQ(this->engine_->template take_posted<L>(5, 0, false), nullptr);
  EXPECT_EQ(this->peer_->deliver(5, "piece"), 0);
  EXPECT_STREQ(big.c_str(), "piece");
  EXPECT_STREQ(any.c_str(), "");
  // Left: tag 1 and `any`; the buffer went with its first piece (59 bytes
  // left, under the default minimum of 64). Every other entry is back.
  EXPECT_EQ(this->stats().posted, 2u);
  EXPECT_EQ(this->stats().pool_available + 2, this->stats().pool_capacity);
}

TYPED_TEST(srx_test, source_is_ignored_without_directed_recv) {
  std::string b(8, 0);
  ASSERT_EQ(this->post(b, ctx(this->ctx_, 0), 2), 0);
  EXPECT_EQ(this->peer_->deliver(1, "x"), 0);
}

TYPED_TEST(srx_test, tags_match_under_the_ignore_mask) {
  std::string b0(8, 0), b1(8, 0), b2(8, 0);
  ASSERT_EQ(this->tpost(b0, ctx(this->ctx_, 0), 0x100, 0xff), 0);
  ASSERT_EQ(this->tpost(b1, ctx(this->ctx_, 1), 0x200), 0);
  EXPECT_EQ(this->peer_->deliver(1, "t2", true, 0x200), 0);    // passes the first receive
  EXPECT_EQ(this->peer_->deliver(1, "t1ab", true, 0x1ab), 0);  // low bits ignored
  EXPECT_EQ(this->peer_->deliver(1, "t301", true, 0x301), 1);  // 0x300 bit counts
  EXPECT_STREQ(b0.c_str(), "t1ab");
  EXPECT_STREQ(b1.c_str(), "t2");
  auto c = this->drain();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].op_context, ctx(this->ctx_, 1));
  EXPECT_EQ(c[0].tag, 0x200u);
  EXPECT_EQ(c[1].tag, 0x1abu);  // the sender's tag, not the receive's
  EXPECT_EQ(c[1].flags, FI_TAGGED | FI_RECV);
  // Untagged receives never see tagged messages.
  ASSERT_EQ(this->post(b2, ctx(this->ctx_, 2)), 0);
  EXPECT_EQ(this->stats().posted, 1u);
  ASSERT_EQ(this->tpost(b2, ctx(this->ctx_, 3), 0x300, 0x0ff), 0);
  EXPECT_STREQ(b2.c_str(), "t301");
}

TYPED_TEST(srx_test, peek_miss_reports_enomsg) {
  std::string none;
  ASSERT_EQ(this->tpost(none, ctx(this->ctx_, 0), 7, 0, FI_PEEK), 0);
  EXPECT_TRUE(this->drain().empty());
  auto e = this->error();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->err, FI_ENOMSG);
  EXPECT_EQ(e->op_context, ctx(this->ctx_, 0));
  EXPECT_EQ(e->tag, 7u);
  // A peek is never queued: a later message is unexpected.
  EXPECT_EQ(this->peer_->deliver(1, "late", true, 7), 1);
}

TYPED_TEST(srx_test, peek_hit_reports_without_consuming) {
  EXPECT_EQ(this->peer_->deliver(3, "hello", true, 0x42, 0xdada), 1);
  std::string none;
  ASSERT_EQ(this->tpost(none, ctx(this->ctx_, 0), 0x40, 0xf, FI_PEEK), 0);
  auto c = this->drain();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].op_context, ctx(this->ctx_, 0));
  EXPECT_EQ(c[0].len, 5u);
  EXPECT_EQ(c[0].tag, 0x42u);
  EXPECT_EQ(c[0].data, 0xdadau);
  EXPECT_EQ(c[0].flags, FI_TAGGED | FI_RECV | FI_REMOTE_CQ_DATA);
  EXPECT_EQ(this->stats().unexpected, 1u);
  std::string b(8, 0);
  ASSERT_EQ(this->tpost(b, ctx(this->ctx_, 1), 0x42), 0);
  EXPECT_STREQ(b.c_str(), "hello");
  c = this->drain();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].data, 0xdadau);
  EXPECT_EQ(c[0].flags, FI_TAGGED | FI_RECV | FI_REMOTE_CQ_DATA);
}

TYPED_TEST(srx_test, peek_claim_then_claim_receives_that_message) {
  EXPECT_EQ(this->peer_->deliver(1, "claimed", true, 9), 1);
  fi_context fc{};
  std::string none;
  ASSERT_EQ(this->tpost(none, &fc, 9, 0, FI_PEEK | FI_CLAIM), 0);
  ASSERT_EQ(this->drain().size(), 1u);
  EXPECT_EQ(this->stats().claimed, 1u);
  // An ordinary receive no longer sees the claimed message.
  std::string other(16, 0);
  ASSERT_EQ(this->tpost(other, ctx(this->ctx_, 0), 9), 0);
  EXPECT_EQ(this->stats().posted, 1u);
  std::string b(16, 0);
  ASSERT_EQ(this->tpost(b, &fc, 0, 0, FI_CLAIM), 0);
  EXPECT_STREQ(b.c_str(), "claimed");
  auto c = this->drain();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].op_context, &fc);
  EXPECT_EQ(c[0].tag, 9u);
  EXPECT_EQ(this->peer_->deliver(1, "next", true, 9), 0);
  EXPECT_STREQ(other.c_str(), "next");
  // Claiming again, or with a context that claimed nothing, is an error.
  EXPECT_EQ(this->tpost(b, &fc, 0, 0, FI_CLAIM), -FI_EINVAL);
  EXPECT_EQ(this->tpost(b, nullptr, 0, 0, FI_CLAIM), -FI_EINVAL);
}

TYPED_TEST(srx_test, peek_discard_drops_the_message) {
  EXPECT_EQ(this->peer_->deliver(1, "junk", true, 5), 1);
  std::string none;
  ASSERT_EQ(this->tpost(none, ctx(this->ctx_, 0), 5, 0, FI_PEEK | FI_DISCARD), 0);
  auto c = this->drain();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].len, 4u);
  EXPECT_EQ(this->peer_->count('D'), 1u);
  EXPECT_TRUE(this->peer_->events[0].tagged);
  EXPECT_EQ(this->stats().unexpected, 0u);
  // Peek + discard that misses: FI_ENOMSG, nothing discarded.
  ASSERT_EQ(this->tpost(none, ctx(this->ctx_, 1), 5, 0, FI_PEEK | FI_DISCARD), 0);
  auto e = this->error();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->err, FI_ENOMSG);
  EXPECT_EQ(this->peer_->count('D'), 1u);
}

TYPED_TEST(srx_test, claim_discard_drops_a_claimed_message) {
  EXPECT_EQ(this->peer_->deliver(1, "later", true, 5), 1);
  fi_context fc{};
  std::string none;
  ASSERT_EQ(this->tpost(none, &fc, 5, 0, FI_PEEK | FI_CLAIM), 0);
  ASSERT_EQ(this->drain().size(), 1u);
  ASSERT_EQ(this->tpost(none, &fc, 0, 0, FI_CLAIM | FI_DISCARD), 0);
  auto c = this->drain();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].op_context, &fc);
  EXPECT_EQ(c[0].len, 0u);
  EXPECT_EQ(this->peer_->count('D'), 1u);
  EXPECT_EQ(this->peer_->count('S'), 0u);
  auto s = this->stats();
  EXPECT_EQ(s.claimed + s.unexpected, 0u);
}

TYPED_TEST(srx_test, bad_flag_combinations_are_refused) {
  std::string b(8, 0);
  EXPECT_EQ(this->tpost(b, ctx(this->ctx_, 0), 1, 0, FI_DISCARD), -FI_EINVAL);
  EXPECT_EQ(this->tpost(b, ctx(this->ctx_, 0), 1, 0, FI_MULTI_RECV), -FI_EBADFLAGS);
  EXPECT_EQ(this->post(b, ctx(this->ctx_, 0), FI_ADDR_UNSPEC, FI_PEEK), -FI_EBADFLAGS);
  iovec iov[5] = {};
  EXPECT_EQ((this->engine_->template post_msg<TypeParam>(iov, nullptr, 5, 0, nullptr, 0)),
            -FI_EINVAL);
  EXPECT_EQ((this->engine_->template post_msg<TypeParam>(nullptr, nullptr, 1, 0, nullptr, 0)),
            -FI_EINVAL);
  EXPECT_EQ(
      (this->engine_->template post_msg<TypeParam>(iov, nullptr, 2, 0, nullptr, FI_MULTI_RECV)),
      -FI_EINVAL);
  EXPECT_EQ(this->stats().posted, 0u);
}

TYPED_TEST(srx_test, multi_recv_packs_messages_until_below_the_minimum) {
  srx_attr a;
  a.min_multi_recv = 64;
  this->make(a);
  std::string buf(256, 0);
  ASSERT_EQ(this->post(buf, ctx(this->ctx_, 0), FI_ADDR_UNSPEC, FI_MULTI_RECV), 0);
  EXPECT_EQ(this->peer_->deliver(1, std::string(96, 'a')), 0);
  EXPECT_EQ(this->peer_->deliver(1, std::string(96, 'b')), 0);  // 64 left: still posted
  EXPECT_EQ(this->stats().posted, 1u);
  EXPECT_EQ(this->peer_->deliver(1, std::string(40, 'c')), 0);  // 24 left: released
  EXPECT_EQ(this->stats().posted, 0u);
  EXPECT_EQ(this->peer_->deliver(1, "d"), 1);
  auto c = this->drain();
  ASSERT_EQ(c.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c[i].op_context, ctx(this->ctx_, 0));
  EXPECT_EQ(c[0].buf, buf.data());
  EXPECT_EQ(c[1].buf, buf.data() + 96);
  EXPECT_EQ(c[2].buf, buf.data() + 192);
  EXPECT_EQ(c[0].flags, FI_MSG | FI_RECV);
  EXPECT_EQ(c[1].flags, FI_MSG | FI_RECV);
  EXPECT_EQ(c[2].flags, FI_MSG | FI_RECV | FI_MULTI_RECV);
  EXPECT_EQ(buf.substr(0, 232), std::string(96, 'a') + std::string(96, 'b') + std::string(40, 'c'));
}

TYPED_TEST(srx_test, multi_recv_consumes_unexpected_messages_and_exact_fill) {
  srx_attr a;
  a.min_multi_recv = 16;
  this->make(a);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(this->peer_->deliver(1, std::string(32, 'x' + i)), 1);
  std::string buf(96, 0);
  ASSERT_EQ(this->post(buf, ctx(this->ctx_, 0), FI_ADDR_UNSPEC, FI_MULTI_RECV), 0);
  EXPECT_EQ(this->stats().posted, 0u);  // filled exactly: 0 left
  EXPECT_EQ(this->stats().unexpected, 0u);
  auto c = this->drain();
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[2].flags & FI_MULTI_RECV, FI_MULTI_RECV);
  EXPECT_EQ(c[1].flags & FI_MULTI_RECV, 0u);
  EXPECT_EQ(buf, std::string(32, 'x') + std::string(32, 'y') + std::string(32, 'z'));
  // The minimum in force at post time counts, and cancel releases the buffer.
  std::string buf2(64, 0);
  ASSERT_EQ(this->post(buf2, ctx(this->ctx_, 1), FI_ADDR_UNSPEC, FI_MULTI_RECV), 0);
  this->engine_->set_min_multi_recv(1000);
  EXPECT_EQ(this->peer_->deliver(1, std::string(8, 'q')), 0);
  EXPECT_EQ(this->stats().posted, 1u);
  EXPECT_EQ(this->engine_->template cancel<TypeParam>(ctx(this->ctx_, 1)), 0);
  EXPECT_EQ(this->drain().size(), 1u);
  auto e = this->error();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->err, FI_ECANCELED);
  EXPECT_EQ(e->flags, FI_MSG | FI_RECV | FI_MULTI_RECV);
}

TYPED_TEST(srx_test, cancel_removes_posted_receives) {
  std::string b0(8, 0), b1(8, 0);
  ASSERT_EQ(this->post(b0, ctx(this->ctx_, 0)), 0);
  ASSERT_EQ(this->tpost(b1, ctx(this->ctx_, 1), 3), 0);
  EXPECT_EQ(this->engine_->template cancel<TypeParam>(ctx(this->ctx_, 1)), 0);
  EXPECT_EQ(this->engine_->template cancel<TypeParam>(ctx(this->ctx_, 1)), -FI_ENOENT);
  EXPECT_EQ(this->engine_->template cancel<TypeParam>(nullptr), -FI_ENOENT);
  auto e = this->error();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->err, FI_ECANCELED);
  EXPECT_EQ(e->op_context, ctx(this->ctx_, 1));
  EXPECT_EQ(e->flags, FI_TAGGED | FI_RECV);
  EXPECT_EQ(e->tag, 3u);
  EXPECT_EQ(this->peer_->deliver(1, "t", true, 3), 1);  // nothing posted for it now
  EXPECT_EQ(this->engine_->template cancel<TypeParam>(ctx(this->ctx_, 0)), 0);
  EXPECT_EQ(this->peer_->deliver(1, "m"), 1);
  e = this->error();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->op_context, ctx(this->ctx_, 0));
  EXPECT_EQ(e->flags, FI_MSG | FI_RECV);
  EXPECT_EQ(this->stats().posted, 0u);
}

TYPED_TEST(srx_test, size_limits_posted_receives) {
  srx_attr a;
  a.size = 2;
  this->make(a);
  std::string b(4, 0);
  EXPECT_EQ((this->engine_->template rx_size_left<TypeParam>()), 2);
  ASSERT_EQ(this->post(b, ctx(this->ctx_, 0)), 0);
  ASSERT_EQ(this->post(b, ctx(this->ctx_, 1)), 0);
  EXPECT_EQ(this->post(b, ctx(this->ctx_, 2)), -FI_EAGAIN);
  EXPECT_EQ((this->engine_->template rx_size_left<TypeParam>()), 0);
  // A receive that an unexpected message satisfies needs no slot.
  EXPECT_EQ(this->peer_->deliver(1, "u", true, 1), 1);
  EXPECT_EQ(this->tpost(b, ctx(this->ctx_, 3), 1), 0);
}

TYPED_TEST(srx_test, receive_posted_between_get_and_queue_keeps_order) {
  fi_peer_rx_entry* e1 = nullptr;
  ASSERT_EQ(this->peer_->get(1, 0, "first", false, {}, &e1), -FI_ENOENT);
  EXPECT_EQ(this->peer_->deliver(1, "second"), 1);
  std::string b(16, 0);
  ASSERT_EQ(this->post(b, ctx(this->ctx_, 0)), 0);  // takes "first", still being prepared
  EXPECT_EQ(this->peer_->count('S'), 0u);
  ASSERT_EQ(this->peer_->queue(e1, false), 0);  // starts it right away
  EXPECT_EQ(this->peer_->count('S'), 1u);
  EXPECT_STREQ(b.c_str(), "first");
  // A peek does not see a message that is not queued yet.
  fi_peer_rx_entry* e2 = nullptr;
  ASSERT_EQ(this->peer_->get(1, 4, "tagged", true, {}, &e2), -FI_ENOENT);
  std::string none;
  ASSERT_EQ(this->tpost(none, ctx(this->ctx_, 1), 4, 0, FI_PEEK), 0);
  ASSERT_TRUE(this->error());
  ASSERT_EQ(this->peer_->queue(e2, true), 0);
  EXPECT_EQ(this->peer_->queue(e2, true), -FI_EINVAL);  // queued twice
  EXPECT_EQ(this->stats().unexpected, 2u);
}

TYPED_TEST(srx_test, peer_may_withdraw_messages) {
  fi_peer_rx_entry* e = nullptr;
  ASSERT_EQ(this->peer_->get(1, 0, "gone", false, {}, &e), -FI_ENOENT);
  delete static_cast<std::string*>(e->peer_context);
  this->peer_->face->owner_ops->free_entry(e);
  EXPECT_EQ(this->stats().unexpected, 0u);
  // Withdrawn after a receive matched it: that receive fails with FI_EIO.
  ASSERT_EQ(this->peer_->get(1, 0, "lost", false, {}, &e), -FI_ENOENT);
  std::string b(8, 0);
  ASSERT_EQ(this->post(b, ctx(this->ctx_, 0)), 0);
  delete static_cast<std::string*>(e->peer_context);
  this->peer_->face->owner_ops->free_entry(e);
  auto err = this->error();
  ASSERT_TRUE(err);
  EXPECT_EQ(err->err, FI_EIO);
  EXPECT_EQ(err->op_context, ctx(this->ctx_, 0));
  auto s = this->stats();
  EXPECT_EQ(s.pool_available, s.pool_capacity);
}

// withdraw: a closing peer endpoint takes back what it queued, but never a
// message a receive already took (its start_* has it): free_entry would
// release that entry under start_*.
TYPED_TEST(srx_test, withdraw_takes_back_only_what_no_receive_took) {
  fi_peer_rx_entry* e = nullptr;
  ASSERT_EQ(this->peer_->get(1, 0, "queued", false, {}, &e), -FI_ENOENT);
  ASSERT_EQ(this->peer_->queue(e, false), 0);
  EXPECT_EQ(this->stats().unexpected, 1u);
  auto* held = static_cast<std::string*>(e->peer_context);
  EXPECT_TRUE(this->engine_->template withdraw<TypeParam>(e));
  delete held;
  EXPECT_EQ(this->stats().unexpected, 0u);
  std::string b(8, 0);
  ASSERT_EQ(this->post(b, ctx(this->ctx_, 0)), 0);  // nothing left to take
  EXPECT_EQ(this->peer_->count('S'), 0u);
  EXPECT_EQ(this->stats().posted, 1u);
  EXPECT_EQ(this->engine_->template cancel<TypeParam>(ctx(this->ctx_, 0)), 0);
  ASSERT_TRUE(this->error());
  // The receive takes a message between get and queue: the entry is the
  // receive's (queue starts it), not the peer's to withdraw.
  ASSERT_EQ(this->peer_->get(1, 0, "taken", false, {}, &e), -FI_ENOENT);
  ASSERT_EQ(this->post(b, ctx(this->ctx_, 1)), 0);
  EXPECT_FALSE(this->engine_->template withdraw<TypeParam>(e));
  ASSERT_EQ(this->peer_->queue(e, false), 0);
  EXPECT_EQ(this->peer_->count('S'), 1u);
  EXPECT_STREQ(b.c_str(), "taken");
  auto s = this->stats();
  EXPECT_EQ(s.unexpected, 0u);
  EXPECT_EQ(s.posted, 0u);
  EXPECT_EQ(s.pool_available, s.pool_capacity);
}

TYPED_TEST(srx_test, foreach_unspec_addr_resolves_sources) {
  srx_attr a;
  a.directed_recv = true;
  this->make(a);
  EXPECT_EQ(this->peer_->deliver(FI_ADDR_UNSPEC, "anon"), 1);
  std::string b(8, 0);
  ASSERT_EQ(this->post(b, ctx(this->ctx_, 0), 7), 0);
  EXPECT_EQ(this->stats().posted, 1u);
  EXPECT_TRUE(this->engine_->template cancel<TypeParam>(ctx(this->ctx_, 0)) == 0);
  this->error();
  this->peer_->face->owner_ops->foreach_unspec_addr(
      this->peer_->face, [](fi_peer_rx_entry*) -> fi_addr_t { return 7; });
  ASSERT_EQ(this->post(b, ctx(this->ctx_, 1), 7), 0);
  EXPECT_STREQ(b.c_str(), "anon");
}

// weft's providers label a sender not in the AV FI_ADDR_NOTAVAIL (what an
// FI_SOURCE completion reports); fi_peer(3)'s owner relabels those too, each
// with the answer its peer gives for that message, and keeps the label of a
// message whose sender is still unknown.
TYPED_TEST(srx_test, foreach_unspec_addr_relabels_each_unknown_sender_by_its_own_answer) {
  srx_attr a;
  a.directed_recv = true;
  this->make(a);
  EXPECT_EQ(this->peer_->deliver(FI_ADDR_NOTAVAIL, "from-5", true, 1), 1);
  EXPECT_EQ(this->peer_->deliver(FI_ADDR_NOTAVAIL, "from-9", true, 1), 1);
  EXPECT_EQ(this->peer_->deliver(FI_ADDR_NOTAVAIL, "nobody", true, 1), 1);
  EXPECT_EQ(this->peer_->deliver(3, "from-3", true, 1), 1);
  // The peer's answer comes from what it kept of each message.
  auto answer = [](fi_peer_rx_entry* e) -> fi_addr_t {
    const std::string& d = *static_cast<std::string*>(e->peer_context);
    if (d == "from-5") return 5;
    if (d == "from-9") return 9;
    if (d == "from-3") ADD_FAILURE() << "a known sender was asked about";
    return FI_ADDR_NOTAVAIL;
  };
  this->peer_->face->owner_ops->foreach_unspec_addr(this->peer_->face, answer);
  std::string b(8, 0);
  ASSERT_EQ(this->tpost(b, ctx(this->ctx_, 0), 1, 0, 0, 9), 0);
  EXPECT_STREQ(b.c_str(), "from-9");
  ASSERT_EQ(this->tpost(b, ctx(this->ctx_, 1), 1, 0, 0, 5), 0);
  EXPECT_STREQ(b.c_str(), "from-5");
  ASSERT_EQ(this->tpost(b, ctx(this->ctx_, 2), 1, 0, 0, 3), 0);
  EXPECT_STREQ(b.c_str(), "from-3");
  // Still unknown: only a wildcard receive takes it, and reports no source.
  ASSERT_EQ(this->tpost(b, ctx(this->ctx_, 3), 1), 0);
  EXPECT_STREQ(b.c_str(), "nobody");
  auto done = this->drain();
  ASSERT_EQ(done.size(), 4u);
  EXPECT_EQ(this->stats().unexpected, 0u);
}

// The insert path costs nothing while no message from an unknown sender is
// queued: the peer is not even asked.
TYPED_TEST(srx_test, relabel_asks_nothing_while_every_sender_is_known) {
  EXPECT_EQ(this->peer_->deliver(4, "known"), 1);
  int asked = 0;
  auto count = [&](fi_peer_rx_entry*) -> fi_addr_t { return ++asked, FI_ADDR_NOTAVAIL; };
  this->engine_->template relabel<TypeParam>(count, false);
  EXPECT_EQ(asked, 0);
  // One unknown: asked once; still unknown, so asked again at the next
  // insert; once it has an address, never again.
  EXPECT_EQ(this->peer_->deliver(FI_ADDR_NOTAVAIL, "anon"), 1);
  this->engine_->template relabel<TypeParam>(count, false);
  this->engine_->template relabel<TypeParam>(count, false);
  EXPECT_EQ(asked, 2);
  this->engine_->template relabel<TypeParam>([](fi_peer_rx_entry*) -> fi_addr_t { return 6; },
                                             false);
  this->engine_->template relabel<TypeParam>(count, false);
  EXPECT_EQ(asked, 2);
  std::string b(8, 0);
  ASSERT_EQ(this->post(b, ctx(this->ctx_, 0)), 0);
  ASSERT_EQ(this->post(b, ctx(this->ctx_, 1)), 0);
  auto done = this->drain();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[1].op_context, ctx(this->ctx_, 1));
}

// After fi_av_remove every queued message is asked about (`all`), so a
// removed sender's messages become unknown; claimed ones too.
TYPED_TEST(srx_test, relabel_of_all_messages_makes_a_removed_sender_unknown) {
  srx_attr a;
  a.directed_recv = true;
  this->make(a);
  EXPECT_EQ(this->peer_->deliver(2, "gone", true, 1), 1);
  EXPECT_EQ(this->peer_->deliver(8, "stays", true, 1), 1);
  EXPECT_EQ(this->peer_->deliver(2, "claimed", true, 2), 1);
  std::string none;
  fi_context claim_ctx{};
  ASSERT_EQ(this->tpost(none, &claim_ctx, 2, 0, FI_PEEK | FI_CLAIM), 0);
  auto peeked = this->drain();
  ASSERT_EQ(peeked.size(), 1u);
  this->engine_->template relabel<TypeParam>(
      [](fi_peer_rx_entry* e) -> fi_addr_t {
        return *static_cast<std::string*>(e->peer_context) == "stays" ? 8 : FI_ADDR_NOTAVAIL;
      },
      true);
  std::string b(8, 0);
  ASSERT_EQ(this->tpost(b, ctx(this->ctx_, 0), 1, 0, 0, 2), 0);  // nothing from 2 now
  ASSERT_EQ(this->tpost(b, ctx(this->ctx_, 1), 1, 0, 0, 8), 0);
  EXPECT_STREQ(b.c_str(), "stays");
  std::string c(8, 0);
  ASSERT_EQ(this->tpost(c, &claim_ctx, 2, 0, FI_CLAIM), 0);
  EXPECT_STREQ(c.c_str(), "claimed");
  auto done = this->drain();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(this->stats().posted, 1u);
  EXPECT_EQ(this->engine_->template cancel<TypeParam>(ctx(this->ctx_, 0)), 0);
  this->error();
  std::string d(8, 0);
  ASSERT_EQ(this->tpost(d, ctx(this->ctx_, 2), 1), 0);
  EXPECT_STREQ(d.c_str(), "gone");
}

TYPED_TEST(srx_test, two_peers_share_one_arrival_order) {
  fake_peer<TypeParam> other;
  other.face = this->engine_->add_peer(nullptr, &other);
  other.face->peer_ops->start_msg = fake_peer<TypeParam>::start_msg;  // peers fill them in
  other.face->peer_ops->discard_msg = fake_peer<TypeParam>::discard_msg;
  other.rx_cq = this->peer_->rx_cq;
  EXPECT_EQ(this->peer_->deliver(1, "shm"), 1);
  EXPECT_EQ(other.deliver(2, "tcp"), 1);
  EXPECT_EQ(this->peer_->deliver(1, "shm2"), 1);
  std::string b[3] = {std::string(8, 0), std::string(8, 0), std::string(8, 0)};
  for (int i = 0; i < 3; ++i) ASSERT_EQ(this->post(b[i], ctx(this->ctx_, i)), 0);
  EXPECT_STREQ(b[0].c_str(), "shm");
  EXPECT_STREQ(b[1].c_str(), "tcp");
  EXPECT_STREQ(b[2].c_str(), "shm2");
  EXPECT_EQ(this->peer_->count('S'), 2u);
  EXPECT_EQ(other.count('S'), 1u);
  EXPECT_EQ(other.deliver(2, "left"), 1);
  this->engine_->template shutdown<TypeParam>();  // discards through its peer
  EXPECT_EQ(other.count('D'), 1u);
}

// fi_peer(3)'s foreach_unspec_addr comes from one peer, whose get_addr
// reads that peer's own record of each message: it is asked only about its
// own messages, never about another peer's (lnx: shm's answer read tcp's
// records when both had messages from unknown senders queued).
TYPED_TEST(srx_test, foreach_unspec_addr_asks_only_about_the_asking_peer_s_messages) {
  srx_attr a;
  a.directed_recv = true;
  this->make(a);
  fake_peer<TypeParam> other;
  other.face = this->engine_->add_peer(nullptr, &other);
  other.face->peer_ops->start_msg = fake_peer<TypeParam>::start_msg;
  other.face->peer_ops->discard_msg = fake_peer<TypeParam>::discard_msg;
  other.rx_cq = this->peer_->rx_cq;
  EXPECT_EQ(this->peer_->deliver(FI_ADDR_NOTAVAIL, "mine"), 1);
  EXPECT_EQ(other.deliver(FI_ADDR_NOTAVAIL, "theirs"), 1);
  static fid_peer_srx* asking;
  asking = this->peer_->face;
  auto answer = [](fi_peer_rx_entry* e) -> fi_addr_t {
    EXPECT_EQ(e->srx, asking) << "asked about another peer's message";
    return 5;
  };
  this->peer_->face->owner_ops->foreach_unspec_addr(this->peer_->face, answer);
  std::string b(8, 0);
  ASSERT_EQ(this->post(b, ctx(this->ctx_, 0), 5), 0);
  EXPECT_STREQ(b.c_str(), "mine");
  // The other peer's message is still from an unknown sender.
  std::string c(8, 0);
  ASSERT_EQ(this->post(c, ctx(this->ctx_, 1), 5), 0);
  EXPECT_STREQ(c.c_str(), "") << "a receive directed at 5 took a message of unknown source";
  ASSERT_EQ(this->post(c, ctx(this->ctx_, 2)), 0);
  EXPECT_STREQ(c.c_str(), "theirs");
  this->engine_->template shutdown<TypeParam>();
}

TYPED_TEST(srx_test, thousands_of_unexpected_messages_reuse_the_pool) {
  constexpr int n = 3000;
  auto payload = [](int i) { return std::string(static_cast<size_t>(i % 997) + 1, 'a' + i % 26); };
  size_t capacity = 0;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < n; ++i) ASSERT_EQ(this->peer_->deliver(i % 7, payload(i), i & 1, i), 1);
    EXPECT_EQ(this->stats().unexpected, size_t{n});
    std::string buf(1024, 0);
    for (int i = 0; i < n; ++i) {
      std::string want = payload(i);
      std::fill(buf.begin(), buf.end(), 0);
      if (i & 1)
        ASSERT_EQ(this->tpost(buf, ctx(this->ctx_, 0), i), 0);
      else
        ASSERT_EQ(this->post(buf, ctx(this->ctx_, 0)), 0);
      ASSERT_EQ(buf.substr(0, want.size()), want) << i;
    }
    EXPECT_EQ(this->drain().size(), size_t{n});
    auto s = this->stats();
    EXPECT_EQ(s.unexpected, 0u);
    EXPECT_EQ(s.pool_available, s.pool_capacity);
    if (round == 0) capacity = s.pool_capacity;
    EXPECT_EQ(s.pool_capacity, capacity);  // later rounds reuse, no growth
  }
}

// Posting threads against delivering threads: every message lands exactly once.
TEST(srx_threads, concurrent_post_and_deliver_under_mutex_policy) {
  using test_t = srx_test<mutex_lock>;
  struct harness : test_t {
    void TestBody() override {}
    void run() {
      SetUp();
      constexpr int per = 1000, producers = 2, consumers = 2;
      std::vector<std::string> bufs(per * consumers, std::string(16, 0));
      std::atomic<int> unexpected{0};
      peer_->yield_before_queue = true;
      std::vector<std::thread> t;
      for (int c = 0; c < consumers; ++c)
        t.emplace_back([&, c] {
          for (int i = 0; i < per; ++i)
            EXPECT_EQ(tpost(bufs[c * per + i], &bufs[c * per + i], 0, ~0ull), 0);
        });
      for (int p = 0; p < producers; ++p)
        t.emplace_back([&, p] {
          for (int i = 0; i < per; ++i) {
            int r = peer_->deliver(p, "m" + std::to_string(p * per + i), true, i);
            EXPECT_GE(r, 0);
            unexpected += r;
          }
        });
      for (auto& th : t) th.join();
      EXPECT_EQ(drain().size(), size_t{per * producers});
      std::vector<int> seen(per * producers, 0);
      for (auto& b : bufs) {
        ASSERT_EQ(b[0], 'm');
        ++seen[std::stoi(b.c_str() + 1)];
      }
      for (int s : seen) EXPECT_EQ(s, 1);
      EXPECT_EQ(stats().unexpected + stats().posted, 0u);
      TearDown();
    }
  } h;
  h.run();
}

}  // namespace
