// SPDX-License-Identifier: MIT
// weft — the event queue, through the public C API (fi_eq_*) on EQs opened
// from a util::fabric, and through the provider-facing members.
#include "core/info.hpp"
#include "util/eq.hpp"
#include "util/fabric.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <thread>
#include <unistd.h>

namespace weft::util {
namespace {

using namespace std::chrono_literals;

fi_provider test_prov = {.name = const_cast<char*>("eqtest")};
constexpr fabric_hooks no_hooks = {};

// A fabric opened for a caller of API `version`.
struct fabric_handle {
  fid_fabric* fab = nullptr;
  explicit fabric_handle(uint32_t version = FI_VERSION(1, 20)) {
    fi_fabric_attr attr{};
    attr.name = const_cast<char*>("eqtest");
    attr.api_version = version;
    EXPECT_EQ(fabric::open(&test_prov, &no_hooks, &attr, &fab, nullptr), 0);
  }
  ~fabric_handle() { EXPECT_EQ(fi_close(&fab->fid), 0); }
};

struct eq_handle {
  fid_eq* eq = nullptr;
  eq_handle(fid_fabric* fab, fi_eq_attr attr) {
    EXPECT_EQ(fi_eq_open(fab, &attr, &eq, this), 0);
  }
  ~eq_handle() {
    if (eq) {
      EXPECT_EQ(fi_close(&eq->fid), 0);
    }
  }
  util::eq& self() const { return *util::eq::from(eq); }
};

fi_eq_attr attr_of(fi_wait_obj w, uint64_t flags = FI_WRITE, size_t size = 0) {
  fi_eq_attr a{};
  a.size = size;
  a.flags = flags;
  a.wait_obj = w;
  return a;
}

fi_eq_entry entry(uint64_t data) {
  fi_eq_entry e{};
  e.context = reinterpret_cast<void*>(0x1234);
  e.data = data;
  return e;
}

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

class eq_test : public ::testing::Test {
 protected:
  fabric_handle fab;
};

// ---- open ----

TEST_F(eq_test, open_rejects_bad_arguments) {
  fid_eq* q = nullptr;
  fi_eq_attr a = attr_of(FI_WAIT_NONE);
  EXPECT_EQ(fi_eq_open(fab.fab, nullptr, &q, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_eq_open(fab.fab, &a, nullptr, nullptr), -FI_EINVAL);
  a.flags = FI_WRITE | FI_SEND;
  EXPECT_EQ(fi_eq_open(fab.fab, &a, &q, nullptr), -FI_EBADFLAGS);
  a = attr_of(FI_WAIT_NONE);
  const int bogus = 99;  // what a C caller can pass
  std::memcpy(&a.wait_obj, &bogus, sizeof bogus);
  EXPECT_EQ(fi_eq_open(fab.fab, &a, &q, nullptr), -FI_EINVAL);
  a = attr_of(FI_WAIT_SET);  // no wait set given
  EXPECT_EQ(fi_eq_open(fab.fab, &a, &q, nullptr), -FI_EINVAL);
  a.wait_set = reinterpret_cast<fid_wait*>(fab.fab);  // not a wait set
  EXPECT_EQ(fi_eq_open(fab.fab, &a, &q, nullptr), -FI_EINVAL);
  EXPECT_EQ(q, nullptr);
}

TEST_F(eq_test, open_sets_class_context_and_holds_the_fabric) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_NONE, FI_WRITE | FI_AFFINITY));
  ASSERT_NE(q.eq, nullptr);
  EXPECT_EQ(q.eq->fid.fclass, static_cast<size_t>(FI_CLASS_EQ));
  EXPECT_EQ(q.eq->fid.context, &q);
  EXPECT_EQ(fi_close(&fab.fab->fid), -FI_EBUSY);
}

TEST_F(eq_test, every_slot_is_filled) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_NONE));
  const fi_ops& f = *q.eq->fid.ops;
  EXPECT_EQ(f.size, sizeof(fi_ops));
  EXPECT_TRUE(f.close && f.bind && f.control && f.ops_open && f.tostr && f.ops_set);
  const fi_ops_eq& o = *q.eq->ops;
  EXPECT_EQ(o.size, sizeof(fi_ops_eq));
  EXPECT_TRUE(o.read && o.readerr && o.write && o.sread && o.strerror);
  EXPECT_EQ(fi_eq_open(fab.fab, nullptr, nullptr, nullptr), -FI_EINVAL);
}

