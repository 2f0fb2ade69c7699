// SPDX-License-Identifier: MIT
// weft — conformance for reliable endpoints (FI_EP_RDM): large messages with
// their data checked, several processes exchanging messages, and a peer that
// dies in the middle of a transfer. Datagram configurations skip.
#include "fixture.hpp"

#include <rdma/fi_tagged.h>

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace conformance {
namespace {

// Byte i of message `seed`: a pattern no shifted or truncated copy matches.
inline char pattern(size_t i, unsigned seed) {
  return static_cast<char>((i * 131 + seed * 7 + (i >> 12)) & 0xff);
}
inline void fill(std::vector<char>& v, unsigned seed) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = pattern(i, seed);
}
// The first index where v differs from the pattern, or v.size().
inline size_t check(const std::vector<char>& v, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i)
    if (v[i] != pattern(i, seed)) return i;
  return n;
}

class rdm : public provider_test {
 protected:
  void SetUp() override {
    provider_test::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (info->ep_attr->type != FI_EP_RDM) GTEST_SKIP() << "reliable endpoints only";
    cq = open_cq(FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 256);
    open_av();
    a = open_ep(cq, &fa);
    b = open_ep(cq, &fb);
    ASSERT_TRUE(a && b);
  }
  uint64_t extra_caps() const override { return FI_TAGGED; }

  // Waits for the completion of `ctx` (errors returned as -FI_EAVAIL with err).
  ssize_t wait_for(void* ctx, fi_cq_err_entry* err = nullptr, int seconds = 10) {
    for (auto it = done.begin(); it != done.end(); ++it)
      if (it->op_context == ctx) return last = *it, done.erase(it), 1;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      fi_cq_tagged_entry e;
      ssize_t n = fi_cq_read(cq, &e, 1);
      if (n == 1) {
        if (e.op_context == ctx) return last = e, 1;
        done.push_back(e);
      } else if (n == -FI_EAVAIL) {
        fi_cq_err_entry ee{};
        EXPECT_EQ(fi_cq_readerr(cq, &ee, 0), 1);
        if (err) *err = ee;
        if (ee.op_context == ctx) return -FI_EAVAIL;
        ADD_FAILURE() << "error " << ee.err << " for another operation";
      } else if (n != -FI_EAGAIN) {
        return n;
      }
    }
    return -FI_ETIMEDOUT;
  }
  void settle() {
    fi_cq_tagged_entry e;
    for (int i = 0; i < 100; ++i)
      if (fi_cq_read(cq, &e, 1) == 1) done.push_back(e);
  }

  fid_cq* cq = nullptr;
  fid_ep *a = nullptr, *b = nullptr;
  fi_addr_t fa = 0, fb = 0;
  std::vector<fi_cq_tagged_entry> done;
  fi_cq_tagged_entry last{};
};

const size_t large_sizes[] = {4095, 4096, 4097, 65536, 65537, 200000, (1u << 20) + 3, 4u << 20};

TEST_P(rdm, large_messages_arrive_intact) {
  unsigned seed = 1;
  for (size_t size : large_sizes) {
    if (size > info->ep_attr->max_msg_size) continue;
    for (int tagged = 0; tagged < 2; ++tagged)
      for (int late = 0; late < 2; ++late, ++seed) {
        SCOPED_TRACE(std::to_string(size) + (tagged ? " tagged" : " msg") +
                     (late ? " unexpected" : " expected"));
        std::vector<char> out(size), in(size + 16, 0);
        fill(out, seed);
        fi_context rctx, sctx;
        auto post = [&] {
          return tagged ? fi_trecv(b, in.data(), in.size(), nullptr, FI_ADDR_UNSPEC, seed, 0, &rctx)
                        : fi_recv(b, in.data(), in.size(), nullptr, FI_ADDR_UNSPEC, &rctx);
        };
        if (!late) {
          ASSERT_EQ(post(), 0);
        }
        ASSERT_EQ(tagged ? fi_tsend(a, out.data(), size, nullptr, fb, seed, &sctx)
                         : fi_send(a, out.data(), size, nullptr, fb, &sctx),
                  0);
        if (late) {
          settle();
          ASSERT_EQ(post(), 0);
        }
        ASSERT_EQ(wait_for(&rctx), 1);
        EXPECT_EQ(last.len, size);
        if (tagged) {
          EXPECT_EQ(last.tag, seed);
        }
        EXPECT_EQ(check(in, size, seed), size);
        EXPECT_EQ(in[size], 0) << "wrote past the message";
        ASSERT_EQ(wait_for(&sctx), 1);
        EXPECT_TRUE(last.flags & FI_SEND);
      }
  }
}

