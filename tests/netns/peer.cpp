// SPDX-License-Identifier: MIT
// weft — one of two hosts talking over real TCP (run.sh puts each in a
// network namespace of its own, joined by a veth pair): messages from 1 byte
// to 1 MiB echoed and checked, fi_write / fi_read of a registered window,
// and fi_fetch_atomic FI_SUM on a counter in it, over the tcp provider's
// FI_EP_RDM or FI_EP_MSG endpoints. Public API only.
//
//   weft_netns_peer server rdm|msg <own address> <port> <ready file>
//   weft_netns_peer client rdm|msg <own address> <port> <server address>
//
// The server binds <own address>:<port> and creates <ready file> once it
// listens. Both pass their own address as node with FI_SOURCE, so the
// endpoint binds the veth's address (FI_TCP_IFACE, set by run.sh, must
// agree). Exit status 0 when everything arrived intact, else 1 with the
// reason on stderr.
//
// WEFT_NETNS_PROV names another provider (udp_netem.sh: udp, over a veth
// that loses, reorders, duplicates and delays). WEFT_NETNS_BIG adds 0-byte
// and 16 MiB messages to the echoes. After the echoes the client streams
// stream_count sequenced messages without waiting: the server takes each
// once and in order, and no message more comes.
//
// A host that crashes and comes back (FI_EP_RDM), steps told through files
// in <dir>:
//
//   weft_netns_peer crash-a|crash-b|crash-b2 rdm <own address> <own port>
//                   <peer address> <peer port> <dir>
//
// crash-a sends to crash-b (its own connection to it), then waits for a
// message from crash-b2 — the same address after run.sh cut the link, killed
// crash-b and made a new namespace, so no end of stream ever reached
// crash-a — and answers it. crash-b2 speaks first and must get the answer.
//
// A host that goes silent (FI_EP_RDM, FI_TCP_KEEPALIVE set small by run.sh):
//
//   weft_netns_peer silent-a|silent-b rdm <own address> <own port>
//                   <peer address> <peer port> <dir>
//
// silent-a pings silent-b, waits until run.sh has cut the link (the process
// behind it stays alive: no end of stream, no reset), then sends with
// FI_DELIVERY_COMPLETE: the send must fail (the connection is given up by
// keepalive / TCP_USER_TIMEOUT) within 30 s instead of waiting forever.
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

[[noreturn]] void die(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "weft_netns_peer: ");
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
  std::exit(1);
}

void check(int rc, const char* what) {
  if (rc) die("%s: %s (%d)", what, fi_strerror(rc < 0 ? -rc : rc), rc);
}

// The window the server registers: what the client writes, what the server
// put there for the client to read, and the counter the client adds to.
constexpr size_t write_off = 0, write_len = 64 << 10;
constexpr size_t read_off = 128 << 10, read_len = 64 << 10;
constexpr size_t counter_off = 256 << 10;
constexpr size_t window_len = counter_off + 64;
constexpr uint64_t counter_start = 1000;
constexpr int fetch_adds = 100;
const char* prov_name() {
  const char* p = std::getenv("WEFT_NETNS_PROV");
  return p && *p ? p : "tcp";
}
bool big() { return std::getenv("WEFT_NETNS_BIG") != nullptr; }
std::vector<size_t> echo_sizes() {
  if (big()) return {0, 1, 100, 4096, 65536, 1 << 20, 16 << 20};
  return {1, 100, 4096, 65536, 1 << 20};
}
size_t max_echo() { return big() ? 16 << 20 : 1 << 20; }
constexpr int stream_count = 200;
constexpr size_t stream_len = 64;
// Every 25th message is 100 KiB: the ones queued behind and before it make
// writes that the sender cuts at its 256 KiB bound (conn::write_max) in the
// middle of a message. 812 KiB in all, within the 1 MiB buffers.
size_t stream_msg_len(int k) { return k % 25 == 7 ? size_t(100) << 10 : stream_len; }
size_t stream_off(int k) {
  size_t off = 0;
  for (int i = 0; i < k; ++i) off += stream_msg_len(i);
  return off;
}

