// SPDX-License-Identifier: MIT
// libexs: bad input to every call gets its documented errno, never a crash.
#include "helpers.hpp"

#include <unistd.h>

using namespace exstest;

namespace {
const timespec zero{0, 0};
}

TEST(exs_errors, bad_descriptors) {
  int fd = dup(0);  // a descriptor of the process that is no exs socket
  char b[8];
  sockaddr_in a = loopback();
  socklen_t n = sizeof a;
  exs_qhandle_t q = exs_qcreate(4);
  for (int bad : {-1, fd, 99999}) {
    errno = 0;
    EXPECT_EQ(exs_bind(bad, reinterpret_cast<sockaddr*>(&a), sizeof a), -1);
    EXPECT_EQ(errno, EBADF);
    EXPECT_EQ(exs_listen(bad, 1), -1);
    EXPECT_EQ(errno, EBADF);
    EXPECT_EQ(exs_accept(bad, 0, q, nullptr), -1);
    EXPECT_EQ(errno, EBADF);
    EXPECT_EQ(exs_connect(bad, reinterpret_cast<sockaddr*>(&a), sizeof a, 0, q, nullptr), -1);
    EXPECT_EQ(errno, EBADF);
    EXPECT_EQ(exs_send(bad, b, 1, 0, 1, q, nullptr), -1);
    EXPECT_EQ(errno, EBADF);
    EXPECT_EQ(exs_recv(bad, b, 1, 0, 1, q, nullptr), -1);
    EXPECT_EQ(errno, EBADF);
    EXPECT_EQ(exs_shutdown(bad, SHUT_RDWR), -1);
    EXPECT_EQ(errno, EBADF);
    EXPECT_EQ(exs_getsockname(bad, reinterpret_cast<sockaddr*>(&a), &n), -1);
    EXPECT_EQ(errno, EBADF);
    EXPECT_EQ(exs_getpeername(bad, reinterpret_cast<sockaddr*>(&a), &n), -1);
    EXPECT_EQ(errno, EBADF);
    EXPECT_EQ(exs_cancel(bad, nullptr), -1);
    EXPECT_EQ(errno, EBADF);
    int v = 0;
    socklen_t vl = sizeof v;
    EXPECT_EQ(exs_getsockopt(bad, SOL_SOCKET, SO_TYPE, &v, &vl), -1);
    EXPECT_EQ(errno, EBADF);
    EXPECT_EQ(exs_setsockopt(bad, EXS_SOL_EXS, EXS_SO_PROVIDER, "tcp", 3), -1);
    EXPECT_EQ(errno, EBADF);
    EXPECT_EQ(exs_close(bad), -1);
    EXPECT_EQ(errno, EBADF);
  }
  close(fd);
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(exs_poll(&p, 1, 0), 1);
  EXPECT_EQ(p.revents, POLLNVAL);
  EXPECT_EQ(exs_qdelete(q), 0);
}

