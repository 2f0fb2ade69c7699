// SPDX-License-Identifier: MIT
// weft — conformance tests with several processes: memory shared with
// forked children (made before the fork), and children reaped or killed
// whatever way the test leaves.
#pragma once

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <new>

namespace conformance {

// A T in anonymous shared memory, value-initialised; nullptr on failure.
template <class T>
T* shared_map() {
  void* p = mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : new (p) T{};
}
template <class T>
void shared_unmap(T* p) {
  if (p) munmap(p, sizeof(T));
}
template <class T>
struct shared_guard {
  T* p;
  ~shared_guard() { shared_unmap(p); }
};

// The child's exit code, or 128 + the signal that ended it; -1 if not ours.
inline int exit_code(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Kills and reaps a child that is still ours when the test leaves early.
struct child_guard {
  pid_t pid = -1;
  ~child_guard() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  int reap() {
    int rc = exit_code(pid);
    pid = -1;
    return rc;
  }
};

}  // namespace conformance
