// SPDX-License-Identifier: MIT
// weft — conformance: the fixture of the lnx tests (test_lnx.cpp,
// test_lnx_rma.cpp): a domain of lnx's loopback link, an AV, and endpoints
// opened on them.
//
// Endpoints of one process are on one host, so lnx carries their traffic
// through shm. To exercise tcp as well, a test inserts a peer's address a
// second time with its host identity changed (proto.hpp: the 6 bytes at
// offset 2): the inserting endpoint then believes the peer is on another
// host and reaches it through tcp, under another fi_addr. Which provider a
// route takes is read from lnx's FI_LOG_INFO line "fi_addr N: through P".
#pragma once

#include "log_recorder.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

namespace conformance {

inline constexpr size_t addr_bytes = 64;
inline constexpr size_t host_byte = 2;  // a byte of the host identity (proto.hpp)  // every lnx address (fi_lnx(7)): FI_NAME_MAX

inline fi_info* lnx_hints(fi_threading t) {
  fi_info* h = fi_allocinfo();
  h->caps = FI_MSG | FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV | FI_AV_USER_ID | FI_RMA | FI_ATOMIC;
  h->ep_attr->type = FI_EP_RDM;
  h->domain_attr->threading = t;
  h->fabric_attr->prov_name = strdup("lnx");
  return h;
}

struct lnx_ep {
  fid_ep* ep = nullptr;
  fid_cq* cq = nullptr;
  std::vector<uint8_t> name;
  ~lnx_ep() {
    if (ep) {
      EXPECT_EQ(fi_close(&ep->fid), 0);
    }
    if (cq) {
      EXPECT_EQ(fi_close(&cq->fid), 0);
    }
  }
};

class lnx : public ::testing::TestWithParam<fi_threading> {
 protected:
  void SetUp() override {
    fi_info* h = lnx_hints(GetParam());
    fi_info* list = nullptr;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 21), nullptr, nullptr, 0, h, &list), 0);
    fi_freeinfo(h);
    // Loopback is on every host; its tcp domain is the link's network.
    for (fi_info* i = list; i; i = i->next)
      if (std::string(i->domain_attr->name).ends_with(":lo")) info = fi_dupinfo(i);
    if (!info) info = fi_dupinfo(list);
    fi_freeinfo(list);
    ASSERT_NE(info, nullptr);
    ASSERT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
    ASSERT_EQ(fi_domain(fabric, info, &domain, nullptr), 0);
    av = open_table_av(0);
    ASSERT_NE(av, nullptr);
  }
  void TearDown() override {
    // The endpoints (the tests' locals) are closed by now.
    for (fid* f : {av ? &av->fid : nullptr, domain ? &domain->fid : nullptr,
                   fabric ? &fabric->fid : nullptr}) {
      if (f) {
        EXPECT_EQ(fi_close(f), 0);
      }
    }
    fi_freeinfo(info);
  }

  void open(lnx_ep& e, fid_av* on = nullptr, fi_wait_obj wait = FI_WAIT_NONE) {
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    ca.size = 1024;
    ca.wait_obj = wait;
    ASSERT_EQ(fi_cq_open(domain, &ca, &e.cq, nullptr), 0);
    ASSERT_EQ(fi_endpoint(domain, info, &e.ep, nullptr), 0);
    opened.push_back(&e);
    ASSERT_EQ(fi_ep_bind(e.ep, &e.cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_ep_bind(e.ep, &(on ? on : av)->fid, 0), 0);
    ASSERT_EQ(fi_enable(e.ep), 0);
    size_t len = 0;
    ASSERT_EQ(fi_getname(&e.ep->fid, nullptr, &len), -FI_ETOOSMALL);
    ASSERT_EQ(len, addr_bytes);
    e.name.resize(len);
    ASSERT_EQ(fi_getname(&e.ep->fid, e.name.data(), &len), 0);
  }
  // Another table AV of the domain, with open flags and rx_ctx_bits;
  // nullptr (a failure recorded) when it does not open. The test closes it.
  fid_av* open_table_av(uint64_t flags, int rx_ctx_bits = 0) {
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    aa.flags = flags;
    aa.rx_ctx_bits = rx_ctx_bits;
    fid_av* a = nullptr;
    EXPECT_EQ(fi_av_open(domain, &aa, &a, nullptr), 0);
    return a;
  }
  // Inserts e's address; `remote`: as if e were on another host.
  fi_addr_t insert(const lnx_ep& e, bool remote = false, fid_av* into = nullptr) {
    std::vector<uint8_t> a = e.name;
    if (remote) a[host_byte] ^= 0x5a;
    fi_addr_t fa = FI_ADDR_NOTAVAIL;
    EXPECT_EQ(fi_av_insert(into ? into : av, a.data(), 1, &fa, 0, nullptr), 1);
    return fa;
  }
  // Reads one completion from q within a few seconds, driving every
  // endpoint's CQ meanwhile (a sender's progress may be needed).
  bool next(fid_cq* q, fi_cq_tagged_entry& out, fi_addr_t* src = nullptr) {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < end) {
      fi_addr_t s = FI_ADDR_NOTAVAIL;
      ssize_t n = fi_cq_readfrom(q, &out, 1, &s);
      if (n == 1) {
        if (src) *src = s;
        return true;
      }
      if (n != -FI_EAGAIN) {
        fi_cq_err_entry err{};
        fi_cq_readerr(q, &err, 0);
        ADD_FAILURE() << "CQ error " << err.err << " (" << fi_strerror(err.err) << ")";
        return false;
      }
      for (lnx_ep* e : opened)
        if (e->cq != q) {
          fi_cq_tagged_entry skip;
          ssize_t m = fi_cq_read(e->cq, &skip, 0);
          (void)m;
        }
    }
    return false;
  }
  // Posts slots.size() tagged receives for FI_ADDR_UNSPEC at `to` (into
  // slots, with contexts rctx), then has `from` inject the values 0, 1, ...
  // (kept in vals) with `tag`, alternately to `near` and to `far`.
  void post_and_spray(lnx_ep& from, lnx_ep& to, fi_addr_t near, fi_addr_t far, uint64_t tag,
                      std::vector<uint32_t>& slots, std::vector<fi_context>& rctx,
                      std::vector<uint32_t>& vals) {
    const size_t n = slots.size();
    rctx.resize(n);
    vals.resize(n);
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(
          fi_trecv(to.ep, &slots[i], sizeof slots[i], nullptr, FI_ADDR_UNSPEC, tag, 0, &rctx[i]),
          0);
    for (size_t i = 0; i < n; ++i) {
      vals[i] = static_cast<uint32_t>(i);
      ssize_t r;
      while ((r = fi_tinject(from.ep, &vals[i], sizeof vals[i], i % 2 ? far : near, tag)) ==
             -FI_EAGAIN) {
        fi_cq_tagged_entry c;
        fi_cq_read(from.cq, &c, 0);
      }
      ASSERT_EQ(r, 0);
    }
  }
  // How many routes the recorded lines say went through `prov`.
  size_t count_through(const std::vector<std::string>& lines, const std::string& prov) {
    size_t n = 0;
    for (const auto& l : lines) n += l.find("through " + prov) != std::string::npos;
    return n;
  }

  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  std::vector<lnx_ep*> opened;
};

}  // namespace conformance
