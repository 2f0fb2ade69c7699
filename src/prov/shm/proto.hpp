// SPDX-License-Identifier: MIT
// weft — the shm provider's shared-memory layout, version 4.
//
// Every endpoint owns one region: a file in /dev/shm (mode 0600, see
// region.hpp for the name), mapped MAP_SHARED by its owner and by every local
// peer that sends to it. A region holds the endpoint's INBOUND side only: one
// single-producer single-consumer ring per sender, a doorbell bitmap telling
// the owner which rings may be non-empty, and bounce segments for large
// transfers when single-copy (process_vm_readv/writev) is refused.
//
// Layout (offsets from the start of the file; sizes for the defaults of 1024
// rings of 128 slots):
//
//   0        page 0      region_header                           4 KiB
//   4096     page 1..    control: hwm line, claim bitmap,        1216 B, rounded
//                        one doorbell line per 64 rings          up to 4 KiB
//   8192     ring blocks nrings x (ring_block_ctrl 448 B +       1024 x 8640 B
//                        ring_slots x 64 B slots)                = 8.4 MiB
//   8855552  bounce      nrings x bounce_segments x 64 KiB       128 MiB
//   total                                                        136.4 MiB
//
// Only the first two pages ("fixed part", 8 KiB) are allocated when the region
// is created. The file is sparse: a ring block is allocated (fallocate) by the
// sender that claims it, the bounce segments of a ring by the sender that
// first needs them. Untouched pages of a tmpfs file cost no memory, so an
// endpoint that talks to 3 peers uses 8 KiB + 3 x 8.4 KiB of /dev/shm, not
// 136 MiB. Allocating with fallocate before first use is what keeps a full
// /dev/shm from turning into SIGBUS: a claim fails with -FI_ENOSPC instead.
//
// Slot size: 64 bytes, one cache line, so a one-line message (up to 32 bytes
// of payload) costs the consumer one cache miss, and no two messages share a
// line. A message of n payload bytes takes ceil((n + 32) / 64) consecutive
// slots: a 32-byte header and the first 32 payload bytes in the first slot,
// the rest of the payload contiguous after it (wrapping at the end of the
// slot array, so a message is at most two spans). Variable-length messages
// made of cache lines use the ring's memory densely (a 8-byte inject costs 64
// bytes, a 4 KiB one 4160), where fixed 4 KiB slots would need 4 KiB per
// small message or a separate buffer pool and a second cache miss.
//
// Ring size: 128 slots = 8 KiB per sender by default (8..4096, a power of
// two, fixed per region and recorded in the header). A ring carries any
// message up to 128 * 64 - 32 = 8160 bytes; the provider's inline limit should
// leave room for two (4064 bytes = 64 slots). The cost of a ring is paid per
// pair of endpoints that actually talk, so it stays small: 1024 endpoints all
// talking to each other use 1024 * 1023 * 8.4 KiB = 8.4 GiB; halve ring_slots
// to halve that.
//
// All integers are host-endian: regions are only ever shared inside one node.
// Fields that two processes touch concurrently are plain integers in these
// structs and are accessed through std::atomic_ref (lock-free for 4 and 8
// bytes, checked below); everything else is written before being published
// by a release store and read after the matching acquire load.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace weft::shm::proto {

// "WEFTSHM\0" read as a little-endian integer.
inline constexpr uint64_t magic = 0x004d4853'54464557ull;
// Bumped on any change of this file's layouts or protocols; peers of different
// versions refuse each other's regions (attach answers -FI_EOPNOTSUPP).
inline constexpr uint32_t version = 4;

inline constexpr size_t cache_line = 64;
inline constexpr size_t page_bytes = 4096;
inline constexpr size_t slot_bytes = 64;

inline constexpr uint32_t default_rings = 1024;
inline constexpr uint32_t max_rings = 4096;
inline constexpr uint32_t default_ring_slots = 128;
inline constexpr uint32_t min_ring_slots = 8;
inline constexpr uint32_t max_ring_slots = 4096;

inline constexpr uint32_t bounce_segments = 2;
inline constexpr size_t bounce_segment_bytes = 64 * 1024;

