// SPDX-License-Identifier: MIT
// weft — fi_tostr / fi_tostr_r: format, truncation, names beyond 1.17, threads.
//
// The byte-for-byte comparison with Debian's libfabric 1.17 is
// tests/compat/tostr_compare.sh; the golden texts here were taken from
// that library's output, so the format stays pinned where it is not around.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_trigger.h>
#include <rdma/providers/fi_log.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string tostr(const void* data, fi_type type) {
  const char* s = fi_tostr(data, type);
  return s ? s : "<NULL>";
}

std::string tostr(uint64_t v, fi_type type) {
  return tostr(&v, type);
}
std::string tostr_int(int v, fi_type type) {
  return tostr(&v, type);
}

// ---------------------------------------------------------------- arguments

TEST(Tostr, NullDataGivesNull) {
  for (int t = FI_TYPE_INFO; t <= FI_TYPE_CQ_ERR_ENTRY; ++t)
    EXPECT_EQ(fi_tostr(nullptr, static_cast<fi_type>(t)), nullptr) << "type " << t;
  char buf[16];
  std::memset(buf, '#', sizeof buf);
  EXPECT_EQ(fi_tostr_r(buf, sizeof buf, nullptr, FI_TYPE_CAPS), nullptr);
  EXPECT_EQ(buf[0], '#');
}

TEST(Tostr, NoBufferGivesNullAndWritesNothing) {
  uint64_t caps = FI_MSG;
  char buf[4] = {'#', '#', '#', '#'};
  EXPECT_EQ(fi_tostr_r(buf, 0, &caps, FI_TYPE_CAPS), nullptr);
  EXPECT_EQ(buf[0], '#');
  EXPECT_EQ(fi_tostr_r(nullptr, 100, &caps, FI_TYPE_CAPS), nullptr);
}

TEST(Tostr, UnknownTypeSaysSo) {
  uint64_t v = 0;
  EXPECT_EQ(tostr(&v, static_cast<fi_type>(FI_TYPE_CQ_ERR_ENTRY + 1)), "Unknown type");
  EXPECT_EQ(tostr(&v, static_cast<fi_type>(-1)), "Unknown type");
  EXPECT_EQ(tostr(&v, static_cast<fi_type>(100000)), "Unknown type");
}

// Every type the header defines has its own text.
TEST(Tostr, EveryTypeIsKnown) {
  alignas(16) unsigned char zero[512] = {};
  for (int t = FI_TYPE_INFO; t <= FI_TYPE_CQ_ERR_ENTRY; ++t) {
    if (t == FI_TYPE_FID) continue;  // needs a real fid, below
    EXPECT_NE(tostr(zero, static_cast<fi_type>(t)), "Unknown type") << "type " << t;
  }
}

TEST(Tostr, ReturnsCallersBuffer) {
  int ep = FI_EP_MSG;
  char buf[32];
  EXPECT_EQ(fi_tostr_r(buf, sizeof buf, &ep, FI_TYPE_EP_TYPE), buf);
  EXPECT_STREQ(buf, "FI_EP_MSG");
}

// ---------------------------------------------------------------- truncation

// Every length: a NUL-terminated prefix that fills the buffer, nothing
// written past it.
void check_truncation(const void* data, fi_type type) {
  std::string full = tostr(data, type);
  std::vector<char> buf(full.size() + 16);
  for (size_t len = 1; len <= full.size() + 4; ++len) {
    std::fill(buf.begin(), buf.end(), '#');
    ASSERT_EQ(fi_tostr_r(buf.data(), len, data, type), buf.data());
    size_t want = std::min(full.size(), len - 1);
    ASSERT_EQ(std::strlen(buf.data()), want) << "len " << len;
    ASSERT_EQ(full.compare(0, want, buf.data()), 0) << "len " << len;
    for (size_t i = len; i < buf.size(); ++i) ASSERT_EQ(buf[i], '#') << "len " << len;
  }
}

