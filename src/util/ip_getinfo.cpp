// SPDX-License-Identifier: MIT
// weft — fi_getinfo for providers over IP sockets.
#include "util/ip_getinfo.hpp"

#include "core/errc.hpp"
#include "core/info.hpp"
#include "core/log.hpp"
#include "core/refusal.hpp"
#include "core/tostr.hpp"
#include "util/info_match.hpp"
#include "util/ip_codec.hpp"
#include "util/net.hpp"

#include <netdb.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

namespace weft::util {

namespace {

struct info_deleter {
  void operator()(fi_info* i) const noexcept { core::free_info(i); }
};
using info_ptr = std::unique_ptr<fi_info, info_deleter>;

struct addrinfo_deleter {
  void operator()(addrinfo* a) const noexcept { freeaddrinfo(a); }
};

// Resolves node/service the way fi_getinfo(3) describes; false (logged) if
// they name nothing usable.
bool resolve(const fi_provider* prov, int socktype, const char* node, const char* service,
             uint64_t flags, int family, sockaddr_storage& out) {
  // fi_getinfo(3): node may be an FI_ADDR_STR address, service then NULL.
  std::string host, port;
  if (node && std::strstr(node, "://")) {
    int named = AF_UNSPEC;
    if (service || !util::split_addr_str(node, host, port, named) ||
        (family != AF_UNSPEC && named != AF_UNSPEC && named != family)) {
      core::refuse(0, "node", "%s is not an IP address %s can use", node, prov->name);
      return false;
    }
    if (named != AF_UNSPEC) family = named;
    node = host.c_str();
    service = port.c_str();
  }
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = socktype;
  if (flags & FI_SOURCE) hints.ai_flags |= AI_PASSIVE;
  if (flags & FI_NUMERICHOST) hints.ai_flags |= AI_NUMERICHOST;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(node, service, &hints, &res);
  if (rc != 0 || !res) {
    core::refuse(0, node ? "node" : "service", "cannot resolve %s:%s: %s", node ? node : "",
                 service ? service : "", gai_strerror(rc));
    return false;
  }
  std::unique_ptr<addrinfo, addrinfo_deleter> guard{res};
  std::memcpy(&out, res->ai_addr, res->ai_addrlen);
  return true;
}

bool set_addr(void*& field, size_t& len, const sockaddr* sa) {
  std::free(field);
  len = util::sockaddr_len(sa);
  field = std::malloc(len);
  if (!field) return false;
  std::memcpy(field, sa, len);
  return true;
}

uint16_t& port_of(sockaddr_storage& ss) {
  return ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in&>(ss).sin_port
                                 : reinterpret_cast<sockaddr_in6&>(ss).sin6_port;
}

uint16_t port_of(const sockaddr* sa) {
  return sa->sa_family == AF_INET ? reinterpret_cast<const sockaddr_in*>(sa)->sin_port
                                  : reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port;
}

}  // namespace

int ip_getinfo(const ip_getinfo_args& a, uint32_t version, const char* node,
               const char* service, uint64_t flags, const fi_info* hints,
               fi_info** info) noexcept {
  return abi_guard([&]() -> int {
    // Where the caller pins addresses, only matching interfaces qualify.
    const sockaddr* want_src = nullptr;
    sockaddr_storage resolved{};
    bool have_resolved = false;
    int family = AF_UNSPEC;
    if (hints && hints->addr_format == FI_SOCKADDR_IN) family = AF_INET;
    if (hints && hints->addr_format == FI_SOCKADDR_IN6) family = AF_INET6;
    if (hints && hints->addr_format && family == AF_UNSPEC &&
        hints->addr_format != FI_SOCKADDR) {
      core::refuse(0, "addr_format", "asked %s, %s speaks IP socket addresses",
                   core::tostr::enum_name(core::tostr::enum_set::addr_format, hints->addr_format),
                   a.prov->name);
      return to_fi(errc::nodata);
    }
    if (node || service) {
      if (!resolve(a.prov, a.socktype, node, service, flags, family, resolved)) return to_fi(errc::nodata);
      have_resolved = true;
      if (flags & FI_SOURCE) want_src = reinterpret_cast<sockaddr*>(&resolved);
    }
    // fi_getinfo(3): node without FI_SOURCE names the destination; a source
    // in the hints still pins where the endpoint binds.
    if (!want_src && hints && hints->src_addr) {
      want_src = static_cast<const sockaddr*>(hints->src_addr);
      if (!sockaddr_len(want_src) || hints->src_addrlen < sockaddr_len(want_src)) {
        core::refuse(0, "src_addr", "not an IP socket address of src_addrlen %zu bytes",
                     hints->src_addrlen);
        return to_fi(errc::nodata);
      }
    }
    const sockaddr* hint_dest = nullptr;
    if (hints && hints->dest_addr) {
      hint_dest = static_cast<const sockaddr*>(hints->dest_addr);
      if (!sockaddr_len(hint_dest) || hints->dest_addrlen < sockaddr_len(hint_dest)) {
        core::refuse(0, "dest_addr", "not an IP socket address of dest_addrlen %zu bytes",
                     hints->dest_addrlen);
        return to_fi(errc::nodata);
      }
    }

    // A source that is the any-address (FI_SOURCE with no node, or 0.0.0.0
    // named): the endpoint listens on every interface, as libfabric's tcp
    // and udp answer it; one answer per template, not one per interface.
    const bool any_src = want_src && is_any_addr(want_src);
    // A destination without a pinned source: only the interface the kernel
    // routes it through, so the first answer can reach it (an endpoint bound
    // to the loopback address cannot connect to another host).
    const sockaddr* route_to =
        have_resolved && !(flags & FI_SOURCE) ? reinterpret_cast<sockaddr*>(&resolved) : hint_dest;
    sockaddr_storage route{};
    const std::vector<ip_iface> ifaces = list_ip_ifaces();
    bool routed = !want_src && route_to && route_source(route_to, route);
    auto same_addr = [](const sockaddr_storage& x, const sockaddr_storage& y) {
      return x.ss_family == y.ss_family && same_host(reinterpret_cast<const sockaddr*>(&x),
                                                     reinterpret_cast<const sockaddr*>(&y)) &&
             !is_any_addr(reinterpret_cast<const sockaddr*>(&x)) &&
             !is_any_addr(reinterpret_cast<const sockaddr*>(&y));
    };
    if (routed) {
      routed = false;
      for (const ip_iface& i : ifaces) routed |= same_addr(i.addr, route);
    }

    fi_info* head = nullptr;
    fi_info** tail = &head;
    struct list_guard {
      fi_info*& head;
      ~list_guard() { core::free_info(head); }
    } guard{head};
    unsigned usable = 0;  // interfaces that fit the addresses asked for
    for (const ip_iface& iface : ifaces) {
      if (any_src && head) break;
      if (!a.iface.empty() && iface.name != a.iface) continue;
      if (routed && !same_addr(iface.addr, route)) continue;
      int fam = iface.addr.ss_family;
      if (family != AF_UNSPEC && fam != family) continue;
      if (want_src && !same_host(want_src, reinterpret_cast<const sockaddr*>(&iface.addr)))
        continue;
      if (have_resolved && !(flags & FI_SOURCE) && resolved.ss_family != fam) continue;
      if (hint_dest && hint_dest->sa_family != fam) continue;
      ++usable;
      for (const fi_info* tmpl : a.templates) {
        fi_info local = *tmpl;
        fi_domain_attr dom = *tmpl->domain_attr;
        fi_fabric_attr fab = *tmpl->fabric_attr;
        dom.name = const_cast<char*>(iface.name.c_str());
        fab.name = const_cast<char*>(iface.network.c_str());
        local.domain_attr = &dom;
        local.fabric_attr = &fab;
        local.addr_format = fam == AF_INET ? FI_SOCKADDR_IN : FI_SOCKADDR_IN6;
        bool nomem = false;
        info_ptr match{match_info(a.prov, version, local, hints, &nomem, a.match_options)};
        if (nomem) return to_fi(errc::nomem);
        if (!match) continue;
        // Source: the interface (or the pinned address) with the asked port.
        sockaddr_storage src = iface.addr;
        if (any_src)
          std::memcpy(&src, want_src, sockaddr_len(want_src));
        else if (want_src)
          port_of(src) = port_of(want_src);
        if (!set_addr(match->src_addr, match->src_addrlen, reinterpret_cast<sockaddr*>(&src)))
          return to_fi(errc::nomem);
        const sockaddr* dest = hint_dest;
        if (have_resolved && !(flags & FI_SOURCE)) dest = reinterpret_cast<sockaddr*>(&resolved);
        if (dest && !set_addr(match->dest_addr, match->dest_addrlen, dest))
          return to_fi(errc::nomem);
        *tail = match.release();
        tail = &(*tail)->next;
      }
    }
    if (!usable) {
      // Templates were never tried: the addresses ruled every interface out.
      const char* field = want_src ? (node || service ? "node" : "src_addr")
                          : have_resolved ? "node"
                          : hint_dest     ? "dest_addr"
                                          : "addr_format";
      core::refuse(0, field, "no interface%s%s that is up has an address that fits",
                   a.iface.empty() ? "" : " named ", a.iface.c_str());
    }
    if (!head) return to_fi(errc::nodata);
    *info = std::exchange(head, nullptr);
    return 0;
  });
}

}  // namespace weft::util