// Free space statvfs must show beyond the fixed part when a region is made:
// room for about 100 claimed rings, so that an almost full /dev/shm is
// reported at endpoint creation rather than at the first peer's claim.
inline constexpr uint64_t default_headroom = 1024 * 1024;

static_assert(std::atomic_ref<uint64_t>::is_always_lock_free);
static_assert(std::atomic_ref<uint32_t>::is_always_lock_free);

// ---------------------------------------------------------------------------
// Region header, page 0. Written by the owner while `state` is initialising;
// `state` = ready is stored last (release). An attacher loads state (acquire)
// and then checks magic, version and the geometry before trusting any offset.

enum region_state : uint32_t { region_initialising = 0, region_ready = 1, region_closing = 2 };

struct alignas(cache_line) region_header {
  uint64_t magic;
  uint32_t version;
  uint32_t header_bytes;       // sizeof(region_header)
  uint32_t state;              // region_state; atomic
  uint32_t owner_uid;
  int32_t owner_pid;
  uint32_t endpoint_index;     // the owner's index, part of the file name
  uint64_t owner_pidns;        // inode of the owner's /proc/self/ns/pid
  uint64_t owner_start_time;   // /proc/<pid>/stat field 22: tells pid reuse apart
  uint32_t nrings;             // rings in this region (multiple of 64, <= max_rings)
  uint32_t ring_slots;         // slots per ring (power of two)
  uint32_t slot_bytes;         // 64
  uint32_t bounce_segments;    // per ring
  uint64_t bounce_segment_bytes;
  uint64_t fixed_bytes;        // allocated at creation: header + control pages
  uint64_t control_offset;     // == page_bytes
  uint64_t claim_bitmap_offset;
  uint64_t doorbell_offset;
  uint64_t blocks_offset;      // ring blocks
  uint64_t block_bytes;        // stride of ring blocks
  uint64_t bounce_offset;      // bounce segments, page aligned
  uint64_t region_bytes;       // file size
  uint64_t reserved[4];
};
static_assert(sizeof(region_header) == 192);
static_assert(alignof(region_header) == cache_line);
static_assert(std::is_trivially_copyable_v<region_header>);
static_assert(std::is_standard_layout_v<region_header>);

// ---------------------------------------------------------------------------
// Control area, from page 1:
//
//   hwm line        one line: claim_hwm (uint32), 1 + the highest ring index
//                   ever claimed (monotonic, raised with CAS by claimers), and
//                   claimed_words, the doorbell words that hold a ring ever
//                   claimed (fetch_or by claimers), so the owner scans only
//                   the doorbell lines that can be set.
//   claim bitmap    nrings bits, packed (8 words per line). Bit i set: ring i
//                   belongs to a sender. Claimed with fetch_or (the winner of
//                   the 0 -> 1 transition owns the ring), freed with fetch_and
//                   by the owner's reclaim. Touched once per peer pair.
//   doorbell        one cache line per 64 rings (only word 0 of each line is
//                   used), so senders in different groups of 64 never share a
//                   line. Bit i set: ring i may hold messages.

struct alignas(cache_line) hwm_line {
  uint32_t claim_hwm;  // atomic
  // atomic, the owner's: nonzero while a thread may sleep on the owner's
  // CQ or counter (see "Waking the owner" below).
  uint32_t wake_wanted;
  // atomic: bit w set once a ring of doorbell word w was ever claimed. The
  // owner looks only at those doorbell lines (claims start at a word hashed
  // from the sender, so rings in use are spread over the words).
  uint64_t claimed_words;
  // atomic: 1 from a sender's wake until the owner takes it (one byte in
  // the FIFO at a time, however many senders ring).
  uint32_t wake_pending;
  uint32_t reserved0;
  uint64_t reserved[5];
};
static_assert(sizeof(hwm_line) == cache_line);
static_assert(std::is_trivially_copyable_v<hwm_line>);

struct alignas(cache_line) doorbell_line {
  uint64_t bits;  // atomic
  uint64_t reserved[7];
};
static_assert(sizeof(doorbell_line) == cache_line);
static_assert(std::is_trivially_copyable_v<doorbell_line>);

