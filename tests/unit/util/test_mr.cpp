// SPDX-License-Identifier: MIT
// weft — unit tests of memory registration (util/mr): fi_mr_reg / regv /
// regattr through a domain, the key map, and the bounds and rights check a
// provider runs on every remote access.
#include <gtest/gtest.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "util/domain.hpp"
#include "util/fabric.hpp"
#include "util/mr.hpp"

using namespace weft;
using namespace weft::util;

namespace {

fi_provider test_prov = [] {
  fi_provider p{};
  p.version = 1;
  p.fi_version = FI_VERSION(1, 21);
  p.name = "mrtest";
  return p;
}();

constexpr uint64_t remote_rw = FI_REMOTE_READ | FI_REMOTE_WRITE;

// A fabric and a domain built directly, as a provider would.
struct env {
  fabric* fab = nullptr;
  domain* dom = nullptr;
  std::vector<fid_mr*> open;

  explicit env(int mr_mode, fi_threading threading = FI_THREAD_SAFE, uint64_t caps = 0,
               uint32_t api = FI_VERSION(1, 21)) {
    fi_fabric_attr fa{};
    fa.api_version = api;
    fab = new fabric(&test_prov, nullptr, fa, nullptr);
    fi_domain_attr da{};
    da.threading = threading;
    da.mr_mode = mr_mode;
    fi_info info{};
    info.caps = caps;
    info.domain_attr = &da;
    dom = new domain(*fab, nullptr, info, nullptr);
  }
  ~env() {
    for (fid_mr* m : open) EXPECT_EQ(fi_close(&m->fid), 0);
    EXPECT_EQ(dom->mrs().size(), 0u);  // closing removed every region
    EXPECT_EQ(fi_close(&dom->fid), 0);
    EXPECT_EQ(fi_close(&fab->fid), 0);
  }
  // fi_mr_reg, keeping the region for closing.
  int reg(const void* buf, size_t len, uint64_t access, uint64_t key, fid_mr** out = nullptr,
          uint64_t flags = 0, uint64_t offset = 0) {
    fid_mr* m = nullptr;
    int ret = fi_mr_reg(dom, buf, len, access, offset, key, flags, &m, this);
    if (ret == 0) open.push_back(m);
    if (out) *out = m;
    return ret;
  }
  int regv(const iovec* iov, size_t count, uint64_t access, uint64_t key, fid_mr** out = nullptr) {
    fid_mr* m = nullptr;
    int ret = fi_mr_regv(dom, iov, count, access, 0, key, 0, &m, this);
    if (ret == 0) open.push_back(m);
    if (out) *out = m;
    return ret;
  }
  void close(fid_mr* m) {
    std::erase(open, m);
    EXPECT_EQ(fi_close(&m->fid), 0);
  }
};

const mr* region(fid_mr* m) {
  return mr::from(m);
}

TEST(mr_test, reg_fills_key_and_desc) {
  env e(0);
  char buf[256];
  fid_mr* m;
  ASSERT_EQ(e.reg(buf, sizeof buf, remote_rw | FI_SEND, 42, &m), 0);
  EXPECT_EQ(m->fid.fclass, FI_CLASS_MR);
  EXPECT_EQ(m->fid.context, &e);
  EXPECT_EQ(fi_mr_key(m), 42u);
  EXPECT_EQ(mr::from_desc(fi_mr_desc(m)), region(m));
  EXPECT_EQ(e.dom->mrs().find(42), region(m));
  EXPECT_EQ(e.dom->mrs().find(43), nullptr);
  EXPECT_EQ(region(m)->length(), sizeof buf);
  EXPECT_EQ(region(m)->access(), remote_rw | FI_SEND);
  EXPECT_EQ(region(m)->rma_base(), 0u);  // offsets without FI_MR_VIRT_ADDR
  EXPECT_TRUE(e.dom->busy());            // the region holds its domain
  EXPECT_EQ(fi_close(&e.dom->fid), -FI_EBUSY);
  e.close(m);
  EXPECT_EQ(e.dom->mrs().find(42), nullptr);
  EXPECT_EQ(mr::from_desc(nullptr), nullptr);
}

TEST(mr_test, requested_keys_are_unique) {
  env e(0);
  char buf[64];
  fid_mr* m;
  ASSERT_EQ(e.reg(buf, sizeof buf, FI_REMOTE_READ, 7, &m), 0);
  EXPECT_EQ(e.reg(buf, sizeof buf, FI_REMOTE_READ, 7), -FI_ENOKEY);
  EXPECT_EQ(e.reg(buf, sizeof buf, FI_REMOTE_READ, FI_KEY_NOTAVAIL), -FI_EKEYREJECTED);
  EXPECT_EQ(e.reg(buf, sizeof buf, FI_REMOTE_READ, 0), 0);  // 0 is an ordinary key
  e.close(m);
  EXPECT_EQ(e.reg(buf, sizeof buf, FI_REMOTE_READ, 7), 0);  // free again once closed
}

TEST(mr_test, provider_keys_ignore_the_request) {
  env e(FI_MR_PROV_KEY);
  char buf[64];
  std::set<uint64_t> keys;
  for (int i = 0; i < 16; ++i) {
    fid_mr* m;
    ASSERT_EQ(e.reg(buf, sizeof buf, FI_REMOTE_READ, 7, &m), 0);
    EXPECT_NE(fi_mr_key(m), FI_KEY_NOTAVAIL);
    EXPECT_EQ(e.dom->mrs().find(fi_mr_key(m)), region(m));
    keys.insert(fi_mr_key(m));
  }
  EXPECT_EQ(keys.size(), 16u);
  // A closed region's key is not handed out again right away.
  uint64_t old = fi_mr_key(e.open.front());
  e.close(e.open.front());
  fid_mr* m;
  ASSERT_EQ(e.reg(buf, sizeof buf, FI_REMOTE_READ, FI_KEY_NOTAVAIL, &m), 0);
  EXPECT_NE(fi_mr_key(m), old);
}

TEST(mr_test, basic_mode_means_virt_addr_and_provider_keys) {
  env e(FI_MR_BASIC);
  char buf[64];
  fid_mr* a;
  fid_mr* b;
  ASSERT_EQ(e.reg(buf, sizeof buf, FI_REMOTE_READ, 5, &a), 0);
  ASSERT_EQ(e.reg(buf, sizeof buf, FI_REMOTE_READ, 5, &b), 0);
  EXPECT_NE(fi_mr_key(a), fi_mr_key(b));
  EXPECT_EQ(region(a)->rma_base(), reinterpret_cast<uintptr_t>(buf));
}

TEST(mr_test, registration_arguments_are_checked) {
  env e(0);
  char buf[64];
  fid_mr* m = nullptr;
  EXPECT_EQ(e.reg(buf, 0, FI_READ, 1), -FI_EINVAL);              // len must be > 0
  EXPECT_EQ(e.reg(nullptr, 8, FI_READ, 1), -FI_EINVAL);          // NULL buffer
  EXPECT_EQ(e.reg(buf, sizeof buf, 1ULL << 30, 1), -FI_EINVAL);  // unknown access bit
  EXPECT_EQ(e.reg(buf, sizeof buf, FI_RMA, 1), -FI_EINVAL);      // a capability, not an access bit
  EXPECT_EQ(e.reg(buf, sizeof buf, FI_READ, 1, nullptr, 0, 8), -FI_EINVAL);  // offset must be 0
  EXPECT_EQ(e.reg(buf, sizeof buf, FI_READ, 1, nullptr, FI_MR_DMABUF), -FI_EBADFLAGS);
  EXPECT_EQ(e.reg(buf, sizeof buf, FI_READ, 1, nullptr, 1), -FI_EBADFLAGS);
  EXPECT_EQ(fi_mr_reg(e.dom, buf, sizeof buf, FI_READ, 0, 1, 0, nullptr, nullptr), -FI_EINVAL);
  // A range that wraps around the address space.
  EXPECT_EQ(e.reg(reinterpret_cast<void*>(UINTPTR_MAX - 3), 8, FI_READ, 1), -FI_EINVAL);
  // Overlapping ranges whose lengths add up past 2^64.
  iovec huge[2] = {{reinterpret_cast<void*>(uintptr_t{1}), UINTPTR_MAX - 1},
                   {reinterpret_cast<void*>(uintptr_t{1}), UINTPTR_MAX - 1}};
  EXPECT_EQ(e.regv(huge, 2, FI_READ, 1), -FI_EINVAL);
  // Vectors: 1 to mr_iov_limit entries, none empty.
  iovec iov[mr_iov_limit + 1];
  for (size_t i = 0; i <= mr_iov_limit; ++i) iov[i] = {buf + 8 * i, 4};
  EXPECT_EQ(e.regv(iov, 0, FI_READ, 2), -FI_EINVAL);
  EXPECT_EQ(e.regv(nullptr, 1, FI_READ, 2), -FI_EINVAL);
  EXPECT_EQ(e.regv(iov, mr_iov_limit + 1, FI_READ, 2), -FI_EINVAL);
  iov[1].iov_len = 0;
  EXPECT_EQ(e.regv(iov, 2, FI_READ, 2), -FI_EINVAL);
  iov[1].iov_len = 4;
  EXPECT_EQ(e.regv(iov, mr_iov_limit, FI_READ, 2, &m), 0);
  EXPECT_EQ(region(m)->segment_count(), mr_iov_limit);
  // Every access bit fi_mr(3) lists, and none at all, are accepted.
  EXPECT_EQ(e.reg(buf, sizeof buf, mr_access_bits, 3), 0);
  EXPECT_EQ(e.reg(buf, sizeof buf, 0, 4), 0);
  EXPECT_EQ(e.reg(buf, sizeof buf, FI_READ, 5, nullptr, FI_RMA_EVENT), 0);
  EXPECT_TRUE(region(e.open.back())->enabled());  // no FI_MR_RMA_EVENT mode: enabled
}

TEST(mr_test, regattr_reads_the_attributes) {
  env e(0, FI_THREAD_SAFE, FI_HMEM);
  char buf[64];
  iovec iov{buf, sizeof buf};
  fi_mr_attr a{};
  a.mr_iov = &iov;
  a.iov_count = 1;
  a.access = FI_REMOTE_WRITE;
  a.requested_key = 99;
  a.context = &e;
  fid_mr* m = nullptr;
  ASSERT_EQ(fi_mr_regattr(e.dom, &a, 0, &m), 0);
  e.open.push_back(m);
  EXPECT_EQ(fi_mr_key(m), 99u);
  EXPECT_EQ(m->fid.context, &e);
  a.requested_key = 100;
  a.iface = FI_HMEM_CUDA;  // device memory: not supported
  EXPECT_EQ(fi_mr_regattr(e.dom, &a, 0, &m), -FI_ENOSYS);
  a.iface = FI_HMEM_SYSTEM;
  uint8_t auth[4] = {};
  a.auth_key = auth;
  a.auth_key_size = sizeof auth;  // per-region authorization keys: not supported
  EXPECT_EQ(fi_mr_regattr(e.dom, &a, 0, &m), -FI_ENOSYS);
  EXPECT_EQ(fi_mr_regattr(e.dom, nullptr, 0, &m), -FI_EINVAL);
}

TEST(mr_test, hmem_iface_is_ignored_without_the_capability) {
  env e(0);
  char buf[64];
  iovec iov{buf, sizeof buf};
  fi_mr_attr a{};
  a.mr_iov = &iov;
  a.iov_count = 1;
  a.access = FI_READ;
  a.requested_key = 1;
  int garbage = 1234;  // any value: fi_mr(3) says the field is ignored
  std::memcpy(&a.iface, &garbage, sizeof garbage);
  fid_mr* m = nullptr;
  ASSERT_EQ(mr::reg(*e.dom, a, 0, &m), 0);
  e.open.push_back(m);
}

TEST(mr_test, offset_addressing_checks_bounds_and_rights) {
  env e(0);
  alignas(8) char buf[100];
  fid_mr* m;
  ASSERT_EQ(e.reg(buf, sizeof buf, FI_REMOTE_READ, 1, &m), 0);
  const mr* r = region(m);
  void* p = nullptr;
  EXPECT_EQ(r->check(0, 100, FI_REMOTE_READ, &p), errc::ok);
  EXPECT_EQ(p, buf);
  EXPECT_EQ(r->check(10, 90, FI_REMOTE_READ, &p), errc::ok);
  EXPECT_EQ(p, buf + 10);
  EXPECT_EQ(r->check(10, 91, FI_REMOTE_READ, &p), errc::access);  // one byte past the end
  EXPECT_EQ(r->check(100, 1, FI_REMOTE_READ, &p), errc::access);
  EXPECT_EQ(r->check(100, 0, FI_REMOTE_READ, &p), errc::ok);  // empty, at the end
  EXPECT_EQ(p, buf + 100);
  EXPECT_EQ(r->check(101, 0, FI_REMOTE_READ, &p), errc::access);
  // addr + len overflows 64 bits: must not wrap into the region.
  EXPECT_EQ(r->check(UINT64_MAX, 2, FI_REMOTE_READ, &p), errc::access);
  EXPECT_EQ(r->check(1, SIZE_MAX, FI_REMOTE_READ, &p), errc::access);
  // Rights: only what was granted.
  EXPECT_EQ(r->check(0, 8, FI_REMOTE_WRITE, &p), errc::access);
  EXPECT_EQ(r->check(0, 8, FI_REMOTE_READ | FI_REMOTE_WRITE, &p), errc::access);
  // Through the map, as a provider serves a remote access.
  EXPECT_EQ(e.dom->mrs().verify(1, 4, 4, FI_REMOTE_READ, &p), errc::ok);
  EXPECT_EQ(p, buf + 4);
  EXPECT_EQ(e.dom->mrs().verify(2, 4, 4, FI_REMOTE_READ, &p), errc::access);  // unknown key
}

TEST(mr_test, virtual_addressing_checks_bounds_and_rights) {
  env e(FI_MR_VIRT_ADDR);
  alignas(8) char buf[100];
  fid_mr* m;
  ASSERT_EQ(e.reg(buf, sizeof buf, FI_REMOTE_WRITE, 1, &m), 0);
  const mr* r = region(m);
  const uint64_t base = reinterpret_cast<uintptr_t>(buf);
  EXPECT_EQ(r->rma_base(), base);
  void* p = nullptr;
  EXPECT_EQ(r->check(base, 100, FI_REMOTE_WRITE, &p), errc::ok);
  EXPECT_EQ(p, buf);
  EXPECT_EQ(r->check(base + 99, 1, FI_REMOTE_WRITE, &p), errc::ok);
  EXPECT_EQ(p, buf + 99);
  EXPECT_EQ(r->check(base - 1, 1, FI_REMOTE_WRITE, &p), errc::access);
  EXPECT_EQ(r->check(base + 99, 2, FI_REMOTE_WRITE, &p), errc::access);
  EXPECT_EQ(r->check(0, 8, FI_REMOTE_WRITE, &p), errc::access);  // an offset is not an address
  EXPECT_EQ(r->check(base + 1, UINT64_MAX, FI_REMOTE_WRITE, &p), errc::access);
  EXPECT_EQ(r->check(base, 8, FI_REMOTE_READ, &p), errc::access);
}

TEST(mr_test, vectors_in_offset_mode_span_ranges) {
  env e(0);
  char a[16], gap[8], b[32];
  (void)gap;
  iovec iov[2] = {{a, sizeof a}, {b, sizeof b}};
  fid_mr* m;
  ASSERT_EQ(e.regv(iov, 2, FI_REMOTE_READ, 1, &m), 0);
  const mr* r = region(m);
  EXPECT_EQ(r->length(), 48u);
  void* p = nullptr;
  EXPECT_EQ(r->check(20, 8, FI_REMOTE_READ, &p), errc::ok);  // inside the second range
  EXPECT_EQ(p, b + 4);
  EXPECT_EQ(r->check(16, 0, FI_REMOTE_READ, &p), errc::ok);
  // Across the two ranges: one pointer cannot describe it.
  EXPECT_EQ(r->check(12, 8, FI_REMOTE_READ, &p), errc::toosmall);
  iovec out[mr_iov_limit];
  size_t n = mr_iov_limit;
  ASSERT_EQ(r->check_iov(12, 8, FI_REMOTE_READ, out, &n), errc::ok);
  ASSERT_EQ(n, 2u);
  EXPECT_EQ(out[0].iov_base, a + 12);
  EXPECT_EQ(out[0].iov_len, 4u);
  EXPECT_EQ(out[1].iov_base, b);
  EXPECT_EQ(out[1].iov_len, 4u);
  n = 1;
  EXPECT_EQ(r->check_iov(0, 48, FI_REMOTE_READ, out, &n), errc::toosmall);
  EXPECT_EQ(n, 2u);  // how many it needs
  n = mr_iov_limit;
  EXPECT_EQ(r->check_iov(0, 49, FI_REMOTE_READ, out, &n), errc::access);
  n = mr_iov_limit;
  EXPECT_EQ(e.dom->mrs().verify_iov(1, 0, 48, FI_REMOTE_READ, out, &n), errc::ok);
  EXPECT_EQ(n, 2u);
}

TEST(mr_test, adjacent_ranges_are_joined) {
  env e(FI_MR_VIRT_ADDR);
  char buf[64];
  iovec iov[3] = {{buf, 16}, {buf + 16, 16}, {buf + 40, 8}};
  fid_mr* m;
  ASSERT_EQ(e.regv(iov, 3, FI_REMOTE_READ, 1, &m), 0);
  const mr* r = region(m);
  EXPECT_EQ(r->segment_count(), 2u);
  EXPECT_EQ(r->length(), 40u);
  void* p;
  const uint64_t base = reinterpret_cast<uintptr_t>(buf);
  EXPECT_EQ(r->check(base + 8, 16, FI_REMOTE_READ, &p), errc::ok);      // across the join
  EXPECT_EQ(r->check(base + 30, 4, FI_REMOTE_READ, &p), errc::access);  // into the gap
  EXPECT_EQ(r->check(base + 40, 8, FI_REMOTE_READ, &p), errc::ok);
  EXPECT_EQ(p, buf + 40);
}

TEST(mr_test, local_descriptors) {
  env e(FI_MR_LOCAL);
  char buf[64];
  fid_mr* m;
  ASSERT_EQ(e.reg(buf, sizeof buf, FI_SEND | FI_RECV, 1, &m), 0);
  const mr* r = mr::from_desc(fi_mr_desc(m));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->check_local(buf, 64, FI_SEND), errc::ok);
  EXPECT_EQ(r->check_local(buf + 60, 4, FI_RECV), errc::ok);
  EXPECT_EQ(r->check_local(buf + 60, 5, FI_RECV), errc::access);
  EXPECT_EQ(r->check_local(buf, 8, FI_WRITE), errc::access);
  // A descriptor that is not a region is refused.
  fid_mr fake{};
  fake.fid.fclass = FI_CLASS_CQ;
  EXPECT_EQ(mr::from_desc(&fake), nullptr);
}

