// SPDX-License-Identifier: MIT
// libexs: the library's state, the fabric contexts sockets run on (one per
// provider, fabric and domain, chosen by the socket's EXS_SO_PROVIDER or
// EXS_PROVIDER), and the progress thread that reads their queues.
#include "exs_impl.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace exs {

library& lib() {
  // Never destroyed: the progress thread may still run at exit.
  static library* l = new library;
  return *l;
}

int errno_of_fi(int e) {
  if (e < 0) e = -e;
  if (e == FI_ETRUNC) return EMSGSIZE;
  if (e == FI_ECONNREFUSED) return ECONNREFUSED;
  if (e == FI_ETIMEDOUT) return ETIMEDOUT;
  if (e > 0 && e < 256) return e;  // FI_E* below 256 are errno values
  return EIO;
}

namespace {

fi_info* hints_for(const std::string& prov, int family) {
  fi_info* h = fi_allocinfo();
  if (!h) return nullptr;
  h->ep_attr->type = FI_EP_MSG;
  h->caps = FI_MSG | FI_RMA | FI_SEND | FI_RECV | FI_WRITE | FI_REMOTE_WRITE;
  // Contexts carry FI_CONTEXT2 space. FI_RX_CQ_DATA is not offered: a
  // provider whose remote CQ data would consume a posted receive (and so
  // land in an application's buffer) is not chosen.
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
  h->domain_attr->threading = FI_THREAD_SAFE;
  h->addr_format = family == AF_INET6 ? FI_SOCKADDR_IN6 : FI_SOCKADDR_IN;
  if (!prov.empty()) h->fabric_attr->prov_name = strdup(prov.c_str());
  return h;
}

void* copy_addr(const sockaddr* a, size_t* len) {
  size_t n = a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  void* p = std::malloc(n);
  if (p) std::memcpy(p, a, n);
  *len = n;
  return p;
}

int wait_fd_of(fid_t f) {
  int fd = -1;
  if (fi_control(f, FI_GETWAIT, &fd) != 0) return -1;
  return fd;
}

void close_ctx(fabric_ctx* fc) {
  if (fc->cq) fi_close(&fc->cq->fid);
  if (fc->eq) fi_close(&fc->eq->fid);
  if (fc->domain) fi_close(&fc->domain->fid);
  if (fc->fabric) fi_close(&fc->fabric->fid);
  fi_freeinfo(fc->info);
  delete fc;
}

fabric_ctx* open_ctx(fi_info* info, int* err) {
  auto* fc = new fabric_ctx;
  fc->prov = info->fabric_attr->prov_name ? info->fabric_attr->prov_name : "";
  fc->fabric_name = info->fabric_attr->name ? info->fabric_attr->name : "";
  fc->domain_name = info->domain_attr->name ? info->domain_attr->name : "";
  fc->info = fi_dupinfo(info);
  int mm = info->domain_attr->mr_mode;
  fc->mr_local = mm & FI_MR_LOCAL;
  fc->mr_prov_key = mm & FI_MR_PROV_KEY;
  fc->mr_virt = mm & FI_MR_VIRT_ADDR;
  int r = fi_fabric(info->fabric_attr, &fc->fabric, nullptr);
  if (r == 0) r = fi_domain(fc->fabric, info, &fc->domain, nullptr);
  if (r == 0) {
    fi_eq_attr ea{};
    ea.size = 4096;
    ea.wait_obj = FI_WAIT_FD;
    r = fi_eq_open(fc->fabric, &ea, &fc->eq, nullptr);
  }
  if (r == 0) {
    fi_cq_attr ca{};
    ca.size = fc->cq_size = 65536;
    ca.format = FI_CQ_FORMAT_DATA;
    ca.wait_obj = FI_WAIT_FD;
    r = fi_cq_open(fc->domain, &ca, &fc->cq, nullptr);
  }
  if (r == 0) {
    fc->eq_fd = wait_fd_of(&fc->eq->fid);
    fc->cq_fd = wait_fd_of(&fc->cq->fid);
    if (fc->eq_fd < 0 || fc->cq_fd < 0) r = -FI_ENOSYS;
  }
  if (r != 0) {
    std::fprintf(stderr, "libexs: cannot open provider %s (fabric %s): %s\n", fc->prov.c_str(),
                 fc->fabric_name.c_str(), fi_strerror(-r));
    close_ctx(fc);
    *err = errno_of_fi(r);
    return nullptr;
  }
  return fc;
}

std::thread* progress_thread = nullptr;
bool stopping = false;

void progress_loop() {
  library& L = lib();
  std::unique_lock lk(L.m);
  epoll_event evs[16];
  while (!stopping) {
    progress_pass(L);
    // A thread spins in exs_qdequeue: it drives progress; we sleep, armed
    // on nothing but the kick, until its lease ends or it kicks us.
    const auto now = std::chrono::steady_clock::now();
    if (L.spin_lease > now) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(L.spin_lease - now);
      lk.unlock();
      pollfd p{L.kick_fd, POLLIN, 0};
      if (poll(&p, 1, int(left.count())) > 0) {
        uint64_t v;
        [[maybe_unused]] ssize_t r = read(L.kick_fd, &v, sizeof v);
      }
      lk.lock();
      continue;
    }
    // Sleep only when every queue is empty (fi_trywait), so nothing that
    // arrived before the wait fds were armed is missed.
    bool busy = false;
    for (fabric_ctx* fc : L.fabrics) {
      fid* fids[2] = {&fc->cq->fid, &fc->eq->fid};
      if (fi_trywait(fc->fabric, fids, 2) == -FI_EAGAIN) busy = true;
    }
    if (busy) continue;
    int timeout = L.retry.empty() ? -1 : 1;
    lk.unlock();
    int n = epoll_wait(L.epfd, evs, 16, timeout);
    for (int i = 0; i < n; ++i)
      if (evs[i].data.ptr == nullptr) {
        uint64_t v;
        [[maybe_unused]] ssize_t r = read(L.kick_fd, &v, sizeof v);
      }
    lk.lock();
  }
}

}  // namespace

