// SPDX-License-Identifier: MIT
// weft — unit tests of tcp batching, both ways. Out: sends posted one after
// another without a progress call in between are gathered (the first leaves
// at once, the rest with the next progress call, or at once when a large
// send or the caps take them out; FI_MORE holds even the first, until a
// send without it), each keeps its bytes (fi_inject), and
// fi_close, fi_cancel and fi_shutdown see them as written. In: many small
// frames and a large one arriving in one segment are each placed where they
// belong, in a posted buffer or an unexpected one.
#include "tcp_fixture.hpp"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include <string>
#include <thread>

namespace tcp_test {
namespace {

// What the raw peer read: each frame with its payload.
struct seen_frame {
  frame f;
  std::string payload;
};

class batch : public rdm_fixture {
 protected:
  void SetUp() override {
    extra_caps = FI_RMA | FI_ATOMIC;
    rdm_fixture::SetUp();
    ep = open_ep(&self, &name);
    ASSERT_NE(ep, nullptr);
    peer = std::make_unique<raw_peer>(name);
    peer->hello(9);  // listening at 127.0.0.1:9, as far as the endpoint knows
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(9);
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(fi_av_insert(av, &at, 1, &to, 0, nullptr), 1);
    // The endpoint's hello back: the connection is established.
    std::vector<seen_frame> got = read(1, true, 5000);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].f.op, proto::op::hello);
  }
  void progress() {
    fi_cq_tagged_entry e;
    fi_cq_read(cq, &e, 0);
  }
  // Reads frames from the raw socket until `want` arrived whole or `ms`
  // passed, running the endpoint's progress in between only if `drive`.
  std::vector<seen_frame> read(size_t want, bool drive, int ms) {
    std::vector<seen_frame> out;
    char buf[1500];  // less than a batch: frames cross reads
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while ((out.size() < want || !reader.at_boundary()) &&
           std::chrono::steady_clock::now() < deadline) {
      if (drive) progress();
      ssize_t n = ::recv(peer->fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0) break;
      for (size_t off = 0; n > 0 && off < static_cast<size_t>(n);) {
        auto r = reader.feed(buf + off, n - off);
        off += r.used;
        if (r.st == frame_reader::status::header) {
          out.push_back({reader.current(), std::string(reader.current().payload_len, '\0')});
          if (reader.payload_left())
            reader.set_target(out.back().payload.data(), out.back().payload.size());
        }
        EXPECT_NE(r.st, frame_reader::status::error) << to_string(reader.error());
        if (r.st == frame_reader::status::error) return out;
      }
    }
    return out;
  }
  // Completions of the transmit side until `n` arrived (5 s at most).
  std::vector<void*> send_completions(size_t n) {
    std::vector<void*> ctx;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (ctx.size() < n && std::chrono::steady_clock::now() < deadline) {
      fi_cq_tagged_entry e[16];
      ssize_t got = fi_cq_read(cq, e, 16);
      for (ssize_t i = 0; i < got; ++i) ctx.push_back(e[i].op_context);
      EXPECT_NE(got, -FI_EAVAIL);
      if (got == -FI_EAVAIL) break;
    }
    return ctx;
  }

  fid_ep* ep = nullptr;
  fi_addr_t self = FI_ADDR_UNSPEC, to = FI_ADDR_UNSPEC;
  sockaddr_in name{};
  std::unique_ptr<raw_peer> peer;
  frame_reader reader;
};

std::string text(int i) {
  return "message " + std::to_string(i);
}

