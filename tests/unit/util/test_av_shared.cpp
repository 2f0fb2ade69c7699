// SPDX-License-Identifier: MIT
// weft — unit tests of named (shared) address vectors: util/av with a file
// in /dev/shm (util/av_shared). Two AVs in one process through two domains,
// and readers in forked processes.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "util/av.hpp"
#include "util/av_shared.hpp"
#include "util/domain.hpp"
#include "util/fabric.hpp"
#include "util/ip_codec.hpp"

using namespace weft::util;

namespace {

fi_provider test_prov = [] {
  fi_provider p{};
  p.version = 1;
  p.fi_version = FI_VERSION(1, 20);
  p.name = "avshared";
  return p;
}();

// The IPv4 codec, declared shareable (its entries are plain addresses).
const av_codec shared_v4 = [] {
  av_codec c = *ip_codec(FI_SOCKADDR_IN);
  c.shareable = true;
  return c;
}();
const av_codec* codec_hook(const domain&) { return &shared_v4; }
const domain_hooks hooks = {.endpoint = nullptr, .codec = codec_hook};
const fabric_hooks fab_hooks = {};

sockaddr_in v4(uint32_t host, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(host);
  sa.sin_port = htons(port);
  return sa;
}

struct env {
  fabric* fab = nullptr;
  fid_domain* dom = nullptr;
  explicit env(fi_threading threading = FI_THREAD_SAFE) {
    fi_fabric_attr fa{};
    fa.name = const_cast<char*>("avshared");
    fa.api_version = FI_VERSION(1, 20);
    fab = new fabric(&test_prov, &fab_hooks, fa, nullptr);
    fi_domain_attr da{};
    da.threading = threading;
    da.name = const_cast<char*>("avshared0");
    fi_info info{};
    info.addr_format = FI_SOCKADDR_IN;
    info.caps = FI_SHARED_AV | FI_AV_USER_ID;
    info.domain_attr = &da;
    EXPECT_EQ(domain::open(*fab, &hooks, info, &dom, nullptr), 0);
  }
  ~env() {
    EXPECT_EQ(fi_close(&dom->fid), 0);
    EXPECT_EQ(fi_close(&fab->fid), 0);
  }
  int open(const char* name, uint64_t flags, fid_av** out, fi_av_attr* attr_out = nullptr,
           size_t count = 0) {
    fi_av_attr attr{};
    attr.name = name;
    attr.flags = flags;
    attr.count = count;
    *out = nullptr;
    int rc = fi_av_open(dom, &attr, out, nullptr);
    if (attr_out) *attr_out = attr;
    return rc;
  }
};

av& impl(fid_av* a) { return *av::from(a); }

// A name no other run of the tests uses at the same time.
std::string unique_name(const char* what) {
  return "ut-" + std::to_string(::getpid()) + "-" + what;
}

bool exists(const std::string& path) {
  struct stat sb;
  return ::lstat(path.c_str(), &sb) == 0;
}

sockaddr_in peer(uint32_t i) { return v4(0x0a000001 + i, static_cast<uint16_t>(1000 + i)); }

// The address the AV holds at a, compared with what was inserted.
bool holds(fid_av* a, fi_addr_t at, const sockaddr_in& want) {
  sockaddr_in got{};
  size_t len = sizeof got;
  return fi_av_lookup(a, at, &got, &len) == 0 && len == sizeof got &&
         got.sin_addr.s_addr == want.sin_addr.s_addr && got.sin_port == want.sin_port;
}

fi_addr_t reverse_of(fid_av* a, const sockaddr_in& sa) {
  uint8_t e[32];
  if (shared_v4.encode(&sa, e) != 0) return FI_ADDR_NOTAVAIL - 1;
  return impl(a).reverse(e);
}

}  // namespace

