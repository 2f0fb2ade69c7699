// SPDX-License-Identifier: MIT
// weft — who a local peer is, whether it is still alive, and whether we may
// copy from its memory directly.
//
// A process is identified by (pid, start time): the start time is field 22
// of /proc/<pid>/stat (clock ticks after boot), which a new process reusing
// the pid cannot have. Regions and claim entries record both (proto.hpp).
//
// Liveness: a pidfd (pidfd_open) when the kernel has it — it refers to one
// process for good, so pid reuse cannot fool it, and it becomes readable when
// that process exits (zombies included). Without pidfd_open (ENOSYS, kernels
// before 5.3) kill(pid, 0) plus /proc/<pid>/stat: gone, zombie, or a
// different start time all mean dead. Either way the check is a system call,
// so alive() only makes it every `interval` calls, or on the next call after
// suspect() (a ring found full or stalled for long). No signal handler is
// ever installed: nothing here relies on SIGCHLD or on being a parent.
//
// A pidfd is one file descriptor per peer; a provider that keeps 1024 peers
// must budget RLIMIT_NOFILE for it or ask for liveness_mode::proc.
#pragma once

#include "util/fd.hpp"

#include <sys/types.h>

#include <array>
#include <cstdint>

namespace weft::shm {

// What /proc/<pid>/stat says about a process.
struct proc_status {
  bool exists = false;
  bool zombie = false;       // state Z or X: exited, not yet reaped
  uint64_t start_time = 0;   // field 22
};
proc_status read_proc_status(pid_t pid) noexcept;

// Field 22 of /proc/<pid>/stat; 0 when the process does not exist.
uint64_t process_start_time(pid_t pid) noexcept;

// The inode of /proc/self/ns/pid: pids mean something only inside one PID
// namespace, so region names and identities carry it. 0 when unknown.
uint64_t pid_namespace_id() noexcept;

enum class liveness_mode : uint8_t {
  automatic,  // a pidfd if pidfd_open works (ENOSYS, EMFILE...: proc)
  proc,       // kill(pid, 0) + /proc/<pid>/stat, no file descriptor held
};

class peer_liveness {
 public:
  static constexpr uint32_t default_interval = 4096;

  peer_liveness() = default;  // not alive: refers to no process
  // `start_time` as recorded by the peer (0: do not compare). A process that
  // is already gone, or holds `pid` with another start time, is dead from
  // the start.
  peer_liveness(pid_t pid, uint64_t start_time, uint32_t interval = default_interval,
                liveness_mode mode = liveness_mode::automatic) noexcept;
  peer_liveness(peer_liveness&&) noexcept = default;
  peer_liveness& operator=(peer_liveness&&) noexcept = default;

  // The cached answer; every `interval` calls (or the call after suspect())
  // it is refreshed with one system call. Once dead, always dead.
  bool alive() noexcept {
    if (!alive_) return false;
    if (--countdown_ != 0) return true;
    return check_now();
  }
  // Makes the next alive() ask the kernel.
  void suspect() noexcept { countdown_ = 1; }
  // Asks the kernel now (one or two system calls).
  bool check_now() noexcept;

  pid_t pid() const noexcept { return pid_; }
  uint64_t start_time() const noexcept { return start_time_; }
  bool uses_pidfd() const noexcept { return pidfd_.valid(); }
  // Readable once the peer has exited: a provider may add it to its wait set.
  int pidfd() const noexcept { return pidfd_.get(); }

 private:
  bool check_proc() noexcept;

  util::unique_fd pidfd_;
  pid_t pid_ = 0;
  uint64_t start_time_ = 0;
  uint32_t interval_ = 1;
  uint32_t countdown_ = 1;
  bool alive_ = false;
};

// Single-copy transfers: may this process use process_vm_readv/writev on
// `peer`? The kernel decides with the ptrace access rules (same uid and
// dumpable, or CAP_SYS_PTRACE, and Yama's ptrace_scope), and a seccomp filter
// or a kernel without CONFIG_CROSS_MEMORY_ATTACH may refuse it altogether.
enum class cma_status : uint8_t {
  unknown = 0,
  available,    // a copy works (or failed only on the address: rights are there)
  denied,       // EPERM/EACCES: use the bounce buffers
  unsupported,  // ENOSYS: use the bounce buffers
  gone,         // ESRCH: no such process
};

// One process_vm_readv of one byte at `remote_addr` in `peer`. With the
// default null address the read fails with EFAULT exactly when the access
// check passed, which answers the question without knowing the peer's memory.
cma_status cma_probe(pid_t peer, const void* remote_addr = nullptr) noexcept;

// Remembers the answer per peer pid (a fixed table, no allocation after
// construction; not thread-safe: used under the provider's lock). A peer
// found gone is not remembered; forget() a peer when it dies so that a
// process later reusing its pid is probed afresh.
class cma_cache {
 public:
  bool cma_available(pid_t peer) noexcept { return status(peer) == cma_status::available; }
  cma_status status(pid_t peer) noexcept;
  void forget(pid_t peer) noexcept;
  uint64_t probes() const noexcept { return probes_; }  // system calls made so far

 private:
  struct entry {
    pid_t pid = 0;
    cma_status status = cma_status::unknown;
  };
  static constexpr size_t capacity = 2048;  // a power of two, > 1024 peers
  entry* find(pid_t peer) noexcept;

  std::array<entry, capacity> table_{};
  uint64_t probes_ = 0;
};

}  // namespace weft::shm