TEST(mr_test, raw_keys) {
  env e(FI_MR_RAW | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY);
  char buf[64];
  fid_mr* m;
  ASSERT_EQ(e.reg(buf, sizeof buf, FI_REMOTE_READ, 0, &m), 0);
  EXPECT_EQ(fi_mr_key(m), FI_KEY_NOTAVAIL);  // fi_mr(3): raw keys must be used
  uint64_t base = 0;
  uint8_t raw[16];
  size_t size = 1;
  EXPECT_EQ(fi_mr_raw_attr(m, &base, raw, &size, 0), -FI_ETOOSMALL);
  EXPECT_EQ(size, mr_key_size);
  size = sizeof raw;
  ASSERT_EQ(fi_mr_raw_attr(m, &base, raw, &size, 0), 0);
  EXPECT_EQ(size, mr_key_size);
  EXPECT_EQ(base, reinterpret_cast<uintptr_t>(buf));
  EXPECT_EQ(fi_mr_raw_attr(m, &base, raw, &size, 1), -FI_EBADFLAGS);
  // The peer maps the raw key to the key the map knows.
  uint64_t key = 0;
  struct fi_mr_map_raw arg {
    0, base, raw, mr_key_size, &key
  };
  ASSERT_EQ(mr::map_raw(*e.dom, &arg), 0);
  EXPECT_EQ(e.dom->mrs().find(key), region(m));
  EXPECT_EQ(key, region(m)->map_key());
  arg.key_size = 4;
  EXPECT_EQ(mr::map_raw(*e.dom, &arg), -FI_EINVAL);
  arg.key_size = mr_key_size;
  arg.flags = 1;
  EXPECT_EQ(mr::map_raw(*e.dom, &arg), -FI_EBADFLAGS);
  EXPECT_EQ(mr::map_raw(*e.dom, nullptr), -FI_EINVAL);
  EXPECT_EQ(mr::unmap_key(*e.dom, &key), 0);
  EXPECT_EQ(mr::unmap_key(*e.dom, nullptr), -FI_EINVAL);
}

