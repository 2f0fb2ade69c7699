// SPDX-License-Identifier: MIT
// weft — the conformance suite: one set of tests over the public C API,
// instantiated for every provider (and, later, progress/threading modes).
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace conformance {

// One provider configuration the suite runs against.
struct config {
  const char* prov;
  fi_ep_type ep_type;
  fi_threading threading;
  fi_progress progress = FI_PROGRESS_MANUAL;  // data and control progress asked for
  std::string name() const {
    std::string n = std::string(prov) + "_" +
                    (ep_type == FI_EP_DGRAM ? "dgram" : ep_type == FI_EP_RDM ? "rdm" : "msg");
    n += threading == FI_THREAD_SAFE         ? "_safe"
         : threading == FI_THREAD_COMPLETION ? "_completion"
         : threading == FI_THREAD_FID        ? "_fid"
         : threading == FI_THREAD_ENDPOINT   ? "_endpoint"
                                             : "_domain";
    if (progress == FI_PROGRESS_AUTO) n += "_auto";
    return n;
  }
};

inline std::string config_name(const testing::TestParamInfo<config>& info) {
  return info.param.name();
}

// The configurations every test is instantiated for.
inline const config all_configs[] = {
    {"udp", FI_EP_DGRAM, FI_THREAD_DOMAIN},
    {"udp", FI_EP_DGRAM, FI_THREAD_SAFE},
    {"udp", FI_EP_DGRAM, FI_THREAD_DOMAIN, FI_PROGRESS_AUTO},
    {"udp", FI_EP_RDM, FI_THREAD_DOMAIN},
    {"udp", FI_EP_RDM, FI_THREAD_SAFE},
    {"udp", FI_EP_RDM, FI_THREAD_DOMAIN, FI_PROGRESS_AUTO},
    {"tcp", FI_EP_RDM, FI_THREAD_DOMAIN},
    {"tcp", FI_EP_RDM, FI_THREAD_SAFE},
    {"tcp", FI_EP_RDM, FI_THREAD_DOMAIN, FI_PROGRESS_AUTO},
    {"shm", FI_EP_RDM, FI_THREAD_DOMAIN},
    {"shm", FI_EP_RDM, FI_THREAD_SAFE},
    {"shm", FI_EP_RDM, FI_THREAD_COMPLETION},
    {"shm", FI_EP_RDM, FI_THREAD_DOMAIN, FI_PROGRESS_AUTO},
    {"lnx", FI_EP_RDM, FI_THREAD_DOMAIN},
    {"lnx", FI_EP_RDM, FI_THREAD_SAFE},
    {"lnx", FI_EP_RDM, FI_THREAD_DOMAIN, FI_PROGRESS_AUTO},
};

// Connection-oriented configurations (test_cm.cpp: a passive endpoint, an
// EQ, and a connected pair in one process).
inline const config msg_configs[] = {
    {"tcp", FI_EP_MSG, FI_THREAD_DOMAIN},
    {"tcp", FI_EP_MSG, FI_THREAD_SAFE},
    {"tcp", FI_EP_MSG, FI_THREAD_DOMAIN, FI_PROGRESS_AUTO},
};

// Whether an address format is an IP socket address (udp, tcp): tests that
// name hosts and ports apply to those providers only.
inline bool is_ip_format(uint32_t fmt) {
  return fmt == FI_SOCKADDR_IN || fmt == FI_SOCKADDR_IN6 || fmt == FI_SOCKADDR;
}

// Hints for a configuration: what a typical application asks.
inline fi_info* hints_for(const config& c, uint64_t caps = FI_MSG) {
  fi_info* h = fi_allocinfo();
  h->caps = caps;
  h->ep_attr->type = c.ep_type;
  h->domain_attr->threading = c.threading;
  if (c.progress == FI_PROGRESS_AUTO) {
    h->domain_attr->data_progress = FI_PROGRESS_AUTO;
    h->domain_attr->control_progress = FI_PROGRESS_AUTO;
  }
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  h->fabric_attr->prov_name = strdup(c.prov);
  return h;
}

// Whether the provider addresses peers by IP (node/service tests need it).
// Every configuration answers these plain hints: one that does not is a
// failure, not a provider that does not use IP (a skip).
inline bool ip_provider(const config& c) {
  fi_info* hints = hints_for(c);
  fi_info* info = nullptr;
  int rc = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info);
  if (rc) ADD_FAILURE() << c.name() << ": fi_getinfo answered " << fi_strerror(-rc);
  bool ip = rc == 0 &&
            (info->addr_format == FI_SOCKADDR_IN || info->addr_format == FI_SOCKADDR_IN6 ||
             info->addr_format == FI_SOCKADDR);
  fi_freeinfo(info);
  fi_freeinfo(hints);
  return ip;
}

// udp RDM learns that a peer died only from its silence, after
// FI_UDP_RDM_PEER_TIMEOUT_MS (10 s by default): the tests that kill a peer
// run there under ctest's conformance.udp_rdm_timeouts, which sets 1 s.
inline bool death_takes_too_long(const config& c) {
  if (c.prov != std::string("udp")) return false;
  const char* e = std::getenv("FI_UDP_RDM_PEER_TIMEOUT_MS");
  return !e || std::atoi(e) <= 0 || std::atoi(e) > 3000;
}
#define SKIP_IF_DEATH_TAKES_TOO_LONG()                                                        \
  do {                                                                                     \
    if (::conformance::death_takes_too_long(GetParam()))                                   \
      GTEST_SKIP() << "udp RDM sees a dead peer after FI_UDP_RDM_PEER_TIMEOUT_MS; ctest's " \
                      "conformance.udp_rdm_timeouts runs this with 1 s";                    \
  } while (0)

#define SKIP_UNLESS_IP()                                                   \
  do {                                                                     \
    if (!::conformance::ip_provider(GetParam()))                           \
      GTEST_SKIP() << GetParam().prov << " does not address peers by IP";  \
  } while (0)

}  // namespace conformance
