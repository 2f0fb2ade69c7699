// SPDX-License-Identifier: MIT
// weft — a same-host byte stream in shared memory, for tcp connections
// whose two ends run on one host.
//
// Why: a byte through loopback TCP costs two system calls and the kernel's
// stack on each hop (about 3.2 µs per 8-byte ping-pong hop on the
// development VM, the floor of any socket-based provider). Two processes of
// one user on one host can share pages instead; the connection's socket
// then stays only for end of stream, liveness and waking a sleeping reader.
// Same-host FI_EP_MSG connections under manual progress offer it in their
// cm_req (proto::feature_local_stream) and switch to it once cm_resp accepts;
// conn::write_out / conn::read_into then go through it instead of the socket.
// FI_TCP_LOCAL_STREAM=0 turns it off.
//
// One memfd holds a header and two pipes, one per direction; each pipe is a
// single-producer single-consumer byte ring. The side that creates the
// memfd writes pipe 0 and reads pipe 1; the side that attaches (through
// /proc/<pid>/fd/<n>: only a process allowed to open the creator's
// descriptors can) writes pipe 1 and reads pipe 0. The semantics are a
// non-blocking socket's: writev takes what fits (-EAGAIN when nothing does),
// read returns what is there (-EAGAIN when nothing is), so the frame code
// above it needs no change.
//
// Neither side trusts the other: a peer can write anything into the shared
// pages. Each side keeps its own position privately and only reads the
// peer's; a peer position that claims more bytes than the pipe holds is a
// corrupt peer (-EIO, every call after). The header is validated once, at
// attach (magic, version, sizes against the file's size, and the cookie the
// peer sent through the socket); no size is taken from shared memory after.
//
// Waking a side that sleeps on the socket (Dekker, seq_cst on both sides):
// a side that may sleep sets its `sleeping` word (want_wakes) before its
// last look at the pipes. A writer publishes its position, then looks at the
// peer's `sleeping`; a reader publishes its position, then looks at the
// writer's `writer_blocked` (set by a writer that found no room, before it
// looked at the reader's position once more). Whichever sees the other sends
// one byte through the socket (take_wake_due), at most one until the
// sleeper takes it (take_wake, then it reads the socket empty), so no
// wake-up is lost and wake bytes do not pile up.
#pragma once

#include "core/errc.hpp"
#include "util/fd.hpp"

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

namespace weft::tcp {

namespace local_layout {

constexpr uint64_t magic = 0x6d61657274734c57;  // "WLstream", little-endian
constexpr uint32_t version = 1;
constexpr size_t min_pipe = 4096;
constexpr size_t max_pipe = size_t{64} << 20;

// One direction's shared words: the producer's position, the consumer's,
// each on its own cache line, and the rarely written wake-up words on a
// third.
struct alignas(64) pipe_ctl {
  alignas(64) uint64_t tail;  // bytes ever written (producer)
  alignas(64) uint64_t head;  // bytes ever read (consumer)
  alignas(64) uint32_t sleeping;  // consumer: may block on the socket (data or room)
  uint32_t wake_pending;          // a wake byte is on its way to the consumer
  uint32_t writer_blocked;        // producer: found no room for all it had
};

struct alignas(64) header {
  uint64_t magic;
  uint32_t version;
  uint32_t header_bytes;  // sizeof(header)
  uint64_t pipe_bytes;    // each pipe's ring, a power of two
  uint64_t cookie;        // also sent through the socket: the attacher checks it
  pipe_ctl pipe[2];
};

// The data of pipe i starts at data_offset + i * pipe_bytes.
constexpr size_t data_offset = 4096;
static_assert(sizeof(header) <= data_offset);

}  // namespace local_layout

class local_stream {
 public:
  local_stream() = default;
  local_stream(local_stream&& o) noexcept;
  local_stream& operator=(local_stream&& o) noexcept;
  local_stream(const local_stream&) = delete;
  local_stream& operator=(const local_stream&) = delete;
  ~local_stream();

  // The creating side: a new memfd of two pipes of `pipe_bytes` (a power of
  // two from 4 KiB to 64 MiB), its pages reserved now (a full tmpfs is an
  // error here, never SIGBUS later). `memfd` is what the peer opens.
  static errc create(size_t pipe_bytes, uint64_t cookie, local_stream& out,
                     util::unique_fd& memfd) noexcept;
  // The attaching side: process `pid`'s descriptor `fd`, through /proc.
  static errc attach(pid_t pid, int fd, uint64_t cookie, local_stream& out) noexcept;
  // The same from a descriptor already open here.
  static errc attach_fd(int memfd, uint64_t cookie, local_stream& out) noexcept;

  bool valid() const noexcept { return base_ != nullptr; }
  size_t capacity() const noexcept { return static_cast<size_t>(cap_); }

  // Copies what fits of the iovecs into the outgoing pipe and publishes it:
  // the byte count, -EAGAIN when the pipe is full, -EIO once the peer's
  // position was found impossible.
  ssize_t writev(const iovec* iov, int count) noexcept;
  // Copies up to `len` bytes out of the incoming pipe: the byte count,
  // -EAGAIN when it is empty, -EIO once the peer's position was impossible.
  ssize_t read(void* buf, size_t len) noexcept;
  // Bytes waiting in the incoming pipe (0 also when the peer is corrupt:
  // read() then says so).
  size_t readable() noexcept;

  // This side may (or no longer may) block on the socket: stored before the
  // last look at the pipes that precedes a sleep.
  void want_wakes(bool on) noexcept;
  // After writev or read: whether this call is the one to send the peer a
  // wake byte (it may sleep, and it waits for data we wrote or for room we
  // made). True once until the peer takes it.
  bool take_wake_due() noexcept;
  // The sleeper's side: clears wake_pending; then read the socket empty.
  void take_wake() noexcept;

 private:
  static errc map(int memfd, bool creator, uint64_t cookie, local_stream& out) noexcept;
  local_layout::pipe_ctl& out_ctl() const noexcept;
  local_layout::pipe_ctl& in_ctl() const noexcept;
  // The peer's position, checked against ours: false for a corrupt peer.
  bool peer_tail(uint64_t& tail) noexcept;
  void release() noexcept;

  std::byte* base_ = nullptr;
  size_t map_bytes_ = 0;
  std::byte* out_data_ = nullptr;
  std::byte* in_data_ = nullptr;
  uint64_t mask_ = 0;
  uint64_t cap_ = 0;
  int out_ = 0;          // our pipe index (the other one we read)
  uint64_t tail_ = 0;    // our writes, never read back from shared memory
  uint64_t head_ = 0;    // our reads, likewise
  uint64_t head_seen_ = 0;  // the reader's position when last loaded (checked then)
  bool corrupt_ = false;
  bool wake_check_ = false;  // a write or a freeing read since take_wake_due
};

}  // namespace weft::tcp