TEST_F(batch, a_burst_of_small_sends_leaves_together_on_the_next_progress_call) {
  constexpr int n = 21;
  std::vector<std::string> msgs;
  for (int i = 0; i < n; ++i) msgs.push_back(text(i));
  std::vector<fi_context> ctx(n);
  // The first send after a progress call leaves at once.
  ASSERT_EQ(fi_tsend(ep, msgs[0].data(), msgs[0].size(), nullptr, to, 0, &ctx[0]), 0);
  std::vector<seen_frame> got = read(1, false, 2000);
  ASSERT_EQ(got.size(), 1u);
  // The ones after it wait for the next progress call...
  for (int i = 1; i < n; ++i)
    ASSERT_EQ(fi_tsend(ep, msgs[i].data(), msgs[i].size(), nullptr, to, i, &ctx[i]), 0);
  std::vector<seen_frame> early = read(n, false, 100);
  EXPECT_EQ(early.size(), 0u) << "written before any progress call";
  // ...and all leave with it, whole and in order.
  progress();
  std::vector<seen_frame> rest = read(n - 1 - early.size(), false, 2000);
  got.insert(got.end(), early.begin(), early.end());
  got.insert(got.end(), rest.begin(), rest.end());
  ASSERT_EQ(got.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(got[i].f.op, proto::op::tagged);
    EXPECT_EQ(got[i].f.tag, static_cast<uint64_t>(i));
    EXPECT_EQ(got[i].payload, msgs[i]);
  }
  std::vector<void*> done = send_completions(n);
  ASSERT_EQ(done.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) EXPECT_EQ(done[i], &ctx[i]) << "in order";
}

TEST_F(batch, fi_more_holds_sends_until_one_without_it) {
  // fi_msg(3)'s FI_MORE: more sends follow. Even the first send after a
  // progress call (which would leave at once) waits, and the first send
  // without the flag takes the batch out: no progress call needed.
  std::vector<std::string> msgs;
  for (int i = 0; i < 4; ++i) msgs.push_back(text(i));
  std::vector<fi_context> ctx(msgs.size());
  for (size_t i = 0; i < msgs.size(); ++i) {
    iovec iov{msgs[i].data(), msgs[i].size()};
    fi_msg_tagged m{&iov, nullptr, 1, to, i, 0, &ctx[i], 0};
    uint64_t flags = i + 1 < msgs.size() ? FI_MORE : 0;
    ASSERT_EQ(fi_tsendmsg(ep, &m, flags | FI_COMPLETION), 0);
    if (i + 1 < msgs.size()) {
      EXPECT_EQ(read(1, false, 50).size(), 0u) << "send " << i << " with FI_MORE was written";
    }
  }
  std::vector<seen_frame> got = read(msgs.size(), false, 2000);
  ASSERT_EQ(got.size(), msgs.size());
  for (size_t i = 0; i < msgs.size(); ++i) {
    EXPECT_EQ(got[i].f.tag, i);
    EXPECT_EQ(got[i].payload, msgs[i]);
  }
  EXPECT_EQ(send_completions(msgs.size()).size(), msgs.size());
}

TEST_F(batch, fi_more_holds_rma_and_atomic_requests_until_one_without_it) {
  // fi_rma(3) and fi_atomic(3) give FI_MORE the same meaning: writes with
  // it wait, and the first request without it (an atomic here) takes them
  // all out, in order, with no progress call.
  uint64_t src[3] = {11, 22, 33};
  fi_context ctx[4];
  for (int i = 0; i < 3; ++i) {
    iovec iov{&src[i], sizeof src[i]};
    fi_rma_iov rma{0x1000u + 8u * i, sizeof src[i], 77};
    fi_msg_rma m{&iov, nullptr, 1, to, &rma, 1, &ctx[i], 0};
    ASSERT_EQ(fi_writemsg(ep, &m, FI_MORE | FI_COMPLETION), 0) << i;
    EXPECT_EQ(read(1, false, 50).size(), 0u) << "write " << i << " with FI_MORE was written";
  }
  uint64_t operand = 5;
  fi_ioc ioc{&operand, 1};
  fi_rma_ioc rioc{0x2000, 1, 77};
  fi_msg_atomic am{&ioc, nullptr, 1, to, &rioc, 1, FI_UINT64, FI_SUM, &ctx[3], 0};
  ASSERT_EQ(fi_atomicmsg(ep, &am, FI_COMPLETION), 0);
  std::vector<seen_frame> got = read(4, false, 2000);
  ASSERT_EQ(got.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].f.op, proto::op::rma_write) << i;
    EXPECT_EQ(got[i].f.iov[0].addr, 0x1000u + 8u * i);
    EXPECT_EQ(got[i].payload, std::string(reinterpret_cast<const char*>(&src[i]), 8));
  }
  EXPECT_EQ(got[3].f.op, proto::op::atomic_write);
}