char pattern(size_t i, unsigned seed) { return static_cast<char>(i * 131 + seed * 7 + (i >> 12)); }

// Control messages (the first bytes of every message that is not an echo).
enum kind : uint32_t { hello = 1, window = 2, done = 3, verdict = 4 };
struct ctl {
  uint32_t kind;
  uint32_t ok;
  uint64_t key, base, len;  // window
  uint64_t counter;         // done: the value the client expects
  uint8_t name[64];         // hello: the client's address (FI_EP_RDM)
  uint64_t name_len;
};

struct host {
  bool rdm = true;
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_eq* eq = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_pep* pep = nullptr;
  fid_ep* ep = nullptr;
  fi_addr_t peer = 0;  // FI_EP_RDM: the other host; FI_EP_MSG: ignored
  uint64_t mr_mode = 0;

  // fi_getinfo for the provider (prov_name) at `node` (our own address),
  // `service`.
  void getinfo(const char* type, const char* node, const char* service) {
    rdm = std::strcmp(type, "rdm") == 0;
    if (!rdm && std::strcmp(type, "msg") != 0) die("endpoint type %s: rdm or msg", type);
    fi_info* hints = fi_allocinfo();
    hints->caps = FI_MSG | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ |
                  FI_REMOTE_WRITE;
    hints->ep_attr->type = rdm ? FI_EP_RDM : FI_EP_MSG;
    hints->addr_format = FI_SOCKADDR_IN;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    hints->fabric_attr->prov_name = strdup(prov_name());
    check(fi_getinfo(FI_VERSION(1, 17), node, service, FI_SOURCE, hints, &info),
          "fi_getinfo (is FI_<PROV>_IFACE the interface of this address?)");
    fi_freeinfo(hints);
    mr_mode = info->domain_attr->mr_mode;
    check(fi_fabric(info->fabric_attr, &fabric, nullptr), "fi_fabric");
    check(fi_domain(fabric, info, &domain, nullptr), "fi_domain");
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_DATA;
    ca.wait_obj = FI_WAIT_UNSPEC;
    check(fi_cq_open(domain, &ca, &cq, nullptr), "fi_cq_open");
    if (rdm) {
      fi_av_attr aa{};
      aa.type = FI_AV_TABLE;
      check(fi_av_open(domain, &aa, &av, nullptr), "fi_av_open");
    } else {
      fi_eq_attr ea{};
      ea.wait_obj = FI_WAIT_UNSPEC;
      check(fi_eq_open(fabric, &ea, &eq, nullptr), "fi_eq_open");
    }
  }
  void open_ep(fi_info* i) {
    check(fi_endpoint(domain, i, &ep, nullptr), "fi_endpoint");
    check(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind cq");
    if (av) check(fi_ep_bind(ep, &av->fid, 0), "fi_ep_bind av");
    if (eq) check(fi_ep_bind(ep, &eq->fid, 0), "fi_ep_bind eq");
    check(fi_enable(ep), "fi_enable");
  }
  // Waits for one connection-manager event of `want` (FI_EP_MSG).
  fi_info* cm_event(uint32_t want) {
    alignas(fi_eq_cm_entry) char buf[sizeof(fi_eq_cm_entry) + 256];
    uint32_t event = 0;
    ssize_t n = fi_eq_sread(eq, &event, buf, sizeof buf, 20000, 0);
    if (n == -FI_EAVAIL) {
      fi_eq_err_entry e{};
      fi_eq_readerr(eq, &e, 0);
      die("connection event %u failed: %s", want, fi_strerror(e.err));
    }
    if (n < 0) die("no connection event %u in 20 s: %s", want, fi_strerror(int(-n)));
    if (event != want) die("connection event %u, not %u", event, want);
    return reinterpret_cast<fi_eq_cm_entry*>(buf)->info;
  }
  // A registered buffer: its descriptor (FI_MR_LOCAL), key and base address.
  struct region {
    fid_mr* mr = nullptr;
    void* desc = nullptr;
    uint64_t key = 0, base = 0;
  };
  region reg(void* buf, size_t len, uint64_t access, uint64_t key) {
    region r;
    check(fi_mr_reg(domain, buf, len, access, 0, key, 0, &r.mr, nullptr), "fi_mr_reg");
    if (mr_mode & FI_MR_ENDPOINT) {
      check(fi_mr_bind(r.mr, &ep->fid, 0), "fi_mr_bind");
      check(fi_mr_enable(r.mr), "fi_mr_enable");
    }
    r.desc = fi_mr_desc(r.mr);
    r.key = fi_mr_key(r.mr);
    r.base = (mr_mode & FI_MR_VIRT_ADDR) ? reinterpret_cast<uint64_t>(buf) : 0;
    return r;
  }
  // Waits for the completion of `ctx` (the only one outstanding).
  void wait(void* ctx, const char* what) {
    auto deadline = clock_type::now() + std::chrono::seconds(20);
    for (;;) {
      fi_cq_data_entry e;
      ssize_t n = fi_cq_sread(cq, &e, 1, nullptr, 100);
      if (n == 1) {
        if (e.op_context != ctx) die("%s: a completion for something else", what);
        return;
      }
      if (n == -FI_EAVAIL) {
        fi_cq_err_entry ee{};
        fi_cq_readerr(cq, &ee, 0);
        die("%s failed: %s", what, fi_strerror(ee.err));
      }
      if (n != -FI_EAGAIN) die("%s: fi_cq_sread: %s", what, fi_strerror(int(-n)));
      if (clock_type::now() > deadline) die("%s: no completion in 20 s", what);
    }
  }
  template <class F>
  void post(F op, const char* what) {
    ssize_t r;
    auto deadline = clock_type::now() + std::chrono::seconds(20);
    while ((r = op()) == -FI_EAGAIN && clock_type::now() < deadline) {
      fi_cq_data_entry e;
      fi_cq_read(cq, &e, 0);
    }
    if (r) die("%s: %s", what, fi_strerror(int(-r)));
  }
  void send(const void* buf, size_t len, void* desc, const char* what) {
    fi_context2 ctx;
    post([&] { return fi_send(ep, buf, len, desc, peer, &ctx); }, what);
    wait(&ctx, what);
  }
  void recv(void* buf, size_t len, void* desc, fi_context2* ctx, const char* what) {
    post([&] { return fi_recv(ep, buf, len, desc, FI_ADDR_UNSPEC, ctx); }, what);
  }
  ~host() {
    for (fid* f : {ep ? &ep->fid : nullptr, pep ? &pep->fid : nullptr, av ? &av->fid : nullptr,
                   cq ? &cq->fid : nullptr, eq ? &eq->fid : nullptr,
                   domain ? &domain->fid : nullptr, fabric ? &fabric->fid : nullptr})
      if (f) fi_close(f);
    fi_freeinfo(info);
  }
};

// FI_TCP_IFACE (FI_UDP_IFACE) names the veth: fi_getinfo without a node
// offers its address only (not the loopback's).
void check_interface_choice(const char* addr) {
  fi_info* hints = fi_allocinfo();
  hints->caps = FI_MSG;
  hints->ep_attr->type = FI_EP_RDM;
  hints->addr_format = FI_SOCKADDR_IN;
  hints->fabric_attr->prov_name = strdup(prov_name());
  fi_info* info = nullptr;
  check(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info), "fi_getinfo (no node)");
  for (fi_info* i = info; i; i = i->next) {
    auto* sin = static_cast<const sockaddr_in*>(i->src_addr);
    char text[INET_ADDRSTRLEN] = "none";
    if (sin) inet_ntop(AF_INET, &sin->sin_addr, text, sizeof text);
    if (!sin || std::strcmp(text, addr) != 0)
      die("fi_getinfo offers %s (domain %s), not only %s", text, i->domain_attr->name, addr);
  }
  fi_freeinfo(info);
  fi_freeinfo(hints);
}