TEST(Tostr, TruncatesToAPrefixAndNeverOverruns) {
  uint64_t caps = FI_MSG | FI_RMA | FI_TAGGED | FI_HMEM;
  check_truncation(&caps, FI_TYPE_CAPS);
  int ep = FI_EP_RDM;
  check_truncation(&ep, FI_TYPE_EP_TYPE);
  fi_tx_attr tx{};
  tx.caps = FI_MSG | FI_RMA;
  tx.comp_order = FI_ORDER_STRICT | FI_ORDER_DATA;
  fi_domain_attr dom{};
  dom.name = const_cast<char*>("lo");
  fi_info info{};
  info.tx_attr = &tx;
  info.domain_attr = &dom;
  info.caps = FI_MSG | FI_RMA;
  check_truncation(&info, FI_TYPE_INFO);
  uint64_t v = 0;
  check_truncation(&v, static_cast<fi_type>(5000));
}

TEST(Tostr, LongTextIsCutAtTheThreadBuffer) {
  std::string addr = "fi_addr_str://" + std::string(20000, 'x');
  fi_info info{};
  info.addr_format = FI_ADDR_STR;
  info.src_addr = addr.data();
  info.src_addrlen = addr.size() + 1;
  const char* s = fi_tostr(&info, FI_TYPE_INFO);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(std::strlen(s), 8191u);
}

// ------------------------------------------------------------------- format

// The layout of 1.17's `fi_info -v`, from Debian's library.
TEST(Tostr, InfoGolden) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(4711);
  inet_pton(AF_INET, "192.0.2.2", &sin.sin_addr);
  fi_tx_attr tx{};
  tx.caps = FI_MSG | FI_SEND;
  tx.op_flags = FI_COMPLETION;
  tx.msg_order = FI_ORDER_SAS;
  tx.inject_size = 64;
  tx.size = 1024;
  tx.iov_limit = 4;
  tx.rma_iov_limit = 1;
  fi_ep_attr ep{};
  ep.type = FI_EP_DGRAM;
  ep.protocol = FI_PROTO_UDP;
  ep.max_msg_size = 1472;
  ep.mem_tag_format = 0xaaaa;
  ep.tx_ctx_cnt = FI_SHARED_CONTEXT;
  ep.rx_ctx_cnt = 1;
  fi_fabric_attr fab{};
  fab.name = const_cast<char*>("192.0.2.0/24");
  fab.prov_name = const_cast<char*>("udp");
  fab.prov_version = FI_VERSION(117, 0);
  fab.api_version = FI_VERSION(1, 17);
  fi_info info{};
  info.caps = FI_MSG | FI_SOURCE;
  info.addr_format = FI_SOCKADDR_IN;
  info.src_addr = &sin;
  info.src_addrlen = sizeof sin;
  info.tx_attr = &tx;
  info.ep_attr = &ep;
  info.fabric_attr = &fab;
  EXPECT_EQ(tostr(&info, FI_TYPE_INFO),
            "fi_info:\n"
            "    caps: [ FI_MSG, FI_SOURCE ]\n"
            "    mode: [  ]\n"
            "    addr_format: FI_SOCKADDR_IN\n"
            "    src_addrlen: 16\n"
            "    dest_addrlen: 0\n"
            "    src_addr: fi_sockaddr_in://192.0.2.2:4711\n"
            "    dest_addr: (null)\n"
            "    handle: (nil)\n"
            "    fi_tx_attr:\n"
            "        caps: [ FI_MSG, FI_SEND ]\n"
            "        mode: [  ]\n"
            "        op_flags: [ FI_COMPLETION ]\n"
            "        msg_order: [ FI_ORDER_SAS ]\n"
            "        comp_order: [ FI_ORDER_NONE ]\n"
            "        inject_size: 64\n"
            "        size: 1024\n"
            "        iov_limit: 4\n"
            "        rma_iov_limit: 1\n"
            "        tclass: 0x0\n"
            "    fi_rx_attr: (null)\n"
            "    fi_ep_attr:\n"
            "        type: FI_EP_DGRAM\n"
            "        protocol: FI_PROTO_UDP\n"
            "        protocol_version: 0\n"
            "        max_msg_size: 1472\n"
            "        msg_prefix_size: 0\n"
            "        max_order_raw_size: 0\n"
            "        max_order_war_size: 0\n"
            "        max_order_waw_size: 0\n"
            "        mem_tag_format: 0x000000000000aaaa\n"
            "        tx_ctx_cnt: FI_SHARED_CONTEXT\n"
            "        rx_ctx_cnt: 1\n"
            "        auth_key_size: 0\n"
            "    fi_domain_attr: (null)\n"
            "    fi_fabric_attr:\n"
            "        name: 192.0.2.0/24\n"
            "        prov_name: udp\n"
            "        prov_version: 117.0\n"
            "        api_version: 1.17\n"
            "    nic: (nil)\n");
}

