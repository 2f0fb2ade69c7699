// SPDX-License-Identifier: MIT
// weft — shm regions in one process: names, modes, the header, sparse
// allocation, attach checks, claims (1024 of them), doorbells, reclaim.
#include "prov/shm/region.hpp"

#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace weft::shm {
namespace {

const std::string shm_dir = "/dev/shm";

// Removes every region file of this process when the test ends, whatever
// happened in it.
struct shm_files_guard {
  ~shm_files_guard() {
    std::string prefix = region_name(static_cast<uint32_t>(geteuid()), pid_namespace_id(),
                                     getpid(), 0);
    prefix.resize(prefix.size() - 1);  // drop the index "0"
    if (DIR* d = opendir(shm_dir.c_str())) {
      while (dirent* e = readdir(d))
        if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0)
          unlink((shm_dir + "/" + e->d_name).c_str());
      closedir(d);
    }
  }
};

// Restores the umask.
struct umask_guard {
  mode_t old;
  explicit umask_guard(mode_t m) : old(umask(m)) {}
  ~umask_guard() { umask(old); }
};

// Endpoint indices unlikely to meet anything else in this process.
// Spinning on a 2-core machine shared with other work: yield now and then,
// so that the other side gets a core.
void backoff(unsigned& spins) {
  if (++spins % 256 == 0) sched_yield();
  else cpu_relax();
}

uint32_t next_index() {
  static uint32_t i = 700000;
  return i++;
}

region_params params(uint32_t nrings = proto::default_rings,
                     uint32_t slots = proto::default_ring_slots) {
  region_params p;
  p.endpoint_index = next_index();
  p.nrings = nrings;
  p.ring_slots = slots;
  p.reclaim_stale = false;  // the multiprocess tests cover it
  return p;
}

uint64_t allocated_bytes(const region& r) {
  struct stat sb;
  EXPECT_EQ(stat(r.path().c_str(), &sb), 0);
  return static_cast<uint64_t>(sb.st_blocks) * 512;
}

TEST(shm_region, name_carries_uid_pid_namespace_pid_and_index) {
  EXPECT_EQ(region_name(1000, 4026531836ull, 4242, 7), "weft-shm-1000-4026531836-4242-7");
  shm_files_guard g;
  region r;
  auto p = params();
  ASSERT_EQ(region::create(p, r), errc::ok);
  EXPECT_NE(pid_namespace_id(), 0u);
  EXPECT_EQ(r.name(), region_name(static_cast<uint32_t>(geteuid()), pid_namespace_id(), getpid(),
                                  p.endpoint_index));
  EXPECT_TRUE(r.is_owner());
  std::string path = r.path();
  r = region();  // the owner's file goes with it
  EXPECT_NE(access(path.c_str(), F_OK), 0);
}

TEST(shm_region, mode_is_exactly_0600_whatever_the_umask) {
  shm_files_guard g;
  for (mode_t mask : {0000, 0022, 0077, 0277, 0777}) {
    umask_guard u(mask);
    region r;
    ASSERT_EQ(region::create(params(), r), errc::ok) << "umask " << std::oct << mask;
    struct stat sb;
    ASSERT_EQ(stat(r.path().c_str(), &sb), 0);
    EXPECT_EQ(sb.st_mode & 07777, 0600u) << "umask " << std::oct << mask;
    EXPECT_EQ(sb.st_uid, geteuid());
  }
}

TEST(shm_region, header_describes_the_layout) {
  shm_files_guard g;
  region r;
  auto p = params(128, 64);
  ASSERT_EQ(region::create(p, r), errc::ok);
  const auto& h = r.header();
  EXPECT_EQ(h.magic, proto::magic);
  EXPECT_EQ(h.version, proto::version);
  EXPECT_EQ(h.state, proto::region_ready);
  EXPECT_EQ(h.owner_pid, getpid());
  EXPECT_EQ(h.owner_uid, geteuid());
  EXPECT_EQ(h.owner_pidns, pid_namespace_id());
  EXPECT_EQ(h.owner_start_time, process_start_time(getpid()));
  EXPECT_NE(h.owner_start_time, 0u);
  EXPECT_EQ(h.endpoint_index, p.endpoint_index);
  EXPECT_EQ(h.nrings, 128u);
  EXPECT_EQ(h.ring_slots, 64u);
  auto geo = proto::compute_geometry(128, 64);
  EXPECT_EQ(h.region_bytes, geo.region_bytes);
  EXPECT_EQ(h.blocks_offset % proto::page_bytes, 0u);
  EXPECT_EQ(h.bounce_offset % proto::page_bytes, 0u);
  EXPECT_EQ(h.doorbell_offset % proto::cache_line, 0u);
  struct stat sb;
  ASSERT_EQ(stat(r.path().c_str(), &sb), 0);
  EXPECT_EQ(static_cast<uint64_t>(sb.st_size), geo.region_bytes);
}

