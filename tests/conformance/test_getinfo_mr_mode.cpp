// SPDX-License-Identifier: MIT
// weft — conformance: the memory-registration modes of API 1.4 and earlier
// (FI_MR_BASIC, FI_MR_SCALABLE, FI_MR_UNSPEC, the FI_LOCAL_MR mode bit) in
// hints, from callers of API 1.0 and of 1.5 and later, on every provider:
// fi_mr(3) and fi_domain(3) say what they stand for and what is answered.
#include "provider_param.hpp"

namespace conformance {
namespace {

class getinfo_mr_mode : public testing::TestWithParam<config> {
 protected:
  // hints_for's, with mr_mode and FI_LOCAL_MR as an old caller sets them.
  fi_info* old_hints(int mr_mode, uint64_t local_mr) const {
    fi_info* h = hints_for(GetParam());
    h->domain_attr->mr_mode = mr_mode;
    h->mode |= local_mr;
    return h;
  }
  int ask(uint32_t version, int mr_mode, uint64_t local_mr, fi_info** info) const {
    fi_info* h = old_hints(mr_mode, local_mr);
    int ret = fi_getinfo(version, nullptr, nullptr, 0, h, info);
    fi_freeinfo(h);
    return ret;
  }
};

// API 1.5 and later: FI_MR_BASIC and FI_MR_SCALABLE still stand alone, and
// FI_LOCAL_MR speaks for local registration with them (fi_getinfo(3)). None
// of weft's providers needs any of the bits, so each answers; FI_MR_BASIC
// on input is not cleared (fi_mr(3)) and FI_MR_SCALABLE is answered as asked.
TEST_P(getinfo_mr_mode, basic_and_scalable_from_api_1_5_on) {
  for (uint32_t version : {FI_VERSION(1, 5), FI_VERSION(1, 17), FI_VERSION(2, 0)}) {
    for (int mr : {int{FI_MR_BASIC}, int{FI_MR_SCALABLE}}) {
      for (uint64_t local : {uint64_t{0}, uint64_t{FI_LOCAL_MR}}) {
        SCOPED_TRACE(testing::Message() << "API " << FI_MAJOR(version) << "." << FI_MINOR(version)
                                        << " mr_mode " << mr << " FI_LOCAL_MR " << !!local);
        fi_info* info = nullptr;
        ASSERT_EQ(ask(version, mr, local, &info), 0);
        for (fi_info* i = info; i; i = i->next) {
          EXPECT_EQ(i->domain_attr->mr_mode, mr);
          EXPECT_EQ(i->mode & FI_LOCAL_MR, 0u);  // not needed: cleared
        }
        fi_freeinfo(info);
      }
    }
  }
}

// fi_domain(3): neither may be used with other mr_mode bits.
TEST_P(getinfo_mr_mode, basic_and_scalable_do_not_combine_with_bits) {
  for (int mr : {FI_MR_BASIC | FI_MR_LOCAL, FI_MR_SCALABLE | FI_MR_VIRT_ADDR,
                 FI_MR_BASIC | FI_MR_SCALABLE}) {
    fi_info* info = nullptr;
    EXPECT_EQ(ask(FI_VERSION(1, 17), mr, 0, &info), -FI_ENODATA) << mr;
    EXPECT_EQ(info, nullptr);
  }
}

// API 1.0: mr_mode is the enum. FI_MR_BASIC asked is answered FI_MR_BASIC,
// FI_MR_SCALABLE as FI_MR_SCALABLE, and FI_MR_UNSPEC ("either") with what a
// provider that needs none of the basic bits is: FI_MR_SCALABLE.
TEST_P(getinfo_mr_mode, enum_values_from_api_1_0) {
  for (uint32_t version : {FI_VERSION(1, 0), FI_VERSION(1, 4)}) {
    for (int mr : {int{FI_MR_UNSPEC}, int{FI_MR_BASIC}, int{FI_MR_SCALABLE}}) {
      for (uint64_t local : {uint64_t{0}, uint64_t{FI_LOCAL_MR}}) {
        SCOPED_TRACE(testing::Message() << "API " << FI_MAJOR(version) << "." << FI_MINOR(version)
                                        << " mr_mode " << mr << " FI_LOCAL_MR " << !!local);
        fi_info* info = nullptr;
        ASSERT_EQ(ask(version, mr, local, &info), 0);
        for (fi_info* i = info; i; i = i->next) {
          EXPECT_EQ(i->domain_attr->mr_mode, mr == FI_MR_BASIC ? FI_MR_BASIC : FI_MR_SCALABLE);
          EXPECT_EQ(i->mode & FI_LOCAL_MR, 0u);
        }
        fi_freeinfo(info);
      }
    }
  }
  fi_info* info = nullptr;
  EXPECT_EQ(ask(FI_VERSION(1, 0), FI_MR_LOCAL, 0, &info), -FI_ENODATA);  // not an enum value
}

// The answer is what the domain does: under FI_MR_BASIC the provider picks
// the keys (FI_MR_PROV_KEY), so two registrations asking for key 0 both get
// one; under FI_MR_SCALABLE the application's key is taken as asked.
TEST_P(getinfo_mr_mode, the_domain_registers_as_answered) {
  for (uint32_t version : {FI_VERSION(1, 0), FI_VERSION(1, 17)}) {
    for (int mr : {int{FI_MR_BASIC}, int{FI_MR_SCALABLE}}) {
      SCOPED_TRACE(testing::Message() << "API " << FI_MAJOR(version) << "." << FI_MINOR(version)
                                      << " mr_mode " << mr);
      fi_info* info = nullptr;
      ASSERT_EQ(ask(version, mr, 0, &info), 0);
      fid_fabric* fabric = nullptr;
      fid_domain* domain = nullptr;
      ASSERT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
      ASSERT_EQ(fi_domain(fabric, info, &domain, nullptr), 0);
      static char buf[2][64];
      fid_mr* m[2] = {};
      EXPECT_EQ(fi_mr_reg(domain, buf[0], sizeof buf[0], FI_REMOTE_WRITE, 0, 0, 0, &m[0], nullptr),
                0);
      int second =
          fi_mr_reg(domain, buf[1], sizeof buf[1], FI_REMOTE_WRITE, 0, 0, 0, &m[1], nullptr);
      if (mr == FI_MR_BASIC) {
        EXPECT_EQ(second, 0);
        if (m[0] && m[1]) {
          EXPECT_NE(fi_mr_key(m[0]), fi_mr_key(m[1]));
        }
      } else {
        EXPECT_NE(second, 0);  // key 0 is taken
        if (m[0]) {
          EXPECT_EQ(fi_mr_key(m[0]), 0u);
        }
      }
      for (fid_mr* r : m) {
        if (r) {
          EXPECT_EQ(fi_close(&r->fid), 0);
        }
      }
      EXPECT_EQ(fi_close(&domain->fid), 0);
      EXPECT_EQ(fi_close(&fabric->fid), 0);
      fi_freeinfo(info);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(all, getinfo_mr_mode, testing::ValuesIn(all_configs), config_name);
INSTANTIATE_TEST_SUITE_P(msg, getinfo_mr_mode, testing::ValuesIn(msg_configs), config_name);

}  // namespace
}  // namespace conformance
