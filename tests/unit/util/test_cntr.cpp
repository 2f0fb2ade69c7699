// SPDX-License-Identifier: MIT
// weft — unit tests of the completion counter (util/cntr), through the
// fi_cntr_* C API on counters opened from a domain, and from the provider
// side (inc/add/inc_err, progress hooks, wait fds).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "util/cntr.hpp"
#include "util/domain.hpp"
#include "util/fabric.hpp"
#include "util_env.hpp"
#include "util/wait_set.hpp"

using namespace weft;
using namespace weft::util;

namespace {
fi_provider& test_prov = *test_env::provider();
}  // namespace

namespace {

// A domain opened on a fabric, per threading model.
class cntr_test : public ::testing::TestWithParam<fi_threading> {
 protected:
  void SetUp() override {
    env_.open(GetParam());
    fab_ = env_.fab;
    dom_ = env_.dom;
  }
  void TearDown() override {
    for (fid_cntr* c : open_) EXPECT_EQ(fi_close(&c->fid), 0);
    env_.close();
  }
  fid_cntr* open(fi_wait_obj w) {
    fi_cntr_attr a{};
    a.events = FI_CNTR_EVENTS_COMP;
    a.wait_obj = w;
    fid_cntr* c = nullptr;
    EXPECT_EQ(fi_cntr_open(dom_, &a, &c, this), 0);
    if (c) open_.push_back(c);
    return c;
  }
  int try_open(fi_cntr_attr* a) {
    fid_cntr* c = nullptr;
    int ret = fi_cntr_open(dom_, a, &c, nullptr);
    if (ret == 0) open_.push_back(c);
    return ret;
  }

  test_env::domain_pair env_;
  fabric* fab_ = nullptr;
  domain* dom_ = nullptr;
  std::vector<fid_cntr*> open_;
};

// A provider endpoint in miniature: each progress run completes what is
// pending on it.
struct fake_ep {
  cntr* c;
  std::atomic<int> pending{0};
  std::atomic<int> runs{0};
  int read_fd = -1;  // drained on progress when set
  static void progress(void* p) noexcept {
    auto* ep = static_cast<fake_ep*>(p);
    ep->runs.fetch_add(1);
    if (ep->read_fd >= 0) {
      char buf[16];
      while (::read(ep->read_fd, buf, sizeof buf) > 0) {
      }
    }
    int n = ep->pending.exchange(0);
    if (n) ep->c->add(n);
  }
};

uint64_t ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               t0)
      .count();
}

TEST_P(cntr_test, open_validates_attributes) {
  fid_cntr* c;
  fi_cntr_attr a{};
  EXPECT_EQ(fi_cntr_open(dom_, &a, nullptr, nullptr), -FI_EINVAL);
  a.events = FI_CNTR_EVENTS_BYTES;
  EXPECT_EQ(try_open(&a), -FI_ENOSYS);
  a.events = static_cast<fi_cntr_events>(7);
  EXPECT_EQ(try_open(&a), -FI_EINVAL);
  a.events = FI_CNTR_EVENTS_COMP;
  a.flags = 1;
  EXPECT_EQ(try_open(&a), -FI_EBADFLAGS);
  a.flags = 0;
  a.wait_obj = static_cast<fi_wait_obj>(99);
  EXPECT_EQ(try_open(&a), -FI_EINVAL);
  a.wait_obj = FI_WAIT_POLLFD;
  EXPECT_EQ(try_open(&a), -FI_ENOSYS);
  a.wait_obj = FI_WAIT_SET;
  EXPECT_EQ(try_open(&a), -FI_EINVAL);  // no wait set given
  fid not_a_set{};
  not_a_set.fclass = FI_CLASS_CQ;
  a.wait_set = reinterpret_cast<fid_wait*>(&not_a_set);
  EXPECT_EQ(try_open(&a), -FI_EINVAL);  // wrong class
  // A null attr takes the defaults (FI_WAIT_NONE).
  ASSERT_EQ(fi_cntr_open(dom_, nullptr, &c, nullptr), 0);
  open_.push_back(c);
  EXPECT_EQ(c->fid.fclass, FI_CLASS_CNTR);
  EXPECT_EQ(fi_cntr_wait(c, 0, 0), -FI_ENOSYS);
}