TEST_F(batch, an_rma_request_without_fi_more_is_written_at_once) {
  // Without FI_MORE a request is not held, even right after another one:
  // a read waits for its answer, and guessing would only add latency.
  uint64_t dst[2] = {};
  fi_context ctx[2];
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(fi_read(ep, &dst[i], sizeof dst[i], nullptr, to, 0x3000, 77, &ctx[i]), 0);
    std::vector<seen_frame> got = read(1, false, 2000);
    ASSERT_EQ(got.size(), 1u) << "read " << i << " was held";
    EXPECT_EQ(got[0].f.op, proto::op::rma_read_req);
  }
}

TEST_F(batch, a_large_send_takes_the_gathered_ones_out_at_once) {
  std::vector<std::string> msgs;
  for (int i = 0; i < 6; ++i) msgs.push_back(text(i));
  msgs.push_back(std::string(5000, 'L'));  // above the batching size (4 KiB)
  std::vector<fi_context> ctx(msgs.size());
  for (size_t i = 0; i < msgs.size(); ++i)
    ASSERT_EQ(fi_tsend(ep, msgs[i].data(), msgs[i].size(), nullptr, to, i, &ctx[i]), 0);
  // No progress call: the large send wrote everything gathered before it.
  std::vector<seen_frame> got = read(msgs.size(), false, 2000);
  ASSERT_EQ(got.size(), msgs.size());
  for (size_t i = 0; i < msgs.size(); ++i) {
    EXPECT_EQ(got[i].f.tag, i);
    EXPECT_TRUE(got[i].payload == msgs[i]) << "message " << i;
  }
  EXPECT_EQ(send_completions(msgs.size()).size(), msgs.size());
}

TEST_F(batch, gathered_injects_keep_their_own_bytes) {
  constexpr int n = 40;
  char buf[64];
  for (int i = 0; i < n; ++i) {
    std::string m = text(i);
    std::memcpy(buf, m.c_str(), m.size() + 1);
    ASSERT_EQ(fi_tinject(ep, buf, m.size(), to, i), 0);
    std::memset(buf, '#', sizeof buf);  // fi_inject: the buffer is ours again
  }
  std::vector<seen_frame> got = read(n, true, 5000);
  ASSERT_EQ(got.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) EXPECT_EQ(got[i].payload, text(i));
}

TEST_F(batch, more_sends_than_one_batch_arrive_whole_and_in_order) {
  // Well past the batch caps (frames and iovecs): the gathered queue is
  // written in several system calls, some of them partial while the peer
  // reads slowly; sizes vary so frame boundaries fall anywhere.
  constexpr int n = 600;
  std::vector<std::string> msgs;
  for (int i = 0; i < n; ++i) msgs.push_back(std::string(1 + (i * 37) % 300, char('a' + i % 26)));
  std::vector<fi_context> ctx(n);
  std::vector<seen_frame> got;
  for (int i = 0; i < n; ++i) {
    iovec iov[2] = {{msgs[i].data(), msgs[i].size() / 2},
                    {msgs[i].data() + msgs[i].size() / 2, msgs[i].size() - msgs[i].size() / 2}};
    // (The transmit queue and the CQ hold all of them: no -FI_EAGAIN.)
    ASSERT_EQ(fi_tsendv(ep, iov, nullptr, 2, to, i, &ctx[i]), 0);
  }
  std::vector<seen_frame> more = read(n - got.size(), true, 5000);
  got.insert(got.end(), more.begin(), more.end());
  ASSERT_EQ(got.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(got[i].f.tag, static_cast<uint64_t>(i));
    EXPECT_EQ(got[i].payload, msgs[i]) << "message " << i;
  }
  std::vector<void*> done = send_completions(n);
  ASSERT_EQ(done.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) EXPECT_EQ(done[i], &ctx[i]) << "in order";
}

