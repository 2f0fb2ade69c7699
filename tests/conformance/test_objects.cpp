// SPDX-License-Identifier: MIT
// weft — conformance: CQs, counters, EQs, AVs and MRs through the public API,
// driven by a provider's endpoints.
#include "fixture.hpp"

#include <poll.h>
#include <rdma/fi_domain.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>

namespace conformance {
namespace {

class objects : public provider_test {};

TEST_P(objects, cq_formats) {
  for (fi_cq_format fmt : {FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_MSG, FI_CQ_FORMAT_DATA,
                           FI_CQ_FORMAT_TAGGED}) {
    fi_cq_attr attr{};
    attr.format = fmt;
    fid_cq* cq = nullptr;
    ASSERT_EQ(fi_cq_open(domain, &attr, &cq, nullptr), 0) << fmt;
    fi_cq_tagged_entry e;
    EXPECT_EQ(fi_cq_read(cq, &e, 1), -FI_EAGAIN);
    fi_cq_err_entry err{};
    EXPECT_EQ(fi_cq_readerr(cq, &err, 0), -FI_EAGAIN);
    EXPECT_EQ(fi_close(&cq->fid), 0);
  }
  fi_cq_attr bad{};
  bad.format = static_cast<fi_cq_format>(42);
  fid_cq* cq = nullptr;
  EXPECT_EQ(fi_cq_open(domain, &bad, &cq, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_cq_open(domain, nullptr, &cq, nullptr), -FI_EINVAL);
}

TEST_P(objects, blocking_read_wakes_on_arrival) {
  fid_cq* cq = open_cq(FI_CQ_FORMAT_DATA, FI_WAIT_FD);
  open_av();
  fi_addr_t b;
  fid_ep* eb = open_ep(cq, &b);
  char name[128];
  size_t len = sizeof name;
  ASSERT_EQ(fi_getname(&eb->fid, name, &len), 0);
  // The sender has a domain of its own: its thread and this one never share
  // one, as FI_THREAD_DOMAIN requires.
  side sender(fabric, info, name);
  char buf[8];
  fi_context ctx;
  ASSERT_EQ(fi_recv(eb, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, &ctx), 0);
  fi_cq_data_entry e;
  // Nothing yet: the timeout expires.
  EXPECT_EQ(fi_cq_sread(cq, &e, 1, nullptr, 20), -FI_EAGAIN);
  std::thread thread([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(sender.send("wake", 5), 0);
  });
  auto start = std::chrono::steady_clock::now();
  ssize_t n = fi_cq_sread(cq, &e, 1, nullptr, 5000);
  auto waited = std::chrono::steady_clock::now() - start;
  thread.join();
  ASSERT_EQ(n, 1);
  EXPECT_EQ(e.op_context, &ctx);
  EXPECT_STREQ(buf, "wake");
  EXPECT_LT(waited, std::chrono::seconds(2));
}

TEST_P(objects, signal_unblocks_sread) {
  fid_cq* cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC);
  std::thread waker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_EQ(fi_cq_signal(cq), 0);
  });
  fi_cq_entry e;
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(fi_cq_sread(cq, &e, 1, nullptr, -1), -FI_EAGAIN);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  waker.join();
}

TEST_P(objects, wait_fd_becomes_readable) {
  fid_cq* cq = open_cq(FI_CQ_FORMAT_DATA, FI_WAIT_FD);
  open_av();
  fi_addr_t a, b;
  fid_ep* ea = open_ep(cq, &a);
  fid_ep* eb = open_ep(cq, &b);
  int fd = -1;
  ASSERT_EQ(fi_control(&cq->fid, FI_GETWAIT, &fd), 0);
  ASSERT_GE(fd, 0);
  char buf[8];
  ASSERT_EQ(fi_recv(eb, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  fid* fids[] = {&cq->fid};
  EXPECT_EQ(fi_trywait(fabric, fids, 1), 0);  // nothing to read: safe to sleep
  ASSERT_EQ(fi_inject(ea, "fd", 3, b), 0);
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 2000), 1);
  fi_cq_data_entry e;
  EXPECT_EQ(read_one(cq, &e), 1);
}

