// SPDX-License-Identifier: MIT
// weft — the shm provider's fabric and domain (util's objects with shm's
// endpoint plugged in) and its address codec: FI_ADDR_STR names in, 16-byte
// AV entries kept.
#include "core/log.hpp"
#include "prov/shm/shm.hpp"
#include "util/info_match.hpp"

#include <rdma/fi_domain.h>

#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace weft::shm {

namespace {

constexpr size_t prefix_len = sizeof name_prefix - 1;

// Parses an unsigned decimal field ending at `stop`; advances s.
bool field(const char*& s, const char* end, char stop, uint64_t max, uint64_t& out) {
  const char* p = s;
  uint64_t v = 0;
  if (p == end || *p < '0' || *p > '9') return false;
  while (p != end && *p >= '0' && *p <= '9') {
    if (v > (max - static_cast<uint64_t>(*p - '0')) / 10) return false;
    v = v * 10 + static_cast<uint64_t>(*p - '0');
    ++p;
  }
  if (stop) {
    if (p == end || *p != stop) return false;
    ++p;
  } else if (p != end) {
    return false;
  }
  out = v;
  s = p;
  return true;
}

// fi_av_insert's addresses are the names themselves, back to back at the
// length fi_getname gives (what applications exchange; fi_av(3) speaks of an
// array of char*, but libfabric's providers and its own tools pass the
// strings). Nothing is read past a mismatching prefix, so binary garbage (a
// sockaddr, a pointer) is refused without reading beyond it.
bool is_name(const void* addr) noexcept {
  return std::strncmp(static_cast<const char*>(addr), name_prefix, prefix_len) == 0;
}

size_t codec_stride(const void*) noexcept { return name_bytes; }

int codec_encode(const void* addr, uint8_t* entry) noexcept {
  addr_entry e;
  if (!is_name(addr) || !parse_name(static_cast<const char*>(addr), name_bytes, e))
    return to_fi(errc::inval);
  std::memcpy(entry, &e, sizeof e);
  return 0;
}

size_t codec_decode(const uint8_t* entry, void* addr, size_t len) noexcept {
  addr_entry e;
  std::memcpy(&e, entry, sizeof e);
  char buf[name_bytes];
  format_name(e, buf);
  std::memcpy(addr, buf, std::min(len, name_bytes));
  return name_bytes;
}

size_t codec_addrlen(const uint8_t*) noexcept { return name_bytes; }

size_t codec_straddr(const void* addr, char* buf, size_t len) noexcept {
  const char* s = static_cast<const char*>(addr);
  addr_entry e;
  if (!is_name(addr) || !parse_name(s, name_bytes, e)) return 0;
  size_t need = std::strlen(s) + 1;
  if (len) {
    size_t n = std::min(need - 1, len - 1);
    std::memcpy(buf, s, n);
    buf[n] = '\0';
  }
  return need;
}

uint32_t codec_hash(const uint8_t* entry) noexcept {
  addr_entry e;
  std::memcpy(&e, entry, sizeof e);
  uint64_t h = (uint64_t{e.pid} << 32 | e.index) * 0x9E3779B97F4A7C15ull;
  h ^= (h >> 29) ^ uint64_t{e.pidns} * 0xBF58476D1CE4E5B9ull;
  return static_cast<uint32_t>(h ^ (h >> 32));
}

int codec_resolve(const char* node, const char* service, uint8_t* entry) {
  if (!node || service) return to_fi(errc::inval);
  return codec_encode(node, entry) == 0 ? 0 : to_fi(errc::inval);
}

int open_domain(util::fabric& fab, fi_info* info, fid_domain** out, void* context) {
  if (!offers(fab.api(), *info)) {
    WEFT_WARN(&provider(), FI_LOG_DOMAIN, "the fi_info passed to fi_domain is not one shm offers");
    return to_fi(errc::nodata);
  }
  return util::domain::open(fab, &domain_hooks, *info, out, context);
}

int open_endpoint(util::domain& dom, fi_info* info, fid_ep** out, void* context) {
  return endpoint::open(dom, *info, out, context);
}

// fi_srx_context: with FI_PEER, a context another provider owns (fi_peer(3));
// else the application's own, util's engine shared by the endpoints bound
// to it, which finish its matches through their peer callbacks. Both under
// the endpoints' lock policy: an owner may start a match while the
// domain's progress thread serves the endpoint (automatic progress).
int open_srx(util::domain& dom, fi_rx_attr* attr, fid_ep** out, void* context) {
  const fi_ops_srx_peer* ops =
      util::with_lock_kind(dom.locks(), []<class L>() { return endpoint::peer_table<L>(); });
  return util::open_srx_context(dom, &provider(), attr, rx_depth, ops, out, context);
}

const util::av_codec* codec_for(const util::domain&) { return &addr_codec; }

}  // namespace