TEST_P(cntr_test, every_slot_is_filled) {
  fid_cntr* c = open(FI_WAIT_NONE);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->fid.context, this);
  EXPECT_EQ(c->ops->size, sizeof(fi_ops_cntr));
  EXPECT_NE(c->ops->read, nullptr);
  EXPECT_NE(c->ops->readerr, nullptr);
  EXPECT_NE(c->ops->add, nullptr);
  EXPECT_NE(c->ops->set, nullptr);
  EXPECT_NE(c->ops->wait, nullptr);
  EXPECT_NE(c->ops->adderr, nullptr);
  EXPECT_NE(c->ops->seterr, nullptr);
  EXPECT_NE(c->fid.ops->close, nullptr);
  EXPECT_NE(c->fid.ops->control, nullptr);
  EXPECT_NE(c->fid.ops->bind, nullptr);
  EXPECT_NE(c->fid.ops->ops_open, nullptr);
}

TEST_P(cntr_test, add_set_and_errors) {
  fid_cntr* c = open(FI_WAIT_NONE);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(fi_cntr_read(c), 0u);
  EXPECT_EQ(fi_cntr_readerr(c), 0u);
  EXPECT_EQ(fi_cntr_add(c, 5), 0);
  EXPECT_EQ(fi_cntr_add(c, 7), 0);
  EXPECT_EQ(fi_cntr_read(c), 12u);
  EXPECT_EQ(fi_cntr_set(c, 3), 0);
  EXPECT_EQ(fi_cntr_read(c), 3u);
  EXPECT_EQ(fi_cntr_adderr(c, 2), 0);
  EXPECT_EQ(fi_cntr_readerr(c), 2u);
  EXPECT_EQ(fi_cntr_seterr(c, 0), 0);
  EXPECT_EQ(fi_cntr_readerr(c), 0u);
  EXPECT_EQ(fi_cntr_read(c), 3u);  // the two values are separate
  // The 64-bit count does not saturate at 32 bits.
  EXPECT_EQ(fi_cntr_set(c, uint64_t{1} << 40), 0);
  EXPECT_EQ(fi_cntr_add(c, 1), 0);
  EXPECT_EQ(fi_cntr_read(c), (uint64_t{1} << 40) + 1);
}

TEST_P(cntr_test, provider_side_updates) {
  fid_cntr* c = open(FI_WAIT_NONE);
  ASSERT_NE(c, nullptr);
  cntr* k = cntr::from(c);
  k->inc();
  k->add(9);
  k->inc_err();
  EXPECT_EQ(fi_cntr_read(c), 10u);
  EXPECT_EQ(fi_cntr_readerr(c), 1u);
  EXPECT_EQ(k->waiter(), nullptr);         // FI_WAIT_NONE has no wait object
  EXPECT_EQ(k->add_wait_fd(0), errc::ok);  // and ignores fds
}

TEST_P(cntr_test, read_runs_manual_progress) {
  fid_cntr* c = open(FI_WAIT_NONE);
  ASSERT_NE(c, nullptr);
  fake_ep ep{cntr::from(c)};
  cntr::from(c)->progress().add({fake_ep::progress, &ep});
  ep.pending = 4;
  EXPECT_EQ(fi_cntr_read(c), 4u);
  EXPECT_EQ(fi_cntr_readerr(c), 0u);
  EXPECT_EQ(ep.runs.load(), 2);
  cntr::from(c)->progress().remove(&ep);
  ep.pending = 1;
  EXPECT_EQ(fi_cntr_read(c), 4u);
}

