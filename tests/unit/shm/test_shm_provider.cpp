// SPDX-License-Identifier: MIT
// weft — the shm provider through its public API, across processes: 1024
// local peers sending to one endpoint, a sender that dies having sent only
// small messages (its ring is reclaimed), and a /dev/shm too small for an
// endpoint (a clear -FI_ENOSPC, never SIGBUS).
#include "prov/shm/peer.hpp"
#include "prov/shm/region.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <gtest/gtest.h>

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace weft::shm {
namespace {

// One shm endpoint with its own fabric, domain, CQ and AV.
struct node {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_ep* ep = nullptr;
  int status = 0;  // the first failing call's return value

  explicit node(size_t queue = 64) {
    fi_info* hints = fi_allocinfo();
    hints->caps = FI_TAGGED;
    hints->ep_attr->type = FI_EP_RDM;
    hints->tx_attr->size = queue;
    hints->rx_attr->size = queue;
    hints->fabric_attr->prov_name = strdup("shm");
    status = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info);
    fi_freeinfo(hints);
    if (status) return;
    if ((status = fi_fabric(info->fabric_attr, &fabric, nullptr))) return;
    if ((status = fi_domain(fabric, info, &domain, nullptr))) return;
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    ca.size = 2048;
    if ((status = fi_cq_open(domain, &ca, &cq, nullptr))) return;
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    if ((status = fi_av_open(domain, &aa, &av, nullptr))) return;
    if ((status = fi_endpoint(domain, info, &ep, nullptr))) return;
    if ((status = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV))) return;
    if ((status = fi_ep_bind(ep, &av->fid, 0))) return;
    status = fi_enable(ep);
  }
  ~node() {
    for (fid* f : {ep ? &ep->fid : nullptr, av ? &av->fid : nullptr, cq ? &cq->fid : nullptr,
                   domain ? &domain->fid : nullptr, fabric ? &fabric->fid : nullptr})
      if (f) fi_close(f);
    fi_freeinfo(info);
  }
  std::string name() {
    char buf[128] = {};
    size_t len = sizeof buf;
    fi_getname(&ep->fid, buf, &len);
    return std::string(buf, len);
  }
  fi_addr_t insert(const std::string& n) {
    fi_addr_t a = FI_ADDR_NOTAVAIL;
    fi_av_insert(av, n.data(), 1, &a, 0, nullptr);
    return a;
  }
};

// Runs `body` in a forked child; returns its wait status.
template <class F>
pid_t spawn(F&& body) {
  pid_t pid = fork();
  if (pid == 0) {
    int rc = 98;
    try {
      rc = body();
    } catch (...) {
      rc = 99;
    }
    _exit(rc);
  }
  return pid;
}

int reap(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return st;
}

// ---- 1024 local peers -------------------------------------------------------------

TEST(shm_provider, a_thousand_and_twenty_four_peers_reach_one_endpoint) {
  constexpr int procs = 8, per_proc = 128, peers = procs * per_proc;
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < 4096 && rl.rlim_max >= 4096) {
    rl.rlim_cur = 4096;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  node server(1024);
  ASSERT_EQ(server.status, 0);
  std::string sname = server.name();
  std::vector<uint64_t> bufs(peers);
  std::vector<fi_context> ctx(peers);
  for (int i = 0; i < peers; ++i)
    ASSERT_EQ(fi_trecv(server.ep, &bufs[i], sizeof bufs[i], nullptr, FI_ADDR_UNSPEC, 0,
                       ~uint64_t{0}, &ctx[i]),
              0);
  int go[2];  // children stay (their rings claimed) until this closes
  ASSERT_EQ(pipe(go), 0);
  std::vector<pid_t> kids;
  for (int p = 0; p < procs; ++p) {
    kids.push_back(spawn([&, p]() -> int {
      close(go[1]);
      std::vector<std::unique_ptr<node>> mine;
      for (int k = 0; k < per_proc; ++k) {
        mine.push_back(std::make_unique<node>(4));
        if (mine.back()->status) return 10;
      }
      for (int k = 0; k < per_proc; ++k) {
        node& n = *mine[k];
        fi_addr_t to = n.insert(sname);
        if (to == FI_ADDR_NOTAVAIL) return 11;
        uint64_t id = static_cast<uint64_t>(p * per_proc + k);
        ssize_t r;
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        do {
          r = fi_tinject(n.ep, &id, sizeof id, to, id);
          if (r == -FI_EAGAIN) fi_cq_read(n.cq, nullptr, 0);
        } while (r == -FI_EAGAIN && std::chrono::steady_clock::now() < deadline);
        if (r) return 12;
      }
      // Stay until the server has everything: 1024 live peers at once.
      char c;
      return read(go[0], &c, 1) == 0 ? 0 : 13;
    }));
  }
  close(go[0]);
  std::set<uint64_t> seen;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (seen.size() < static_cast<size_t>(peers) && std::chrono::steady_clock::now() < deadline) {
    fi_cq_tagged_entry e[64];
    ssize_t n = fi_cq_read(server.cq, e, 64);
    for (ssize_t i = 0; i < n; ++i) {
      auto* buf = static_cast<uint64_t*>(e[i].buf);
      EXPECT_EQ(*buf, e[i].tag);
      EXPECT_TRUE(seen.insert(e[i].tag).second) << "tag " << e[i].tag << " twice";
    }
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(peers));
  close(go[1]);
  for (pid_t k : kids) {
    int st = reap(k);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  }
}

