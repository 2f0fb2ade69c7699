// SPDX-License-Identifier: MIT
// weft — named (shared) address vectors between processes (fi_av(3) `name`,
// FI_READ; FI_SHARED_AV). Process 0 creates a named AV and inserts the
// addresses of every process's endpoint, its own first and the others' after
// they have opened the AV read-only; every process then sends to every other
// by the fi_addr values process 0 assigned, and checks that each message's
// source (FI_SOURCE) is the sender's fi_addr. Also: read-only AVs refuse
// changes, one writer at a time, and a killed writer's file does not block a
// new one. Processes are forked before anything of libfabric is open here.
// Only providers whose table (provider_caps.hpp) lacks FI_SHARED_AV skip.
#include "provider_caps.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace conformance {
namespace {

constexpr uint64_t shared_av_caps = FI_MSG | FI_SOURCE | FI_SHARED_AV;
constexpr int children = 3;
constexpr int procs = children + 1;

// One process's objects; closed in reverse order.
struct node {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_ep* ep = nullptr;
  char name[128] = {};

  // 0, 1 (the provider lacks FI_SHARED_AV), or a negative error.
  int open(const config& c) {
    fi_info* hints = hints_for(c, shared_av_caps);
    int rc = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info);
    fi_freeinfo(hints);
    if (rc == -FI_ENODATA) return 1;
    if (rc) return rc;
    if ((rc = fi_fabric(info->fabric_attr, &fabric, nullptr))) return rc;
    if ((rc = fi_domain(fabric, info, &domain, nullptr))) return rc;
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_DATA;
    ca.size = 64;
    return fi_cq_open(domain, &ca, &cq, nullptr);
  }
  int open_av(const char* av_name, uint64_t flags, fid_av** out) {
    fi_av_attr a{};
    a.name = av_name;
    a.flags = flags;
    return fi_av_open(domain, &a, out, nullptr);
  }
  // The endpoint, bound to the AV and enabled, and its name.
  int open_ep() {
    int rc;
    if ((rc = fi_endpoint(domain, info, &ep, nullptr)) ||
        (rc = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV)) ||
        (rc = fi_ep_bind(ep, &av->fid, 0)) || (rc = fi_enable(ep)))
      return rc;
    size_t len = sizeof name;
    return fi_getname(&ep->fid, name, &len);
  }
  ~node() {
    for (fid* f : {ep ? &ep->fid : nullptr, av ? &av->fid : nullptr, cq ? &cq->fid : nullptr,
                   domain ? &domain->fid : nullptr, fabric ? &fabric->fid : nullptr})
      if (f) fi_close(f);
    fi_freeinfo(info);
  }
};

struct message {
  uint32_t from;  // the sender's place in the table
};

// Posts a receive per peer, sends our index to every other process by the
// table's fi_addr, and checks every message's source against the table.
// Returns "" or what went wrong.
std::string exchange(node& n, uint32_t me, const fi_addr_t* table) {
  message in[procs], out{me};
  fi_context2 rx[procs], tx[procs];
  for (int k = 0; k < procs - 1; ++k)
    if (fi_recv(n.ep, &in[k], sizeof in[k], nullptr, FI_ADDR_UNSPEC, &rx[k]))
      return "fi_recv failed";
  int sent = 0, received = 0, next = 0;
  bool seen[procs] = {};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  while (sent < procs - 1 || received < procs - 1) {
    if (std::chrono::steady_clock::now() > deadline) return "timed out";
    if (next < procs && next == static_cast<int>(me)) ++next;
    if (next < procs) {
      ssize_t r = fi_send(n.ep, &out, sizeof out, nullptr, table[next], &tx[next]);
      if (r == 0) ++next;
      else if (r != -FI_EAGAIN) return "fi_send: " + std::string(fi_strerror(static_cast<int>(-r)));
    }
    fi_cq_data_entry e;
    fi_addr_t src = FI_ADDR_UNSPEC;
    ssize_t r = fi_cq_readfrom(n.cq, &e, 1, &src);
    if (r == -FI_EAGAIN) continue;
    if (r != 1) return "fi_cq_readfrom: " + std::string(fi_strerror(static_cast<int>(-r)));
    if (e.flags & FI_SEND) {
      ++sent;
      continue;
    }
    auto* m = &in[static_cast<fi_context2*>(e.op_context) - rx];
    if (m->from >= procs || seen[m->from]) return "unexpected message";
    seen[m->from] = true;
    if (src != table[m->from])
      return "message from " + std::to_string(m->from) + " has source " + std::to_string(src) +
             ", not " + std::to_string(table[m->from]);
    ++received;
  }
  return {};
}