TEST_F(eq_test, close_while_bound_is_busy) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_NONE));
  q.self().hold();  // what a bound endpoint or domain does
  EXPECT_EQ(fi_close(&q.eq->fid), -FI_EBUSY);
  q.self().release();
}

// ---- read / write ----

TEST_F(eq_test, write_needs_fi_write) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_NONE, 0));
  fi_eq_entry e = entry(1);
  EXPECT_EQ(fi_eq_write(q.eq, FI_NOTIFY, &e, sizeof e, 0), -FI_EINVAL);
  // Providers still post events to it.
  EXPECT_EQ(q.self().write_event(FI_NOTIFY, &e, sizeof e, 0), 0);
  uint32_t ev;
  fi_eq_entry out{};
  EXPECT_EQ(fi_eq_read(q.eq, &ev, &out, sizeof out, 0), static_cast<ssize_t>(sizeof out));
}

TEST_F(eq_test, write_rejects_bad_entries) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_NONE));
  fi_eq_entry e = entry(1);
  EXPECT_EQ(fi_eq_write(q.eq, FI_NOTIFY, nullptr, sizeof e, 0), -FI_EINVAL);
  EXPECT_EQ(fi_eq_write(q.eq, FI_NOTIFY, &e, 0, 0), -FI_EINVAL);
  EXPECT_EQ(fi_eq_write(q.eq, FI_NOTIFY, &e, eq::max_entry_size + 1, 0), -FI_EINVAL);
  EXPECT_EQ(fi_eq_write(q.eq, FI_NOTIFY, &e, sizeof e, FI_PEEK), -FI_EBADFLAGS);
  EXPECT_EQ(q.self().write_event(FI_NOTIFY, &e, sizeof e, 1), -FI_EBADFLAGS);
  uint32_t ev;
  EXPECT_EQ(fi_eq_read(q.eq, &ev, &e, sizeof e, 0), -FI_EAGAIN);
}

TEST_F(eq_test, read_returns_entries_in_order_and_eagain_when_empty) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_NONE));
  for (uint64_t i = 0; i < 3; ++i) {
    fi_eq_entry e = entry(i);
    EXPECT_EQ(fi_eq_write(q.eq, FI_MR_COMPLETE, &e, sizeof e, 0),
              static_cast<ssize_t>(sizeof e));
  }
  for (uint64_t i = 0; i < 3; ++i) {
    uint32_t ev = 99;
    fi_eq_entry out{};
    ASSERT_EQ(fi_eq_read(q.eq, &ev, &out, sizeof out, 0), static_cast<ssize_t>(sizeof out));
    EXPECT_EQ(ev, static_cast<uint32_t>(FI_MR_COMPLETE));
    EXPECT_EQ(out.data, i);
    EXPECT_EQ(out.context, reinterpret_cast<void*>(0x1234));
  }
  uint32_t ev;
  fi_eq_entry out{};
  EXPECT_EQ(fi_eq_read(q.eq, &ev, &out, sizeof out, 0), -FI_EAGAIN);
}

TEST_F(eq_test, read_rejects_bad_arguments) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_NONE));
  fi_eq_entry e = entry(1);
  ASSERT_GT(fi_eq_write(q.eq, FI_NOTIFY, &e, sizeof e, 0), 0);
  uint32_t ev;
  EXPECT_EQ(fi_eq_read(q.eq, nullptr, &e, sizeof e, 0), -FI_EINVAL);
  EXPECT_EQ(fi_eq_read(q.eq, &ev, nullptr, sizeof e, 0), -FI_EINVAL);
  EXPECT_EQ(fi_eq_read(q.eq, &ev, &e, sizeof e, FI_SEND), -FI_EBADFLAGS);
  EXPECT_EQ(fi_eq_readerr(q.eq, nullptr, 0), -FI_EINVAL);
  fi_eq_err_entry err{};
  EXPECT_EQ(fi_eq_readerr(q.eq, &err, FI_PEEK), -FI_EBADFLAGS);
  // Nothing was consumed.
  EXPECT_EQ(fi_eq_read(q.eq, &ev, &e, sizeof e, 0), static_cast<ssize_t>(sizeof e));
}

