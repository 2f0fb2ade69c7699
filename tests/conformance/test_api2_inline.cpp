// SPDX-License-Identifier: MIT
// weft — conformance: the inline functions and names API 2.x added to the
// headers (fi_endpoint(3) tag formats, fi_mr(3) level zero devices,
// fi_profile(3), fi_control under the names fi_endpoint(3) and fi_cntr(3)
// give it, fi_fabric(3)'s FI_TYPE_EP_CAP, fi_trigger(3)'s two enum names).
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_profile.h>
#include <rdma/fi_trigger.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <type_traits>

namespace conformance {
namespace {

TEST(api2_inline, tag_mpi_puts_the_tag_low_and_the_payload_id_above) {
  EXPECT_EQ(fi_tag_mpi(5, 3), (3ULL << 32) | 5);
  EXPECT_EQ(fi_tag_mpi(-1, 0), 0xFFFFFFFFULL);  // the tag is 32 bits, not sign-extended
  EXPECT_EQ(fi_tag_mpi(0, 0xFF), 0xFFULL << 32);
  // The ignore masks cover exactly the two fields.
  EXPECT_EQ(fi_tag_mpi(-1, 0), FI_MPI_IGNORE_TAG);
  EXPECT_EQ(fi_tag_mpi(0, 0xFF), FI_MPI_IGNORE_PAYLOAD);
  EXPECT_EQ(FI_MPI_IGNORE_TAG & FI_MPI_IGNORE_PAYLOAD, 0u);
  EXPECT_EQ(FI_TAG_BITS, 0);  // fi_endpoint(3): what fi_allocinfo leaves
}

TEST(api2_inline, ze_device_encodes_the_driver_above_the_device) {
  EXPECT_EQ(fi_hmem_ze_device(0, 0), 0);
  EXPECT_EQ(fi_hmem_ze_device(0, 3), 3);
  EXPECT_EQ(fi_hmem_ze_device(2, 3), (2 << 16) | 3);
}

// A fid whose generic ops record what the inline functions asked of them.
struct recorder {
  fid f{};
  fi_ops ops{};
  int command = -1;
  void* arg = nullptr;
  std::string ops_name;
  uint64_t ops_flags = 0;

  static recorder* of(fid* f) { return reinterpret_cast<recorder*>(f); }
  recorder() {
    ops.size = sizeof(ops);
    ops.control = [](fid* f, int command, void* arg) {
      of(f)->command = command;
      of(f)->arg = arg;
      return -FI_EOPBADSTATE;
    };
    ops.ops_open = [](fid* f, const char* name, uint64_t flags, void**, void*) {
      of(f)->ops_name = name;
      of(f)->ops_flags = flags;
      return -FI_ENOSYS;
    };
    f.fclass = FI_CLASS_EP;
    f.ops = &ops;
  }
};
static_assert(std::is_standard_layout_v<recorder>);

TEST(api2_inline, ep_and_cntr_control_are_fi_control) {
  recorder r;
  int arg = 0;
  EXPECT_EQ(fi_ep_control(&r.f, FI_GETOPSFLAG, &arg), -FI_EOPBADSTATE);
  EXPECT_EQ(r.command, FI_GETOPSFLAG);
  EXPECT_EQ(r.arg, &arg);
  EXPECT_EQ(fi_cntr_control(&r.f, FI_GETWAIT, nullptr), -FI_EOPBADSTATE);
  EXPECT_EQ(r.command, FI_GETWAIT);
  EXPECT_EQ(r.arg, nullptr);
}

TEST(api2_inline, profile_open_asks_the_target_for_its_profile_ops) {
  recorder r;
  fid_profile* prof = nullptr;
  EXPECT_EQ(fi_profile_open(&r.f, 7, &prof, nullptr), -FI_ENOSYS);
  EXPECT_EQ(r.ops_name, "fi_profile_ops");
  EXPECT_EQ(r.ops_flags, 7u);
  EXPECT_EQ(prof, nullptr);
}

TEST(api2_inline, profile_open_on_a_weft_domain_is_enosys) {
  fi_info* hints = fi_allocinfo();
  hints->fabric_attr->prov_name = strdup("udp");
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(2, 0), nullptr, nullptr, 0, hints, &info), 0);
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  ASSERT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
  ASSERT_EQ(fi_domain(fabric, info, &domain, nullptr), 0);
  fid_profile* prof = nullptr;
  EXPECT_EQ(fi_profile_open(&domain->fid, 0, &prof, nullptr), -FI_ENOSYS);
  EXPECT_EQ(prof, nullptr);
  EXPECT_EQ(fi_close(&domain->fid), 0);
  EXPECT_EQ(fi_close(&fabric->fid), 0);
  fi_freeinfo(info);
  fi_freeinfo(hints);
}

TEST(api2_inline, tostr_ep_cap_prints_capabilities) {
  const uint64_t caps = FI_MSG | FI_TAGGED;
  char a[256], b[256];
  ASSERT_NE(fi_tostr_r(a, sizeof(a), &caps, FI_TYPE_EP_CAP), nullptr);
  ASSERT_NE(fi_tostr_r(b, sizeof(b), &caps, FI_TYPE_CAPS), nullptr);
  EXPECT_STREQ(a, b);
  EXPECT_NE(std::strstr(a, "FI_TAGGED"), nullptr);
}

TEST(api2_inline, trigger_op_and_op_type_name_one_type) {
  static_assert(std::is_same_v<enum fi_trigger_op, enum fi_op_type>);
  fi_deferred_work work{};
  work.op_type = FI_OP_CNTR_ADD;
  enum fi_trigger_op old_name = work.op_type;
  EXPECT_EQ(old_name, FI_OP_CNTR_ADD);
}

}  // namespace
}  // namespace conformance