TEST_P(rdm, large_scatter_and_gather) {
  const size_t size = 300000;
  if (size > info->ep_attr->max_msg_size || info->tx_attr->iov_limit < 3 ||
      info->rx_attr->iov_limit < 2)
    GTEST_SKIP() << "needs 3 send and 2 receive iovecs";
  std::vector<char> out(size), in(size, 0);
  fill(out, 42);
  iovec siov[3] = {{out.data(), 1000}, {out.data() + 1000, 150000}, {out.data() + 151000, size - 151000}};
  std::vector<char> r1(70001), r2(size - 70001);
  iovec riov[2] = {{r1.data(), r1.size()}, {r2.data(), r2.size()}};
  fi_context rctx, sctx;
  ASSERT_EQ(fi_recvv(b, riov, nullptr, 2, FI_ADDR_UNSPEC, &rctx), 0);
  ASSERT_EQ(fi_sendv(a, siov, nullptr, 3, fb, &sctx), 0);
  ASSERT_EQ(wait_for(&rctx), 1);
  EXPECT_EQ(last.len, size);
  std::memcpy(in.data(), r1.data(), r1.size());
  std::memcpy(in.data() + r1.size(), r2.data(), r2.size());
  EXPECT_EQ(check(in, size, 42), size);
  ASSERT_EQ(wait_for(&sctx), 1);
}

TEST_P(rdm, large_truncation) {
  const size_t size = 1 << 20, room = 100000;
  if (size > info->ep_attr->max_msg_size)
    GTEST_SKIP() << size << " bytes exceed max_msg_size " << info->ep_attr->max_msg_size;
  std::vector<char> out(size), in(room + 8, 0);
  fill(out, 9);
  fi_context rctx, sctx;
  ASSERT_EQ(fi_recv(b, in.data(), room, nullptr, FI_ADDR_UNSPEC, &rctx), 0);
  ASSERT_EQ(fi_send(a, out.data(), size, nullptr, fb, &sctx), 0);
  fi_cq_err_entry err{};
  ASSERT_EQ(wait_for(&rctx, &err), -FI_EAVAIL);
  EXPECT_EQ(err.err, FI_ETRUNC);
  EXPECT_EQ(err.len, room);
  EXPECT_EQ(err.olen, size - room);
  EXPECT_EQ(check(in, room, 9), room);
  EXPECT_EQ(in[room], 0);
  ASSERT_EQ(wait_for(&sctx), 1);  // the sender is done all the same
}

TEST_P(rdm, large_unexpected_discarded) {
  const size_t size = 1 << 20;
  if (size > info->ep_attr->max_msg_size)
    GTEST_SKIP() << size << " bytes exceed max_msg_size " << info->ep_attr->max_msg_size;
  std::vector<char> out(size);
  fill(out, 3);
  fi_context sctx, pctx;
  ASSERT_EQ(fi_tsend(a, out.data(), size, nullptr, fb, 99, &sctx), 0);
  settle();
  fi_msg_tagged m{};
  m.addr = FI_ADDR_UNSPEC;
  m.tag = 99;
  m.context = &pctx;
  ASSERT_EQ(fi_trecvmsg(b, &m, FI_PEEK | FI_DISCARD), 0);
  ASSERT_EQ(wait_for(&pctx), 1);
  EXPECT_EQ(last.len, size);
  ASSERT_EQ(wait_for(&sctx), 1);  // a discarded message still completes its send
}

