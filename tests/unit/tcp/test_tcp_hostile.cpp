// SPDX-License-Identifier: MIT
// weft — unit tests of the tcp provider against peers that break the
// protocol: a message cut short, sizes above the limit, another version,
// the wrong endpoint type. Each time the endpoint closes that connection,
// fails what it had matched to it, answers where the protocol says so, and
// goes on serving everyone else.
#include "tcp_fixture.hpp"

namespace tcp_test {
namespace {

class hostile : public rdm_fixture {
 protected:
  void SetUp() override {
    rdm_fixture::SetUp();
    ep = open_ep(&self, &name);
    ASSERT_NE(ep, nullptr);
  }
  // The endpoint still carries a message to itself.
  void still_works() {
    char in[8] = {};
    fi_context r, s;
    ASSERT_EQ(fi_trecv(ep, in, sizeof in, nullptr, FI_ADDR_UNSPEC, 77, 0, &r), 0);
    ASSERT_EQ(fi_tsend(ep, "alive", 6, nullptr, self, 77, &s), 0);
    ASSERT_EQ(wait_for(&r), 1);
    EXPECT_STREQ(in, "alive");
  }
  std::function<void()> poll() {
    return [this] {
      fi_cq_tagged_entry e;
      fi_cq_read(cq, &e, 0);
    };
  }

  fid_ep* ep = nullptr;
  fi_addr_t self = FI_ADDR_UNSPEC;
  sockaddr_in name{};
};

TEST_F(hostile, message_cut_short_fails_the_matched_receive) {
  std::vector<char> in(1000);
  fi_context ctx;
  ASSERT_EQ(fi_recv(ep, in.data(), in.size(), nullptr, FI_ADDR_UNSPEC, &ctx), 0);
  {
    raw_peer p(name);
    p.hello();
    frame m{};
    m.op = proto::op::msg;
    m.payload_len = 1000;
    p.frame_out(m, "0123456789", 10);
  }  // closed after 10 of 1000 bytes
  fi_cq_err_entry err{};
  ASSERT_EQ(wait_for(&ctx, &err), -FI_EAVAIL);
  EXPECT_EQ(err.err, FI_EIO);
  EXPECT_EQ(std::memcmp(in.data(), "0123456789", 10), 0);
  still_works();
}

TEST_F(hostile, unexpected_message_cut_short_is_dropped) {
  {
    raw_peer p(name);
    p.hello();
    frame m{};
    m.op = proto::op::tagged;
    m.tag = 77;
    m.payload_len = 100000;
    std::vector<char> part(5000, 'x');
    p.frame_out(m, part.data(), part.size());
  }
  poll_for(100);
  // Nothing of it reaches a receive posted now: the next message does.
  still_works();
}

TEST_F(hostile, payload_above_max_msg_size_closes_without_allocating) {
  raw_peer p(name);
  p.hello();
  frame m{};
  m.op = proto::op::msg;
  m.payload_len = static_cast<uint32_t>(info->ep_attr->max_msg_size + 1);
  std::byte hdr[proto::max_hdr_len];
  size_t n = build_header(m, hdr);
  p.write(hdr, n);
  bool ended = false;
  p.read_until_eof(poll(), &ended);
  EXPECT_TRUE(ended);
  still_works();
}

TEST_F(hostile, another_major_version_is_refused_in_a_frame_it_reads) {
  raw_peer p(name);
  frame f{};
  f.op = proto::op::hello;
  f.addr_len = 6;
  std::byte hdr[proto::max_hdr_len];
  size_t n = build_header(f, hdr);
  hdr[2] = std::byte{2};  // version
  p.write(hdr, n);
  bool ended = false;
  std::vector<frame> got = p.read_until_eof(poll(), &ended);
  EXPECT_TRUE(ended);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].op, proto::op::cm_resp);
  EXPECT_EQ(got[0].status, FI_ENOPROTOOPT);
  still_works();
}

TEST_F(hostile, a_message_before_hello_closes_the_connection) {
  raw_peer p(name);
  frame m{};
  m.op = proto::op::msg;
  m.payload_len = 3;
  p.frame_out(m, "abc", 3);
  bool ended = false;
  p.read_until_eof(poll(), &ended);
  EXPECT_TRUE(ended);
  still_works();
}

