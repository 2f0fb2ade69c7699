// SPDX-License-Identifier: MIT
// weft — unit tests of the completion queue's read side (util/cq): how
// fi_cq_read and fi_cq_readerr share one ordered stream of completions and
// errors (fi_cq(3): a read stops at an error, -FI_EAVAIL when the error is
// first, fi_cq_readerr takes it and reading goes on), count 0, and formats.
// Completions are written from the provider side (cq::write / write_error).
#include <gtest/gtest.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include "util/cq.hpp"
#include "util/domain.hpp"
#include "util/fabric.hpp"
#include "util_env.hpp"

using namespace weft;
using namespace weft::util;

namespace {

fi_provider& test_prov = *test_env::provider();

class cq_read_test : public ::testing::TestWithParam<fi_threading> {
 protected:
  void SetUp() override {
    env_.open(GetParam());
    fab_ = env_.fab;
    dom_ = env_.dom;
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    ca.size = 64;
    ASSERT_EQ(fi_cq_open(dom_, &ca, &cq_fid_, nullptr), 0);
    cq_ = cq::from(cq_fid_);
  }
  void TearDown() override {
    EXPECT_EQ(fi_close(&cq_fid_->fid), 0);
    env_.close();
  }
  bool locked() const { return GetParam() == FI_THREAD_SAFE; }
  void put(int i) {
    cq_entry e{&ctx_[i], FI_RECV | FI_MSG, static_cast<size_t>(i), nullptr, 0, 0, 0, 0};
    EXPECT_TRUE(locked() ? cq_->write<mutex_lock>(e) : cq_->write<null_lock>(e));
  }
  void put_error(int i, int err) {
    fi_cq_err_entry e{};
    e.op_context = &ctx_[i];
    e.flags = FI_RECV;
    e.err = err;
    EXPECT_TRUE(locked() ? cq_->write_error<mutex_lock>(e) : cq_->write_error<null_lock>(e));
  }
  ssize_t read(fi_cq_tagged_entry* out, size_t n) { return fi_cq_read(cq_fid_, out, n); }
  void* ctx(int i) { return &ctx_[i]; }

  test_env::domain_pair env_;
  fabric* fab_ = nullptr;
  domain* dom_ = nullptr;
  fid_cq* cq_fid_ = nullptr;
  cq* cq_ = nullptr;
  int ctx_[16] = {};
};

TEST_P(cq_read_test, empty_and_count_zero) {
  fi_cq_tagged_entry e[4];
  EXPECT_EQ(read(e, 4), -FI_EAGAIN);
  EXPECT_EQ(read(e, 0), -FI_EAGAIN);
  put(1);
  EXPECT_EQ(read(e, 0), 0);  // something there, nothing asked for
  ASSERT_EQ(read(e, 4), 1);
  EXPECT_EQ(e[0].op_context, ctx(1));
  EXPECT_EQ(read(e, 4), -FI_EAGAIN);
}

TEST_P(cq_read_test, a_read_stops_at_an_error_and_goes_on_after_readerr) {
  put(1);
  put(2);
  put_error(3, FI_ETRUNC);
  put(4);
  put_error(5, FI_ECANCELED);
  put_error(6, FI_EIO);
  put(7);
  fi_cq_tagged_entry e[8];
  ASSERT_EQ(read(e, 8), 2);  // the two before the error
  EXPECT_EQ(e[0].op_context, ctx(1));
  EXPECT_EQ(e[1].op_context, ctx(2));
  EXPECT_EQ(read(e, 8), -FI_EAVAIL);
  EXPECT_EQ(read(e, 0), -FI_EAVAIL);  // count 0 sees the error too
  fi_cq_err_entry ee{};
  ASSERT_EQ(fi_cq_readerr(cq_fid_, &ee, 0), 1);
  EXPECT_EQ(ee.op_context, ctx(3));
  EXPECT_EQ(ee.err, FI_ETRUNC);
  ASSERT_EQ(read(e, 8), 1);
  EXPECT_EQ(e[0].op_context, ctx(4));
  // Two errors in a row, both taken before reading on.
  EXPECT_EQ(read(e, 8), -FI_EAVAIL);
  ASSERT_EQ(fi_cq_readerr(cq_fid_, &ee, 0), 1);
  EXPECT_EQ(ee.err, FI_ECANCELED);
  ASSERT_EQ(fi_cq_readerr(cq_fid_, &ee, 0), 1);
  EXPECT_EQ(ee.err, FI_EIO);
  EXPECT_EQ(fi_cq_readerr(cq_fid_, &ee, 0), -FI_EAGAIN);
  ASSERT_EQ(read(e, 8), 1);
  EXPECT_EQ(e[0].op_context, ctx(7));
  EXPECT_EQ(read(e, 8), -FI_EAGAIN);
}

TEST_P(cq_read_test, errors_taken_early_leave_no_gap) {
  // readerr may take an error while completions before it are unread: the
  // completions still come first, and the error is not reported twice.
  put(1);
  put_error(2, FI_EIO);
  put(3);
  fi_cq_err_entry ee{};
  ASSERT_EQ(fi_cq_readerr(cq_fid_, &ee, 0), 1);
  EXPECT_EQ(ee.op_context, ctx(2));
  fi_cq_tagged_entry e[8];
  ASSERT_EQ(read(e, 1), 1);
  EXPECT_EQ(e[0].op_context, ctx(1));
  ASSERT_EQ(read(e, 0), 0);  // the taken error's place is skipped, 3 waits
  ASSERT_EQ(read(e, 8), 1);
  EXPECT_EQ(e[0].op_context, ctx(3));
  EXPECT_EQ(read(e, 8), -FI_EAGAIN);
  // The same in one read: the completions on both sides of a taken error.
  put(4);
  put_error(5, FI_EIO);
  put(6);
  ASSERT_EQ(fi_cq_readerr(cq_fid_, &ee, 0), 1);
  EXPECT_EQ(ee.op_context, ctx(5));
  ASSERT_EQ(read(e, 8), 2);
  EXPECT_EQ(e[0].op_context, ctx(4));
  EXPECT_EQ(e[1].op_context, ctx(6));
  EXPECT_EQ(read(e, 8), -FI_EAGAIN);
}

TEST_P(cq_read_test, reads_at_most_count_in_order) {
  for (int i = 0; i < 10; ++i) put(i);
  fi_cq_tagged_entry e[4];
  int next = 0;
  for (ssize_t want : {4, 4, 2}) {
    ASSERT_EQ(read(e, 4), want);
    for (ssize_t k = 0; k < want; ++k) EXPECT_EQ(e[k].op_context, ctx(next++));
  }
  EXPECT_EQ(read(e, 4), -FI_EAGAIN);
  EXPECT_EQ(fi_cq_read(cq_fid_, nullptr, 1), -FI_EINVAL);
}

INSTANTIATE_TEST_SUITE_P(threading, cq_read_test,
                         ::testing::Values(FI_THREAD_DOMAIN, FI_THREAD_SAFE));

}  // namespace