TEST_F(eq_test, peek_leaves_the_entry_queued) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_NONE));
  fi_eq_entry e = entry(7);
  ASSERT_GT(fi_eq_write(q.eq, FI_AV_COMPLETE, &e, sizeof e, 0), 0);
  uint32_t ev = 0;
  fi_eq_entry out{};
  EXPECT_EQ(fi_eq_read(q.eq, &ev, &out, sizeof out, FI_PEEK), static_cast<ssize_t>(sizeof out));
  EXPECT_EQ(out.data, 7u);
  out = {};
  EXPECT_EQ(fi_eq_read(q.eq, &ev, &out, sizeof out, 0), static_cast<ssize_t>(sizeof out));
  EXPECT_EQ(out.data, 7u);
  EXPECT_EQ(fi_eq_read(q.eq, &ev, &out, sizeof out, FI_PEEK), -FI_EAGAIN);
}

TEST_F(eq_test, small_buffer_is_too_small_and_keeps_the_entry) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_NONE));
  fi_eq_entry e = entry(5);
  ASSERT_GT(fi_eq_write(q.eq, FI_NOTIFY, &e, sizeof e, 0), 0);
  uint32_t ev;
  fi_eq_entry out{};
  EXPECT_EQ(fi_eq_read(q.eq, &ev, &out, sizeof out - 1, 0), -FI_ETOOSMALL);
  EXPECT_EQ(fi_eq_read(q.eq, &ev, nullptr, 0, 0), -FI_ETOOSMALL);
  EXPECT_EQ(fi_eq_read(q.eq, &ev, &out, sizeof out, 0), static_cast<ssize_t>(sizeof out));
  EXPECT_EQ(out.data, 5u);
}

TEST_F(eq_test, variable_sized_entries_keep_their_bytes) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_NONE));
  // An application event larger than fi_eq_entry comes back whole.
  struct big {
    fi_eq_entry head;
    char tail[40];
  } in{};
  in.head = entry(3);
  std::memset(in.tail, 'x', sizeof in.tail);
  ASSERT_EQ(fi_eq_write(q.eq, FI_NOTIFY, &in, sizeof in, 0), static_cast<ssize_t>(sizeof in));
  big out{};
  uint32_t ev;
  EXPECT_EQ(fi_eq_read(q.eq, &ev, &out, sizeof out + 100, 0), static_cast<ssize_t>(sizeof in));
  EXPECT_EQ(std::memcmp(&in, &out, sizeof in), 0);
}

// fi_eq(3): connection data beyond fi_eq_cm_entry is "limited to the buffer
// space provided by the application"; the fixed part must fit.
TEST_F(eq_test, connection_data_is_cut_to_the_buffer) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_NONE));
  constexpr size_t head = sizeof(fi_eq_cm_entry);
  alignas(fi_eq_cm_entry) uint8_t in[head + 16] = {};
  reinterpret_cast<fi_eq_cm_entry*>(in)->fid = &q.eq->fid;
  for (int i = 0; i < 16; ++i) in[head + i] = static_cast<uint8_t>(i);
  for (int round = 0; round < 3; ++round)
    ASSERT_EQ(fi_eq_write(q.eq, FI_CONNECTED, in, sizeof in, 0), static_cast<ssize_t>(sizeof in));

  uint32_t ev;
  alignas(fi_eq_cm_entry) uint8_t out[sizeof in] = {};
  EXPECT_EQ(fi_eq_read(q.eq, &ev, out, head - 1, 0), -FI_ETOOSMALL);
  EXPECT_EQ(fi_eq_read(q.eq, &ev, out, head, 0), static_cast<ssize_t>(head));
  EXPECT_EQ(ev, static_cast<uint32_t>(FI_CONNECTED));
  EXPECT_EQ(reinterpret_cast<fi_eq_cm_entry*>(out)->fid, &q.eq->fid);
  EXPECT_EQ(fi_eq_read(q.eq, &ev, out, head + 4, 0), static_cast<ssize_t>(head + 4));
  EXPECT_EQ(out[head + 3], 3);
  EXPECT_EQ(out[head + 4], 0);
  EXPECT_EQ(fi_eq_read(q.eq, &ev, out, sizeof out, 0), static_cast<ssize_t>(sizeof in));
  EXPECT_EQ(out[head + 15], 15);
}