void check_own_address(host& h, const char* addr) {
  sockaddr_in me{};
  size_t len = sizeof me;
  check(fi_getname(&h.ep->fid, &me, &len), "fi_getname");
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &me.sin_addr, text, sizeof text);
  if (std::strcmp(text, addr) != 0) die("the endpoint is bound to %s, not %s", text, addr);
}

// Waits for `n` completions of contexts in [first, first + n): each once.
// Returns them in the order they came.
std::vector<int> take_completions(host& h, fi_context2* first, int n, const char* what) {
  std::vector<int> order;
  auto deadline = clock_type::now() + std::chrono::seconds(60);
  while (int(order.size()) < n) {
    fi_cq_data_entry e;
    ssize_t r = fi_cq_sread(h.cq, &e, 1, nullptr, 100);
    if (r == 1) {
      auto* c = static_cast<fi_context2*>(e.op_context);
      if (c < first || c >= first + n) die("%s: a completion for something else", what);
      order.push_back(int(c - first));
    } else if (r == -FI_EAVAIL) {
      fi_cq_err_entry ee{};
      fi_cq_readerr(h.cq, &ee, 0);
      die("%s failed: %s", what, fi_strerror(ee.err));
    } else if (r != -FI_EAGAIN) {
      die("%s: fi_cq_sread: %s", what, fi_strerror(int(-r)));
    }
    if (clock_type::now() > deadline)
      die("%s: %zu of %d completions in 60 s", what, order.size(), n);
  }
  return order;
}

