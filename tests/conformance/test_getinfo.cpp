// SPDX-License-Identifier: MIT
// weft — conformance: fi_getinfo and the fi_info functions.
#include "provider_param.hpp"

#include <string>
#include <vector>

namespace conformance {
namespace {

class getinfo : public testing::TestWithParam<config> {};

TEST_P(getinfo, finds_the_provider) {
  fi_info* hints = hints_for(GetParam());
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info), 0);
  ASSERT_NE(info, nullptr);
  for (fi_info* i = info; i; i = i->next) {
    EXPECT_STREQ(i->fabric_attr->prov_name, GetParam().prov);
    EXPECT_EQ(i->ep_attr->type, GetParam().ep_type);
    EXPECT_TRUE(i->caps & FI_MSG);
    EXPECT_EQ(i->fabric_attr->api_version, FI_VERSION(1, 17));
    EXPECT_EQ(i->domain_attr->threading, GetParam().threading);
    EXPECT_NE(i->domain_attr->name, nullptr);
    EXPECT_NE(i->fabric_attr->name, nullptr);
    // What the provider needs of the application is a subset of what it supports.
    EXPECT_EQ(i->mode & ~hints->mode, 0u);
  }
  fi_freeinfo(info);
  fi_freeinfo(hints);
}

// No weft provider needs a mode bit of the application (FI_CONTEXT, ...),
// so hints with mode 0 are answered, and with mode 0.
TEST_P(getinfo, mode_zero_excludes_nothing_a_provider_does_not_need) {
  fi_info* hints = hints_for(GetParam());
  hints->mode = 0;
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info), 0);
  ASSERT_NE(info, nullptr);
  for (fi_info* i = info; i; i = i->next) {
    EXPECT_EQ(i->mode, 0u);
    EXPECT_EQ(i->tx_attr->mode, 0u);
    EXPECT_EQ(i->rx_attr->mode, 0u);
  }
  fi_freeinfo(info);
  fi_freeinfo(hints);
}

TEST_P(getinfo, caps_it_lacks_give_enodata) {
  fi_info* hints = hints_for(GetParam(), FI_MSG | FI_COLLECTIVE);
  fi_info* info = nullptr;
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info), -FI_ENODATA);
  EXPECT_EQ(info, nullptr);
  fi_freeinfo(hints);
}

TEST_P(getinfo, limits_beyond_the_provider_give_enodata) {
  fi_info* hints = hints_for(GetParam());
  hints->ep_attr->max_msg_size = SIZE_MAX;
  fi_info* info = nullptr;
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info), -FI_ENODATA);
  fi_freeinfo(hints);
}

TEST_P(getinfo, source_node_and_service) {
  SKIP_UNLESS_IP();
  fi_info* hints = hints_for(GetParam());
  hints->addr_format = FI_SOCKADDR_IN;
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "4711", FI_SOURCE, hints, &info), 0);
  ASSERT_NE(info->src_addr, nullptr);
  ASSERT_EQ(info->src_addrlen, sizeof(sockaddr_in));
  auto* sin = static_cast<sockaddr_in*>(info->src_addr);
  EXPECT_EQ(ntohs(sin->sin_port), 4711);
  EXPECT_EQ(sin->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
  fi_freeinfo(info);
  fi_freeinfo(hints);
}

TEST_P(getinfo, destination_node_and_service) {
  SKIP_UNLESS_IP();
  fi_info* hints = hints_for(GetParam());
  hints->addr_format = FI_SOCKADDR_IN;
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "4712", 0, hints, &info), 0);
  ASSERT_NE(info->dest_addr, nullptr);
  auto* sin = static_cast<sockaddr_in*>(info->dest_addr);
  EXPECT_EQ(ntohs(sin->sin_port), 4712);
  fi_freeinfo(info);
  fi_freeinfo(hints);
}

