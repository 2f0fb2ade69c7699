// SPDX-License-Identifier: MIT
// weft — conformance: tagged matching (tags, ignore masks, order), FI_PEEK /
// FI_CLAIM / FI_DISCARD, directed receive, remote CQ data. Written against
// the public API only; a provider without FI_TAGGED, FI_DIRECTED_RECV or
// cq_data_size skips what it lacks.
#include "fixture.hpp"

#include <rdma/fi_tagged.h>

#include <sys/uio.h>

#include <string>
#include <vector>

namespace conformance {
namespace {

// Two (or three) endpoints on one tagged-format CQ, and helpers to wait for
// completions while everything progresses.
class tagged_base : public provider_test {
 protected:
  void open_pair() {
    cq = open_cq(FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 256);
    open_av();
    a = open_ep(cq, &fa);
    b = open_ep(cq, &fb);
    ASSERT_TRUE(a && b);
  }
  // Waits for the receive completion (or error) of `ctx`, remembering any
  // other completion it reads on the way; -FI_EAVAIL leaves the error in err.
  ssize_t wait_for(void* ctx, fi_cq_tagged_entry* out, fi_cq_err_entry* err = nullptr) {
    for (auto it = seen.begin(); it != seen.end(); ++it)
      if (it->op_context == ctx) {
        *out = *it;
        seen.erase(it);
        return 1;
      }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      fi_cq_tagged_entry e;
      ssize_t n = fi_cq_read(cq, &e, 1);
      if (n == 1) {
        if (e.op_context == ctx) return *out = e, 1;
        seen.push_back(e);
      } else if (n == -FI_EAVAIL) {
        fi_cq_err_entry ee{};
        EXPECT_EQ(fi_cq_readerr(cq, &ee, 0), 1);
        if (ee.op_context == ctx) {
          if (err) *err = ee;
          return -FI_EAVAIL;
        }
        ADD_FAILURE() << "unexpected error completion " << ee.err << " for " << ee.op_context;
      } else if (n != -FI_EAGAIN) {
        return n;
      }
    }
    return -FI_ETIMEDOUT;
  }
  // Runs progress for a while: sent messages become unexpected at the receiver.
  void settle() {
    fi_cq_tagged_entry e;
    for (int i = 0; i < 200; ++i)
      if (fi_cq_read(cq, &e, 1) == 1) seen.push_back(e);
  }
  bool nothing_for(void* ctx) {
    settle();
    for (auto& e : seen)
      if (e.op_context == ctx) return false;
    return true;
  }