TEST(Tostr, DomainAttrGolden) {
  fi_domain_attr d{};
  d.threading = FI_THREAD_DOMAIN;
  d.control_progress = FI_PROGRESS_AUTO;
  d.data_progress = FI_PROGRESS_MANUAL;
  d.resource_mgmt = FI_RM_ENABLED;
  d.av_type = static_cast<fi_av_type>(9);
  d.mr_mode = FI_MR_LOCAL | FI_MR_PROV_KEY;
  d.tclass = 0x2a;
  d.max_ep_auth_key = 7;  // not printed: a lone 1.x struct may end before it
  EXPECT_EQ(tostr(&d, FI_TYPE_DOMAIN_ATTR),
            "fi_domain_attr:\n"
            "    domain: 0x0\n"
            "    name: (null)\n"
            "    threading: FI_THREAD_DOMAIN\n"
            "    control_progress: FI_PROGRESS_AUTO\n"
            "    data_progress: FI_PROGRESS_MANUAL\n"
            "    resource_mgmt: FI_RM_ENABLED\n"
            "    av_type: Unknown\n"
            "    mr_mode: [ FI_MR_LOCAL, FI_MR_PROV_KEY ]\n"
            "    mr_key_size: 0\n"
            "    cq_data_size: 0\n"
            "    cq_cnt: 0\n"
            "    ep_cnt: 0\n"
            "    tx_ctx_cnt: 0\n"
            "    rx_ctx_cnt: 0\n"
            "    max_ep_tx_ctx: 0\n"
            "    max_ep_rx_ctx: 0\n"
            "    max_ep_stx_ctx: 0\n"
            "    max_ep_srx_ctx: 0\n"
            "    cntr_cnt: 0\n"
            "    mr_iov_limit: 0\n"
            "    caps: [  ]\n"
            "    mode: [  ]\n"
            "    auth_key_size: 0\n"
            "    max_err_data: 0\n"
            "    mr_cnt: 0\n"
            "    tclass: 0x2a\n");
}

TEST(Tostr, FlagListsAndOrder) {
  // 1.17's orders: FI_HMEM after the bits above it; MATCH before AFFINITY;
  // completion flags start with SEND, RECV; mode from the top bit down.
  EXPECT_EQ(tostr(FI_HMEM | FI_DIRECTED_RECV | FI_MSG, FI_TYPE_CAPS),
            "FI_MSG, FI_DIRECTED_RECV, FI_HMEM");
  EXPECT_EQ(tostr(FI_AFFINITY | FI_MATCH_COMPLETE, FI_TYPE_OP_FLAGS),
            "FI_MATCH_COMPLETE, FI_AFFINITY");
  EXPECT_EQ(tostr(FI_MSG | FI_RECV | FI_SEND, FI_TYPE_CQ_EVENT_FLAGS), "FI_SEND, FI_RECV, FI_MSG");
  EXPECT_EQ(tostr(FI_CONTEXT2 | FI_CONTEXT, FI_TYPE_MODE), "FI_CONTEXT, FI_CONTEXT2");
  EXPECT_EQ(tostr(uint64_t{0}, FI_TYPE_CAPS), "");
  // Bits without a name are skipped.
  EXPECT_EQ(tostr((1ULL << 63) | (1ULL << 0) | FI_RMA, FI_TYPE_CAPS), "FI_RMA");
  EXPECT_EQ(tostr_int(FI_MR_BASIC | FI_MR_SCALABLE | (1 << 20), FI_TYPE_MR_MODE),
            "FI_MR_BASIC, FI_MR_SCALABLE");
}

