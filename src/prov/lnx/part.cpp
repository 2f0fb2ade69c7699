// SPDX-License-Identifier: MIT
// weft — the compact form of a core's address inside an lnx address
// (proto.hpp): chosen by the core's documented addr_format, so lnx reads
// no provider's private layout. A string address loses its "fi_<prov>://"
// prefix; an IP socket address keeps its port and address (and an IPv6
// scope id that is not 0); anything else keeps its bytes without trailing
// zeroes. Decoding builds the address the core's fi_av_insert takes.
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <string>

#include "prov/lnx/lnx.hpp"

namespace weft::lnx {

namespace {

bool is_sockaddr(uint32_t fmt) noexcept {
  return fmt == FI_SOCKADDR_IN || fmt == FI_SOCKADDR_IN6 || fmt == FI_SOCKADDR;
}

std::string str_prefix(const char* prov) {
  return std::string("fi_") + prov + "://";
}

}  // namespace

size_t encode_part(uint32_t fmt, const char* prov, const uint8_t* name, size_t len,
                   uint8_t* out) noexcept {
  if (fmt == FI_ADDR_STR) {
    size_t n = strnlen(reinterpret_cast<const char*>(name), len);
    std::string pre = str_prefix(prov);
    const uint8_t* from = name;
    if (n > pre.size() && std::memcmp(name, pre.data(), pre.size()) == 0) {
      from += pre.size();
      n -= pre.size();
    }
    if (n == 0 || n > proto::max_part_len) return 0;
    std::memcpy(out, from, n);
    return n;
  }
  if (is_sockaddr(fmt) && len >= sizeof(sockaddr)) {
    sa_family_t family;
    std::memcpy(&family, name, sizeof family);
    if (family == AF_INET && len >= sizeof(sockaddr_in)) {
      sockaddr_in sin;
      std::memcpy(&sin, name, sizeof sin);
      std::memcpy(out, &sin.sin_port, 2);
      std::memcpy(out + 2, &sin.sin_addr, 4);
      return 6;
    }
    if (family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
      sockaddr_in6 sin6;
      std::memcpy(&sin6, name, sizeof sin6);
      std::memcpy(out, &sin6.sin6_port, 2);
      std::memcpy(out + 2, &sin6.sin6_addr, 16);
      if (!sin6.sin6_scope_id) return 18;
      std::memcpy(out + 18, &sin6.sin6_scope_id, 4);
      return 22;
    }
    return 0;
  }
  while (len && name[len - 1] == 0) --len;
  if (len == 0 || len > proto::max_part_len) return 0;
  std::memcpy(out, name, len);
  return len;
}

bool decode_part(uint32_t fmt, const char* prov, const uint8_t* part, size_t len, uint8_t* out,
                 size_t outlen) noexcept {
  std::memset(out, 0, outlen);
  if (fmt == FI_ADDR_STR) {
    // A part holding "://" kept its prefix (it was not ours to strip).
    std::string s(reinterpret_cast<const char*>(part), len);
    if (s.find('\0') != std::string::npos) return false;
    if (s.find("://") == std::string::npos) s = str_prefix(prov) + s;
    if (s.size() + 1 > outlen) return false;
    std::memcpy(out, s.c_str(), s.size() + 1);
    return true;
  }
  if (is_sockaddr(fmt)) {
    if (len == 6 && outlen >= sizeof(sockaddr_in)) {
      sockaddr_in sin{};
      sin.sin_family = AF_INET;
      std::memcpy(&sin.sin_port, part, 2);
      std::memcpy(&sin.sin_addr, part + 2, 4);
      std::memcpy(out, &sin, sizeof sin);
      return true;
    }
    if ((len == 18 || len == 22) && outlen >= sizeof(sockaddr_in6)) {
      sockaddr_in6 sin6{};
      sin6.sin6_family = AF_INET6;
      std::memcpy(&sin6.sin6_port, part, 2);
      std::memcpy(&sin6.sin6_addr, part + 2, 16);
      if (len == 22) std::memcpy(&sin6.sin6_scope_id, part + 18, 4);
      std::memcpy(out, &sin6, sizeof sin6);
      return true;
    }
    return false;
  }
  if (len > outlen) return false;
  std::memcpy(out, part, len);
  return true;
}

}  // namespace weft::lnx