bool read_all(int fd, void* buf, size_t len) {
  auto* p = static_cast<char*>(buf);
  while (len) {
    ssize_t n = ::read(fd, p, len);
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

bool write_all(int fd, const void* buf, size_t len) {
  return ::write(fd, buf, len) == static_cast<ssize_t>(len);
}

int reap(pid_t pid) {
  int st = 0;
  if (::waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

std::string av_name(const config& c, const char* what) {
  return "conf-" + std::to_string(::getpid()) + "-" + c.name() + "-" + what;
}

// The child's side: opens the AV read-only once it exists, checks what a
// reader may not do, sends its name up, gets the table, exchanges.
int child_main(const config& c, const std::string& name, uint32_t me, int up, int down) {
  auto fail = [&](const char* what, int rc) {
    std::fprintf(stderr, "shared AV child %u: %s (%d)\n", me, what, rc);
    return 1;
  };
  char byte;
  if (!read_all(down, &byte, 1)) return fail("parent gone", 0);  // the AV exists now
  node n;
  int rc = n.open(c);
  if (rc) return fail("open", rc);
  if ((rc = n.open_av(name.c_str(), FI_READ, &n.av))) return fail("FI_READ open", rc);
  // One writer at a time: process 0 is it.
  fid_av* second = nullptr;
  if ((rc = n.open_av(name.c_str(), 0, &second)) != -FI_EBUSY) return fail("second writer", rc);
  if ((rc = n.open_ep())) return fail("endpoint", rc);
  fi_addr_t x = 0;
  if ((rc = fi_av_insert(n.av, n.name, 1, &x, 0, nullptr)) != -FI_EPERM)
    return fail("insert into a read-only AV", rc);
  if ((rc = fi_av_remove(n.av, &x, 1, 0)) != -FI_EPERM) return fail("remove", rc);
  char rec[sizeof n.name + sizeof me];
  std::memcpy(rec, &me, sizeof me);
  std::memcpy(rec + sizeof me, n.name, sizeof n.name);
  if (!write_all(up, rec, sizeof rec)) return fail("write", 0);
  fi_addr_t table[procs];
  if (!read_all(down, table, sizeof table)) return fail("read table", 0);
  // Inserted after we opened: lookups see the writer's entries.
  char got[128];
  size_t len = sizeof got;
  if ((rc = fi_av_lookup(n.av, table[me], got, &len)) || std::strcmp(got, n.name) != 0)
    return fail("lookup of our own fi_addr", rc);
  std::string err = exchange(n, me, table);
  if (!err.empty()) return fail(err.c_str(), 0);
  return 0;
}

class shared_av : public testing::TestWithParam<config> {};

TEST_P(shared_av, processes_share_fi_addrs) {
  const config& c = GetParam();
  std::string name = av_name(c, "share");
  int up[2];
  ASSERT_EQ(::pipe(up), 0);
  int down[children][2] = {};
  pid_t pids[children] = {};
  for (int i = 0; i < children; ++i) {
    ASSERT_EQ(::pipe(down[i]), 0);
    pids[i] = ::fork();
    ASSERT_GE(pids[i], 0);
    if (pids[i] == 0) ::_exit(child_main(c, name, static_cast<uint32_t>(i + 1), up[1], down[i][0]));
  }
  // However the test ends, no child is left behind: those blocked on their
  // pipe see EOF, the rest are killed.
  struct cleanup {
    int (&down)[children][2];
    pid_t (&pids)[children];
    int (&up)[2];
    ~cleanup() {
      for (auto& d : down) ::close(d[1]);
      for (pid_t& p : pids)
        if (p > 0) {
          ::kill(p, SIGKILL);
          reap(p);
        }
      ::close(up[0]);
      ::close(up[1]);
    }
  } guard{down, pids, up};
  node n;
  int rc = n.open(c);
  if (rc == 1) SKIP_OR_FAIL_LACKING(shared_av_caps, nullptr);
  ASSERT_EQ(rc, 0);
  fi_av_attr attr{};
  attr.name = name.c_str();
  ASSERT_EQ(fi_av_open(n.domain, &attr, &n.av, nullptr), 0);
  EXPECT_NE(attr.map_addr, nullptr);
  ASSERT_EQ(n.open_ep(), 0);
  fi_addr_t table[procs];
  ASSERT_EQ(fi_av_insert(n.av, n.name, 1, &table[0], 0, nullptr), 1);
  char byte = 1;
  for (auto& d : down) ASSERT_TRUE(write_all(d[1], &byte, 1));

  // The children's names, inserted after they opened the AV read-only.
  for (int i = 0; i < children; ++i) {
    uint32_t who;
    char rec[sizeof n.name + sizeof who];
    ASSERT_TRUE(read_all(up[0], rec, sizeof rec)) << "a child failed before sending its name";
    std::memcpy(&who, rec, sizeof who);
    ASSERT_TRUE(who >= 1 && who < procs);
    ASSERT_EQ(fi_av_insert(n.av, rec + sizeof who, 1, &table[who], 0, nullptr), 1);
  }
  for (auto& d : down) ASSERT_TRUE(write_all(d[1], table, sizeof table));
  EXPECT_EQ(exchange(n, 0, table), "");
  for (int i = 0; i < children; ++i) {
    EXPECT_EQ(reap(pids[i]), 0) << "child " << i + 1;
    pids[i] = 0;
  }
}

TEST_P(shared_av, a_killed_writers_file_is_replaced) {
  const config& c = GetParam();
  std::string name = av_name(c, "stale");
  int up[2];
  ASSERT_EQ(::pipe(up), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    node n;
    fi_addr_t a;
    char ok = n.open(c) == 0 && n.open_av(name.c_str(), 0, &n.av) == 0 && n.open_ep() == 0 &&
              fi_av_insert(n.av, n.name, 1, &a, 0, nullptr) == 1;
    if (!write_all(up[1], &ok, 1)) ::_exit(1);
    ::pause();  // until killed: the AV is never closed
    ::_exit(0);
  }
  char ok = 0;
  bool got = read_all(up[0], &ok, 1);
  ::kill(pid, SIGKILL);
  EXPECT_EQ(reap(pid), 100 + SIGKILL);
  ::close(up[0]);
  ::close(up[1]);
  node n;
  int rc = n.open(c);
  if (rc == 1) SKIP_OR_FAIL_LACKING(shared_av_caps, nullptr);
  ASSERT_TRUE(got && ok) << "the child could not create the AV";
  ASSERT_EQ(rc, 0);
  // A reader still finds the dead writer's AV; a writer replaces it.
  fid_av* old = nullptr;
  ASSERT_EQ(n.open_av(name.c_str(), FI_READ, &old), 0);
  ASSERT_EQ(n.open_av(name.c_str(), 0, &n.av), 0);
  char addr[128];
  size_t len = sizeof addr;
  EXPECT_EQ(fi_av_lookup(old, 0, addr, &len), 0);
  len = sizeof addr;
  EXPECT_EQ(fi_av_lookup(n.av, 0, addr, &len), -FI_EINVAL);  // a fresh, empty AV
  EXPECT_EQ(fi_close(&old->fid), 0);
  // And it works: a message to ourselves names us as its source.
  ASSERT_EQ(n.open_ep(), 0);
  fi_addr_t self;
  ASSERT_EQ(fi_av_insert(n.av, n.name, 1, &self, 0, nullptr), 1);
  EXPECT_EQ(self, 0u);
  char buf[4];
  fi_context2 rx, tx;
  ASSERT_EQ(fi_recv(n.ep, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, &rx), 0);
  ASSERT_EQ(fi_send(n.ep, "hi", 3, nullptr, self, &tx), 0);
  int recvs = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  while (recvs == 0 && std::chrono::steady_clock::now() < deadline) {
    fi_cq_data_entry e;
    fi_addr_t src = FI_ADDR_UNSPEC;
    if (fi_cq_readfrom(n.cq, &e, 1, &src) == 1 && (e.flags & FI_RECV)) {
      EXPECT_EQ(src, self);
      ++recvs;
    }
  }
  EXPECT_EQ(recvs, 1);
}

const config shm_configs[] = {
    {"shm", FI_EP_RDM, FI_THREAD_DOMAIN},
    {"shm", FI_EP_RDM, FI_THREAD_SAFE},
};
INSTANTIATE_TEST_SUITE_P(all, shared_av, testing::ValuesIn(shm_configs), config_name);

}  // namespace
}  // namespace conformance