TEST(shm_region, rejects_bad_shapes_duplicate_indices_and_too_little_room) {
  shm_files_guard g;
  region r;
  auto p = params(100, 128);
  EXPECT_EQ(region::create(p, r), errc::inval);
  p = params(1024, 100);
  EXPECT_EQ(region::create(p, r), errc::inval);
  p = params(1024, 4);
  EXPECT_EQ(region::create(p, r), errc::inval);

  p = params();
  ASSERT_EQ(region::create(p, r), errc::ok);
  region twin;
  EXPECT_EQ(region::create(p, twin), errc::addrinuse);
  EXPECT_TRUE(r.valid());
  EXPECT_EQ(access(r.path().c_str(), F_OK), 0);  // the failed twin did not remove it

  p = params();
  p.headroom_bytes = uint64_t{1} << 60;  // more than any /dev/shm
  region big;
  EXPECT_EQ(region::create(p, big), errc::nospc);
  EXPECT_NE(access((shm_dir + "/" + region_name(static_cast<uint32_t>(geteuid()),
                                                pid_namespace_id(), getpid(), p.endpoint_index))
                       .c_str(),
                   F_OK),
            0);
}

// Untouched pages of the tmpfs file cost nothing; claims and bounce
// reservations allocate what they use, and reclaim gives it back.
TEST(shm_region, the_file_is_sparse_and_grows_per_claim) {
  shm_files_guard g;
  region r;
  ASSERT_EQ(region::create(params(), r), errc::ok);
  const auto& geo = r.geometry();
  EXPECT_GT(geo.region_bytes, 100u << 20);
  EXPECT_LE(allocated_bytes(r), geo.fixed_bytes);
  EXPECT_GE(allocated_bytes(r), geo.fixed_bytes);  // fallocated: exists for sure

  uint32_t ring;
  ASSERT_EQ(r.claim(sender_identity::self(1), ring), errc::ok);
  uint64_t after_claim = allocated_bytes(r);
  EXPECT_GE(after_claim, geo.fixed_bytes + geo.block_bytes);
  EXPECT_LE(after_claim, geo.fixed_bytes + geo.block_bytes + 2 * proto::page_bytes);

  ASSERT_EQ(r.reserve_bounce(ring), errc::ok);
  EXPECT_EQ(allocated_bytes(r), after_claim + geo.bounce_ring_bytes);
  std::memset(r.bounce_segment(ring, 1), 0xab, proto::bounce_segment_bytes);
  EXPECT_EQ(r.bounce_ctrl(ring, 0).state, 0u);

  r.close_ring(ring);
  ASSERT_EQ(r.reclaim_ring(ring), errc::ok);
  EXPECT_LT(allocated_bytes(r), geo.fixed_bytes + 3 * proto::page_bytes);
}

TEST(shm_region, attach_checks_what_it_maps) {
  shm_files_guard g;
  region owner;
  ASSERT_EQ(region::create(params(), owner), errc::ok);
  region peer;
  ASSERT_EQ(region::attach(shm_dir, owner.name(), peer), errc::ok);
  EXPECT_FALSE(peer.is_owner());
  EXPECT_EQ(peer.nrings(), owner.nrings());
  EXPECT_EQ(peer.owner_pid(), getpid());
  EXPECT_EQ(std::memcmp(&peer.header(), &owner.header(), sizeof(proto::region_header)), 0);

  region none;
  EXPECT_EQ(region::attach(shm_dir, "weft-shm-no-such-region", none), errc::noent);

  auto& h = const_cast<proto::region_header&>(owner.header());
  h.version = proto::version + 1;
  EXPECT_EQ(region::attach(shm_dir, owner.name(), none), errc::opnotsupp);
  h.version = proto::version;
  h.block_bytes += 64;
  EXPECT_EQ(region::attach(shm_dir, owner.name(), none), errc::inval);
  h.block_bytes -= 64;
  h.magic = 0x1234;
  EXPECT_EQ(region::attach(shm_dir, owner.name(), none), errc::inval);
  h.magic = proto::magic;
  h.state = proto::region_initialising;
  EXPECT_EQ(region::attach(shm_dir, owner.name(), none), errc::again);
  h.state = proto::region_ready;
  EXPECT_EQ(region::attach(shm_dir, owner.name(), none), errc::ok);

  if (geteuid() == 0) {  // a file of another user is never attached
    ASSERT_EQ(chown(owner.path().c_str(), 65534, 65534), 0);
    EXPECT_EQ(region::attach(shm_dir, owner.name(), none), errc::access);
  }
}

