// SPDX-License-Identifier: MIT
// weft — one process, one lnx endpoint (fi_lnx(7)), for tests/netns/lnx_run.sh:
// several of these, on one host or spread over network namespaces, reach each
// other through shm or tcp as lnx decides. Public API only.
//
//   weft_lnx_peer <rank> <nranks> <dir> [table|map] [kill=<victim rank>]
//
// Each writes its fi_getname address to <dir>/addr.<rank> (a temporary name,
// then rename, so a reader never sees half of one), waits for every rank's,
// inserts them all in rank order and prints "rank K is fi_addr N" for each
// (lnx_run.sh matches those against lnx's "fi_addr N: through P" log lines).
// Rank 0 inserts last: first every other rank's hello must reach it from
// FI_ADDR_NOTAVAIL (a sender not inserted yet, fi_lnx(7)), and their next
// messages wait, unexpected, for its directed receives.
// Then, between barriers made of directed tagged messages:
//  - pairs: every ordered pair exchanges N tagged and N untagged messages of
//    8 B, 4 KiB and 1 MiB (one size per round: an untagged receive fits one
//    size); tagged receives name the tag, untagged ones the source;
//  - fan-in: every rank posts FI_ADDR_UNSPEC receives and all others send to
//    it at once, 8 B to 1 MiB (fed by shm and tcp together on two hosts);
//    each message lands exactly once (spare receives stay empty, then are
//    cancelled), and fi_cq_readfrom / fi_cq_sreadfrom name its sender
//    (FI_SOURCE);
//  - directed: a receive for one source, posted while every source sends
//    with the same tag, takes that source's message only; the others' then
//    wait, unexpected, for receives naming them (4 KiB, then 1 MiB).
// Every payload carries its sender, receiver, phase and sequence number in
// its first 8 bytes and a pattern derived from them after: all data checked.
//
// kill=<victim>: after the first barrier the victim receives 1 MiB messages
// from every other rank and sends them 1 MiB messages, 4 outstanding each
// way, until killed: once it has heard from everyone and served everyone it
// creates <dir>/victim.receiving (holding its pid), and lnx_run.sh SIGKILLs
// it. The others do the same until a send to it fails. Then: that failure
// comes within the timeout (an error completion or an error on post), every
// outstanding send completes, a later send fails too, every receive ends
// (with a whole message, an error, or FI_ECANCELED once cancelled: none is
// left matched to a message that never ends), and the survivors still talk
// to each other.
//
// Every wait is bounded (LNX_PEER_TIMEOUT seconds, 30 by default). Exit
// status 0 when every check passed, else 1 with the reason on stderr.
#include <fcntl.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
int my_rank = -1;

[[noreturn]] void die(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "weft_lnx_peer %d: FAIL: ", my_rank);
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
  std::exit(1);
}

void check(long rc, const char* what) {
  if (rc) die("%s: %s (%ld)", what, fi_strerror(static_cast<int>(rc < 0 ? -rc : rc)), rc);
}

double env_number(const char* name, double dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atof(v) : dflt;
}

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

// ---- payloads -----------------------------------------------------------------

enum phase : uint8_t {
  pair_t = 1,
  pair_u,
  fanin_t,
  fanin_u,
  directed_t,
  directed_u,
  kill_t,
  barrier_t,
  hello_t,
};

// The first 8 bytes of every message: enough for the smallest (8 B).
struct header {
  uint8_t magic, phase, src, dst;
  uint16_t seq;
  uint8_t size_log2, sum;
};
static_assert(sizeof(header) == 8);
constexpr uint8_t hdr_magic = 0xa5;

uint8_t body_byte(const header& h, size_t i) {
  return static_cast<uint8_t>(i * 131 + h.seq * 17 + h.src * 29 + h.dst * 7 + h.phase * 3 +
                              (i >> 9));
}

uint8_t log2_of(size_t size) {
  uint8_t l = 0;
  while ((size_t{1} << l) < size) ++l;
  return l;
}

void fill(std::vector<uint8_t>& buf, size_t size, phase ph, int src, int dst, unsigned seq) {
  buf.resize(size);
  header h{hdr_magic,
           ph,
           static_cast<uint8_t>(src),
           static_cast<uint8_t>(dst),
           static_cast<uint16_t>(seq),
           log2_of(size),
           0};
  h.sum =
      static_cast<uint8_t>(h.magic ^ h.phase ^ h.src ^ h.dst ^ h.seq ^ (h.seq >> 8) ^ h.size_log2);
  std::memcpy(buf.data(), &h, sizeof h);
  for (size_t i = sizeof h; i < size; ++i) buf[i] = body_byte(h, i);
}