TEST_F(batch, gathered_sends_are_written_when_the_endpoint_closes) {
  constexpr int n = 12;
  ASSERT_EQ(fi_tinject(ep, "first", 5, to, 0), 0);
  for (int i = 1; i < n; ++i) {
    std::string m = text(i);
    ASSERT_EQ(fi_tinject(ep, m.data(), m.size(), to, i), 0);
  }
  ASSERT_EQ(fi_close(&ep->fid), 0);
  eps.clear();
  std::vector<seen_frame> got = read(n, false, 2000);
  ASSERT_EQ(got.size(), static_cast<size_t>(n));
  for (int i = 1; i < n; ++i) EXPECT_EQ(got[i].payload, text(i));
}

TEST_F(batch, a_gathered_send_is_not_cancelled) {
  // Without batching it would have been written at once: fi_cancel cannot
  // take it back.
  fi_context a, b;
  ASSERT_EQ(fi_tsend(ep, "one", 3, nullptr, to, 1, &a), 0);
  ASSERT_EQ(fi_tsend(ep, "two", 3, nullptr, to, 2, &b), 0);
  EXPECT_EQ(fi_cancel(&ep->fid, &b), -FI_ENOENT);
  std::vector<seen_frame> got = read(2, false, 2000);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].payload, "two");
}

// An FI_EP_MSG endpoint connected to a raw listening socket that plays the
// passive side by hand.
class batch_msg : public testing::Test {
 protected:
  void SetUp() override {
    info = loopback_info(FI_EP_MSG);
    ASSERT_NE(info, nullptr);
    ASSERT_EQ(weft_tcp_provider()->fabric(info->fabric_attr, &fabric, nullptr), 0);
    ASSERT_EQ(fi_domain(fabric, info, &domain, nullptr), 0);
    fi_eq_attr eattr{};
    eattr.wait_obj = FI_WAIT_UNSPEC;
    ASSERT_EQ(fi_eq_open(fabric, &eattr, &eq, nullptr), 0);
    fi_cq_attr cattr{};
    cattr.format = FI_CQ_FORMAT_CONTEXT;
    ASSERT_EQ(fi_cq_open(domain, &cattr, &cq, nullptr), 0);
    ASSERT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
    ASSERT_EQ(fi_ep_bind(ep, &eq->fid, 0), 0);
    ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_enable(ep), 0);
    sockaddr_in at;
    listener = loopback_listener(at, 1);
    ASSERT_GE(listener, 0);
    ASSERT_EQ(fi_connect(ep, &at, nullptr, 0), 0);
    peer = ::accept(listener, nullptr, nullptr);
    ASSERT_GE(peer, 0);
    // cm_req in, cm_resp (accepted) out, FI_CONNECTED at the endpoint.
    std::vector<frame> got = read(1);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].op, proto::op::cm_req);
    frame yes{};
    yes.op = proto::op::cm_resp;
    std::byte hdr[proto::max_hdr_len];
    size_t n = build_header(yes, hdr);
    ASSERT_EQ(::send(peer, hdr, n, MSG_NOSIGNAL), static_cast<ssize_t>(n));
    uint32_t ev = 0;
    fi_eq_cm_entry e{};
    ASSERT_EQ(fi_eq_sread(eq, &ev, &e, sizeof e, 5000, 0), static_cast<ssize_t>(sizeof e));
    ASSERT_EQ(ev, static_cast<uint32_t>(FI_CONNECTED));
  }
  void TearDown() override {
    if (peer >= 0) ::close(peer);
    if (listener >= 0) ::close(listener);
    for (fid* f : {&ep->fid, &cq->fid, &eq->fid, &domain->fid, &fabric->fid})
      if (f) { EXPECT_EQ(fi_close(f), 0); }
    fi_freeinfo(info);
  }
  // Frames from the raw socket until `want` arrived, the stream ended or
  // 5 s passed, driving the endpoint's progress in between (the connection
  // request leaves once the TCP connection is up); payloads are skipped.
  std::vector<frame> read(size_t want) {
    return read_frames(peer, reader, want, [this] {
      fi_cq_entry none;
      fi_cq_read(cq, &none, 0);
    });
  }

  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_eq* eq = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  int listener = -1, peer = -1;
  frame_reader reader;
};