// The client's stream (after the echoes): stream_count messages of
// stream_msg_len bytes, each carrying its number, all posted before any is
// waited for.
void send_stream(host& h, char* buf, void* desc) {
  std::vector<fi_context2> ctx(stream_count);
  for (int k = 0; k < stream_count; ++k) {
    char* b = buf + stream_off(k);
    const size_t len = stream_msg_len(k);
    for (size_t i = 0; i < len; ++i) b[i] = pattern(i, 100 + unsigned(k));
    std::memcpy(b, &k, sizeof k);
    h.post([&] { return fi_send(h.ep, b, len, desc, h.peer, &ctx[size_t(k)]); },
           "stream send");
  }
  take_completions(h, ctx.data(), stream_count, "stream sends");
  // Nothing more is sent until the server has looked for a message more.
  ctl c{};
  fi_context2 rctx;
  h.recv(&c, sizeof c, nullptr, &rctx, "receive stream verdict");
  h.wait(&rctx, "stream verdict");
  if (c.kind != verdict || !c.ok) die("the server found the stream wrong");
}

// The server's side: a receive posted for each message and one more. Each
// message lands once, in order (receives match in the order posted), byte
// for byte; the extra one gets nothing (a message delivered twice would
// fill it) and is cancelled.
void take_stream(host& h, char* buf, void* desc) {
  std::vector<fi_context2> ctx(stream_count + 1);
  for (int k = 0; k <= stream_count; ++k)
    h.recv(buf + stream_off(k), stream_msg_len(k), desc, &ctx[size_t(k)], "stream receive");
  std::vector<int> order = take_completions(h, ctx.data(), stream_count, "stream receives");
  for (int k = 0; k < stream_count; ++k) {
    if (order[size_t(k)] != k) die("stream: receive %d completed %dth", order[size_t(k)], k);
    const char* b = buf + stream_off(k);
    int seq = -1;
    std::memcpy(&seq, b, sizeof seq);
    if (seq != k) die("stream: receive %d holds message %d (out of order or repeated)", k, seq);
    for (size_t i = sizeof seq; i < stream_msg_len(k); ++i)
      if (b[i] != pattern(i, 100 + unsigned(k))) die("stream: message %d, byte %zu differs", k, i);
  }
  fi_cq_data_entry e;
  ssize_t r = fi_cq_sread(h.cq, &e, 1, nullptr, 500);
  if (r == 1) die("stream: a message more arrived (a duplicate delivered)");
  check(int(fi_cancel(&h.ep->fid, &ctx[stream_count])), "fi_cancel of the extra receive");
  auto deadline = clock_type::now() + std::chrono::seconds(10);
  for (;;) {
    r = fi_cq_sread(h.cq, &e, 1, nullptr, 100);
    if (r == -FI_EAVAIL) {
      fi_cq_err_entry ee{};
      fi_cq_readerr(h.cq, &ee, 0);
      if (ee.op_context == &ctx[stream_count] && ee.err == FI_ECANCELED) break;
      die("stream: the extra receive ended with %s", fi_strerror(ee.err));
    }
    if (r == 1) die("stream: a message more arrived (a duplicate delivered)");
    if (clock_type::now() > deadline) die("stream: the extra receive was not cancelled");
  }
  ctl v{};
  v.kind = verdict;
  v.ok = 1;
  h.send(&v, sizeof v, nullptr, "send stream verdict");
}