void progress_pass(library& L) {
  for (size_t i = 0; i < L.fabrics.size(); ++i) {
    fabric_ctx* fc = L.fabrics[i];
    handle_cq(fc);
    handle_eq(fc);
    handle_cq(fc);
  }
  if (!L.retry.empty()) {
    std::vector<sock*> again;
    again.swap(L.retry);
    for (sock* s : again) pump(s);
  }
}

void kick();

void start_progress() {
  library& L = lib();
  if (L.thread_started) return;
  long spin_us = 200;  // docs/decisions.md, "Extended sockets": why 200
  if (const char* e = std::getenv("EXS_SPIN_US")) spin_us = std::strtol(e, nullptr, 10);
  L.spin = std::chrono::microseconds(std::clamp(spin_us, 0L, 1'000'000L));
  L.epfd = epoll_create1(EPOLL_CLOEXEC);
  L.kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;
  epoll_ctl(L.epfd, EPOLL_CTL_ADD, L.kick_fd, &ev);
  progress_thread = new std::thread(progress_loop);
  L.thread_started = true;
}

// At exit (or dlclose) the thread stops before libfabric.so.1, which is
// finalized after this library, tears its objects down.
__attribute__((destructor)) static void stop_progress() {
  if (!progress_thread) return;
  {
    std::lock_guard g{lib().m};
    stopping = true;
    kick();
  }
  progress_thread->join();
  delete progress_thread;
  progress_thread = nullptr;
}