TEST_F(eq_test, full_queue_answers_eagain_and_drops_nothing) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_NONE, FI_WRITE, 2));
  fi_eq_entry e = entry(0);
  EXPECT_GT(fi_eq_write(q.eq, FI_NOTIFY, &e, sizeof e, 0), 0);
  fi_eq_err_entry err{};
  err.err = FI_EIO;
  EXPECT_EQ(q.self().write_error(err), 0);  // errors take room too
  EXPECT_EQ(fi_eq_write(q.eq, FI_NOTIFY, &e, sizeof e, 0), -FI_EAGAIN);
  EXPECT_EQ(q.self().write_event(FI_NOTIFY, &e, sizeof e, 0), -FI_EAGAIN);
  EXPECT_EQ(q.self().write_error(err), -FI_EAGAIN);
  uint32_t ev;
  EXPECT_GT(fi_eq_read(q.eq, &ev, &e, sizeof e, 0), 0);
  EXPECT_EQ(fi_eq_write(q.eq, FI_NOTIFY, &e, sizeof e, 0), static_cast<ssize_t>(sizeof e));
}

TEST_F(eq_test, default_size_is_documented) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_NONE));
  fi_eq_entry e = entry(0);
  for (size_t i = 0; i < eq::default_size; ++i)
    ASSERT_EQ(q.self().write_event(FI_NOTIFY, &e, sizeof e, 0), 0) << i;
  EXPECT_EQ(q.self().write_event(FI_NOTIFY, &e, sizeof e, 0), -FI_EAGAIN);
}

// ---- errors ----

TEST_F(eq_test, errors_are_reported_in_order) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_NONE));
  fi_eq_entry e = entry(1);
  ASSERT_GT(fi_eq_write(q.eq, FI_NOTIFY, &e, sizeof e, 0), 0);
  fi_eq_err_entry in{};
  in.fid = &q.eq->fid;
  in.context = reinterpret_cast<void*>(0x77);
  in.data = 42;
  in.err = FI_ECONNREFUSED;
  in.prov_errno = -3;
  ASSERT_EQ(q.self().write_error(in), 0);
  e = entry(2);
  ASSERT_GT(fi_eq_write(q.eq, FI_NOTIFY, &e, sizeof e, 0), 0);

  uint32_t ev;
  fi_eq_entry out{};
  fi_eq_err_entry err{};
  EXPECT_EQ(fi_eq_readerr(q.eq, &err, 0), -FI_EAGAIN);  // the oldest is not an error
  EXPECT_GT(fi_eq_read(q.eq, &ev, &out, sizeof out, 0), 0);
  EXPECT_EQ(out.data, 1u);
  EXPECT_EQ(fi_eq_read(q.eq, &ev, &out, sizeof out, 0), -FI_EAVAIL);
  EXPECT_EQ(fi_eq_read(q.eq, &ev, &out, sizeof out, FI_PEEK), -FI_EAVAIL);
  EXPECT_EQ(fi_eq_readerr(q.eq, &err, 0), static_cast<ssize_t>(sizeof err));
  EXPECT_EQ(err.fid, &q.eq->fid);
  EXPECT_EQ(err.context, reinterpret_cast<void*>(0x77));
  EXPECT_EQ(err.data, 42u);
  EXPECT_EQ(err.err, FI_ECONNREFUSED);
  EXPECT_EQ(err.prov_errno, -3);
  EXPECT_EQ(err.err_data, nullptr);
  EXPECT_EQ(err.err_data_size, 0u);
  EXPECT_GT(fi_eq_read(q.eq, &ev, &out, sizeof out, 0), 0);
  EXPECT_EQ(out.data, 2u);
  EXPECT_EQ(fi_eq_readerr(q.eq, &err, 0), -FI_EAGAIN);
}