// Large messages of one sender, matched one after another: they complete in
// the order they matched, also when the sender copies part of each (shm's
// split copy, which a sender's progress thread joins at any moment). The
// reordering this guards against needed the sender's thread to join at the
// wrong moment: the test catches it often, not always.
TEST_P(rdm, large_messages_of_one_sender_complete_in_match_order) {
  const size_t size = 4 << 20, n = 4;
  // A progress thread joins a copy only now and then: many rounds there
  // (without shm's ordering, half of 30 rounds or more already reordered
  // in about half the runs).
  // (At most 2 s of them: sanitizer builds are slower.)
  const size_t rounds = GetParam().progress == FI_PROGRESS_AUTO ? 50 : 5;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  if (size > info->ep_attr->max_msg_size)
    GTEST_SKIP() << size << " bytes exceed max_msg_size " << info->ep_attr->max_msg_size;
  std::vector<std::vector<char>> out(n, std::vector<char>(size)), in(n, std::vector<char>(size));
  for (size_t i = 0; i < n; ++i) fill(out[i], static_cast<unsigned>(i));
  for (size_t round = 0; round < rounds && (round < 2 || std::chrono::steady_clock::now() < until);
       ++round) {
    SCOPED_TRACE(testing::Message() << "round " << round);
    std::vector<fi_context> sctx(n), rctx(n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(fi_tsend(a, out[i].data(), size, nullptr, fb, 7, &sctx[i]), 0);
    settle();  // unexpected at b
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(fi_trecv(b, in[i].data(), size, nullptr, FI_ADDR_UNSPEC, 7, 0, &rctx[i]), 0);
    // Receive completions in CQ order.
    std::vector<void*> order;
    for (auto it = done.begin(); it != done.end();) {
      if (it->flags & FI_RECV) {
        order.push_back(it->op_context);
        it = done.erase(it);
      } else {
        ++it;
      }
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (order.size() < n && std::chrono::steady_clock::now() < deadline) {
      fi_cq_tagged_entry e;
      ssize_t r = fi_cq_read(cq, &e, 1);
      ASSERT_NE(r, -FI_EAVAIL);
      if (r == 1 && (e.flags & FI_RECV))
        order.push_back(e.op_context);
      else if (r == 1)
        done.push_back(e);
    }
    ASSERT_EQ(order.size(), n);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(order[i], &rctx[i]) << "completion " << i;
      EXPECT_EQ(check(in[i], size, static_cast<unsigned>(i)), size) << i;
    }
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(wait_for(&sctx[i]), 1) << i;
  }
}

TEST_P(rdm, many_in_flight) {
  // More large sends than fit at once in a ring, all unexpected at first.
  const size_t size = 20000, n = 64;
  if (size > info->ep_attr->max_msg_size)
    GTEST_SKIP() << size << " bytes exceed max_msg_size " << info->ep_attr->max_msg_size;
  std::vector<std::vector<char>> out(n, std::vector<char>(size)), in(n, std::vector<char>(size));
  std::vector<fi_context> sctx(n), rctx(n);
  size_t sent = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (size_t i = 0; i < n; ++i) {
    fill(out[i], static_cast<unsigned>(i));
    ssize_t r;
    while ((r = fi_tsend(a, out[i].data(), size, nullptr, fb, i, &sctx[i])) == -FI_EAGAIN &&
           std::chrono::steady_clock::now() < deadline)
      settle();
    ASSERT_EQ(r, 0) << i;
    ++sent;
  }
  for (size_t i = n; i-- > 0;)  // posted in reverse: every match is by tag
    ASSERT_EQ(fi_trecv(b, in[i].data(), size, nullptr, FI_ADDR_UNSPEC, i, 0, &rctx[i]), 0);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(wait_for(&rctx[i]), 1) << i;
    EXPECT_EQ(check(in[i], size, static_cast<unsigned>(i)), size) << i;
  }
  for (size_t i = 0; i < sent; ++i) ASSERT_EQ(wait_for(&sctx[i]), 1) << i;
}

// ---- several processes ----------------------------------------------------------

// A peer in a child process, driven through pipes: it sends its name, reads
// ours, then runs `body`. Everything it does goes through the public API.
struct child_peer {
  const config& cfg;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_ep* ep = nullptr;
  fi_info* info = nullptr;
  fi_addr_t parent = 0;

  explicit child_peer(const config& c) : cfg(c) {}
  // 0 or a code for the exit status.
  int open(int to_parent, int from_parent) {
    fi_info* hints = hints_for(cfg, FI_MSG | FI_TAGGED);
    if (fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info)) return 10;
    fi_freeinfo(hints);
    if (fi_fabric(info->fabric_attr, &fabric, nullptr) || fi_domain(fabric, info, &domain, nullptr))
      return 11;
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    fi_av_attr aa{};
    if (fi_cq_open(domain, &ca, &cq, nullptr) || fi_av_open(domain, &aa, &av, nullptr) ||
        fi_endpoint(domain, info, &ep, nullptr) ||
        fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) || fi_ep_bind(ep, &av->fid, 0) ||
        fi_enable(ep))
      return 12;
    char name[256];
    size_t len = sizeof name;
    if (fi_getname(&ep->fid, name, &len)) return 13;
    if (write(to_parent, &len, sizeof len) != sizeof len || write(to_parent, name, len) != (ssize_t)len)
      return 14;
    size_t plen = 0;
    if (read(from_parent, &plen, sizeof plen) != sizeof plen || plen > sizeof name ||
        read(from_parent, name, plen) != (ssize_t)plen)
      return 15;
    if (fi_av_insert(av, name, 1, &parent, 0, nullptr) != 1) return 16;
    return 0;
  }
  // Waits for the completion of ctx: 0, or a code.
  int wait(void* ctx) {
    for (int i = 0; i < 50000000; ++i) {
      fi_cq_tagged_entry e;
      ssize_t n = fi_cq_read(cq, &e, 1);
      if (n == 1 && e.op_context == ctx) return 0;
      if (n == -FI_EAVAIL) return 20;
      if (n < 0 && n != -FI_EAGAIN) return 21;
    }
    return 22;
  }
};

// Runs `body(child_peer&)` in a forked child; returns its pid. The parent side
// gets the child's fi_addr in `peer`.
template <class F>
pid_t spawn(provider_test& t, fid_ep* ep, fid_av* av, const config& cfg, fi_addr_t* peer, F body) {
  int up[2], down[2];
  if (pipe(up) || pipe(down)) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(up[0]);
    close(down[1]);
    child_peer c(cfg);
    int rc = c.open(up[1], down[0]);
    if (!rc) rc = body(c);
    _exit(rc);
  }
  close(up[1]);
  close(down[0]);
  (void)t;
  char name[256];
  size_t len = 0;
  bool ok = read(up[0], &len, sizeof len) == sizeof len && len <= sizeof name &&
            read(up[0], name, len) == (ssize_t)len;
  char mine[256];
  size_t mlen = sizeof mine;
  ok = ok && fi_getname(&ep->fid, mine, &mlen) == 0;
  ok = ok && write(down[1], &mlen, sizeof mlen) == sizeof mlen &&
       write(down[1], mine, mlen) == (ssize_t)mlen;
  ok = ok && fi_av_insert(av, name, 1, peer, 0, nullptr) == 1;
  close(up[0]);
  close(down[1]);
  if (!ok) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return -1;
  }
  return pid;
}

