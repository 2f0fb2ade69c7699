// SPDX-License-Identifier: MIT
// weft — shm across processes: a million messages through a region, stale
// regions of killed processes, liveness (pidfd and /proc, pid reuse), the
// single-copy probe, a tiny /dev/shm in a private mount namespace, and no
// signal handler ever installed.
#include "prov/shm/peer.hpp"
#include "prov/shm/region.hpp"

#include <gtest/gtest.h>

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

namespace weft::shm {
namespace {

const std::string shm_dir = "/dev/shm";

std::string region_prefix(pid_t pid) {
  std::string s = region_name(static_cast<uint32_t>(geteuid()), pid_namespace_id(), pid, 0);
  s.resize(s.size() - 1);
  return s;
}

// Removes the region files of this process and of the children it was told
// about, when the test ends, whatever happened in it.
struct shm_files_guard {
  std::vector<pid_t> pids{getpid()};
  void add(pid_t p) { pids.push_back(p); }
  ~shm_files_guard() {
    DIR* d = opendir(shm_dir.c_str());
    if (!d) return;
    while (dirent* e = readdir(d))
      for (pid_t p : pids) {
        std::string prefix = region_prefix(p);
        if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0)
          unlink((shm_dir + "/" + e->d_name).c_str());
      }
    closedir(d);
  }
};

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// A forked child running `body` (its return value is the exit code). Killed
// and reaped at destruction if still there.
class child_process {
 public:
  template <class F>
  explicit child_process(F&& body) {
    pid_ = fork();
    if (pid_ == 0) {
      int rc = 98;
      try {
        rc = body();
      } catch (...) {
        rc = 99;
      }
      _exit(rc);
    }
  }
  child_process(const child_process&) = delete;
  ~child_process() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  void kill(int sig) { ::kill(pid_, sig); }
  // The wait status.
  int wait() {
    int st = 0;
    while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    return st;
  }
  // Waits for the child to exit but leaves it a zombie.
  void wait_exit_keep_zombie() {
    siginfo_t si{};
    while (waitid(P_PID, static_cast<id_t>(pid_), &si, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
    }
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

struct pipe_pair {
  int fd[2] = {-1, -1};
  pipe_pair() { EXPECT_EQ(pipe(fd), 0); }
  ~pipe_pair() {
    for (int f : fd)
      if (f >= 0) close(f);
  }
  void put(const std::string& s) {
    uint32_t n = static_cast<uint32_t>(s.size());
    (void)!write(fd[1], &n, sizeof n);
    (void)!write(fd[1], s.data(), n);
  }
  std::string get() {
    uint32_t n = 0;
    if (read(fd[0], &n, sizeof n) != sizeof n) return {};
    std::string s(n, '\0');
    size_t got = 0;
    while (got < n) {
      ssize_t r = read(fd[0], s.data() + got, n - got);
      if (r <= 0) return {};
      got += static_cast<size_t>(r);
    }
    return s;
  }
};

// Spinning on a 2-core machine shared with other work: yield now and then,
// so that the other side gets a core.
void backoff(unsigned& spins) {
  if (++spins % 256 == 0) sched_yield();
  else cpu_relax();
}

uint32_t next_index() {
  static uint32_t i = 800000;
  return i++;
}

region_params params(uint32_t nrings = 128, uint32_t slots = 64) {
  region_params p;
  p.endpoint_index = next_index();
  p.nrings = nrings;
  p.ring_slots = slots;
  p.reclaim_stale = false;
  return p;
}

uint64_t checksum(const unsigned char* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// ---- a million messages -----------------------------------------------------------

struct stream_case {
  uint32_t ring_slots;
  size_t max_size;
};

class shm_two_processes : public testing::TestWithParam<stream_case> {};

// A million in the regular build. Under a sanitizer every ring operation
// costs several times more: 8-slot rings then took over 60 s beside other
// tests and timed out with three tests to a core. A fifth of the count
// still goes round an 8-slot ring 25,000 times.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr uint64_t stream_messages = 200'000;
#else
constexpr uint64_t stream_messages = 1'000'000;
#endif

TEST_P(shm_two_processes, pass_a_million_messages_with_checksums) {
  constexpr uint64_t messages = stream_messages;
  const stream_case c = GetParam();
  shm_files_guard guard;
  region owner;
  ASSERT_EQ(region::create(params(128, c.ring_slots), owner), errc::ok);
  std::string name = owner.name();

  child_process child([&] {
    region peer;
    if (region::attach(shm_dir, name, peer) != errc::ok) return 1;
    uint32_t ring;
    if (peer.claim(sender_identity::self(1), ring) != errc::ok) return 2;
    auto p = peer.producer(ring);
    std::vector<unsigned char> buf(c.max_size);
    uint64_t x = 99;
    unsigned spins = 0;
    for (uint64_t seq = 0; seq < messages; ++seq) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      size_t size = (x >> 20) % 4 == 0 ? (x >> 33) % c.max_size : (x >> 33) % 48;
      for (size_t i = 0; i < size; ++i) buf[i] = static_cast<unsigned char>(seq + i * 13);
      msg_fields f{3, 0, seq, checksum(buf.data(), size)};
      errc e;
      while ((e = p.try_send(f, buf.data(), size)) == errc::again) backoff(spins);
      if (e != errc::ok) return 3;
      peer.ring_doorbell(ring);
    }
    peer.close_ring(ring);
    return 0;
  });
  guard.add(child.pid());

  std::vector<ring_consumer> cons(owner.nrings());
  doorbell_set pending;
  std::vector<unsigned char> out(c.max_size);
  uint64_t seq = 0, bad = 0;
  bool closed = false;
  // Within ctest's 120 s: a stall fails here, with the count, not by timeout.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(100);
  unsigned spins = 0;
  while (!closed && std::chrono::steady_clock::now() < deadline) {
    if (!owner.collect_doorbells(pending)) backoff(spins);
    pending.for_each([&](uint32_t r) {
      uint32_t state = owner.claim_state(r);
      if (!cons[r].valid() && state != proto::claim_free) cons[r] = owner.consumer(r);
      msg_view v;
      while (cons[r].peek(v) == errc::ok) {
        size_t n = v.copy_to(out.data(), out.size());
        if (v.fields.tag != seq || v.fields.data != checksum(out.data(), n)) ++bad;
        cons[r].release(v);
        ++seq;
      }
      if (state == proto::claim_closed && cons[r].empty()) {
        cons[r] = ring_consumer();
        EXPECT_EQ(owner.reclaim_ring(r), errc::ok);
        closed = true;
      }
      pending.clear(r);
    });
  }
  int st = child.wait();
  ASSERT_TRUE(WIFEXITED(st)) << "child died of signal " << WTERMSIG(st);
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_EQ(seq, messages);
  EXPECT_EQ(bad, 0u);
  EXPECT_TRUE(closed);
}

INSTANTIATE_TEST_SUITE_P(rings, shm_two_processes,
                         testing::Values(stream_case{64, 1000}, stream_case{8, 400}),
                         [](const auto& info) {
                           return "slots_" + std::to_string(info.param.ring_slots);
                         });

// ---- stale regions -----------------------------------------------------------------

TEST(shm_stale, region_of_a_killed_process_is_reclaimed) {
  shm_files_guard guard;
  pipe_pair pp;
  child_process child([&] {
    region r;
    errc e = region::create(params(), r);
    pp.put(e == errc::ok ? r.path() : std::string());
    pause();
    return 0;
  });
  guard.add(child.pid());
  std::string path = pp.get();
  ASSERT_FALSE(path.empty());
  ASSERT_TRUE(exists(path));

  reclaim_stale_regions(shm_dir);
  EXPECT_TRUE(exists(path)) << "the region of a live process was removed";

  child.kill(SIGKILL);
  child.wait_exit_keep_zombie();  // dead but not reaped: still stale
  // (Not the count: a test process running in parallel may reclaim it first.)
  reclaim_stale_regions(shm_dir);
  EXPECT_FALSE(exists(path));
  child.wait();
}

TEST(shm_stale, a_reaped_owner_region_is_reclaimed_by_the_next_create) {
  shm_files_guard guard;
  pipe_pair pp;
  child_process child([&] {
    region r;
    pp.put(region::create(params(), r) == errc::ok ? r.path() : std::string());
    pause();
    return 0;
  });
  guard.add(child.pid());
  std::string path = pp.get();
  ASSERT_TRUE(exists(path));
  child.kill(SIGKILL);
  child.wait();
  auto p = params();
  p.reclaim_stale = true;
  region r;
  ASSERT_EQ(region::create(p, r), errc::ok);
  EXPECT_FALSE(exists(path));
  EXPECT_TRUE(exists(r.path()));
}

// A live pid whose start time differs from the header's is another process.
TEST(shm_stale, pid_reuse_is_recognised_by_the_start_time) {
  shm_files_guard guard;
  auto p = params();
  region old;
  ASSERT_EQ(region::create(p, old), errc::ok);
  auto& h = const_cast<proto::region_header&>(old.header());
  h.owner_start_time += 1;  // as if an earlier process with our pid made it
  reclaim_stale_regions(shm_dir);
  EXPECT_FALSE(exists(old.path()));

  // The same through create: a stale file under our exact name is replaced,
  // and the old handle's cleanup leaves the new file alone.
  region older;
  auto q = params();
  ASSERT_EQ(region::create(q, older), errc::ok);
  const_cast<proto::region_header&>(older.header()).owner_start_time += 1;
  region fresh;
  ASSERT_EQ(region::create(q, fresh), errc::ok);
  EXPECT_EQ(fresh.path(), older.path());
  older = region();
  EXPECT_TRUE(exists(fresh.path()));
  region peer;
  EXPECT_EQ(region::attach(shm_dir, fresh.name(), peer), errc::ok);
}

// ---- liveness ---------------------------------------------------------------------------

class shm_liveness : public testing::TestWithParam<liveness_mode> {};

TEST_P(shm_liveness, sees_a_killed_child_die) {
  child_process child([] {
    pause();
    return 0;
  });
  uint64_t start = 0;
  for (int i = 0; i < 1000 && !start; ++i) start = process_start_time(child.pid());
  ASSERT_NE(start, 0u);
  peer_liveness peer(child.pid(), start, 8, GetParam());
  EXPECT_EQ(peer.uses_pidfd(), GetParam() == liveness_mode::automatic);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(peer.alive());
  child.kill(SIGKILL);
  child.wait_exit_keep_zombie();  // a zombie is dead
  bool alive = true;
  for (int i = 0; i < 8 && alive; ++i) alive = peer.alive();
  EXPECT_FALSE(alive) << "no check within the interval";
  EXPECT_FALSE(peer.alive());
  EXPECT_FALSE(peer.check_now());
  child.wait();
  EXPECT_FALSE(peer.check_now());
}

TEST_P(shm_liveness, checks_only_every_interval_or_when_suspected) {
  child_process child([] {
    pause();
    return 0;
  });
  uint64_t start = 0;
  for (int i = 0; i < 1000 && !start; ++i) start = process_start_time(child.pid());
  peer_liveness peer(child.pid(), start, 1u << 30, GetParam());
  ASSERT_TRUE(peer.alive());
  child.kill(SIGKILL);
  child.wait();
  EXPECT_TRUE(peer.alive()) << "the cached answer, no system call";
  peer.suspect();
  EXPECT_FALSE(peer.alive());
}

TEST_P(shm_liveness, a_reused_pid_is_not_the_peer) {
  child_process child([] {
    pause();
    return 0;
  });
  uint64_t start = 0;
  for (int i = 0; i < 1000 && !start; ++i) start = process_start_time(child.pid());
  ASSERT_NE(start, 0u);
  // The pid is alive, but the recorded start time is another process's.
  peer_liveness wrong(child.pid(), start + 1, 8, GetParam());
  EXPECT_FALSE(wrong.alive());
  EXPECT_FALSE(wrong.check_now());
  peer_liveness right(child.pid(), start, 8, GetParam());
  EXPECT_TRUE(right.check_now());
  peer_liveness nobody;
  EXPECT_FALSE(nobody.alive());
  child.kill(SIGKILL);
  child.wait();
  peer_liveness gone(child.pid(), start, 8, GetParam());  // reaped: no such process
  EXPECT_FALSE(gone.alive());
}

INSTANTIATE_TEST_SUITE_P(modes, shm_liveness,
                         testing::Values(liveness_mode::automatic, liveness_mode::proc),
                         [](const auto& info) {
                           return info.param == liveness_mode::automatic ? "pidfd" : "proc";
                         });

TEST(shm_liveness_proc, reads_stat_fields_after_the_command_name) {
  proc_status me = read_proc_status(getpid());
  EXPECT_TRUE(me.exists);
  EXPECT_FALSE(me.zombie);
  EXPECT_EQ(me.start_time, process_start_time(getpid()));
  EXPECT_FALSE(read_proc_status(0).exists);
  EXPECT_FALSE(read_proc_status(-1).exists);
}

// ---- single copy --------------------------------------------------------------------------

volatile int cma_target = 1;

TEST(shm_cma, probe_and_cache) {
  child_process child([] {
    cma_target = 7;
    pause();
    return 0;
  });
  cma_cache cache;
  if (geteuid() == 0) {
    EXPECT_EQ(cma_probe(child.pid()), cma_status::available);
    // A real read at a valid address works the same way.
    EXPECT_EQ(cma_probe(child.pid(), const_cast<int*>(&cma_target)), cma_status::available);
    EXPECT_TRUE(cache.cma_available(child.pid()));
    EXPECT_TRUE(cache.cma_available(child.pid()));
    EXPECT_EQ(cache.probes(), 1u) << "the answer is remembered per peer";
    cache.forget(child.pid());
    EXPECT_TRUE(cache.cma_available(child.pid()));
    EXPECT_EQ(cache.probes(), 2u);
  }
  pid_t pid = child.pid();
  child.kill(SIGKILL);
  child.wait();
  EXPECT_EQ(cma_probe(pid), cma_status::gone);
  uint64_t before = cache.probes();
  cache.forget(pid);
  EXPECT_FALSE(cache.cma_available(pid));
  EXPECT_FALSE(cache.cma_available(pid));
  EXPECT_EQ(cache.probes(), before + 2) << "a gone peer is not remembered";
}

TEST(shm_cma, refused_without_ptrace_rights) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to drop to another uid";
  pid_t parent = getpid();
  child_process child([parent] {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) return 2;
    return cma_probe(parent) == cma_status::denied ? 0 : 1;
  });
  int st = child.wait();
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "an unprivileged process could read root's memory";
}

// ---- a tiny /dev/shm -----------------------------------------------------------------------

// Exit codes of the child below.
enum tiny_result : int {
  tiny_ok = 0,
  tiny_skip = 77,
  tiny_create_not_nospc = 10,
  tiny_file_left = 11,
  tiny_small_create_failed = 12,
  tiny_no_claim = 13,
  tiny_claim_not_nospc = 14,
  tiny_fill_failed = 15,
  tiny_bounce_not_nospc = 16,
};

TEST(shm_tiny_dev_shm, creation_and_claims_fail_cleanly) {
  pipe_pair pp;
  child_process child([&]() -> int {
    auto skip = [&](const char* what) {
      pp.put(std::string(what) + ": " + std::strerror(errno));
      return tiny_skip;
    };
    if (unshare(CLONE_NEWNS) != 0) return skip("unshare(CLONE_NEWNS)");
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
      return skip("making / private");
    if (mount("tmpfs", shm_dir.c_str(), "tmpfs", 0, "size=64k,mode=1777") != 0)
      return skip("mounting a 64 KiB tmpfs on /dev/shm");
    pp.put("");
    // The default region wants its fixed part plus 1 MiB of headroom.
    region r;
    if (region::create(params(1024, 128), r) != errc::nospc) return tiny_create_not_nospc;
    DIR* d = opendir(shm_dir.c_str());
    int files = 0;
    while (dirent* e = readdir(d)) files += e->d_name[0] != '.';
    closedir(d);
    if (files) return tiny_file_left;
    // Without headroom it fits; then claims run out, and each claimed ring is
    // fully usable (allocated, no SIGBUS) until they do.
    auto p = params(64, 128);
    p.headroom_bytes = 0;
    if (region::create(p, r) != errc::ok) return tiny_small_create_failed;
    uint32_t ring;
    int claimed = 0;
    errc e;
    std::vector<unsigned char> big(4064, 0x5a);
    while ((e = r.claim(sender_identity::self(static_cast<uint32_t>(claimed)), ring)) == errc::ok) {
      ++claimed;
      auto prod = r.producer(ring);
      if (prod.try_send({}, big.data(), big.size()) != errc::ok ||
          prod.try_send({}, big.data(), big.size()) != errc::ok ||
          prod.try_send({}, nullptr, 0) != errc::again)
        return tiny_fill_failed;
    }
    if (claimed == 0) return tiny_no_claim;
    if (e != errc::nospc) return tiny_claim_not_nospc;
    if (r.reserve_bounce(0) != errc::nospc) return tiny_bounce_not_nospc;
    return tiny_ok;
  });
  std::string reason = pp.get();
  int st = child.wait();
  ASSERT_TRUE(WIFEXITED(st)) << "the child died of signal " << WTERMSIG(st)
                             << (WTERMSIG(st) == SIGBUS ? " (SIGBUS: a page was not allocated)" : "");
  if (WEXITSTATUS(st) == tiny_skip) GTEST_SKIP() << "no private mount namespace: " << reason;
  EXPECT_EQ(WEXITSTATUS(st), tiny_ok);
}

// ---- no signal handlers -------------------------------------------------------------------

TEST(shm_signals, no_handler_is_ever_installed) {
  struct sigaction before[NSIG] = {}, after[NSIG] = {};
  bool queried[NSIG] = {};  // glibc keeps a few real-time signals to itself
  for (int s = 1; s < NSIG; ++s) queried[s] = sigaction(s, nullptr, &before[s]) == 0;
  {
    shm_files_guard guard;
    region owner, peer;
    ASSERT_EQ(region::create(params(), owner), errc::ok);
    ASSERT_EQ(region::attach(shm_dir, owner.name(), peer), errc::ok);
    uint32_t ring;
    ASSERT_EQ(peer.claim(sender_identity::self(0), ring), errc::ok);
    ASSERT_EQ(peer.reserve_bounce(ring), errc::ok);
    child_process child([] {
      pause();
      return 0;
    });
    peer_liveness l(child.pid(), process_start_time(child.pid()));
    l.check_now();
    cma_cache c;
    c.cma_available(child.pid());
    reclaim_stale_regions(shm_dir);
  }
  for (int s = 1; s < NSIG; ++s) {
    if (!queried[s]) continue;
    sigaction(s, nullptr, &after[s]);
    EXPECT_EQ(before[s].sa_handler, after[s].sa_handler) << "signal " << s;
    EXPECT_EQ(before[s].sa_flags, after[s].sa_flags) << "signal " << s;
  }
}

}  // namespace
}  // namespace weft::shm
