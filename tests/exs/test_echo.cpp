// SPDX-License-Identifier: MIT
// libexs: an echo server (one thread, one queue) and 64 clients at once,
// both socket types, messages of 0 B to 4 MiB checked byte for byte; and a
// peer killed in the middle of a transfer.
#include "helpers.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>

using namespace exstest;

namespace {

const size_t sizes[] = {0, 1, 7, 100, 4096, 65539, 1 << 20, 4 << 20};
constexpr size_t max_size = 4 << 20;
constexpr int clients = 64;

struct echo_conn {
  std::unique_ptr<char[]> buf{new char[max_size]};
  exs_mhandle_t mh;
};

// Echoes everything back until every client has closed.
void echo_server(int l, std::atomic<bool>* ready) {
  exs_qhandle_t q = exs_qcreate(1024);
  std::map<int, std::unique_ptr<echo_conn>> conns;
  int closed = 0, accepted = 0;
  ASSERT_EQ(exs_accept(l, 0, q, nullptr), 0);
  ready->store(true);
  auto post_recv = [&](int fd) {
    echo_conn& c = *conns[fd];
    ASSERT_EQ(exs_recv(fd, c.buf.get(), max_size, 0, c.mh, q, nullptr), 0);
  };
  while (closed < clients) {
    exs_event_t ev = next_event(q, 20000);
    ASSERT_NE(ev.exs_evt_type, EXS_EVT_NONE);
    int fd = ev.exs_evt_fd;
    switch (ev.exs_evt_type) {
      case EXS_EVT_ACCEPT: {
        ASSERT_EQ(ev.exs_evt_errno, 0);
        int nfd = EXS_EVT_NEW_SOCKET(ev);
        auto c = std::make_unique<echo_conn>();
        c->mh = exs_mregister(c->buf.get(), max_size, EXS_ACCESS_READ | EXS_ACCESS_WRITE);
        conns[nfd] = std::move(c);
        post_recv(nfd);
        if (++accepted < clients) {
          ASSERT_EQ(exs_accept(l, 0, q, nullptr), 0);
        }
        break;
      }
      case EXS_EVT_RECV:
        ASSERT_EQ(ev.exs_evt_errno, 0);
        if (ev.exs_evt_flags & EXS_EVT_FLAG_EOF) {
          exs_mderegister(&conns[fd]->mh);
          conns.erase(fd);
          exs_close(fd);
          ++closed;
          break;
        }
        ASSERT_EQ(exs_send(fd, conns[fd]->buf.get(), size_t(ev.exs_evt_bytes), 0, conns[fd]->mh, q,
                           nullptr), 0);
        break;
      case EXS_EVT_SEND:
        ASSERT_EQ(ev.exs_evt_errno, 0);
        post_recv(fd);
        break;
      default:
        FAIL() << "event " << ev.exs_evt_type;
    }
  }
  EXPECT_EQ(exs_qdelete(q), 0);
}

struct client {
  int fd = -1;
  std::vector<size_t> msgs;
  size_t next = 0, got = 0;
  bool sent = false, recvd = false;
  std::unique_ptr<char[]> out, in;
  exs_mhandle_t mo, mi;
};

void run_echo(int type) {
  int l = listener(type, clients);
  std::atomic<bool> ready{false};
  std::thread server(echo_server, l, &ready);
  while (!ready.load()) std::this_thread::yield();
  exs_qhandle_t q = exs_qcreate(1024);
  std::map<int, client> cs;
  sockaddr_in a = loopback(port_of(l));
  for (int i = 0; i < clients; ++i) {
    int fd = exs_socket(AF_INET, type, 0);
    client& c = cs[fd];
    c.fd = fd;
    c.msgs = {sizes[i % 8], sizes[(i * 5 + 3) % 8]};
    if (i % 16 == 0) c.msgs.push_back(max_size);
    c.out.reset(new char[max_size]);
    c.in.reset(new char[max_size]);
    for (size_t k = 0; k < max_size; k += 4096) c.out[k] = char(i + k / 4096);
    for (size_t k = 0; k < 512; ++k) c.out[k] = char(i * 3 + k);
    c.mo = exs_mregister(c.out.get(), max_size, EXS_ACCESS_READ);
    c.mi = exs_mregister(c.in.get(), max_size, EXS_ACCESS_WRITE);
    ASSERT_EQ(exs_connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a, 0, q, nullptr), 0);
  }
  // Each message: receive posted, sent, echoed back whole, checked.
  auto start = [&](client& c) {
    size_t n = c.msgs[c.next];
    c.got = 0;
    c.sent = false;
    c.recvd = type == SOCK_STREAM && n == 0;  // an empty stream send carries nothing
    if (n || type == SOCK_SEQPACKET) {
      ASSERT_EQ(exs_recv(c.fd, c.in.get(), type == SOCK_SEQPACKET ? max_size : n, 0, c.mi, q,
                         nullptr), 0);
    }
    ASSERT_EQ(exs_send(c.fd, c.out.get(), n, 0, c.mo, q, nullptr), 0);
  };
  int done = 0;
  while (done < clients) {
    exs_event_t ev = next_event(q, 20000);
    ASSERT_NE(ev.exs_evt_type, EXS_EVT_NONE);
    ASSERT_EQ(ev.exs_evt_errno, 0) << strerror(ev.exs_evt_errno);
    client& c = cs[ev.exs_evt_fd];
    if (ev.exs_evt_type == EXS_EVT_CONNECT) { start(c); continue; }
    size_t n = c.msgs[c.next];
    if (ev.exs_evt_type == EXS_EVT_SEND) {
      c.sent = true;
    } else {
      ASSERT_EQ(ev.exs_evt_type, EXS_EVT_RECV);
      ASSERT_EQ(ev.exs_evt_flags, 0);
      c.got += size_t(ev.exs_evt_bytes);
      if (type == SOCK_SEQPACKET) {
        ASSERT_EQ(c.got, n) << "client " << c.fd << " message " << c.next << " sent " << c.sent;
      }
      c.recvd = c.got == n;
      if (c.got < n) {
        ASSERT_EQ(exs_recv(c.fd, c.in.get() + c.got, n - c.got, 0, c.mi, q, nullptr), 0);
      }
    }
    if (c.sent && c.recvd) {
      ASSERT_EQ(0, memcmp(c.in.get(), c.out.get(), n)) << n << " bytes";
      if (++c.next < c.msgs.size()) {
        start(c);
      } else {
        exs_mderegister(&c.mo);
        exs_mderegister(&c.mi);
        exs_close(c.fd);
        ++done;
      }
    }
  }
  server.join();
  exs_close(l);
  EXPECT_EQ(exs_qdelete(q), 0);
}

}  // namespace

