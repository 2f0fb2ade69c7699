// SPDX-License-Identifier: MIT
// weft — the two threading models the common configurations leave out
// (fi_domain(3), "Threading"): FI_THREAD_FID, where the application
// serializes access to each object but one endpoint's transmit and receive
// sides may be driven by different threads at once, and FI_THREAD_ENDPOINT,
// where each endpoint is one thread's but the objects endpoints share (an
// AV, a counter) are used by several. Each provider answers the model asked
// and keeps its promise; ThreadSanitizer runs these too.
#include "fixture.hpp"

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace conformance {
namespace {

class threading_models : public provider_test {};

// Sends `n` messages of 8 bytes (their number) from `ep` to `to`, reading
// `cq` for their completions; false on an error.
bool send_numbers(fid_ep* ep, fid_cq* cq, fi_addr_t to, uint64_t n, std::string& why) {
  uint64_t sent = 0, done = 0;
  std::vector<uint64_t> buf(n);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (done < n) {
    if (std::chrono::steady_clock::now() > deadline) return why = "sends did not complete", false;
    if (sent < n) {
      buf[sent] = sent;
      ssize_t r = fi_send(ep, &buf[sent], sizeof buf[sent], nullptr, to, &buf[sent]);
      if (r == 0)
        ++sent;
      else if (r != -FI_EAGAIN)
        return why = "fi_send: " + std::string(fi_strerror(int(-r))), false;
    }
    fi_cq_entry e[16];
    ssize_t got = fi_cq_read(cq, e, 16);
    if (got == -FI_EAVAIL) return why = "a send failed", false;
    if (got > 0) done += uint64_t(got);
  }
  return true;
}

// Receives `n` such messages on `ep`, `window` receives posted at a time,
// reading `cq`; each must carry the next number.
bool receive_numbers(fid_ep* ep, fid_cq* cq, uint64_t n, std::string& why) {
  constexpr uint64_t window = 32;
  std::vector<uint64_t> buf(window);
  uint64_t posted = 0, got_n = 0;
  auto post = [&](uint64_t i) {
    ssize_t r;
    while ((r = fi_recv(ep, &buf[i % window], sizeof(uint64_t), nullptr, FI_ADDR_UNSPEC,
                        &buf[i % window])) == -FI_EAGAIN)
      fi_cq_read(cq, nullptr, 0);
    return r == 0;
  };
  while (posted < std::min(n, window))
    if (!post(posted++)) return why = "fi_recv failed", false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (got_n < n) {
    if (std::chrono::steady_clock::now() > deadline) return why = "messages did not arrive", false;
    fi_cq_entry e;
    ssize_t r = fi_cq_read(cq, &e, 1);
    if (r == -FI_EAVAIL) return why = "a receive failed", false;
    if (r != 1) continue;
    auto* slot = static_cast<uint64_t*>(e.op_context);
    if (*slot != got_n)
      return why = "message " + std::to_string(got_n) + " carried " + std::to_string(*slot),
             false;
    ++got_n;
    if (posted < n && !post(posted++)) return why = "fi_recv failed", false;
  }
  return true;
}

TEST_P(threading_models, fi_getinfo_answers_the_model_asked) {
  EXPECT_EQ(info->domain_attr->threading, GetParam().threading);
}

// FI_THREAD_FID: "no serialization is required between the submission of
// data transmit requests and data receive operations". Two endpoints, each
// with a transmit CQ and a receive CQ, each side of each on a thread of its
// own: four threads, every message once and in order.
TEST_P(threading_models, transmit_and_receive_sides_of_one_endpoint_run_on_two_threads) {
  if (GetParam().threading != FI_THREAD_FID)
    GTEST_SKIP() << "FI_THREAD_ENDPOINT serializes all use of an endpoint";
  open_av();
  fid_cq* tx[2] = {open_cq(FI_CQ_FORMAT_CONTEXT), open_cq(FI_CQ_FORMAT_CONTEXT)};
  fid_cq* rx[2] = {open_cq(FI_CQ_FORMAT_CONTEXT), open_cq(FI_CQ_FORMAT_CONTEXT)};
  fid_ep* ep[2] = {};
  fi_addr_t addr[2] = {FI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL};
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(fi_endpoint(domain, info, &ep[i], nullptr), 0);
    eps.push_back(ep[i]);
    ASSERT_EQ(fi_ep_bind(ep[i], &tx[i]->fid, FI_TRANSMIT), 0);
    ASSERT_EQ(fi_ep_bind(ep[i], &rx[i]->fid, FI_RECV), 0);
    ASSERT_EQ(fi_ep_bind(ep[i], &av->fid, 0), 0);
    ASSERT_EQ(fi_enable(ep[i]), 0);
    char name[128];
    size_t len = sizeof name;
    ASSERT_EQ(fi_getname(&ep[i]->fid, name, &len), 0);
    ASSERT_EQ(fi_av_insert(av, name, 1, &addr[i], 0, nullptr), 1);
  }
  constexpr uint64_t n = 3000;
  std::string why[4];
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      if (!send_numbers(ep[i], tx[i], addr[1 - i], n, why[2 * i])) why[2 * i] += " (sender)";
    });
    threads.emplace_back([&, i] {
      if (!receive_numbers(ep[i], rx[i], n, why[2 * i + 1])) why[2 * i + 1] += " (receiver)";
    });
  }
  for (auto& t : threads) t.join();
  for (const std::string& w : why) EXPECT_EQ(w, "");
}