TEST_F(hostile, rma_is_not_accepted_yet) {
  raw_peer p(name);
  p.hello();
  frame w{};
  w.op = proto::op::rma_write;
  w.iov_count = 1;
  w.iov[0] = {0x1000, 4, 1};
  w.payload_len = 4;
  p.frame_out(w, "data", 4);
  bool ended = false;
  std::vector<frame> got = p.read_until_eof(poll(), &ended);
  EXPECT_TRUE(ended);
  ASSERT_GE(got.size(), 1u);
  EXPECT_EQ(got[0].op, proto::op::hello);  // the answer to our hello came first
  still_works();
}

TEST_F(hostile, a_connection_request_to_an_rdm_endpoint_is_refused) {
  raw_peer p(name);
  frame req{};
  req.op = proto::op::cm_req;
  p.frame_out(req, "hi", 2);
  bool ended = false;
  std::vector<frame> got = p.read_until_eof(poll(), &ended);
  EXPECT_TRUE(ended);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].op, proto::op::cm_resp);
  EXPECT_EQ(got[0].status, FI_ECONNREFUSED);
}

TEST_F(hostile, a_peer_that_never_speaks_is_dropped_at_the_deadline) {
  raw_peer p(name);
  still_works();  // meanwhile everyone else is served
  // Nothing sent: the endpoint gives up after FI_TCP_CONN_TIMEOUT (1.5 s here).
  auto start = std::chrono::steady_clock::now();
  bool ended = false;
  p.read_until_eof(poll(), &ended);
  EXPECT_TRUE(ended);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1000));
}

// ---- the passive endpoint ----

class hostile_pep : public testing::Test {
 protected:
  void SetUp() override {
    info = loopback_info(FI_EP_MSG);
    ASSERT_NE(info, nullptr);
    ASSERT_EQ(weft_tcp_provider()->fabric(info->fabric_attr, &fabric, nullptr), 0);
    fi_eq_attr attr{};
    attr.wait_obj = FI_WAIT_UNSPEC;
    ASSERT_EQ(fi_eq_open(fabric, &attr, &eq, nullptr), 0);
    ASSERT_EQ(fi_passive_ep(fabric, info, &pep, nullptr), 0);
    ASSERT_EQ(fi_pep_bind(pep, &eq->fid, 0), 0);
    ASSERT_EQ(fi_listen(pep), 0);
    size_t len = sizeof name;
    ASSERT_EQ(fi_getname(&pep->fid, &name, &len), 0);
  }
  void TearDown() override {
    if (pep) {
      EXPECT_EQ(fi_close(&pep->fid), 0);
    }
    if (eq) {
      EXPECT_EQ(fi_close(&eq->fid), 0);
    }
    if (fabric) {
      EXPECT_EQ(fi_close(&fabric->fid), 0);
    }
    fi_freeinfo(info);
  }
  std::function<void()> poll() {
    return [this] {
      uint32_t ev;
      fi_eq_cm_entry e;
      ASSERT_EQ(fi_eq_read(eq, &ev, &e, sizeof e, FI_PEEK), -FI_EAGAIN) << "no event expected";
    };
  }
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_eq* eq = nullptr;
  fid_pep* pep = nullptr;
  sockaddr_in name{};
};

TEST_F(hostile_pep, an_rdm_hello_is_refused) {
  raw_peer p(name);
  p.hello();
  bool ended = false;
  std::vector<frame> got = p.read_until_eof(poll(), &ended);
  EXPECT_TRUE(ended);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].op, proto::op::cm_resp);
  EXPECT_EQ(got[0].status, FI_ECONNREFUSED);
}

TEST_F(hostile_pep, garbage_is_dropped_without_an_event) {
  raw_peer p(name);
  p.write("GET / HTTP/1.0\r\n\r\n", 18);
  bool ended = false;
  p.read_until_eof(poll(), &ended);
  EXPECT_TRUE(ended);
}

TEST_F(hostile_pep, oversized_private_data_is_refused) {
  raw_peer p(name);
  std::byte hdr[proto::max_hdr_len];
  frame req{};
  req.op = proto::op::cm_req;
  size_t n = build_header(req, hdr);
  uint32_t too_much = proto::cm_data_max + 1;
  std::memcpy(hdr + 8, &too_much, 4);  // payload_len
  p.write(hdr, n);
  bool ended = false;
  p.read_until_eof(poll(), &ended);
  EXPECT_TRUE(ended);
}

}  // namespace
}  // namespace tcp_test