  fid_cq* cq = nullptr;
  fid_ep *a = nullptr, *b = nullptr;
  fi_addr_t fa = FI_ADDR_UNSPEC, fb = FI_ADDR_UNSPEC;
  std::vector<fi_cq_tagged_entry> seen;
};

class tagged : public tagged_base {
  uint64_t extra_caps() const override { return FI_TAGGED; }
};

class directed : public tagged_base {
  uint64_t extra_caps() const override { return FI_TAGGED | FI_DIRECTED_RECV; }
};

class cq_data : public tagged_base {
  uint64_t extra_caps() const override { return FI_TAGGED; }
  void adjust_hints(fi_info* h) const override { h->domain_attr->cq_data_size = 8; }
};

// fi_endpoint(3): leading 0 bits of mem_tag_format are tag bits the provider
// ignores, and applications size their tags from it (Open MPI's OFI mtl
// refuses a provider that leaves it too few). Every tag bit is matched, so
// the format must say so, and the top and bottom bits really select.
TEST_P(tagged, the_tag_format_reports_all_64_bits) {
  EXPECT_TRUE(info->ep_attr->mem_tag_format >> 63)
      << "mem_tag_format 0x" << std::hex << info->ep_attr->mem_tag_format;
  open_pair();
  for (uint64_t bit : {uint64_t{1}, uint64_t{1} << 63}) {
    uint64_t want = 0, other = bit;
    char got[8] = {};
    fi_context r, s1, s2;
    ASSERT_EQ(fi_trecv(b, got, sizeof got, nullptr, FI_ADDR_UNSPEC, want, 0, &r), 0);
    ASSERT_EQ(fi_tsend(a, "other", 6, nullptr, fb, other, &s1), 0);
    ASSERT_EQ(fi_tsend(a, "mine", 5, nullptr, fb, want, &s2), 0);
    fi_cq_tagged_entry e;
    ASSERT_EQ(wait_for(&r, &e), 1);
    EXPECT_EQ(e.tag, want);
    EXPECT_STREQ(got, "mine");
    // The other message waits for a receive of its own tag.
    fi_context r2;
    ASSERT_EQ(fi_trecv(b, got, sizeof got, nullptr, FI_ADDR_UNSPEC, other, 0, &r2), 0);
    ASSERT_EQ(wait_for(&r2, &e), 1);
    EXPECT_EQ(e.tag, other);
    EXPECT_STREQ(got, "other");
    ASSERT_EQ(wait_for(&s1, &e), 1);
    ASSERT_EQ(wait_for(&s2, &e), 1);
  }
}

TEST_P(tagged, tags_select_the_receive) {
  open_pair();
  char one[16] = {}, two[16] = {};
  fi_context c1, c2, s1, s2;
  ASSERT_EQ(fi_trecv(b, one, sizeof one, nullptr, FI_ADDR_UNSPEC, 1, 0, &c1), 0);
  ASSERT_EQ(fi_trecv(b, two, sizeof two, nullptr, FI_ADDR_UNSPEC, 2, 0, &c2), 0);
  ASSERT_EQ(fi_tsend(a, "two", 4, nullptr, fb, 2, &s2), 0);
  ASSERT_EQ(fi_tsend(a, "one", 4, nullptr, fb, 1, &s1), 0);
  fi_cq_tagged_entry e;
  ASSERT_EQ(wait_for(&c1, &e), 1);
  EXPECT_EQ(e.tag, 1u);
  EXPECT_EQ(e.len, 4u);
  EXPECT_EQ(e.flags & (FI_TAGGED | FI_RECV), uint64_t(FI_TAGGED | FI_RECV));
  EXPECT_STREQ(one, "one");
  ASSERT_EQ(wait_for(&c2, &e), 1);
  EXPECT_EQ(e.tag, 2u);
  EXPECT_STREQ(two, "two");
  ASSERT_EQ(wait_for(&s1, &e), 1);
  EXPECT_EQ(e.flags & (FI_TAGGED | FI_SEND), uint64_t(FI_TAGGED | FI_SEND));
  ASSERT_EQ(wait_for(&s2, &e), 1);
}

TEST_P(tagged, ignore_mask) {
  open_pair();
  char buf[8] = {};
  fi_context ctx;
  ASSERT_EQ(fi_trecv(b, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, 0x1200, 0xff, &ctx), 0);
  ASSERT_EQ(fi_tinject(a, "masked", 7, fb, 0x3300), 0);  // differs above the mask: no match
  ASSERT_EQ(fi_tinject(a, "hit", 4, fb, 0x12ab), 0);
  fi_cq_tagged_entry e;
  ASSERT_EQ(wait_for(&ctx, &e), 1);
  EXPECT_EQ(e.tag, 0x12abu);  // the sender's tag
  EXPECT_STREQ(buf, "hit");
}

TEST_P(tagged, unexpected_messages_keep_their_order) {
  open_pair();
  for (const char* m : {"first", "second", "third"})
    ASSERT_EQ(fi_tinject(a, m, std::strlen(m) + 1, fb, 5), 0);
  settle();  // all three arrive before any receive is posted
  char bufs[3][16] = {};
  fi_context ctx[3];
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(fi_trecv(b, bufs[i], sizeof bufs[i], nullptr, FI_ADDR_UNSPEC, 5, 0, &ctx[i]), 0);
  fi_cq_tagged_entry e;
  for (auto& c : ctx) ASSERT_EQ(wait_for(&c, &e), 1);
  EXPECT_STREQ(bufs[0], "first");
  EXPECT_STREQ(bufs[1], "second");
  EXPECT_STREQ(bufs[2], "third");
}

TEST_P(tagged, messages_and_tagged_messages_do_not_meet) {
  open_pair();
  char m[8] = {}, t[8] = {};
  fi_context cm, ct;
  ASSERT_EQ(fi_recv(b, m, sizeof m, nullptr, FI_ADDR_UNSPEC, &cm), 0);
  ASSERT_EQ(fi_trecv(b, t, sizeof t, nullptr, FI_ADDR_UNSPEC, 9, 0, &ct), 0);
  ASSERT_EQ(fi_tinject(a, "tag", 4, fb, 9), 0);
  ASSERT_EQ(fi_inject(a, "msg", 4, fb), 0);
  fi_cq_tagged_entry e;
  ASSERT_EQ(wait_for(&ct, &e), 1);
  EXPECT_TRUE(e.flags & FI_TAGGED);
  ASSERT_EQ(wait_for(&cm, &e), 1);
  EXPECT_TRUE(e.flags & FI_MSG);
  EXPECT_STREQ(m, "msg");
  EXPECT_STREQ(t, "tag");
}

TEST_P(tagged, truncation_reports_the_overflow) {
  open_pair();
  char small[4];
  fi_context ctx;
  ASSERT_EQ(fi_trecv(b, small, sizeof small, nullptr, FI_ADDR_UNSPEC, 3, 0, &ctx), 0);
  ASSERT_EQ(fi_tinject(a, "0123456789", 10, fb, 3), 0);
  fi_cq_tagged_entry e;
  fi_cq_err_entry err{};
  ASSERT_EQ(wait_for(&ctx, &e, &err), -FI_EAVAIL);
  EXPECT_EQ(err.err, FI_ETRUNC);
  EXPECT_EQ(err.len, 4u);
  EXPECT_EQ(err.olen, 6u);
  EXPECT_EQ(err.tag, 3u);
  EXPECT_EQ(std::memcmp(small, "0123", 4), 0);
}

TEST_P(tagged, cancel_a_tagged_receive) {
  open_pair();
  char buf[8];
  fi_context ctx;
  ASSERT_EQ(fi_trecv(b, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, 77, 0, &ctx), 0);
  ASSERT_EQ(fi_cancel(&b->fid, &ctx), 0);
  fi_cq_tagged_entry e;
  fi_cq_err_entry err{};
  ASSERT_EQ(wait_for(&ctx, &e, &err), -FI_EAVAIL);
  EXPECT_EQ(err.err, FI_ECANCELED);
  EXPECT_TRUE(err.flags & FI_TAGGED);
  EXPECT_EQ(fi_cancel(&b->fid, &ctx), -FI_ENOENT);
}

// A tagged receive of one message with flags, as fi_trecvmsg(3) takes it.
ssize_t trecvmsg(fid_ep* ep, void* buf, size_t len, uint64_t tag, fi_context* ctx,
                 uint64_t flags) {
  iovec iov{buf, len};
  fi_msg_tagged m{};
  m.msg_iov = buf ? &iov : nullptr;
  m.iov_count = buf ? 1 : 0;
  m.addr = FI_ADDR_UNSPEC;
  m.tag = tag;
  m.context = ctx;
  return fi_trecvmsg(ep, &m, flags);
}

TEST_P(tagged, peek_claim_discard) {
  open_pair();
  fi_context ctx;
  fi_cq_tagged_entry e;
  fi_cq_err_entry err{};
  // Nothing there yet: FI_ENOMSG.
  ASSERT_EQ(trecvmsg(b, nullptr, 0, 7, &ctx, FI_PEEK), 0);
  ASSERT_EQ(wait_for(&ctx, &e, &err), -FI_EAVAIL);
  EXPECT_EQ(err.err, FI_ENOMSG);

  ASSERT_EQ(fi_tinject(a, "peeked", 7, fb, 7), 0);
  settle();
  ASSERT_EQ(trecvmsg(b, nullptr, 0, 7, &ctx, FI_PEEK), 0);
  ASSERT_EQ(wait_for(&ctx, &e), 1);
  EXPECT_EQ(e.len, 7u);
  EXPECT_EQ(e.tag, 7u);
  EXPECT_EQ(e.flags & (FI_TAGGED | FI_RECV), uint64_t(FI_TAGGED | FI_RECV));

  // Claim it, then take it with FI_CLAIM and the same context.
  fi_context claim;
  ASSERT_EQ(trecvmsg(b, nullptr, 0, 7, &claim, FI_PEEK | FI_CLAIM), 0);
  ASSERT_EQ(wait_for(&claim, &e), 1);
  char buf[16] = {};
  ASSERT_EQ(trecvmsg(b, buf, sizeof buf, 7, &claim, FI_CLAIM), 0);
  ASSERT_EQ(wait_for(&claim, &e), 1);
  EXPECT_EQ(e.len, 7u);
  EXPECT_STREQ(buf, "peeked");

  // FI_PEEK | FI_DISCARD drops the message it finds.
  ASSERT_EQ(fi_tinject(a, "dropped", 8, fb, 8), 0);
  settle();
  ASSERT_EQ(trecvmsg(b, nullptr, 0, 8, &ctx, FI_PEEK | FI_DISCARD), 0);
  ASSERT_EQ(wait_for(&ctx, &e), 1);
  EXPECT_EQ(e.tag, 8u);
  // Claimed, then discarded with FI_CLAIM | FI_DISCARD.
  ASSERT_EQ(fi_tinject(a, "claimed", 8, fb, 8), 0);
  settle();
  ASSERT_EQ(trecvmsg(b, nullptr, 0, 8, &claim, FI_PEEK | FI_CLAIM), 0);
  ASSERT_EQ(wait_for(&claim, &e), 1);
  ASSERT_EQ(trecvmsg(b, nullptr, 0, 8, &claim, FI_CLAIM | FI_DISCARD), 0);
  ASSERT_EQ(wait_for(&claim, &e), 1);
  // Both are gone: the next receive of tag 8 gets the next message.
  char next[16] = {};
  fi_context rctx;
  ASSERT_EQ(fi_trecv(b, next, sizeof next, nullptr, FI_ADDR_UNSPEC, 8, 0, &rctx), 0);
  ASSERT_EQ(fi_tinject(a, "after", 6, fb, 8), 0);
  ASSERT_EQ(wait_for(&rctx, &e), 1);
  EXPECT_STREQ(next, "after");
}

TEST_P(directed, a_receive_takes_only_its_source) {
  open_pair();
  fi_addr_t fc;
  fid_ep* c = open_ep(cq, &fc);
  ASSERT_NE(c, nullptr);
  char from_a[16] = {}, any[16] = {}, msg_a[16] = {}, msg_any[16] = {};
  fi_context ca, cany, cma, cmany;
  ASSERT_EQ(fi_trecv(c, from_a, sizeof from_a, nullptr, fa, 3, 0, &ca), 0);
  ASSERT_EQ(fi_recv(c, msg_a, sizeof msg_a, nullptr, fa, &cma), 0);
  ASSERT_EQ(fi_tinject(b, "from b", 7, fc, 3), 0);
  ASSERT_EQ(fi_inject(b, "m from b", 9, fc), 0);
  EXPECT_TRUE(nothing_for(&ca));
  EXPECT_TRUE(nothing_for(&cma));
  ASSERT_EQ(fi_tinject(a, "from a", 7, fc, 3), 0);
  ASSERT_EQ(fi_inject(a, "m from a", 9, fc), 0);
  fi_cq_tagged_entry e;
  ASSERT_EQ(wait_for(&ca, &e), 1);
  EXPECT_STREQ(from_a, "from a");
  ASSERT_EQ(wait_for(&cma, &e), 1);
  EXPECT_STREQ(msg_a, "m from a");
  // b's messages waited for receives that take any source.
  ASSERT_EQ(fi_trecv(c, any, sizeof any, nullptr, FI_ADDR_UNSPEC, 3, 0, &cany), 0);
  ASSERT_EQ(fi_recv(c, msg_any, sizeof msg_any, nullptr, FI_ADDR_UNSPEC, &cmany), 0);
  ASSERT_EQ(wait_for(&cany, &e), 1);
  EXPECT_STREQ(any, "from b");
  ASSERT_EQ(wait_for(&cmany, &e), 1);
  EXPECT_STREQ(msg_any, "m from b");
}

TEST_P(cq_data, remote_data_reaches_the_receiver) {
  open_pair();
  ASSERT_GE(info->domain_attr->cq_data_size, 8u);
  char buf[8][16];
  fi_context r[8], s[8];
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(fi_recv(b, buf[i], sizeof buf[i], nullptr, FI_ADDR_UNSPEC, &r[i]), 0);
  for (int i = 4; i < 8; ++i)
    ASSERT_EQ(fi_trecv(b, buf[i], sizeof buf[i], nullptr, FI_ADDR_UNSPEC, 11, 0, &r[i]), 0);
  const uint64_t d = 0xfeedface12345678ull;
  ASSERT_EQ(fi_senddata(a, "sd", 3, nullptr, d + 0, fb, &s[0]), 0);
  ASSERT_EQ(fi_injectdata(a, "id", 3, d + 1, fb), 0);
  iovec iov{const_cast<char*>("sm"), 3};
  fi_msg m{};
  m.msg_iov = &iov;
  m.iov_count = 1;
  m.addr = fb;
  m.context = &s[2];
  m.data = d + 2;
  ASSERT_EQ(fi_sendmsg(a, &m, FI_REMOTE_CQ_DATA | FI_COMPLETION), 0);
  ASSERT_EQ(fi_send(a, "no", 3, nullptr, fb, &s[3]), 0);  // no data: no flag
  ASSERT_EQ(fi_tsenddata(a, "tsd", 4, nullptr, d + 4, fb, 11, &s[4]), 0);
  ASSERT_EQ(fi_tinjectdata(a, "tid", 4, d + 5, fb, 11), 0);
  fi_msg_tagged tm{};
  tm.msg_iov = &iov;
  tm.iov_count = 1;
  tm.addr = fb;
  tm.tag = 11;
  tm.context = &s[6];
  tm.data = d + 6;
  ASSERT_EQ(fi_tsendmsg(a, &tm, FI_REMOTE_CQ_DATA | FI_COMPLETION), 0);
  ASSERT_EQ(fi_tsend(a, "tno", 4, nullptr, fb, 11, &s[7]), 0);
  for (int i = 0; i < 8; ++i) {
    fi_cq_tagged_entry e;
    ASSERT_EQ(wait_for(&r[i], &e), 1) << i;
    if (i == 3 || i == 7) {
      EXPECT_FALSE(e.flags & FI_REMOTE_CQ_DATA) << i;
    } else {
      EXPECT_TRUE(e.flags & FI_REMOTE_CQ_DATA) << i;
      EXPECT_EQ(e.data, d + i) << i;
    }
  }
}

TEST_P(cq_data, unexpected_messages_keep_their_data) {
  open_pair();
  const uint64_t d = 0x0123456789abcdefull;
  ASSERT_EQ(fi_tinjectdata(a, "late", 5, d, fb, 12), 0);
  settle();
  char buf[8] = {};
  fi_context ctx;
  ASSERT_EQ(fi_trecv(b, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, 12, 0, &ctx), 0);
  fi_cq_tagged_entry e;
  ASSERT_EQ(wait_for(&ctx, &e), 1);
  EXPECT_TRUE(e.flags & FI_REMOTE_CQ_DATA);
  EXPECT_EQ(e.data, d);
  EXPECT_STREQ(buf, "late");
}

INSTANTIATE_TEST_SUITE_P(all, tagged, testing::ValuesIn(all_configs), config_name);
INSTANTIATE_TEST_SUITE_P(all, directed, testing::ValuesIn(all_configs), config_name);
INSTANTIATE_TEST_SUITE_P(all, cq_data, testing::ValuesIn(all_configs), config_name);

}  // namespace
}  // namespace conformance