// Both models: each endpoint is one thread's, and what they share is used
// by both at once: the threads insert their endpoints' names into one AV
// concurrently, look each other up, and count their sends on one counter.
TEST_P(threading_models, endpoints_on_their_own_threads_share_an_av_and_a_counter) {
  open_av();
  fi_cntr_attr ca{};
  ca.events = FI_CNTR_EVENTS_COMP;
  fid_cntr* sent = nullptr;
  ASSERT_EQ(fi_cntr_open(domain, &ca, &sent, nullptr), 0);
  constexpr int threads_n = 2;
  constexpr uint64_t n = 2000;
  fid_ep* ep[threads_n] = {};
  fid_cq* cq[threads_n] = {};
  char name[threads_n][128];
  for (int i = 0; i < threads_n; ++i) {
    cq[i] = open_cq(FI_CQ_FORMAT_CONTEXT);
    ASSERT_EQ(fi_endpoint(domain, info, &ep[i], nullptr), 0);
    eps.push_back(ep[i]);
    ASSERT_EQ(fi_ep_bind(ep[i], &cq[i]->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_ep_bind(ep[i], &av->fid, 0), 0);
    ASSERT_EQ(fi_ep_bind(ep[i], &sent->fid, FI_SEND), 0);
    ASSERT_EQ(fi_enable(ep[i]), 0);
    size_t len = sizeof name[i];
    ASSERT_EQ(fi_getname(&ep[i]->fid, name[i], &len), 0);
  }
  std::atomic<int> inserted{0};
  fi_addr_t addr[threads_n] = {FI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL};
  std::string why[threads_n];
  std::vector<std::thread> threads;
  for (int i = 0; i < threads_n; ++i)
    threads.emplace_back([&, i] {
      if (fi_av_insert(av, name[i], 1, &addr[i], 0, nullptr) != 1) {
        why[i] = "fi_av_insert";
        inserted.fetch_add(1);
        return;
      }
      inserted.fetch_add(1);
      while (inserted.load() < threads_n) std::this_thread::yield();
      // Each sends to itself, receiving as it goes: the one thread on it.
      constexpr uint64_t window = 16;
      uint64_t in[window], out[window];
      uint64_t posted = 0, received = 0, sent_n = 0, done = 0;
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while ((received < n || done < n) && std::chrono::steady_clock::now() < deadline) {
        if (posted < n && posted - received < window &&
            fi_recv(ep[i], &in[posted % window], sizeof in[0], nullptr, FI_ADDR_UNSPEC,
                    &in[posted % window]) == 0)
          ++posted;
        if (sent_n < posted && sent_n - done < window) {
          out[sent_n % window] = sent_n;
          if (fi_send(ep[i], &out[sent_n % window], sizeof out[0], nullptr, addr[i],
                      &out[sent_n % window]) == 0)
            ++sent_n;
        }
        fi_cq_entry e[8];
        ssize_t got = fi_cq_read(cq[i], e, 8);
        if (got == -FI_EAVAIL) {
          why[i] = "an operation failed";
          return;
        }
        for (ssize_t k = 0; k < got; ++k) {
          auto* p = static_cast<uint64_t*>(e[k].op_context);
          if (p >= in && p < in + window) {
            if (*p != received) {
              why[i] = "message " + std::to_string(received) + " out of order";
              return;
            }
            ++received;
          } else {
            ++done;
          }
        }
        (void)fi_cntr_read(sent);  // both threads read the shared counter as it moves
      }
      if (received < n || done < n) why[i] = "did not finish";
    });
  for (auto& t : threads) t.join();
  for (const std::string& w : why) EXPECT_EQ(w, "");
  EXPECT_NE(addr[0], addr[1]);
  EXPECT_EQ(fi_cntr_read(sent), threads_n * n) << "every send counted once";
  for (auto it = eps.rbegin(); it != eps.rend(); ++it) EXPECT_EQ(fi_close(&(*it)->fid), 0);
  eps.clear();
  EXPECT_EQ(fi_close(&sent->fid), 0);
}

const config models[] = {
    {"shm", FI_EP_RDM, FI_THREAD_FID},      {"shm", FI_EP_RDM, FI_THREAD_ENDPOINT},
    {"tcp", FI_EP_RDM, FI_THREAD_FID},      {"tcp", FI_EP_RDM, FI_THREAD_ENDPOINT},
    {"udp", FI_EP_RDM, FI_THREAD_FID},      {"udp", FI_EP_RDM, FI_THREAD_ENDPOINT},
};
INSTANTIATE_TEST_SUITE_P(all, threading_models, testing::ValuesIn(models), config_name);

}  // namespace
}  // namespace conformance