int exit_code(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

constexpr int echo_rounds = 20;
constexpr size_t echo_sizes[] = {1, 64, 4096, 5000, 100000, 1 << 20};
constexpr size_t echo_kinds = sizeof echo_sizes / sizeof echo_sizes[0];

// The child's side of an echo: every message back, tagged with its round,
// its data checked first. 0, or a code for the exit status.
int echo(child_peer& c) {
  std::vector<char> buf(2 << 20);
  for (int r = 0; r < echo_rounds; ++r) {
    size_t size = echo_sizes[r % echo_kinds];
    fi_context rctx, sctx;
    if (fi_trecv(c.ep, buf.data(), buf.size(), nullptr, FI_ADDR_UNSPEC, r, 0, &rctx)) return 30;
    if (int rc = c.wait(&rctx)) return rc;
    for (size_t i = 0; i < size; ++i)
      if (buf[i] != pattern(i, r)) return 31;
    ssize_t s;
    while ((s = fi_tsend(c.ep, buf.data(), size, nullptr, c.parent, r, &sctx)) == -FI_EAGAIN) {
      fi_cq_tagged_entry e;
      fi_cq_read(c.cq, &e, 0);
    }
    if (s) return 32;
    if (int rc = c.wait(&sctx)) return rc;
  }
  return 0;
}

// The parent's side: sends each round, checks what comes back.
void echo_with(provider_test&, fid_ep* a, fi_addr_t child,
               const std::function<ssize_t(void*, fi_cq_err_entry*)>& wait_for) {
  for (int r = 0; r < echo_rounds; ++r) {
    size_t size = echo_sizes[r % echo_kinds];
    std::vector<char> out(size), in(size);
    fill(out, r);
    fi_context sctx, rctx;
    ASSERT_EQ(fi_trecv(a, in.data(), size, nullptr, child, r, 0, &rctx), 0);
    ASSERT_EQ(fi_tsend(a, out.data(), size, nullptr, child, r, &sctx), 0);
    ASSERT_EQ(wait_for(&sctx, nullptr), 1) << r;
    ASSERT_EQ(wait_for(&rctx, nullptr), 1) << r;
    EXPECT_EQ(check(in, size, r), size) << r;
  }
}

TEST_P(rdm, processes_exchange_messages) {
  fi_addr_t child;
  pid_t pid = spawn(*this, a, av, GetParam(), &child, echo);
  ASSERT_GT(pid, 0);
  echo_with(*this, a, child, [&](void* ctx, fi_cq_err_entry* err) { return wait_for(ctx, err); });
  EXPECT_EQ(exit_code(pid), 0);
}

// Denies this process process_vm_writev (EPERM), and process_vm_readv too
// unless `reads_allowed`: as a container without ptrace rights does (the
// kernel may also allow one and refuse the other). Every thread of the
// process (SECCOMP_FILTER_FLAG_TSYNC), as in a container: under automatic
// progress the library's own thread copies too. false if seccomp is not
// available.
bool deny_cross_memory_attach(bool reads_allowed = false) {
  const uint32_t readv = reads_allowed ? __NR_process_vm_writev : __NR_process_vm_readv;
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, readv, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_writev, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) == 0;
}

// Echo with a child the kernel refuses cross-memory access: process_vm_writev
// always, process_vm_readv too unless `reads_allowed`.
void echo_with_restricted_child(provider_test& t, fid_ep* a, fid_av* av, const config& cfg,
                                bool reads_allowed,
                                const std::function<ssize_t(void*, fi_cq_err_entry*)>& wait) {
  fi_addr_t child;
  pid_t pid = spawn(t, a, av, cfg, &child, [reads_allowed](child_peer& c) -> int {
    if (!deny_cross_memory_attach(reads_allowed)) return 77;
    char probe = 0;
    iovec l{&probe, 1}, r{&probe, 1};
    if (process_vm_writev(getppid(), &l, 1, &r, 1, 0) != -1 || errno != EPERM) return 50;
    if (!reads_allowed && (process_vm_readv(getppid(), &l, 1, &r, 1, 0) != -1 || errno != EPERM))
      return 51;
    return echo(c);
  });
  ASSERT_GT(pid, 0);
  echo_with(t, a, child, wait);
  int rc = exit_code(pid);
  if (rc == 77) GTEST_SKIP() << "seccomp filters are not available here";
  EXPECT_EQ(rc, 0);
}

