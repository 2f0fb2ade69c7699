// SPDX-License-Identifier: MIT
// weft — the lock-free single-producer single-consumer ring of shared memory.
//
// The protocol (stamps, positions, memory orders) is written down in
// proto.hpp next to the layout it runs on. This header is the code: a
// producer and a consumer handle, each holding its own position and a cached
// copy of the other side's in private memory, so that the shared lines are
// touched only when needed. No lock, no system call, no allocation; a full
// ring answers errc::again and nothing is written.
//
// Handles are not thread-safe: one thread at a time per handle (the
// provider's lock policy), one producer and one consumer per ring. The ring
// memory must have been set up by ring_init before either handle is made,
// and the handles learn of it through a release/acquire pair (the claim
// entry's state in a region; thread creation in tests).
#pragma once

#include "core/errc.hpp"
#include "core/hot.hpp"
#include "prov/shm/proto.hpp"
#include "util/fast_mutex.hpp"

#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace weft::shm {

// Spin-wait hint for loops that retry a full or empty ring.
using util::cpu_relax;

// ThreadSanitizer orders accesses by their virtual addresses, and a ring is
// mapped twice when both its ends live in one process (two endpoints of a
// test): the producer's stamp store and the consumer's load are then at two
// addresses, and TSan sees no order between what a thread did before
// publishing a message and what another did after taking it (say, a target
// thread writing RMA data, then its answer; the initiator reading the data
// after the answer's completion). Under TSan, publishing releases and taking
// acquires one object for all rings, as TSan itself does for sockets; in
// other builds these are nothing (docs/decisions.md).
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
inline char tsan_ring_order;
inline void tsan_publishing() noexcept { __tsan_release(&tsan_ring_order); }
inline void tsan_taken() noexcept { __tsan_acquire(&tsan_ring_order); }
#else
inline void tsan_publishing() noexcept {}
inline void tsan_taken() noexcept {}
#endif

// The seq_cst fence of the doorbell protocol (proto.hpp). ThreadSanitizer
// does not model fences and GCC says so at every use; the fence is still
// what the memory model requires, so it stays, without the noise.
inline void seq_cst_fence() noexcept {
#if defined(__SANITIZE_THREAD__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#endif
  std::atomic_thread_fence(std::memory_order_seq_cst);
#if defined(__SANITIZE_THREAD__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
}

// Copies n bytes where n is small but not known at compile time: for 4 to
// 16 bytes two fixed-size (overlapping) moves, else memcpy. A call to memcpy
// with its size dispatch costs more than the copy of a small message.
inline void copy_small(void* dst, const void* src, size_t n) noexcept {
  auto* d = static_cast<std::byte*>(dst);
  auto* s = static_cast<const std::byte*>(src);
  if (n - 8 <= 8) {  // 8..16
    uint64_t a, b;
    std::memcpy(&a, s, 8);
    std::memcpy(&b, s + n - 8, 8);
    std::memcpy(d, &a, 8);
    std::memcpy(d + n - 8, &b, 8);
  } else if (n - 4 < 4) {  // 4..7
    uint32_t a, b;
    std::memcpy(&a, s, 4);
    std::memcpy(&b, s + n - 4, 4);
    std::memcpy(d, &a, 4);
    std::memcpy(d + n - 4, &b, 4);
  } else if (n) {
    std::memcpy(d, s, n);
  }
}

// Where one ring lives: its two index lines and its slot array.
struct ring_memory {
  proto::producer_line* prod = nullptr;
  proto::consumer_line* cons = nullptr;
  std::byte* slots = nullptr;  // nslots * 64 bytes, cache-line aligned
  uint32_t nslots = 0;         // a power of two
};

// The header fields a sender chooses; the ring does not interpret them.
struct msg_fields {
  uint16_t op = 0;
  uint16_t flags = 0;
  uint64_t tag = 0;
  uint64_t data = 0;
};