TEST(Tostr, CompOrder) {
  fi_rx_attr rx{};
  auto comp = [&](uint64_t v) {
    rx.comp_order = v;
    std::string s = tostr(&rx, FI_TYPE_RX_ATTR);
    size_t at = s.find("comp_order: ");
    return s.substr(at, s.find('\n', at) - at);
  };
  EXPECT_EQ(comp(0), "comp_order: [ FI_ORDER_NONE ]");
  EXPECT_EQ(comp(FI_ORDER_STRICT), "comp_order: [ FI_ORDER_STRICT ]");
  EXPECT_EQ(comp(FI_ORDER_DATA), "comp_order: [ FI_ORDER_NONE, FI_ORDER_DATA ]");
  EXPECT_EQ(comp(FI_ORDER_SAS | FI_ORDER_DATA), "comp_order: [ FI_ORDER_DATA ]");
  EXPECT_EQ(comp(FI_ORDER_SAS), "comp_order: [  ]");
}

TEST(Tostr, EnumsKnownUnknownAndProviderSpecific) {
  EXPECT_EQ(tostr_int(FI_EP_SOCK_DGRAM, FI_TYPE_EP_TYPE), "FI_EP_SOCK_DGRAM");
  EXPECT_EQ(tostr_int(-1, FI_TYPE_EP_TYPE), "Unknown");
  EXPECT_EQ(tostr_int(FI_ADDR_CXI, FI_TYPE_ADDR_FORMAT), "FI_ADDR_CXI");
  EXPECT_EQ(tostr_int(static_cast<int>(FI_PROV_SPECIFIC | 3), FI_TYPE_ADDR_FORMAT),
            "Provider specific");
  EXPECT_EQ(tostr_int(static_cast<int>(FI_PROV_SPECIFIC), FI_TYPE_PROTOCOL), "Provider specific");
  EXPECT_EQ(tostr_int(FI_LOG_DEBUG, FI_TYPE_LOG_LEVEL), "debug");
  EXPECT_EQ(tostr_int(FI_LOG_EP_DATA, FI_TYPE_LOG_SUBSYS), "ep_data");
  EXPECT_EQ(tostr_int(FI_LOG_SUBSYS_MAX, FI_TYPE_LOG_SUBSYS), "Unknown");
  uint32_t ev = FI_JOIN_COMPLETE;
  EXPECT_EQ(tostr(&ev, FI_TYPE_EQ_EVENT), "FI_JOIN_COMPLETE");
  EXPECT_EQ(tostr_int(FI_OP_CNTR_ADD, FI_TYPE_OP_TYPE), "FI_OP_CNTR_ADD");
  EXPECT_EQ(tostr_int(FI_GATHER, FI_TYPE_COLLECTIVE_OP), "FI_GATHER");
  EXPECT_EQ(tostr_int(FI_HMEM_SYNAPSEAI, FI_TYPE_HMEM_IFACE), "FI_HMEM_SYNAPSEAI");
  EXPECT_EQ(tostr_int(FI_CQ_FORMAT_TAGGED, FI_TYPE_CQ_FORMAT), "FI_CQ_FORMAT_TAGGED");
}

// C callers put any number in enum fields; they are read as ints (a load
// through the C++ enum type would be undefined, and UBSan says so).
TEST(Tostr, OutOfRangeEnumFields) {
  fi_ep_attr ep;
  std::memset(&ep, 0xff, sizeof ep);
  std::string s = tostr(&ep, FI_TYPE_EP_ATTR);
  EXPECT_NE(s.find("    type: Unknown\n    protocol: Provider specific\n"), std::string::npos) << s;
  fi_cq_attr cq;
  std::memset(&cq, 0x7f, sizeof cq);
  s = tostr(&cq, FI_TYPE_CQ_ATTR);
  EXPECT_NE(s.find("    format: Unknown\n    wait_obj: Unknown\n"), std::string::npos) << s;
  fi_mr_attr mr;
  std::memset(&mr, 0x7f, sizeof mr);
  EXPECT_NE(tostr(&mr, FI_TYPE_MR_ATTR).find("    iface: Unknown\n"), std::string::npos);
}

