// SPDX-License-Identifier: MIT
// weft — conformance for RMA and atomics between processes: four processes,
// each with its own fabric, domain and endpoint, write patterns (small and
// 1 MiB) into one another's registered windows, read them back, and fetch-add
// one counter in process 0's window; afterwards every window holds every
// peer's pattern, the counter is exact and every fetched value distinct.
// Then a target killed while reads and a fetching atomic from us are
// outstanding: they fail, promptly, and nothing hangs. The processes are
// forked before anything of libfabric is open in the test process. Providers
// without FI_RMA / FI_ATOMIC skip.
#include "procs.hpp"
#include "provider_caps.hpp"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace conformance {
namespace {

using clock_type = std::chrono::steady_clock;

constexpr uint64_t rma_caps =
    FI_MSG | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

// Byte i of what `writer` puts into `target`'s window (`large` or small slot).
inline char pattern(size_t i, int writer, int target, bool large) {
  unsigned seed = static_cast<unsigned>(writer * 8 + target) * 2 + large;
  return static_cast<char>((i * 131 + seed * 7 + (i >> 12)) & 0xff);
}

// One process's libfabric objects and its registered window.
struct node {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_ep* ep = nullptr;
  fid_mr* mr = nullptr;
  std::vector<char> window;
  uint64_t key = 0, base = 0;
  std::vector<void*> done;             // contexts of successful completions
  std::vector<fi_cq_err_entry> errors;  // error completions
  char why[256] = {};

  bool fail(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return false;
  }
  bool open(const config& cfg, size_t window_len) {
    fi_info* hints = hints_for(cfg, rma_caps);
    int rc = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info);
    fi_freeinfo(hints);
    if (rc) return fail("fi_getinfo: %d", rc);
    if (fi_fabric(info->fabric_attr, &fabric, nullptr) || fi_domain(fabric, info, &domain, nullptr))
      return fail("fabric or domain");
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_DATA;
    ca.size = 256;
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    if (fi_cq_open(domain, &ca, &cq, nullptr) || fi_av_open(domain, &aa, &av, nullptr) ||
        fi_endpoint(domain, info, &ep, nullptr) ||
        fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) || fi_ep_bind(ep, &av->fid, 0) ||
        fi_enable(ep))
      return fail("cq, av or endpoint");
    window.assign(window_len, 0);
    if ((rc = fi_mr_reg(domain, window.data(), window.size(), FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
                        1, 0, &mr, nullptr)))
      return fail("fi_mr_reg: %d", rc);
    key = fi_mr_key(mr);
    base = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? reinterpret_cast<uint64_t>(window.data())
                                                          : 0;
    return true;
  }
  ~node() {
    for (fid* f : {mr ? &mr->fid : nullptr, ep ? &ep->fid : nullptr, av ? &av->fid : nullptr,
                   cq ? &cq->fid : nullptr, domain ? &domain->fid : nullptr,
                   fabric ? &fabric->fid : nullptr})
      if (f) fi_close(f);
    fi_freeinfo(info);
  }
  // One read of the CQ: drives progress (we are a target too) and collects.
  void progress() {
    fi_cq_data_entry e[16];
    ssize_t n = fi_cq_read(cq, e, 16);
    for (ssize_t i = 0; i < n; ++i) done.push_back(e[i].op_context);
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry ee{};
      if (fi_cq_readerr(cq, &ee, 0) == 1) errors.push_back(ee);
    }
    if (n <= 0) sched_yield();  // more processes than cores: let the others run
  }
  // Posts with `post` until it is not -FI_EAGAIN; its last return.
  template <class F>
  ssize_t retry(F post) {
    auto deadline = clock_type::now() + std::chrono::seconds(20);
    ssize_t r;
    while ((r = post()) == -FI_EAGAIN && clock_type::now() < deadline) progress();
    return r;
  }
  // Drives progress until `n` completions (of any kind) have been collected.
  bool collect(size_t n, int seconds = 20) {
    auto deadline = clock_type::now() + std::chrono::seconds(seconds);
    while (done.size() + errors.size() < n && clock_type::now() < deadline) progress();
    return done.size() + errors.size() >= n;
  }
};

// Shared with the children (MAP_SHARED, made before the fork).
constexpr int nprocs = 4;
constexpr int fetches = 1000;
constexpr size_t small_len = 200, small_stride = 256, large_len = 1 << 20;
constexpr size_t small_off = 64, large_off = 4096;  // counter at 0
constexpr size_t window_len = large_off + nprocs * large_len;

