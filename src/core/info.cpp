// SPDX-License-Identifier: MIT
// weft — fi_info allocation, deep copy and release, for every ABI version.
#include "core/info.hpp"

#include <rdma/fi_domain.h>

#include <cstdlib>
#include <cstring>

namespace weft::core {

// The prefixes each ABI version knows; see compat.md for the history.
const abi_layout abi_1_0 = {offsetof(fi_info, nic),           offsetof(fi_tx_attr, tclass),
                            sizeof(fi_rx_attr),               offsetof(fi_ep_attr, auth_key_size),
                            offsetof(fi_domain_attr, cntr_cnt), offsetof(fi_fabric_attr, api_version)};
const abi_layout abi_1_1 = {offsetof(fi_info, nic),         offsetof(fi_tx_attr, tclass),
                            sizeof(fi_rx_attr),             sizeof(fi_ep_attr),
                            offsetof(fi_domain_attr, tclass), sizeof(fi_fabric_attr)};
const abi_layout abi_1_2 = {sizeof(fi_info),                offsetof(fi_tx_attr, tclass),
                            sizeof(fi_rx_attr),             sizeof(fi_ep_attr),
                            offsetof(fi_domain_attr, tclass), sizeof(fi_fabric_attr)};
const abi_layout abi_1_3 = {sizeof(fi_info),    sizeof(fi_tx_attr),
                            sizeof(fi_rx_attr), sizeof(fi_ep_attr),
                            offsetof(fi_domain_attr, max_ep_auth_key), sizeof(fi_fabric_attr)};
const abi_layout abi_1_7 = {sizeof(fi_info),    sizeof(fi_tx_attr),
                            sizeof(fi_rx_attr), sizeof(fi_ep_attr),
                            offsetof(fi_domain_attr, max_group_id), sizeof(fi_fabric_attr)};
const abi_layout abi_1_8 = {sizeof(fi_info),    sizeof(fi_tx_attr),
                            sizeof(fi_rx_attr), sizeof(fi_ep_attr),
                            offsetof(fi_domain_attr, max_cntr_value), sizeof(fi_fabric_attr)};
const abi_layout abi_current = {sizeof(fi_info),    sizeof(fi_tx_attr),     sizeof(fi_rx_attr),
                                sizeof(fi_ep_attr), sizeof(fi_domain_attr), sizeof(fi_fabric_attr)};

namespace {

template <class T>
T* zalloc() noexcept {
  return static_cast<T*>(std::calloc(1, sizeof(T)));
}

// Copies the caller-owned prefix of a struct into a zeroed current-size one.
template <class T>
T* dup_prefix(const T* src, size_t owned) noexcept {
  T* dst = zalloc<T>();
  if (dst && src) std::memcpy(static_cast<void*>(dst), src, owned < sizeof(T) ? owned : sizeof(T));
  return dst;
}

bool dup_bytes(void*& dst, const void* src, size_t len) noexcept {
  dst = nullptr;
  if (!src || !len) return true;
  dst = std::malloc(len);
  if (!dst) return false;
  std::memcpy(dst, src, len);
  return true;
}

bool dup_str(char*& dst, const char* src) noexcept {
  dst = src ? strdup(src) : nullptr;
  return !src || dst;
}

}  // namespace

fi_info* dup_info(const fi_info* src, const abi_layout& l) noexcept {
  fi_info* dst = dup_prefix<fi_info>(src, l.info);
  if (!dst) return nullptr;
  // Pointers copied with the prefix are the source's: clear them first, so a
  // failure half-way frees only what this copy owns.
  dst->next = nullptr;
  dst->src_addr = dst->dest_addr = nullptr;
  dst->tx_attr = nullptr;
  dst->rx_attr = nullptr;
  dst->ep_attr = nullptr;
  dst->domain_attr = nullptr;
  dst->fabric_attr = nullptr;
  dst->nic = nullptr;

  bool ok = true;
  ok = ok && (dst->tx_attr = dup_prefix(src ? src->tx_attr : nullptr, l.tx));
  ok = ok && (dst->rx_attr = dup_prefix(src ? src->rx_attr : nullptr, l.rx));
  ok = ok && (dst->ep_attr = dup_prefix(src ? src->ep_attr : nullptr, l.ep));
  ok = ok && (dst->domain_attr = dup_prefix(src ? src->domain_attr : nullptr, l.domain));
  ok = ok && (dst->fabric_attr = dup_prefix(src ? src->fabric_attr : nullptr, l.fabric));
  if (ok) {
    dst->ep_attr->auth_key = nullptr;
    dst->domain_attr->name = nullptr;
    dst->domain_attr->auth_key = nullptr;
    dst->fabric_attr->name = dst->fabric_attr->prov_name = nullptr;
  }
  if (ok && src) {
    ok = dup_bytes(dst->src_addr, src->src_addr, src->src_addrlen) &&
         dup_bytes(dst->dest_addr, src->dest_addr, src->dest_addrlen);
    if (ok && src->ep_attr && l.ep > offsetof(fi_ep_attr, auth_key))
      ok = dup_bytes(reinterpret_cast<void*&>(dst->ep_attr->auth_key), src->ep_attr->auth_key,
                     src->ep_attr->auth_key_size);
    if (ok && src->domain_attr) {
      ok = dup_str(dst->domain_attr->name, src->domain_attr->name);
      if (ok && l.domain > offsetof(fi_domain_attr, auth_key))
        ok = dup_bytes(reinterpret_cast<void*&>(dst->domain_attr->auth_key),
                       src->domain_attr->auth_key, src->domain_attr->auth_key_size);
    }
    if (ok && src->fabric_attr)
      ok = dup_str(dst->fabric_attr->name, src->fabric_attr->name) &&
           dup_str(dst->fabric_attr->prov_name, src->fabric_attr->prov_name);
    // A NIC description is an object of its provider: it copies itself.
    if (ok && l.info > offsetof(fi_info, nic) && src->nic)
      ok = src->nic->fid.ops->control(&src->nic->fid, FI_DUP, &dst->nic) == 0;
  }
  if (!ok) {
    free_info(dst);
    return nullptr;
  }
  return dst;
}

fi_info* dup_info_list(const fi_info* src) noexcept {
  fi_info* head = nullptr;
  fi_info** tail = &head;
  for (; src; src = src->next) {
    fi_info* copy = dup_info(src, abi_current);
    if (!copy) {
      free_info(head);
      return nullptr;
    }
    *tail = copy;
    tail = &copy->next;
  }
  return head;
}

void free_info(fi_info* info) noexcept {
  while (info) {
    fi_info* next = info->next;
    std::free(info->src_addr);
    std::free(info->dest_addr);
    std::free(info->tx_attr);
    std::free(info->rx_attr);
    if (info->ep_attr) std::free(info->ep_attr->auth_key);
    std::free(info->ep_attr);
    if (info->domain_attr) {
      std::free(info->domain_attr->name);
      std::free(info->domain_attr->auth_key);
    }
    std::free(info->domain_attr);
    if (info->fabric_attr) {
      std::free(info->fabric_attr->name);
      std::free(info->fabric_attr->prov_name);
    }
    std::free(info->fabric_attr);
    if (info->nic) info->nic->fid.ops->close(&info->nic->fid);
    std::free(info);
    info = next;
  }
}

}  // namespace weft::core