TEST_P(cntr_test, no_signal_without_a_waiter) {
  fid_cntr* c = open(FI_WAIT_FD);
  ASSERT_NE(c, nullptr);
  cntr* k = cntr::from(c);
  ASSERT_NE(k->waiter(), nullptr);
  k->inc();
  k->inc_err();
  fi_cntr_add(c, 1);
  // Nobody waits and the fd was never handed out: the eventfd stayed quiet.
  EXPECT_EQ(k->waiter()->wait(0), errc::timedout);
}

TEST_P(cntr_test, wait_returns_at_once_when_reached) {
  for (fi_wait_obj w : {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD}) {
    fid_cntr* c = open(w);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(fi_cntr_wait(c, 0, 0), 0);
    fi_cntr_add(c, 3);
    EXPECT_EQ(fi_cntr_wait(c, 3, 0), 0);
    EXPECT_EQ(fi_cntr_wait(c, 2, -1), 0);
    EXPECT_EQ(fi_cntr_wait(c, 4, 0), -FI_ETIMEDOUT);
  }
}

TEST_P(cntr_test, wait_times_out) {
  for (fi_wait_obj w : {FI_WAIT_UNSPEC, FI_WAIT_YIELD}) {
    fid_cntr* c = open(w);
    ASSERT_NE(c, nullptr);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(fi_cntr_wait(c, 1, 50), -FI_ETIMEDOUT);
    EXPECT_GE(ms_since(t0), 49u);
    EXPECT_EQ(fi_cntr_readerr(c), 0u);  // a timeout leaves the error value alone
  }
}

TEST_P(cntr_test, wait_is_invalid_without_a_wait_object) {
  fid_cntr* c = open(FI_WAIT_NONE);
  ASSERT_NE(c, nullptr);
  fi_cntr_add(c, 1);
  EXPECT_EQ(fi_cntr_wait(c, 1, 0), -FI_ENOSYS);
}

TEST_P(cntr_test, errors_before_the_wait_do_not_end_it) {
  fid_cntr* c = open(FI_WAIT_UNSPEC);
  ASSERT_NE(c, nullptr);
  fi_cntr_adderr(c, 1);
  EXPECT_EQ(fi_cntr_wait(c, 1, 10), -FI_ETIMEDOUT);
}

TEST_P(cntr_test, another_thread_wakes_the_waiter) {
  for (fi_wait_obj w : {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD}) {
    fid_cntr* c = open(w);
    ASSERT_NE(c, nullptr);
    cntr* k = cntr::from(c);
    std::thread t([k] {
      for (int i = 0; i < 5; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        k->inc();
      }
    });
    EXPECT_EQ(fi_cntr_wait(c, 5, 5000), 0) << "wait object " << w;
    t.join();
    EXPECT_EQ(fi_cntr_read(c), 5u);
  }
}

TEST_P(cntr_test, error_during_the_wait_ends_it) {
  for (fi_wait_obj w : {FI_WAIT_FD, FI_WAIT_YIELD}) {
    fid_cntr* c = open(w);
    ASSERT_NE(c, nullptr);
    std::thread t([k = cntr::from(c)] {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      k->inc_err();
    });
    EXPECT_EQ(fi_cntr_wait(c, 1, -1), -FI_EAVAIL);
    t.join();
    // fi_cntr_seterr from another thread counts as a change too.
    std::thread t2([c] {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      fi_cntr_seterr(c, 0);
    });
    EXPECT_EQ(fi_cntr_wait(c, 1, 5000), -FI_EAVAIL);
    t2.join();
  }
}

TEST_P(cntr_test, set_satisfies_a_waiter) {
  fid_cntr* c = open(FI_WAIT_FD);
  ASSERT_NE(c, nullptr);
  std::thread t([c] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    fi_cntr_set(c, 100);
  });
  EXPECT_EQ(fi_cntr_wait(c, 50, 5000), 0);
  t.join();
}

