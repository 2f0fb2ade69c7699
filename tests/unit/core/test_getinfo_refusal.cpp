// SPDX-License-Identifier: MIT
// weft — fi_getinfo tells, at FI_LOG_INFO, which provider passed over the
// hints and at which field: one line per provider, the first field rejected.
#include "core/info.hpp"
#include "log_capture.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace weft {
namespace {

struct hints_ptr {
  fi_info* h = fi_allocinfo();
  ~hints_ptr() { fi_freeinfo(h); }
  fi_info* operator->() const { return h; }
};

hints_ptr hints_for(const char* prov, fi_ep_type type = FI_EP_UNSPEC) {
  hints_ptr p;
  p->fabric_attr->prov_name = strdup(prov);
  p->ep_attr->type = type;
  p->mode = ~0ULL;
  return p;
}

// fi_getinfo's answer for the hints, and the refusal lines it logged.
struct outcome {
  int ret;
  std::vector<std::string> lines;
};

outcome ask(const hints_ptr& h, const char* node = nullptr, uint64_t flags = 0,
            uint32_t version = FI_VERSION(1, 17)) {
  test::log_capture log;
  fi_info* info = nullptr;
  int ret = fi_getinfo(version, node, nullptr, flags, h.h, &info);
  fi_freeinfo(info);
  return {ret, log.lines_with("rejects the hints")};
}

// Exactly one line for `prov`, naming `field` (and, if given, `detail`).
void expect_refusal(const outcome& o, const char* prov, const char* field,
                    const char* detail = nullptr) {
  EXPECT_EQ(o.ret, -FI_ENODATA);
  ASSERT_EQ(o.lines.size(), 1u) << "one line per provider";
  const std::string& l = o.lines[0];
  EXPECT_NE(l.find(":" + std::string(prov) + ":"), std::string::npos) << l;
  EXPECT_NE(l.find("<info>"), std::string::npos) << l;
  EXPECT_NE(l.find(std::string(prov) + " rejects the hints at " + field + ":"), std::string::npos)
      << l;
  if (detail) {
    EXPECT_NE(l.find(detail), std::string::npos) << l;
  }
}

TEST(getinfo_refusal, udp_names_the_endpoint_type_it_lacks) {
  auto h = hints_for("udp", FI_EP_MSG);
  expect_refusal(ask(h), "udp", "ep_attr->type", "asked FI_EP_MSG, offers FI_EP_DGRAM");
}

TEST(getinfo_refusal, collective_is_refused_everywhere_it_is_asked) {
  for (const char* prov : {"udp", "tcp", "shm"}) {
    SCOPED_TRACE(prov);
    auto h = hints_for(prov);
    h->caps = FI_MSG | FI_COLLECTIVE;
    expect_refusal(ask(h), prov, "caps", "FI_COLLECTIVE not offered");
    h->caps = 0;
    h->tx_attr->caps = FI_COLLECTIVE;
    expect_refusal(ask(h), prov, "tx_attr->caps", "FI_COLLECTIVE");
    h->tx_attr->caps = 0;
    h->rx_attr->caps = FI_COLLECTIVE;
    expect_refusal(ask(h), prov, "rx_attr->caps", "FI_COLLECTIVE");
    h->rx_attr->caps = 0;
    h->domain_attr->caps = FI_COLLECTIVE;
    expect_refusal(ask(h), prov, "domain_attr->caps", "FI_COLLECTIVE");
  }
}

// tcp's FI_EP_MSG template fails on the endpoint type before the limit: the
// line tells what stopped the template of the asked type.
TEST(getinfo_refusal, the_template_that_came_furthest_is_told) {
  auto h = hints_for("tcp", FI_EP_RDM);
  h->ep_attr->max_msg_size = SIZE_MAX;
  expect_refusal(ask(h), "tcp", "ep_attr->max_msg_size", "offers at most");
}

TEST(getinfo_refusal, limits_name_asked_and_offered) {
  auto h = hints_for("shm");
  h->tx_attr->inject_size = 1 << 30;
  expect_refusal(ask(h), "shm", "tx_attr->inject_size", "asked 1073741824, offers at most 4096");
}

TEST(getinfo_refusal, addresses_are_fields_too) {
  auto h = hints_for("udp");
  expect_refusal(ask(h, "no-such-host.invalid"), "udp", "node");
  auto s = hints_for("shm");
  expect_refusal(ask(s, "192.0.2.1"), "shm", "node", "192.0.2.1");
  auto a = hints_for("tcp");
  a->addr_format = FI_ADDR_STR;
  expect_refusal(ask(a), "tcp", "addr_format", "FI_ADDR_STR");
}

// fi_domain(3): FI_MR_BASIC and FI_MR_SCALABLE are never combined with bits.
TEST(getinfo_refusal, old_mr_modes_with_bits_are_named) {
  for (const char* prov : {"udp", "tcp", "shm"}) {
    auto h = hints_for(prov);
    h->domain_attr->mr_mode = FI_MR_BASIC | FI_MR_LOCAL;
    expect_refusal(ask(h), prov, "domain_attr->mr_mode", "FI_MR_BASIC");
    h->domain_attr->mr_mode = 7;
    expect_refusal(ask(h, nullptr, 0, FI_VERSION(1, 0)), prov, "domain_attr->mr_mode", "not 7");
  }
}

TEST(getinfo_refusal, one_line_per_provider) {
  hints_ptr h;  // every provider
  h->caps = FI_COLLECTIVE;
  auto o = ask(h);
  EXPECT_EQ(o.ret, -FI_ENODATA);
  int udp = 0, tcp = 0, shm = 0;
  for (auto& l : o.lines) {
    udp += l.find("udp rejects") != std::string::npos;
    tcp += l.find("tcp rejects") != std::string::npos;
    shm += l.find("shm rejects") != std::string::npos;
  }
  EXPECT_EQ(udp, 1);
  EXPECT_EQ(tcp, 1);
  EXPECT_EQ(shm, 1);
}

TEST(getinfo_refusal, nothing_is_told_when_the_provider_answers) {
  auto h = hints_for("tcp", FI_EP_RDM);  // the FI_EP_MSG template is passed over
  auto o = ask(h);
  EXPECT_EQ(o.ret, 0);
  EXPECT_TRUE(o.lines.empty()) << o.lines[0];
}

// fi_domain / fi_endpoint check their fi_info with the same validator: a
// refusal there is told too (it was, before refusals were collected).
TEST(getinfo_refusal, endpoint_attributes_that_do_not_fit_are_told) {
  auto h = hints_for("shm");
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h.h, &info), 0);
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  ASSERT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
  ASSERT_EQ(fi_domain(fabric, info, &domain, nullptr), 0);
  info->tx_attr->inject_size = 1 << 30;
  fid_ep* ep = nullptr;
  {
    test::log_capture log;
    EXPECT_EQ(fi_endpoint(domain, info, &ep, nullptr), -FI_EINVAL);
    auto lines = log.lines_with("do not fit at tx_attr->inject_size");
    EXPECT_EQ(lines.size(), 1u);
  }
  EXPECT_EQ(fi_close(&domain->fid), 0);
  EXPECT_EQ(fi_close(&fabric->fid), 0);
  fi_freeinfo(info);
}

}  // namespace
}  // namespace weft
