// SPDX-License-Identifier: MIT
// weft — unit tests of the tcp provider against peers that break the
// protocol: a message cut short, sizes above the limit, another version,
// the wrong endpoint type. Each time the endpoint closes that connection,
// fails what it had matched to it, answers where the protocol says so, and
// goes on serving everyone else.
#include "tcp_fixture.hpp"

#include <fcntl.h>

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

// The header alone is refused: the connection closes before any payload byte
// is sent: the size is judged from the header, not found out while reading
// a payload. (Whether anything was allocated is not observed here.)
TEST_F(hostile, payload_above_max_msg_size_closes_on_the_header_alone) {
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

// Reads frames until `want` arrived (or 5 s passed, or the stream ended).
std::vector<frame> read_frames(raw_peer& p, const std::function<void()>& poll, size_t want,
                               bool* ended) {
  frame_reader r;
  return tcp_test::read_frames(p.fd, r, want, poll, ended);
}

TEST_F(hostile, rma_outside_any_registration_is_refused_and_the_connection_stays) {
  std::vector<char> mem(16, 'm');
  fid_mr* mr = nullptr;
  ASSERT_EQ(fi_mr_reg(domain, mem.data(), mem.size(), FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 5, 0,
                      &mr, nullptr),
            0);
  const uint64_t base =
      (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? reinterpret_cast<uint64_t>(mem.data()) : 0;
  raw_peer p(name);
  p.hello();
  frame w{};
  w.op = proto::op::rma_write;
  w.flags = proto::flag_ack;
  w.msg_id = 7;
  w.iov_count = 1;
  w.iov[0] = {base, 4, 99};  // no such key
  w.payload_len = 4;
  p.frame_out(w, "evil", 4);
  w.msg_id = 8;
  w.iov[0] = {base + 14, 4, 5};  // two bytes past the end
  p.frame_out(w, "evil", 4);
  w.msg_id = 9;
  w.iov[0] = {base + 4, 4, 5};  // inside: placed and acknowledged
  p.frame_out(w, "good", 4);
  frame r{};
  r.op = proto::op::rma_read_req;
  r.msg_id = 10;
  r.iov_count = 1;
  r.iov[0] = {base, 17, 5};
  p.frame_out(r);
  frame a{};
  a.op = proto::op::atomic_write;
  a.flags = proto::flag_ack;
  a.msg_id = 11;
  a.datatype = FI_FLOAT16;  // a datatype weft does not execute
  a.atomic_op = FI_SUM;
  a.atomic_count = 1;
  a.iov_count = 1;
  a.iov[0] = {base, 2, 5};
  a.payload_len = 2;
  p.frame_out(a, "xx", 2);
  bool ended = false;
  std::vector<frame> got = read_frames(p, poll(), 6, &ended);
  EXPECT_FALSE(ended);
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got[0].op, proto::op::hello);
  struct want {
    proto::op op;
    uint32_t id;
    int status;
  } expect[] = {{proto::op::error, 7, FI_EACCES},
                {proto::op::error, 8, FI_EACCES},
                {proto::op::ack, 9, 0},
                {proto::op::error, 10, FI_EACCES},
                {proto::op::error, 11, FI_EOPNOTSUPP}};
  for (size_t i = 0; i < std::size(expect); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i + 1].op, expect[i].op);
    EXPECT_EQ(got[i + 1].msg_id, expect[i].id);
    if (expect[i].status) { EXPECT_EQ(got[i + 1].status, expect[i].status); }
  }
  EXPECT_EQ(std::string(mem.data(), 16), std::string("mmmmgoodmmmmmmmm"));
  still_works();
  EXPECT_EQ(fi_close(&mr->fid), 0);
}

TEST_F(hostile, an_answer_to_no_request_closes_the_connection) {
  raw_peer p(name);
  p.hello();
  frame f{};
  f.op = proto::op::rma_read_resp;
  f.msg_id = 1234;
  f.payload_len = 4;
  p.frame_out(f, "data", 4);
  bool ended = false;
  p.read_until_eof(poll(), &ended);
  EXPECT_TRUE(ended);
  still_works();
}

TEST_F(hostile, delivery_complete_waits_for_the_targets_acknowledgement) {
  raw_peer p(name);
  p.hello(9);  // listening at 127.0.0.1:9, as far as the endpoint knows
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(9);
  peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  fi_addr_t to = FI_ADDR_UNSPEC;
  ASSERT_EQ(fi_av_insert(av, &peer, 1, &to, 0, nullptr), 1);
  bool ended = false;
  ASSERT_EQ(read_frames(p, poll(), 1, &ended).size(), 1u);  // its hello back
  fi_context ctx;
  iovec iov{const_cast<char*>("ping"), 4};
  fi_msg m{&iov, nullptr, 1, to, &ctx, 0};
  ASSERT_EQ(fi_sendmsg(ep, &m, FI_DELIVERY_COMPLETE), 0);
  std::vector<frame> got = read_frames(p, poll(), 1, &ended);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].op, proto::op::msg);
  EXPECT_TRUE(got[0].flags & proto::flag_ack);
  // Written to the socket and read by the peer, but not acknowledged: no
  // completion yet.
  fi_cq_err_entry err{};
  EXPECT_EQ(wait_for(&ctx, &err, 200), -FI_ETIMEDOUT);
  frame ack{};
  ack.op = proto::op::ack;
  ack.msg_id = got[0].msg_id;
  p.frame_out(ack);
  EXPECT_EQ(wait_for(&ctx), 1);
  // An error answer fails the send with the target's code.
  ASSERT_EQ(fi_sendmsg(ep, &m, FI_DELIVERY_COMPLETE), 0);
  got = read_frames(p, poll(), 1, &ended);
  ASSERT_EQ(got.size(), 1u);
  frame no{};
  no.op = proto::op::error;
  no.msg_id = got[0].msg_id;
  no.status = FI_ENOMEM;
  no.req_op = static_cast<uint8_t>(proto::op::msg);
  p.frame_out(no);
  EXPECT_EQ(wait_for(&ctx, &err), -FI_EAVAIL);
  EXPECT_EQ(err.err, FI_ENOMEM);
}