// What 1.17 has no name for is printed by the constant's name.
TEST(Tostr, NamesBeyond117) {
  EXPECT_EQ(tostr_int(FI_PROGRESS_CONTROL_UNIFIED, FI_TYPE_PROGRESS),
            "FI_PROGRESS_CONTROL_UNIFIED");
  EXPECT_EQ(tostr_int(FI_ADDR_UCX, FI_TYPE_ADDR_FORMAT), "FI_ADDR_UCX");
  EXPECT_EQ(tostr_int(FI_PROTO_LNX, FI_TYPE_PROTOCOL), "FI_PROTO_LNX");
  EXPECT_EQ(tostr_int(FI_PROTO_MXM, FI_TYPE_PROTOCOL), "FI_PROTO_MXM");
  EXPECT_EQ(tostr_int(FI_PROTO_MRAIL, FI_TYPE_PROTOCOL), "FI_PROTO_MRAIL");
  EXPECT_EQ(tostr_int(FI_FLOAT8_E5M2, FI_TYPE_ATOMIC_TYPE), "FI_FLOAT8_E5M2");
  EXPECT_EQ(tostr_int(FI_VOID, FI_TYPE_ATOMIC_TYPE), "FI_VOID");
  EXPECT_EQ(tostr_int(FI_DIFF, FI_TYPE_ATOMIC_OP), "FI_DIFF");
  EXPECT_EQ(tostr_int(FI_NOOP, FI_TYPE_ATOMIC_OP), "FI_NOOP");
  EXPECT_EQ(tostr(FI_AV_USER_ID | FI_PEER | FI_XPU | FI_TAGGED_DIRECTED_RECV | FI_TAGGED_MULTI_RECV,
                  FI_TYPE_CAPS),
            "FI_AV_USER_ID, FI_PEER, FI_XPU, FI_TAGGED_DIRECTED_RECV, FI_TAGGED_MULTI_RECV");
  EXPECT_EQ(tostr(FI_COMMIT_COMPLETE, FI_TYPE_OP_FLAGS), "FI_COMMIT_COMPLETE");
  EXPECT_EQ(tostr(FI_PEER_TRANSFER, FI_TYPE_MODE), "FI_PEER_TRANSFER");
  EXPECT_EQ(tostr(FI_COLLECTIVE, FI_TYPE_CQ_EVENT_FLAGS), "FI_COLLECTIVE");
}

// Bit 48 by the caller's API version; lone values count as 1.x.
TEST(Tostr, CapabilityBit48FollowsApiVersion) {
  EXPECT_EQ(tostr(FI_VARIABLE_MSG, FI_TYPE_CAPS), "FI_VARIABLE_MSG");
  fi_fabric_attr fab{};
  fi_tx_attr tx{};
  tx.caps = 1ULL << 48;
  fi_info info{};
  info.caps = 1ULL << 48;
  info.tx_attr = &tx;
  info.fabric_attr = &fab;
  fab.api_version = FI_VERSION(1, 17);
  std::string v1 = tostr(&info, FI_TYPE_INFO);
  EXPECT_NE(v1.find("    caps: [ FI_VARIABLE_MSG ]"), std::string::npos);
  EXPECT_NE(v1.find("        caps: [ FI_VARIABLE_MSG ]"), std::string::npos);
  fab.api_version = FI_VERSION(2, 0);
  std::string v2 = tostr(&info, FI_TYPE_INFO);
  EXPECT_NE(v2.find("    caps: [ FI_EXACT_DIRECTED_RECV ]"), std::string::npos);
  EXPECT_NE(v2.find("        caps: [ FI_EXACT_DIRECTED_RECV ]"), std::string::npos);
}

// The fields appended after 1.17's domain attributes are read only when the
// info says its caller is 2.x (whose structures have them).
TEST(Tostr, DomainExtensionsOnlyFor2xCallers) {
  fi_domain_attr dom{};
  dom.max_ep_auth_key = 3;
  dom.max_group_id = 4;
  dom.max_cntr_value = 5;
  dom.max_err_cntr_value = 6;
  fi_fabric_attr fab{};
  fi_info info{};
  info.domain_attr = &dom;
  info.fabric_attr = &fab;
  fab.api_version = FI_VERSION(1, 17);
  EXPECT_EQ(tostr(&info, FI_TYPE_INFO).find("max_ep_auth_key"), std::string::npos);
  fab.api_version = FI_VERSION(2, 0);
  EXPECT_NE(tostr(&info, FI_TYPE_INFO)
                .find("        tclass: 0x0\n"
                      "        max_ep_auth_key: 3\n"
                      "        max_group_id: 4\n"
                      "        max_cntr_value: 5\n"
                      "        max_err_cntr_value: 6\n"
                      "    fi_fabric_attr:\n"),
            std::string::npos);
}