const util::av_codec addr_codec = {
    .addr_format = FI_ADDR_STR,
    .entry_size = sizeof(addr_entry),
    .live_offset = offsetof(addr_entry, live),
    .max_addrlen = name_bytes,
    .stride = codec_stride,
    .encode = codec_encode,
    .decode = codec_decode,
    .addrlen = codec_addrlen,
    .straddr = codec_straddr,
    .hash = codec_hash,
    .resolve = codec_resolve,
    .step_node = nullptr,
    // pid, PID namespace and endpoint index name a region for every process
    // of the user: named AVs (FI_SHARED_AV) hold them as they are.
    .shareable = true,
};

bool parse_name(const char* s, size_t len, addr_entry& out) noexcept {
  if (!s) return false;
  size_t n = strnlen(s, len);
  if (n == len || n < prefix_len || std::strncmp(s, name_prefix, prefix_len) != 0) return false;
  const char* p = s + prefix_len;
  const char* end = s + n;
  static constexpr char stem[] = "weft-shm-";
  if (static_cast<size_t>(end - p) < sizeof stem - 1 || std::strncmp(p, stem, sizeof stem - 1) != 0)
    return false;
  p += sizeof stem - 1;
  uint64_t uid, pidns, pid, index;
  if (!field(p, end, '-', UINT32_MAX, uid) || !field(p, end, '-', UINT32_MAX, pidns) ||
      !field(p, end, '-', INT32_MAX, pid) || !field(p, end, 0, UINT32_MAX, index))
    return false;
  // Only our own user's regions can be attached (they are 0600).
  if (uid != static_cast<uint64_t>(::geteuid()) || pid == 0) return false;
  out = addr_entry{static_cast<uint32_t>(pid), static_cast<uint32_t>(pidns),
                   static_cast<uint32_t>(index), 1, 0};
  return true;
}

std::string region_name_of(const addr_entry& e) {
  return region_name(static_cast<uint32_t>(::geteuid()), e.pidns, static_cast<pid_t>(e.pid),
                     e.index);
}

void format_name(const addr_entry& e, char* buf) noexcept {
  std::memset(buf, 0, name_bytes);
  std::snprintf(buf, name_bytes, "%sweft-shm-%" PRIu32 "-%" PRIu32 "-%" PRIu32 "-%" PRIu32,
                name_prefix, static_cast<uint32_t>(::geteuid()), e.pidns, e.pid, e.index);
}

namespace {

int query_atomic(util::domain&, int datatype, int op, fi_atomic_attr* attr,
                 uint64_t flags) noexcept {
  return util::query_atomic_logged(&provider(), datatype, op, attr, flags,
                                   proto::atomic_max_bytes);
}

}  // namespace

const util::fabric_hooks fabric_hooks = {
    .domain = open_domain,
    .passive_ep = nullptr,
};

const util::domain_hooks domain_hooks = {
    .endpoint = open_endpoint,
    .codec = codec_for,
    .query_atomic = query_atomic,
    .srx_ctx = open_srx,
    .scalable_ep = open_sep,
    .handoff = []() noexcept { return cfg().auto_handoff; },
};

}  // namespace weft::shm