TEST(av_shared, open_create_read_busy_and_names) {
  env w, r;
  std::string name = unique_name("open");
  std::string path = av_file::path_for(name.c_str());
  fid_av *writer = nullptr, *reader = nullptr, *again = nullptr;
  fi_av_attr attr{};

  // FI_READ needs an existing AV.
  EXPECT_EQ(r.open(name.c_str(), FI_READ, &reader), -FI_ENOENT);

  ASSERT_EQ(w.open(name.c_str(), 0, &writer, &attr), 0);
  EXPECT_EQ(attr.type, FI_AV_TABLE);
  EXPECT_NE(attr.map_addr, nullptr);  // map_addr 0 in: the one used comes back
  struct stat sb;
  ASSERT_EQ(::lstat(path.c_str(), &sb), 0);
  EXPECT_TRUE(S_ISREG(sb.st_mode));
  EXPECT_EQ(sb.st_mode & 0777, 0600u);
  EXPECT_TRUE(impl(writer).shared());
  EXPECT_FALSE(impl(writer).read_only());

  // One writer at a time, in this process or another.
  EXPECT_EQ(r.open(name.c_str(), 0, &again), -FI_EBUSY);
  EXPECT_EQ(w.open(name.c_str(), 0, &again), -FI_EBUSY);

  ASSERT_EQ(r.open(name.c_str(), FI_READ, &reader, &attr), 0);
  EXPECT_EQ(attr.type, FI_AV_TABLE);  // the file's type
  EXPECT_TRUE(impl(reader).read_only());
  fid_av* typed = nullptr;
  fi_av_attr ta{};
  ta.name = name.c_str();
  ta.flags = FI_READ;
  ta.type = FI_AV_MAP;  // not what it was created as
  EXPECT_EQ(fi_av_open(r.dom, &ta, &typed, nullptr), -FI_EINVAL);

  // A read-only AV refuses every change.
  sockaddr_in a = peer(0);
  fi_addr_t fa = 0;
  EXPECT_EQ(fi_av_insert(reader, &a, 1, &fa, 0, nullptr), -FI_EPERM);
  EXPECT_EQ(fi_av_remove(reader, &fa, 1, 0), -FI_EPERM);
  EXPECT_EQ(fi_av_insertsvc(reader, "10.0.0.1", "7", &fa, 0, nullptr), -FI_EPERM);
  EXPECT_EQ(fi_av_set_user_id(reader, 0, 5, 0), -FI_EPERM);
  EXPECT_EQ(fi_av_set_user_id(writer, 0, 5, 0), -FI_ENOSYS);

  EXPECT_EQ(fi_close(&reader->fid), 0);
  // The writer's close removes the file; readers opening later find none.
  EXPECT_EQ(fi_close(&writer->fid), 0);
  EXPECT_FALSE(exists(path));
  EXPECT_EQ(r.open(name.c_str(), FI_READ, &reader), -FI_ENOENT);

  // Bad names and flags.
  EXPECT_EQ(w.open("", 0, &again), -FI_EINVAL);
  EXPECT_EQ(w.open(std::string(300, 'x').c_str(), 0, &again), -FI_EINVAL);
  EXPECT_EQ(w.open(name.c_str(), FI_AV_USER_ID, &again), -FI_EBADFLAGS);
  // Any byte may be in a name; the file name escapes what is not plain.
  EXPECT_NE(av_file::path_for("/a b").find("-%2fa%20b"), std::string::npos);
  ASSERT_EQ(w.open("/weft unit/..", 0, &again), 0);
  EXPECT_EQ(fi_close(&again->fid), 0);
}

TEST(av_shared, reader_follows_inserts_removals_and_reuse) {
  for (fi_threading t : {FI_THREAD_DOMAIN, FI_THREAD_SAFE}) {
    env w(t), r(t);
    std::string name = unique_name("follow");
    fid_av *writer = nullptr, *reader = nullptr;
    ASSERT_EQ(w.open(name.c_str(), 0, &writer), 0);
    std::vector<sockaddr_in> addrs;
    for (uint32_t i = 0; i < 8; ++i) addrs.push_back(peer(i));
    std::vector<fi_addr_t> fa(8);
    ASSERT_EQ(fi_av_insert(writer, addrs.data(), 4, fa.data(), 0, nullptr), 4);
    ASSERT_EQ(r.open(name.c_str(), FI_READ, &reader), 0);
    EXPECT_EQ(impl(reader).count(), 4u);
    for (int i = 0; i < 4; ++i) {
      EXPECT_TRUE(holds(reader, fa[i], addrs[i]));
      EXPECT_EQ(reverse_of(reader, addrs[i]), fa[i]);
    }
    EXPECT_EQ(reverse_of(reader, addrs[4]), FI_ADDR_NOTAVAIL);
    EXPECT_EQ(impl(reader).entry(4), nullptr);

    // Inserted after the reader opened: the data path and lookups see them.
    ASSERT_EQ(fi_av_insert(writer, &addrs[4], 4, &fa[4], 0, nullptr), 4);
    EXPECT_NE(impl(reader).entry(fa[7]), nullptr);
    for (int i = 4; i < 8; ++i) {
      EXPECT_TRUE(holds(reader, fa[i], addrs[i]));
      EXPECT_EQ(reverse_of(reader, addrs[i]), fa[i]);
    }

    // Removed: gone for the reader; reused: the new address, old one unknown.
    ASSERT_EQ(fi_av_remove(writer, &fa[2], 1, 0), 0);
    EXPECT_EQ(impl(reader).entry(fa[2]), nullptr);
    EXPECT_EQ(reverse_of(reader, addrs[2]), FI_ADDR_NOTAVAIL);
    sockaddr_in fresh = peer(100);
    fi_addr_t reused = FI_ADDR_NOTAVAIL;
    ASSERT_EQ(fi_av_insert(writer, &fresh, 1, &reused, 0, nullptr), 1);
    EXPECT_EQ(reused, fa[2]);  // FI_AV_TABLE: the lowest free index
    EXPECT_TRUE(holds(reader, reused, fresh));
    EXPECT_EQ(reverse_of(reader, fresh), reused);
    EXPECT_EQ(reverse_of(reader, addrs[2]), FI_ADDR_NOTAVAIL);
    EXPECT_EQ(reverse_of(reader, addrs[7]), fa[7]);

    // The writer's own reverse index and the reader's agree.
    EXPECT_EQ(reverse_of(writer, fresh), reused);
    EXPECT_EQ(fi_close(&writer->fid), 0);
    // The reader keeps what was last published.
    EXPECT_TRUE(holds(reader, fa[7], addrs[7]));
    EXPECT_EQ(fi_close(&reader->fid), 0);
  }
}

