// SPDX-License-Identifier: MIT
// weft — wait sets (fi_wait_open, fi_wait, fi_trywait) and poll sets
// (fi_poll_open, fi_poll_add/del, fi_poll), through the public C API, with
// EQs as real members and small stand-ins for CQs and counters.
#include "core/info.hpp"
#include "util/cntr.hpp"
#include "util/cq.hpp"
#include "util/domain.hpp"
#include "util/eq.hpp"
#include "util/fabric.hpp"
#include "util/wait_set.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <poll.h>
#include <thread>
#include <unistd.h>

namespace weft::util {
namespace {

using namespace std::chrono_literals;

fi_provider test_prov = {.name = const_cast<char*>("waittest")};
constexpr fabric_hooks no_fabric_hooks = {};
constexpr domain_hooks no_domain_hooks = {};

struct fabric_handle {
  fid_fabric* fab = nullptr;
  fabric_handle() {
    fi_fabric_attr attr{};
    attr.name = const_cast<char*>("waittest");
    attr.api_version = FI_VERSION(1, 20);
    EXPECT_EQ(fabric::open(&test_prov, &no_fabric_hooks, &attr, &fab, nullptr), 0);
  }
  ~fabric_handle() { EXPECT_EQ(fi_close(&fab->fid), 0); }
  fabric& self() const { return *fabric::from(fab); }
};

struct set_handle {
  fid_wait* set = nullptr;
  set_handle(fid_fabric* fab, fi_wait_obj w) {
    fi_wait_attr attr{};
    attr.wait_obj = w;
    EXPECT_EQ(fi_wait_open(fab, &attr, &set), 0);
  }
  ~set_handle() {
    if (set) {
      EXPECT_EQ(fi_close(&set->fid), 0);
    }
  }
};

struct eq_handle {
  fid_eq* eq = nullptr;
  eq_handle(fid_fabric* fab, fid_wait* set) {
    fi_eq_attr attr{};
    attr.flags = FI_WRITE;
    attr.wait_obj = FI_WAIT_SET;
    attr.wait_set = set;
    EXPECT_EQ(fi_eq_open(fab, &attr, &eq, nullptr), 0);
  }
  ~eq_handle() { close(); }
  void close() {
    if (eq) {
      EXPECT_EQ(fi_close(&eq->fid), 0);
    }
    eq = nullptr;
  }
  util::eq& self() const { return *util::eq::from(eq); }
  void write(uint64_t data = 0) const {
    fi_eq_entry e{};
    e.data = data;
    EXPECT_EQ(fi_eq_write(eq, FI_NOTIFY, &e, sizeof e, 0), static_cast<ssize_t>(sizeof e));
  }
  ssize_t read() const {
    uint32_t ev;
    fi_eq_entry e{};
    return fi_eq_read(eq, &ev, &e, sizeof e, 0);
  }
};

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

template <class F>
std::chrono::milliseconds timed(F&& f) {
  auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

constexpr fi_wait_obj set_kinds[] = {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND,
                                     FI_WAIT_YIELD, FI_WAIT_POLLFD};

class wait_set_test : public ::testing::Test {
 protected:
  fabric_handle fab;
};

// ---- fi_wait_open ----

TEST_F(wait_set_test, open_rejects_bad_arguments) {
  fid_wait* s = nullptr;
  fi_wait_attr a{};
  a.wait_obj = FI_WAIT_FD;
  EXPECT_EQ(fi_wait_open(fab.fab, nullptr, &s), -FI_EINVAL);
  EXPECT_EQ(fi_wait_open(fab.fab, &a, nullptr), -FI_EINVAL);
  a.flags = 1;
  EXPECT_EQ(fi_wait_open(fab.fab, &a, &s), -FI_EBADFLAGS);
  a.flags = 0;
  for (int w : {int{FI_WAIT_NONE}, int{FI_WAIT_SET}, 99}) {
    std::memcpy(&a.wait_obj, &w, sizeof w);
    EXPECT_EQ(fi_wait_open(fab.fab, &a, &s), -FI_EINVAL) << w;
  }
  EXPECT_EQ(s, nullptr);
}

TEST_F(wait_set_test, every_slot_is_filled) {
  set_handle s(fab.fab, FI_WAIT_FD);
  const fi_ops& f = *s.set->fid.ops;
  EXPECT_EQ(f.size, sizeof(fi_ops));
  EXPECT_TRUE(f.close && f.bind && f.control && f.ops_open && f.tostr && f.ops_set);
  EXPECT_EQ(s.set->ops->size, sizeof(fi_ops_wait));
  EXPECT_NE(s.set->ops->wait, nullptr);
}

TEST_F(wait_set_test, open_every_kind_and_report_it) {
  for (fi_wait_obj w : set_kinds) {
    set_handle s(fab.fab, w);
    ASSERT_NE(s.set, nullptr);
    EXPECT_EQ(s.set->fid.fclass, static_cast<size_t>(FI_CLASS_WAIT));
    fi_wait_obj got{};
    EXPECT_EQ(fi_control(&s.set->fid, FI_GETWAITOBJ, &got), 0);
    EXPECT_EQ(got, w == FI_WAIT_UNSPEC ? FI_WAIT_FD : w);
    EXPECT_EQ(fi_control(&s.set->fid, FI_GETWAITOBJ, nullptr), -FI_EINVAL);
    EXPECT_EQ(fi_control(&s.set->fid, FI_GETWAIT, nullptr), -FI_EINVAL);
    EXPECT_EQ(fi_control(&s.set->fid, 4321, &got), -FI_ENOSYS);
    EXPECT_EQ(fi_close(&fab.fab->fid), -FI_EBUSY);  // the set holds its fabric
  }
}

// ---- fi_wait ----

TEST_F(wait_set_test, empty_set_times_out) {
  for (fi_wait_obj w : set_kinds) {
    set_handle s(fab.fab, w);
    EXPECT_EQ(fi_wait(s.set, 0), -FI_ETIMEDOUT) << w;
    auto took = timed([&] { EXPECT_EQ(fi_wait(s.set, 30), -FI_ETIMEDOUT) << w; });
    EXPECT_GE(took, 29ms) << w;
  }
}

TEST_F(wait_set_test, attached_eq_keeps_the_set_open) {
  set_handle s(fab.fab, FI_WAIT_FD);
  {
    eq_handle q(fab.fab, s.set);
    ASSERT_NE(q.eq, nullptr);
    EXPECT_EQ(fi_close(&s.set->fid), -FI_EBUSY);
    fi_wait_obj w{};
    EXPECT_EQ(fi_control(&q.eq->fid, FI_GETWAITOBJ, &w), 0);
    EXPECT_EQ(w, FI_WAIT_SET);
    int fd;
    EXPECT_EQ(fi_control(&q.eq->fid, FI_GETWAIT, &fd), -FI_ENOSYS);
  }
  // Closing the EQ detached it; the set closes in the handle's destructor.
}

TEST_F(wait_set_test, eq_of_another_fabric_cannot_join) {
  fabric_handle other;
  set_handle s(other.fab, FI_WAIT_FD);
  fi_eq_attr attr{};
  attr.wait_obj = FI_WAIT_SET;
  attr.wait_set = s.set;
  fid_eq* q = nullptr;
  EXPECT_EQ(fi_eq_open(fab.fab, &attr, &q, nullptr), -FI_EINVAL);
}

TEST_F(wait_set_test, wait_returns_when_a_member_has_an_event) {
  for (fi_wait_obj w : set_kinds) {
    set_handle s(fab.fab, w);
    eq_handle a(fab.fab, s.set), b(fab.fab, s.set);
    EXPECT_EQ(fi_wait(s.set, 0), -FI_ETIMEDOUT) << w;
    b.write();
    EXPECT_EQ(fi_wait(s.set, 0), 0) << w;
    EXPECT_EQ(fi_wait(s.set, -1), 0) << w;  // level-triggered: still there
    EXPECT_GT(b.read(), 0);
    EXPECT_EQ(fi_wait(s.set, 0), -FI_ETIMEDOUT) << w;
  }
}

TEST_F(wait_set_test, wait_wakes_when_another_thread_writes) {
  for (fi_wait_obj w : set_kinds) {
    set_handle s(fab.fab, w);
    eq_handle q(fab.fab, s.set);
    std::thread t([&] {
      std::this_thread::sleep_for(20ms);
      q.write();
    });
    auto took = timed([&] { EXPECT_EQ(fi_wait(s.set, 5000), 0) << w; });
    EXPECT_LT(took, 3000ms) << w;
    t.join();
  }
}

struct pipe_hook {
  util::eq* q;
  int rd;
};

void post_when_readable(void* obj) noexcept {
  auto* h = static_cast<pipe_hook*>(obj);
  char c;
  if (::read(h->rd, &c, 1) != 1) return;
  fi_eq_entry e{};
  h->q->write_event(FI_NOTIFY, &e, sizeof e, 0);
}

// A provider socket registered on a member (add_wait_fd after the member
// joined the set) wakes fi_wait; fi_wait's progress turns it into an event.
TEST_F(wait_set_test, wait_wakes_on_a_members_provider_fd) {
  set_handle s(fab.fab, FI_WAIT_UNSPEC);
  eq_handle q(fab.fab, s.set);
  int p[2];
  ASSERT_EQ(::pipe2(p, O_NONBLOCK), 0);
  pipe_hook h{&q.self(), p[0]};
  q.self().progress().add({post_when_readable, &h});
  ASSERT_EQ(q.self().add_wait_fd(p[0]), errc::ok);
  std::thread t([&] {
    std::this_thread::sleep_for(30ms);
    ASSERT_EQ(::write(p[1], "x", 1), 1);
  });
  auto took = timed([&] { EXPECT_EQ(fi_wait(s.set, 5000), 0); });
  EXPECT_LT(took, 3000ms);
  t.join();
  EXPECT_GT(q.read(), 0);
  q.self().remove_wait_fd(p[0]);
  q.self().progress().remove(&h);
  ::close(p[0]);
  ::close(p[1]);
}

// ---- the set's own wait object and fi_trywait ----

TEST_F(wait_set_test, exported_fd_follows_the_members) {
  set_handle s(fab.fab, FI_WAIT_FD);
  eq_handle q(fab.fab, s.set);
  int fd = -1;
  ASSERT_EQ(fi_control(&s.set->fid, FI_GETWAIT, &fd), 0);
  fid* fids[] = {&s.set->fid};
  EXPECT_EQ(fi_trywait(fab.fab, fids, 1), 0);
  EXPECT_FALSE(readable(fd));
  q.write();
  EXPECT_TRUE(readable(fd));
  EXPECT_EQ(fi_trywait(fab.fab, fids, 1), -FI_EAGAIN);
  EXPECT_GT(q.read(), 0);
  EXPECT_EQ(fi_trywait(fab.fab, fids, 1), 0);
  EXPECT_FALSE(readable(fd));
  // A native sleeper wakes on a write from another thread.
  std::thread t([&] {
    std::this_thread::sleep_for(20ms);
    q.write();
  });
  pollfd pfd{fd, POLLIN, 0};
  EXPECT_EQ(::poll(&pfd, 1, 5000), 1);
  t.join();
}

TEST_F(wait_set_test, poll_fd_hands_out_the_sets_descriptor) {
  set_handle s(fab.fab, FI_WAIT_POLLFD);
  eq_handle q(fab.fab, s.set);
  fi_wait_pollfd p{};
  EXPECT_EQ(fi_control(&s.set->fid, FI_GETWAIT, &p), -FI_ETOOSMALL);
  EXPECT_EQ(p.nfds, 1u);
  uint64_t index = p.change_index;
  pollfd fds[1] = {};
  p.fd = fds;
  EXPECT_EQ(fi_control(&s.set->fid, FI_GETWAIT, &p), 0);
  EXPECT_EQ(p.change_index, index);
  q.write();
  EXPECT_EQ(::poll(fds, 1, 0), 1);
}

TEST_F(wait_set_test, yield_set_has_no_native_object) {
  set_handle s(fab.fab, FI_WAIT_YIELD);
  int fd;
  EXPECT_EQ(fi_control(&s.set->fid, FI_GETWAIT, &fd), -FI_ENOSYS);
}

TEST_F(wait_set_test, mutex_cond_is_broadcast_on_a_members_write) {
  set_handle s(fab.fab, FI_WAIT_MUTEX_COND);
  eq_handle q(fab.fab, s.set);
  fi_mutex_cond mc{};
  ASSERT_EQ(fi_control(&s.set->fid, FI_GETWAIT, &mc), 0);
  std::thread t([&] {
    std::this_thread::sleep_for(20ms);
    q.write();
  });
  fid* fids[] = {&s.set->fid};
  pthread_mutex_lock(mc.mutex);
  timespec ts{std::chrono::system_clock::to_time_t(std::chrono::system_clock::now() + 5s), 0};
  int rc = 0;
  while (fi_trywait(fab.fab, fids, 1) == 0 && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(mc.cond, mc.mutex, &ts);
  pthread_mutex_unlock(mc.mutex);
  EXPECT_NE(rc, ETIMEDOUT);
  EXPECT_GT(q.read(), 0);
  t.join();
}

TEST_F(wait_set_test, trywait_checks_its_arguments) {
  set_handle s(fab.fab, FI_WAIT_FD);
  EXPECT_EQ(fi_trywait(fab.fab, nullptr, 0), 0);
  EXPECT_EQ(fi_trywait(fab.fab, nullptr, 1), -FI_EINVAL);
  fid* fids[] = {&s.set->fid, nullptr};
  EXPECT_EQ(fi_trywait(fab.fab, fids, -1), -FI_EINVAL);
  EXPECT_EQ(fi_trywait(fab.fab, fids, 2), -FI_EINVAL);
  fids[1] = &fab.fab->fid;
  EXPECT_EQ(fi_trywait(fab.fab, fids, 2), -FI_EINVAL);
  fabric_handle other;
  EXPECT_EQ(fi_trywait(other.fab, fids, 1), -FI_EINVAL);  // a set of another fabric
}

// ---- the member interface, with a stand-in object ----

// What a CQ or counter looks like to the sets: a fid, a progress list, a
// wait object, and poll_links declared last.
struct stand_in : fid {
  explicit stand_in(size_t fclass, void* ctx = nullptr) : fid{} {
    this->fclass = fclass;
    this->context = ctx;
    EXPECT_EQ(waiter.open(), errc::ok);
  }
  wait_member member(const domain* dom = nullptr) {
    wait_member m;
    m.owner = this;
    m.waiter = &waiter;
    m.progress = &progress;
    m.has_event = [](struct fid* f) noexcept {
      return static_cast<stand_in*>(f)->ready.load();
    };
    m.dom = dom;
    m.links = &links;
    return m;
  }
  static void count_run(void* obj) noexcept { ++static_cast<stand_in*>(obj)->runs; }

  std::atomic<bool> ready{false};
  std::atomic<int> runs{0};
  progress_list progress;
  wait_fd waiter;
  poll_links links;
};

TEST_F(wait_set_test, binding_attaches_runs_progress_and_detaches) {
  set_handle s(fab.fab, FI_WAIT_FD);
  auto& set = *wait_set::from(s.set);
  stand_in cq(FI_CLASS_CQ);
  cq.progress.add({stand_in::count_run, &cq});
  {
    wait_set_binding b;
    ASSERT_EQ(b.bind(set, cq.member()), errc::ok);
    EXPECT_EQ(set.refs(), 1);
    EXPECT_EQ(fi_wait(s.set, 0), -FI_ETIMEDOUT);
    EXPECT_GE(cq.runs, 1);
    cq.ready = true;
    b.notify();
    EXPECT_EQ(fi_wait(s.set, 0), 0);
    cq.ready = false;
    // The member's own wait object signalled (fi_cq_signal, a socket): the
    // set wakes, finds nothing, and does not spin on it.
    cq.waiter.signal();
    int runs = cq.runs;
    auto took = timed([&] { EXPECT_EQ(fi_wait(s.set, 50), -FI_ETIMEDOUT); });
    EXPECT_GE(took, 49ms);
    EXPECT_LE(cq.runs - runs, 3);
  }
  EXPECT_EQ(set.refs(), 0);
  int before = cq.runs;
  EXPECT_EQ(fi_wait(s.set, 0), -FI_ETIMEDOUT);
  EXPECT_EQ(cq.runs, before);  // detached: no longer driven
}

TEST_F(wait_set_test, attach_rejects_an_incomplete_member) {
  set_handle s(fab.fab, FI_WAIT_FD);
  wait_set_binding b;
  EXPECT_EQ(b.bind(*wait_set::from(s.set), wait_member{}), errc::inval);
  EXPECT_FALSE(b);
}

// ---- poll sets ----

class poll_set_test : public ::testing::Test {
 protected:
  void SetUp() override {
    fi_info* info = core::dup_info(nullptr, core::abi_current);
    ASSERT_NE(info, nullptr);
    info->domain_attr->threading = FI_THREAD_SAFE;
    ASSERT_EQ(domain::open(fab.self(), &no_domain_hooks, *info, &dom, nullptr), 0);
    core::free_info(info);
    fi_poll_attr attr{};
    ASSERT_EQ(fi_poll_open(dom, &attr, &ps), 0);
  }
  void TearDown() override {
    if (ps) {
      EXPECT_EQ(fi_close(&ps->fid), 0);
    }
    EXPECT_EQ(fi_close(&dom->fid), 0);
  }
  poll_set& set() { return *poll_set::from(ps); }
  domain* dom_self() { return domain::from(dom); }

  fabric_handle fab;
  fid_domain* dom = nullptr;
  fid_poll* ps = nullptr;
};

TEST_F(poll_set_test, open_rejects_bad_arguments) {
  fid_poll* p = nullptr;
  fi_poll_attr attr{};
  EXPECT_EQ(fi_poll_open(dom, nullptr, &p), -FI_EINVAL);
  EXPECT_EQ(fi_poll_open(dom, &attr, nullptr), -FI_EINVAL);
  attr.flags = 1;
  EXPECT_EQ(fi_poll_open(dom, &attr, &p), -FI_EBADFLAGS);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(ps->fid.fclass, static_cast<size_t>(FI_CLASS_POLL));
  EXPECT_EQ(fi_close(&dom->fid), -FI_EBUSY);  // the poll set holds its domain
}

TEST_F(poll_set_test, every_slot_is_filled) {
  const fi_ops& f = *ps->fid.ops;
  EXPECT_EQ(f.size, sizeof(fi_ops));
  EXPECT_TRUE(f.close && f.bind && f.control && f.ops_open && f.tostr && f.ops_set);
  const fi_ops_poll& o = *ps->ops;
  EXPECT_EQ(o.size, sizeof(fi_ops_poll));
  EXPECT_TRUE(o.poll && o.poll_add && o.poll_del);
}

TEST_F(poll_set_test, add_and_del_check_their_arguments) {
  EXPECT_EQ(fi_poll_add(ps, nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(fi_poll_del(ps, nullptr, 0), -FI_EINVAL);
  stand_in cq(FI_CLASS_CQ);
  EXPECT_EQ(fi_poll_add(ps, &cq, FI_SEND), -FI_EBADFLAGS);
  EXPECT_EQ(fi_poll_del(ps, &cq, FI_SEND), -FI_EBADFLAGS);
  EXPECT_EQ(fi_poll_add(ps, &dom->fid, 0), -FI_EINVAL);  // neither CQ nor counter
  fi_eq_attr attr{};
  fid_eq* eq = nullptr;
  ASSERT_EQ(fi_eq_open(fab.fab, &attr, &eq, nullptr), 0);
  EXPECT_EQ(fi_poll_add(ps, &eq->fid, 0), -FI_EINVAL);  // fi_poll(3): CQs and counters
  EXPECT_EQ(fi_close(&eq->fid), 0);
  EXPECT_EQ(fi_poll_del(ps, &cq, 0), -FI_ENOENT);
  wait_member incomplete = cq.member();
  incomplete.links = nullptr;
  EXPECT_EQ(set().add_member(incomplete), -FI_EINVAL);
}

TEST_F(poll_set_test, members_of_another_domain_are_refused) {
  fi_info* info = core::dup_info(nullptr, core::abi_current);
  fid_domain* other = nullptr;
  ASSERT_EQ(domain::open(fab.self(), &no_domain_hooks, *info, &other, nullptr), 0);
  core::free_info(info);
  stand_in cq(FI_CLASS_CQ);
  EXPECT_EQ(set().add_member(cq.member(domain::from(other))), -FI_EINVAL);
  EXPECT_EQ(set().add_member(cq.member(dom_self())), 0);
  EXPECT_EQ(fi_close(&other->fid), 0);
}

TEST_F(poll_set_test, poll_reports_the_contexts_of_members_with_events) {
  int ctx[3];
  stand_in a(FI_CLASS_CQ, &ctx[0]), b(FI_CLASS_CNTR, &ctx[1]), c(FI_CLASS_CQ, &ctx[2]);
  for (stand_in* m : {&a, &b, &c}) {
    m->progress.add({stand_in::count_run, m});
    ASSERT_EQ(set().add_member(m->member()), 0);
  }
  ASSERT_EQ(set().add_member(a.member()), 0);  // twice: listed once

  void* out[3] = {};
  EXPECT_EQ(fi_poll(ps, out, 3), 0);
  EXPECT_EQ(a.runs + b.runs + c.runs, 3);
  a.ready = c.ready = true;
  EXPECT_EQ(fi_poll(ps, out, 3), 2);
  EXPECT_EQ(out[0], &ctx[0]);
  EXPECT_EQ(out[1], &ctx[2]);
  // A short array gets what fits; every member still progresses.
  int before = c.runs;
  EXPECT_EQ(fi_poll(ps, out, 1), 1);
  EXPECT_EQ(out[0], &ctx[0]);
  EXPECT_EQ(c.runs, before + 1);
  EXPECT_EQ(fi_poll(ps, out, 0), 0);
  EXPECT_EQ(fi_poll(ps, nullptr, 1), -FI_EINVAL);
  EXPECT_EQ(fi_poll(ps, out, -1), -FI_EINVAL);

  EXPECT_EQ(fi_poll_del(ps, &a, 0), 0);
  EXPECT_EQ(fi_poll_del(ps, &a, 0), -FI_ENOENT);
  EXPECT_EQ(fi_poll(ps, out, 3), 1);
  EXPECT_EQ(out[0], &ctx[2]);
}

// Applications close their CQs before the poll set (fabtests does): the CQ's
// poll_links take it out, and fi_poll never touches the closed object.
TEST_F(poll_set_test, closing_a_member_first_leaves_the_set) {
  auto cq = std::make_unique<stand_in>(FI_CLASS_CQ);
  cq->ready = true;
  ASSERT_EQ(set().add_member(cq->member()), 0);
  void* out[1];
  EXPECT_EQ(fi_poll(ps, out, 1), 1);
  cq.reset();
  EXPECT_EQ(fi_poll(ps, out, 1), 0);  // AddressSanitizer guards this
}

TEST_F(poll_set_test, closing_the_set_first_leaves_nothing_behind) {
  stand_in cq(FI_CLASS_CQ);
  ASSERT_EQ(set().add_member(cq.member()), 0);
  fi_poll_attr attr{};
  fid_poll* second = nullptr;
  ASSERT_EQ(fi_poll_open(dom, &attr, &second), 0);
  ASSERT_EQ(poll_set::from(second)->add_member(cq.member()), 0);
  EXPECT_EQ(fi_close(&ps->fid), 0);
  ps = nullptr;
  EXPECT_EQ(fi_close(&second->fid), 0);
  // cq's poll_links now list no set; its destructor must not touch them.
}

// ---- with the real CQ and counter ----

TEST_F(poll_set_test, real_cq_and_counter) {
  int cq_ctx, cntr_ctx;
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_CONTEXT;
  fid_cq* cq = nullptr;
  ASSERT_EQ(fi_cq_open(dom, &cq_attr, &cq, &cq_ctx), 0);
  fi_cntr_attr cntr_attr{};
  fid_cntr* cntr = nullptr;
  ASSERT_EQ(fi_cntr_open(dom, &cntr_attr, &cntr, &cntr_ctx), 0);
  ASSERT_EQ(fi_poll_add(ps, &cq->fid, 0), 0);
  ASSERT_EQ(fi_poll_add(ps, &cntr->fid, 0), 0);

  void* out[2] = {};
  EXPECT_EQ(fi_poll(ps, out, 2), 0);
  ASSERT_TRUE(util::cq::from(cq)->write<mutex_lock>(cq_entry{}));
  util::cntr::from(cntr)->inc();
  EXPECT_EQ(fi_poll(ps, out, 2), 2);
  EXPECT_EQ(out[0], &cq_ctx);
  EXPECT_EQ(out[1], &cntr_ctx);
  // The CQ stays non-empty; the counter's change was reported once.
  EXPECT_EQ(fi_poll(ps, out, 2), 1);
  EXPECT_EQ(out[0], &cq_ctx);

  // Closed before the poll set, as fabtests does: no -FI_EBUSY, no trace.
  EXPECT_EQ(fi_close(&cq->fid), 0);
  EXPECT_EQ(fi_close(&cntr->fid), 0);
  EXPECT_EQ(fi_poll(ps, out, 2), 0);
}

TEST_F(poll_set_test, real_cq_and_counter_on_a_wait_set) {
  set_handle s(fab.fab, FI_WAIT_FD);
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_CONTEXT;
  cq_attr.wait_obj = FI_WAIT_SET;
  cq_attr.wait_set = s.set;
  fid_cq* cq = nullptr;
  ASSERT_EQ(fi_cq_open(dom, &cq_attr, &cq, nullptr), 0);
  fi_cntr_attr cntr_attr{};
  cntr_attr.wait_obj = FI_WAIT_SET;
  cntr_attr.wait_set = s.set;
  fid_cntr* cntr = nullptr;
  ASSERT_EQ(fi_cntr_open(dom, &cntr_attr, &cntr, nullptr), 0);
  EXPECT_EQ(fi_close(&s.set->fid), -FI_EBUSY);

  EXPECT_EQ(fi_wait(s.set, 0), -FI_ETIMEDOUT);
  std::thread t([&] {
    std::this_thread::sleep_for(20ms);
    util::cq::from(cq)->write<mutex_lock>(cq_entry{});
  });
  auto took = timed([&] { EXPECT_EQ(fi_wait(s.set, 5000), 0); });
  EXPECT_LT(took, 3000ms);
  t.join();
  fi_cq_entry e;
  EXPECT_EQ(fi_cq_read(cq, &e, 1), 1);
  EXPECT_EQ(fi_wait(s.set, 0), -FI_ETIMEDOUT);

  std::thread u([&] {
    std::this_thread::sleep_for(20ms);
    util::cntr::from(cntr)->inc();
  });
  took = timed([&] { EXPECT_EQ(fi_wait(s.set, 5000), 0); });
  EXPECT_LT(took, 3000ms);
  u.join();
  EXPECT_EQ(fi_wait(s.set, 0), -FI_ETIMEDOUT);  // the change was reported

  fid* fids[] = {&cq->fid, &cntr->fid, &s.set->fid};
  EXPECT_EQ(fi_trywait(fab.fab, fids, 3), 0);
  util::cntr::from(cntr)->inc();
  EXPECT_EQ(fi_trywait(fab.fab, fids, 3), -FI_EAGAIN);

  EXPECT_EQ(fi_close(&cq->fid), 0);
  EXPECT_EQ(fi_close(&cntr->fid), 0);
}

}  // namespace
}  // namespace weft::util