// A peer the kernel refuses cross-memory access: messages still flow both
// ways, whatever the provider does to move them.
TEST_P(rdm, peer_without_process_vm_readv) {
  echo_with_restricted_child(*this, a, av, GetParam(), false,
                             [&](void* ctx, fi_cq_err_entry* err) { return wait_for(ctx, err); });
}

// A peer that may read our memory but not write it (the kernel can allow
// one and refuse the other): a provider that moves large messages with both
// (shm's split copy) must still deliver every byte, both ways.
TEST_P(rdm, peer_that_may_read_but_not_write) {
  echo_with_restricted_child(*this, a, av, GetParam(), true,
                             [&](void* ctx, fi_cq_err_entry* err) { return wait_for(ctx, err); });
}

// Large messages from a sender that does not call into the library while
// they are received: a single-copy provider (shm) moves them by itself (it
// may not count on the sender's help), and the sender's completions come
// later. (Over a socket, manual progress needs the sender to push the bytes.)
TEST_P(rdm, large_messages_from_a_sender_that_does_not_poll) {
  const size_t size = (1 << 20) + 5;
  if (size > info->ep_attr->max_msg_size)
    GTEST_SKIP() << size << " bytes exceed max_msg_size " << info->ep_attr->max_msg_size;
  if (std::string(GetParam().prov) != "shm") GTEST_SKIP() << "single copy only";
  if (const char* sc = getenv("FI_SHM_SINGLE_COPY"); sc && std::string(sc) == "0")
    GTEST_SKIP() << "bounce segments need the sender";
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  fi_addr_t child;
  pid_t pid = spawn(*this, a, av, GetParam(), &child, [&go, size](child_peer& c) -> int {
    close(go[1]);
    std::vector<char> out[3];
    fi_context sctx[3];
    for (unsigned k = 0; k < 3; ++k) {
      out[k].resize(size);
      fill(out[k], 60 + k);
      if (fi_tsend(c.ep, out[k].data(), size, nullptr, c.parent, k, &sctx[k])) return 40;
    }
    char b;
    if (read(go[0], &b, 1) != 1) return 41;  // blocked here, not polling
    for (auto& ctx : sctx)
      if (int rc = c.wait(&ctx)) return rc;
    return 0;
  });
  close(go[0]);
  ASSERT_GT(pid, 0);
  std::vector<char> in(size);
  for (unsigned k = 0; k < 3; ++k) {
    fi_context rctx;
    ASSERT_EQ(fi_trecv(a, in.data(), size, nullptr, child, k, 0, &rctx), 0);
    ASSERT_EQ(wait_for(&rctx), 1) << k;
    EXPECT_EQ(last.len, size);
    EXPECT_EQ(check(in, size, 60 + k), size) << k;
  }
  ASSERT_EQ(write(go[1], "g", 1), 1);
  close(go[1]);
  EXPECT_EQ(exit_code(pid), 0);
}

// A thread asleep in fi_cq_sread wakes when a message from another process
// arrives, promptly: not at the next tick of some timer. (The bound is loose,
// 20 ms for the median of 30 round trips, so that a loaded machine passes;
// shm's idle timer ticks every 100 ms, so waking by it alone fails.)
TEST_P(rdm, sread_wakes_for_a_message_from_another_process) {
  fid_cq* wcq = open_cq(FI_CQ_FORMAT_TAGGED, FI_WAIT_UNSPEC, 64);
  if (!wcq) GTEST_SKIP() << "no CQ with a wait object";
  fi_addr_t fw;
  fid_ep* w = open_ep(wcq, &fw);
  ASSERT_NE(w, nullptr);
  constexpr int rounds = 30;
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  fi_addr_t child;
  pid_t pid = spawn(*this, w, av, GetParam(), &child, [&go](child_peer& c) -> int {
    close(go[1]);
    for (int k = 0; k < rounds; ++k) {
      char b;
      if (read(go[0], &b, 1) != 1) return 40;
      fi_context sctx;
      if (fi_tsend(c.ep, &k, sizeof k, nullptr, c.parent, static_cast<uint64_t>(k), &sctx)) return 41;
      if (int rc = c.wait(&sctx)) return rc;
    }
    return 0;
  });
  close(go[0]);
  ASSERT_GT(pid, 0);
  std::vector<double> ms;
  for (int k = 0; k < rounds; ++k) {
    int got = -1;
    fi_context rctx;
    ASSERT_EQ(fi_trecv(w, &got, sizeof got, nullptr, FI_ADDR_UNSPEC, static_cast<uint64_t>(k), 0,
                       &rctx),
              0);
    // Let the receiver go to sleep first, then release the sender.
    fi_cq_tagged_entry e{};
    ASSERT_EQ(fi_cq_sread(wcq, &e, 1, nullptr, 1), -FI_EAGAIN);
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(write(go[1], "g", 1), 1);
    ssize_t n;
    while ((n = fi_cq_sread(wcq, &e, 1, nullptr, 5000)) == -FI_EAGAIN) {
    }
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                     .count());
    ASSERT_EQ(n, 1) << k;
    EXPECT_EQ(e.op_context, &rctx);
    EXPECT_EQ(got, k);
  }
  close(go[1]);
  EXPECT_EQ(exit_code(pid), 0);
  std::sort(ms.begin(), ms.end());
  EXPECT_LT(ms[rounds / 2], 20.0) << "median wake-up " << ms[rounds / 2] << " ms";
}