TEST_F(eq_test, err_data_goes_to_the_callers_buffer_from_api15) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_NONE));
  const char payload[] = "rejected by peer";
  fi_eq_err_entry in{};
  in.err = FI_ECONNREFUSED;
  in.err_data = const_cast<char*>(payload);
  in.err_data_size = sizeof payload;
  ASSERT_EQ(q.self().write_error(in), 0);
  ASSERT_EQ(q.self().write_error(in), 0);
  ASSERT_EQ(q.self().write_error(in), 0);

  char mine[64] = {};
  fi_eq_err_entry err{};
  err.err_data = mine;
  err.err_data_size = sizeof mine;
  EXPECT_EQ(fi_eq_readerr(q.eq, &err, 0), static_cast<ssize_t>(sizeof err));
  EXPECT_EQ(err.err_data, mine);
  EXPECT_EQ(err.err_data_size, sizeof payload);
  EXPECT_STREQ(mine, payload);

  // A smaller buffer gets what fits, and the size says how much.
  char small[4] = {};
  err = {};
  err.err_data = small;
  err.err_data_size = sizeof small;
  EXPECT_EQ(fi_eq_readerr(q.eq, &err, 0), static_cast<ssize_t>(sizeof err));
  EXPECT_EQ(err.err_data_size, sizeof small);
  EXPECT_EQ(std::memcmp(small, payload, sizeof small), 0);

  // No buffer: ours, valid until the next read.
  err = {};
  EXPECT_EQ(fi_eq_readerr(q.eq, &err, 0), static_cast<ssize_t>(sizeof err));
  ASSERT_NE(err.err_data, nullptr);
  EXPECT_EQ(err.err_data_size, sizeof payload);
  EXPECT_STREQ(static_cast<const char*>(err.err_data), payload);
}

TEST(eq_api_1_4, err_data_is_always_the_providers_buffer_before_api15) {
  fabric_handle old(FI_VERSION(1, 4));
  eq_handle q(old.fab, attr_of(FI_WAIT_NONE));
  const char payload[] = "abc";
  fi_eq_err_entry in{};
  in.err = FI_EIO;
  in.err_data = const_cast<char*>(payload);
  in.err_data_size = sizeof payload;
  ASSERT_EQ(q.self().write_error(in), 0);
  char mine[16] = {};
  fi_eq_err_entry err{};
  err.err_data = mine;  // an old caller's stale fields: ignored
  err.err_data_size = sizeof mine;
  EXPECT_EQ(fi_eq_readerr(q.eq, &err, 0), static_cast<ssize_t>(sizeof err));
  EXPECT_NE(err.err_data, static_cast<void*>(mine));
  EXPECT_STREQ(static_cast<const char*>(err.err_data), payload);
  EXPECT_EQ(mine[0], 0);
}

TEST_F(eq_test, write_error_rejects_missing_err_data) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_NONE));
  fi_eq_err_entry in{};
  in.err_data_size = 8;  // but no err_data
  EXPECT_EQ(q.self().write_error(in), -FI_EINVAL);
}

TEST_F(eq_test, strerror_fills_the_buffer) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_NONE));
  EXPECT_STREQ(fi_eq_strerror(q.eq, FI_ETIMEDOUT, nullptr, nullptr, 0),
               fi_strerror(FI_ETIMEDOUT));
  char buf[8];
  EXPECT_EQ(fi_eq_strerror(q.eq, FI_ETIMEDOUT, nullptr, buf, sizeof buf), buf);
  EXPECT_EQ(std::strlen(buf), sizeof buf - 1);
}

// ---- progress ----

struct hook_state {
  util::eq* q;
  std::atomic<int> runs{0};
  int pipe_rd = -1;
};