TEST(av_shared, capacity_is_fixed_at_creation) {
  env w;
  std::string name = unique_name("cap");
  fid_av* writer = nullptr;
  ASSERT_EQ(w.open(name.c_str(), 0, &writer, nullptr, 1), 0);  // a hint below the minimum
  size_t cap = av_file::min_capacity;
  std::vector<sockaddr_in> addrs(cap);
  for (uint32_t i = 0; i < cap; ++i) addrs[i] = v4(0x0b000000 + i, 9);
  std::vector<fi_addr_t> fa(cap);
  ASSERT_EQ(fi_av_insert(writer, addrs.data(), cap, fa.data(), 0, nullptr), static_cast<int>(cap));
  sockaddr_in one_more = v4(0x0c000000, 9);
  fi_addr_t x = 0;
  EXPECT_EQ(fi_av_insert(writer, &one_more, 1, &x, 0, nullptr), -FI_ENOSPC);
  EXPECT_EQ(x, FI_ADDR_NOTAVAIL);
  // A removal makes room again.
  ASSERT_EQ(fi_av_remove(writer, &fa[10], 1, 0), 0);
  EXPECT_EQ(fi_av_insert(writer, &one_more, 1, &x, 0, nullptr), 1);
  EXPECT_EQ(x, fa[10]);
  EXPECT_EQ(fi_close(&writer->fid), 0);
}