TEST(exs_echo, sixty_four_seqpacket_clients) { run_echo(SOCK_SEQPACKET); }
TEST(exs_echo, sixty_four_stream_clients) { run_echo(SOCK_STREAM); }

// ---- a peer killed in the middle of a transfer ----

// The child: connects, sends one 256 KiB piece, and waits to be killed.
int exs_test_child(int argc, char** argv) {
  if (argc < 4) return 2;
  int port = std::stoi(argv[2]), type = std::stoi(argv[3]);
  exs_init(EXS_VERSION1);
  exs_qhandle_t q = exs_qcreate(64);
  int fd = exs_socket(AF_INET, type, 0);
  sockaddr_in a = loopback(uint16_t(port));
  static char buf[256 << 10];
  exs_mhandle_t m = exs_mregister(buf, sizeof buf, EXS_ACCESS_READ);
  if (exs_connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a, 0, q, nullptr)) {
    std::fprintf(stderr, "child: exs_connect: %s\n", std::strerror(errno));
    return 3;
  }
  exs_event_t ev;
  int n = exs_qdequeue(q, &ev, 1, nullptr);
  if (n != 1 || ev.exs_evt_errno) {
    std::fprintf(stderr, "child: connect event: %d, type %d, %s\n", n, int(ev.exs_evt_type),
                 std::strerror(ev.exs_evt_errno));
    return 4;
  }
  exs_send(fd, buf, sizeof buf, 0, m, q, nullptr);
  for (;;) pause();
}