// The header of a received message of `len` bytes, after checking every
// byte of it against what its header says was sent.
header parse(const uint8_t* p, size_t len, const char* what) {
  if (len < sizeof(header)) die("%s: a message of %zu bytes, shorter than any sent", what, len);
  header h;
  std::memcpy(&h, p, sizeof h);
  uint8_t sum =
      static_cast<uint8_t>(h.magic ^ h.phase ^ h.src ^ h.dst ^ h.seq ^ (h.seq >> 8) ^ h.size_log2);
  if (h.magic != hdr_magic || h.sum != sum) die("%s: a message with a damaged header", what);
  if (h.dst != my_rank) die("%s: a message from rank %d for rank %d", what, h.src, h.dst);
  if (len != size_t{1} << h.size_log2)
    die("%s: a message of %zu bytes from rank %d, sent with %zu", what, len, h.src,
        size_t{1} << h.size_log2);
  for (size_t i = sizeof h; i < len; ++i)
    if (p[i] != body_byte(h, i))
      die("%s: byte %zu of %zu from rank %d (seq %u) differs", what, i, len, h.src, h.seq);
  return h;
}

constexpr uint64_t tag_of(phase ph, unsigned src, unsigned cls, unsigned seq) {
  return uint64_t{ph} << 56 | uint64_t{src & 0xff} << 48 | uint64_t{cls & 0xff} << 40 | seq;
}

// ---- operations ---------------------------------------------------------------

// One posted operation. Its address is the operation's context, and the
// fi_context2 comes first so a provider that writes into contexts writes
// into it.
struct op {
  fi_context2 ctx{};
  bool is_send = false;
  bool done = false;
  bool cancel_ok = false;  // an FI_ECANCELED completion is expected
  bool error_ok = false;   // any error completion is accepted (sends to a dead peer)
  int err = 0;
  int peer = -1;  // sends: destination; directed receives: the only allowed source
  size_t len = 0;
  uint64_t tag = 0;
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  std::vector<uint8_t> buf;
};
using ops = std::vector<std::unique_ptr<op>>;

struct node {
  int rank = 0, nranks = 0;
  std::string dir;
  bool av_map = false;
  double timeout = 30;
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_ep* ep = nullptr;
  std::vector<fi_addr_t> addr;  // rank -> fi_addr
  unsigned epoch = 0;           // barriers so far
  size_t checked = 0;           // messages received and checked

  int rank_of(fi_addr_t a) const {
    for (int r = 0; r < nranks; ++r)
      if (addr[r] == a) return r;
    return -1;
  }