int server(host& h, const char* addr, const char* port, const char* ready) {
  std::vector<char> win(window_len, 0);
  for (size_t i = 0; i < read_len; ++i) win[read_off + i] = pattern(i, 2);
  std::memcpy(win.data() + counter_off, &counter_start, sizeof counter_start);
  if (h.rdm) {
    h.open_ep(h.info);
    check_own_address(h, addr);
  } else {
    check(fi_passive_ep(h.fabric, h.info, &h.pep, nullptr), "fi_passive_ep");
    check(fi_pep_bind(h.pep, &h.eq->fid, 0), "fi_pep_bind");
    check(fi_listen(h.pep), "fi_listen");
  }
  int fd = ::open(ready, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) die("cannot create %s", ready);
  ::close(fd);
  if (!h.rdm) {
    fi_info* req = h.cm_event(FI_CONNREQ);
    h.open_ep(req);
    check(fi_accept(h.ep, nullptr, 0), "fi_accept");
    fi_freeinfo(req);
    h.cm_event(FI_CONNECTED);
    check_own_address(h, addr);
  }
  (void)port;
  host::region wr = h.reg(win.data(), win.size(), FI_REMOTE_READ | FI_REMOTE_WRITE, 7);
  std::vector<char> buf(max_echo());
  host::region br = h.reg(buf.data(), buf.size(), FI_SEND | FI_RECV, 8);
  fi_context2 rctx;
  ctl c{};
  h.recv(&c, sizeof c, nullptr, &rctx, "receive hello");
  h.wait(&rctx, "hello");
  if (c.kind != hello) die("expected hello, got %u", c.kind);
  if (h.rdm) {
    if (fi_av_insert(h.av, c.name, 1, &h.peer, 0, nullptr) != 1) die("fi_av_insert of the client");
  }
  ctl w{};
  w.kind = window;
  w.key = wr.key;
  w.base = wr.base;
  w.len = win.size();
  h.send(&w, sizeof w, nullptr, "send window");
  unsigned seed = 0;
  for (size_t size : echo_sizes()) {
    h.recv(buf.data(), buf.size(), br.desc, &rctx, "receive echo");
    h.wait(&rctx, "echo request");
    for (size_t i = 0; i < size; ++i)
      if (buf[i] != pattern(i, 10 + seed)) die("echo of %zu bytes: byte %zu differs", size, i);
    h.send(buf.data(), size, br.desc, "send echo");
    ++seed;
  }
  take_stream(h, buf.data(), br.desc);
  // The client's RMA and atomics are served while we wait for its `done`.
  h.recv(&c, sizeof c, nullptr, &rctx, "receive done");
  h.wait(&rctx, "done");
  if (c.kind != done) die("expected done, got %u", c.kind);
  ctl v{};
  v.kind = verdict;
  v.ok = 1;
  uint64_t counter;
  std::memcpy(&counter, win.data() + counter_off, sizeof counter);
  if (counter != c.counter) {
    std::fprintf(stderr, "server: counter %llu, the client expects %llu\n",
                 static_cast<unsigned long long>(counter), static_cast<unsigned long long>(c.counter));
    v.ok = 0;
  }
  for (size_t i = 0; i < write_len && v.ok; ++i)
    if (win[write_off + i] != pattern(i, 1)) {
      std::fprintf(stderr, "server: byte %zu of the written range differs\n", i);
      v.ok = 0;
    }
  h.send(&v, sizeof v, nullptr, "send verdict");
  fi_close(&br.mr->fid);
  fi_close(&wr.mr->fid);
  if (!v.ok) return 1;
  std::printf("server (%s): messages, RMA and atomics from the client arrived intact\n",
              h.rdm ? "rdm" : "msg");
  return 0;
}