TEST(mr_test, raw_attr_without_raw_mode) {
  env e(0);
  char buf[64];
  fid_mr* m;
  ASSERT_EQ(e.reg(buf, sizeof buf, FI_REMOTE_READ, 0x1122334455667788ull, &m), 0);
  uint8_t raw[8];
  size_t size = sizeof raw;
  uint64_t base = 1;
  ASSERT_EQ(fi_mr_raw_attr(m, &base, raw, &size, 0), 0);
  EXPECT_EQ(base, 0u);      // offsets start at 0
  EXPECT_EQ(raw[0], 0x88);  // little-endian whatever the host
  EXPECT_EQ(raw[7], 0x11);
}

TEST(mr_test, bind_enable_refresh_control) {
  env e(0);
  char buf[64];
  fid_mr* m;
  ASSERT_EQ(e.reg(buf, sizeof buf, FI_REMOTE_WRITE, 1, &m), 0);
  EXPECT_EQ(fi_mr_bind(m, &e.dom->fid, 0), -FI_EINVAL);  // not a counter or endpoint
  fid cntr_like{};
  cntr_like.fclass = FI_CLASS_CNTR;
  EXPECT_EQ(fi_mr_bind(m, &cntr_like, FI_REMOTE_WRITE), -FI_ENOSYS);
  EXPECT_EQ(fi_mr_bind(m, &cntr_like, FI_SEND), -FI_EBADFLAGS);
  EXPECT_EQ(fi_mr_bind(m, nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(fi_mr_enable(m), 0);
  iovec iov{buf, 8};
  EXPECT_EQ(fi_mr_refresh(m, &iov, 1, 0), 0);
  EXPECT_EQ(fi_mr_refresh(m, &iov, 1, 1), -FI_EBADFLAGS);
  EXPECT_EQ(fi_control(&m->fid, FI_REFRESH, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_control(&m->fid, FI_GETWAIT, nullptr), -FI_ENOSYS);
  EXPECT_EQ(fi_control(&m->fid, 9999, nullptr), -FI_ENOSYS);
  EXPECT_EQ(fi_control(&m->fid, FI_GET_RAW_MR, nullptr), -FI_EINVAL);
}

TEST(mr_test, endpoint_and_rma_event_regions_start_disabled) {
  env e(FI_MR_ENDPOINT);
  char buf[64];
  fid_mr* m;
  ASSERT_EQ(e.reg(buf, sizeof buf, FI_REMOTE_READ, 1, &m), 0);
  void* p;
  EXPECT_FALSE(region(m)->enabled());
  EXPECT_EQ(region(m)->check(0, 8, FI_REMOTE_READ, &p), errc::access);
  EXPECT_EQ(fi_mr_enable(m), 0);
  EXPECT_EQ(region(m)->check(0, 8, FI_REMOTE_READ, &p), errc::ok);

  env f(FI_MR_RMA_EVENT);
  ASSERT_EQ(f.reg(buf, sizeof buf, FI_REMOTE_READ, 1, &m, FI_RMA_EVENT), 0);
  EXPECT_FALSE(region(m)->enabled());
  ASSERT_EQ(f.reg(buf, sizeof buf, FI_REMOTE_READ, 2, &m), 0);
  EXPECT_TRUE(region(m)->enabled());
}

TEST(mr_test, close_is_refused_while_referenced) {
  env e(0);
  char buf[64];
  fid_mr* m;
  ASSERT_EQ(e.reg(buf, sizeof buf, FI_REMOTE_READ, 1, &m), 0);
  {
    ref<mr> bound(mr::from(m));  // what a counter or endpoint binding holds
    EXPECT_EQ(fi_close(&m->fid), -FI_EBUSY);
    EXPECT_EQ(e.dom->mrs().find(1), region(m));  // still registered
  }
  e.close(m);
}

TEST(mr_test, map_locking_follows_the_threading_model) {
  EXPECT_FALSE(mr_map(FI_THREAD_DOMAIN).locked());
  EXPECT_TRUE(mr_map(FI_THREAD_DOMAIN, FI_PROGRESS_AUTO).locked());
  // MRs belong to the domain, not to a completion context.
  EXPECT_TRUE(mr_map(FI_THREAD_COMPLETION).locked());
  EXPECT_TRUE(mr_map(FI_THREAD_ENDPOINT).locked());
  EXPECT_TRUE(mr_map(FI_THREAD_SAFE).locked());
  EXPECT_TRUE(mr_map(FI_THREAD_UNSPEC).locked());
}

TEST(mr_test, effective_mode) {
  EXPECT_EQ(effective_mr_mode(FI_MR_BASIC), FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY);
  EXPECT_EQ(effective_mr_mode(FI_MR_SCALABLE), 0);
  EXPECT_EQ(effective_mr_mode(FI_MR_LOCAL | FI_MR_RAW), FI_MR_LOCAL | FI_MR_RAW);
}

// Lookups on the data path while other threads register and close regions
// (FI_THREAD_SAFE): the stable region is always found and checked.
TEST(mr_test, concurrent_registration_and_lookup) {
  env e(FI_MR_PROV_KEY, FI_THREAD_SAFE);
  static char stable[64], churn[64];
  fid_mr* m;
  ASSERT_EQ(e.reg(stable, sizeof stable, FI_REMOTE_READ, 0, &m), 0);
  const uint64_t key = fi_mr_key(m);
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w)
    writers.emplace_back([&] {
      while (!stop) {
        fid_mr* x = nullptr;
        if (fi_mr_reg(e.dom, churn, sizeof churn, FI_REMOTE_WRITE, 0, 0, 0, &x, nullptr) == 0)
          fi_close(&x->fid);
      }
    });
  for (int i = 0; i < 50000; ++i) {
    void* p = nullptr;
    ASSERT_EQ(e.dom->mrs().verify(key, 8, 8, FI_REMOTE_READ, &p), errc::ok);
    ASSERT_EQ(p, stable + 8);
  }
  stop = true;
  for (auto& t : writers) t.join();
}

}  // namespace
