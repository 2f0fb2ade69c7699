// SPDX-License-Identifier: MIT
// weft — what each provider configuration must offer, and what it lacks and
// why: one table per (provider, endpoint type).
//
// A test asking for more than FI_MSG (provider_test::extra_caps, a larger
// cq_data_size, ...) and answered -FI_ENODATA fails when the table says the
// provider offers it: a provider that stops advertising FI_RMA makes the RMA
// suite fail, not skip. Only what a table lists as lacking may skip, with the
// table's reason. caps_table.* (test_caps_table.cpp) checks every table
// against fi_getinfo both ways, so a table cannot claim what a provider does
// not do, nor keep a test skipping what the provider has gained.
#pragma once

#include "provider_param.hpp"

#include <string>

namespace conformance {

struct lacking {
  uint64_t caps;    // capability bits, or 0 for remote CQ data (cq_data_size)
  const char* why;  // the reason, shown in the skip message
};

struct caps_table {
  const char* prov;
  fi_ep_type ep_type;
  uint64_t offers;      // asked together, fi_getinfo answers
  size_t cq_data_size;  // bytes of remote CQ data offered (0: none)
  lacking lacks[7];  // entries with a null reason are unused
  // FI_PROGRESS_AUTO for data is offered when asked for (manual progress is
  // every provider's default).
  bool auto_progress = false;
};

inline constexpr uint64_t rma_atomic_caps = FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE |
                                            FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT;
inline constexpr const char* fence_why =
    "FI_FENCE is not implemented on udp: the flag is refused with -FI_EINVAL "
    "(docs/decisions.md)";

inline const caps_table udp_dgram_caps = {
    "udp",
    FI_EP_DGRAM,
    FI_MSG | FI_SEND | FI_RECV | FI_SOURCE | FI_MULTI_RECV | FI_AV_USER_ID | FI_TRIGGER |
        FI_NAMED_RX_CTX,
    0,
    {
        {FI_TAGGED, "udp sends bare datagrams: no header carries a tag"},
        {FI_DIRECTED_RECV, "udp matches datagrams to receives in arrival order, from any sender"},
        {rma_atomic_caps, "udp datagrams are unreliable: no RMA or atomics"},
        {0, "udp sends bare datagrams: no header carries remote CQ data"},
        {FI_SHARED_AV, "named AVs share only shm addresses (an IP address is not one process's)"},
        {FI_FENCE, fence_why},
    },
    true,
};

inline const caps_table udp_rdm_caps = {
    "udp",
    FI_EP_RDM,
    FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV | FI_SOURCE | FI_MULTI_RECV |
        FI_AV_USER_ID | FI_TRIGGER | FI_NAMED_RX_CTX | rma_atomic_caps,
    8,
    {
        {FI_SHARED_AV, "named AVs share only shm addresses (an IP address is not one process's)"},
        {FI_FENCE, fence_why},
    },
    true,
};

inline const caps_table tcp_rdm_caps = {
    "tcp",
    FI_EP_RDM,
    FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV | FI_SOURCE | FI_MULTI_RECV |
        FI_AV_USER_ID | FI_FENCE | FI_TRIGGER | FI_NAMED_RX_CTX | rma_atomic_caps,
    8,
    {
        {FI_SHARED_AV, "named AVs share only shm addresses (an IP address is not one process's)"},
    },
    true,
};

inline const caps_table tcp_msg_caps = {
    "tcp",
    FI_EP_MSG,
    FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_MULTI_RECV | FI_FENCE | FI_TRIGGER |
        rma_atomic_caps,
    8,
    {
        {FI_DIRECTED_RECV | FI_SOURCE | FI_AV_USER_ID | FI_SHARED_AV | FI_NAMED_RX_CTX,
         "a connected endpoint has one peer and no AV"},
    },
    true,
};

inline const caps_table shm_rdm_caps = {
    "shm",
    FI_EP_RDM,
    FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV | FI_SOURCE | FI_MULTI_RECV |
        FI_AV_USER_ID | FI_SHARED_AV | FI_FENCE | FI_TRIGGER | FI_NAMED_RX_CTX | rma_atomic_caps,
    8,
    {},
    true,
};

inline const caps_table lnx_rdm_caps = {
    "lnx",
    FI_EP_RDM,
    FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV | FI_SOURCE | FI_MULTI_RECV |
        FI_AV_USER_ID | FI_FENCE | FI_TRIGGER | FI_NAMED_RX_CTX | rma_atomic_caps,
    8,
    {
        {FI_SHARED_AV, "lnx AVs hold whole link addresses, not one process's shm names"},
    },
    true,
};

inline const caps_table* const caps_tables[] = {&udp_dgram_caps, &udp_rdm_caps, &tcp_rdm_caps,
                                                &tcp_msg_caps,   &shm_rdm_caps, &lnx_rdm_caps};

// The table of a configuration (threading and progress do not change what
// a provider offers), or nullptr.
inline const caps_table* caps_of(const config& c) {
  for (const caps_table* t : caps_tables)
    if (std::string(t->prov) == c.prov && t->ep_type == c.ep_type) return t;
  return nullptr;
}

inline std::string cap_names(uint64_t caps) {
  const char* s = fi_tostr(&caps, FI_TYPE_CAPS);
  return s ? s : "?";
}

// Why a request of `caps` (and the limits in `hints`, when given) may go
// unanswered on `c`: the table's reason, or "" when the configuration must
// answer it (a -FI_ENODATA is then a failure). `*missing` gets a description
// of what the table does not cover either way.
inline std::string lack_reason(const config& c, uint64_t caps, const fi_info* hints,
                               std::string* unlisted = nullptr) {
  const caps_table* t = caps_of(c);
  if (!t) {
    if (unlisted) *unlisted = "no capability table for " + c.name();
    return "";
  }
  std::string why;
  auto add = [&](const char* r) {
    if (why.find(r) == std::string::npos) why += why.empty() ? r : std::string("; ") + r;
  };
  uint64_t beyond = caps & ~t->offers;
  for (const lacking& l : t->lacks)
    if (l.why && (l.caps & beyond)) {
      add(l.why);
      beyond &= ~l.caps;
    }
  if (hints && hints->domain_attr && hints->domain_attr->cq_data_size > t->cq_data_size) {
    for (const lacking& l : t->lacks)
      if (l.why && !l.caps) add(l.why);
  }
  if (beyond && unlisted)
    *unlisted = cap_names(beyond) + " is in neither list of the " + c.name() + " table";
  return beyond ? "" : why;
}

}  // namespace conformance

namespace conformance {

// For tests that call fi_getinfo themselves: on -FI_ENODATA for `caps`
// (and `hints`' limits), skips with the table's reason when the table says
// the configuration lacks them, and fails otherwise.
#define SKIP_OR_FAIL_LACKING(caps, hints)                                                    \
  do {                                                                                       \
    std::string unlisted_;                                                                   \
    std::string why_ = ::conformance::lack_reason(GetParam(), (caps), (hints), &unlisted_); \
    if (!why_.empty()) GTEST_SKIP() << GetParam().prov << ": " << why_;                      \
    FAIL() << GetParam().name() << " must offer " << ::conformance::cap_names(caps)          \
           << " by its table in provider_caps.hpp, and fi_getinfo answered -FI_ENODATA"      \
           << (unlisted_.empty() ? "" : ": ") << unlisted_;                                  \
  } while (0)

}  // namespace conformance