TEST_F(batch_msg, sends_gathered_before_a_shutdown_leave_before_it) {
  // The second send waits for a progress call that never comes before
  // fi_shutdown: it must still go out, ahead of the shutdown frame, and
  // complete (without batching it would have been written at once).
  fi_context a, b;
  ASSERT_EQ(fi_send(ep, "first", 5, nullptr, 0, &a), 0);
  ASSERT_EQ(fi_send(ep, "second", 6, nullptr, 0, &b), 0);
  ASSERT_EQ(fi_shutdown(ep, 0), 0);
  std::vector<frame> got = read(3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].op, proto::op::msg);
  EXPECT_EQ(got[0].payload_len, 5u);
  EXPECT_EQ(got[1].op, proto::op::msg);
  EXPECT_EQ(got[1].payload_len, 6u);
  EXPECT_EQ(got[2].op, proto::op::shutdown);
  fi_cq_entry e[2];
  EXPECT_EQ(fi_cq_read(cq, e, 2), 2);
}

// ---- receiving ----

// One buffer holding many small frames, a large one, and small ones again,
// written by the raw peer in as few segments as the kernel makes of it.
struct stream {
  std::vector<char> bytes;
  std::vector<std::string> payloads;
  void add(uint64_t tag, std::string payload) {
    frame f{};
    f.op = proto::op::tagged;
    f.tag = tag;
    f.payload_len = static_cast<uint32_t>(payload.size());
    std::byte hdr[proto::max_hdr_len];
    size_t n = build_header(f, hdr);
    ASSERT_GT(n, 0u);
    auto* h = reinterpret_cast<const char*>(hdr);
    bytes.insert(bytes.end(), h, h + n);
    bytes.insert(bytes.end(), payload.begin(), payload.end());
    payloads.push_back(std::move(payload));
  }
};

class batch_rx : public batch, public testing::WithParamInterface<bool> {};

TEST_P(batch_rx, small_frames_and_a_large_one_in_one_segment_are_each_placed) {
  const bool posted_first = GetParam();  // else: all unexpected, claimed afterwards
  stream s;
  for (int i = 0; i < 40; ++i) s.add(100 + i, text(i));
  std::string large(300000, '\0');
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i * 131 + 7);
  s.add(140, large);
  for (int i = 41; i < 46; ++i) s.add(100 + i, text(i));
  const size_t n = s.payloads.size();
  std::vector<std::string> in(n);
  std::vector<fi_context> ctx(n);
  auto post = [&](size_t i) {
    in[i].assign(s.payloads[i].size(), '\0');
    ASSERT_EQ(
        fi_trecv(ep, in[i].data(), in[i].size(), nullptr, FI_ADDR_UNSPEC, 100 + i, 0, &ctx[i]), 0);
  };
  if (posted_first)
    for (size_t i = 0; i < n; ++i) post(i);
  // The peer writes the stream in one call (from a thread: it blocks until
  // the endpoint has read enough of it).
  std::thread writer([&] { peer->write(s.bytes.data(), s.bytes.size()); });
  if (!posted_first) {
    // Every message arrives unexpected before a receive is posted.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    fi_cq_tagged_entry e;
    fi_addr_t src;
    while (std::chrono::steady_clock::now() < deadline) {
      progress();
      fi_msg_tagged peek{nullptr, nullptr, 0, FI_ADDR_UNSPEC, 100 + n - 1, 0, &ctx[0], 0};
      if (fi_trecvmsg(ep, &peek, FI_PEEK) == 0) {
        ssize_t r;
        while ((r = fi_cq_readfrom(cq, &e, 1, &src)) == -FI_EAGAIN) progress();
        if (r == 1) break;
        fi_cq_err_entry err{};
        fi_cq_readerr(cq, &err, 0);  // FI_ENOMSG: not there yet
      }
    }
    for (size_t i = 0; i < n; ++i) post(i);
  }
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(wait_for(&ctx[i]), 1) << "message " << i;
  writer.join();
  for (size_t i = 0; i < n; ++i) EXPECT_TRUE(in[i] == s.payloads[i]) << "message " << i;
}

INSTANTIATE_TEST_SUITE_P(tcp, batch_rx, testing::Bool(), [](const testing::TestParamInfo<bool>& p) {
  return p.param ? "posted" : "unexpected";
});

}  // namespace
}  // namespace tcp_test
