// SPDX-License-Identifier: MIT
// weft — av_scale: the cost of an address vector with many IPv4 peers.
//
// Opens an FI_AV_TABLE on the named provider (FI_SOCKADDR_IN addresses),
// inserts N distinct sockaddr_in peers in batches with fi_av_insert, and
// reports the time per insert and the memory per peer (growth of the
// resident set, and of the malloc heap). Only the public libfabric API is
// used, so the same source builds against Debian's libfabric and runs on
// either library:
//
//   g++ -O2 bench/av_scale.cpp -o av_scale -lfabric
//   ./av_scale -p udp                                   # the system library
//   LD_LIBRARY_PATH=build/src ./av_scale -p udp          # weft
//
// Options: -p provider (udp), -n peers (1000000), -b batch (1000),
//          -c fi_av_attr.count hint (default: the number of peers; -c 0 makes
//          the AV grow from nothing).
//
// After the timed inserts every peer's fi_addr is checked (FI_AV_TABLE:
// insertion order) and every address is read back with fi_av_lookup and
// compared with what was inserted. Any libfabric error or mismatch exits 1
// with a message on stderr and prints no number.
#include <arpa/inet.h>
#include <malloc.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

namespace {

struct options {
  const char* prov = "udp";
  size_t peers = 1000000;
  size_t batch = 1000;
  long long count_hint = -1;  // -1: the number of peers
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [-p provider] [-n peers] [-b batch] [-c count_hint]\n", argv0);
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  int c;
  while ((c = getopt(argc, argv, "p:n:b:c:h")) != -1) {
    switch (c) {
      case 'p':
        o.prov = optarg;
        break;
      case 'n':
        o.peers = std::strtoull(optarg, nullptr, 0);
        break;
      case 'b':
        o.batch = std::strtoull(optarg, nullptr, 0);
        break;
      case 'c':
        o.count_hint = std::strtoll(optarg, nullptr, 0);
        break;
      default:
        usage(argv[0]);
    }
  }
  if (!o.peers || !o.batch || o.peers > (size_t{1} << 24)) usage(argv[0]);
  return o;
}

double now_ns(clockid_t clock) {
  timespec t;
  clock_gettime(clock, &t);
  return double(t.tv_sec) * 1e9 + double(t.tv_nsec);
}

// Resident set size in bytes (/proc/self/statm, second field, in pages).
size_t rss_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  if (std::fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
  std::fclose(f);
  return resident * size_t(sysconf(_SC_PAGESIZE));
}

// Bytes the malloc heap hands out (small blocks and mmap'd large ones).
size_t heap_bytes() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
#else
  return 0;
#endif
}

int fail(const char* what, int rc) {
  std::fprintf(stderr, "av_scale: %s: %s (%d)\n", what, fi_strerror(-rc), rc);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  options o = parse(argc, argv);

  fi_info* hints = fi_allocinfo();
  if (!hints) return fail("fi_allocinfo", -FI_ENOMEM);
  hints->fabric_attr->prov_name = strdup(o.prov);
  hints->addr_format = FI_SOCKADDR_IN;
  hints->domain_attr->av_type = FI_AV_TABLE;
  hints->mode = ~0ULL;  // nothing is transferred: any mode is fine
  fi_info* info = nullptr;
  int rc = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info);
  fi_freeinfo(hints);
  if (rc) return fail("fi_getinfo", rc);
  // The provider itself, not a utility provider layered over it ("udp;ofi_rxd").
  fi_info* pick = info;
  while (pick && std::strcmp(pick->fabric_attr->prov_name, o.prov) != 0) pick = pick->next;
  if (!pick) {
    std::fprintf(stderr, "av_scale: no %s fabric without a layered provider\n", o.prov);
    return 1;
  }

  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  if ((rc = fi_fabric(pick->fabric_attr, &fabric, nullptr))) return fail("fi_fabric", rc);
  if ((rc = fi_domain(fabric, pick, &domain, nullptr))) return fail("fi_domain", rc);

  // The peers, built (and their pages touched) before the baseline.
  std::vector<sockaddr_in> peers(o.peers);
  for (size_t i = 0; i < o.peers; ++i) {
    sockaddr_in& sa = peers[i];
    std::memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(uint32_t(0x0a000000u + i));  // 10.0.0.0/8
    sa.sin_port = htons(uint16_t(1024 + i % 50000));
  }
  std::vector<fi_addr_t> fi_addrs(o.peers);
  std::memset(fi_addrs.data(), 0xff, fi_addrs.size() * sizeof(fi_addr_t));

  size_t rss0 = rss_bytes(), heap0 = heap_bytes();
  double wall0 = now_ns(CLOCK_MONOTONIC), cpu0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);

  fi_av_attr attr{};
  attr.type = FI_AV_TABLE;
  attr.count = o.count_hint < 0 ? o.peers : size_t(o.count_hint);
  if ((rc = fi_av_open(domain, &attr, &av, nullptr))) return fail("fi_av_open", rc);
  for (size_t i = 0; i < o.peers; i += o.batch) {
    size_t n = o.peers - i < o.batch ? o.peers - i : o.batch;
    rc = fi_av_insert(av, &peers[i], n, &fi_addrs[i], 0, nullptr);
    if (rc != int(n)) {
      std::fprintf(stderr, "av_scale: fi_av_insert at %zu: %d of %zu inserted\n", i, rc, n);
      return 1;
    }
  }

  double wall1 = now_ns(CLOCK_MONOTONIC), cpu1 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
  size_t rss1 = rss_bytes(), heap1 = heap_bytes();

  // FI_AV_TABLE: indices in insertion order; every address read back.
  for (size_t i = 0; i < o.peers; ++i) {
    if (fi_addrs[i] != i) {
      std::fprintf(stderr, "av_scale: peer %zu got fi_addr %" PRIu64 "\n", i, fi_addrs[i]);
      return 1;
    }
  }
  for (size_t i = 0; i < o.peers; ++i) {
    sockaddr_in out{};
    size_t len = sizeof out;
    rc = fi_av_lookup(av, fi_addrs[i], &out, &len);
    if (rc || len != sizeof out || out.sin_addr.s_addr != peers[i].sin_addr.s_addr ||
        out.sin_port != peers[i].sin_port) {
      std::fprintf(stderr, "av_scale: fi_av_lookup of peer %zu: rc %d\n", i, rc);
      return 1;
    }
  }

  if ((rc = fi_close(&av->fid))) return fail("fi_close(av)", rc);
  if ((rc = fi_close(&domain->fid))) return fail("fi_close(domain)", rc);
  if ((rc = fi_close(&fabric->fid))) return fail("fi_close(fabric)", rc);

  // Printed only once everything has been checked and closed.
  double per = double(o.peers);
  std::printf("provider %s (library API %u.%u), %zu peers, batches of %zu, count hint %zu\n",
              pick->fabric_attr->prov_name, FI_MAJOR(fi_version()), FI_MINOR(fi_version()), o.peers,
              o.batch, attr.count);
  std::printf("  insert: %8.1f ns/peer wall, %8.1f ns/peer cpu\n", (wall1 - wall0) / per,
              (cpu1 - cpu0) / per);
  std::printf("  memory: %8.1f bytes/peer resident, %8.1f bytes/peer malloc heap\n",
              (double(rss1) - double(rss0)) / per, (double(heap1) - double(heap0)) / per);

  fi_freeinfo(info);
  return 0;
}