void post_on_run(void* obj) noexcept {
  auto* s = static_cast<hook_state*>(obj);
  ++s->runs;
  if (s->pipe_rd >= 0) {
    char c;
    if (::read(s->pipe_rd, &c, 1) != 1) return;  // nothing arrived yet
  }
  fi_eq_entry e = entry(99);
  s->q->write_event(FI_NOTIFY, &e, sizeof e, 0);
}

TEST_F(eq_test, read_runs_progress) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_NONE));
  hook_state s{&q.self()};
  q.self().progress().add({post_on_run, &s});
  uint32_t ev;
  fi_eq_entry out{};
  EXPECT_EQ(fi_eq_read(q.eq, &ev, &out, sizeof out, 0), static_cast<ssize_t>(sizeof out));
  EXPECT_EQ(out.data, 99u);
  EXPECT_EQ(s.runs, 1);
  q.self().progress().remove(&s);
}

// A provider socket registered with add_wait_fd wakes fi_eq_sread, whose
// progress then turns the data into an event.
TEST_F(eq_test, sread_wakes_on_a_provider_fd) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_UNSPEC));
  int p[2];
  ASSERT_EQ(::pipe2(p, O_NONBLOCK), 0);
  hook_state s{&q.self()};
  s.pipe_rd = p[0];
  q.self().progress().add({post_on_run, &s});
  ASSERT_EQ(q.self().add_wait_fd(p[0]), errc::ok);
  std::thread t([&] {
    std::this_thread::sleep_for(30ms);
    ASSERT_EQ(::write(p[1], "x", 1), 1);
  });
  auto start = std::chrono::steady_clock::now();
  uint32_t ev;
  fi_eq_entry out{};
  EXPECT_EQ(fi_eq_sread(q.eq, &ev, &out, sizeof out, 5000, 0), static_cast<ssize_t>(sizeof out));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_EQ(out.data, 99u);
  t.join();
  q.self().remove_wait_fd(p[0]);
  q.self().progress().remove(&s);
  ::close(p[0]);
  ::close(p[1]);
}

// ---- blocking reads ----

TEST_F(eq_test, sread_without_a_wait_object_is_not_supported) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_NONE));
  uint32_t ev;
  fi_eq_entry out{};
  EXPECT_EQ(fi_eq_sread(q.eq, &ev, &out, sizeof out, 0, 0), -FI_ENOSYS);
}

TEST_F(eq_test, sread_times_out_with_eagain) {
  for (fi_wait_obj w : {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD}) {
    eq_handle q(fab.fab, attr_of(w));
    uint32_t ev;
    fi_eq_entry out{};
    EXPECT_EQ(fi_eq_sread(q.eq, &ev, &out, sizeof out, 0, 0), -FI_EAGAIN) << w;
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(fi_eq_sread(q.eq, &ev, &out, sizeof out, 40, 0), -FI_EAGAIN) << w;
    EXPECT_GE(std::chrono::steady_clock::now() - start, 39ms) << w;
    EXPECT_EQ(fi_eq_sread(q.eq, nullptr, &out, sizeof out, 0, 0), -FI_EINVAL) << w;
    EXPECT_EQ(fi_eq_sread(q.eq, &ev, &out, sizeof out, 0, FI_SEND), -FI_EBADFLAGS) << w;
  }
}

TEST_F(eq_test, sread_wakes_when_another_thread_writes) {
  for (fi_wait_obj w : {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD}) {
    eq_handle q(fab.fab, attr_of(w));
    std::thread t([&] {
      std::this_thread::sleep_for(20ms);
      fi_eq_entry e = entry(11);
      EXPECT_GT(fi_eq_write(q.eq, FI_NOTIFY, &e, sizeof e, 0), 0);
    });
    uint32_t ev;
    fi_eq_entry out{};
    EXPECT_EQ(fi_eq_sread(q.eq, &ev, &out, sizeof out, -1, 0), static_cast<ssize_t>(sizeof out))
        << w;
    EXPECT_EQ(out.data, 11u);
    t.join();
  }
}

