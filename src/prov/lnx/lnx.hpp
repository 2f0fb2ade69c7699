// SPDX-License-Identifier: MIT
// weft — the link provider lnx (fi_lnx(7)): one FI_EP_RDM endpoint over
// several providers ("cores": shm for peers on this host, tcp for the rest),
// reached only through the public API and the peer-provider interface
// (fi_peer(3)): lnx owns the completion queues, counters and the receive
// context, the cores move the bytes.
//
//   lnx.hpp      configuration (FI_LNX_PROV_LINKS), the provider, shared names
//   proto.hpp    the lnx address
//   address.cpp  host identity, building and reading addresses, the AV codec
//   init.cpp     registration, parameters, fi_getinfo
//   domain.cpp   fabric and domain: the cores' fabrics and domains
//   ep.cpp       the endpoint: its cores' endpoints, bindings, routes, close
//   xfer.cpp     the data path: sends routed to a core, receives into the engine
//   router.cpp   routes: which core, and its fi_addr, reaches each peer
//   sep.cpp      scalable endpoints: one per core, contexts that are lnx endpoints
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/providers/fi_prov.h>

#include <memory>
#include <string>
#include <vector>

#include "core/errc.hpp"
#include "prov/lnx/proto.hpp"
#include "util/av.hpp"
#include "util/domain.hpp"
#include "util/fabric.hpp"

namespace weft::lnx {

fi_provider& provider() noexcept;

// One provider of a link, as FI_LNX_PROV_LINKS names it ("tcp:eth0"): the
// provider and, optionally, the domain (for tcp, the interface) it uses.
struct member {
  std::string prov;
  std::string domain;  // empty: the provider's own choice
  proto::prov_id id;
};

// A link: the providers one lnx endpoint joins, shared memory first.
struct link {
  std::vector<member> members;
  std::string name() const;  // "shm+tcp:lo", the lnx domain's name
};

struct config {
  // The links FI_LNX_PROV_LINKS names, or the default shm+tcp.
  std::vector<link> links;
  std::string error;  // set: FI_LNX_PROV_LINKS could not be used (why)
};
const config& cfg() noexcept;

// Parses FI_LNX_PROV_LINKS ("shm+tcp", "shm+tcp:lo", "a+b|c+d"); on error,
// `error` says what was wrong and `links` is empty.
config parse_links(const std::string& text);

int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
            const fi_info* hints, fi_info** info) noexcept;

// ---- cores ----------------------------------------------------------------

// What lnx offers, where its cores carry it: the most an fi_info of lnx
// may ask for.
inline constexpr uint64_t rma_caps =
    FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
inline constexpr uint64_t offered_caps = FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_SOURCE |
                                         FI_DIRECTED_RECV | FI_MULTI_RECV | FI_LOCAL_COMM |
                                         FI_REMOTE_COMM | FI_AV_USER_ID | FI_FENCE |
                                         FI_RMA_EVENT | FI_TRIGGER | FI_NAMED_RX_CTX |
                                         rma_caps;

// A core provider's fi_getinfo for what lnx needs of it (threading and
// progress from `hints`, which may be null). The list is the caller's.
int core_getinfo(const member& m, const fi_info* hints, fi_info** out) noexcept;

// The domain's hooks for regions and atomics (mr.cpp, rma.cpp).
int mr_attach(util::domain& d, util::mr& m, const fi_mr_attr& attr, uint64_t flags) noexcept;
// fi_scalable_ep (sep.cpp).
int open_sep(util::domain& d, fi_info* info, fid_ep** out, void* context);
int query_atomic(util::domain& d, int datatype, int op, fi_atomic_attr* attr,
                 uint64_t flags) noexcept;

// A core's fabric and domain, opened for one lnx domain.
struct core_domain {
  member m;
  fi_info* info = nullptr;  // the core's fi_info the domain was opened with
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  ~core_domain();
};

class domain : public util::domain {
 public:
  domain(util::fabric& fab, const fi_info& info, void* context);
  ~domain() override;
  // Opens the cores of the link info names; 0 or -FI_E*.
  int open_cores(const fi_info& info) noexcept;
  std::vector<std::unique_ptr<core_domain>>& cores() noexcept { return cores_; }
  // A shared receive context's depth when fi_srx_context asks for none:
  // the endpoints' (the smallest of the cores').
  size_t rx_size() const noexcept;

 private:
  std::vector<std::unique_ptr<core_domain>> cores_;
};

extern const util::fabric_hooks fabric_hooks;
extern const util::domain_hooks domain_hooks;

// ---- addresses ---------------------------------------------------------------

// This host, as lnx tells hosts apart: the kernel's boot id, the network
// namespace (tests make two hosts of one machine with two of them), the
// shared-memory mount and the user. Two processes with the same value reach
// each other through shm.
uint64_t host_identity() noexcept;

// The codec of lnx AVs: an entry is the whole address.
const util::av_codec& codec() noexcept;

// One part of an address, read.
struct part {
  proto::prov_id id;
  const uint8_t* bytes;
  size_t len;
};
// Checks an address of proto::addr_bytes; fills `parts` (count in *n).
// false: malformed (not logged: callers say why in their own terms).
bool read_address(const uint8_t* a, proto::addr_header& h, part* parts, size_t* n) noexcept;
// This host's identity as an address carries it (its low 48 bits).
void host_bytes(uint8_t out[6]) noexcept;
bool same_host(const proto::addr_header& h) noexcept;

// A core's address in its compact form inside an lnx address (part.cpp),
// by the core's addr_format: the part's length, or 0 when it does not fit.
size_t encode_part(uint32_t fmt, const char* prov, const uint8_t* name, size_t len,
                   uint8_t* out) noexcept;
// ...and back: the address the core's fi_av_insert takes, in `outlen` bytes.
bool decode_part(uint32_t fmt, const char* prov, const uint8_t* part, size_t len, uint8_t* out,
                 size_t outlen) noexcept;

}  // namespace weft::lnx
