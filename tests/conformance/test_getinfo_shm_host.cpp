// SPDX-License-Identifier: MIT
// weft — conformance: shm answers a node and service that name this host
// (an address of it, its name, localhost), with and without FI_SOURCE, and
// a service alone; the answer keeps shm's own addressing (no src_addr, no
// dest_addr: endpoints name themselves, docs/decisions.md), and endpoints
// opened from it find each other through fi_getname and fi_av_insert.
#include "provider_param.hpp"

#include <ifaddrs.h>
#include <net/if.h>
#include <unistd.h>

#include <chrono>
#include <vector>

namespace conformance {
namespace {

fi_info* shm_hints() {
  fi_info* h = fi_allocinfo();
  h->fabric_attr->prov_name = strdup("shm");
  h->caps = FI_MSG;
  h->ep_attr->type = FI_EP_RDM;
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  return h;
}

int shm_getinfo(const char* node, const char* service, uint64_t flags, fi_info** info) {
  fi_info* h = shm_hints();
  int ret = fi_getinfo(FI_VERSION(1, 17), node, service, flags, h, info);
  fi_freeinfo(h);
  return ret;
}

// This host's names and addresses: loopback in both families, localhost,
// the host name, and the first address of an interface that is not
// loopback (when there is one).
std::vector<std::string> local_nodes() {
  std::vector<std::string> nodes = {"127.0.0.1", "127.3.2.1", "::1", "localhost"};
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0 && host[0]) nodes.push_back(host);
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* i = list; i; i = i->ifa_next) {
      if (!i->ifa_addr || (i->ifa_flags & IFF_LOOPBACK) || i->ifa_addr->sa_family != AF_INET)
        continue;
      char buf[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
      nodes.push_back(buf);
      break;
    }
    freeifaddrs(list);
  }
  return nodes;
}

void expect_shm_addressing(const fi_info* info) {
  ASSERT_NE(info, nullptr);
  EXPECT_STREQ(info->fabric_attr->prov_name, "shm");
  EXPECT_EQ(info->addr_format, uint32_t{FI_ADDR_STR});
  EXPECT_EQ(info->src_addr, nullptr);
  EXPECT_EQ(info->src_addrlen, 0u);
  EXPECT_EQ(info->dest_addr, nullptr);
  EXPECT_EQ(info->dest_addrlen, 0u);
}

TEST(getinfo_shm_host, nodes_naming_this_host_with_and_without_source) {
  for (const std::string& node : local_nodes()) {
    for (const char* service : {static_cast<const char*>(nullptr), "4711"}) {
      for (uint64_t flags : {uint64_t{0}, uint64_t{FI_SOURCE}}) {
        SCOPED_TRACE(node + (service ? std::string(" service ") + service : std::string()) +
                     (flags ? " FI_SOURCE" : ""));
        fi_info* info = nullptr;
        ASSERT_EQ(shm_getinfo(node.c_str(), service, flags, &info), 0);
        expect_shm_addressing(info);
        fi_freeinfo(info);
      }
    }
  }
}

TEST(getinfo_shm_host, numeric_and_addr_str_forms) {
  fi_info* info = nullptr;
  ASSERT_EQ(shm_getinfo("127.0.0.1", "4711", FI_NUMERICHOST | FI_SOURCE, &info), 0);
  expect_shm_addressing(info);
  fi_freeinfo(info);
  info = nullptr;
  ASSERT_EQ(shm_getinfo("fi_sockaddr_in://127.0.0.1:4711", nullptr, 0, &info), 0);
  expect_shm_addressing(info);
  fi_freeinfo(info);
}

TEST(getinfo_shm_host, service_alone) {
  for (uint64_t flags : {uint64_t{0}, uint64_t{FI_SOURCE}}) {
    fi_info* info = nullptr;
    ASSERT_EQ(shm_getinfo(nullptr, "4711", flags, &info), 0) << flags;
    expect_shm_addressing(info);
    fi_freeinfo(info);
  }
}