// Kills and reaps a child process on every way out of a test.
struct child_guard {
  pid_t pid;
  ~child_guard() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

// A seqpacket sender may send one message per receive its peer posted; the
// receiver grants that credit with a write the moment the receive is posted.
// That write can reach the connecting side's completion queue before
// FI_CONNECTED reaches its event queue (fi_cm(3) orders neither against the
// other), and a credit that early must still count. Made certain here: the
// connecting child is stopped while its connection is accepted and the
// receive posted, so when it runs again the accept and the credit are both
// waiting, and libexs reads completions first.
TEST(exs_seqpacket, a_credit_granted_before_the_connect_event_counts) {
  int l = listener(SOCK_SEQPACKET);
  exs_qhandle_t q = exs_qcreate(8);
  std::string port = std::to_string(port_of(l)), t = std::to_string(SOCK_SEQPACKET);
  pid_t pid = fork();
  if (pid == 0) {
    execl("/proc/self/exe", "exs_tests", "--child", port.c_str(), t.c_str(), nullptr);
    _exit(127);
  }
  ASSERT_GT(pid, 0);
  child_guard guard{pid};
  pollfd p{l, POLLIN, 0};
  ASSERT_EQ(exs_poll(&p, 1, 10000), 1) << "no connection request";
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  ASSERT_EQ(exs_accept(l, 0, q, nullptr), 0);
  exs_event_t ev = next_event(q);
  ASSERT_EQ(ev.exs_evt_type, EXS_EVT_ACCEPT);
  int fd = EXS_EVT_NEW_SOCKET(ev);
  static char in[256 << 10];
  exs_mhandle_t mi = exs_mregister(in, sizeof in, EXS_ACCESS_WRITE);
  ASSERT_EQ(exs_recv(fd, in, sizeof in, 0, mi, q, nullptr), 0);
  usleep(100000);  // the credit is on its way (the child is stopped)
  ASSERT_EQ(kill(pid, SIGCONT), 0);
  ev = next_event(q, 10000);
  EXPECT_EQ(ev.exs_evt_type, EXS_EVT_RECV) << "the child's message never had its credit";
  EXPECT_EQ(ev.exs_evt_bytes, sizeof in);
  exs_close(fd);
  exs_close(l);
  exs_mderegister(&mi);
  EXPECT_EQ(exs_qdelete(q), 0);
}

TEST(exs_peer_death, every_outstanding_operation_fails_and_nothing_hangs) {
  for (int type : {SOCK_SEQPACKET, SOCK_STREAM}) {
    SCOPED_TRACE(type == SOCK_STREAM ? "stream" : "seqpacket");
    int l = listener(type);
    exs_qhandle_t q = exs_qcreate(64);
    // The child's arguments are made before fork: between fork and exec the
    // child may take no lock (libexs's progress thread may hold the
    // library's at the fork, and the child would wait for it forever).
    std::string port = std::to_string(port_of(l)), t = std::to_string(type);
    pid_t pid = fork();
    if (pid == 0) {
      execl("/proc/self/exe", "exs_tests", "--child", port.c_str(), t.c_str(), nullptr);
      _exit(127);
    }
    ASSERT_GT(pid, 0);
    child_guard guard{pid};  // a failed assertion below still ends the child
    ASSERT_EQ(exs_accept(l, 0, q, nullptr), 0);
    exs_event_t ev = next_event(q, 10000);
    ASSERT_EQ(ev.exs_evt_type, EXS_EVT_ACCEPT);
    ASSERT_EQ(ev.exs_evt_errno, 0);
    int fd = EXS_EVT_NEW_SOCKET(ev);
    static char in[4][256 << 10];
    static char out[2 << 20];  // more than a stream peer's window (16 x 64 KiB)
    exs_mhandle_t mi = exs_mregister(in, sizeof in, EXS_ACCESS_WRITE);
    exs_mhandle_t mo = exs_mregister(out, sizeof out, EXS_ACCESS_READ);
    // Data flows: the child's piece arrives whole...
    for (size_t got = 0; got < sizeof in[0]; got += size_t(ev.exs_evt_bytes)) {
      ASSERT_EQ(exs_recv(fd, in[0] + got, sizeof in[0] - got, 0, mi, q, nullptr), 0);
      ev = next_event(q, 10000);
      ASSERT_EQ(ev.exs_evt_type, EXS_EVT_RECV);
      ASSERT_EQ(ev.exs_evt_errno, 0);
    }
    // ... receives and sends are outstanding (the child posts no receives,
    // so the sends wait for credits) when the child dies.
    int outstanding = 0;
    for (int i = 1; i < 4; ++i, ++outstanding)
      ASSERT_EQ(exs_recv(fd, in[i], sizeof in[i], 0, mi, q, nullptr), 0);
    for (int i = 0; i < 3; ++i, ++outstanding)
      ASSERT_EQ(exs_send(fd, out, sizeof out, 0, mo, q, nullptr), 0);
    {
      timespec t{0, 50000000L};
      exs_event_t early;
      EXPECT_EQ(exs_qdequeue(q, &early, 1, &t), 0)
          << "event " << early.exs_evt_type << " errno " << early.exs_evt_errno << " bytes "
          << early.exs_evt_bytes;
    }
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    guard.pid = -1;
    int recvs = 0, sends = 0;
    for (int i = 0; i < outstanding; ++i) {
      ev = next_event(q, 5000);
      ASSERT_NE(ev.exs_evt_type, EXS_EVT_NONE);
      EXPECT_EQ(ev.exs_evt_errno, ECONNRESET) << strerror(ev.exs_evt_errno);
      (ev.exs_evt_type == EXS_EVT_RECV ? recvs : sends)++;
    }
    EXPECT_EQ(recvs, 3);
    EXPECT_EQ(sends, 3);
    EXPECT_TRUE(quiet(q, 20));
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(exs_poll(&p, 1, 0), 1);
    EXPECT_TRUE(p.revents & POLLHUP);
    exs_close(fd);
    exs_close(l);
    exs_mderegister(&mi);
    exs_mderegister(&mo);
    EXPECT_EQ(exs_qdelete(q), 0);
  }
}
