// SPDX-License-Identifier: MIT
// weft — the same-host byte stream (src/prov/tcp/local_stream.hpp): socket
// semantics both ways, wrap-around, the attach checks, a corrupt peer, the
// wake-up handshake, a stream between two processes through /proc, and
// pipes that grow (when, what they cost idle, a refused growth, a corrupt
// ring size, bytes in order across growth with two threads).
#include "prov/tcp/local_stream.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace weft::tcp {

// What the tests see of a stream's mapping (a friend of local_stream).
struct local_stream_probe {
  // Makes the outgoing pipe's pages past its ring read-only: reserving
  // them (MADV_POPULATE_WRITE) then fails as a full tmpfs or a memory
  // limit would make it, so growth is refused.
  static int forbid_growth(local_stream& s, bool forbid) {
    std::byte* from = s.out_data_ + s.cap_;
    return ::mprotect(from, static_cast<size_t>(s.span_ - s.cap_),
                      forbid ? PROT_READ : PROT_READ | PROT_WRITE);
  }
};

namespace {

constexpr uint64_t cookie = 0x1234abcd5678ef90;

struct pair {
  util::unique_fd memfd;
  local_stream a, b;  // a created, b attached
  // max_bytes 0: pipes that never grow.
  explicit pair(size_t pipe_bytes = 4096, size_t max_bytes = 0) {
    EXPECT_EQ(local_stream::create(pipe_bytes, max_bytes ? max_bytes : pipe_bytes, cookie, a, memfd),
              errc::ok);
    EXPECT_EQ(local_stream::attach_fd(memfd.get(), cookie, b), errc::ok);
  }
};

ssize_t put(local_stream& s, const void* p, size_t n) {
  iovec iov{const_cast<void*>(p), n};
  return s.writev(&iov, 1);
}

uint8_t pattern(size_t i) { return static_cast<uint8_t>(i * 131 + (i >> 9)); }

TEST(local_stream, bytes_go_both_ways_like_a_socket) {
  pair p;
  ASSERT_TRUE(p.a.valid() && p.b.valid());
  char buf[16];
  EXPECT_EQ(p.b.read(buf, sizeof buf), -EAGAIN);  // nothing yet
  EXPECT_EQ(put(p.a, "hello", 5), 5);
  EXPECT_EQ(p.b.readable(), 5u);
  EXPECT_EQ(p.b.read(buf, 3), 3);  // a short read leaves the rest
  EXPECT_EQ(std::memcmp(buf, "hel", 3), 0);
  EXPECT_EQ(p.b.read(buf, sizeof buf), 2);
  EXPECT_EQ(std::memcmp(buf, "lo", 2), 0);
  EXPECT_EQ(put(p.b, "back", 4), 4);
  EXPECT_EQ(p.a.read(buf, sizeof buf), 4);
  EXPECT_EQ(std::memcmp(buf, "back", 4), 0);
  EXPECT_EQ(p.a.read(buf, sizeof buf), -EAGAIN);
}

TEST(local_stream, a_full_pipe_takes_what_fits_then_says_again) {
  pair p(4096);
  std::vector<char> big(5000, 'x');
  EXPECT_EQ(put(p.a, big.data(), big.size()), 4096);
  EXPECT_EQ(put(p.a, big.data(), 1), -EAGAIN);
  std::vector<char> in(1000);
  EXPECT_EQ(p.b.read(in.data(), in.size()), 1000);
  EXPECT_EQ(put(p.a, big.data(), big.size()), 1000);  // exactly the freed room
}

TEST(local_stream, gathers_iovecs_across_the_wrap) {
  pair p(4096);
  std::vector<uint8_t> sent, got;
  size_t n = 0;
  std::vector<uint8_t> chunk(1500);
  // Odd sizes in three iovecs so that pieces straddle the end of the ring.
  for (int round = 0; round < 40; ++round) {
    for (auto& c : chunk) c = pattern(n++);
    iovec iov[3] = {{chunk.data(), 7}, {chunk.data() + 7, 0}, {chunk.data() + 7, 1493}};
    size_t want = 1500, off = 0;
    while (off < want) {
      // Re-point the iovecs past what was taken.
      std::vector<iovec> rest;
      size_t skip = off;
      for (auto& v : iov) {
        if (skip >= v.iov_len) {
          skip -= v.iov_len;
          continue;
        }
        rest.push_back({static_cast<char*>(v.iov_base) + skip, v.iov_len - skip});
        skip = 0;
      }
      ssize_t w = p.a.writev(rest.data(), static_cast<int>(rest.size()));
      if (w == -EAGAIN) {
        uint8_t tmp[777];
        ssize_t r = p.b.read(tmp, sizeof tmp);
        ASSERT_GT(r, 0);
        got.insert(got.end(), tmp, tmp + r);
        continue;
      }
      ASSERT_GT(w, 0);
      sent.insert(sent.end(), chunk.begin() + static_cast<long>(off),
                  chunk.begin() + static_cast<long>(off + static_cast<size_t>(w)));
      off += static_cast<size_t>(w);
    }
  }
  uint8_t tmp[777];
  for (ssize_t r; (r = p.b.read(tmp, sizeof tmp)) > 0;) got.insert(got.end(), tmp, tmp + r);
  EXPECT_EQ(got.size(), sent.size());
  EXPECT_TRUE(got == sent);
}

TEST(local_stream, attach_checks_the_cookie_and_the_header) {
  util::unique_fd fd;
  local_stream a, b;
  ASSERT_EQ(local_stream::create(4096, 4096, cookie, a, fd), errc::ok);
  EXPECT_EQ(local_stream::attach_fd(fd.get(), cookie + 1, b), errc::inval);
  EXPECT_FALSE(b.valid());
  // Neither end can resize the file under the other's mapping (a SIGBUS
  // there): it is sealed.
  EXPECT_EQ(::ftruncate(fd.get(), 4096 + 3 * 4096), -1);
  EXPECT_EQ(errno, EPERM);
  // A file with a stream's header but not sealed, and one sealed at the
  // wrong size for its header.
  for (bool seal : {false, true}) {
    util::unique_fd f(::memfd_create("weft-tcp-local", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    ASSERT_TRUE(f.valid());
    std::vector<std::byte> head(4096);
    ASSERT_EQ(::pread(fd.get(), head.data(), head.size(), 0), 4096);
    ASSERT_EQ(::pwrite(f.get(), head.data(), head.size(), 0), 4096);
    ASSERT_EQ(::ftruncate(f.get(), seal ? 4096 + 3 * 4096 : 4096 + 2 * 4096), 0);
    if (seal) {
      ASSERT_EQ(::fcntl(f.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    }
    EXPECT_EQ(local_stream::attach_fd(f.get(), cookie, b), errc::inval) << seal;
    EXPECT_FALSE(b.valid());
  }
  // Sizes the creator refuses.
  util::unique_fd other;
  local_stream c;
  EXPECT_EQ(local_stream::create(5000, 8192, cookie, c, other), errc::inval);
  EXPECT_EQ(local_stream::create(1024, 4096, cookie, c, other), errc::inval);
  EXPECT_EQ(local_stream::create(8192, 4096, cookie, c, other), errc::inval);  // max below start
  EXPECT_EQ(local_stream::create(4096, 12288, cookie, c, other), errc::inval);
  // Not a stream at all.
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  EXPECT_EQ(local_stream::attach_fd(pipefd[0], cookie, b), errc::inval);
  ::close(pipefd[0]);
  ::close(pipefd[1]);
  EXPECT_EQ(local_stream::attach(::getpid(), 987654, cookie, b), errc::noent);
}

TEST(local_stream, a_corrupt_peer_position_is_an_error_not_a_read_out_of_bounds) {
  pair p(4096);
  // The peer's view of the shared pages, written as a hostile peer would.
  void* raw = ::mmap(nullptr, local_layout::data_offset, PROT_READ | PROT_WRITE, MAP_SHARED,
                     p.memfd.get(), 0);
  ASSERT_NE(raw, MAP_FAILED);
  auto* h = static_cast<local_layout::header*>(raw);
  h->pipe[0].tail = 4096 + 1;  // more than the pipe holds: b reads pipe 0
  char buf[8];
  EXPECT_EQ(p.b.read(buf, sizeof buf), -EIO);
  EXPECT_EQ(p.b.readable(), 0u);
  h->pipe[0].tail = 0;  // and it stays refused
  EXPECT_EQ(p.b.read(buf, sizeof buf), -EIO);
  h->pipe[1].head = 12345;  // a consumer "ahead" of what a (pipe 1's writer) wrote
  EXPECT_EQ(put(p.b, "x", 1), -EIO);  // b is already refusing
  EXPECT_EQ(put(p.a, "x", 1), 1);     // pipe 0's head is fine
  // The writer looks at the reader's position when it runs out of room
  // (local_stream.cpp): filling the pipe gets it there.
  h->pipe[0].head = 99999;
  std::vector<char> fill(4096, 'f');
  ssize_t w;
  while ((w = put(p.a, fill.data(), fill.size())) > 0) {
  }
  EXPECT_EQ(w, -EIO);
  ::munmap(raw, local_layout::data_offset);
}

TEST(local_stream, a_side_that_may_sleep_is_owed_one_wake_byte_per_sleep) {
  pair p;
  EXPECT_EQ(put(p.a, "x", 1), 1);
  EXPECT_FALSE(p.a.take_wake_due());  // b polls: no byte
  p.b.want_wakes(true);
  EXPECT_FALSE(p.a.take_wake_due());  // nothing written since the last look
  EXPECT_EQ(put(p.a, "y", 1), 1);
  EXPECT_TRUE(p.a.take_wake_due());  // the writer sends its byte now
  EXPECT_EQ(put(p.a, "z", 1), 1);
  EXPECT_FALSE(p.a.take_wake_due());  // one byte is already on its way
  p.b.take_wake();                    // b took it (and reads the socket empty)
  EXPECT_EQ(put(p.a, "w", 1), 1);
  EXPECT_TRUE(p.a.take_wake_due());
  p.b.take_wake();
  p.b.want_wakes(false);
  EXPECT_EQ(put(p.a, "v", 1), 1);
  EXPECT_FALSE(p.a.take_wake_due());
  // The other direction has its own words.
  p.a.want_wakes(true);
  EXPECT_EQ(put(p.b, "u", 1), 1);
  EXPECT_TRUE(p.b.take_wake_due());
}

TEST(local_stream, a_reader_that_frees_room_wakes_a_blocked_writer) {
  pair p(4096);
  std::vector<char> big(6000, 'x');
  EXPECT_EQ(put(p.a, big.data(), big.size()), 4096);  // blocked with 1904 left
  p.a.want_wakes(true);
  char buf[100];
  EXPECT_EQ(p.b.read(buf, sizeof buf), 100);
  EXPECT_TRUE(p.b.take_wake_due());  // a waits for room and may sleep
  EXPECT_EQ(p.b.read(buf, sizeof buf), 100);
  EXPECT_FALSE(p.b.take_wake_due());  // it was told once; it is not blocked again
  p.a.take_wake();
  EXPECT_EQ(put(p.a, big.data(), 1000), 200);  // blocked once more
  EXPECT_EQ(p.b.read(buf, sizeof buf), 100);
  EXPECT_TRUE(p.b.take_wake_due());
  // A writer that is not blocked is not woken by reads.
  pair q(4096);
  q.a.want_wakes(true);
  EXPECT_EQ(put(q.a, "abc", 3), 3);
  EXPECT_EQ(q.b.read(buf, sizeof buf), 3);
  EXPECT_FALSE(q.b.take_wake_due());
}

// What a peer names through /proc may be anything of its own: a FIFO, a
// file far larger than any stream. Each is refused before it is opened (not
// a regular file; not a memfd of our name).
TEST(local_stream, attach_refuses_what_is_not_a_stream) {
  int fifo[2];
  ASSERT_EQ(::pipe(fifo), 0);
  local_stream s;
  EXPECT_NE(local_stream::attach(::getpid(), fifo[0], cookie, s), errc::ok);
  EXPECT_FALSE(s.valid());
  ::close(fifo[0]);
  ::close(fifo[1]);
  util::unique_fd big(::memfd_create("weft-tcp-local", MFD_CLOEXEC));
  ASSERT_TRUE(big.valid());
  ASSERT_EQ(::ftruncate(big.get(), off_t{1} << 40), 0);  // sparse: costs nothing
  EXPECT_EQ(local_stream::attach(::getpid(), big.get(), cookie, s), errc::inval);
  EXPECT_FALSE(s.valid());
  util::unique_fd named(::memfd_create("something-else", MFD_CLOEXEC));
  ASSERT_TRUE(named.valid());
  EXPECT_EQ(local_stream::attach(::getpid(), named.get(), cookie, s), errc::inval);
  // Our own stream, named by its descriptor, attaches.
  util::unique_fd mine;
  local_stream a;
  ASSERT_EQ(local_stream::create(4096, 4096, cookie, a, mine), errc::ok);
  EXPECT_EQ(local_stream::attach(::getpid(), mine.get(), cookie, s), errc::ok);
  EXPECT_TRUE(s.valid());
  EXPECT_EQ(local_stream::attach(::getpid(), 1 << 20, cookie, s), errc::noent);  // no such fd
}

// Two processes: the child attaches through /proc/<parent>/fd/<n> and echoes
// 8 MiB back in odd-sized pieces; the parent checks every byte.
TEST(local_stream, two_processes_stream_through_proc) {
  util::unique_fd fd;
  local_stream a;
  ASSERT_EQ(local_stream::create(64 * 1024, 64 * 1024, cookie, a, fd), errc::ok);
  const pid_t parent = ::getpid();
  const int memfd = fd.get();
  constexpr size_t total = 8 << 20;
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    local_stream b;
    if (local_stream::attach(parent, memfd, cookie, b) != errc::ok) _exit(10);
    std::vector<char> buf(3001);
    size_t moved = 0;
    while (moved < total) {
      ssize_t r = b.read(buf.data(), buf.size());
      if (r == -EAGAIN) continue;
      if (r <= 0) _exit(11);
      size_t off = 0;
      while (off < static_cast<size_t>(r)) {
        iovec iov{buf.data() + off, static_cast<size_t>(r) - off};
        ssize_t w = b.writev(&iov, 1);
        if (w == -EAGAIN) continue;
        if (w <= 0) _exit(12);
        off += static_cast<size_t>(w);
      }
      moved += static_cast<size_t>(r);
    }
    _exit(0);
  }
  std::vector<uint8_t> out(4099), in(5003);
  size_t sent = 0, got = 0, bad = 0;
  while (got < total) {
    if (sent < total) {
      size_t n = std::min(out.size(), total - sent);
      for (size_t i = 0; i < n; ++i) out[i] = pattern(sent + i);
      iovec iov{out.data(), n};
      ssize_t w = a.writev(&iov, 1);
      if (w > 0) sent += static_cast<size_t>(w);
      else ASSERT_EQ(w, -EAGAIN);
    }
    ssize_t r = a.read(in.data(), in.size());
    if (r == -EAGAIN) continue;
    ASSERT_GT(r, 0);
    for (ssize_t i = 0; i < r; ++i) bad += in[static_cast<size_t>(i)] != pattern(got + i);
    got += static_cast<size_t>(r);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(got, total);
  EXPECT_EQ(bad, 0u);
}

// ---- pipes that grow ----

// The shared header as a peer sees it, to read and to corrupt.
struct raw_header {
  void* p;
  explicit raw_header(int fd)
      : p(::mmap(nullptr, local_layout::data_offset, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) {}
  ~raw_header() {
    if (p != MAP_FAILED) ::munmap(p, local_layout::data_offset);
  }
  local_layout::header* operator->() const { return static_cast<local_layout::header*>(p); }
};

std::vector<uint8_t> patterned(size_t from, size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = pattern(from + i);
  return v;
}

// Reads everything waiting and checks it continues the pattern at `at`.
void drain_checked(local_stream& s, size_t& at) {
  std::vector<uint8_t> buf(7777);
  for (ssize_t r; (r = s.read(buf.data(), buf.size())) > 0;) {
    for (ssize_t i = 0; i < r; ++i) ASSERT_EQ(buf[static_cast<size_t>(i)], pattern(at + i)) << at + i;
    at += static_cast<size_t>(r);
  }
}

TEST(local_stream, a_pipe_grows_only_when_a_large_write_meets_it_empty) {
  pair p(4096, 64 * 1024);
  raw_header h(p.memfd.get());
  ASSERT_NE(h.p, MAP_FAILED);
  EXPECT_EQ(p.a.capacity(), 4096u);
  EXPECT_EQ(p.a.max_capacity(), 64u * 1024);
  size_t sent = 0, got = 0;
  auto send = [&](size_t n) {
    auto v = patterned(sent, n);
    ssize_t w = put(p.a, v.data(), n);
    if (w > 0) sent += static_cast<size_t>(w);
    return w;
  };
  EXPECT_EQ(send(4000), 4000);  // fits: no growth
  EXPECT_EQ(p.a.capacity(), 4096u);
  EXPECT_EQ(send(10000), 96);  // does not fit, but the pipe is not empty
  EXPECT_EQ(p.a.capacity(), 4096u);
  drain_checked(p.b, got);
  // Empty now, and 10000 bytes do not fit: the next power of two that does.
  EXPECT_EQ(send(10000), 10000);
  EXPECT_EQ(p.a.capacity(), 16384u);
  EXPECT_EQ(h->pipe[0].cap, 16384u);  // published for the reader
  EXPECT_EQ(h->pipe[1].cap, 4096u);   // the other direction is its own
  drain_checked(p.b, got);
  // At least double, never past the span.
  EXPECT_EQ(send(17000), 17000);
  EXPECT_EQ(p.a.capacity(), 32768u);
  drain_checked(p.b, got);
  EXPECT_EQ(send(1 << 20), 64 * 1024);
  EXPECT_EQ(p.a.capacity(), 64u * 1024);
  drain_checked(p.b, got);
  EXPECT_EQ(got, sent);
  // The reader's wrap uses the ring size the bytes were written with: a
  // write that straddles the end of the grown ring.
  EXPECT_EQ(send(50000), 50000);
  drain_checked(p.b, got);
  EXPECT_EQ(send(50000), 50000);
  drain_checked(p.b, got);
  EXPECT_EQ(got, sent);
  EXPECT_FALSE(p.a.growth_refused());
}

// What an idle stream costs is what it cost before pipes grew: the header's
// page and each pipe's first bytes; the rest of the file is a hole.
TEST(local_stream, an_idle_stream_reserves_only_its_first_pipes) {
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  std::string modes;
  std::getline(thp, modes);
  if (modes.find("[never]") == std::string::npos && modes.find("[advise]") == std::string::npos &&
      !modes.empty())
    GTEST_SKIP() << "huge pages may back a memfd here (" << modes << "): its blocks differ";
  pair p(16 * 1024, 1 << 20);
  struct stat st{};
  ASSERT_EQ(::fstat(p.memfd.get(), &st), 0);
  EXPECT_EQ(st.st_size, static_cast<off_t>(4096 + 2 * (1 << 20)));
  EXPECT_EQ(st.st_blocks * 512, 4096 + 2 * 16 * 1024);
  // Growing reserves the new part of that one pipe.
  std::vector<char> big(100000, 'g');
  EXPECT_EQ(put(p.b, big.data(), big.size()), 100000);
  EXPECT_EQ(p.b.capacity(), 128u * 1024);
  ASSERT_EQ(::fstat(p.memfd.get(), &st), 0);
  EXPECT_EQ(st.st_blocks * 512, 4096 + 16 * 1024 + 128 * 1024);
}

TEST(local_stream, a_refused_growth_leaves_the_pipe_as_it_was) {
  pair p(4096, 64 * 1024);
  raw_header h(p.memfd.get());
  ASSERT_NE(h.p, MAP_FAILED);
  ASSERT_EQ(local_stream_probe::forbid_growth(p.a, true), 0);
  size_t sent = 0, got = 0;
  for (int round = 0; round < 3; ++round) {
    auto v = patterned(sent, 10000);
    EXPECT_EQ(put(p.a, v.data(), v.size()), 4096);  // what the small ring holds
    sent += 4096;
    EXPECT_TRUE(p.a.growth_refused());
    EXPECT_EQ(p.a.capacity(), 4096u);
    EXPECT_EQ(h->pipe[0].cap, 4096u);  // nothing published
    drain_checked(p.b, got);
  }
  EXPECT_EQ(got, sent);
  ASSERT_EQ(local_stream_probe::forbid_growth(p.a, false), 0);
}

TEST(local_stream, a_corrupt_ring_size_is_an_error_not_a_read_out_of_bounds) {
  char buf[64];
  // Not a power of two; beyond the span; below where it was (rings only
  // grow); then a tail past the ring size just loaded.
  for (uint64_t bad : {uint64_t{12288}, uint64_t{128 * 1024}, uint64_t{2048}, uint64_t{0}}) {
    pair p(4096, 64 * 1024);
    raw_header h(p.memfd.get());
    ASSERT_NE(h.p, MAP_FAILED);
    EXPECT_EQ(put(p.a, "abc", 3), 3);
    h->pipe[0].cap = bad;
    EXPECT_EQ(p.b.read(buf, sizeof buf), -EIO) << bad;
    EXPECT_EQ(p.b.readable(), 0u);
  }
  {
    pair p(4096, 64 * 1024);
    raw_header h(p.memfd.get());
    h->pipe[0].cap = 8192;  // a size that may be, with a tail it cannot hold
    h->pipe[0].tail = 8193;
    EXPECT_EQ(p.b.read(buf, sizeof buf), -EIO);
  }
  // A ring size that changes while bytes the reader saw are unread: an
  // honest writer changes it only when the pipe is empty.
  {
    pair p(4096, 64 * 1024);
    raw_header h(p.memfd.get());
    EXPECT_EQ(put(p.a, "abcdef", 6), 6);
    EXPECT_EQ(p.b.read(buf, 2), 2);
    h->pipe[0].cap = 8192;
    EXPECT_EQ(p.b.read(buf, sizeof buf), -EIO);
  }
  // The same change once the reader took everything is growth.
  {
    pair p(4096, 64 * 1024);
    raw_header h(p.memfd.get());
    EXPECT_EQ(put(p.a, "abcdef", 6), 6);
    EXPECT_EQ(p.b.read(buf, sizeof buf), 6);
    h->pipe[0].cap = 8192;
    EXPECT_EQ(p.b.read(buf, sizeof buf), -EAGAIN);
  }
}

// The attacher checks the fields growth added: the smallest ring, and its
// own pipe's ring size as the creator left it.
TEST(local_stream, attach_checks_the_ring_sizes) {
  util::unique_fd fd;
  local_stream a;
  ASSERT_EQ(local_stream::create(8192, 64 * 1024, cookie, a, fd), errc::ok);
  const off_t size = 4096 + 2 * 64 * 1024;
  auto with = [&](auto change) {
    util::unique_fd f(::memfd_create("weft-tcp-local", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    local_layout::header h{};
    EXPECT_EQ(::pread(fd.get(), &h, sizeof h, 0), static_cast<ssize_t>(sizeof h));
    change(h);
    EXPECT_EQ(::ftruncate(f.get(), size), 0);
    EXPECT_EQ(::pwrite(f.get(), &h, sizeof h, 0), static_cast<ssize_t>(sizeof h));
    EXPECT_EQ(::fcntl(f.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    local_stream b;
    return local_stream::attach_fd(f.get(), cookie, b);
  };
  EXPECT_EQ(with([](local_layout::header&) {}), errc::ok);
  EXPECT_EQ(with([](local_layout::header& h) { h.pipe_min = 12288; }), errc::inval);
  EXPECT_EQ(with([](local_layout::header& h) { h.pipe_min = 128 * 1024; }), errc::inval);
  EXPECT_EQ(with([](local_layout::header& h) { h.pipe_min = 2048; }), errc::inval);
  EXPECT_EQ(with([](local_layout::header& h) { h.pipe[1].cap = 16384; }), errc::inval);
  EXPECT_EQ(with([](local_layout::header& h) { h.version = 1; }), errc::inval);
}

// Two threads, random write and read sizes, growth in the middle of the
// stream (a fresh pair per round: a ring grows only a few times): every
// byte arrives once, in order.
void stream_between_two_threads(unsigned seed) {
  pair p(4096, 256 * 1024);
  constexpr size_t total = size_t{2} << 20;
  std::atomic<bool> failed{false};
  std::thread writer([&] {
    std::mt19937 rng(seed);
    std::vector<uint8_t> buf;
    size_t sent = 0;
    while (sent < total && !failed) {
      // Mostly small writes, now and then one larger than the ring.
      size_t n = rng() % 8 == 0 ? 1 + rng() % 300000 : 1 + rng() % 5000;
      n = std::min(n, total - sent);
      buf = patterned(sent, n);
      size_t cut = n / 3;  // two iovecs
      for (size_t off = 0; off < n;) {
        iovec iov[2];
        int k = 0;
        if (off < cut) iov[k++] = {buf.data() + off, cut - off};
        iov[k++] = {buf.data() + std::max(off, cut), n - std::max(off, cut)};
        ssize_t w = p.a.writev(iov, k);
        if (w == -EAGAIN) {
          std::this_thread::yield();
          continue;
        }
        if (w <= 0) {
          failed = true;
          return;
        }
        off += static_cast<size_t>(w);
      }
      sent += n;
    }
  });
  std::mt19937 rng(seed + 1);
  std::vector<uint8_t> buf(300000);
  size_t got = 0, bad = 0;
  while (got < total && !failed) {
    size_t len = 1 + rng() % (rng() % 4 == 0 ? buf.size() : 3000);
    ssize_t r = p.b.read(buf.data(), len);
    if (r == -EAGAIN) {
      std::this_thread::yield();
      continue;
    }
    if (r <= 0) {
      failed = true;
      break;
    }
    for (ssize_t i = 0; i < r; ++i) bad += buf[static_cast<size_t>(i)] != pattern(got + i);
    got += static_cast<size_t>(r);
  }
  writer.join();
  EXPECT_FALSE(failed) << seed;
  EXPECT_EQ(got, total) << seed;
  EXPECT_EQ(bad, 0u) << seed;
  EXPECT_GT(p.a.capacity(), 4096u) << seed;  // it grew on the way
}

TEST(local_stream, bytes_stay_in_order_across_growth_between_two_threads) {
  for (unsigned seed = 1; seed <= 12; ++seed) stream_between_two_threads(seed);
}

}  // namespace
}  // namespace weft::tcp