// Bursts of small messages from another process with pauses between them,
// the receiver polling all along: whatever a provider does to poll a busy
// sender cheaply (shm's hot rings), it must notice the sender again after a
// pause. (Each pause is thousands of empty polls, far more than shm keeps a
// quiet ring hot.)
TEST_P(rdm, bursts_after_pauses_arrive) {
  constexpr int bursts = 5, per_burst = 8;
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  fi_addr_t child;
  pid_t pid = spawn(*this, a, av, GetParam(), &child, [&go](child_peer& c) -> int {
    close(go[1]);
    for (int b = 0; b < bursts; ++b) {
      // Waits for the go, progressing all the while (a socket provider
      // needs the sender's progress to connect and to push the bytes).
      for (;;) {
        pollfd p{go[0], POLLIN, 0};
        if (poll(&p, 1, 0) == 1) break;
        fi_cq_tagged_entry e;
        fi_cq_read(c.cq, &e, 0);
      }
      char x;
      if (read(go[0], &x, 1) != 1) return 40;
      for (int k = 0; k < per_burst; ++k) {
        int v = b * per_burst + k;
        ssize_t rc;
        while ((rc = fi_tinject(c.ep, &v, sizeof v, c.parent, static_cast<uint64_t>(v))) ==
               -FI_EAGAIN) {
          fi_cq_tagged_entry e;
          fi_cq_read(c.cq, &e, 0);
        }
        if (rc) return 41;
      }
    }
    // Until the last burst is taken (the parent closes its end).
    for (;;) {
      pollfd p{go[0], POLLIN, 0};
      if (poll(&p, 1, 0) == 1) break;
      fi_cq_tagged_entry e;
      fi_cq_read(c.cq, &e, 0);
    }
    return 0;
  });
  close(go[0]);
  ASSERT_GT(pid, 0);
  for (int b = 0; b < bursts; ++b) {
    // A long quiet spell first: the receiver polls and finds nothing.
    fi_cq_tagged_entry e;
    for (int i = 0; i < 20000; ++i) ASSERT_EQ(fi_cq_read(cq, &e, 1), -FI_EAGAIN);
    int got[per_burst];
    fi_context rctx[per_burst];
    for (int k = 0; k < per_burst; ++k)
      ASSERT_EQ(fi_trecv(a, &got[k], sizeof got[k], nullptr, FI_ADDR_UNSPEC,
                         static_cast<uint64_t>(b * per_burst + k), 0, &rctx[k]),
                0);
    ASSERT_EQ(write(go[1], "g", 1), 1);
    for (int k = 0; k < per_burst; ++k) {
      ASSERT_EQ(wait_for(&rctx[k]), 1) << "burst " << b << " message " << k;
      EXPECT_EQ(got[k], b * per_burst + k);
    }
  }
  close(go[1]);
  EXPECT_EQ(exit_code(pid), 0);
}

// A receiver killed while a large send to it waits: the send completes in
// error, the sender does not hang.
TEST_P(rdm, killed_receiver_fails_the_send) {
  SKIP_IF_DEATH_TAKES_TOO_LONG();
  const size_t size = 4 << 20;
  if (size > info->ep_attr->max_msg_size)
    GTEST_SKIP() << size << " bytes exceed max_msg_size " << info->ep_attr->max_msg_size;
  // Under automatic progress the receiver's thread takes the whole message
  // (unexpected) before it is killed: the send rightly succeeds.
  if (GetParam().progress == FI_PROGRESS_AUTO) GTEST_SKIP() << "the peer progresses by itself";
  fi_addr_t child;
  pid_t pid = spawn(*this, a, av, GetParam(), &child, [](child_peer&) -> int {
    pause();  // never receives
    return 0;
  });
  ASSERT_GT(pid, 0);
  std::vector<char> out(size);
  fill(out, 5);
  fi_context sctx;
  ASSERT_EQ(fi_send(a, out.data(), size, nullptr, child, &sctx), 0);
  settle();
  kill(pid, SIGKILL);
  fi_cq_err_entry err{};
  ssize_t r = wait_for(&sctx, &err, 20);
  EXPECT_EQ(exit_code(pid), 128 + SIGKILL);
  ASSERT_EQ(r, -FI_EAVAIL) << "the send to a dead peer must fail, not hang";
  EXPECT_NE(err.err, 0);
  // The endpoint still works for everyone else.
  char buf[8] = {};
  fi_context rctx;
  ASSERT_EQ(fi_recv(b, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, &rctx), 0);
  ASSERT_EQ(fi_inject(a, "alive", 6, fb), 0);
  ASSERT_EQ(wait_for(&rctx), 1);
  EXPECT_STREQ(buf, "alive");
}