struct card {  // what a process publishes about itself
  char name[256];
  size_t len;
  uint64_t key, base;
  std::atomic<int> ready;
};
struct board {
  card cards[nprocs];
  std::atomic<int> arrived[4];
  std::atomic<int> abort;
  uint64_t counter;
  uint64_t fetched[nprocs][fetches];
  char why[nprocs][256];
};
static_assert(std::atomic<int>::is_always_lock_free);

bool publish(node& n, card& c) {
  c.len = sizeof c.name;
  if (fi_getname(&n.ep->fid, c.name, &c.len)) return n.fail("fi_getname");
  c.key = n.key;
  c.base = n.base;
  c.ready.store(1);
  return true;
}

// Every process arrives, driving its progress while it waits.
bool barrier(node& n, board& b, int phase) {
  b.arrived[phase].fetch_add(1);
  auto deadline = clock_type::now() + std::chrono::seconds(30);
  while (b.arrived[phase].load() < nprocs) {
    if (b.abort.load()) return n.fail("another process failed (barrier %d)", phase);
    if (clock_type::now() > deadline) return n.fail("barrier %d timed out", phase);
    n.progress();
  }
  return true;
}

// Checks `len` bytes at `p` against what `writer` put there for `target`
// (zeros when writer == target: no one writes its own slot).
bool check_slot(node& n, const char* p, size_t len, int writer, int target, bool large,
                const char* where) {
  for (size_t i = 0; i < len; ++i) {
    char want = writer == target ? 0 : pattern(i, writer, target, large);
    if (p[i] != want)
      return n.fail("%s: %s slot of %d in %d's window differs at byte %zu", where,
                    large ? "large" : "small", writer, target, i);
  }
  return true;
}