TEST(getinfo_shm_host, nodes_elsewhere_are_enodata) {
  // 192.0.2.0/24 is TEST-NET-1 (never assigned), .invalid never resolves.
  for (const char* node : {"192.0.2.1", "2001:db8::1", "no-such-host.invalid",
                           "fi_sockaddr_in://192.0.2.1:4711"}) {
    for (uint64_t flags : {uint64_t{0}, uint64_t{FI_SOURCE}}) {
      fi_info* info = nullptr;
      EXPECT_EQ(shm_getinfo(node, nullptr, flags, &info), -FI_ENODATA) << node;
      EXPECT_EQ(info, nullptr);
    }
  }
  // FI_NUMERICHOST: a name is not an address, even this host's.
  fi_info* info = nullptr;
  EXPECT_EQ(shm_getinfo("localhost", nullptr, FI_NUMERICHOST, &info), -FI_ENODATA);
}

TEST(getinfo_shm_host, a_peer_name_still_gives_dest_addr) {
  // Another process's name is as good as ours here: nothing is attached.
  char name[64];
  std::snprintf(name, sizeof name, "fi_shm://weft-shm-%u-1-%u-0", static_cast<unsigned>(geteuid()),
                static_cast<unsigned>(getpid()));
  fi_info* info = nullptr;
  ASSERT_EQ(shm_getinfo(name, nullptr, 0, &info), 0);
  ASSERT_NE(info->dest_addr, nullptr);
  EXPECT_STREQ(static_cast<char*>(info->dest_addr), name);
  fi_freeinfo(info);
  EXPECT_EQ(shm_getinfo(name, nullptr, FI_SOURCE, &info), -FI_ENODATA);
}

// What a client does next: open endpoints from the answer, ask their names,
// insert them and talk.
TEST(getinfo_shm_host, endpoints_from_the_answer_exchange_names_and_talk) {
  fi_info* info = nullptr;
  ASSERT_EQ(shm_getinfo("127.0.0.1", "4711", FI_SOURCE, &info), 0);
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep[2] = {};
  fi_addr_t addr[2] = {FI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL};
  ASSERT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
  ASSERT_EQ(fi_domain(fabric, info, &domain, nullptr), 0);
  fi_av_attr aattr{};
  aattr.type = FI_AV_TABLE;
  ASSERT_EQ(fi_av_open(domain, &aattr, &av, nullptr), 0);
  fi_cq_attr cattr{};
  cattr.format = FI_CQ_FORMAT_MSG;
  ASSERT_EQ(fi_cq_open(domain, &cattr, &cq, nullptr), 0);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(fi_endpoint(domain, info, &ep[i], nullptr), 0);
    ASSERT_EQ(fi_ep_bind(ep[i], &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_ep_bind(ep[i], &av->fid, 0), 0);
    ASSERT_EQ(fi_enable(ep[i]), 0);
    char name[128];
    size_t len = sizeof name;
    ASSERT_EQ(fi_getname(&ep[i]->fid, name, &len), 0);
    EXPECT_EQ(std::strncmp(name, "fi_shm://", 9), 0) << name;
    ASSERT_EQ(fi_av_insert(av, name, 1, &addr[i], 0, nullptr), 1);
  }
  char out[] = "hello", in[sizeof out] = {};
  fi_context rctx, sctx;
  ASSERT_EQ(fi_recv(ep[1], in, sizeof in, nullptr, addr[0], &rctx), 0);
  ASSERT_EQ(fi_send(ep[0], out, sizeof out, nullptr, addr[1], &sctx), 0);
  int done = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (done < 2 && std::chrono::steady_clock::now() < deadline) {
    fi_cq_msg_entry e;
    ssize_t n = fi_cq_read(cq, &e, 1);
    ASSERT_TRUE(n == 1 || n == -FI_EAGAIN) << n;
    done += n == 1;
  }
  EXPECT_EQ(done, 2);
  EXPECT_STREQ(in, "hello");
  for (fid_ep* e : ep) EXPECT_EQ(fi_close(&e->fid), 0);
  EXPECT_EQ(fi_close(&av->fid), 0);
  EXPECT_EQ(fi_close(&cq->fid), 0);
  EXPECT_EQ(fi_close(&domain->fid), 0);
  EXPECT_EQ(fi_close(&fabric->fid), 0);
  fi_freeinfo(info);
}

}  // namespace
}  // namespace conformance