TEST_F(hostile, a_queued_send_is_cancelled_and_one_on_the_wire_is_not) {
  raw_peer p(name);
  p.hello(9);
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(9);
  peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  fi_addr_t to = FI_ADDR_UNSPEC;
  ASSERT_EQ(fi_av_insert(av, &peer, 1, &to, 0, nullptr), 1);
  bool ended = false;
  ASSERT_EQ(read_frames(p, poll(), 1, &ended).size(), 1u);  // its hello back
  // The peer reads nothing more: a large send fills the socket and stays
  // half written; the next one waits behind it.
  std::vector<char> big(32 << 20, 'b');
  fi_context on_wire, queued;
  ASSERT_EQ(fi_send(ep, big.data(), big.size(), nullptr, to, &on_wire), 0);
  poll_for(50);
  ASSERT_EQ(fi_send(ep, "later", 6, nullptr, to, &queued), 0);
  EXPECT_EQ(fi_cancel(&ep->fid, &queued), 0);
  fi_cq_err_entry err{};
  ASSERT_EQ(wait_for(&queued, &err), -FI_EAVAIL);
  EXPECT_EQ(err.err, FI_ECANCELED);
  EXPECT_EQ(fi_cancel(&ep->fid, &on_wire), -FI_ENOENT);
  EXPECT_EQ(fi_cancel(&ep->fid, &queued), -FI_ENOENT);  // gone already
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

// A hello meaning a receive context this endpoint is not (an fi_rx_addr
// index past a scalable endpoint's count, which reached another listener)
// is refused: nothing is delivered to an endpoint the sender did not mean.
TEST_F(hostile, a_hello_for_another_receive_context_is_refused) {
  raw_peer p(name);
  p.hello(9, 3);
  bool ended = false;
  std::vector<frame> got = p.read_until_eof(poll(), &ended);
  EXPECT_TRUE(ended);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].op, proto::op::cm_resp);
  EXPECT_EQ(got[0].status, FI_ECONNREFUSED);
  still_works();
}

// A one-way connection (a scalable endpoint's transmit context) names its
// sender but never carries the endpoint's own sends: with one open from a
// peer named like the endpoint's destination, a send still goes out on a
// connection of its own, which is what the peer's listener sees.
TEST_F(hostile, a_one_way_connection_never_carries_the_endpoints_sends) {
  sockaddr_in at{};
  int l = loopback_listener(at);
  ASSERT_GE(l, 0);
  ASSERT_EQ(::fcntl(l, F_SETFL, O_NONBLOCK), 0);  // accept polls
  fi_addr_t peer = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(fi_av_insert(av, &at, 1, &peer, 0, nullptr), 1);
  raw_peer p(name);
  p.hello(ntohs(at.sin_port), 0, proto::feature_one_way);
  frame_reader r;
  std::vector<frame> got = ::tcp_test::read_frames(p.fd, r, 1, poll());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].op, proto::op::hello) << "served";
  // The one-way connection's sender is named: its message reports it.
  frame m{};
  m.op = proto::op::tagged;
  m.tag = 5;
  m.payload_len = 4;
  p.frame_out(m, "abc", 4);
  char in[4] = {};
  fi_context rc;
  ASSERT_EQ(fi_trecv(ep, in, sizeof in, nullptr, peer, 5, 0, &rc), 0);
  ASSERT_EQ(wait_for(&rc), 1) << "a directed receive matches the one-way sender";
  EXPECT_STREQ(in, "abc");
  // Our send to that peer: a new connection to its listener, not this one.
  fi_context sc;
  ASSERT_EQ(fi_tsend(ep, "xyz", 4, nullptr, peer, 6, &sc), 0);
  int accepted = -1;
  drive_until([&] { return (accepted = ::accept4(l, nullptr, nullptr, SOCK_NONBLOCK)) >= 0; },
              poll());
  EXPECT_GE(accepted, 0) << "the send opened its own connection";
  // Progress runs a while longer; the one-way connection stays silent.
  ssize_t stray = -1;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (stray < 0 && std::chrono::steady_clock::now() < until) {
    poll()();
    char b[64];
    stray = ::recv(p.fd, b, sizeof b, MSG_DONTWAIT);
  }
  EXPECT_LT(stray, 0) << "nothing of ours on the one-way connection";
  if (accepted >= 0) ::close(accepted);
  ::close(l);
}

TEST_F(hostile, a_peer_that_never_speaks_is_dropped_at_the_deadline) {
  SKIP_UNLESS_SHORT_CONN_DEADLINE();
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