// One of the four processes; true when all went well (else n.why says why).
bool peer_main(node& n, board& b, int me, const config& cfg) {
  if (!n.open(cfg, window_len) || !publish(n, b.cards[me])) return false;
  fi_addr_t addr[nprocs];
  auto deadline = clock_type::now() + std::chrono::seconds(30);
  for (int p = 0; p < nprocs; ++p) {
    while (!b.cards[p].ready.load()) {
      if (b.abort.load() || clock_type::now() > deadline) return n.fail("peer %d never came", p);
      n.progress();
    }
    if (fi_av_insert(n.av, b.cards[p].name, 1, &addr[p], 0, nullptr) != 1)
      return n.fail("fi_av_insert of %d", p);
  }
  // Writes into every other window, small and large.
  std::vector<std::vector<char>> small(nprocs, std::vector<char>(small_len)),
      large(nprocs, std::vector<char>(large_len));
  std::vector<fi_context> ctx(4 * nprocs);
  size_t posted = 0;
  for (int p = 0; p < nprocs; ++p) {
    if (p == me) continue;
    for (size_t i = 0; i < small_len; ++i) small[p][i] = pattern(i, me, p, false);
    for (size_t i = 0; i < large_len; ++i) large[p][i] = pattern(i, me, p, true);
    const card& c = b.cards[p];
    ssize_t r = n.retry([&] {
      return fi_write(n.ep, small[p].data(), small_len, nullptr, addr[p],
                      c.base + small_off + me * small_stride, c.key, &ctx[posted]);
    });
    if (r) return n.fail("fi_write to %d: %zd", p, r);
    ++posted;
    r = n.retry([&] {
      return fi_write(n.ep, large[p].data(), large_len, nullptr, addr[p],
                      c.base + large_off + me * large_len, c.key, &ctx[posted]);
    });
    if (r) return n.fail("large fi_write to %d: %zd", p, r);
    ++posted;
  }
  if (!n.collect(posted) || !n.errors.empty())
    return n.fail("writes: %zu of %zu completed, %zu errors (first %d)", n.done.size(), posted,
                  n.errors.size(), n.errors.empty() ? 0 : n.errors[0].err);
  if (!barrier(n, b, 0)) return false;
  // Every peer's whole window read back: each slot holds its writer's pattern.
  n.done.clear();
  std::vector<std::vector<char>> back_small(nprocs, std::vector<char>(nprocs * small_stride)),
      back_large(nprocs, std::vector<char>(nprocs * large_len));
  posted = 0;
  for (int p = 0; p < nprocs; ++p) {
    if (p == me) continue;
    const card& c = b.cards[p];
    ssize_t r = n.retry([&] {
      return fi_read(n.ep, back_small[p].data(), nprocs * small_stride, nullptr, addr[p],
                     c.base + small_off, c.key, &ctx[posted]);
    });
    if (r) return n.fail("fi_read from %d: %zd", p, r);
    ++posted;
    r = n.retry([&] {
      return fi_read(n.ep, back_large[p].data(), nprocs * large_len, nullptr, addr[p],
                     c.base + large_off, c.key, &ctx[posted]);
    });
    if (r) return n.fail("large fi_read from %d: %zd", p, r);
    ++posted;
  }
  if (!n.collect(posted) || !n.errors.empty())
    return n.fail("reads: %zu of %zu completed, %zu errors (first %d)", n.done.size(), posted,
                  n.errors.size(), n.errors.empty() ? 0 : n.errors[0].err);
  for (int p = 0; p < nprocs; ++p) {
    if (p == me) continue;
    for (int w = 0; w < nprocs; ++w)
      if (!check_slot(n, back_small[p].data() + w * small_stride, small_len, w, p, false,
                      "read back") ||
          !check_slot(n, back_large[p].data() + w * large_len, large_len, w, p, true,
                      "read back"))
        return false;
  }
  // The shared counter in process 0's window, a few fetch-adds in flight.
  constexpr size_t window = 16;
  uint64_t one = 1, prior[window];
  fi_context actx[window];
  n.done.clear();
  size_t issued = 0, finished = 0;
  bool busy[window] = {};
  deadline = clock_type::now() + std::chrono::seconds(60);
  while (finished < fetches) {
    for (size_t s = 0; s < window && issued < fetches; ++s) {
      if (busy[s]) continue;
      ssize_t r = fi_fetch_atomic(n.ep, &one, 1, nullptr, &prior[s], nullptr, addr[0],
                                  b.cards[0].base, b.cards[0].key, FI_UINT64, FI_SUM, &actx[s]);
      if (r == -FI_EAGAIN) break;
      if (r) return n.fail("fi_fetch_atomic: %zd", r);
      busy[s] = true;
      ++issued;
    }
    n.progress();
    if (!n.errors.empty()) return n.fail("fetch-add failed: %d", n.errors[0].err);
    for (void* d : n.done) {
      size_t s = static_cast<fi_context*>(d) - actx;
      if (s >= window || !busy[s]) return n.fail("stray completion");
      busy[s] = false;
      b.fetched[me][finished++] = prior[s];
    }
    n.done.clear();
    if (clock_type::now() > deadline) return n.fail("fetch-adds: %zu of %d", finished, fetches);
  }
  if (!barrier(n, b, 1)) return false;
  // Under automatic progress our progress thread placed what the others
  // wrote here, and the barrier that says they are done runs through other
  // processes, where ThreadSanitizer cannot follow. One progress call takes
  // the endpoint's lock that thread held while it wrote: the order the tool
  // needs (and harmless otherwise).
  n.progress();
  // Our own window, as the others left it.
  for (int w = 0; w < nprocs; ++w)
    if (!check_slot(n, n.window.data() + small_off + w * small_stride, small_len, w, me, false,
                    "own window") ||
        !check_slot(n, n.window.data() + large_off + w * large_len, large_len, w, me, true,
                    "own window"))
      return false;
  if (me == 0) std::memcpy(&b.counter, n.window.data(), sizeof b.counter);
  return true;
}

// Waits for every child, at most `seconds`; those still running are killed.
std::vector<int> reap(const std::vector<pid_t>& pids, int seconds) {
  std::vector<int> codes(pids.size(), -1);
  auto deadline = clock_type::now() + std::chrono::seconds(seconds);
  size_t left = pids.size();
  while (left && clock_type::now() < deadline) {
    for (size_t i = 0; i < pids.size(); ++i) {
      int status;
      if (codes[i] == -1 && waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        --left;
      }
    }
    usleep(2000);
  }
  for (size_t i = 0; i < pids.size(); ++i)
    if (codes[i] == -1) {
      kill(pids[i], SIGKILL);
      exit_code(pids[i]);
      codes[i] = 999;  // timed out
    }
  return codes;
}

class rma_procs : public testing::TestWithParam<config> {
 protected:
  // Only a look at what the provider offers: nothing stays open across fork.
  void SetUp() override {
    if (GetParam().ep_type != FI_EP_RDM) GTEST_SKIP() << "reliable endpoints only";
    fi_info* hints = hints_for(GetParam(), rma_caps);
    fi_info* info = nullptr;
    int rc = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info);
    fi_freeinfo(hints);
    fi_freeinfo(info);
    if (rc == -FI_ENODATA) SKIP_OR_FAIL_LACKING(rma_caps, nullptr);
    ASSERT_EQ(rc, 0);
  }
};