// A sender killed after its large send was posted and before we matched it:
// the receive that matches it completes in error.
TEST_P(rdm, killed_sender_fails_the_receive) {
  SKIP_IF_DEATH_TAKES_TOO_LONG();
  // Under automatic progress the sender's own thread may finish sending
  // before the kill lands: the receive then rightly succeeds.
  if (GetParam().progress == FI_PROGRESS_AUTO) GTEST_SKIP() << "the sender progresses by itself";
  if (GetParam().prov == std::string("tcp"))
    GTEST_SKIP() << "tcp: a send that never left the dead process is no message; a receive "
                    "posted afterwards has nothing to fail on (a receive matched to a message "
                    "cut short does fail: tests/unit/tcp/test_tcp_hostile.cpp)";
  const size_t size = 1 << 20;
  if (size > info->ep_attr->max_msg_size)
    GTEST_SKIP() << size << " bytes exceed max_msg_size " << info->ep_attr->max_msg_size;
  fi_addr_t child;
  pid_t pid = spawn(*this, a, av, GetParam(), &child, [](child_peer& c) -> int {
    std::vector<char> out(1 << 20, 'k');
    fi_context sctx;
    if (fi_send(c.ep, out.data(), out.size(), nullptr, c.parent, &sctx)) return 40;
    raise(SIGKILL);
    return 41;
  });
  ASSERT_GT(pid, 0);
  EXPECT_EQ(exit_code(pid), 128 + SIGKILL);
  std::vector<char> in(size);
  fi_context rctx;
  ASSERT_EQ(fi_recv(a, in.data(), size, nullptr, FI_ADDR_UNSPEC, &rctx), 0);
  fi_cq_err_entry err{};
  ASSERT_EQ(wait_for(&rctx, &err, 20), -FI_EAVAIL);
  EXPECT_NE(err.err, 0);
}