int client(host& h, const char* addr, const char* port, const char* server_addr) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(std::atoi(port)));
  if (inet_pton(AF_INET, server_addr, &to.sin_addr) != 1) die("bad address %s", server_addr);
  if (h.rdm) {
    h.open_ep(h.info);
    if (fi_av_insert(h.av, &to, 1, &h.peer, 0, nullptr) != 1) die("fi_av_insert of the server");
  } else {
    h.open_ep(h.info);
    check(fi_connect(h.ep, &to, nullptr, 0), "fi_connect");
    h.cm_event(FI_CONNECTED);
  }
  check_own_address(h, addr);
  std::vector<char> out(max_echo()), in(max_echo()), rbuf(window_len);
  host::region outr = h.reg(out.data(), out.size(), FI_SEND | FI_WRITE, 1);
  host::region inr = h.reg(in.data(), in.size(), FI_RECV | FI_READ, 2);
  host::region rr = h.reg(rbuf.data(), rbuf.size(), FI_READ | FI_WRITE, 3);
  fi_context2 rctx, ctx;
  ctl w{};
  h.recv(&w, sizeof w, nullptr, &rctx, "receive window");
  ctl hi{};
  hi.kind = hello;
  hi.name_len = sizeof hi.name;
  check(fi_getname(&h.ep->fid, hi.name, &hi.name_len), "fi_getname");
  h.send(&hi, sizeof hi, nullptr, "send hello");
  h.wait(&rctx, "window");
  if (w.kind != window || w.len != window_len) die("expected the window, got kind %u", w.kind);

  // Messages, echoed and checked.
  unsigned seed = 0;
  for (size_t size : echo_sizes()) {
    for (size_t i = 0; i < size; ++i) out[i] = pattern(i, 10 + seed);
    std::memset(in.data(), 0, size);
    h.recv(in.data(), in.size(), inr.desc, &rctx, "receive echo");
    h.send(out.data(), size, outr.desc, "send");
    h.wait(&rctx, "echo");
    if (std::memcmp(in.data(), out.data(), size) != 0) die("the echo of %zu bytes differs", size);
    ++seed;
  }
  send_stream(h, out.data(), outr.desc);
  // RMA: write a range, read it back, read what the server put there.
  for (size_t i = 0; i < write_len; ++i) out[i] = pattern(i, 1);
  h.post([&] {
    return fi_write(h.ep, out.data(), write_len, outr.desc, h.peer, w.base + write_off, w.key, &ctx);
  }, "fi_write");
  h.wait(&ctx, "fi_write");
  h.post([&] {
    return fi_read(h.ep, rbuf.data(), write_len, rr.desc, h.peer, w.base + write_off, w.key, &ctx);
  }, "fi_read");
  h.wait(&ctx, "fi_read of the written range");
  if (std::memcmp(rbuf.data(), out.data(), write_len) != 0) die("read back differs from written");
  h.post([&] {
    return fi_read(h.ep, rbuf.data() + read_off, read_len, rr.desc, h.peer, w.base + read_off,
                   w.key, &ctx);
  }, "fi_read");
  h.wait(&ctx, "fi_read of the server's range");
  for (size_t i = 0; i < read_len; ++i)
    if (rbuf[read_off + i] != pattern(i, 2)) die("byte %zu of the server's range differs", i);
  // Atomics: each fetch-add sees the sum of the ones before.
  uint64_t* one = reinterpret_cast<uint64_t*>(rbuf.data());
  uint64_t* prior = one + 1;
  *one = 1;
  for (int i = 0; i < fetch_adds; ++i) {
    *prior = ~0ull;
    h.post([&] {
      return fi_fetch_atomic(h.ep, one, 1, rr.desc, prior, rr.desc, h.peer, w.base + counter_off,
                             w.key, FI_UINT64, FI_SUM, &ctx);
    }, "fi_fetch_atomic");
    h.wait(&ctx, "fi_fetch_atomic");
    if (*prior != counter_start + i)
      die("fetch-add %d saw %llu, not %llu", i, static_cast<unsigned long long>(*prior),
          static_cast<unsigned long long>(counter_start + i));
  }
  ctl d{};
  d.kind = done;
  d.counter = counter_start + fetch_adds;
  ctl v{};
  h.recv(&v, sizeof v, nullptr, &rctx, "receive verdict");
  h.send(&d, sizeof d, nullptr, "send done");
  h.wait(&rctx, "verdict");
  if (v.kind != verdict || !v.ok) die("the server found the window wrong");
  for (host::region* r : {&outr, &inr, &rr}) fi_close(&r->mr->fid);
  std::printf("client (%s %s): %zu echoes, %d streamed, fi_write, fi_read and %d fetch-adds over "
              "%s -> %s\n",
              prov_name(), h.rdm ? "rdm" : "msg", echo_sizes().size(), stream_count, fetch_adds,
              addr, server_addr);
  return 0;
}