TEST_P(getinfo, addr_str_node) {
  SKIP_UNLESS_IP();
  fi_info* hints = hints_for(GetParam());
  hints->addr_format = FI_SOCKADDR_IN;
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "fi_sockaddr_in://127.0.0.1:4714", nullptr, 0, hints,
                       &info),
            0);
  ASSERT_NE(info->dest_addr, nullptr);
  EXPECT_EQ(ntohs(static_cast<sockaddr_in*>(info->dest_addr)->sin_port), 4714);
  fi_freeinfo(info);
  info = nullptr;
  // With FI_ADDR_STR in node, service must be NULL.
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), "fi_sockaddr_in://127.0.0.1:4714", "1", 0, hints, &info),
            -FI_ENODATA);
  fi_freeinfo(hints);
}

TEST_P(getinfo, layered_provider_name_selects_the_core_provider) {
  fi_info* hints = hints_for(GetParam());
  free(hints->fabric_attr->prov_name);
  hints->fabric_attr->prov_name = strdup((std::string(GetParam().prov) + ";ofi_rxm").c_str());
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info), 0);
  EXPECT_STREQ(info->fabric_attr->prov_name, GetParam().prov);
  fi_freeinfo(info);
  fi_freeinfo(hints);
}

TEST_P(getinfo, dupinfo_is_deep) {
  SKIP_UNLESS_IP();
  fi_info* hints = hints_for(GetParam());
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "4713", FI_SOURCE, hints, &info), 0);
  fi_info* copy = fi_dupinfo(info);
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->next, nullptr);
  EXPECT_NE(copy->fabric_attr, info->fabric_attr);
  EXPECT_NE(copy->fabric_attr->prov_name, info->fabric_attr->prov_name);
  EXPECT_STREQ(copy->fabric_attr->prov_name, info->fabric_attr->prov_name);
  EXPECT_STREQ(copy->domain_attr->name, info->domain_attr->name);
  ASSERT_NE(copy->src_addr, nullptr);
  EXPECT_NE(copy->src_addr, info->src_addr);
  EXPECT_EQ(std::memcmp(copy->src_addr, info->src_addr, info->src_addrlen), 0);
  fi_freeinfo(info);  // the copy outlives the original
  EXPECT_NE(fi_tostr(copy, FI_TYPE_INFO), nullptr);
  fi_freeinfo(copy);
  fi_freeinfo(hints);
}

INSTANTIATE_TEST_SUITE_P(all, getinfo, testing::ValuesIn(all_configs), config_name);

// Provider-independent behaviour of the core.
TEST(getinfo_core, newer_api_version_is_enosys) {
  fi_info* info = nullptr;
  EXPECT_EQ(fi_getinfo(FI_VERSION(FI_MAJOR_VERSION + 1, 0), nullptr, nullptr, 0, nullptr, &info),
            -FI_ENOSYS);
  EXPECT_EQ(info, nullptr);
}

TEST(getinfo_core, null_result_pointer_is_einval) {
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, nullptr, nullptr), -FI_EINVAL);
}

TEST(getinfo_core, unknown_flags_are_ebadflags) {
  fi_info* info = nullptr;
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 1ULL << 62, nullptr, &info),
            -FI_EBADFLAGS);
}

// FI_RESCAN only asks for a fresh look at the interfaces, which every call
// takes: the answer is the one given without it.
TEST(getinfo_core, rescan_answers_as_without_it) {
  auto list = [](uint64_t flags) {
    fi_info* info = nullptr;
    EXPECT_EQ(fi_getinfo(FI_VERSION(2, 0), nullptr, nullptr, flags, nullptr, &info), 0);
    std::vector<std::string> out;
    for (fi_info* i = info; i; i = i->next)
      out.push_back(std::string(i->fabric_attr->prov_name) + "/" +
                    std::to_string(i->ep_attr->type) + "/" + i->domain_attr->name);
    fi_freeinfo(info);
    return out;
  };
  const std::vector<std::string> plain = list(0);
  EXPECT_FALSE(plain.empty());
  EXPECT_EQ(list(FI_RESCAN), plain);
}