TEST(exs_errors, queues) {
  exs_event_t ev;
  errno = 0;
  EXPECT_EQ(exs_qcreate(0), EXS_QHANDLE_INVALID);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(exs_qdequeue(12345, &ev, 1, &zero), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(exs_qdelete(12345), -1);
  EXPECT_EQ(errno, EINVAL);
  exs_qhandle_t q = exs_qcreate(2);
  EXPECT_EQ(exs_qdequeue(q, nullptr, 1, &zero), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(exs_qdequeue(q, &ev, 0, &zero), -1);
  EXPECT_EQ(errno, EINVAL);
  timespec badt{0, 2000000000L};
  EXPECT_EQ(exs_qdequeue(q, &ev, 1, &badt), -1);
  EXPECT_EQ(errno, EINVAL);
  // Non-blocking and timed dequeues of an empty queue return 0.
  EXPECT_EQ(exs_qdequeue(q, &ev, 1, &zero), 0);
  timespec ms20{0, 20000000L};
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(exs_qdequeue(q, &ev, 1, &ms20), 0);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(19));
  EXPECT_EQ(exs_qdelete(q), 0);
  EXPECT_EQ(exs_qdelete(q), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST(exs_errors, memory) {
  char buf[64];
  errno = 0;
  EXPECT_EQ(exs_mregister(nullptr, 8, EXS_ACCESS_READ), EXS_MHANDLE_INVALID);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(exs_mregister(buf, 0, EXS_ACCESS_READ), EXS_MHANDLE_INVALID);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(exs_mregister(buf, 8, 0), EXS_MHANDLE_INVALID);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(exs_mregister(buf, 8, 0x100), EXS_MHANDLE_INVALID);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(exs_mderegister(nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  exs_mhandle_t bad = 987654;
  EXPECT_EQ(exs_mderegister(&bad), -1);
  EXPECT_EQ(errno, EINVAL);
  exs_mhandle_t m = exs_mregister(buf, sizeof buf, EXS_ACCESS_READ);
  EXPECT_NE(m, EXS_MHANDLE_INVALID);
  EXPECT_EQ(exs_mderegister(&m), 0);
  exs_mhandle_t again = 1;  // stale handles are refused
  (void)again;
}

class exs_connected : public testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    q = exs_qcreate(64);
    l = listener(GetParam());
    p = connect_pair(l, GetParam(), q);
    m = exs_mregister(buf, sizeof buf, EXS_ACCESS_READ | EXS_ACCESS_WRITE);
    ro = exs_mregister(rbuf, sizeof rbuf, EXS_ACCESS_READ);
  }
  void TearDown() override {
    exs_close(p.client);
    exs_close(p.server);
    exs_close(l);
    exs_event_t ev;
    while (exs_qdequeue(q, &ev, 1, &zero) == 1) {}
    EXPECT_EQ(exs_mderegister(&m), 0);
    EXPECT_EQ(exs_mderegister(&ro), 0);
    EXPECT_EQ(exs_qdelete(q), 0);
  }
  exs_qhandle_t q;
  int l;
  pair_t p;
  char buf[4096];
  char rbuf[64];
  exs_mhandle_t m, ro;
};

TEST_P(exs_connected, unregistered_memory_and_bad_handles) {
  char other[16] = {};
  errno = 0;
  // Outside the region, and a handle that names nothing.
  EXPECT_EQ(exs_send(p.client, other, sizeof other, 0, m, q, nullptr), -1);
  EXPECT_EQ(errno, EFAULT);
  EXPECT_EQ(exs_send(p.client, buf + 4000, 200, 0, m, q, nullptr), -1);
  EXPECT_EQ(errno, EFAULT);
  EXPECT_EQ(exs_send(p.client, buf, 8, 0, 777777, q, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(exs_recv(p.server, other, sizeof other, 0, m, q, nullptr), -1);
  EXPECT_EQ(errno, EFAULT);
  // A read-only region cannot be received into.
  EXPECT_EQ(exs_recv(p.server, rbuf, sizeof rbuf, 0, ro, q, nullptr), -1);
  EXPECT_EQ(errno, EFAULT);
  // A bad queue, bad flags.
  EXPECT_EQ(exs_send(p.client, buf, 8, 0, m, 424242, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(exs_send(p.client, buf, 8, MSG_OOB, m, q, nullptr), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
  iovec v[EXS_IOV_MAX + 1];
  exs_mhandle_t mh[EXS_IOV_MAX + 1];
  for (auto& x : v) x = {buf, 1};
  for (auto& x : mh) x = m;
  EXPECT_EQ(exs_sendv(p.client, v, EXS_IOV_MAX + 1, 0, mh, q, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(exs_recvv(p.server, v, -1, 0, mh, q, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_TRUE(quiet(q, 20));
}

TEST_P(exs_connected, zero_byte_receive_buffer) {
  errno = 0;
  EXPECT_EQ(exs_recv(p.server, buf, 0, 0, m, q, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST_P(exs_connected, memory_in_use_cannot_be_deregistered) {
  ASSERT_EQ(exs_recv(p.server, buf, 64, 0, m, q, nullptr), 0);
  exs_mhandle_t copy = m;
  errno = 0;
  EXPECT_EQ(exs_mderegister(&copy), -1);
  EXPECT_EQ(errno, EBUSY);
  EXPECT_EQ(exs_cancel(p.server, nullptr), 0);
  exs_event_t ev = next_event(q);
  EXPECT_EQ(ev.exs_evt_errno, ECANCELED);
}

TEST_P(exs_connected, queue_deleted_with_operations_outstanding) {
  exs_qhandle_t q2 = exs_qcreate(4);
  int ctx;
  ASSERT_EQ(exs_recv(p.server, buf, 64, 0, m, q2, &ctx), 0);
  errno = 0;
  EXPECT_EQ(exs_qdelete(q2), -1);
  EXPECT_EQ(errno, EBUSY);
  EXPECT_EQ(exs_cancel(p.server, &ctx), 0);
  exs_event_t ev = next_event(q2);
  EXPECT_EQ(ev.exs_evt_errno, ECANCELED);
  EXPECT_EQ(ev.exs_evt_context, &ctx);
  EXPECT_EQ(exs_qdelete(q2), 0);
  // A deleted queue is no queue.
  EXPECT_EQ(exs_recv(p.server, buf, 64, 0, m, q2, &ctx), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST_P(exs_connected, a_full_queue_refuses_more_operations) {
  exs_qhandle_t q2 = exs_qcreate(2);
  ASSERT_EQ(exs_recv(p.server, buf, 64, 0, m, q2, nullptr), 0);
  ASSERT_EQ(exs_recv(p.server, buf + 64, 64, 0, m, q2, nullptr), 0);
  errno = 0;
  EXPECT_EQ(exs_recv(p.server, buf + 128, 64, 0, m, q2, nullptr), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(exs_shutdown(p.server, SHUT_RD), 0);
  EXPECT_EQ(next_event(q2).exs_evt_errno, ESHUTDOWN);
  EXPECT_EQ(next_event(q2).exs_evt_errno, ESHUTDOWN);
  EXPECT_EQ(exs_qdelete(q2), 0);
}

TEST_P(exs_connected, cancel_of_nothing) {
  int ctx;
  errno = 0;
  EXPECT_EQ(exs_cancel(p.client, &ctx), -1);
  EXPECT_EQ(errno, ENOENT);
}

TEST_P(exs_connected, bad_shutdown_and_options) {
  errno = 0;
  EXPECT_EQ(exs_shutdown(p.client, 42), -1);
  EXPECT_EQ(errno, EINVAL);
  int v = 0;
  socklen_t n = sizeof v;
  EXPECT_EQ(exs_getsockopt(p.client, 12345, 1, &v, &n), -1);
  EXPECT_EQ(errno, ENOPROTOOPT);
  EXPECT_EQ(exs_getsockopt(p.client, EXS_SOL_EXS, 999, &v, &n), -1);
  EXPECT_EQ(errno, ENOPROTOOPT);
  EXPECT_EQ(exs_setsockopt(p.client, EXS_SOL_EXS, EXS_SO_PROVIDER, "udp", 3), -1);
  EXPECT_EQ(errno, EISCONN);
  char small[2];
  n = sizeof small;
  EXPECT_EQ(exs_getsockopt(p.client, EXS_SOL_EXS, EXS_SO_PROVIDER, small, &n), -1);
  EXPECT_EQ(errno, ERANGE);
  sockaddr_in a = loopback();
  EXPECT_EQ(exs_connect(p.client, reinterpret_cast<sockaddr*>(&a), sizeof a, 0, q, nullptr), -1);
  EXPECT_EQ(errno, EISCONN);
  EXPECT_EQ(exs_listen(p.client, 1), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(exs_accept(p.client, 0, q, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
}

INSTANTIATE_TEST_SUITE_P(types, exs_connected, testing::Values(SOCK_SEQPACKET, SOCK_STREAM),
                         [](const auto& i) {
                           return std::string(i.param == SOCK_STREAM ? "stream" : "seqpacket");
                         });

TEST(exs_errors, unconnected_sockets) {
  exs_qhandle_t q = exs_qcreate(4);
  char buf[64];
  exs_mhandle_t m = exs_mregister(buf, sizeof buf, EXS_ACCESS_READ | EXS_ACCESS_WRITE);
  for (int type : {SOCK_SEQPACKET, SOCK_STREAM}) {
    int s = exs_socket(AF_INET, type, 0);
    errno = 0;
    EXPECT_EQ(exs_send(s, buf, 8, 0, m, q, nullptr), -1);
    EXPECT_EQ(errno, ENOTCONN);
    EXPECT_EQ(exs_recv(s, buf, 8, 0, m, q, nullptr), -1);
    EXPECT_EQ(errno, ENOTCONN);
    EXPECT_EQ(exs_shutdown(s, SHUT_RDWR), -1);
    EXPECT_EQ(errno, ENOTCONN);
    EXPECT_EQ(exs_accept(s, 0, q, nullptr), -1);
    EXPECT_EQ(errno, EINVAL);
    sockaddr_in a{};
    socklen_t n = sizeof a;
    EXPECT_EQ(exs_getpeername(s, reinterpret_cast<sockaddr*>(&a), &n), -1);
    EXPECT_EQ(errno, ENOTCONN);
    sockaddr_in6 six{};
    six.sin6_family = AF_INET6;
    EXPECT_EQ(exs_bind(s, reinterpret_cast<sockaddr*>(&six), sizeof six), -1);
    EXPECT_EQ(errno, EAFNOSUPPORT);
    EXPECT_EQ(exs_bind(s, nullptr, 16), -1);
    EXPECT_EQ(errno, EFAULT);
    sockaddr_in lo = loopback();
    EXPECT_EQ(exs_bind(s, reinterpret_cast<sockaddr*>(&lo), 4), -1);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(exs_close(s), 0);
  }
  EXPECT_EQ(exs_mderegister(&m), 0);
  EXPECT_EQ(exs_qdelete(q), 0);
}

TEST(exs_provider, chosen_by_option_or_environment_and_reported) {
  int s = exs_socket(AF_INET, SOCK_SEQPACKET, 0);
  char name[64];
  socklen_t n = sizeof name;
  ASSERT_EQ(exs_getsockopt(s, EXS_SOL_EXS, EXS_SO_PROVIDER, name, &n), 0);
  EXPECT_STREQ(name, "tcp");  // from EXS_PROVIDER
  n = sizeof name;
  EXPECT_EQ(exs_getsockopt(s, EXS_SOL_EXS, EXS_SO_FABRIC, name, &n), -1);
  EXPECT_EQ(errno, ENOTCONN);
  // udp offers no FI_EP_MSG: binding on it fails, and says so.
  ASSERT_EQ(exs_setsockopt(s, EXS_SOL_EXS, EXS_SO_PROVIDER, "udp", 3), 0);
  sockaddr_in a = loopback();
  errno = 0;
  EXPECT_EQ(exs_bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), -1);
  EXPECT_EQ(errno, ENODEV);
  ASSERT_EQ(exs_setsockopt(s, EXS_SOL_EXS, EXS_SO_PROVIDER, "tcp", 4), 0);
  ASSERT_EQ(exs_bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  n = sizeof name;
  ASSERT_EQ(exs_getsockopt(s, EXS_SOL_EXS, EXS_SO_PROVIDER, name, &n), 0);
  EXPECT_STREQ(name, "tcp");
  EXPECT_EQ(n, 4u);
  n = sizeof name;
  ASSERT_EQ(exs_getsockopt(s, EXS_SOL_EXS, EXS_SO_FABRIC, name, &n), 0);
  EXPECT_GT(strlen(name), 0u);
  exs_close(s);
  // The environment's choice, when no option is set.
  setenv("EXS_PROVIDER", "no-such-provider", 1);
  s = exs_socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(exs_bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), -1);
  EXPECT_EQ(errno, ENODEV);
  setenv("EXS_PROVIDER", "tcp", 1);
  exs_close(s);
}