// Doorbell protocol (sender S on ring i, owner R). Every operation named
// seq_cst here is seq_cst in the code; the store-then-load on each side is
// the Dekker pattern, which needs the single total order to be race-free.
//   S: publish the message (stamp store, seq_cst — see the ring below);
//      b = bits.load(seq_cst); if bit i is clear: bits.fetch_or(bit i, seq_cst).
//   R: if bits.load(relaxed) != 0: x = bits.exchange(0, seq_cst);
//      atomic_thread_fence(seq_cst); drain every ring in x (and remember in
//      private memory the rings it could not drain to empty).
// Why no message is stranded with its bit clear: if S's load saw the bit set,
// that load precedes R's exchange in the total order, so S's publishing store
// does too, and R's loads after its fence see the message. If S's load saw
// the bit clear, S sets it and R finds it at its next collection. The load
// before the fetch_or keeps the line shared while the bit is already set, so
// a streaming sender does not pull the line away from the polling owner.

// ---------------------------------------------------------------------------
// Ring block i: 5 control lines, then the slots.

enum claim_state : uint32_t {
  claim_free = 0,
  claim_claiming = 1,  // bit won, block being allocated and initialised
  claim_active = 2,    // the sender may send; stored with release
  claim_closed = 3,    // the sender detached; the owner may reclaim
};

// Line 0: who owns the ring. Written by the claimer before it stores
// state = active (release); read by the owner after loading state (acquire).
struct alignas(cache_line) claim_entry {
  uint32_t state;       // claim_state; atomic
  uint32_t generation;  // +1 per claim, so the owner can tell a re-claimed ring
  int32_t sender_pid;
  uint32_t sender_uid;
  uint64_t sender_pidns;
  uint64_t sender_start_time;  // with sender_pid: the sender's liveness identity
  uint32_t sender_endpoint;    // the sender's endpoint index: its own region's name
  uint32_t reserved0;
  uint64_t sender_cookie;      // opaque to this layer (the provider's address data)
  uint64_t reserved[2];
};
static_assert(sizeof(claim_entry) == cache_line);
static_assert(std::is_trivially_copyable_v<claim_entry>);

// Line 1, written only by the producer: its position (slots ever written, mod
// 2^64), stored relaxed after each publish. Nothing on the data path reads it;
// it is there for diagnostics and stall detection.
struct alignas(cache_line) producer_line {
  uint64_t tail;  // atomic
  uint64_t reserved[7];
};
// Line 2, written only by the consumer: the position of the next message to
// read. Stored with release after the consumed slots are neutralised; the
// producer loads it (acquire) only when its cached copy says the ring is full,
// so the line stays in the consumer's cache while the ring has room.
struct alignas(cache_line) consumer_line {
  uint64_t head;  // atomic
  uint64_t reserved[7];
};
static_assert(sizeof(producer_line) == cache_line && sizeof(consumer_line) == cache_line);
static_assert(std::is_trivially_copyable_v<producer_line>);
static_assert(std::is_trivially_copyable_v<consumer_line>);

// A buffer in another process: its address there and its length.
struct rts_iov {
  uint64_t addr;
  uint64_t len;
};
static_assert(sizeof(rts_iov) == 16 && std::is_trivially_copyable_v<rts_iov>);

// Lines 3-4: one per bounce segment of this ring (protocol below).
struct alignas(cache_line) bounce_ctrl {
  uint64_t state;   // atomic: 0 = empty (sender's); (chunk + 1) << 32 | bytes = full (owner's)
  uint64_t xfer;    // transfer id (from the bounce_rts message)
  uint64_t offset;  // byte offset of this chunk in the transfer
  uint64_t reserved[5];
};
static_assert(sizeof(bounce_ctrl) == cache_line);
static_assert(std::is_trivially_copyable_v<bounce_ctrl>);

