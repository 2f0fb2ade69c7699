// SPDX-License-Identifier: MIT
// weft — conformance: the CPU time of this process's progress threads (the
// library names them weft-progress), read from /proc.
#pragma once

#include <dirent.h>
#include <sys/types.h>
#include <time.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace conformance {

// In ms; `found` gets how many there are. Each thread's clock is Linux's
// per-thread CPU clock of its id (clock_getcpuclockid wants a pthread_t,
// which another's thread does not give us).
inline double progress_threads_cpu_ms(int& found) {
  found = 0;
  double ms = 0;
  DIR* d = opendir("/proc/self/task");
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name != "weft-progress") continue;
    const pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
    // MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED): ~tid << 3 | per-thread | sched.
    const clockid_t clock = static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 4 | 2);
    timespec ts{};
    if (clock_gettime(clock, &ts) != 0) continue;
    ++found;
    ms += static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
  }
  closedir(d);
  return ms;
}

// How many times this process's progress threads went to sleep (their
// voluntary context switches, summed): what tells a thread that ticks from
// one that spins when its CPU time is too high.
inline long progress_threads_sleeps() {
  long n = 0;
  DIR* d = opendir("/proc/self/task");
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string dir = std::string("/proc/self/task/") + e->d_name;
    std::ifstream comm(dir + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name != "weft-progress") continue;
    std::ifstream status(dir + "/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0)
        n += std::atol(line.c_str() + sizeof "voluntary_ctxt_switches:" - 1);
  }
  closedir(d);
  return n;
}

}  // namespace conformance