TEST_P(cntr_test, wait_drives_progress_on_fd_readiness) {
  fid_cntr* c = open(FI_WAIT_FD);
  ASSERT_NE(c, nullptr);
  cntr* k = cntr::from(c);
  int p[2];
  ASSERT_EQ(pipe2(p, O_NONBLOCK), 0);
  fake_ep ep{k};
  ep.read_fd = p[0];
  k->progress().add({fake_ep::progress, &ep});
  ASSERT_EQ(k->add_wait_fd(p[0]), errc::ok);
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ep.pending = 2;
    char x = 1;
    ASSERT_EQ(::write(p[1], &x, 1), 1);  // "data arrived on the socket"
  });
  EXPECT_EQ(fi_cntr_wait(c, 2, 5000), 0);
  t.join();
  EXPECT_GE(ep.runs.load(), 2);
  k->remove_wait_fd(p[0]);
  k->progress().remove(&ep);
  ::close(p[0]);
  ::close(p[1]);
}

TEST_P(cntr_test, yield_wait_drives_progress) {
  fid_cntr* c = open(FI_WAIT_YIELD);
  ASSERT_NE(c, nullptr);
  fake_ep ep{cntr::from(c)};
  cntr::from(c)->progress().add({fake_ep::progress, &ep});
  ep.pending = 3;
  EXPECT_EQ(fi_cntr_wait(c, 3, 1000), 0);
  cntr::from(c)->progress().remove(&ep);
}

TEST_P(cntr_test, many_producers_one_waiter) {
  fid_cntr* c = open(FI_WAIT_UNSPEC);
  ASSERT_NE(c, nullptr);
  cntr* k = cntr::from(c);
  constexpr int threads = 4, per_thread = 20000;
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i)
    ts.emplace_back([k] {
      for (int j = 0; j < per_thread; ++j) k->inc();
    });
  EXPECT_EQ(fi_cntr_wait(c, threads * per_thread, 10000), 0);
  for (auto& t : ts) t.join();
  EXPECT_EQ(fi_cntr_read(c), uint64_t{threads * per_thread});
}

TEST_P(cntr_test, getwait_fd_becomes_readable) {
  fid_cntr* c = open(FI_WAIT_FD);
  ASSERT_NE(c, nullptr);
  int fd = -1;
  ASSERT_EQ(fi_control(&c->fid, FI_GETWAIT, &fd), 0);
  ASSERT_GE(fd, 0);
  fi_wait_obj obj;
  ASSERT_EQ(fi_control(&c->fid, FI_GETWAITOBJ, &obj), 0);
  EXPECT_EQ(obj, FI_WAIT_FD);
  cntr* k = cntr::from(c);
  fid* fids[] = {&c->fid};
  EXPECT_EQ(fi_trywait(fab_, fids, 1), 0);  // nothing pending: safe to block
  pollfd pfd{fd, POLLIN, 0};
  EXPECT_EQ(poll(&pfd, 1, 0), 0);
  std::thread t([k] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    k->inc();
  });
  EXPECT_EQ(poll(&pfd, 1, 5000), 1);  // the update woke a native sleeper
  t.join();
  EXPECT_EQ(fi_trywait(fab_, fids, 1), -FI_EAGAIN);  // an update was pending...
  EXPECT_EQ(fi_trywait(fab_, fids, 1), 0);           // ...and has been consumed
  EXPECT_EQ(poll(&pfd, 1, 0), 0);                    // and the fd reads idle again
  EXPECT_EQ(fi_cntr_read(c), 1u);
}