// ---- a host that crashes and comes back ----

bool file_exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }
void touch(const std::string& path) {
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) die("cannot create %s", path.c_str());
  ::close(fd);
}
void await_file(const std::string& path, int seconds) {
  auto deadline = clock_type::now() + std::chrono::seconds(seconds);
  while (!file_exists(path)) {
    if (clock_type::now() > deadline) die("%s never appeared", path.c_str());
    ::usleep(10000);
  }
}

int crash(host& h, const std::string& role, const char* own, const char* peer_addr,
          const char* peer_port, const std::string& dir) {
  if (!h.rdm) die("the crash test is for rdm endpoints");
  h.open_ep(h.info);
  check_own_address(h, own);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(std::atoi(peer_port)));
  if (inet_pton(AF_INET, peer_addr, &to.sin_addr) != 1) die("bad address %s", peer_addr);
  if (fi_av_insert(h.av, &to, 1, &h.peer, 0, nullptr) != 1) die("fi_av_insert of the peer");
  fi_context2 rctx;
  ctl in{}, out{};
  if (role == "crash-a") {
    touch(dir + "/a-ready");
    await_file(dir + "/b-ready", 20);
    out.kind = hello;
    h.send(&out, sizeof out, nullptr, "ping to crash-b");
    // crash-b2 speaks first; crash-a's connection to crash-b still looks
    // established (nothing ever said it ended).
    h.recv(&in, sizeof in, nullptr, &rctx, "receive from crash-b2");
    auto deadline = clock_type::now() + std::chrono::seconds(60);
    for (;;) {
      fi_cq_data_entry e;
      ssize_t n = fi_cq_sread(h.cq, &e, 1, nullptr, 100);
      if (n == 1 && e.op_context == &rctx) break;
      if (n == -FI_EAVAIL) {
        fi_cq_err_entry ee{};
        fi_cq_readerr(h.cq, &ee, 0);
        die("crash-a: an error completion: %s", fi_strerror(ee.err));
      }
      if (clock_type::now() > deadline) die("crash-a: nothing from crash-b2 in 60 s");
    }
    if (in.kind != done) die("crash-a: expected done, got %u", in.kind);
    out.kind = verdict;
    out.ok = 1;
    h.send(&out, sizeof out, nullptr, "answer to crash-b2");
    std::printf("crash-a: the peer that came back at %s:%s was served\n", peer_addr, peer_port);
    return 0;
  }
  if (role == "crash-b") {
    h.recv(&in, sizeof in, nullptr, &rctx, "receive the ping");
    touch(dir + "/b-ready");
    h.wait(&rctx, "the ping");
    touch(dir + "/b-pinged");
    for (;;) ::pause();  // until run.sh kills us, behind a cut link
  }
  h.recv(&in, sizeof in, nullptr, &rctx, "receive the answer");
  out.kind = done;
  h.send(&out, sizeof out, nullptr, "crash-b2's first message");
  h.wait(&rctx, "crash-a's answer");
  if (in.kind != verdict || !in.ok) die("crash-b2: a wrong answer");
  std::printf("crash-b2: came back at %s and was answered by %s\n", own, peer_addr);
  return 0;
}