TEST_P(objects, counters_count_sends_and_receives) {
  fid_cq* cq = open_cq();
  open_av();
  fi_cntr_attr cattr{};
  cattr.events = FI_CNTR_EVENTS_COMP;
  fid_cntr *sent = nullptr, *recvd = nullptr;
  ASSERT_EQ(fi_cntr_open(domain, &cattr, &sent, nullptr), 0);
  cattr.wait_obj = FI_WAIT_UNSPEC;  // fi_cntr_wait needs a wait object
  ASSERT_EQ(fi_cntr_open(domain, &cattr, &recvd, nullptr), 0);
  fid_ep* ep = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
  ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
  ASSERT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
  ASSERT_EQ(fi_ep_bind(ep, &sent->fid, FI_SEND), 0);
  ASSERT_EQ(fi_ep_bind(ep, &recvd->fid, FI_RECV), 0);
  EXPECT_EQ(fi_ep_bind(ep, &sent->fid, FI_SEND), -FI_EINVAL);  // one per event class
  ASSERT_EQ(fi_enable(ep), 0);
  char name[64];
  size_t len = sizeof name;
  ASSERT_EQ(fi_getname(&ep->fid, name, &len), 0);
  fi_addr_t self;
  ASSERT_EQ(fi_av_insert(av, name, 1, &self, 0, nullptr), 1);
  char buf[3][8];
  for (auto& b : buf) ASSERT_EQ(fi_recv(ep, b, sizeof b, nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(fi_inject(ep, "c", 1, self), 0);
  // Sends complete once handed to the network (a connection may come first).
  EXPECT_EQ(wait_count(sent, 3), 3u);
  EXPECT_EQ(fi_cntr_wait(sent, 3, 10), -FI_ENOSYS);  // FI_WAIT_NONE
  EXPECT_EQ(fi_cntr_wait(recvd, 3, 5000), 0);
  EXPECT_EQ(fi_cntr_read(recvd), 3u);
  EXPECT_EQ(fi_cntr_readerr(recvd), 0u);
  EXPECT_EQ(fi_cntr_wait(recvd, 4, 10), -FI_ETIMEDOUT);
  EXPECT_EQ(fi_close(&sent->fid), -FI_EBUSY);  // still bound
  EXPECT_EQ(fi_close(&ep->fid), 0);
  EXPECT_EQ(fi_close(&sent->fid), 0);
  EXPECT_EQ(fi_close(&recvd->fid), 0);
}

// An address of another format is refused, never dereferenced blindly: a
// sockaddr handed to a provider that names peers by string, or a string to
// an IP provider.
TEST_P(objects, av_insert_of_a_foreign_format_is_refused) {
  fi_av_attr attr{};
  attr.type = FI_AV_TABLE;
  fid_av* v = nullptr;
  ASSERT_EQ(fi_av_open(domain, &attr, &v, nullptr), 0);
  fi_addr_t fa = 0;
  int err = 0;
  if (is_ip_format(info->addr_format)) {
    char name[64] = "fi_shm://weft-shm-0-0-1-0";
    EXPECT_EQ(fi_av_insert(v, name, 1, &fa, FI_SYNC_ERR, &err), 0);
  } else {
    sockaddr_in sin[4] = {};  // as many bytes as a name: a wrong format, not a short buffer
    sin[0].sin_family = AF_INET;
    sin[0].sin_port = htons(4715);
    sin[0].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(fi_av_insert(v, sin, 1, &fa, FI_SYNC_ERR, &err), 0);
  }
  EXPECT_NE(err, 0);
  EXPECT_EQ(fa, FI_ADDR_NOTAVAIL);
  EXPECT_EQ(fi_close(&v->fid), 0);
}

TEST_P(objects, av_insert_lookup_remove) {
  // Three valid addresses of the provider's format, one stride apart: IP
  // ports on loopback, or the names of three endpoints.
  const bool ip = is_ip_format(info->addr_format);
  std::vector<char> addrs;
  size_t stride = sizeof(sockaddr_in);
  if (ip) {
    addrs.resize(3 * stride);
    for (int i = 0; i < 3; ++i) {
      sockaddr_in sin{};
      sin.sin_family = AF_INET;
      sin.sin_port = htons(5000 + i);
      sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      std::memcpy(&addrs[i * stride], &sin, stride);
    }
  } else {
    for (int i = 0; i < 3; ++i) {
      fid_ep* ep = nullptr;
      ASSERT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
      eps.push_back(ep);
      char name[256];
      size_t len = sizeof name;
      ASSERT_EQ(fi_getname(&ep->fid, name, &len), 0);
      if (i == 0) stride = len;
      ASSERT_EQ(len, stride) << "every name of a provider has one length";
      addrs.insert(addrs.end(), name, name + len);
    }
  }
  for (fi_av_type type : {FI_AV_TABLE, FI_AV_MAP}) {
    fi_av_attr attr{};
    attr.type = type;
    fid_av* v = nullptr;
    ASSERT_EQ(fi_av_open(domain, &attr, &v, nullptr), 0);
    fi_addr_t fa[3];
    ASSERT_EQ(fi_av_insert(v, addrs.data(), 3, fa, 0, nullptr), 3);
    if (type == FI_AV_TABLE) {
      EXPECT_EQ(fa[0], 0u);
      EXPECT_EQ(fa[2], 2u);
    }
    std::vector<char> out(stride + 16);
    size_t len = out.size();
    ASSERT_EQ(fi_av_lookup(v, fa[1], out.data(), &len), 0);
    EXPECT_EQ(len, stride);
    EXPECT_EQ(std::memcmp(out.data(), &addrs[stride], stride), 0);
    char text[128];
    size_t tlen = sizeof text;
    const char* s = fi_av_straddr(v, &addrs[stride], text, &tlen);
    ASSERT_NE(s, nullptr);
    if (ip) EXPECT_STREQ(s, "fi_sockaddr_in://127.0.0.1:5001");
    else EXPECT_GT(std::strlen(s), 0u);
    EXPECT_EQ(fi_av_remove(v, &fa[1], 1, 0), 0);
    len = out.size();
    EXPECT_NE(fi_av_lookup(v, fa[1], out.data(), &len), 0);
    // A bad address (all zeros) among good ones: FI_SYNC_ERR reports it per entry.
    std::vector<char> mixed(2 * stride, 0);
    std::memcpy(mixed.data(), addrs.data(), stride);
    int errs[2] = {-1, -1};
    fi_addr_t mfa[2];
    EXPECT_EQ(fi_av_insert(v, mixed.data(), 2, mfa, FI_SYNC_ERR, errs), 1);
    EXPECT_EQ(errs[0], 0);
    EXPECT_NE(errs[1], 0);
    EXPECT_EQ(mfa[1], FI_ADDR_NOTAVAIL);
    EXPECT_EQ(fi_close(&v->fid), 0);
  }
}

TEST_P(objects, eq_write_and_read) {
  fi_eq_attr attr{};
  attr.size = 8;
  attr.wait_obj = FI_WAIT_UNSPEC;
  attr.flags = FI_WRITE;
  fid_eq* eq = nullptr;
  ASSERT_EQ(fi_eq_open(fabric, &attr, &eq, nullptr), 0);
  fi_eq_entry in{};
  in.fid = &fabric->fid;
  in.context = this;
  in.data = 77;
  EXPECT_EQ(fi_eq_write(eq, FI_NOTIFY, &in, sizeof in, 0), static_cast<ssize_t>(sizeof in));
  uint32_t event = 0;
  fi_eq_entry out{};
  EXPECT_EQ(fi_eq_sread(eq, &event, &out, sizeof out, 1000, 0), static_cast<ssize_t>(sizeof out));
  EXPECT_EQ(event, static_cast<uint32_t>(FI_NOTIFY));
  EXPECT_EQ(out.data, 77u);
  EXPECT_EQ(fi_eq_read(eq, &event, &out, sizeof out, 0), -FI_EAGAIN);
  EXPECT_EQ(fi_eq_sread(eq, &event, &out, sizeof out, 10, 0), -FI_EAGAIN);
  EXPECT_EQ(fi_close(&eq->fid), 0);
}

TEST_P(objects, memory_registration) {
  char buf[256] = {};
  fid_mr* mr = nullptr;
  ASSERT_EQ(fi_mr_reg(domain, buf, sizeof buf, FI_SEND | FI_RECV, 0, 0, 0, &mr, nullptr), 0);
  EXPECT_NE(fi_mr_key(mr), FI_KEY_NOTAVAIL);
  (void)fi_mr_desc(mr);
  EXPECT_EQ(fi_mr_reg(domain, buf, sizeof buf, 1ULL << 62, 0, 0, 0, &mr, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_close(&mr->fid), 0);
}

TEST_P(objects, closing_out_of_order_is_ebusy) {
  fid_cq* cq = open_cq();
  EXPECT_EQ(fi_close(&domain->fid), -FI_EBUSY);
  EXPECT_EQ(fi_close(&fabric->fid), -FI_EBUSY);
  (void)cq;
}

// What an endpoint that has not communicated yet costs in resident memory:
// its transmit entries and receive entries are reserved, not touched, until
// used. A server with a thousand accepted endpoints, or a process with many
// endpoints, must not pay a megabyte for each (udp RDM's transmit pool
// alone was 1 MB, tcp's 690 KB before). shm's include its region's header
// and doorbells, shared with its peers.
TEST_P(objects, an_endpoint_that_has_not_communicated_costs_little_memory) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "a sanitizer's shadow memory counts in the resident set";
#endif
  auto resident = [] {
    FILE* f = std::fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (!f || std::fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = -1;
    if (f) std::fclose(f);
    return rss * sysconf(_SC_PAGESIZE);
  };
  fid_cq* cq = open_cq();
  open_av();
  constexpr int n = 32;
  fi_addr_t self[n];
  open_ep(cq, &self[0]);  // the first pays for what endpoints share
  const long before = resident();
  for (int i = 1; i < n; ++i) ASSERT_TRUE(open_ep(cq, &self[i]));
  const long per = (resident() - before) / (n - 1);
  // lnx: an endpoint of each core (shm's and tcp's bounds) and 64 KiB of its own.
  const std::string prov = GetParam().prov;
  const long bound = prov == "shm" ? 320 * 1024 : prov == "lnx" ? 448 * 1024 : 64 * 1024;
  EXPECT_LE(per, bound) << "bytes of resident memory per idle endpoint";
  RecordProperty("bytes_per_idle_endpoint", static_cast<int>(per));
}

INSTANTIATE_TEST_SUITE_P(all, objects, testing::ValuesIn(all_configs), config_name);

}  // namespace
}  // namespace conformance