TEST(shm_region, claim_send_collect_receive_close_reclaim) {
  shm_files_guard g;
  region owner;
  ASSERT_EQ(region::create(params(), owner), errc::ok);
  region peer;
  ASSERT_EQ(region::attach(shm_dir, owner.name(), peer), errc::ok);

  auto me = sender_identity::self(42, 0xfeed);
  uint32_t ring;
  ASSERT_EQ(peer.claim(me, ring), errc::ok);
  ASSERT_LT(ring, owner.nrings());
  EXPECT_EQ(peer.claim_state(ring), proto::claim_active);
  ASSERT_EQ(owner.claim_state(ring), proto::claim_active);
  auto who = owner.claim_info(ring);
  EXPECT_EQ(who.generation, 1u);
  EXPECT_EQ(who.sender_pid, getpid());
  EXPECT_EQ(who.sender_uid, geteuid());
  EXPECT_EQ(who.sender_pidns, pid_namespace_id());
  EXPECT_EQ(who.sender_start_time, process_start_time(getpid()));
  EXPECT_EQ(who.sender_endpoint, 42u);
  EXPECT_EQ(who.sender_cookie, 0xfeedu);

  doorbell_set pending;
  EXPECT_FALSE(owner.collect_doorbells(pending));
  auto prod = peer.producer(ring);
  ASSERT_EQ(prod.try_send({5, 0, 11, 22}, "hello", 5), errc::ok);
  peer.ring_doorbell(ring);
  peer.ring_doorbell(ring);  // already set: no second RMW, same result
  ASSERT_TRUE(owner.collect_doorbells(pending));
  EXPECT_TRUE(pending.test(ring));
  std::vector<uint32_t> seen;
  pending.for_each([&](uint32_t r) { seen.push_back(r); });
  EXPECT_EQ(seen, std::vector<uint32_t>{ring});
  EXPECT_FALSE(owner.collect_doorbells(pending));  // shared bits were taken

  auto cons = owner.consumer(ring);
  msg_view v;
  ASSERT_EQ(cons.peek(v), errc::ok);
  char text[6] = {};
  v.copy_to(text, 5);
  EXPECT_STREQ(text, "hello");
  EXPECT_EQ(v.fields.op, 5);
  EXPECT_EQ(v.fields.tag, 11u);
  EXPECT_EQ(v.fields.data, 22u);
  cons.release(v);
  EXPECT_TRUE(cons.empty());

  EXPECT_EQ(owner.reclaim_ring(ring), errc::busy);  // the sender is active
  EXPECT_EQ(peer.reclaim_ring(ring), errc::perm);   // only the owner reclaims
  peer.close_ring(ring);
  pending = {};
  ASSERT_TRUE(owner.collect_doorbells(pending));  // closing rings the bell
  EXPECT_EQ(owner.claim_state(ring), proto::claim_closed);
  ASSERT_EQ(owner.reclaim_ring(ring), errc::ok);
  EXPECT_EQ(owner.claim_state(ring), proto::claim_free);
  EXPECT_EQ(owner.reclaim_ring(ring), errc::ok);  // already free

  // The ring can be claimed again, from scratch.
  uint32_t again;
  ASSERT_EQ(peer.claim(me, again), errc::ok);
  EXPECT_EQ(again, ring);
  EXPECT_EQ(owner.claim_info(again).generation, 2u);
  auto cons2 = owner.consumer(again);
  EXPECT_TRUE(cons2.empty());
  auto prod2 = peer.producer(again);
  ASSERT_EQ(prod2.try_send({}, "x", 1), errc::ok);
  EXPECT_FALSE(cons2.empty());
  // A sender found dead loses its ring even while active.
  EXPECT_EQ(owner.reclaim_ring(again, /*sender_dead=*/true), errc::ok);
  EXPECT_EQ(owner.claim_state(again), proto::claim_free);
}