  // Reads what the CQ has, waiting up to `ms` for it; marks the operations.
  void poll(int ms) {
    fi_cq_tagged_entry e[16];
    fi_addr_t src[16];
    // What is there already is read without waiting, the rest waited for:
    // both calls must name the sources.
    ssize_t n = fi_cq_readfrom(cq, e, 16, src);
    if (n == -FI_EAGAIN && ms > 0) n = fi_cq_sreadfrom(cq, e, 16, src, nullptr, ms);
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        op* o = static_cast<op*>(e[i].op_context);
        if (!o)
          die("a completion without a context (flags 0x%llx)", (unsigned long long)e[i].flags);
        if (o->done) die("a second completion for one operation");
        o->done = true;
        o->len = e[i].len;
        o->tag = e[i].tag;
        o->src = src[i];
      }
      return;
    }
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry ee{};
      if (fi_cq_readerr(cq, &ee, 0) != 1) die("fi_cq_readerr read nothing after -FI_EAVAIL");
      op* o = static_cast<op*>(ee.op_context);
      if (!o) die("an error completion without a context: %s", fi_strerror(ee.err));
      bool allowed = o->error_ok || (o->cancel_ok && ee.err == FI_ECANCELED);
      if (!allowed)
        die("an error completion for a %s (rank %d): %s (prov_errno %d)",
            o->is_send ? "send" : "receive", o->peer, fi_strerror(ee.err), ee.prov_errno);
      if (o->done) die("a second completion (an error) for one operation");
      o->done = true;
      o->err = ee.err ? ee.err : FI_EOTHER;
      return;
    }
    if (n != -FI_EAGAIN) die("fi_cq_sreadfrom: %s (%zd)", fi_strerror(static_cast<int>(-n)), n);
  }

  // Drives progress until pred() holds; fails after the timeout.
  void wait_for(const std::function<bool()>& pred, const char* what) {
    auto start = clock_type::now();
    while (!pred()) {
      if (seconds_since(start) > timeout) die("%s: not done after %.0f s", what, timeout);
      poll(20);
    }
  }
  // Drives progress for `ms` milliseconds.
  void idle(int ms) {
    auto start = clock_type::now();
    while (seconds_since(start) * 1000 < ms) poll(10);
  }

  // Posts with `fn`, retrying -FI_EAGAIN while driving progress; the first
  // other answer is returned.
  ssize_t post(const std::function<ssize_t()>& fn) {
    auto start = clock_type::now();
    for (;;) {
      ssize_t r = fn();
      if (r != -FI_EAGAIN) return r;
      if (seconds_since(start) > timeout) return r;
      poll(0);
    }
  }

  op* recv(ops& list, size_t cap, bool tagged, fi_addr_t from, uint64_t tag, uint64_t ignore,
           int peer) {
    auto o = std::make_unique<op>();
    o->peer = peer;
    o->buf.assign(cap, 0);
    op* p = o.get();
    ssize_t r =
        tagged
            ? post([&] { return fi_trecv(ep, p->buf.data(), cap, nullptr, from, tag, ignore, p); })
            : post([&] { return fi_recv(ep, p->buf.data(), cap, nullptr, from, p); });
    check(r, tagged ? "fi_trecv" : "fi_recv");
    list.push_back(std::move(o));
    return p;
  }

  // Posts a send of `size` bytes to rank `dst` (a failure to post ends the
  // process).
  op* send(ops& list, bool tagged, int dst, size_t size, phase ph, unsigned seq, uint64_t tag) {
    list.push_back(std::make_unique<op>());
    op* p = list.back().get();
    p->is_send = true;
    p->peer = dst;
    fill(p->buf, size, ph, rank, dst, seq);
    ssize_t r =
        tagged ? post([&] { return fi_tsend(ep, p->buf.data(), size, nullptr, addr[dst], tag, p); })
               : post([&] { return fi_send(ep, p->buf.data(), size, nullptr, addr[dst], p); });
    if (r)
      die("%s to rank %d: %s", tagged ? "fi_tsend" : "fi_send", dst,
          fi_strerror(static_cast<int>(-r)));
    return p;
  }

  static bool all_done(const ops& list) {
    return std::all_of(list.begin(), list.end(), [](auto& o) { return o->done; });
  }

  // A received message, checked: its bytes, its phase, and that FI_SOURCE
  // named the rank the header says sent it. Returns that rank.
  header check_recv(const op& o, phase ph, const char* what) {
    if (o.err) die("%s: the receive failed: %s", what, fi_strerror(o.err));
    header h = parse(o.buf.data(), o.len, what);
    if (h.phase != ph) die("%s: a message of phase %u, expected %u", what, h.phase, ph);
    if (h.src >= nranks) die("%s: a message from rank %u, beyond %d", what, h.src, nranks);
    if (o.src != addr[h.src])
      die("%s: rank %u's message reported from fi_addr %llu (rank %d), expected fi_addr %llu", what,
          h.src, (unsigned long long)o.src, rank_of(o.src), (unsigned long long)addr[h.src]);
    if (o.peer >= 0 && h.src != o.peer)
      die("%s: a receive directed at rank %d took rank %u's message", what, o.peer, h.src);
    ++checked;
    return h;
  }

  // Every rank of `group` exchanges a directed tagged message with every
  // other: no rank leaves before all have arrived.
  void barrier(const std::vector<int>& group) {
    ++epoch;
    ops list;
    std::vector<op*> in;
    for (int p : group)
      if (p != rank)
        in.push_back(recv(list, 8, true, addr[p], tag_of(barrier_t, p, 0, epoch), 0, p));
    for (int p : group)
      if (p != rank) send(list, true, p, 8, barrier_t, epoch, tag_of(barrier_t, rank, 0, epoch));
    char what[64];
    std::snprintf(what, sizeof what, "barrier %u", epoch);
    wait_for([&] { return all_done(list); }, what);
    for (op* o : in)
      if (check_recv(*o, barrier_t, what).seq != static_cast<uint16_t>(epoch))
        die("%s: a message of another barrier", what);
  }
};

// ---- setup ----------------------------------------------------------------------

void write_file(const std::string& path, const void* data, size_t len) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, data, len) != static_cast<ssize_t>(len) || ::close(fd))
    die("cannot write %s", tmp.c_str());
  if (::rename(tmp.c_str(), path.c_str())) die("cannot rename %s", tmp.c_str());
}

std::vector<uint8_t> read_file_bounded(const std::string& path, double timeout) {
  auto start = clock_type::now();
  for (;;) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      std::vector<uint8_t> out(4096);
      ssize_t n = ::read(fd, out.data(), out.size());
      ::close(fd);
      if (n < 0) die("cannot read %s", path.c_str());
      out.resize(static_cast<size_t>(n));
      return out;
    }
    if (seconds_since(start) > timeout) die("%s did not appear in %.0f s", path.c_str(), timeout);
    ::usleep(10000);
  }
}