// Lines 5-6: the split copy of the large message the owner is pulling from
// this ring's sender (protocol below). Written by the owner (R) before it
// publishes `claim`; claimed by both sides with CAS.
inline constexpr unsigned split_offset_bits = 41;  // offsets up to max_msg (2^40) inclusive
inline constexpr uint64_t split_offset_mask = (uint64_t{1} << split_offset_bits) - 1;
inline constexpr uint64_t split_piece_min = 16 * 1024;  // smaller pieces cost more in calls than they save
struct alignas(cache_line) split_line {
  uint64_t claim;       // atomic: seq << split_offset_bits | the next byte nobody copies yet
  uint64_t done;        // atomic: bytes copied (or given up) so far, fetch_add by both
  uint64_t token;       // the sender's token of the message
  uint64_t len;         // bytes to copy: the message, clipped to the receive buffer
  uint32_t count;       // entries of dst
  uint32_t error;       // atomic: the first positive FI_E* code a copier met (0: none)
  uint64_t orphan;      // atomic: 1 + the offset of a piece S claimed and could not copy
  uint64_t orphan_len;  // its length (written before orphan, release)
  uint64_t reserved;
  rts_iov dst[4];       // R's buffers
};
static_assert(sizeof(split_line) == 2 * cache_line);
static_assert(std::is_trivially_copyable_v<split_line>);

struct ring_block_ctrl {
  claim_entry claim;
  producer_line prod;
  consumer_line cons;
  bounce_ctrl bounce[bounce_segments];
  split_line split;
};
static_assert(sizeof(ring_block_ctrl) == 7 * cache_line);
static_assert(alignof(ring_block_ctrl) == cache_line);
static_assert(std::is_trivially_copyable_v<ring_block_ctrl>);

// ---------------------------------------------------------------------------
// Messages. The first 32 bytes of a message's first slot:

struct msg_header {
  uint64_t stamp;  // atomic: the ring position of this slot; stored last, seq_cst
  uint32_t size;   // payload bytes
  uint16_t op;     // opaque to the ring; the provider's operation code
  uint16_t flags;  // opaque to the ring
  uint64_t tag;
  uint64_t data;   // remote CQ data
};
static_assert(sizeof(msg_header) == 32);
static_assert(std::is_trivially_copyable_v<msg_header>);
inline constexpr size_t msg_header_bytes = sizeof(msg_header);

// Slots a message of `size` payload bytes occupies.
constexpr uint64_t slots_for(uint64_t size) noexcept {
  return (size + msg_header_bytes + slot_bytes - 1) / slot_bytes;
}
static_assert(slots_for(0) == 1 && slots_for(32) == 1 && slots_for(33) == 2);
static_assert(slots_for(4064) == 64 && slots_for(4096) == 65);

// ---------------------------------------------------------------------------
// Geometry: every offset follows from (nrings, ring_slots). The owner writes
// the result into the header; an attacher recomputes it and refuses a header
// that disagrees.

struct geometry {
  uint64_t fixed_bytes, control_offset, claim_bitmap_offset, doorbell_offset;
  uint64_t blocks_offset, block_bytes, bounce_offset, bounce_ring_bytes, region_bytes;
};

constexpr uint64_t round_up(uint64_t v, uint64_t to) noexcept { return (v + to - 1) / to * to; }

constexpr bool valid_shape(uint32_t nrings, uint32_t ring_slots) noexcept {
  return nrings >= 64 && nrings <= max_rings && nrings % 64 == 0 &&
         ring_slots >= min_ring_slots && ring_slots <= max_ring_slots &&
         (ring_slots & (ring_slots - 1)) == 0;
}

constexpr geometry compute_geometry(uint32_t nrings, uint32_t ring_slots) noexcept {
  geometry g{};
  uint64_t words = nrings / 64;
  g.control_offset = page_bytes;
  g.claim_bitmap_offset = g.control_offset + sizeof(hwm_line);
  g.doorbell_offset = g.claim_bitmap_offset + round_up(words * 8, cache_line);
  uint64_t control_end = g.doorbell_offset + words * sizeof(doorbell_line);
  g.fixed_bytes = round_up(control_end, page_bytes);
  g.blocks_offset = g.fixed_bytes;
  g.block_bytes = sizeof(ring_block_ctrl) + uint64_t{ring_slots} * slot_bytes;
  g.bounce_offset = round_up(g.blocks_offset + nrings * g.block_bytes, page_bytes);
  g.bounce_ring_bytes = bounce_segments * bounce_segment_bytes;
  g.region_bytes = g.bounce_offset + nrings * g.bounce_ring_bytes;
  return g;
}
// The defaults, as documented at the top of this file.
static_assert(compute_geometry(1024, 128).fixed_bytes == 8192);
static_assert(compute_geometry(1024, 128).block_bytes == 8640);
static_assert(compute_geometry(1024, 128).bounce_offset == 8855552);
static_assert(compute_geometry(1024, 128).region_bytes == 143073280);
static_assert(compute_geometry(4096, 4096).region_bytes < (uint64_t{1} << 40));

