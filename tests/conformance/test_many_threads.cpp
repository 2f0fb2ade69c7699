// SPDX-License-Identifier: MIT
// weft — conformance: many endpoints, one thread each, on a machine with
// fewer cores. N endpoint pairs (each endpoint in a domain of its own) stream
// windows of messages one way, then both ways at once, from 64 B to 1 MiB.
// Every thread waits by polling its CQ, and a sender whose window is full
// spins on fi_send until the provider takes the message, as simple programs
// do: the provider must make the progress that lets the other side's sends
// complete, and a waiting thread must not keep the core from the one it
// waits for. Every message must arrive whole and once; nothing may stall.
#include "fixture.hpp"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace conformance {
namespace {

struct stream_ep {
  fid_domain* dom = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_ep* ep = nullptr;
  fi_addr_t peer = FI_ADDR_UNSPEC;
  char name[128] = {};
  ~stream_ep() {
    for (fid* f : {ep ? &ep->fid : nullptr, av ? &av->fid : nullptr, cq ? &cq->fid : nullptr,
                   dom ? &dom->fid : nullptr})
      if (f) fi_close(f);
  }
};

class many_threads : public provider_test {
 protected:
  void SetUp() override {
    provider_test::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (info->ep_attr->type != FI_EP_RDM) GTEST_SKIP() << "reliable endpoints only";
  }