TEST(shm_region, a_thousand_and_twenty_four_senders_claim_distinct_rings) {
  shm_files_guard g;
  region owner;
  ASSERT_EQ(region::create(params(1024, 128), owner), errc::ok);
  constexpr int threads = 8, per_thread = 128;
  std::vector<std::vector<uint32_t>> got(threads);
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      region peer;
      if (region::attach(shm_dir, owner.name(), peer) != errc::ok) {
        ++failures;
        return;
      }
      for (int i = 0; i < per_thread; ++i) {
        uint32_t ring;
        if (peer.claim(sender_identity::self(static_cast<uint32_t>(t * per_thread + i)), ring) !=
            errc::ok) {
          ++failures;
          return;
        }
        got[t].push_back(ring);
        // Use it at once: the ring is initialised and allocated.
        auto p = peer.producer(ring);
        if (p.try_send({}, &ring, sizeof ring) != errc::ok) ++failures;
        peer.ring_doorbell(ring);
      }
    });
  for (auto& t : ts) t.join();
  ASSERT_EQ(failures.load(), 0);
  std::set<uint32_t> all;
  for (auto& v : got) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), 1024u);
  EXPECT_EQ(*all.rbegin(), 1023u);

  uint32_t extra;
  EXPECT_EQ(owner.claim(sender_identity::self(5000), extra), errc::busy);

  // Every ring holds its own index, and every doorbell is set.
  doorbell_set pending;
  ASSERT_TRUE(owner.collect_doorbells(pending));
  int rings = 0;
  pending.for_each([&](uint32_t r) {
    ++rings;
    auto c = owner.consumer(r);
    msg_view v;
    ASSERT_EQ(c.peek(v), errc::ok);
    uint32_t value = ~0u;
    v.copy_to(&value, sizeof value);
    EXPECT_EQ(value, r);
    EXPECT_EQ(owner.claim_state(r), proto::claim_active);
  });
  EXPECT_EQ(rings, 1024);
  const auto& geo = owner.geometry();
  EXPECT_LE(allocated_bytes(owner),
            geo.fixed_bytes + 1024 * (geo.block_bytes + proto::page_bytes));
}

// The doorbell is the owner's only way to find work here: a lost wakeup
// would leave messages behind and the deadline would fail the test.
TEST(shm_region, doorbells_lose_no_wakeup) {
  shm_files_guard g;
  region owner;
  ASSERT_EQ(region::create(params(128, 16), owner), errc::ok);
  constexpr int senders = 3;
#if defined(__SANITIZE_THREAD__)
  constexpr uint64_t per_sender = 20'000;
#else
  constexpr uint64_t per_sender = 200'000;
#endif
  std::vector<uint32_t> rings(senders);
  std::vector<region> peers(senders);
  for (int s = 0; s < senders; ++s) {
    ASSERT_EQ(region::attach(shm_dir, owner.name(), peers[s]), errc::ok);
    ASSERT_EQ(peers[s].claim(sender_identity::self(static_cast<uint32_t>(s)), rings[s]), errc::ok);
  }
  std::vector<std::thread> ts;
  for (int s = 0; s < senders; ++s)
    ts.emplace_back([&, s] {
      auto p = peers[s].producer(rings[s]);
      unsigned spins = 0;
      unsigned char payload[80] = {};
      for (uint64_t i = 0; i < per_sender; ++i) {
        while (p.try_send({0, 0, i, 0}, payload, (i % 5) * 20) == errc::again) backoff(spins);
        peers[s].ring_doorbell(rings[s]);
      }
    });
  std::vector<ring_consumer> cons(owner.nrings());
  std::vector<uint64_t> next(owner.nrings(), 0);
  for (int s = 0; s < senders; ++s) cons[rings[s]] = owner.consumer(rings[s]);
  uint64_t total = 0, disorder = 0;
  doorbell_set pending;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  unsigned spins = 0;
  while (total < senders * per_sender && std::chrono::steady_clock::now() < deadline) {
    if (!owner.collect_doorbells(pending) && !pending.any()) backoff(spins);
    pending.for_each([&](uint32_t r) {
      msg_view v;
      int budget = 16;  // leave some in the ring: it must stay pending
      while (budget-- && cons[r].peek(v) == errc::ok) {
        if (v.fields.tag != next[r]++) ++disorder;
        cons[r].release(v);
        ++total;
      }
      if (cons[r].empty()) pending.clear(r);
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(total, senders * per_sender);
  EXPECT_EQ(disorder, 0u);
}

}  // namespace
}  // namespace weft::shm