// Ring protocol (one producer, one consumer; positions are 64-bit counters of
// slots, compared only by equality and by unsigned difference, so they wrap
// at 2^64 like any other value).
//
// The first word of every slot is its stamp. Invariant: outside the window
// between the producer's write and the consumer's release of a message, the
// stamp of the slot holding position p (slot p mod N) is p - k*N for some
// k >= 1 — a position of an earlier lap, never p. ring_init establishes it
// (stamp = p - N for the first lap).
//
// Producer, message of k slots at its position t (private copy of tail):
//   1. room: if t + k - head_cache > N, reload head_cache = cons.head
//      (acquire); if still no room, -FI_EAGAIN (never overwrite, never wait).
//   2. write header fields (not the stamp) and payload into slots t .. t+k-1.
//      Continuation slots carry payload in their first word.
//   3. store stamp(t) = t, seq_cst: publishes the whole message (release
//      part) and orders it before the doorbell load (seq_cst part).
//   4. t += k; prod.tail = t (relaxed).
// Consumer, at its position h (private copy of head):
//   1. load stamp(h) (acquire); != h: empty. Only the producer's step 3 for
//      position h can write h there (the producer is never a full lap ahead,
//      and continuation slots are neutralised, below), so equality means the
//      whole message is visible.
//   2. read the header; size > capacity - 32 means a corrupt peer (-FI_EIO).
//   3. copy the payload out (two spans at most).
//   4. release: store stamp(h + j) = h + j (relaxed) for each continuation
//      slot j = 1..k-1, so that stale payload bytes can never be mistaken for
//      a future stamp; then h += k; cons.head = h (release). After the
//      producer's acquire of head, those slots are its to overwrite.
//
// Claim protocol (sender S, region of owner R):
//   S: pick a zero bit i of the claim bitmap, fetch_or it (acq_rel); lost the
//      race: pick again. Full: -FI_EBUSY.
//   S: fallocate ring block i (failure: clear the bit, -FI_ENOSPC); write
//      claim entry (state = claiming, generation + 1, identity); ring_init;
//      raise claim_hwm to i + 1; store state = active (release).
//   S: detach: store state = closed (release), ring the doorbell.
//   R: on a doorbell for a ring it does not know (or whose generation
//      changed): load state (acquire), read the identity, open a consumer.
//   R: reclaim (state closed, or the sender found dead): drop its consumer,
//      store state = free, punch the block's and bounce pages out of the file,
//      clear the claim bit (release). The next claimer re-initialises.
//
// Segmented copy through bounce buffers (used when process_vm_readv/writev
// is refused; the copy loop is the provider's, this is its contract):
//   The 2 segments of ring i (64 KiB each, at bounce_offset + i * 128 KiB)
//   carry data from the ring's sender to the region's owner; data flowing the
//   other way uses the segments of the sender's own region.
//   1. S allocates them once (region::reserve_bounce; -FI_ENOSPC on failure).
//   2. S sends a ring message op = bounce_rts with {xfer id, total bytes} in
//      its payload (tag and data in the header). One bounce transfer per ring
//      at a time; later ones queue behind it in S, keeping message order.
//   3. S writes chunk c (<= 64 KiB) into segment c % 2 once that segment's
//      state is 0 (acquire): payload, then xfer and offset, then state =
//      (c + 1) << 32 | bytes (release), then rings R's doorbell for ring i.
//      Segment busy: the send stays queued; S retries from its progress.
//   4. R, having matched the rts to a receive buffer (or to nothing, to
//      discard), reads chunk c from segment c % 2 when state >> 32 == c + 1
//      and xfer matches (acquire), copies it out, stores state = 0 (release).
//      After the last chunk R completes the receive.
//   5. S completes the send when its last chunk's segment is back to 0.
//   A peer found dead aborts the transfer; R's reclaim zeroes the states.
// Single copy (process_vm_readv/writev allowed, see peer.hpp cma_available):
//   S sends op = cma_rts with its pid and iovecs; R reads them directly and
//   answers with a ring message in S's region; the bounce path is not used.
// Hot rings (version 4): the owner may keep up to a few rings that just
// delivered in its pending set and poll them directly, leaving their shared
// doorbell bits set (its collect takes only the other bits, fetch_and), so a
// busy sender finds its bit set and rings with a load. A ring stops being
// hot while it stays in the pending set: the next collect takes its bit
// like any other, and only a drain after that may let it go, as for every
// ring. An owner that may sleep (wake_wanted) keeps no hot ring.
// Waking the owner (version 4): a sleeping owner is woken through its FIFO
// (wake.hpp), Dekker-style as for the doorbells:
//   owner, before it may sleep: wake_wanted = 1 (seq_cst), then collects
//     the doorbells; it sleeps only if that finds nothing. On waking (and on
//     any progress while wake_wanted): if wake_pending, stores 0 and reads
//     the FIFO empty. Stores wake_wanted = 0 once no one can sleep.
//   sender, after its doorbell fetch_or found the bit clear: loads
//     wake_wanted (seq_cst); if set and exchange(wake_pending, 1) was 0,
//     writes one byte into the FIFO.
//   Either the owner's collect sees the bit, or the sender's load sees
//   wake_wanted; a byte stays in the FIFO while wake_pending is 1, so a wake
//   is never lost and a busy ring costs no system call.
// Split copy (version 4): for a large single-copy message, both processes
// copy, each on its own core, R with process_vm_readv from S, S with
// process_vm_writev into R, so a transfer takes about half the time one
// copier needs. Through the split line of S's ring in R's region:
//   1. R, having matched the rts (and the line being free: at most one split
//      per ring at a time), writes token, len, count, dst, done = 0,
//      error = 0, orphan = 0, then claim = (seq + 1) << 41 | n0 (release):
//      R's own first piece [0, n0), a little over half, is claimed with the
//      publication (sealed when n0 = len).
//   2. Either side claims a piece [off, off + n) by CAS on claim from
//      seq << 41 | off to seq << 41 | (off + n) (acq_rel): S takes all that
//      is left; R half of what is left, at least split_piece_min bytes, at
//      most what is left (any sizes are correct; these make one call on
//      each side the common case). A
//      successful CAS proves the transfer is still R's current one (its
//      fields cannot change before every piece is claimed and done == len),
//      so S reads token, count and dst after its CAS, never before.
//   3. The claimer copies its piece and adds n to done (release); on an
//      error it stores error (first one wins) and still adds n.
//   4. S, refused by the kernel (process_vm_writev may be denied where
//      readv is allowed), hands its piece back: orphan_len = n, then
//      orphan = 1 + off (release), and helps this peer no more. R copies
//      an orphan it finds and adds its length to done.
//   5. R finishes when done == len (acquire): completes the receive and
//      answers op_ack as for a plain pull. S helps only with messages it
//      has waiting for an op_ack on this ring, so a piece never outlives its
//      buffers; R's buffers are its posted receive, held until step 5.
//   A sender that dies mid-copy is found by R's liveness check (the pull
//   fails with FI_ECONNRESET); a receiver that dies fails S's writev (ESRCH)
//   and S's send as any lost peer does.


