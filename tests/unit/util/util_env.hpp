// SPDX-License-Identifier: MIT
// weft — what the util unit tests share: a provider for log lines to name,
// and a fabric and a domain made directly, with no provider behind them.
#pragma once

#include <gtest/gtest.h>
#include <rdma/fabric.h>

#include "util/domain.hpp"
#include "util/fabric.hpp"

namespace weft::util::test_env {

inline fi_provider* provider() {
  static fi_provider p = [] {
    fi_provider x{};
    x.version = 1;
    x.fi_version = FI_VERSION(1, 21);
    x.name = const_cast<char*>("test");
    return x;
  }();
  return &p;
}

// A fabric and a domain (API 1.21, manual progress) of one threading model.
struct domain_pair {
  fabric* fab = nullptr;
  domain* dom = nullptr;

  void open(fi_threading threading) {
    fi_fabric_attr fa{};
    fa.api_version = FI_VERSION(1, 21);
    fab = new fabric(provider(), nullptr, fa, nullptr);
    fi_domain_attr da{};
    da.threading = threading;
    da.data_progress = FI_PROGRESS_MANUAL;
    fi_info info{};
    info.domain_attr = &da;
    dom = new domain(*fab, nullptr, info, nullptr);
  }
  // After every object opened on the domain is closed.
  void close() {
    if (dom) { EXPECT_EQ(fi_close(&dom->fid), 0); }
    if (fab) { EXPECT_EQ(fi_close(&fab->fid), 0); }
    dom = nullptr;
    fab = nullptr;
  }
};

}  // namespace weft::util::test_env