TEST(getinfo_core, unknown_provider_is_enodata) {
  fi_info* hints = fi_allocinfo();
  hints->fabric_attr->prov_name = strdup("no_such_provider");
  fi_info* info = nullptr;
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info), -FI_ENODATA);
  fi_freeinfo(hints);
}

TEST(getinfo_core, prov_attr_only_lists_each_provider_once) {
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, FI_PROV_ATTR_ONLY, nullptr, &info), 0);
  int udp = 0;
  for (fi_info* i = info; i; i = i->next) {
    ASSERT_NE(i->fabric_attr->prov_name, nullptr);
    udp += std::strcmp(i->fabric_attr->prov_name, "udp") == 0;
  }
  EXPECT_EQ(udp, 1);
  fi_freeinfo(info);
}

// Enumerated fields written by a C caller may hold anything: each garbage
// value is "no match", never undefined behaviour (the sanitizer build checks).
TEST(getinfo_core, garbage_enum_hints_are_enodata) {
  for (int field = 0; field < 5; ++field) {
    fi_info* hints = fi_allocinfo();
    int junk = 1000 + field;
    switch (field) {
      case 0: std::memcpy(&hints->ep_attr->type, &junk, sizeof junk); break;
      case 1: std::memcpy(&hints->domain_attr->threading, &junk, sizeof junk); break;
      case 2: std::memcpy(&hints->domain_attr->data_progress, &junk, sizeof junk); break;
      case 3: std::memcpy(&hints->domain_attr->av_type, &junk, sizeof junk); break;
      case 4: std::memcpy(&hints->domain_attr->resource_mgmt, &junk, sizeof junk); break;
    }
    fi_info* info = nullptr;
    EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info), -FI_ENODATA)
        << "field " << field;
    fi_freeinfo(hints);
  }
}

TEST(getinfo_core, allocinfo_gives_every_attribute) {
  fi_info* i = fi_allocinfo();
  ASSERT_NE(i, nullptr);
  EXPECT_NE(i->tx_attr, nullptr);
  EXPECT_NE(i->rx_attr, nullptr);
  EXPECT_NE(i->ep_attr, nullptr);
  EXPECT_NE(i->domain_attr, nullptr);
  EXPECT_NE(i->fabric_attr, nullptr);
  EXPECT_EQ(i->caps, 0u);
  fi_freeinfo(i);
  fi_freeinfo(nullptr);  // allowed, does nothing
}

TEST(getinfo_core, strerror_covers_every_code) {
  for (int code : std::initializer_list<int>{FI_EAGAIN, FI_EINVAL, FI_ENOMEM, FI_EOTHER, FI_ETOOSMALL, FI_EOPBADSTATE,
                   FI_EAVAIL, FI_EBADFLAGS, FI_ENOEQ, FI_EDOMAIN, FI_ENOCQ, FI_ECRC, FI_ETRUNC,
                   FI_ENOKEY, FI_ENOAV, FI_EOVERRUN, FI_ENORX}) {
    const char* s = fi_strerror(code);
    ASSERT_NE(s, nullptr);
    EXPECT_GT(std::strlen(s), 3u) << code;
    EXPECT_STREQ(s, fi_strerror(-code));
  }
}

TEST(getinfo_core, version_is_ours) {
  EXPECT_EQ(fi_version(), FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION));
}

TEST(getinfo_core, fabric_with_unknown_provider_fails) {
  fi_fabric_attr attr{};
  attr.prov_name = const_cast<char*>("no_such_provider");
  fid_fabric* fab = nullptr;
  EXPECT_EQ(fi_fabric(&attr, &fab, nullptr), -FI_ENODEV);
  EXPECT_EQ(fi_fabric(nullptr, &fab, nullptr), -FI_EINVAL);
}

TEST(getinfo_core, open_unknown_name_is_enosys) {
  fid* f = nullptr;
  EXPECT_EQ(fi_open(FI_VERSION(1, 17), "mr_cache", nullptr, 0, 0, &f, nullptr), -FI_ENOSYS);
}

}  // namespace
}  // namespace conformance
