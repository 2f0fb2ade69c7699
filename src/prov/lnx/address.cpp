// SPDX-License-Identifier: MIT
// weft — lnx addresses: the host identity, reading an address (every field
// checked: addresses come from other processes), and the AV codec.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "prov/lnx/lnx.hpp"

namespace weft::lnx {

namespace {

uint64_t mix(uint64_t h, const void* p, size_t n) noexcept {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 0x100000001b3ULL;  // FNV-1a
  }
  return h;
}

uint64_t compute_host() noexcept {
  uint64_t h = 0xcbf29ce484222325ULL;
  char boot[64] = {};
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "re")) {
    size_t n = std::fread(boot, 1, sizeof boot - 1, f);
    std::fclose(f);
    h = mix(h, boot, n);
  } else {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    h = mix(h, host, std::strlen(host));
  }
  struct stat st {};
  if (stat("/proc/self/ns/net", &st) == 0) {
    h = mix(h, &st.st_ino, sizeof st.st_ino);
    h = mix(h, &st.st_dev, sizeof st.st_dev);
  }
  if (stat("/dev/shm", &st) == 0) {
    h = mix(h, &st.st_ino, sizeof st.st_ino);
    h = mix(h, &st.st_dev, sizeof st.st_dev);
  }
  uid_t u = geteuid();
  h = mix(h, &u, sizeof u);
  return h ? h : 1;
}

size_t codec_stride(const void*) noexcept {
  return proto::addr_bytes;
}

int codec_encode(const void* addr, uint8_t* entry) noexcept {
  if (!addr) return to_fi(errc::inval);
  proto::addr_header h;
  part parts[proto::max_parts];
  size_t n = 0;
  if (!read_address(static_cast<const uint8_t*>(addr), h, parts, &n)) return to_fi(errc::inval);
  // read_address checked that the bytes past the parts are zeroes, so
  // equal addresses are equal entries.
  std::memcpy(entry, addr, proto::addr_bytes);
  return 0;
}

size_t codec_decode(const uint8_t* entry, void* addr, size_t len) noexcept {
  std::memcpy(addr, entry, std::min(len, proto::addr_bytes));
  return proto::addr_bytes;
}

size_t codec_addrlen(const uint8_t*) noexcept {
  return proto::addr_bytes;
}

const char* prov_name(proto::prov_id id) noexcept {
  switch (id) {
    case proto::prov_id::shm:
      return "shm";
    case proto::prov_id::tcp:
      return "tcp";
    case proto::prov_id::udp:
      return "udp";
  }
  return "?";
}

size_t codec_straddr(const void* addr, char* buf, size_t len) noexcept {
  proto::addr_header h;
  part parts[proto::max_parts];
  size_t n = 0;
  if (!addr || !read_address(static_cast<const uint8_t*>(addr), h, parts, &n)) return 0;
  char out[96];
  uint64_t host = 0;
  std::memcpy(&host, h.host, sizeof h.host);
  int w = std::snprintf(out, sizeof out, "fi_lnx://%012llx/", static_cast<unsigned long long>(host));
  for (size_t i = 0; i < n && w > 0 && static_cast<size_t>(w) < sizeof out; ++i)
    w += std::snprintf(out + w, sizeof out - static_cast<size_t>(w), "%s%s", i ? "+" : "",
                       prov_name(parts[i].id));
  size_t need = std::strlen(out) + 1;
  if (len) {
    std::memcpy(buf, out, std::min(len - 1, need - 1));
    buf[std::min(len - 1, need - 1)] = '\0';
  }
  return need;
}

uint32_t codec_hash(const uint8_t* entry) noexcept {
  uint64_t h = mix(0xcbf29ce484222325ULL, entry, proto::addr_bytes);
  return static_cast<uint32_t>(h ^ (h >> 32));
}

const util::av_codec the_codec = {
    .addr_format = FI_FORMAT_UNSPEC,
    .entry_size = proto::addr_bytes,
    .live_offset = offsetof(proto::addr_header, marker),  // marker and version: never 0
    .max_addrlen = proto::addr_bytes,
    .stride = codec_stride,
    .encode = codec_encode,
    .decode = codec_decode,
    .addrlen = codec_addrlen,
    .straddr = codec_straddr,
    .hash = codec_hash,
    .resolve = nullptr,
    .step_node = nullptr,
    // Entries hold other providers' addresses, which mean the same in every
    // process of the host; but a named AV is not offered by lnx yet.
    .shareable = false,
};

}  // namespace

uint64_t host_identity() noexcept {
  static const uint64_t h = compute_host();
  return h;
}

const util::av_codec& codec() noexcept {
  return the_codec;
}

void host_bytes(uint8_t out[6]) noexcept {
  uint64_t h = host_identity();
  std::memcpy(out, &h, 6);
}

bool same_host(const proto::addr_header& h) noexcept {
  uint8_t ours[6];
  host_bytes(ours);
  return std::memcmp(h.host, ours, sizeof ours) == 0;
}

bool read_address(const uint8_t* a, proto::addr_header& h, part* parts, size_t* n) noexcept {
  std::memcpy(&h, a, sizeof h);
  if (h.marker != proto::marker || h.version != proto::version) return false;
  size_t off = sizeof h, k = 0;
  uint32_t seen = 0;
  unsigned last = 0;
  // Parts until a zero byte where the next would start, or the end.
  while (off < proto::addr_bytes && a[off] != 0) {
    uint8_t b = a[off++];
    unsigned prov = proto::part_prov(b);
    size_t len = proto::part_len(b);
    if (prov == 0 || len == 0 || off + len > proto::addr_bytes) return false;
    // One part per provider, except a network provider's rails, which
    // stand next to each other; shm is never railed.
    if ((seen & (1u << prov)) &&
        (prov != last || prov == static_cast<unsigned>(proto::prov_id::shm)))
      return false;
    seen |= 1u << prov;
    last = prov;
    if (k == proto::max_parts) return false;
    parts[k++] = {static_cast<proto::prov_id>(prov), a + off, len};
    off += len;
  }
  if (k == 0) return false;
  for (; off < proto::addr_bytes; ++off)
    if (a[off]) return false;  // only zeroes after the parts
  *n = k;
  return true;
}

}  // namespace weft::lnx