namespace {

// Waits for a forked child; its exit status, or -1.
int reap(pid_t pid) {
  int st = 0;
  if (::waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

}  // namespace

TEST(av_shared, forked_reader_sees_the_writers_fi_addrs) {
  env w;
  std::string name = unique_name("fork");
  fid_av* writer = nullptr;
  ASSERT_EQ(w.open(name.c_str(), 0, &writer), 0);
  std::vector<sockaddr_in> addrs;
  for (uint32_t i = 0; i < 6; ++i) addrs.push_back(peer(i));
  std::vector<fi_addr_t> fa(6);
  ASSERT_EQ(fi_av_insert(writer, addrs.data(), 3, fa.data(), 0, nullptr), 3);

  int go[2], ready[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int rc = [&] {
      env r;
      fid_av* reader = nullptr;
      if (r.open(name.c_str(), FI_READ, &reader) != 0) return 1;
      // A read-write open from another process: busy.
      fid_av* second = nullptr;
      if (r.open(name.c_str(), 0, &second) != -FI_EBUSY) return 2;
      for (int i = 0; i < 3; ++i)
        if (!holds(reader, fa[i], addrs[i]) || reverse_of(reader, addrs[i]) != fa[i]) return 3;
      char c = 1;
      if (::write(ready[1], &c, 1) != 1) return 4;
      // The parent inserted three more (their fi_addrs come through the
      // pipe, as an application would pass them) and removed the first.
      size_t want = 3 * sizeof(fi_addr_t);
      if (::read(go[0], &fa[3], want) != static_cast<ssize_t>(want)) return 4;
      int late = 0;
      for (int i = 3; i < 6; ++i)
        late += !holds(reader, fa[i], addrs[i]) || reverse_of(reader, addrs[i]) != fa[i];
      if (late) {
        fi_close(&reader->fid);
        return 5;
      }
      int bad = impl(reader).entry(fa[0]) || reverse_of(reader, addrs[0]) != FI_ADDR_NOTAVAIL;
      return fi_close(&reader->fid) != 0 ? 7 : bad ? 6 : 0;
    }();
    ::_exit(rc);
  }
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(fi_av_insert(writer, &addrs[3], 3, &fa[3], 0, nullptr), 3);
  ASSERT_EQ(fi_av_remove(writer, &fa[0], 1, 0), 0);
  ASSERT_EQ(::write(go[1], &fa[3], 3 * sizeof(fi_addr_t)), static_cast<ssize_t>(3 * sizeof(fi_addr_t)));
  EXPECT_EQ(reap(child), 0);
  for (int fd : {go[0], go[1], ready[0], ready[1]}) ::close(fd);
  EXPECT_EQ(fi_close(&writer->fid), 0);
}

TEST(av_shared, a_dead_writers_file_does_not_block_a_new_one) {
  std::string name = unique_name("stale");
  std::string path = av_file::path_for(name.c_str());
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    env w;
    fid_av* writer = nullptr;
    sockaddr_in a = peer(1);
    fi_addr_t fa;
    if (w.open(name.c_str(), 0, &writer) != 0 || fi_av_insert(writer, &a, 1, &fa, 0, nullptr) != 1)
      ::_exit(1);
    ::raise(SIGKILL);  // no close: the file stays behind
  }
  EXPECT_EQ(reap(child), 100 + SIGKILL);
  ASSERT_TRUE(exists(path));
  env w, r;
  fid_av *reader = nullptr, *writer = nullptr;
  // Its entries can still be read...
  ASSERT_EQ(r.open(name.c_str(), FI_READ, &reader), 0);
  EXPECT_TRUE(holds(reader, 0, peer(1)));
  // ...and a new writer replaces it with a fresh AV.
  ASSERT_EQ(w.open(name.c_str(), 0, &writer), 0);
  EXPECT_EQ(impl(writer).count(), 0u);
  EXPECT_TRUE(holds(reader, 0, peer(1)));  // the old reader keeps the old file
  fid_av* fresh = nullptr;
  ASSERT_EQ(r.open(name.c_str(), FI_READ, &fresh), 0);
  EXPECT_EQ(impl(fresh).entry(0), nullptr);
  for (fid_av* a : {fresh, reader, writer}) EXPECT_EQ(fi_close(&a->fid), 0);
  EXPECT_FALSE(exists(path));
}

TEST(av_shared, reader_index_stays_bounded_under_churn) {
  env w, r;
  std::string name = unique_name("churn");
  fid_av *writer = nullptr, *reader = nullptr;
  ASSERT_EQ(w.open(name.c_str(), 0, &writer), 0);
  ASSERT_EQ(r.open(name.c_str(), FI_READ, &reader), 0);
  std::vector<sockaddr_in> addrs;
  for (uint32_t i = 0; i < 64; ++i) addrs.push_back(peer(i));
  std::vector<fi_addr_t> fa(64);
  ASSERT_EQ(fi_av_insert(writer, addrs.data(), 64, fa.data(), 0, nullptr), 64);
  ASSERT_EQ(reverse_of(reader, addrs[63]), fa[63]);
  size_t bytes = impl(reader).table().bytes();
  // Every round removes and reuses an index: the reader rebuilds its
  // reverse index each time, at the same size.
  for (uint32_t round = 0; round < 200; ++round) {
    fi_addr_t victim = fa[round % 64];
    ASSERT_EQ(fi_av_remove(writer, &victim, 1, 0), 0);
    sockaddr_in next = peer(1000 + round);
    fi_addr_t got = FI_ADDR_NOTAVAIL;
    ASSERT_EQ(fi_av_insert(writer, &next, 1, &got, 0, nullptr), 1);
    ASSERT_EQ(got, victim);
    ASSERT_EQ(reverse_of(reader, next), victim) << round;
  }
  EXPECT_EQ(impl(reader).table().bytes(), bytes);
  EXPECT_EQ(impl(reader).count(), 64u);
  EXPECT_EQ(fi_close(&reader->fid), 0);
  EXPECT_EQ(fi_close(&writer->fid), 0);
}