// ---------------------------------------------------------------------------
// The provider's messages (msg_header.op and .flags; the ring does not look).
//
//   op_inline      the payload is the message (at most inline_max bytes).
//   op_rts_cma     a message too large to travel inline, to be pulled by the
//                  receiver with process_vm_readv once it is matched. Payload:
//                  rts_payload and `count` rts_iov (the sender's buffers).
//                  Answered by op_ack in the sender's region.
//   op_rts_bounce  the same message carried through the ring's bounce
//                  segments (protocol above, xfer id = token). Payload:
//                  rts_payload with count 0. The sender completes when its
//                  last chunk is consumed: no op_ack.
//   op_ack         receiver -> sender, through a ring the receiver claims in
//                  the sender's region: tag = token, data = ack_status or a
//                  positive FI_E* code. No payload.
// In every message with a match, tag is the tag (flag_tagged) and data the
// remote CQ data (flag_data).
//
// RMA and atomics (version 2). The initiator's request names the target's
// memory by (key, address, length); the TARGET checks every range against
// its registrations before touching a byte, moves the data and answers, so
// a bad key or range is an error completion at the initiator and leaves the
// target's memory untouched. In requests, tag = the initiator's token and
// data = remote CQ data (flag_data); flag_no_reply marks inject forms, which
// get no answer.
//   op_rma_write   rma_payload, `count` rma_target, then by mode:
//                  rma_inline: the data (at most inline_max bytes);
//                  rma_cma: `lcount` rts_iov, the initiator's buffers, which
//                  the target reads with process_vm_readv;
//                  rma_bounce: nothing; the initiator streams the data
//                  through the ring's bounce segments (xfer id = token).
//                  Answered by op_ack (ack_use_bounce as for op_rts_cma).
//   op_rma_read    rma_payload, `count` rma_target, `lcount` rts_iov (the
//                  initiator's buffers). rma_inline: answered by op_resp
//                  carrying the data; rma_cma: the target writes the data
//                  with process_vm_writev and answers op_ack; refused, or
//                  rma_bounce: op_read_bounce and the data through bounce
//                  segments of the initiator's region.
//   op_atomic      atomic_payload, `count` rma_target (len in elements), the
//                  operands (none for FI_ATOMIC_READ), then the compare
//                  values (compare atomics). Executed at the target by
//                  util::atomic_apply; answered by op_resp carrying the
//                  prior values (fetch and compare atomics) or op_ack.
//   op_resp        target -> initiator: tag = token, data = ack_done or a
//                  positive FI_E* code; payload: read data / prior values.
//   op_read_bounce target -> initiator: tag = token; payload rts_payload
//                  {the target's xfer id, total, 0}; chunks follow.

