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
// peer sent through the socket); no size is taken from shared memory after
// but the peer's ring size, checked at each load (below).
//
// Pipes that grow (layout version 2). Each pipe owns `pipe_bytes` of the
// file (its largest ring), but only its first `pipe_min` bytes are reserved
// when the file is made: the rest is a hole, so an idle connection costs
// what a fixed pipe of pipe_min did. The ring in use is `cap` bytes (a power
// of two, pipe_min <= cap <= pipe_bytes; position p is at p & (cap - 1)).
// Only the writer changes its pipe's cap, only upward, and only when
//   (1) it finds the pipe empty: the head it loads equals its own tail, and
//   (2) what it has to write does not fit: then cap becomes the next power
//       of two that holds it (at least double, at most pipe_bytes),
// after it reserved the new pages itself (MADV_POPULATE_WRITE through its
// mapping: an error, never SIGBUS; refused, the pipe keeps its size for good).
// It stores cap before the first tail (release) that covers bytes written
// with it. The reader loads tail (acquire), then cap, and indexes the bytes
// it then reads with that cap. That is the cap they were written with:
//   - not an older one: bytes written under cap C follow C's store, and the
//     tail that covers them is stored (release) after it, so a reader that
//     loaded that tail (acquire) cannot load a cap from before C;
//   - not a newer one: the next change needs (1), head == the writer's tail
//     >= every tail the reader has loaded, so it waits for the reader's
//     head store (release, after its last copy with C, each read's last
//     store after all its copies); the writer's load of that head is
//     acquire, its cap store after it, so the reader's earlier cap load
//     cannot see it.
// Positions stay meaningful across a change: a ring that is empty has no
// byte whose place depends on cap. The reader refuses (-EIO) a cap that is
// not a power of two in [pipe_min, pipe_bytes], tail - head above the cap
// it loaded, and a cap that differs from the one it last loaded while bytes
// it saw then are still unread (an honest writer cannot change it then).
// The writer never looks at the peer's reservations: its own pipe's pages
// are ones it reserved (the attacher reserves its first pipe_min at attach
// too). A peer can punch holes into the file at any time (the seals forbid
// only resizing it), so a hostile peer could always make our page faults
// allocate; growing adds no new way to.
// A pipe does not shrink back: a connection keeps its high-water ring
// (docs/decisions.md).
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
constexpr uint32_t version = 2;  // 2: rings that grow (cap, pipe_min)
constexpr size_t min_pipe = 4096;
constexpr size_t max_pipe = size_t{64} << 20;

// One direction's shared words: the producer's position, the consumer's,
// each on its own cache line, and the rarely written wake-up words on a
// third.
struct alignas(64) pipe_ctl {
  alignas(64) uint64_t tail;  // bytes ever written (producer)
  uint64_t cap;               // the ring's size now (producer; beside tail: one line to load)
  alignas(64) uint64_t head;  // bytes ever read (consumer)
  alignas(64) uint32_t sleeping;  // consumer: may block on the socket (data or room)
  uint32_t wake_pending;          // a wake byte is on its way to the consumer
  uint32_t writer_blocked;        // producer: found no room for all it had
};

struct alignas(64) header {
  uint64_t magic;
  uint32_t version;
  uint32_t header_bytes;  // sizeof(header)
  uint64_t pipe_bytes;    // each pipe's span in the file: its largest ring, a power of two
  uint64_t pipe_min;      // each ring's size (reserved) when the file is made
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

  // The creating side: a new memfd of two pipes that start at `pipe_bytes`
  // and may grow to `max_bytes` (powers of two from 4 KiB to 64 MiB,
  // pipe_bytes <= max_bytes; equal: pipes that never grow). The header and
  // each pipe's first pipe_bytes are reserved now (a full tmpfs is an error
  // here, never SIGBUS later); the rest stays a hole until a pipe grows.
  // `memfd` is what the peer opens.
  static errc create(size_t pipe_bytes, size_t max_bytes, uint64_t cookie, local_stream& out,
                     util::unique_fd& memfd) noexcept;
  // The attaching side: process `pid`'s descriptor `fd`, through /proc.
  static errc attach(pid_t pid, int fd, uint64_t cookie, local_stream& out) noexcept;
  // The same from a descriptor already open here.
  static errc attach_fd(int memfd, uint64_t cookie, local_stream& out) noexcept;

  bool valid() const noexcept { return base_ != nullptr; }
  // Our outgoing ring's size now, and the most it may grow to.
  size_t capacity() const noexcept { return static_cast<size_t>(cap_); }
  size_t max_capacity() const noexcept { return static_cast<size_t>(span_); }
  // Whether growing our ring was refused once (it then stays as it is).
  bool growth_refused() const noexcept { return grow_refused_; }

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
  // The peer's position and ring size, checked against ours: false for a
  // corrupt peer.
  bool peer_tail(uint64_t& tail, uint64_t& cap) noexcept;
  // Our pipe is empty and `more` bytes do not fit: a larger ring, if its
  // pages can be reserved (local_stream.hpp's header comment).
  void grow(size_t more) noexcept;
  void release() noexcept;

  friend struct local_stream_probe;  // tests/unit/tcp/test_local_stream.cpp

  std::byte* base_ = nullptr;
  size_t map_bytes_ = 0;
  std::byte* out_data_ = nullptr;
  std::byte* in_data_ = nullptr;
  uint64_t mask_ = 0;     // cap_ - 1
  uint64_t cap_ = 0;      // our ring's size (we publish it)
  uint64_t span_ = 0;     // each pipe's span: the largest ring
  uint64_t in_min_ = 0;   // the smallest ring the peer may use
  uint64_t in_cap_ = 0;   // the peer's ring size when last loaded
  int out_ = 0;          // our pipe index (the other one we read)
  uint64_t tail_ = 0;    // our writes, never read back from shared memory
  uint64_t head_ = 0;    // our reads, likewise
  uint64_t head_seen_ = 0;  // the reader's position when last loaded (checked then)
  uint64_t tail_seen_ = 0;  // the writer's position when last loaded (checked then)
  bool grow_refused_ = false;
  bool corrupt_ = false;
  bool wake_check_ = false;  // a write or a freeing read since take_wake_due
};

}  // namespace weft::tcp