TEST_P(rma_procs, four_processes_write_read_and_count) {
  board* b = shared_map<board>();
  ASSERT_NE(b, nullptr);
  shared_guard<board> unmap{b};
  std::vector<pid_t> pids;
  for (int me = 0; me < nprocs; ++me) {
    pid_t pid = fork();
    if (pid == 0) {
      bool ok;
      {
        node n;
        ok = peer_main(n, *b, me, GetParam());
        if (!ok) {
          std::memcpy(b->why[me], n.why, sizeof n.why);
          b->abort.store(1);
        }
      }
      _exit(ok ? 0 : 1);
    }
    if (pid < 0) {
      ADD_FAILURE() << "fork: " << std::strerror(errno);
      b->abort.store(1);
      break;
    }
    pids.push_back(pid);
  }
  std::vector<int> codes = reap(pids, 90);
  for (int me = 0; me < nprocs; ++me)
    EXPECT_EQ(codes[me], 0) << "process " << me << ": " << b->why[me];
  if (std::all_of(codes.begin(), codes.end(), [](int c) { return c == 0; })) {
    EXPECT_EQ(b->counter, uint64_t{nprocs} * fetches);
    std::vector<uint64_t> all(&b->fetched[0][0], &b->fetched[0][0] + nprocs * fetches);
    std::sort(all.begin(), all.end());
    EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "a value fetched twice";
    EXPECT_EQ(all.back(), uint64_t{nprocs} * fetches - 1);
  }
}

