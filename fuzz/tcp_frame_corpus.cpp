// SPDX-License-Identifier: MIT
// weft — writes the seed corpus of tcp_frame_fuzz: frames of every op built
// with the frame builder, alone and as streams, plus a few cut short. Each
// file is 4 control bytes (see tcp_frame_fuzz.cpp) and the stream.
//   usage: tcp_frame_corpus <dir>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "prov/tcp/frame.hpp"

using namespace weft::tcp;
using proto::op;
using bytes = std::vector<std::byte>;

namespace {

frame base(op o, uint32_t payload_len, uint16_t flags = 0) {
  frame f{};
  f.op = o;
  f.flags = flags;
  f.payload_len = payload_len;
  f.msg_id = 1;
  return f;
}

frame rma(op o, uint32_t payload_len, uint64_t len, uint16_t flags = 0) {
  frame f = base(o, payload_len, flags);
  f.iov_count = 2;
  f.iov[0] = {0x1000, len / 2, 7};
  f.iov[1] = {0x9000, len - len / 2, 7};
  return f;
}

frame atomic(op o, uint8_t dt, uint8_t aop, uint32_t count, uint32_t payload) {
  frame f = base(o, payload);
  f.datatype = dt;
  f.atomic_op = aop;
  f.atomic_count = count;
  f.iov_count = 1;
  f.iov[0] = {0x2000, uint64_t{count} * proto::atomic_type_size(dt), 3};
  return f;
}

std::vector<frame> frames() {
  std::vector<frame> v;
  frame f = base(op::cm_req, 12);
  v.push_back(f);
  f = base(op::cm_resp, 3);
  v.push_back(f);
  f = base(op::hello, 0);
  f.addr_len = 6;
  std::memcpy(f.addr, "\x0a\0\0\x01\x1f\x90", 6);
  v.push_back(f);
  f.addr_len = 22;
  v.push_back(f);
  v.push_back(base(op::shutdown, 0));
  v.push_back(base(op::msg, 8));
  v.push_back(base(op::msg, 40, proto::flag_ack));
  f = base(op::msg_data, 8);
  f.cq_data = 0x0102030405060708;
  v.push_back(f);
  f = base(op::tagged, 8);
  f.tag = 0xa5a5;
  v.push_back(f);
  f = base(op::tagged_data, 8, proto::flag_ack);
  f.tag = 0x5a5a;
  f.cq_data = 9;
  v.push_back(f);
  v.push_back(rma(op::rma_write, 32, 32, proto::flag_cq_data));
  v.push_back(rma(op::rma_read_req, 0, 4096));
  v.push_back(base(op::rma_read_resp, 24));
  v.push_back(atomic(op::atomic_write, FI_UINT64, FI_SUM, 2, 16));
  v.push_back(atomic(op::atomic_fetch, FI_UINT32, FI_ATOMIC_READ, 3, 0));
  v.push_back(atomic(op::atomic_compare, FI_INT16, FI_CSWAP, 4, 16));
  v.push_back(base(op::atomic_resp, 8));
  v.push_back(base(op::ack, 0));
  f = base(op::error, 0);
  f.status = FI_EKEYREJECTED;
  f.req_op = static_cast<uint8_t>(op::rma_write);
  v.push_back(f);
  return v;
}

bytes encode(const frame& f) {
  bytes b(proto::max_hdr_len);
  b.resize(build_header(f, b));
  for (uint32_t i = 0; i < f.payload_len; ++i) b.push_back(std::byte(i * 37 + 11));
  return b;
}

int write_file(const std::string& dir, int n, const uint8_t ctl[4], const bytes& b) {
  std::string path = dir + "/seed-" + std::to_string(n);
  FILE* fp = std::fopen(path.c_str(), "wb");
  if (!fp) return 1;
  std::fwrite(ctl, 1, 4, fp);
  std::fwrite(b.data(), 1, b.size(), fp);
  return std::fclose(fp) != 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  int n = 0, bad = 0;
  const uint8_t ctl_default[4] = {0x0f, 0x12, 0x34, 0x56};  // 1 GiB cap, 4 iovs
  const uint8_t ctl_small[4] = {0x11, 0x00, 0x00, 0x01};    // 64-byte cap, 1 iov
  bytes all;
  for (const frame& f : frames()) {
    bytes b = encode(f);
    bad += write_file(dir, n++, ctl_default, b);
    all.insert(all.end(), b.begin(), b.end());
  }
  bad += write_file(dir, n++, ctl_default, all);
  bad += write_file(dir, n++, ctl_small, all);
  bad += write_file(dir, n++, ctl_default, bytes(all.begin(), all.begin() + all.size() / 2));
  std::printf("%d seeds in %s\n", n, dir.c_str());
  return bad ? 1 : 0;
}
