// SPDX-License-Identifier: MIT
// weft — the capability tables of provider_caps.hpp against fi_getinfo, both
// ways: everything a table says a configuration offers is answered, asked
// all together; everything it says the configuration lacks is refused
// (-FI_ENODATA). Tests skip only on what a table lists as lacking, so a
// provider that loses a capability fails here and in the suites that use
// it, and one that gains a capability fails here until its table (and so
// its tests) stop skipping it.
#include "provider_caps.hpp"

#include <vector>

namespace conformance {
namespace {

std::vector<config> every_config() {
  std::vector<config> v(std::begin(all_configs), std::end(all_configs));
  v.insert(v.end(), std::begin(msg_configs), std::end(msg_configs));
  return v;
}

class caps_table_of : public testing::TestWithParam<config> {
 protected:
  int ask(uint64_t caps, size_t cq_data_size) {
    fi_info* hints = hints_for(GetParam(), caps);
    hints->domain_attr->cq_data_size = cq_data_size;
    fi_info* info = nullptr;
    int rc = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info);
    if (rc == 0) {
      EXPECT_EQ(info->caps & caps, caps);
      EXPECT_GE(info->domain_attr->cq_data_size, cq_data_size);
    }
    fi_freeinfo(info);
    fi_freeinfo(hints);
    return rc;
  }
};

TEST_P(caps_table_of, every_configuration_has_one) {
  EXPECT_NE(caps_of(GetParam()), nullptr) << "add " << GetParam().name() << " to provider_caps.hpp";
}

TEST_P(caps_table_of, what_it_offers_is_answered) {
  const caps_table* t = caps_of(GetParam());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(ask(t->offers, t->cq_data_size), 0)
      << GetParam().name() << " no longer offers all of " << cap_names(t->offers)
      << " with cq_data_size " << t->cq_data_size;
  // One at a time too, so a failure names the capability.
  for (int bit = 0; bit < 64; ++bit) {
    uint64_t c = uint64_t{1} << bit;
    if (t->offers & c) {
      EXPECT_EQ(ask(FI_MSG | c, 0), 0) << cap_names(c);
    }
  }
}

TEST_P(caps_table_of, what_it_lacks_is_refused) {
  const caps_table* t = caps_of(GetParam());
  ASSERT_NE(t, nullptr);
  int listed = 0;
  for (const lacking& l : t->lacks) {
    if (!l.why) continue;
    ++listed;
    EXPECT_EQ(l.caps & t->offers, 0u) << "listed both as offered and lacking: " << cap_names(l.caps);
    if (l.caps) {
      for (int bit = 0; bit < 64; ++bit) {
        uint64_t c = uint64_t{1} << bit;
        if (l.caps & c) {
          EXPECT_EQ(ask(FI_MSG | c, 0), -FI_ENODATA)
              << GetParam().name() << " offers " << cap_names(c) << ": take it off the lacking list";
        }
      }
    } else {
      EXPECT_EQ(ask(FI_MSG, 1), -FI_ENODATA)
          << GetParam().name() << " offers remote CQ data: take it off the lacking list";
    }
  }
  // (A table may list nothing: shm lacks none of the capabilities the
  // suite knows.)
  RecordProperty("lacking", listed);
}

// Automatic data progress (fi_domain(3)) is offered exactly where a table
// says so, and only when asked for: hints that leave progress open, or ask
// for manual progress, get FI_PROGRESS_MANUAL from every provider.
TEST_P(caps_table_of, automatic_progress_only_where_listed_and_when_asked_for) {
  const caps_table* t = caps_of(GetParam());
  ASSERT_NE(t, nullptr);
  auto ask = [&](fi_progress want, fi_info** info) {
    config c = GetParam();
    c.progress = FI_PROGRESS_MANUAL;  // hints_for leaves progress open
    fi_info* hints = hints_for(c);
    hints->domain_attr->data_progress = want;
    int rc = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, info);
    fi_freeinfo(hints);
    return rc;
  };
  for (fi_progress want : {FI_PROGRESS_UNSPEC, FI_PROGRESS_MANUAL, FI_PROGRESS_AUTO}) {
    SCOPED_TRACE(fi_tostr(&want, FI_TYPE_PROGRESS));
    fi_info* info = nullptr;
    int rc = ask(want, &info);
    if (want == FI_PROGRESS_AUTO && !t->auto_progress) {
      EXPECT_EQ(rc, -FI_ENODATA) << GetParam().prov
                                 << " offers automatic progress: say so in its table";
      fi_freeinfo(info);
      continue;
    }
    ASSERT_EQ(rc, 0) << GetParam().prov << " no longer offers this progress model";
    const fi_progress got = want == FI_PROGRESS_AUTO ? FI_PROGRESS_AUTO : FI_PROGRESS_MANUAL;
    for (fi_info* i = info; i; i = i->next) EXPECT_EQ(i->domain_attr->data_progress, got);
    fi_freeinfo(info);
  }
}

// The judgment the fixtures apply.
TEST(caps_table, a_request_within_the_offer_may_not_skip) {
  config shm{"shm", FI_EP_RDM, FI_THREAD_DOMAIN};
  config udp{"udp", FI_EP_DGRAM, FI_THREAD_DOMAIN};
  std::string unlisted;
  EXPECT_EQ(lack_reason(shm, FI_MSG | FI_MULTI_RECV, nullptr), "");
  EXPECT_EQ(lack_reason(shm, FI_MSG | FI_RMA | FI_ATOMIC, nullptr), "");
  EXPECT_NE(lack_reason(udp, FI_MSG | FI_TAGGED, nullptr).find("tag"), std::string::npos);
  EXPECT_NE(lack_reason(udp, FI_MSG | FI_RMA, nullptr), "");
  fi_info* h = fi_allocinfo();
  h->domain_attr->cq_data_size = 8;
  EXPECT_EQ(lack_reason(shm, FI_MSG, h), "");
  EXPECT_NE(lack_reason(udp, FI_MSG, h).find("CQ data"), std::string::npos);
  h->domain_attr->cq_data_size = 16;  // more than any table offers, and not listed as lacking
  EXPECT_EQ(lack_reason(shm, FI_MSG, h), "");
  fi_freeinfo(h);
  // A capability in neither list may not skip either, and is named.
  EXPECT_EQ(lack_reason(shm, FI_MSG | FI_COLLECTIVE, nullptr, &unlisted), "");
  EXPECT_NE(unlisted.find("FI_COLLECTIVE"), std::string::npos) << unlisted;
}

INSTANTIATE_TEST_SUITE_P(all, caps_table_of, testing::ValuesIn(every_config()), config_name);

}  // namespace
}  // namespace conformance