void open_endpoint(node& n) {
  fi_info* hints = fi_allocinfo();
  hints->caps = FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->av_type = n.av_map ? FI_AV_MAP : FI_AV_TABLE;
  // lnx is offered only to callers that name it (fi_lnx(7)): here, unless
  // FI_PROVIDER is set (lnx_run.sh's other way of naming it).
  if (!std::getenv("FI_PROVIDER")) hints->fabric_attr->prov_name = strdup("lnx");
  check(fi_getinfo(FI_VERSION(1, 21), nullptr, nullptr, 0, hints, &n.info), "fi_getinfo (lnx)");
  fi_freeinfo(hints);
  constexpr uint64_t need = FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE;
  if ((n.info->caps & need) != need)
    die("fi_getinfo answered caps 0x%llx, without some of 0x%llx", (unsigned long long)n.info->caps,
        (unsigned long long)need);
  if (std::strcmp(n.info->fabric_attr->prov_name, "lnx") != 0)
    die("fi_getinfo answered provider %s, not lnx", n.info->fabric_attr->prov_name);
  if (n.info->domain_attr->data_progress != FI_PROGRESS_MANUAL)
    die("lnx answered data progress %d, fi_lnx(7) says manual", n.info->domain_attr->data_progress);
  std::printf("weft_lnx_peer %d: lnx domain %s, caps 0x%llx, av %s\n", n.rank,
              n.info->domain_attr->name, (unsigned long long)n.info->caps,
              n.av_map ? "map" : "table");
  check(fi_fabric(n.info->fabric_attr, &n.fabric, nullptr), "fi_fabric");
  check(fi_domain(n.fabric, n.info, &n.domain, nullptr), "fi_domain");
  fi_cq_attr ca{};
  ca.format = FI_CQ_FORMAT_TAGGED;
  ca.size = 1024;
  // A waiting reader sleeps instead of spinning: several ranks share few cores.
  ca.wait_obj = FI_WAIT_UNSPEC;
  check(fi_cq_open(n.domain, &ca, &n.cq, nullptr), "fi_cq_open");
  fi_av_attr aa{};
  aa.type = n.av_map ? FI_AV_MAP : FI_AV_TABLE;
  aa.count = static_cast<size_t>(n.nranks);
  check(fi_av_open(n.domain, &aa, &n.av, nullptr), "fi_av_open");
  check(fi_endpoint(n.domain, n.info, &n.ep, nullptr), "fi_endpoint");
  check(fi_ep_bind(n.ep, &n.cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind cq");
  check(fi_ep_bind(n.ep, &n.av->fid, 0), "fi_ep_bind av");
  check(fi_enable(n.ep), "fi_enable");
}

// Publishes our address, reads everyone's and inserts them in rank order.
void exchange_addresses(node& n) {
  size_t len = 0;
  if (fi_getname(&n.ep->fid, nullptr, &len) != -FI_ETOOSMALL || !len)
    die("fi_getname did not say how long the address is");
  std::vector<uint8_t> me(len);
  check(fi_getname(&n.ep->fid, me.data(), &len), "fi_getname");
  ops hellos;
  if (n.rank == 0)
    for (int r = 1; r < n.nranks; ++r)
      n.recv(hellos, 8, true, FI_ADDR_UNSPEC, tag_of(hello_t, 0, 0, 0), 0, -1);
  write_file(n.dir + "/addr." + std::to_string(n.rank), me.data(), len);
  std::vector<uint8_t> all;
  for (int r = 0; r < n.nranks; ++r) {
    std::vector<uint8_t> a = read_file_bounded(n.dir + "/addr." + std::to_string(r), n.timeout);
    if (a.size() != len) die("rank %d's address is %zu bytes, ours %zu", r, a.size(), len);
    all.insert(all.end(), a.begin(), a.end());
  }
  // Rank 0 inserts late. The others' hellos reach it from senders it does
  // not know yet: fi_lnx(7) says they are reported from FI_ADDR_NOTAVAIL.
  // Their first barrier messages, sent next, wait unexpected and must match
  // rank 0's directed receives, with the right source, once it knows them.
  if (n.rank == 0) {
    n.wait_for([&] { return node::all_done(hellos); }, "hellos from senders not inserted yet");
    std::set<int> from;
    for (auto& o : hellos) {
      header h = parse(o->buf.data(), o->len, "hello");
      if (h.phase != hello_t || h.src >= n.nranks || !from.insert(h.src).second)
        die("hello: a wrong or repeated hello (phase %u, rank %u)", h.phase, h.src);
      if (o->src != FI_ADDR_NOTAVAIL)
        die("hello: rank %u, not inserted yet, reported from fi_addr %llu, not FI_ADDR_NOTAVAIL",
            h.src, (unsigned long long)o->src);
    }
    n.idle(200);
  }
  n.addr.assign(static_cast<size_t>(n.nranks), FI_ADDR_NOTAVAIL);
  int ret =
      fi_av_insert(n.av, all.data(), static_cast<size_t>(n.nranks), n.addr.data(), 0, nullptr);
  if (ret != n.nranks) die("fi_av_insert of %d addresses answered %d", n.nranks, ret);
  for (int r = 0; r < n.nranks; ++r) {
    if (n.addr[r] == FI_ADDR_NOTAVAIL) die("rank %d's address was not inserted", r);
    for (int k = 0; k < r; ++k)
      if (n.addr[k] == n.addr[r]) die("ranks %d and %d got one fi_addr", k, r);
    std::printf("weft_lnx_peer %d: rank %d is fi_addr %llu\n", n.rank, r,
                (unsigned long long)n.addr[r]);
  }
  std::fflush(stdout);
  if (n.rank != 0) {
    ops out;
    n.send(out, true, 0, 8, hello_t, 0, tag_of(hello_t, 0, 0, 0));
    n.wait_for([&] { return node::all_done(out); }, "hello to rank 0");
  }
}

// ---- phases ---------------------------------------------------------------------

// Every ordered pair of `group`: `count` tagged and `count` untagged messages
// of each size, one size per round.
void pairs(node& n, const std::vector<int>& group, const std::vector<size_t>& sizes,
           unsigned count) {
  for (size_t size : sizes) {
    unsigned cls = log2_of(size);
    ops list;
    std::vector<op*> tagged_in, untagged_in;
    for (int p : group) {
      if (p == n.rank) continue;
      for (unsigned s = 0; s < count; ++s) {
        // Tagged: the tag names sender and sequence, the source is any.
        tagged_in.push_back(
            n.recv(list, size, true, FI_ADDR_UNSPEC, tag_of(pair_t, p, cls, s), 0, p));
        // Untagged: the source names the sender.
        untagged_in.push_back(n.recv(list, size, false, n.addr[p], 0, 0, p));
      }
    }
    for (unsigned s = 0; s < count; ++s)
      for (int p : group) {
        if (p == n.rank) continue;
        n.send(list, true, p, size, pair_t, s, tag_of(pair_t, n.rank, cls, s));
        n.send(list, false, p, size, pair_u, s, 0);
      }
    char what[64];
    std::snprintf(what, sizeof what, "pairs of %zu B", size);
    n.wait_for([&] { return node::all_done(list); }, what);
    for (op* o : tagged_in) {
      header h = n.check_recv(*o, pair_t, what);
      if (o->tag != tag_of(pair_t, h.src, cls, h.seq))
        die("%s: a completion with a wrong tag", what);
    }
    std::set<std::pair<int, unsigned>> seen;
    for (op* o : untagged_in) {
      header h = n.check_recv(*o, pair_u, what);
      if (!seen.emplace(h.src, h.seq).second)
        die("%s: untagged message %u from rank %u arrived twice", what, h.seq, h.src);
    }
    n.barrier(group);
  }
}

// Every rank receives from all others at once into FI_ADDR_UNSPEC receives.
void fan_in(node& n, unsigned per_peer) {
  constexpr size_t sizes[] = {8, 4096, 65536, size_t{1} << 20};
  constexpr size_t cap = size_t{1} << 20;
  constexpr unsigned spare = 2;
  const unsigned expected = per_peer * static_cast<unsigned>(n.nranks - 1);
  const uint64_t tag = tag_of(fanin_t, 0, 0, 0);
  ops list, out;
  std::vector<op*> in_t, in_u;
  for (unsigned i = 0; i < expected + spare; ++i) {
    in_t.push_back(n.recv(list, cap, true, FI_ADDR_UNSPEC, tag, 0, -1));
    in_u.push_back(n.recv(list, cap, false, FI_ADDR_UNSPEC, 0, 0, -1));
  }
  // Every receive is posted everywhere before anyone sends.
  std::vector<int> everyone;
  for (int r = 0; r < n.nranks; ++r) everyone.push_back(r);
  n.barrier(everyone);
  for (unsigned s = 0; s < per_peer; ++s)
    for (int p = 0; p < n.nranks; ++p) {
      if (p == n.rank) continue;
      size_t size = sizes[s % std::size(sizes)];
      n.send(out, true, p, size, fanin_t, s, tag);
      n.send(out, false, p, size, fanin_u, s, 0);
    }
  auto done_count = [](const std::vector<op*>& v) {
    return static_cast<unsigned>(std::count_if(v.begin(), v.end(), [](op* o) { return o->done; }));
  };
  n.wait_for(
      [&] {
        return done_count(in_t) >= expected && done_count(in_u) >= expected && node::all_done(out);
      },
      "fan-in");
  for (auto [v, ph] : {std::pair{&in_t, fanin_t}, std::pair{&in_u, fanin_u}}) {
    std::set<std::pair<int, unsigned>> seen;
    for (op* o : *v) {
      if (!o->done) continue;
      header h = n.check_recv(*o, ph, "fan-in");
      if (h.size_log2 != log2_of(sizes[h.seq % std::size(sizes)]))
        die("fan-in: message %u from rank %u has the wrong size", h.seq, h.src);
      if (ph == fanin_t && o->tag != tag) die("fan-in: a completion with a wrong tag");
      if (!seen.emplace(h.src, h.seq).second)
        die("fan-in: %s message %u from rank %u arrived twice",
            ph == fanin_t ? "tagged" : "untagged", h.seq, h.src);
    }
  }
  // Once every sender is past its sends, anything more would be a message
  // delivered twice: the spare receives must still be empty, and cancel.
  n.barrier(everyone);
  n.idle(200);
  if (done_count(in_t) != expected || done_count(in_u) != expected)
    die("fan-in: %u tagged and %u untagged receives completed, %u each expected", done_count(in_t),
        done_count(in_u), expected);
  for (auto& o : list) {
    if (o->done) continue;
    o->cancel_ok = true;
    check(fi_cancel(&n.ep->fid, o.get()), "fi_cancel of a spare receive");
  }
  n.wait_for([&] { return node::all_done(list); }, "fan-in: cancelling the spare receives");
  for (auto& o : list)
    if (o->cancel_ok && o->err != FI_ECANCELED)
      die("fan-in: a cancelled receive completed with %s", o->err ? fi_strerror(o->err) : "data");
}

// Directed receives take only their source's message, among messages of
// `size` that all carry the same tag.
void directed(node& n, size_t size) {
  const uint64_t tag = tag_of(directed_t, 0, 0, 0);
  std::vector<int> order, everyone;
  for (int r = n.nranks - 1; r >= 0; --r)
    if (r != n.rank) order.push_back(r);
  for (int r = 0; r < n.nranks; ++r) everyone.push_back(r);
  ops list, out;
  std::vector<std::pair<op*, op*>> in;
  auto post_for = [&](int p) {
    op* t = n.recv(list, size, true, n.addr[p], tag, 0, p);
    op* u = n.recv(list, size, false, n.addr[p], 0, 0, p);
    in.emplace_back(t, u);
  };
  post_for(order.front());
  n.barrier(everyone);
  for (int p = 0; p < n.nranks; ++p) {
    if (p == n.rank) continue;
    n.send(out, true, p, size, directed_t, 0, tag);
    n.send(out, false, p, size, directed_u, 0, 0);
  }
  n.wait_for([&] { return in[0].first->done && in[0].second->done; }, "directed: the first source");
  // The others' messages arrive meanwhile and wait, unexpected. (Their sends
  // need not complete before a receive matches them: a large one may wait
  // for its receiver, so none is waited for here.)
  n.idle(100);
  for (size_t i = 1; i < order.size(); ++i) post_for(order[i]);
  n.wait_for([&] { return node::all_done(list) && node::all_done(out); },
             "directed: the other sources");
  for (auto [t, u] : in) {
    n.check_recv(*t, directed_t, "directed (tagged)");
    n.check_recv(*u, directed_u, "directed (untagged)");
  }
  n.barrier(everyone);
}

// ---- a peer killed mid-transfer ---------------------------------------------------

constexpr size_t big = size_t{1} << 20;
constexpr int window = 4;  // 1 MiB operations outstanding, each way
constexpr uint64_t kill_tag = tag_of(kill_t, 0, 20, 0);
constexpr uint64_t kill_ignore = uint64_t{0xff} << 48 | 0xffffffffULL;  // any sender, any seq

// (Re)posts `o` as a receive of one 1 MiB kill-phase message from anyone.
void post_kill_recv(node& n, op& o) {
  o.done = false;
  o.err = 0;
  o.len = 0;
  o.src = FI_ADDR_NOTAVAIL;
  o.buf.resize(big);
  check(n.post([&] {
    return fi_trecv(n.ep, o.buf.data(), big, nullptr, FI_ADDR_UNSPEC, kill_tag, kill_ignore, &o);
  }),
        "kill: fi_trecv");
}

// Posts `o` as a 1 MiB send to `dst`, without the bounded retry (the
// callers' loops judge a peer that keeps answering -FI_EAGAIN). 0, or the
// error of the post.
ssize_t post_kill_send(node& n, op& o, int dst, unsigned seq) {
  o.is_send = true;
  o.peer = dst;
  o.done = false;
  o.err = 0;
  o.error_ok = true;
  fill(o.buf, big, kill_t, n.rank, dst, seq);
  return fi_tsend(n.ep, o.buf.data(), big, nullptr, n.addr[dst], tag_of(kill_t, n.rank, 20, seq),
                  &o);
}

// Receives from every other rank and sends to each, until killed; creates
// <dir>/victim.receiving (its pid) once every rank's message has arrived and
// a send to every rank has completed.
[[noreturn]] void victim(node& n) {
  std::vector<op> in(window);
  for (op& o : in) post_kill_recv(n, o);
  // Per other rank: `window` sends, kept outstanding.
  std::vector<int> others;
  for (int r = 0; r < n.nranks; ++r)
    if (r != n.rank) others.push_back(r);
  std::vector<op> out(others.size() * window);
  std::vector<bool> busy(out.size(), false);
  std::set<int> heard, served;
  unsigned seq = 0;
  bool announced = false;
  auto start = clock_type::now();
  for (;;) {
    if (seconds_since(start) > 2 * n.timeout) die("victim: not killed after %.0f s", 2 * n.timeout);
    n.poll(5);
    for (op& o : in) {
      if (!o.done) continue;
      heard.insert(n.check_recv(o, kill_t, "victim").src);
      post_kill_recv(n, o);
    }
    for (size_t i = 0; i < out.size(); ++i) {
      int dst = others[i / window];
      if (busy[i] && out[i].done) {
        busy[i] = false;
        if (!out[i].err) served.insert(dst);
      }
      if (!busy[i]) {
        ssize_t r = post_kill_send(n, out[i], dst, seq);
        if (r == 0)
          busy[i] = true, ++seq;
        else if (r != -FI_EAGAIN)
          die("victim: fi_tsend to rank %d: %s", dst, fi_strerror(int(-r)));
      }
    }
    if (!announced && heard.size() == others.size() && served.size() == others.size()) {
      std::string pid = std::to_string(::getpid());
      write_file(n.dir + "/victim.receiving", pid.data(), pid.size());
      announced = true;
      std::printf("weft_lnx_peer %d: receiving from and sending to every rank, to be killed\n",
                  n.rank);
      std::fflush(stdout);
    }
  }
}

// Sends to the victim and receives from it until a send fails (it was
// killed), then checks that nothing is left hanging: every outstanding send
// completes, a later send fails, and every receive completes, with the dead
// peer's whole message, an error, or FI_ECANCELED once cancelled.
void survivor(node& n, int dead) {
  std::vector<op> out(window), in(window);
  std::vector<bool> busy(window, false);
  for (op& o : in) {
    o.peer = dead;  // only the victim sends kill-phase messages to us
    o.error_ok = true;
    o.cancel_ok = true;
    post_kill_recv(n, o);
  }
  unsigned seq = 0, sent = 0, send_errors = 0, received = 0, recv_errors = 0;
  int first_err = 0;
  double first_err_at = -1;
  auto start = clock_type::now();
  auto failed = [&](int err, double at) {
    ++send_errors;
    if (first_err_at < 0) first_err = err, first_err_at = at;
  };
  for (;;) {
    double t = seconds_since(start);
    for (int i = 0; i < window; ++i) {
      op& o = out[i];
      if (busy[i] && o.done) {
        busy[i] = false;
        if (o.err)
          failed(o.err, t);
        else
          ++sent;
      }
      if (!busy[i] && first_err_at < 0) {
        ssize_t r = post_kill_send(n, o, dead, seq);
        if (r == 0)
          busy[i] = true, ++seq;
        else if (r != -FI_EAGAIN)
          failed(static_cast<int>(-r), t);
      }
    }
    for (op& o : in) {
      if (!o.done) continue;
      if (o.err) {
        ++recv_errors;
      } else {
        n.check_recv(o, kill_t, "kill: a message from the victim");
        ++received;
      }
      if (first_err_at < 0) post_kill_recv(n, o);
    }
    bool outstanding = std::count(busy.begin(), busy.end(), true) > 0;
    if (first_err_at >= 0 && !outstanding) break;
    if (first_err_at < 0 && t > n.timeout)
      die("kill: no send to rank %d failed in %.0f s (%u completed; was it killed?)", dead, t,
          sent);
    if (first_err_at >= 0 && t - first_err_at > n.timeout)
      die("kill: %ld sends to the dead rank %d still outstanding %.0f s after the first failed "
          "(%s): they hang",
          std::count(busy.begin(), busy.end(), true), dead, n.timeout, fi_strerror(first_err));
    n.poll(outstanding ? 20 : 1);
  }
  // The peer is known dead: a new send to it must fail too, not hang.
  op late;
  ssize_t r = n.post([&] { return post_kill_send(n, late, dead, seq); });
  const char* late_result;
  if (r == -FI_EAGAIN)
    die("kill: a send to the dead rank %d answers -FI_EAGAIN for %.0f s", dead, n.timeout);
  if (r) {
    late_result = fi_strerror(static_cast<int>(-r));
  } else {
    n.wait_for([&] { return late.done; }, "kill: a send posted after the peer died");
    if (!late.err) die("kill: a send of 1 MiB to the dead rank %d completed without error", dead);
    late_result = fi_strerror(late.err);
  }
  // Receives: what was in flight from the dead peer settles, then the rest
  // are cancelled. A receive that neither completes nor cancels is stuck.
  n.idle(500);
  unsigned pending = 0, refused = 0;
  for (op& o : in) {
    if (o.done) continue;
    ++pending;
    if (fi_cancel(&n.ep->fid, &o) != 0) ++refused;
  }
  auto t0 = clock_type::now();
  while (!std::all_of(in.begin(), in.end(), [](const op& o) { return o.done; })) {
    if (seconds_since(t0) > n.timeout)
      die("kill: %ld of %u receives still open %.0f s after fi_cancel (%u refused it): a receive "
          "matched by the dead peer's message hangs",
          std::count_if(in.begin(), in.end(), [](const op& o) { return !o.done; }), pending,
          n.timeout, refused);
    n.poll(20);
  }
  unsigned cancelled = 0;
  for (op& o : in) {
    if (o.err == FI_ECANCELED) {
      ++cancelled;
    } else if (o.err) {
      ++recv_errors;
    } else if (o.len) {
      n.check_recv(o, kill_t, "kill: a message from the victim");
      ++received;
    }
  }
  std::printf(
      "weft_lnx_peer %d: sends to killed rank %d: %u completed, %u failed (first: %s, %.2f s in); "
      "a later send failed at %s: %s; receives from it: %u whole, %u failed, %u cancelled\n",
      n.rank, dead, sent, send_errors, fi_strerror(first_err), first_err_at,
      r ? "post" : "completion", late_result, received, recv_errors, cancelled);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 6) {
    std::fprintf(stderr, "usage: weft_lnx_peer <rank> <nranks> <dir> [table|map] [kill=<rank>]\n");
    return 2;
  }
  node n;
  n.rank = my_rank = std::atoi(argv[1]);
  n.nranks = std::atoi(argv[2]);
  n.dir = argv[3];
  int dead = -1;
  for (int i = 4; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "map" || a == "table")
      n.av_map = a == "map";
    else if (a.rfind("kill=", 0) == 0)
      dead = std::atoi(a.c_str() + 5);
    else
      die("unknown argument %s", a.c_str());
  }
  if (n.nranks < 2 || n.nranks > 64 || n.rank < 0 || n.rank >= n.nranks)
    die("rank %d of %d: 2 to 64 ranks", n.rank, n.nranks);
  if (dead >= n.nranks) die("kill=%d: no such rank", dead);
  n.timeout = env_number("LNX_PEER_TIMEOUT", 30);
  unsigned count = static_cast<unsigned>(env_number("LNX_PEER_MSGS", 4));
  auto start = clock_type::now();

  open_endpoint(n);
  exchange_addresses(n);
  std::vector<int> everyone, survivors;
  for (int r = 0; r < n.nranks; ++r) {
    everyone.push_back(r);
    if (r != dead) survivors.push_back(r);
  }
  n.barrier(everyone);

  if (dead < 0) {
    pairs(n, everyone, {8, 4096, size_t{1} << 20}, count);
    fan_in(n, 2 * count);
    directed(n, 4096);
    directed(n, size_t{1} << 20);
    std::printf(
        "weft_lnx_peer %d: pairs (%u tagged + %u untagged of 8 B, 4 KiB, 1 MiB each way), "
        "fan-in, directed receives: %zu messages checked in %.2f s\n",
        n.rank, count, count, n.checked, seconds_since(start));
  } else if (n.rank == dead) {
    victim(n);
  } else {
    survivor(n, dead);
    // The survivors still reach each other, through both cores.
    n.barrier(survivors);
    pairs(n, survivors, {4096}, 2);
    std::printf("weft_lnx_peer %d: the survivors still exchange messages (%.2f s)\n", n.rank,
                seconds_since(start));
  }
  check(fi_close(&n.ep->fid), "fi_close ep");
  check(fi_close(&n.av->fid), "fi_close av");
  check(fi_close(&n.cq->fid), "fi_close cq");
  check(fi_close(&n.domain->fid), "fi_close domain");
  check(fi_close(&n.fabric->fid), "fi_close fabric");
  fi_freeinfo(n.info);
  return 0;
}