namespace ring_detail {

inline std::atomic_ref<uint64_t> stamp(std::byte* slots, uint64_t mask, uint64_t pos) noexcept {
  return std::atomic_ref<uint64_t>(
      *reinterpret_cast<uint64_t*>(slots + (pos & mask) * proto::slot_bytes));
}

// The payload of the message at `pos` starts 32 bytes into its first slot and
// runs on contiguously, wrapping once at the end of the slot array.
struct payload_spans {
  std::byte* first = nullptr;
  size_t first_len = 0;
  std::byte* second = nullptr;
  size_t second_len = 0;
};
inline payload_spans spans(std::byte* slots, uint64_t mask, uint64_t pos, size_t size) noexcept {
  size_t ring_bytes = (mask + 1) * proto::slot_bytes;
  size_t off = (pos & mask) * proto::slot_bytes + proto::msg_header_bytes;
  size_t first = std::min(size, ring_bytes - off);
  return {slots + off, first, slots, size - first};
}

}  // namespace ring_detail

// Sets both positions to `start` and stamps each slot with the position it
// held one lap before (proto.hpp invariant). Not concurrent with any handle.
inline void ring_init(const ring_memory& m, uint64_t start = 0) noexcept {
  uint64_t mask = m.nslots - 1;
  for (uint64_t i = 0; i < m.nslots; ++i)
    ring_detail::stamp(m.slots, mask, start + i).store(start + i - m.nslots, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(m.prod->tail).store(start, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(m.cons->head).store(start, std::memory_order_release);
}

// Space reserved for one message: write the payload, then publish.
struct ring_reservation {
  ring_detail::payload_spans span;
  uint64_t position = 0;
  uint32_t size = 0;
  uint32_t nslots = 0;

  // Copies `len` bytes to payload offset `off` (off + len <= size).
  void write(size_t off, const void* src, size_t len) const noexcept {
    auto* s = static_cast<const std::byte*>(src);
    if (off < span.first_len) {
      size_t n = std::min(len, span.first_len - off);
      std::memcpy(span.first + off, s, n);
      s += n, off += n, len -= n;
    }
    if (len) std::memcpy(span.second + (off - span.first_len), s, len);
  }
};

class ring_producer {
 public:
  ring_producer() = default;
  explicit ring_producer(const ring_memory& m) noexcept
      : slots_(m.slots),
        prod_(m.prod),
        cons_(m.cons),
        mask_(m.nslots - 1),
        nslots_(m.nslots),
        end_(m.slots + size_t{m.nslots} * proto::slot_bytes),
        max_payload_(m.nslots * proto::slot_bytes - proto::msg_header_bytes),
        tail_(std::atomic_ref<uint64_t>(m.prod->tail).load(std::memory_order_relaxed)),
        head_cache_(std::atomic_ref<uint64_t>(m.cons->head).load(std::memory_order_acquire)) {}

  bool valid() const noexcept { return slots_ != nullptr; }
  // The largest payload this ring can carry at all (when empty).
  size_t max_payload() const noexcept { return max_payload_; }
  uint64_t position() const noexcept { return tail_; }
  // Where the next message's header goes (for a prefetch hint only: the
  // ring may be full, or gone by the time the hint is used).
  const std::byte* next_slot() const noexcept { return slots_ + (tail_ & mask_) * proto::slot_bytes; }

  // Reserves slots for a message of `size` payload bytes. errc::again: not
  // enough room now; errc::msgsize: never fits; errc::io: the consumer's
  // index is impossible (a corrupt peer). One reservation at a time:
  // publish it before the next reserve.
  errc reserve(size_t size, ring_reservation& r) noexcept {
    if (size > max_payload()) return errc::msgsize;
    uint64_t k = proto::slots_for(size);
    if (tail_ - head_cache_ + k > nslots_) {
      head_cache_ = std::atomic_ref<uint64_t>(cons_->head).load(std::memory_order_acquire);
      uint64_t used = tail_ - head_cache_;
      if (used > nslots_) return errc::io;
      if (used + k > nslots_) return errc::again;
    }
    r.span = ring_detail::spans(slots_, mask_, tail_, size);
    r.position = tail_;
    r.size = static_cast<uint32_t>(size);
    r.nslots = static_cast<uint32_t>(k);
    return errc::ok;
  }

  // Writes the header and makes the message visible (seq_cst stamp store:
  // a release for the consumer, and the first half of the doorbell's Dekker
  // pattern).
  void publish(const ring_reservation& r, const msg_fields& f) noexcept {
    proto::msg_header h{0, r.size, f.op, f.flags, f.tag, f.data};
    std::byte* slot = slots_ + (r.position & mask_) * proto::slot_bytes;
    constexpr size_t skip = sizeof h.stamp;
    std::memcpy(slot + skip, reinterpret_cast<const std::byte*>(&h) + skip, sizeof h - skip);
    tsan_publishing();
    ring_detail::stamp(slots_, mask_, r.position).store(r.position, std::memory_order_seq_cst);
    tail_ = r.position + r.nslots;
    std::atomic_ref<uint64_t>(prod_->tail).store(tail_, std::memory_order_relaxed);
  }

  // One contiguous payload, what every single-buffer send is: the protocol
  // of reserve + write + publish, with the header written in place and no
  // span bookkeeping (the per-message path of small sends).
  WEFT_ALWAYS_INLINE errc try_send(const msg_fields& f, const void* buf, size_t len) noexcept {
    if (len > max_payload()) return errc::msgsize;
    const uint64_t k = proto::slots_for(len);
    if (tail_ - head_cache_ + k > nslots_) {
      head_cache_ = std::atomic_ref<uint64_t>(cons_->head).load(std::memory_order_acquire);
      uint64_t used = tail_ - head_cache_;
      if (used > nslots_) return errc::io;
      if (used + k > nslots_) return errc::again;
    }
    std::byte* slot = slots_ + (tail_ & mask_) * proto::slot_bytes;
    std::byte* payload = slot + proto::msg_header_bytes;
    const size_t room = static_cast<size_t>(end_ - payload);
    if (len <= room) [[likely]] {
      copy_small(payload, buf, len);
    } else {
      std::memcpy(payload, buf, room);
      std::memcpy(slots_, static_cast<const std::byte*>(buf) + room, len - room);
    }
    proto::msg_header h{0, static_cast<uint32_t>(len), f.op, f.flags, f.tag, f.data};
    constexpr size_t skip = sizeof h.stamp;
    std::memcpy(slot + skip, reinterpret_cast<const std::byte*>(&h) + skip, sizeof h - skip);
    tsan_publishing();
    ring_detail::stamp(slots_, mask_, tail_).store(tail_, std::memory_order_seq_cst);
    tail_ += k;
    std::atomic_ref<uint64_t>(prod_->tail).store(tail_, std::memory_order_relaxed);
    return errc::ok;
  }

  errc try_sendv(const msg_fields& f, const iovec* iov, size_t count) noexcept {
    size_t total = 0;
    for (size_t i = 0; i < count; ++i) total += iov[i].iov_len;
    ring_reservation r;
    if (errc e = reserve(total, r); e != errc::ok) return e;
    size_t off = 0;
    for (size_t i = 0; i < count; ++i) {
      if (iov[i].iov_len) r.write(off, iov[i].iov_base, iov[i].iov_len);
      off += iov[i].iov_len;
    }
    publish(r, f);
    return errc::ok;
  }

 private:
  std::byte* slots_ = nullptr;
  proto::producer_line* prod_ = nullptr;
  proto::consumer_line* cons_ = nullptr;
  uint64_t mask_ = 0;
  uint64_t nslots_ = 0;
  std::byte* end_ = nullptr;  // the end of the slot array
  size_t max_payload_ = 0;
  uint64_t tail_ = 0;
  uint64_t head_cache_ = 0;
};

// A message in the ring, valid until it is released.
struct msg_view {
  uint64_t position = 0;
  uint32_t size = 0;
  uint32_t nslots = 0;
  msg_fields fields;
  const std::byte* first = nullptr;
  size_t first_len = 0;
  const std::byte* second = nullptr;
  size_t second_len = 0;

  // Copies up to `len` payload bytes from offset `off`; returns the count.
  // (Inline by force, as region::collect_doorbells.)
  WEFT_ALWAYS_INLINE size_t copy_to(void* dst, size_t len, size_t off = 0) const noexcept {
    if (off >= size) return 0;
    len = std::min(len, size - off);
    auto* d = static_cast<std::byte*>(dst);
    size_t done = 0;
    if (off < first_len) {
      done = std::min(len, first_len - off);
      copy_small(d, first + off, done);
      off += done;
    }
    if (done < len) std::memcpy(d + done, second + (off - first_len), len - done);
    return len;
  }
};

class ring_consumer {
 public:
  ring_consumer() = default;
  explicit ring_consumer(const ring_memory& m) noexcept
      : slots_(m.slots),
        cons_(m.cons),
        mask_(m.nslots - 1),
        nslots_(m.nslots),
        end_(m.slots + size_t{m.nslots} * proto::slot_bytes),
        max_payload_(m.nslots * proto::slot_bytes - proto::msg_header_bytes),
        head_(std::atomic_ref<uint64_t>(m.cons->head).load(std::memory_order_relaxed)) {}

  bool valid() const noexcept { return slots_ != nullptr; }
  uint64_t position() const noexcept { return head_; }
  size_t max_payload() const noexcept { return max_payload_; }

  bool empty() const noexcept {
    return ring_detail::stamp(slots_, mask_, head_).load(std::memory_order_acquire) != head_;
  }

  // The oldest message, or errc::again when there is none; errc::io when its
  // header is impossible (a corrupt peer). Peeking twice gives the same one.
  errc peek(msg_view& v) noexcept {
    std::byte* slot = slots_ + (head_ & mask_) * proto::slot_bytes;
    if (std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(slot))
            .load(std::memory_order_acquire) != head_)
      return errc::again;
    proto::msg_header h;  // all but the stamp, which was just read atomically
    constexpr size_t skip = sizeof h.stamp;
    std::memcpy(reinterpret_cast<std::byte*>(&h) + skip, slot + skip, sizeof h - skip);
    if (h.size > max_payload_) return errc::io;
    tsan_taken();
    std::byte* first = slot + proto::msg_header_bytes;
    const size_t first_len = std::min<size_t>(h.size, static_cast<size_t>(end_ - first));
    v = msg_view{head_, h.size, static_cast<uint32_t>(proto::slots_for(h.size)),
                 msg_fields{h.op, h.flags, h.tag, h.data}, first, first_len, slots_,
                 h.size - first_len};
    return errc::ok;
  }

  // Gives the message's slots back to the producer (proto.hpp, consumer 4).
  void release(const msg_view& v) noexcept {
    for (uint64_t j = 1; j < v.nslots; ++j)
      ring_detail::stamp(slots_, mask_, head_ + j).store(head_ + j, std::memory_order_relaxed);
    head_ += v.nslots;
    std::atomic_ref<uint64_t>(cons_->head).store(head_, std::memory_order_release);
  }

 private:
  std::byte* slots_ = nullptr;
  proto::consumer_line* cons_ = nullptr;
  uint64_t mask_ = 0;
  uint64_t nslots_ = 0;
  std::byte* end_ = nullptr;  // the end of the slot array
  size_t max_payload_ = 0;
  uint64_t head_ = 0;
};

}  // namespace weft::shm