// The target, killed while our reads (1 MiB and 64 bytes) and a fetching
// atomic wait on it: each of them completes in error within a few seconds,
// nothing hangs, nothing completes twice. Without `serving` the target never
// served any (it is stopped, SIGSTOP, before they are posted, so even a
// provider's own progress thread cannot answer: every one fails); with it,
// it was answering a stream of reads kept `slots` deep until it died (those
// answered carry their data).
void killed_target(const config& cfg, bool serving) {
  constexpr size_t win = 4 << 20, slots = 16, big = 1 << 20, small = 64;
  card* c = shared_map<card>();
  ASSERT_NE(c, nullptr);
  shared_guard<card> unmap{c};
  pid_t pid = fork();
  if (pid == 0) {
    node t;
    if (!t.open(cfg, win + 64)) {  // the counter past the data
      c->ready.store(-1);
      _exit(1);
    }
    for (size_t i = 0; i < win; ++i) t.window[i] = pattern(i, 1, 0, true);
    if (!publish(t, *c)) {
      c->ready.store(-1);
      _exit(2);
    }
    for (;;) t.progress();
  }
  ASSERT_GT(pid, 0);
  child_guard child{pid};
  node n;
  bool ok = n.open(cfg, 4096);
  auto deadline = clock_type::now() + std::chrono::seconds(20);
  while (ok && !c->ready.load() && clock_type::now() < deadline) usleep(1000);
  fi_addr_t peer = FI_ADDR_UNSPEC;
  ok = ok && c->ready.load() == 1 && fi_av_insert(n.av, c->name, 1, &peer, 0, nullptr) == 1;
  ASSERT_TRUE(ok) << "setup: " << n.why;
  if (!serving) {
    int status = 0;
    ASSERT_EQ(kill(pid, SIGSTOP), 0);
    ASSERT_EQ(waitpid(pid, &status, WUNTRACED), pid);
    ASSERT_TRUE(WIFSTOPPED(status));
  }

  // Slot s reads `big` or `small` bytes at off[s]; reused once completed.
  std::vector<std::vector<char>> buf(slots, std::vector<char>(big));
  fi_context ctx[slots + 1];  // the last: the fetching atomic
  uint64_t off[slots] = {};
  bool busy[slots + 1] = {};
  size_t posted = 0, ok_reads = 0, failed = 0, twice = 0, bad_data = 0;
  std::vector<int> errs;
  auto refill = [&] {
    for (size_t s = 0; s < slots; ++s) {
      if (busy[s]) continue;
      const size_t len = s % 4 == 3 ? small : big;
      off[s] = (posted * 4093 * 64) % (win - big);
      ssize_t r = fi_read(n.ep, buf[s].data(), len, nullptr, peer, c->base + off[s], c->key,
                          &ctx[s]);
      if (r == -FI_EAGAIN) return;
      ASSERT_EQ(r, 0) << "fi_read";
      busy[s] = true;
      ++posted;
    }
  };
  uint64_t prior = 77, one = 1;
  auto reap = [&] {
    for (void* d : n.done) {
      size_t s = static_cast<fi_context*>(d) - ctx;
      if (s > slots || !busy[s]) {
        ++twice;
        continue;
      }
      busy[s] = false;
      ++ok_reads;
      if (s == slots) {
        if (prior != 0) ++bad_data;
        continue;
      }
      const size_t len = s % 4 == 3 ? small : big;
      for (size_t k = 0; k < len; k += 997)
        if (buf[s][k] != pattern(off[s] + k, 1, 0, true)) {
          ++bad_data;
          break;
        }
    }
    for (const fi_cq_err_entry& e : n.errors) {
      size_t s = static_cast<fi_context*>(e.op_context) - ctx;
      if (s > slots || !busy[s]) {
        ++twice;
        continue;
      }
      busy[s] = false;
      ++failed;
      errs.push_back(e.err);
    }
    n.done.clear();
    n.errors.clear();
  };
  refill();
  ASSERT_EQ(fi_fetch_atomic(n.ep, &one, 1, nullptr, &prior, nullptr, peer, c->base + win, c->key,
                            FI_UINT64, FI_SUM, &ctx[slots]),
            0);
  busy[slots] = true;
  ++posted;
  if (serving) {
    // A stream of reads, refilled as they complete; after 48 the slots are
    // filled once more and the target dies under them.
    deadline = clock_type::now() + std::chrono::seconds(20);
    while (ok_reads < 48 && failed == 0 && clock_type::now() < deadline) {
      n.progress();
      reap();
      refill();
    }
    ASSERT_GE(ok_reads, 48u) << "the target answered too few";
    refill();
  } else {
    auto until = clock_type::now() + std::chrono::milliseconds(50);
    while (clock_type::now() < until) n.progress();
    reap();
    EXPECT_EQ(ok_reads + failed, 0u) << "completed with no one serving";
  }
  const size_t before = ok_reads;
  kill(pid, SIGKILL);
  auto killed = clock_type::now();
  // Not reaped yet: a zombie is as dead as a peer gets.
  deadline = killed + std::chrono::seconds(20);
  auto outstanding = [&] { return std::count(busy, busy + slots + 1, true); };
  while (outstanding() && clock_type::now() < deadline) {
    n.progress();
    reap();
  }
  double secs = std::chrono::duration<double>(clock_type::now() - killed).count();
  EXPECT_EQ(child.reap(), 128 + SIGKILL);
  EXPECT_EQ(outstanding(), 0) << "operations never completed after " << secs << " s";
  EXPECT_LT(secs, 5.0) << "the failures took too long";
  EXPECT_EQ(twice, 0u) << "completed twice";
  EXPECT_EQ(bad_data, 0u) << "completed reads with wrong data";
  EXPECT_EQ(ok_reads + failed, posted);
  if (!serving) {
    EXPECT_EQ(failed, slots + 1);
  }
  // A connection's end, or (udp RDM, no connection) the peer's silence.
  for (int e : errs)
    EXPECT_TRUE(e == FI_ECONNRESET || e == FI_ECONNABORTED || e == FI_ECONNREFUSED ||
                e == FI_ENOTCONN || e == FI_EIO || e == FI_ESHUTDOWN || e == FI_ETIMEDOUT)
        << "error " << e << " (" << fi_strerror(e) << ")";
  testing::Test::RecordProperty("answered_before_kill", static_cast<int>(before));
  testing::Test::RecordProperty("failed_by_kill", static_cast<int>(failed));
  // Later operations to the dead peer fail too, at once or as completions.
  char late_buf[64];
  fi_context late;
  ssize_t r = fi_read(n.ep, late_buf, sizeof late_buf, nullptr, peer, c->base, c->key, &late);
  if (r == 0) {
    ASSERT_TRUE(n.collect(1, 5)) << "a read to a dead peer hangs";
    EXPECT_EQ(n.errors.size(), 1u);
  } else {
    EXPECT_LT(r, 0);
    EXPECT_NE(r, -FI_EAGAIN);
  }
}

TEST_P(rma_procs, killed_target_fails_outstanding_reads) {
  SKIP_IF_DEATH_TAKES_TOO_LONG();
  killed_target(GetParam(), false);
}

TEST_P(rma_procs, target_killed_while_serving_reads) {
  SKIP_IF_DEATH_TAKES_TOO_LONG();
  killed_target(GetParam(), true);
}

INSTANTIATE_TEST_SUITE_P(all, rma_procs, testing::ValuesIn(all_configs), config_name);

}  // namespace
}  // namespace conformance