// FI_THREAD_SAFE: threads send on one endpoint at once (small and large
// messages), reading its CQ in turn; each thread's messages arrive in order.
TEST_P(rdm, threads_share_an_endpoint) {
  if (GetParam().threading != FI_THREAD_SAFE) GTEST_SKIP() << "FI_THREAD_SAFE only";
  constexpr int nthreads = 3, per = 1000;
  constexpr size_t big = 20000, small = 16;
  if (big > info->ep_attr->max_msg_size)
    GTEST_SKIP() << big << " bytes exceed max_msg_size " << info->ep_attr->max_msg_size;
  fid_cq* scq = open_cq(FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 1024);
  fid_cq* rcq = open_cq(FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 1024);
  // A sender and a receiver, each with its own CQ.
  fi_addr_t from, to;
  fid_ep* ends[2] = {open_ep(scq, &from), open_ep(rcq, &to)};
  ASSERT_TRUE(ends[0] && ends[1]);

  fi_context tctx[nthreads];
  std::atomic<int> completed[nthreads] = {};
  std::atomic<bool> failed{false};
  auto reap = [&] {
    fi_cq_tagged_entry e[8];
    ssize_t n = fi_cq_read(scq, e, 8);
    if (n == -FI_EAVAIL) failed = true;
    for (ssize_t k = 0; k < n; ++k)
      completed[static_cast<fi_context*>(e[k].op_context) - tctx].fetch_add(1);
  };
  auto sender = [&](int t) {
    std::vector<char> buf(big);
    int large = 0;
    for (int i = 0; i < per && !failed; ++i) {
      size_t size = i % 10 == 9 ? big : small;
      for (size_t k = 0; k < size; ++k) buf[k] = pattern(k, t * per + i);
      std::memcpy(buf.data(), &t, sizeof t);
      std::memcpy(buf.data() + 4, &i, sizeof i);
      ssize_t rc;
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while ((rc = size == small ? fi_inject(ends[0], buf.data(), size, to)
                                 : fi_send(ends[0], buf.data(), size, nullptr, to, &tctx[t])) ==
                 -FI_EAGAIN &&
             std::chrono::steady_clock::now() < deadline)
        reap();
      if (rc) {
        failed = true;
        return;
      }
      if (size == big) {  // the buffer is ours again once the send completed
        ++large;
        while (completed[t].load() < large && !failed &&
               std::chrono::steady_clock::now() < deadline)
          reap();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < nthreads; ++t) threads.emplace_back(sender, t);

  constexpr int window = 64;
  std::vector<std::vector<char>> bufs(window, std::vector<char>(big));
  fi_context rctx[window];
  for (int k = 0; k < window; ++k)
    ASSERT_EQ(fi_recv(ends[1], bufs[k].data(), big, nullptr, FI_ADDR_UNSPEC, &rctx[k]), 0);
  int next[nthreads] = {}, got = 0, bad = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (got < nthreads * per && !failed && std::chrono::steady_clock::now() < deadline) {
    fi_cq_tagged_entry e[8];
    ssize_t n = fi_cq_read(rcq, e, 8);
    if (n == -FI_EAVAIL) break;
    for (ssize_t k = 0; k < n; ++k) {
      auto slot = static_cast<fi_context*>(e[k].op_context) - rctx;
      std::vector<char>& b = bufs[slot];
      int t = -1, i = -1;
      std::memcpy(&t, b.data(), sizeof t);
      std::memcpy(&i, b.data() + 4, sizeof i);
      if (t < 0 || t >= nthreads || i != next[t]++) {
        ++bad;
      } else {
        size_t size = i % 10 == 9 ? big : small;
        if (e[k].len != size) ++bad;
        for (size_t x = 8; x < size; ++x)
          if (b[x] != pattern(x, t * per + i)) {
            ++bad;
            break;
          }
      }
      ++got;
      ASSERT_EQ(fi_recv(ends[1], b.data(), big, nullptr, FI_ADDR_UNSPEC, &rctx[slot]), 0);
    }
  }
  failed = failed || got < nthreads * per;
  for (auto& th : threads) th.join();
  EXPECT_FALSE(failed);
  EXPECT_EQ(got, nthreads * per);
  EXPECT_EQ(bad, 0);
}

// FI_THREAD_SAFE: one thread posts the receives while another reads the
// CQ (and so runs the progress that matches and completes them), the
// endpoint's receive side shared between the two; a third thread sends.
// Every message completes one receive, in order, exactly once.
TEST_P(rdm, one_thread_posts_receives_another_reads_the_cq) {
  if (GetParam().threading != FI_THREAD_SAFE) GTEST_SKIP() << "FI_THREAD_SAFE only";
  constexpr int total = 4000, window = 32;
  constexpr size_t size = 16;
  fid_cq* scq = open_cq(FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 1024);
  fid_cq* rcq = open_cq(FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 1024);
  // A sender and a receiver, each with its own CQ.
  fi_addr_t from, to;
  fid_ep* ends[2] = {open_ep(scq, &from), open_ep(rcq, &to)};
  ASSERT_TRUE(ends[0] && ends[1]);

  // Receive i goes into buffer i % window; the poster re-posts a buffer only
  // after the reader has checked what it received (freed[slot]).
  std::vector<std::array<char, size>> bufs(window);
  std::vector<fi_context> rctx(window);
  std::atomic<int> freed[window];
  for (auto& f : freed) f = 1;
  std::atomic<bool> failed{false}, done{false};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto late = [&] { return std::chrono::steady_clock::now() > deadline; };
  std::thread poster([&] {
    for (int i = 0; i < total && !failed; ++i) {
      const int slot = i % window;
      while (!freed[slot].load() && !failed && !late()) std::this_thread::yield();
      freed[slot] = 0;
      ssize_t rc;
      while ((rc = fi_recv(ends[1], bufs[slot].data(), size, nullptr, FI_ADDR_UNSPEC,
                           &rctx[slot])) == -FI_EAGAIN &&
             !late())
        std::this_thread::yield();
      if (rc) failed = true;
    }
  });
  std::thread sender([&] {
    char out[size] = {};
    for (int i = 0; i < total && !failed; ++i) {
      std::memcpy(out, &i, sizeof i);
      ssize_t rc;
      while ((rc = fi_inject(ends[0], out, size, to)) == -FI_EAGAIN && !late()) {
        fi_cq_tagged_entry e[8];
        (void)fi_cq_read(scq, e, 8);
      }
      if (rc) failed = true;
    }
    // Manual progress moves what a provider queued only when called.
    while (!done && !failed && !late()) {
      fi_cq_tagged_entry e[8];
      (void)fi_cq_read(scq, e, 8);
      std::this_thread::yield();
    }
  });
  int got = 0, bad = 0;
  while (got < total && !failed && !late()) {
    fi_cq_tagged_entry e[8];
    ssize_t n = fi_cq_read(rcq, e, 8);
    if (n == -FI_EAVAIL) {
      failed = true;
      break;
    }
    for (ssize_t k = 0; k < n; ++k) {
      const auto slot = static_cast<fi_context*>(e[k].op_context) - rctx.data();
      int i = -1;
      if (slot >= 0 && slot < window) std::memcpy(&i, bufs[slot].data(), sizeof i);
      // Messages arrive in order and receives match in the order posted.
      if (slot != got % window || i != got || e[k].len != size) ++bad;
      ++got;
      if (slot >= 0 && slot < window) freed[slot] = 1;
    }
  }
  failed = failed || got < total;
  done = true;
  poster.join();
  sender.join();
  EXPECT_FALSE(failed);
  EXPECT_EQ(got, total);
  EXPECT_EQ(bad, 0);
}

INSTANTIATE_TEST_SUITE_P(all, rdm, testing::ValuesIn(all_configs), config_name);

}  // namespace
}  // namespace conformance