// Two sleepers, two events written back to back: both must wake.
TEST_F(eq_test, every_event_reaches_a_sleeper) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_FD));
  std::atomic<int> got{0};
  auto sleeper = [&] {
    uint32_t ev;
    fi_eq_entry out{};
    if (fi_eq_sread(q.eq, &ev, &out, sizeof out, 3000, 0) > 0) ++got;
  };
  std::thread a(sleeper), b(sleeper);
  std::this_thread::sleep_for(30ms);
  fi_eq_entry e = entry(1);
  EXPECT_GT(fi_eq_write(q.eq, FI_NOTIFY, &e, sizeof e, 0), 0);
  EXPECT_GT(fi_eq_write(q.eq, FI_NOTIFY, &e, sizeof e, 0), 0);
  a.join();
  b.join();
  EXPECT_EQ(got, 2);
}

// ---- wait objects ----

TEST_F(eq_test, get_wait_obj) {
  struct {
    fi_wait_obj open, reported;
  } cases[] = {{FI_WAIT_NONE, FI_WAIT_NONE},
               {FI_WAIT_UNSPEC, FI_WAIT_FD},
               {FI_WAIT_FD, FI_WAIT_FD},
               {FI_WAIT_MUTEX_COND, FI_WAIT_MUTEX_COND},
               {FI_WAIT_YIELD, FI_WAIT_YIELD},
               {FI_WAIT_POLLFD, FI_WAIT_POLLFD}};
  for (auto c : cases) {
    eq_handle q(fab.fab, attr_of(c.open));
    fi_wait_obj w{};
    EXPECT_EQ(fi_control(&q.eq->fid, FI_GETWAITOBJ, &w), 0);
    EXPECT_EQ(w, c.reported);
    EXPECT_EQ(fi_control(&q.eq->fid, FI_GETWAITOBJ, nullptr), -FI_EINVAL);
    EXPECT_EQ(fi_control(&q.eq->fid, FI_GETWAIT, nullptr), -FI_EINVAL);
    EXPECT_EQ(fi_control(&q.eq->fid, 12345, &w), -FI_ENOSYS);
  }
}

TEST_F(eq_test, no_wait_object_to_hand_out) {
  for (fi_wait_obj w : {FI_WAIT_NONE, FI_WAIT_YIELD}) {
    eq_handle q(fab.fab, attr_of(w));
    int fd = -1;
    EXPECT_EQ(fi_control(&q.eq->fid, FI_GETWAIT, &fd), -FI_ENOSYS);
  }
}

// The fi_trywait protocol on the EQ's fd: readable after a write, idle once
// the application read everything, and fi_trywait says when to block.
TEST_F(eq_test, wait_fd_follows_the_queue) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_FD));
  int fd = -1;
  ASSERT_EQ(fi_control(&q.eq->fid, FI_GETWAIT, &fd), 0);
  ASSERT_GE(fd, 0);
  fid* fids[] = {&q.eq->fid};
  EXPECT_EQ(fi_trywait(fab.fab, fids, 1), 0);
  EXPECT_FALSE(readable(fd));

  fi_eq_entry e = entry(1);
  ASSERT_GT(fi_eq_write(q.eq, FI_NOTIFY, &e, sizeof e, 0), 0);
  EXPECT_TRUE(readable(fd));
  EXPECT_EQ(fi_trywait(fab.fab, fids, 1), -FI_EAGAIN);
  uint32_t ev;
  EXPECT_GT(fi_eq_read(q.eq, &ev, &e, sizeof e, 0), 0);
  EXPECT_FALSE(readable(fd));
  EXPECT_EQ(fi_trywait(fab.fab, fids, 1), 0);

  // Written and read without a look at the fd: trywait leaves it idle.
  ASSERT_GT(fi_eq_write(q.eq, FI_NOTIFY, &e, sizeof e, 0), 0);
  ASSERT_GT(fi_eq_write(q.eq, FI_NOTIFY, &e, sizeof e, 0), 0);
  EXPECT_GT(fi_eq_read(q.eq, &ev, &e, sizeof e, FI_PEEK), 0);
  EXPECT_TRUE(readable(fd));
  EXPECT_GT(fi_eq_read(q.eq, &ev, &e, sizeof e, 0), 0);
  EXPECT_GT(fi_eq_read(q.eq, &ev, &e, sizeof e, 0), 0);
  EXPECT_EQ(fi_trywait(fab.fab, fids, 1), 0);
  EXPECT_FALSE(readable(fd));
}