  void open(stream_ep& s) {
    ASSERT_EQ(fi_domain(fabric, info, &s.dom, nullptr), 0);
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_MSG;
    ca.size = 256;
    ASSERT_EQ(fi_cq_open(s.dom, &ca, &s.cq, nullptr), 0);
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    ASSERT_EQ(fi_av_open(s.dom, &aa, &s.av, nullptr), 0);
    ASSERT_EQ(fi_endpoint(s.dom, info, &s.ep, nullptr), 0);
    ASSERT_EQ(fi_ep_bind(s.ep, &s.cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_ep_bind(s.ep, &s.av->fid, 0), 0);
    ASSERT_EQ(fi_enable(s.ep), 0);
    size_t len = sizeof s.name;
    ASSERT_EQ(fi_getname(&s.ep->fid, s.name, &len), 0);
  }

  // One thread's work: send `sends` messages to its peer and take `recvs`.
  // Returns an empty string, or what went wrong.
  static std::string stream(stream_ep& s, size_t size, int sends, int recvs,
                            std::chrono::steady_clock::time_point deadline) {
    constexpr int window = 8;
    std::vector<char> sb(size * window), rb(size * window);
    fi_context sc[window], rc[window];
    std::vector<bool> seen(recvs);
    int posted = 0, got = 0, sent = 0, done = 0;
    auto fill = [&](char* b, int seq) {
      std::memcpy(b, &seq, std::min(size, sizeof seq));
      for (size_t i = sizeof seq; i < size; ++i) b[i] = static_cast<char>(seq * 13 + i);
    };
    for (; posted < recvs && posted < window; ++posted)
      if (fi_recv(s.ep, &rb[posted * size], size, nullptr, FI_ADDR_UNSPEC, &rc[posted]))
        return "fi_recv failed";
    while (got < recvs || done < sends) {
      if (std::chrono::steady_clock::now() > deadline)
        return "stalled: " + std::to_string(got) + "/" + std::to_string(recvs) + " received, " +
               std::to_string(done) + "/" + std::to_string(sends) + " sent";
      if (sent < sends && sent - done < window) {
        char* b = &sb[(sent % window) * size];
        fill(b, sent);
        ssize_t r;
        // Spins until the provider takes it, reading nothing meanwhile.
        while ((r = fi_send(s.ep, b, size, nullptr, s.peer, &sc[sent % window])) == -FI_EAGAIN) {
          if (std::chrono::steady_clock::now() > deadline) return "fi_send never took a message";
        }
        if (r) return std::string("fi_send: ") + fi_strerror(static_cast<int>(-r));
        ++sent;
      }
      fi_cq_msg_entry e[8];
      ssize_t n = fi_cq_read(s.cq, e, 8);
      if (n == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        fi_cq_readerr(s.cq, &err, 0);
        return std::string("a completion error: ") + fi_strerror(err.err) + " (" +
               (err.op_context && (static_cast<fi_context*>(err.op_context) < rc ||
                                   static_cast<fi_context*>(err.op_context) >= rc + window)
                    ? "send"
                    : "receive") +
               ", " + std::to_string(got) + "/" + std::to_string(recvs) + " received, " +
               std::to_string(done) + "/" + std::to_string(sends) + " sent)";
      }
      if (n < 0 && n != -FI_EAGAIN) return std::string("fi_cq_read: ") + fi_strerror(int(-n));
      for (ssize_t k = 0; k < n; ++k) {
        auto* c = static_cast<fi_context*>(e[k].op_context);
        if (c < rc || c >= rc + window) {
          ++done;
          continue;
        }
        const size_t slot = static_cast<size_t>(c - rc);
        const char* b = &rb[slot * size];
        int seq = 0;
        std::memcpy(&seq, b, std::min(size, sizeof seq));
        bool whole = e[k].len == size && seq >= 0 && seq < recvs && !seen[seq];
        for (size_t i = sizeof seq; whole && i < size; ++i)
          whole = b[i] == static_cast<char>(seq * 13 + i);
        if (!whole) return "message " + std::to_string(seq) + " wrong or repeated";
        seen[seq] = true;
        ++got;
        if (posted < recvs) {
          if (fi_recv(s.ep, &rb[slot * size], size, nullptr, FI_ADDR_UNSPEC, c))
            return "fi_recv failed";
          ++posted;
        }
      }
    }
    return "";
  }

  void run(int pairs, size_t size, int messages, bool both) {
    SCOPED_TRACE(testing::Message() << pairs << " pairs, " << size << " B, "
                                    << (both ? "both ways" : "one way"));
    std::vector<stream_ep> a(pairs), b(pairs);
    for (int i = 0; i < pairs; ++i) {
      open(a[i]);
      open(b[i]);
      ASSERT_FALSE(HasFatalFailure());
      ASSERT_EQ(fi_av_insert(a[i].av, b[i].name, 1, &a[i].peer, 0, nullptr), 1);
      ASSERT_EQ(fi_av_insert(b[i].av, a[i].name, 1, &b[i].peer, 0, nullptr), 1);
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    std::vector<std::string> errors(2 * pairs);
    std::vector<std::thread> threads;
    for (int i = 0; i < pairs; ++i) {
      threads.emplace_back([&, i] {
        errors[2 * i] = stream(a[i], size, messages, both ? messages : 0, deadline);
      });
      threads.emplace_back([&, i] {
        errors[2 * i + 1] = stream(b[i], size, both ? messages : 0, messages, deadline);
      });
    }
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < errors.size(); ++i)
      EXPECT_EQ(errors[i], "") << "endpoint " << i / 2 << (i % 2 ? "b" : "a");
  }
};

// Sanitizer builds run every thread several times slower: the smaller half.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr bool sanitized = true;
#else
constexpr bool sanitized = false;
#endif

TEST_P(many_threads, eight_and_thirty_two_pairs_stream_without_stalling) {
  for (int pairs : {8, 32})
    for (size_t size : {size_t{64}, size_t{65536}, size_t{1} << 20})
      for (bool both : {false, true}) {
        if (size > info->ep_attr->max_msg_size) continue;
        if (sanitized && (pairs > 8 || size > 65536)) continue;
        int messages = size <= 64 ? 200 : size <= 65536 ? 20 : 4;
        run(pairs, size, messages, both);
        if (HasFatalFailure()) return;
      }
}

INSTANTIATE_TEST_SUITE_P(all, many_threads, testing::ValuesIn(all_configs), config_name);

}  // namespace
}  // namespace conformance