int silent(host& h, const std::string& role, const char* peer_addr, const char* peer_port,
           const std::string& dir) {
  if (!h.rdm) die("the silent-peer test is for rdm endpoints");
  h.open_ep(h.info);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(std::atoi(peer_port)));
  if (inet_pton(AF_INET, peer_addr, &to.sin_addr) != 1) die("bad address %s", peer_addr);
  if (fi_av_insert(h.av, &to, 1, &h.peer, 0, nullptr) != 1) die("fi_av_insert of the peer");
  ctl in{}, out{};
  fi_context2 rctx;
  if (role == "silent-b") {
    h.recv(&in, sizeof in, nullptr, &rctx, "receive the ping");
    touch(dir + "/b-ready");
    h.wait(&rctx, "the ping");
    touch(dir + "/b-pinged");
    for (;;) ::pause();  // alive, behind a link run.sh cuts
  }
  await_file(dir + "/b-ready", 20);
  out.kind = hello;
  h.send(&out, sizeof out, nullptr, "ping to silent-b");
  await_file(dir + "/cut", 20);
  fi_context2 sctx;
  iovec iov{&out, sizeof out};
  fi_msg m{&iov, nullptr, 1, h.peer, &sctx, 0};
  auto start = clock_type::now();
  check(static_cast<int>(fi_sendmsg(h.ep, &m, FI_DELIVERY_COMPLETE)), "fi_sendmsg");
  for (;;) {
    fi_cq_data_entry e;
    ssize_t n = fi_cq_sread(h.cq, &e, 1, nullptr, 100);
    double s = std::chrono::duration<double>(clock_type::now() - start).count();
    if (n == 1 && e.op_context == &sctx) die("silent-a: the send to a silent peer succeeded");
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry ee{};
      fi_cq_readerr(h.cq, &ee, 0);
      if (ee.op_context != &sctx) continue;
      std::printf("silent-a: the send to the silent peer failed after %.1f s: %s\n", s,
                  fi_strerror(ee.err));
      return 0;
    }
    if (s > 30) die("silent-a: the send to a silent peer still waits after 30 s");
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string role = argc > 1 ? argv[1] : "";
  if (role == "silent-a" || role == "silent-b") {
    if (argc != 8) die("usage: weft_netns_peer %s rdm <own address> <own port> <peer address> "
                       "<peer port> <dir>", role.c_str());
    host h;
    h.getinfo(argv[2], argv[3], argv[4]);
    return silent(h, role, argv[5], argv[6], argv[7]);
  }
  if (role == "crash-a" || role == "crash-b" || role == "crash-b2") {
    if (argc != 8) die("usage: weft_netns_peer %s rdm <own address> <own port> <peer address> "
                       "<peer port> <dir>", role.c_str());
    host h;
    h.getinfo(argv[2], argv[3], argv[4]);
    return crash(h, role, argv[3], argv[5], argv[6], argv[7]);
  }
  if (argc != 6 || (role != "server" && role != "client"))
    die("usage: weft_netns_peer server|client rdm|msg <own address> <port> "
        "<ready file | server address>");
  check_interface_choice(argv[3]);
  host h;
  bool is_server = role == "server";
  // The server binds its port; the client takes any.
  h.getinfo(argv[2], argv[3], is_server ? argv[4] : nullptr);
  return is_server ? server(h, argv[3], argv[4], argv[5]) : client(h, argv[3], argv[4], argv[5]);
}