TEST(Tostr, VersionNamesWeft) {
  std::string v = tostr("", FI_TYPE_VERSION);
  EXPECT_EQ(
      v.rfind(std::to_string(FI_MAJOR_VERSION) + "." + std::to_string(FI_MINOR_VERSION) + ".", 0),
      0u)
      << v;
  EXPECT_NE(v.find("(weft "), std::string::npos) << v;
}

// ---------------------------------------------------------------- addresses

std::string src_addr_line(uint32_t format, const void* addr, size_t len) {
  fi_info info{};
  info.addr_format = format;
  info.src_addr = const_cast<void*>(addr);
  info.src_addrlen = len;
  std::string s = tostr(&info, FI_TYPE_INFO);
  size_t at = s.find("src_addr: ") + 10;
  return s.substr(at, s.find('\n', at) - at);
}

TEST(Tostr, Addresses) {
  sockaddr_in6 sin6{};
  sin6.sin6_family = AF_INET6;
  sin6.sin6_port = htons(65535);
  inet_pton(AF_INET6, "fe80::1", &sin6.sin6_addr);
  EXPECT_EQ(src_addr_line(FI_SOCKADDR_IN6, &sin6, sizeof sin6),
            "fi_sockaddr_in6://[fe80::1]:65535");
  EXPECT_EQ(src_addr_line(FI_SOCKADDR, &sin6, sizeof sin6), "fi_sockaddr_in6://[fe80::1]:65535");
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
  EXPECT_EQ(src_addr_line(FI_SOCKADDR, &sin, sizeof sin), "fi_sockaddr_in://127.0.0.1:0");
  sin.sin_family = AF_UNIX;
  EXPECT_EQ(src_addr_line(FI_SOCKADDR_IN, &sin, sizeof sin), "");
  uint8_t raw[48] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  EXPECT_EQ(src_addr_line(FI_ADDR_PSMX2, raw, 16),
            "fi_addr_psmx2://807060504030201:100f0e0d0c0b0a09");
  EXPECT_EQ(src_addr_line(FI_ADDR_CXI, raw, 4), "fi_addr_cxi://0x04030201");
  EXPECT_EQ(src_addr_line(FI_ADDR_UCX, raw, 3), "fi_addr_ucx://010203");
  EXPECT_EQ(src_addr_line(FI_FORMAT_UNSPEC, raw, 16), "");
  const char str[] = "fi_addr_str://host:1";
  EXPECT_EQ(src_addr_line(FI_ADDR_STR, str, sizeof str), str);
}

// An address shorter than its format needs is not read past its length.
TEST(Tostr, ShortAddressesPrintNothing) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  EXPECT_EQ(src_addr_line(FI_SOCKADDR_IN, &sin, 7), "");
  EXPECT_EQ(src_addr_line(FI_SOCKADDR_IN, &sin, 8), "fi_sockaddr_in://0.0.0.0:0");
  EXPECT_EQ(src_addr_line(FI_SOCKADDR, &sin, 1), "");
  uint8_t raw[48] = {};
  EXPECT_EQ(src_addr_line(FI_SOCKADDR_IB, raw, 47), "");
  EXPECT_EQ(src_addr_line(FI_ADDR_PSMX3, raw, 31), "");
  EXPECT_EQ(src_addr_line(FI_ADDR_EFA, raw, 23), "");
  EXPECT_EQ(src_addr_line(FI_ADDR_IB_UD, raw, 26), "");
  EXPECT_EQ(src_addr_line(FI_ADDR_OPX, raw, 7), "");
  const char str[] = "fi_addr_str://abc";
  EXPECT_EQ(src_addr_line(FI_ADDR_STR, str, 8), "fi_addr_");
}