// ---- a quiet sender that dies -------------------------------------------------------

TEST(shm_provider, the_ring_of_a_sender_that_died_quietly_is_reclaimed) {
  node server;
  ASSERT_EQ(server.status, 0);
  std::string sname = server.name();
  int pfd[2];
  ASSERT_EQ(pipe(pfd), 0);
  pid_t kid = spawn([&]() -> int {
    node n(4);
    if (n.status) return 10;
    fi_addr_t to = n.insert(sname);
    uint64_t v = 42;
    if (fi_tinject(n.ep, &v, sizeof v, to, 1)) return 11;
    char c = 1;
    if (write(pfd[1], &c, 1) != 1) return 12;
    pause();  // killed here, without closing anything
    return 0;
  });
  char c;
  ASSERT_EQ(read(pfd[0], &c, 1), 1);
  kill(kid, SIGKILL);
  reap(kid);
  close(pfd[0]);
  close(pfd[1]);
  // Its message is still delivered.
  uint64_t got = 0;
  fi_context ctx;
  ASSERT_EQ(fi_trecv(server.ep, &got, sizeof got, nullptr, FI_ADDR_UNSPEC, 1, 0, &ctx), 0);
  fi_cq_tagged_entry e{};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (fi_cq_read(server.cq, &e, 1) != 1 && std::chrono::steady_clock::now() < deadline) {
  }
  EXPECT_EQ(got, 42u);
  // Within a sweep period (1 s) of progress its ring is free again.
  region view;
  std::string file = sname.substr(std::strlen("fi_shm://"));
  file.resize(std::strlen(file.c_str()));
  ASSERT_EQ(region::attach("/dev/shm", file, view, nullptr), errc::ok);
  uint32_t hwm = view.claim_hwm();
  ASSERT_GE(hwm, 1u);
  auto claimed = [&] {
    int n = 0;
    for (uint32_t r = 0; r < hwm; ++r) n += view.claim_state(r) != proto::claim_free;
    return n;
  };
  EXPECT_EQ(claimed(), 1);
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (claimed() != 0 && std::chrono::steady_clock::now() < deadline)
    fi_cq_read(server.cq, &e, 0);
  EXPECT_EQ(claimed(), 0) << "the dead sender's ring is still claimed";
}

// ---- a tiny /dev/shm ------------------------------------------------------------------

TEST(shm_provider, an_endpoint_on_a_tiny_dev_shm_fails_with_enospc) {
  enum { ok = 0, skip = 20, not_nospc = 21 };
  int pfd[2];
  ASSERT_EQ(pipe(pfd), 0);
  pid_t kid = spawn([&]() -> int {
    if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=64k,mode=1777") != 0)
      return skip;
    node n;
    // fi_endpoint refuses: the region needs more than 64 KiB of headroom.
    return n.status == -FI_ENOSPC ? ok : not_nospc;
  });
  close(pfd[0]);
  close(pfd[1]);
  int st = reap(kid);
  ASSERT_TRUE(WIFEXITED(st)) << "the child died of signal " << WTERMSIG(st);
  if (WEXITSTATUS(st) == skip) GTEST_SKIP() << "no private mount namespace";
  EXPECT_EQ(WEXITSTATUS(st), ok);
}

}  // namespace
}  // namespace weft::shm