enum msg_op : uint16_t {
  op_inline = 1,
  op_rts_cma = 2,
  op_rts_bounce = 3,
  op_ack = 4,
  op_rma_write = 5,
  op_rma_read = 6,
  op_atomic = 7,
  op_resp = 8,
  op_read_bounce = 9,
};

enum msg_flag : uint16_t {
  flag_tagged = 1,    // matched by tag (fi_tsend); else by order (fi_send)
  flag_data = 2,      // header.data is remote CQ data
  flag_no_reply = 4,  // an RMA or atomic inject: no answer wanted
};

enum rma_mode : uint32_t { rma_inline = 0, rma_cma = 1, rma_bounce = 2 };

struct rma_payload {
  uint64_t total;   // bytes
  uint32_t count;   // rma_target entries that follow
  uint32_t lcount;  // rts_iov entries after them
  uint32_t mode;    // rma_mode
  uint32_t reserved;
};
static_assert(sizeof(rma_payload) == 24 && std::is_trivially_copyable_v<rma_payload>);

struct rma_target {
  uint64_t addr;
  uint64_t len;  // bytes; elements for atomics
  uint64_t key;
};
static_assert(sizeof(rma_target) == 24 && std::is_trivially_copyable_v<rma_target>);

struct atomic_payload {
  uint32_t op;        // enum fi_op
  uint32_t datatype;  // enum fi_datatype
  uint32_t kind;      // util::atomic_kind
  uint32_t count;     // rma_target entries that follow
  uint64_t elements;  // the sum of their lengths
};
static_assert(sizeof(atomic_payload) == 24 && std::is_trivially_copyable_v<atomic_payload>);
inline constexpr uint32_t rma_max_targets = 4;
// Operand bytes one atomic carries (operands and compare values each).
inline constexpr uint32_t atomic_max_bytes = 2048;

enum ack_status : uint64_t {
  ack_done = 0,        // pulled (or discarded by the receiver): the send is complete
  ack_use_bounce = 1,  // process_vm_readv refused: stream this token through bounce
};
// Any other ack value is a positive FI_E* code the send completes with.


struct rts_payload {
  uint64_t token;  // the sender's handle for the ack (and the bounce xfer id)
  uint64_t total;  // message bytes; the sum of the iov lengths for op_rts_cma
  uint32_t count;  // rts_iov entries that follow (0 for op_rts_bounce)
  uint32_t reserved;
};
static_assert(sizeof(rts_payload) == 24 && std::is_trivially_copyable_v<rts_payload>);
inline constexpr uint32_t rts_max_iov = 4;

}  // namespace weft::shm::proto