// -------------------------------------------------------------------- fids

int self_print(const fid*, char* buf, size_t len) {
  return snprintf(buf, len, "SELF\n");
}
int fails_after_scribbling(const fid*, char* buf, size_t len) {
  snprintf(buf, len, "GARBAGE");
  return -FI_ENOSYS;
}
int fills_without_nul(const fid*, char* buf, size_t len) {
  std::memset(buf, 'z', len);
  return 0;
}

TEST(Tostr, FidPrintsItselfOrItsAddress) {
  fi_ops ops{};
  ops.size = sizeof ops;
  fid f{FI_CLASS_EP, nullptr, &ops};
  char addr[32];
  snprintf(addr, sizeof addr, "%p", static_cast<void*>(&f));
  EXPECT_EQ(tostr(&f, FI_TYPE_FID), std::string("fid: ") + addr + "\n");
  ops.tostr = self_print;
  EXPECT_EQ(tostr(&f, FI_TYPE_FID), "SELF\n");
  // A failing op (weft's objects answer -FI_ENOSYS) leaves no trace.
  ops.tostr = fails_after_scribbling;
  EXPECT_EQ(tostr(&f, FI_TYPE_FID), std::string("fid: ") + addr + "\n");
  // A table too old for the slot is not read there.
  ops.tostr = self_print;
  ops.size = offsetof(fi_ops, tostr);
  EXPECT_EQ(tostr(&f, FI_TYPE_FID), std::string("fid: ") + addr + "\n");
  ops.size = sizeof ops;
  ops.tostr = fills_without_nul;
  char buf[16];
  std::memset(buf, '#', sizeof buf);
  EXPECT_EQ(fi_tostr_r(buf, 10, &f, FI_TYPE_FID), buf);
  EXPECT_EQ(std::string(buf), "zzzzzzzzz");
  EXPECT_EQ(buf[10], '#');
}

TEST(Tostr, HandleAndNicPrintInPlace) {
  fi_ops ops{};
  ops.size = sizeof ops;
  ops.tostr = self_print;
  fid handle{FI_CLASS_EP, nullptr, &ops};
  fid_nic nic{};
  nic.fid = {FI_CLASS_NIC, nullptr, &ops};
  fi_info info{};
  info.handle = &handle;
  info.nic = &nic;
  std::string s = tostr(&info, FI_TYPE_INFO);
  EXPECT_NE(s.find("    dest_addr: (null)\nSELF\n    fi_tx_attr: (null)\n"), std::string::npos)
      << s;
  EXPECT_NE(s.find("    fi_fabric_attr: (null)\nSELF\n"), std::string::npos) << s;
  ops.tostr = fails_after_scribbling;
  s = tostr(&info, FI_TYPE_INFO);
  char addr[32];
  snprintf(addr, sizeof addr, "%p", static_cast<void*>(&handle));
  EXPECT_NE(s.find(std::string("    handle: ") + addr + "\n    fi_tx_attr"), std::string::npos)
      << s;
}

// ---------------------------------------------------- types API 2.x added

TEST(Tostr, AvAttr) {
  fi_av_attr a{};
  a.type = FI_AV_TABLE;
  a.count = 64;
  a.name = "shared";
  a.flags = FI_SYMMETRIC | FI_EVENT;
  EXPECT_EQ(tostr(&a, FI_TYPE_AV_ATTR),
            "fi_av_attr:\n"
            "    type: FI_AV_TABLE\n"
            "    rx_ctx_bits: 0\n"
            "    count: 64\n"
            "    ep_per_node: 0\n"
            "    name: shared\n"
            "    map_addr: (nil)\n"
            "    flags: [ FI_EVENT, FI_SYMMETRIC ]\n");
}

TEST(Tostr, CqAttr) {
  fi_cq_attr a{};
  a.size = 1024;
  a.format = FI_CQ_FORMAT_TAGGED;
  a.wait_obj = FI_WAIT_FD;
  a.wait_cond = FI_CQ_COND_THRESHOLD;
  a.signaling_vector = -1;
  EXPECT_EQ(tostr(&a, FI_TYPE_CQ_ATTR),
            "fi_cq_attr:\n"
            "    size: 1024\n"
            "    flags: [  ]\n"
            "    format: FI_CQ_FORMAT_TAGGED\n"
            "    wait_obj: FI_WAIT_FD\n"
            "    signaling_vector: -1\n"
            "    wait_cond: FI_CQ_COND_THRESHOLD\n"
            "    wait_set: (nil)\n");
}