TEST_P(cntr_test, getwait_per_wait_object) {
  int fd;
  EXPECT_EQ(fi_control(&open(FI_WAIT_NONE)->fid, FI_GETWAIT, &fd), -FI_ENOSYS);
  EXPECT_EQ(fi_control(&open(FI_WAIT_YIELD)->fid, FI_GETWAIT, &fd), -FI_ENOSYS);
  fid_cntr* u = open(FI_WAIT_UNSPEC);
  EXPECT_EQ(fi_control(&u->fid, FI_GETWAIT, nullptr), -FI_EINVAL);
  fi_wait_obj obj;
  EXPECT_EQ(fi_control(&u->fid, FI_GETWAITOBJ, &obj), 0);
  EXPECT_EQ(obj, FI_WAIT_FD);
  fid_cntr* m = open(FI_WAIT_MUTEX_COND);
  fi_mutex_cond mc{};
  ASSERT_EQ(fi_control(&m->fid, FI_GETWAIT, &mc), 0);
  ASSERT_NE(mc.mutex, nullptr);
  ASSERT_NE(mc.cond, nullptr);
  // The application sleeps on the condition; a provider update wakes it.
  std::atomic<bool> done{false};
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    cntr::from(m)->inc();
    done = true;
  });
  pthread_mutex_lock(mc.mutex);
  while (fi_cntr_read(m) < 1) {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 5;
    if (pthread_cond_timedwait(mc.cond, mc.mutex, &ts) == ETIMEDOUT) break;
  }
  pthread_mutex_unlock(mc.mutex);
  t.join();
  EXPECT_EQ(fi_cntr_read(m), 1u);
}

TEST_P(cntr_test, control_commands) {
  fid_cntr* c = open(FI_WAIT_NONE);
  uint64_t flags = 7;
  EXPECT_EQ(fi_control(&c->fid, FI_GETOPSFLAG, &flags), 0);
  EXPECT_EQ(flags, 0u);
  flags = FI_SEND;
  EXPECT_EQ(fi_control(&c->fid, FI_SETOPSFLAG, &flags), -FI_EBADFLAGS);
  EXPECT_EQ(fi_control(&c->fid, FI_GETOPSFLAG, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_control(&c->fid, FI_ENABLE, nullptr), -FI_ENOSYS);
  EXPECT_EQ(fi_control(&c->fid, 12345, nullptr), -FI_ENOSYS);
  fid other{};
  EXPECT_EQ(c->fid.ops->bind(&c->fid, &other, 0), -FI_ENOSYS);
}

TEST_P(cntr_test, close_is_refused_while_referenced) {
  fid_cntr* c = open(FI_WAIT_UNSPEC);
  EXPECT_TRUE(dom_->busy());  // the counter holds its domain
  EXPECT_EQ(fi_close(&dom_->fid), -FI_EBUSY);
  {
    ref<cntr> bound(cntr::from(c));  // what an endpoint binding holds
    EXPECT_EQ(fi_close(&c->fid), -FI_EBUSY);
  }
  open_.clear();
  EXPECT_EQ(fi_close(&c->fid), 0);
  EXPECT_FALSE(dom_->busy());
}

TEST_P(cntr_test, wait_set_member) {
  fi_wait_attr wa{};
  wa.wait_obj = FI_WAIT_UNSPEC;
  fid_wait* ws = nullptr;
  ASSERT_EQ(fi_wait_open(fab_, &wa, &ws), 0);
  fi_cntr_attr a{};
  a.wait_obj = FI_WAIT_SET;
  a.wait_set = ws;
  fid_cntr* c = nullptr;
  ASSERT_EQ(fi_cntr_open(dom_, &a, &c, this), 0);
  EXPECT_EQ(fi_cntr_wait(c, 0, 0), -FI_ENOSYS);  // invalid on a wait set member
  int fd;
  EXPECT_EQ(fi_control(&c->fid, FI_GETWAIT, &fd), -FI_ENOSYS);
  fi_wait_obj obj;
  EXPECT_EQ(fi_control(&c->fid, FI_GETWAITOBJ, &obj), 0);
  EXPECT_EQ(obj, FI_WAIT_SET);
  EXPECT_EQ(fi_wait(ws, 0), -FI_ETIMEDOUT);
  std::thread t([k = cntr::from(c)] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    k->inc();
  });
  EXPECT_EQ(fi_wait(ws, 5000), 0);  // the update woke the set's sleeper
  t.join();
  EXPECT_EQ(fi_cntr_read(c), 1u);
  EXPECT_EQ(fi_wait(ws, 0), -FI_ETIMEDOUT);  // the change was reported once
  // Progress registered on the counter runs when the set is waited on.
  fake_ep ep{cntr::from(c)};
  cntr::from(c)->progress().add({fake_ep::progress, &ep});
  ep.pending = 1;
  EXPECT_EQ(fi_wait(ws, 1000), 0);
  EXPECT_EQ(fi_cntr_read(c), 2u);
  cntr::from(c)->progress().remove(&ep);
  EXPECT_EQ(fi_close(&ws->fid), -FI_EBUSY);  // the counter is attached
  EXPECT_EQ(fi_close(&c->fid), 0);
  EXPECT_EQ(fi_close(&ws->fid), 0);
}

