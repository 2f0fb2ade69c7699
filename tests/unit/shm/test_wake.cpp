// SPDX-License-Identifier: MIT
// weft — the shm wake FIFO: made 0600 next to its region, written by a
// sender, read empty by its owner, gone with it; left-over FIFOs of dead
// owners are reclaimed, nothing else is.
#include "prov/shm/peer.hpp"
#include "prov/shm/wake.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace weft::shm {
namespace {

struct temp_dir {
  std::string path;
  temp_dir() {
    char t[] = "/tmp/weft-wake-XXXXXX";
    path = ::mkdtemp(t);
  }
  ~temp_dir() { std::system(("rm -rf " + path).c_str()); }
};

std::string suffix(pid_t pid, unsigned index) {
  char b[96];
  std::snprintf(b, sizeof b, "%u-%" PRIu64 "-%d-%u", static_cast<unsigned>(::geteuid()),
                pid_namespace_id(), static_cast<int>(pid), index);
  return b;
}

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

bool exists(const std::string& p) {
  struct stat sb;
  return ::lstat(p.c_str(), &sb) == 0;
}

TEST(shm_wake, names_follow_the_region) {
  EXPECT_EQ(wake_name("weft-shm-0-42-7-1"), "weft-shmw-0-42-7-1");
}

TEST(shm_wake, a_sender_wakes_the_owner_and_the_owner_reads_it_empty) {
  temp_dir d;
  std::string region = "weft-shm-" + suffix(::getpid(), 9);
  std::string path = d.path + "/" + wake_name(region);
  {
    wake_fifo f;
    ASSERT_EQ(f.create(d.path, region, nullptr), errc::ok);
    struct stat sb;
    ASSERT_EQ(::stat(path.c_str(), &sb), 0);
    EXPECT_TRUE(S_ISFIFO(sb.st_mode));
    EXPECT_EQ(sb.st_mode & 0777, 0600u);
    // Open for reading with no sender yet: idle, and no hangup either.
    pollfd p{f.fd(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 0), 0);
    util::unique_fd w;
    ASSERT_TRUE(wake_owner(w, d.path, region));
    EXPECT_TRUE(readable(f.fd()));
    for (int i = 0; i < 1000; ++i) ASSERT_TRUE(wake_owner(w, d.path, region));
    f.drain();
    EXPECT_FALSE(readable(f.fd()));
    // The sender closing its end is no hangup for the owner either.
    w.reset();
    EXPECT_EQ(::poll(&p, 1, 0), 0);
  }
  EXPECT_FALSE(exists(path)) << "unlinked with its owner";
}

// A sender that wakes an owner gone since it opened the FIFO (the owner's
// endpoint closed, or its process died) is told so, and its process lives:
// the write's EPIPE comes with a SIGPIPE whose default action kills, so
// this runs in a child whose end is checked.
TEST(shm_wake, waking_an_owner_that_left_raises_no_sigpipe) {
  temp_dir d;
  std::string region = "weft-shm-" + suffix(::getpid(), 11);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGPIPE, SIG_DFL);
    util::unique_fd w;
    {
      wake_fifo f;
      if (f.create(d.path, region, nullptr) != errc::ok) ::_exit(2);
      if (!wake_owner(w, d.path, region)) ::_exit(3);
    }  // the owner leaves: its read end closes
    if (wake_owner(w, d.path, region)) ::_exit(4);  // told: no reader
    sigset_t pending;
    sigpending(&pending);
    ::_exit(sigismember(&pending, SIGPIPE) ? 5 : 0);  // and nothing left pending
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_FALSE(WIFSIGNALED(status)) << "killed by signal " << WTERMSIG(status);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(shm_wake, only_a_fifo_is_written) {
  temp_dir d;
  std::string region = "weft-shm-" + suffix(::getpid(), 3);
  util::unique_fd w;
  EXPECT_FALSE(wake_owner(w, d.path, region)) << "no FIFO at all";
  // A regular file (or anything else) under that name is left alone.
  std::string path = d.path + "/" + wake_name(region);
  util::unique_fd f{::open(path.c_str(), O_CREAT | O_WRONLY, 0600)};
  ASSERT_TRUE(f.valid());
  EXPECT_FALSE(wake_owner(w, d.path, region));
  EXPECT_FALSE(w.valid());
  struct stat sb;
  ASSERT_EQ(::stat(path.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_size, 0);
}

TEST(shm_wake, fifos_without_their_region_are_reclaimed) {
  temp_dir d;
  auto fifo = [&](const std::string& name) { return ::mkfifo((d.path + "/" + name).c_str(), 0600); };
  std::string orphan = "weft-shmw-" + suffix(4000001, 1);  // no region: left over
  std::string kept = "weft-shmw-" + suffix(4000002, 1);    // its region exists
  std::string other = "weft-shmw-99999-1-4000003-1";       // another user's namespace
  std::string plain = "weft-shmw-" + suffix(4000004, 1);   // not a FIFO
  ASSERT_EQ(fifo(orphan), 0);
  ASSERT_EQ(fifo(kept), 0);
  ASSERT_EQ(fifo(other), 0);
  util::unique_fd r{::open((d.path + "/weft-shm-" + suffix(4000002, 1)).c_str(),
                           O_CREAT | O_WRONLY, 0600)};
  util::unique_fd p{::open((d.path + "/" + plain).c_str(), O_CREAT | O_WRONLY, 0600)};
  ASSERT_TRUE(r.valid() && p.valid());
  EXPECT_EQ(reclaim_stale_fifos(d.path, nullptr), 1u);
  EXPECT_FALSE(exists(d.path + "/" + orphan));
  EXPECT_TRUE(exists(d.path + "/" + kept));
  EXPECT_TRUE(exists(d.path + "/" + other));
  EXPECT_TRUE(exists(d.path + "/" + plain));
}

}  // namespace
}  // namespace weft::shm