TEST(Tostr, MrAttr) {
  fi_mr_attr a{};
  a.iov_count = 1;
  a.access = FI_REMOTE_READ | FI_REMOTE_WRITE;
  a.requested_key = 0x42;
  a.iface = FI_HMEM_CUDA;
  a.device.cuda = 3;
  a.page_size = 4096;
  EXPECT_EQ(tostr(&a, FI_TYPE_MR_ATTR),
            "fi_mr_attr:\n"
            "    mr_iov: (nil)\n"
            "    iov_count: 1\n"
            "    access: [ FI_REMOTE_READ, FI_REMOTE_WRITE ]\n"
            "    offset: 0x0\n"
            "    requested_key: 0x42\n"
            "    context: (nil)\n"
            "    auth_key_size: 0\n"
            "    iface: FI_HMEM_CUDA\n"
            "    device: 3\n"
            "    hmem_data: (nil)\n"
            "    page_size: 4096\n"
            "    base_mr: (nil)\n"
            "    sub_mr_cnt: 0\n");
}

TEST(Tostr, CntrAttr) {
  fi_cntr_attr a{};
  a.events = FI_CNTR_EVENTS_BYTES;
  a.wait_obj = FI_WAIT_UNSPEC;
  EXPECT_EQ(tostr(&a, FI_TYPE_CNTR_ATTR),
            "fi_cntr_attr:\n"
            "    events: FI_CNTR_EVENTS_BYTES\n"
            "    wait_obj: FI_WAIT_UNSPEC\n"
            "    wait_set: (nil)\n"
            "    flags: [  ]\n");
}

TEST(Tostr, CqErrEntry) {
  fi_cq_err_entry e{};
  e.flags = FI_RECV | FI_TAGGED;
  e.len = 10;
  e.tag = 0xbeef;
  e.olen = 6;
  e.err = FI_ETRUNC;
  e.prov_errno = -3;
  e.src_addr = FI_ADDR_NOTAVAIL;
  std::string s = tostr(&e, FI_TYPE_CQ_ERR_ENTRY);
  EXPECT_EQ(s,
            "fi_cq_err_entry:\n"
            "    op_context: (nil)\n"
            "    flags: [ FI_RECV, FI_TAGGED ]\n"
            "    len: 10\n"
            "    buf: (nil)\n"
            "    data: 0x0\n"
            "    tag: 0xbeef\n"
            "    olen: 6\n"
            "    err: " +
                std::to_string(FI_ETRUNC) +
                "\n"
                "    prov_errno: -3\n"
                "    err_data: (nil)\n"
                "    err_data_size: 0\n"
                "    src_addr: FI_ADDR_NOTAVAIL\n");
  e.src_addr = 17;
  EXPECT_NE(tostr(&e, FI_TYPE_CQ_ERR_ENTRY).find("    src_addr: 17\n"), std::string::npos);
}

// ------------------------------------------------------------------ threads

// fi_tostr's buffer is per thread: a text stays put while others print.
TEST(Tostr, ThreadsHaveTheirOwnBuffer) {
  int msg = FI_EP_MSG;
  const char* mine = fi_tostr(&msg, FI_TYPE_EP_TYPE);
  std::vector<std::thread> threads;
  std::vector<const char*> theirs(4);
  for (size_t i = 0; i < theirs.size(); ++i)
    threads.emplace_back([&, i] {
      int rdm = FI_EP_RDM;
      for (int k = 0; k < 1000; ++k) {
        const char* s = fi_tostr(&rdm, FI_TYPE_EP_TYPE);
        if (std::strcmp(s, "FI_EP_RDM") != 0) return;
        theirs[i] = s;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_STREQ(mine, "FI_EP_MSG");
  for (const char* s : theirs) {
    ASSERT_NE(s, nullptr);
    EXPECT_NE(s, mine);
  }
}

}  // namespace