TEST_P(cntr_test, wait_set_of_another_fabric_is_refused) {
  fi_fabric_attr fa{};
  fa.api_version = FI_VERSION(1, 21);
  auto* other = new fabric(&test_prov, nullptr, fa, nullptr);
  fi_wait_attr wa{};
  wa.wait_obj = FI_WAIT_FD;
  fid_wait* ws = nullptr;
  ASSERT_EQ(fi_wait_open(other, &wa, &ws), 0);
  fi_cntr_attr a{};
  a.wait_obj = FI_WAIT_SET;
  a.wait_set = ws;
  EXPECT_EQ(try_open(&a), -FI_EINVAL);
  EXPECT_EQ(fi_close(&ws->fid), 0);
  EXPECT_EQ(fi_close(&other->fid), 0);
}

TEST_P(cntr_test, poll_set_reports_changes_once) {
  fid_poll* ps = nullptr;
  fi_poll_attr pa{};
  ASSERT_EQ(fi_poll_open(dom_, &pa, &ps), 0);
  fid_cntr* c = open(FI_WAIT_NONE);
  ASSERT_EQ(fi_poll_add(ps, &c->fid, 0), 0);
  void* ctx[4] = {};
  EXPECT_EQ(fi_poll(ps, ctx, 4), 0);
  cntr::from(c)->inc();
  EXPECT_EQ(fi_poll(ps, ctx, 4), 1);
  EXPECT_EQ(ctx[0], this);
  EXPECT_EQ(fi_poll(ps, ctx, 4), 0);
  cntr::from(c)->inc_err();  // an error is a change too
  EXPECT_EQ(fi_poll(ps, ctx, 4), 1);
  EXPECT_EQ(fi_poll_del(ps, &c->fid, 0), 0);
  cntr::from(c)->inc();
  EXPECT_EQ(fi_poll(ps, ctx, 4), 0);
  // Closing a counter still listed takes it out of the poll set.
  ASSERT_EQ(fi_poll_add(ps, &c->fid, 0), 0);
  open_.clear();
  EXPECT_EQ(fi_close(&c->fid), 0);
  EXPECT_EQ(fi_poll(ps, ctx, 4), 0);
  EXPECT_EQ(fi_close(&ps->fid), 0);
}

INSTANTIATE_TEST_SUITE_P(threading, cntr_test,
                         ::testing::Values(FI_THREAD_DOMAIN, FI_THREAD_COMPLETION, FI_THREAD_SAFE),
                         [](const auto& info) {
                           switch (info.param) {
                             case FI_THREAD_DOMAIN:
                               return "domain";
                             case FI_THREAD_COMPLETION:
                               return "completion";
                             default:
                               return "safe";
                           }
                         });

}  // namespace