bool on_this_host(const sockaddr_storage& a) {
  const void* bytes = nullptr;
  size_t len = 0;
  if (a.ss_family == AF_INET) {
    auto& in = reinterpret_cast<const sockaddr_in&>(a);
    if ((ntohl(in.sin_addr.s_addr) >> 24) == 127) return true;
    bytes = &in.sin_addr;
    len = sizeof in.sin_addr;
  } else if (a.ss_family == AF_INET6) {
    auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    if (IN6_IS_ADDR_LOOPBACK(&in6.sin6_addr)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr) && in6.sin6_addr.s6_addr[12] == 127) return true;
    bytes = &in6.sin6_addr;
    len = sizeof in6.sin6_addr;
  } else {
    return false;
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* i = list; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != a.ss_family) continue;
    const void* mine = a.ss_family == AF_INET
                           ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr)
                           : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr);
    found = std::memcmp(mine, bytes, len) == 0;
  }
  freeifaddrs(list);
  return found;
}

void kick() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t r = write(lib().kick_fd, &one, sizeof one);
}

// While a thread spins in exs_qdequeue it drives progress, and the progress
// thread sleeps until the lease ends (at most 2 ms) or the spinner gives up.
// Kicking it for every post only woke it to find the spinner there: it
// preempted the posting thread on its core, made a pass and slept again:
// two context switches and an eventfd write a message (docs/decisions.md,
// "Extended sockets").
void nudge() {
  library& L = lib();
  if (L.spin_lease > std::chrono::steady_clock::now()) return;
  kick();
}

fabric_ctx* fabric_for(const std::string& prov_in, int family, const sockaddr* src,
                       const sockaddr* dst, fi_info** out_info, int* err) {
  library& L = lib();
  std::string prov = prov_in;
  if (prov.empty())
    if (const char* e = std::getenv("EXS_PROVIDER")) prov = e;
  fi_info* h = hints_for(prov, family);
  if (!h) return *err = ENOMEM, nullptr;
  if (src) h->src_addr = copy_addr(src, &h->src_addrlen);
  if (dst) h->dest_addr = copy_addr(dst, &h->dest_addrlen);
  fi_info* list = nullptr;
  int r = fi_getinfo(api_version(), nullptr, nullptr, 0, h, &list);
  fi_freeinfo(h);
  if (r != 0) {
    *err = prov.empty() ? ENETUNREACH : ENODEV;
    return nullptr;
  }
  fi_info* pick = nullptr;
  for (fi_info* i = list; i && !pick; i = i->next)
    if (i->domain_attr->cq_data_size >= 8 && !(i->mode & FI_RX_CQ_DATA)) pick = i;
  if (!pick) {
    fi_freeinfo(list);
    *err = prov.empty() ? ENETUNREACH : ENODEV;
    return nullptr;
  }
  fabric_ctx* fc = nullptr;
  for (fabric_ctx* f : L.fabrics)
    if (f->prov == (pick->fabric_attr->prov_name ? pick->fabric_attr->prov_name : "") &&
        f->fabric_name == (pick->fabric_attr->name ? pick->fabric_attr->name : "") &&
        f->domain_name == (pick->domain_attr->name ? pick->domain_attr->name : ""))
      fc = f;
  if (!fc) {
    fc = open_ctx(pick, err);
    if (!fc) {
      fi_freeinfo(list);
      return nullptr;
    }
    start_progress();
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = fc;
    epoll_ctl(L.epfd, EPOLL_CTL_ADD, fc->cq_fd, &ev);
    epoll_ctl(L.epfd, EPOLL_CTL_ADD, fc->eq_fd, &ev);
    L.fabrics.push_back(fc);
    kick();
  }
  fi_info* mine = fi_dupinfo(pick);
  fi_freeinfo(list);
  if (src) {  // the exact address asked for, whatever the entry names
    std::free(mine->src_addr);
    mine->src_addr = copy_addr(src, &mine->src_addrlen);
  }
  *out_info = mine;
  return fc;
}

}  // namespace exs

EXS_API exs_version_t exs_init(exs_version_t requested) {
  // One version is implemented; any other request gets it as the offer.
  (void)requested;
  return EXS_VERSION1;
}
