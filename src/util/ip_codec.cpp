// SPDX-License-Identifier: MIT
// weft — AV codecs for IP peers.
#include "util/ip_codec.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <string_view>

namespace weft::util {

namespace {

constexpr uint8_t v4_mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

bool is_v4_mapped(const uint8_t* addr16) noexcept {
  return std::memcmp(addr16, v4_mapped_prefix, sizeof v4_mapped_prefix) == 0;
}

// A 64-bit finaliser (xor-shift-multiply): every input bit reaches the top
// 32 bits, which is what the AV's index uses.
inline uint64_t mix(uint64_t x) noexcept {
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ULL;
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ULL;
  x ^= x >> 32;
  return x;
}

inline uint64_t load8(const uint8_t* p) noexcept {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
// Six bytes as two loads combined in registers: copying them into a zeroed
// word instead stalls on store forwarding, which costs more than the hash.
inline uint64_t load6(const uint8_t* p) noexcept {
  uint32_t lo;
  uint16_t hi;
  std::memcpy(&lo, p, 4);
  std::memcpy(&hi, p + 4, 2);
  return lo | uint64_t{hi} << 32;
}

uint32_t hash_v4(const uint8_t* e) noexcept {
  return static_cast<uint32_t>(mix(load6(e)) >> 32);
}

uint32_t hash_v6(const uint8_t* e) noexcept {
  uint64_t h = mix(load8(e) ^ 0x9e3779b97f4a7c15ULL);
  h = mix(h ^ load8(e + 8));
  h = mix(h ^ load6(e + 16));
  return static_cast<uint32_t>(h >> 32);
}

// User addresses are read through copies: the application's array need not
// be aligned for the struct.
template <class T>
T read_as(const void* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
sa_family_t family_of(const void* p) noexcept {
  sa_family_t f;
  std::memcpy(&f, static_cast<const uint8_t*>(p) + offsetof(sockaddr, sa_family), sizeof f);
  return f;
}

size_t copy_out(const void* src, size_t full, void* dst, size_t len) noexcept {
  if (dst && len) std::memcpy(dst, src, std::min(full, len));
  return full;
}

// ---- IPv4 --------------------------------------------------------------

size_t v4_stride(const void*) noexcept {
  return sizeof(sockaddr_in);
}

int v4_encode(const void* addr, uint8_t* e) noexcept {
  auto sa = read_as<sockaddr_in>(addr);
  if (sa.sin_family != AF_INET || sa.sin_port == 0) return -FI_EINVAL;
  std::memcpy(e, &sa.sin_addr, 4);
  std::memcpy(e + 4, &sa.sin_port, 2);
  return 0;
}

size_t v4_decode(const uint8_t* e, void* addr, size_t len) noexcept {
  sockaddr_in sa;
  ipv4_entry_to_sockaddr(e, &sa);
  return copy_out(&sa, sizeof sa, addr, len);
}

size_t v4_addrlen(const uint8_t*) noexcept {
  return sizeof(sockaddr_in);
}

size_t format_v4(const sockaddr_in& sa, char* buf, size_t len) noexcept {
  char host[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &sa.sin_addr, host, sizeof host);
  int n = std::snprintf(buf, len, "fi_sockaddr_in://%s:%u", host, ntohs(sa.sin_port));
  return static_cast<size_t>(n) + 1;
}

size_t format_v6(const sockaddr_in6& sa, char* buf, size_t len) noexcept {
  char host[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, &sa.sin6_addr, host, sizeof host);
  char scope[16] = "";
  if (sa.sin6_scope_id) std::snprintf(scope, sizeof scope, "%%%u", sa.sin6_scope_id);
  int n = std::snprintf(buf, len, "fi_sockaddr_in6://[%s%s]:%u", host, scope, ntohs(sa.sin6_port));
  return static_cast<size_t>(n) + 1;
}

size_t v4_straddr(const void* addr, char* buf, size_t len) noexcept {
  if (family_of(addr) != AF_INET) return 0;
  return format_v4(read_as<sockaddr_in>(addr), buf, len);
}

// ---- IPv6 and dual -----------------------------------------------------

size_t v6_stride(const void*) noexcept {
  return sizeof(sockaddr_in6);
}

void put_v6(const sockaddr_in6& sa, uint8_t* e) noexcept {
  std::memcpy(e, &sa.sin6_addr, 16);
  std::memcpy(e + 16, &sa.sin6_port, 2);
  // A scope means nothing for a v4-mapped peer; dropping it keeps one entry
  // per peer.
  uint32_t scope = is_v4_mapped(e) ? 0 : sa.sin6_scope_id;
  std::memcpy(e + 18, &scope, 4);
}

int v6_encode(const void* addr, uint8_t* e) noexcept {
  // The family first: a shorter address of another family ends sooner.
  if (family_of(addr) != AF_INET6) return -FI_EINVAL;
  auto sa = read_as<sockaddr_in6>(addr);
  if (sa.sin6_port == 0) return -FI_EINVAL;
  put_v6(sa, e);
  return 0;
}

size_t v6_decode(const uint8_t* e, void* addr, size_t len) noexcept {
  sockaddr_in6 sa;
  ipv6_entry_to_sockaddr6(e, &sa);
  return copy_out(&sa, sizeof sa, addr, len);
}

size_t v6_addrlen(const uint8_t*) noexcept {
  return sizeof(sockaddr_in6);
}

size_t v6_straddr(const void* addr, char* buf, size_t len) noexcept {
  if (family_of(addr) != AF_INET6) return 0;
  return format_v6(read_as<sockaddr_in6>(addr), buf, len);
}

size_t dual_stride(const void* first) noexcept {
  // An array of one family, sized by its first element.
  return family_of(first) == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

int dual_encode(const void* addr, uint8_t* e) noexcept {
  if (family_of(addr) != AF_INET) return v6_encode(addr, e);
  auto sa = read_as<sockaddr_in>(addr);
  if (sa.sin_port == 0) return -FI_EINVAL;
  std::memcpy(e, v4_mapped_prefix, 12);
  std::memcpy(e + 12, &sa.sin_addr, 4);
  std::memcpy(e + 16, &sa.sin_port, 2);
  std::memset(e + 18, 0, 4);
  return 0;
}

size_t dual_decode(const uint8_t* e, void* addr, size_t len) noexcept {
  if (!is_v4_mapped(e)) return v6_decode(e, addr, len);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  std::memcpy(&sa.sin_addr, e + 12, 4);
  std::memcpy(&sa.sin_port, e + 16, 2);
  return copy_out(&sa, sizeof sa, addr, len);
}

size_t dual_addrlen(const uint8_t* e) noexcept {
  return is_v4_mapped(e) ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

size_t dual_straddr(const void* addr, char* buf, size_t len) noexcept {
  return family_of(addr) == AF_INET ? v4_straddr(addr, buf, len) : v6_straddr(addr, buf, len);
}

// ---- name resolution ---------------------------------------------------

int resolve_with(const av_codec& codec, int family, const char* node, const char* service,
                 uint8_t* entry) {
  if (!node) return -FI_EINVAL;
  std::string host, port;
  if (std::strstr(node, "://")) {
    if (service) return -FI_EINVAL;  // fi_getinfo(3): service must then be NULL
    int named;
    if (!split_addr_str(node, host, port, named)) return -FI_EINVAL;
    if (named != AF_UNSPEC) {
      if (family != AF_UNSPEC && named != family) return -FI_EINVAL;
      family = named;
    }
  } else {
    if (!service) return -FI_EINVAL;  // a peer needs a port
    host = node;
    port = service;
  }
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_DGRAM;  // one answer per address, not per socket type
  // An IPv6-only AV still reaches IPv4-only hosts through mapped addresses.
  if (codec.addr_format == FI_SOCKADDR_IN6) hints.ai_flags = AI_V4MAPPED;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc == EAI_MEMORY) return -FI_ENOMEM;
  if (rc != 0 || !res) return -FI_EADDRNOTAVAIL;
  rc = codec.encode(res->ai_addr, entry);
  freeaddrinfo(res);
  return rc;
}

int v4_resolve(const char* node, const char* service, uint8_t* entry) {
  return resolve_with(ipv4_codec, AF_INET, node, service, entry);
}
int v6_resolve(const char* node, const char* service, uint8_t* entry) {
  return resolve_with(ipv6_codec, AF_INET6, node, service, entry);
}
int dual_resolve(const char* node, const char* service, uint8_t* entry) {
  return resolve_with(sockaddr_codec, AF_UNSPEC, node, service, entry);
}

// Adds `step` to a big-endian number of n bytes; false on overflow.
bool add_be(uint8_t* p, size_t n, uint64_t step) noexcept {
  for (size_t i = n; i-- > 0 && step;) {
    uint64_t sum = p[i] + (step & 0xff);
    p[i] = static_cast<uint8_t>(sum);
    step = (step >> 8) + (sum >> 8);
  }
  return step == 0;
}

// fi_av_insertsym(3): numeric addresses count up ("10.1.1.1", "10.1.1.2");
// host names step their numeric suffix ("host09", "host10"). A "%scope"
// suffix of an IPv6 node is kept as it is.
int step_node(const char* node, size_t step, char* out, size_t len) {
  if (!node || !out) return -FI_EINVAL;
  std::string_view n{node};
  auto pct = n.find('%');
  std::string base{n.substr(0, pct)};
  std::string scope{pct == std::string_view::npos ? std::string_view{} : n.substr(pct)};
  std::string stepped;
  uint8_t bin[16];
  char text[INET6_ADDRSTRLEN];
  if (step == 0) {
    stepped = base;
  } else if (inet_pton(AF_INET, base.c_str(), bin) == 1) {
    if (!add_be(bin, 4, step)) return -FI_EINVAL;
    stepped = inet_ntop(AF_INET, bin, text, sizeof text);
  } else if (inet_pton(AF_INET6, base.c_str(), bin) == 1) {
    if (!add_be(bin, 16, step)) return -FI_EINVAL;
    stepped = inet_ntop(AF_INET6, bin, text, sizeof text);
  } else {
    size_t digits = 0;
    while (digits < base.size() &&
           std::isdigit(static_cast<unsigned char>(base[base.size() - 1 - digits])))
      ++digits;
    if (digits == 0 || digits > 18) return -FI_EINVAL;
    auto prefix = base.substr(0, base.size() - digits);
    unsigned long long value = std::stoull(base.substr(base.size() - digits)) + step;
    char num[32];
    std::snprintf(num, sizeof num, "%0*llu", static_cast<int>(digits), value);
    stepped = prefix + num;
  }
  stepped += scope;
  if (stepped.size() + 1 > len) return -FI_EINVAL;
  std::memcpy(out, stepped.c_str(), stepped.size() + 1);
  return 0;
}

}  // namespace

// Splits an FI_ADDR_STR address, "fi_sockaddr_in://10.0.0.1:7471",
// "fi_sockaddr_in6://[fe80::1%eth0]:7471", "fi_sockaddr://host:7471?qos=3",
// into host, port and the family its format names (AF_UNSPEC for
// fi_sockaddr). False when it is not one of the IP formats.
bool split_addr_str(std::string_view s, std::string& host, std::string& port, int& family) {
  auto sep = s.find("://");
  auto scheme = s.substr(0, sep);
  if (scheme == "fi_sockaddr_in")
    family = AF_INET;
  else if (scheme == "fi_sockaddr_in6")
    family = AF_INET6;
  else if (scheme == "fi_sockaddr")
    family = AF_UNSPEC;
  else
    return false;
  s.remove_prefix(sep + 3);
  s = s.substr(0, s.find_first_of("/?"));  // fields and options: not addressing
  std::string_view rest;
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string_view::npos) return false;
    host = s.substr(1, close - 1);
    rest = s.substr(close + 1);
  } else {
    auto colon = s.find(':');
    host = s.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view{} : s.substr(colon);
  }
  if (rest.size() < 2 || rest.front() != ':') return false;  // a peer needs a port
  port = rest.substr(1);
  return !host.empty();
}


const av_codec ipv4_codec = {
    .addr_format = FI_SOCKADDR_IN,
    .entry_size = ipv4_entry_size,
    .live_offset = 4,
    .max_addrlen = sizeof(sockaddr_in),
    .stride = v4_stride,
    .encode = v4_encode,
    .decode = v4_decode,
    .addrlen = v4_addrlen,
    .straddr = v4_straddr,
    .hash = hash_v4,
    .resolve = v4_resolve,
    .step_node = step_node,
};

const av_codec ipv6_codec = {
    .addr_format = FI_SOCKADDR_IN6,
    .entry_size = ipv6_entry_size,
    .live_offset = 16,
    .max_addrlen = sizeof(sockaddr_in6),
    .stride = v6_stride,
    .encode = v6_encode,
    .decode = v6_decode,
    .addrlen = v6_addrlen,
    .straddr = v6_straddr,
    .hash = hash_v6,
    .resolve = v6_resolve,
    .step_node = step_node,
};

const av_codec sockaddr_codec = {
    .addr_format = FI_SOCKADDR,
    .entry_size = ipv6_entry_size,
    .live_offset = 16,
    .max_addrlen = sizeof(sockaddr_in6),
    .stride = dual_stride,
    .encode = dual_encode,
    .decode = dual_decode,
    .addrlen = dual_addrlen,
    .straddr = dual_straddr,
    .hash = hash_v6,
    .resolve = dual_resolve,
    .step_node = step_node,
};

const av_codec* ip_codec(uint32_t addr_format) noexcept {
  switch (addr_format) {
    case FI_SOCKADDR_IN:
      return &ipv4_codec;
    case FI_SOCKADDR_IN6:
      return &ipv6_codec;
    case FI_SOCKADDR:
      return &sockaddr_codec;
    default:
      return nullptr;
  }
}

}  // namespace weft::util