TEST_F(eq_test, poll_fd_hands_out_one_descriptor) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_POLLFD));
  fi_wait_pollfd p{};
  EXPECT_EQ(fi_control(&q.eq->fid, FI_GETWAIT, &p), -FI_ETOOSMALL);
  EXPECT_EQ(p.nfds, 1u);
  pollfd fds[2] = {};
  p.fd = fds;
  p.nfds = 2;
  EXPECT_EQ(fi_control(&q.eq->fid, FI_GETWAIT, &p), 0);
  EXPECT_EQ(p.nfds, 1u);
  EXPECT_GE(fds[0].fd, 0);
  EXPECT_EQ(fds[0].events, POLLIN);
  fi_eq_entry e = entry(1);
  ASSERT_GT(fi_eq_write(q.eq, FI_NOTIFY, &e, sizeof e, 0), 0);
  EXPECT_EQ(::poll(fds, 1, 0), 1);
}

// FI_WAIT_MUTEX_COND: the application sleeps on the cond under the mutex;
// a write broadcasts. Progress run under the application's lock may write.
TEST_F(eq_test, mutex_cond_is_broadcast_on_write) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_MUTEX_COND));
  fi_mutex_cond mc{};
  ASSERT_EQ(fi_control(&q.eq->fid, FI_GETWAIT, &mc), 0);
  ASSERT_NE(mc.mutex, nullptr);
  ASSERT_NE(mc.cond, nullptr);
  std::thread t([&] {
    std::this_thread::sleep_for(20ms);
    fi_eq_entry e = entry(3);
    EXPECT_GT(fi_eq_write(q.eq, FI_NOTIFY, &e, sizeof e, 0), 0);
  });
  uint32_t ev;
  fi_eq_entry out{};
  ssize_t r;
  pthread_mutex_lock(mc.mutex);
  auto deadline = std::chrono::system_clock::now() + 5s;
  timespec ts{std::chrono::system_clock::to_time_t(deadline), 0};
  while ((r = fi_eq_read(q.eq, &ev, &out, sizeof out, 0)) == -FI_EAGAIN)
    if (pthread_cond_timedwait(mc.cond, mc.mutex, &ts) == ETIMEDOUT) break;
  // Progress that writes while the application holds the mutex.
  hook_state s{&q.self()};
  q.self().progress().add({post_on_run, &s});
  fi_eq_entry extra{};
  EXPECT_GT(fi_eq_read(q.eq, &ev, &extra, sizeof extra, FI_PEEK), 0);
  q.self().progress().remove(&s);
  pthread_mutex_unlock(mc.mutex);
  EXPECT_EQ(r, static_cast<ssize_t>(sizeof out));
  EXPECT_EQ(out.data, 3u);
  t.join();
}

// ---- ownership of connection requests ----

TEST_F(eq_test, unread_connreq_info_is_released_with_the_eq) {
  eq_handle q(fab.fab, attr_of(FI_WAIT_NONE));
  fi_eq_cm_entry cm{};
  cm.fid = &q.eq->fid;
  cm.info = core::dup_info(nullptr, core::abi_current);
  ASSERT_NE(cm.info, nullptr);
  ASSERT_EQ(q.self().write_event(FI_CONNREQ, &cm, sizeof cm, 0), 0);
  fi_eq_cm_entry cm2 = cm;
  cm2.info = core::dup_info(nullptr, core::abi_current);
  ASSERT_EQ(q.self().write_event(FI_CONNREQ, &cm2, sizeof cm2, 0), 0);
  // The application reads the first and owns its info from then on.
  uint32_t ev;
  fi_eq_cm_entry out{};
  ASSERT_EQ(fi_eq_read(q.eq, &ev, &out, sizeof out, 0), static_cast<ssize_t>(sizeof out));
  EXPECT_EQ(out.info, cm.info);
  core::free_info(out.info);
  // The second stays queued: closing the EQ frees it (LeakSanitizer checks).
}

}  // namespace
}  // namespace weft::util
