// SPDX-License-Identifier: MIT
// weft — reliable datagrams: the state of one pair of endpoints (a "link"),
// independent of sockets, messages and completions.
//
// A provider with a datagram endpoint keeps one link per peer it talks to
// and asks it, for every datagram, what to do. The link numbers outgoing
// data datagrams, remembers what is in flight (so the provider can send it
// again from the message's own buffers: nothing is copied here), accepts
// incoming data strictly in order, and acknowledges. The contract:
//
//  * Sending. While window_open(), the provider may send a data datagram:
//    reserve() makes room to record it, stamp_data() fills its header, and
//    once the socket took it, sent() records it (and ack_sent(): every
//    datagram carries the acknowledgement). Nothing else goes
//    out of order: a message's datagrams are sent in order, messages in the
//    order they were posted.
//  * Receiving. receive() classifies a parsed datagram (rd_proto.hpp) and
//    consumes its acknowledgement, calling `acked(flight)` for every datagram
//    of ours it newly acknowledges, oldest first (the flight with flag_last
//    completes a message). For `deliver`, the provider takes the payload and
//    calls consumed(); if it cannot take it now (no room), it does not, and
//    the datagram will come again.
//  * Acknowledging. ack_due() says an acknowledgement is owed: the provider
//    sends a bare ack (stamp_ack, then ack_sent) unless a data datagram to
//    that peer left in the meantime.
//  * Time. tick(now, resend) is called from progress: after a retransmission
//    timeout (adapted to the measured round trip, RFC 6298, with Karn's rule
//    and exponential back-off) every datagram in flight is offered to
//    `resend` again, oldest first (go-back-N: the receiver keeps nothing out
//    of order). Three duplicate acknowledgements do the same at once. When
//    nothing has been acknowledged for config::peer_timeout_ns while data is
//    in flight, tick answers `dead`: the provider fails what it owed the peer
//    and calls reset().
//  * No room. A receiver that cannot take the next datagram now (no receive
//    entry, unexpected data at its bound, a full CQ) calls refuse(): its
//    acknowledgements then advertise a window of 0, which tells the sender
//    "alive, but hold on". The sender counts such an answer as a sign of
//    life (no peer timeout while it comes), sends nothing new and probes
//    with its oldest datagram only, at its retransmission timeout (at most
//    a quarter of the peer timeout). When room may have come, the receiver
//    calls reopen(): the acknowledgement it owes then opens the window
//    again and the sender resends at once.
//  * Incarnations are per link (start, reset): a link declared dead starts
//    again under a new epoch, so the peer, if it still lives, sees a new
//    incarnation and drops what it had half-received from the old one.
//  * Renewal. A link made by start() is fresh and says so (rd_proto.hpp);
//    one made again by reset() is not. The provider may drop a link that
//    is idle both ways (nothing in flight, nothing owed, nothing
//    half-received, nothing heard for longer than the peer's timeout) and
//    start a new one when it next needs it. The peer's link, seeing that
//    fresh link of the same endpoint, answers `renewed`: the provider calls
//    renew(), which numbers both streams from 0 again, and sends what it had
//    queued from its start; none of it was delivered, so nothing is lost or
//    repeated.
//
// Memory: an idle link is this object (a few dozen bytes); the ring of
// datagrams in flight is allocated on the first send and released by
// trim() once nothing is in flight.
#pragma once

#include "util/rd_proto.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>

namespace weft::util::rd {

// Every receiver takes at least this many datagrams beyond its
// acknowledgement, so a sender starts with that window before it has heard
// the peer; a window is at most max_window (far below 2^31: rd_proto.hpp).
inline constexpr uint32_t min_window = 16;
inline constexpr uint32_t max_window = 1u << 16;

struct config {
  uint32_t window = 256;                    // most datagrams in flight; what we advertise
  uint32_t rto_init_us = 20000;             // before the first round-trip sample
  uint32_t rto_min_us = 2000;               // the peer acknowledges only from its progress calls
  uint32_t rto_max_us = 500000;
  uint64_t peer_timeout_ns = 10'000'000'000;  // nothing acknowledged for this long: the peer is gone
  uint32_t dup_acks = 3;                    // duplicate acknowledgements that resend at once
  uint32_t instance = 1;                    // the endpoint's identity on the wire, never 0
};

// A data datagram in flight: what the provider needs to send it again.
struct flight {
  void* msg;         // the provider's message
  uint64_t offset;   // where this datagram's payload starts in the message
  uint32_t bytes;    // payload bytes
  uint8_t flags;     // flag_first / flag_last
  bool resent;       // sent more than once: no round-trip sample from it (Karn)
  uint64_t sent_ns;  // when it was (last) sent
};

enum class verdict : uint8_t {
  deliver,       // the next datagram in order: take it, then consumed()
  duplicate,     // already delivered (an acknowledgement is owed again)
  out_of_order,  // a datagram after a missing one: dropped, acknowledgement owed
  ack_only,      // an acknowledgement, consumed
  stale,         // meant for an earlier incarnation of this endpoint
  restart,       // the peer is a new incarnation: reset() it, then receive() again
  renewed,       // the peer dropped its idle link and made a fresh one: renew(),
                 // send what was queued again from its start, then receive() again
  invalid,       // numbers no correct peer sends (acknowledges data never sent, ...)
};

enum class tick_result : uint8_t { idle, ok, dead };

// A message put together from in-order data datagrams: checks that each
// datagram fits the length its first one announced. The caller copies the
// payload to the message's buffer at `off` (read before add()).
struct assembly {
  enum class fit : uint8_t {
    ok,         // taken; more to come
    complete,   // taken; the message is whole
    overflow,   // more payload than the message has left: nothing taken
    short_end,  // the last datagram, and the message is short of its length
  };
  uint64_t len = 0;  // the message's payload bytes
  uint64_t off = 0;  // received so far
  void begin(uint64_t message_len) noexcept { len = message_len, off = 0; }
  fit add(uint32_t bytes, bool last) noexcept {
    if (bytes > len - off) return fit::overflow;
    off += bytes;
    if (!last) return fit::ok;
    return off == len ? fit::complete : fit::short_end;
  }
};

class link {
 public:
  link() noexcept = default;
  link(const link&) = delete;
  link& operator=(const link&) = delete;

  // ---- sending ----
  bool window_open() const noexcept {
    // A peer without room gets nothing new; the oldest datagram probes it.
    if (peer_held_) return false;
    return next_ - una_ < std::min(cfg_window_, peer_window_);
  }
  // The peer said it has no room for what we sent (refuse() on its side).
  bool peer_held() const noexcept { return peer_held_; }
  bool in_flight() const noexcept { return next_ != una_; }
  uint32_t in_flight_count() const noexcept { return next_ - una_; }
  // The header of the next data datagram (this link's numbers and our ack).
  void stamp_data(dgram& h, uint8_t flags, uint32_t bytes) noexcept {
    stamp(h, kind::data);
    h.flags |= flags;
    h.seq = next_;
    h.bytes = bytes;
  }
  void stamp_ack(dgram& h) noexcept { stamp(h, kind::ack); }
  // The ring that sent() records in, allocated on first use; false when
  // memory is short (send nothing then).
  bool reserve() noexcept { return ring_ || grow(); }
  // Records the data datagram just stamped and sent (after reserve()).
  void sent(const flight& f, uint64_t now) noexcept {
    if (!in_flight()) progress_ns_ = now;  // the peer's clock starts with our first datagram
    flight& slot = ring_[next_ & mask_];
    slot = f;
    slot.resent = false;
    slot.sent_ns = now;
    ++next_;
  }
  // The datagram numbered `seq` (in flight), to send again; stamp with
  // stamp_resend.
  void stamp_resend(dgram& h, const flight& f, uint32_t seq) noexcept {
    stamp(h, kind::data);
    h.flags |= f.flags;
    h.seq = seq;
    h.bytes = f.bytes;
  }

  // ---- receiving ----
  template <class Acked>
  verdict receive(const view& v, uint64_t now, Acked&& acked) noexcept {
    const dgram& h = v.h;
    const uint32_t my_epoch = my_epoch_;
    const bool data = h.kind == uint8_t(kind::data);
    if (peer_epoch_ != h.epoch) {
      if (peer_epoch_ != 0)
        return h.instance == peer_instance_ && (h.flags & flag_fresh) ? verdict::renewed
                                                                        : verdict::restart;
      peer_epoch_ = h.epoch;  // a new peer, or one reset or renewed
      peer_instance_ = h.instance;
      if (h.to_epoch && h.to_epoch != my_epoch) {
        // It talks to a previous incarnation of ours: the acknowledgement
        // owed now tells it we are new (it restarts its side).
        ack_due_ = true;
        return verdict::stale;
      }
      if (data && h.seq != 0) {
        // Its stream began before we knew it: likewise.
        ack_due_ = true;
        return verdict::out_of_order;
      }
    } else if (h.to_epoch && h.to_epoch != my_epoch) {
      ack_due_ = true;
      return verdict::stale;
    }
    if (h.to_epoch == my_epoch) {
      // Acknowledgements count only from a peer that knows which of our
      // incarnations it answers.
      if (seq_before(next_, h.ack)) return verdict::invalid;  // acknowledges data never sent
      if (h.window == 0) {
        // Alive, without room: no timeout while it answers so.
        peer_held_ = true;
        progress_ns_ = now;
      } else {
        peer_window_ = std::clamp<uint32_t>(h.window, 1, max_window);
        if (peer_held_) {
          // Room again, perhaps: the oldest datagram goes now, not at the
          // next timeout, and the rest once it is taken (take_ack).
          peer_held_ = false;
          if (in_flight()) fast_resend_ = resuming_ = true;
        }
      }
      if (seq_before(una_, h.ack)) {
        take_ack(h.ack, now, acked);
      } else if (h.ack == una_ && in_flight() && h.kind == uint8_t(kind::ack) && h.window) {
        // (An answer of "no room" is no sign of loss.)
        if (++dup_acks_ == cfg_->dup_acks) fast_resend_ = true;
      }
    }
    if (!data) return verdict::ack_only;
    if (h.seq == expect_) return verdict::deliver;
    ack_due_ = true;
    return seq_before(h.seq, expect_) ? verdict::duplicate : verdict::out_of_order;
  }
  // The datagram receive() answered `deliver` for has been taken.
  void consumed() noexcept {
    ++expect_;
    ack_due_ = true;
    refusing_ = false;
  }
  // The datagram receive() answered `deliver` for cannot be taken now: the
  // acknowledgement owed says so (window 0), and the peer holds on.
  void refuse() noexcept {
    refusing_ = true;
    ack_due_ = true;
  }
  bool refusing() const noexcept { return refusing_; }
  // Room may have come since refuse(): the acknowledgement owed now opens
  // the peer's window, and it resends at once.
  void reopen() noexcept {
    if (!refusing_) return;
    refusing_ = false;
    ack_due_ = true;
  }

  // ---- acknowledging ----
  bool ack_due() const noexcept { return ack_due_; }
  // A datagram stamped by this link went out: it carried the acknowledgement.
  void ack_sent() noexcept { ack_due_ = false; }

  // ---- time ----
  // The earliest time tick() has something to do (UINT64_MAX: nothing).
  uint64_t deadline() const noexcept {
    if (!in_flight()) return UINT64_MAX;
    if (fast_resend_) return 0;
    return std::min(ring_[una_ & mask_].sent_ns + uint64_t(rto_us_) * 1000,
                    progress_ns_ + cfg_->peer_timeout_ns);
  }
  template <class Resend>
  tick_result tick(uint64_t now, Resend&& resend) noexcept {
    if (!in_flight()) return tick_result::idle;
    if (now - progress_ns_ >= cfg_->peer_timeout_ns) return tick_result::dead;
    const bool timeout = now >= ring_[una_ & mask_].sent_ns + uint64_t(rto_us_) * 1000;
    if (!timeout && !fast_resend_) return tick_result::ok;
    if (timeout) {
      // Back off; a held peer is probed often enough to hear it answer
      // within its timeout.
      rto_us_ = std::min(rto_us_ * 2, cfg_->rto_max_us);
      if (peer_held_)
        rto_us_ = std::max<uint32_t>(
            1, std::min<uint64_t>(rto_us_, cfg_->peer_timeout_ns / 4000));
    }
    fast_resend_ = false;
    dup_acks_ = 0;
    for (uint32_t s = una_; s != next_; ++s) {
      flight& f = ring_[s & mask_];
      f.resent = true;
      f.sent_ns = now;
      if (!resend(f, s)) break;  // the socket is full: the rest waits for the next timeout
      if (peer_held_ || resuming_) break;  // one probe is enough
    }
    return tick_result::ok;
  }

  // ---- life ----
  // `c` is the endpoint's, shared by its links: it outlives them.
  void configure(const config& c) noexcept {
    cfg_ = &c;
    cfg_window_ = std::clamp<uint32_t>(c.window, min_window, max_window);
    rto_us_ = c.rto_init_us;
  }
  // This side's incarnation on a fresh link: random, never 0.
  void start(uint32_t my_epoch) noexcept {
    my_epoch_ = my_epoch ? my_epoch : 1;
    fresh_ = true;
  }
  // Forgets the peer (a new incarnation, or one declared dead): the provider
  // has failed whatever was in flight. Keeps the configuration; `my_epoch`
  // is this side's new incarnation, which the peer sees as a restart (not
  // fresh: this side may have taken data the peer never saw acknowledged).
  void reset(uint32_t my_epoch) noexcept {
    start(my_epoch);
    fresh_ = false;
    forget_streams();
    srtt_us_ = rttvar_us_ = 0;
  }
  // The peer's link was renewed (verdict::renewed): both streams start
  // again at 0 under its new epoch, ours unchanged. Nothing in flight was
  // delivered: the provider sends it all again (sent() anew).
  void renew() noexcept {
    forget_streams();
    ack_due_ = true;  // our epoch and window, to the new link
  }
  // Every datagram in flight, oldest first, with its number (to fail them).
  template <class F>
  void for_each_in_flight(F&& f) noexcept {
    for (uint32_t s = una_; s != next_; ++s) f(ring_[s & mask_], s);
  }
  // Releases the ring while nothing is in flight (an idle peer costs only
  // this object).
  void trim() noexcept {
    if (!in_flight()) ring_.reset(), mask_ = 0;
  }

  uint32_t peer_epoch() const noexcept { return peer_epoch_; }
  bool fresh() const noexcept { return fresh_; }
  uint32_t my_epoch() const noexcept { return my_epoch_; }
  uint32_t rto_us() const noexcept { return rto_us_; }
  uint32_t srtt_us() const noexcept { return srtt_us_; }
  uint32_t expected() const noexcept { return expect_; }
  uint32_t unacked() const noexcept { return una_; }
  uint32_t next_seq() const noexcept { return next_; }
  uint32_t peer_window() const noexcept { return peer_window_; }

 private:
  void forget_streams() noexcept {
    ring_.reset();
    mask_ = 0;
    next_ = una_ = expect_ = 0;
    peer_epoch_ = peer_instance_ = 0;
    peer_window_ = min_window;
    ack_due_ = fast_resend_ = refusing_ = peer_held_ = resuming_ = false;
    dup_acks_ = 0;
  }
  void stamp(dgram& h, kind k) noexcept {
    h.magic = magic;
    h.version = version;
    h.kind = uint8_t(k);
    h.flags = fresh_ ? flag_fresh : 0;
    h.epoch = my_epoch_;
    h.to_epoch = peer_epoch_;
    h.seq = 0;
    h.ack = expect_;
    h.window = refusing_ ? 0 : cfg_window_;
    h.bytes = 0;
    h.instance = cfg_->instance;
  }
  bool grow() noexcept;
  template <class Acked>
  void take_ack(uint32_t ack, uint64_t now, Acked& acked) noexcept {
    uint64_t sample_sent = 0;
    bool sample = false;
    while (una_ != ack) {
      flight& f = ring_[una_ & mask_];
      if (!f.resent) sample = true, sample_sent = f.sent_ns;
      ++una_;
      acked(f);
    }
    progress_ns_ = now;
    dup_acks_ = 0;
    fast_resend_ = false;
    if (resuming_) {
      // The probe after a hold was taken: the rest of what is in flight
      // (dropped by the peer as out of order) goes again at once.
      resuming_ = false;
      fast_resend_ = in_flight();
    }
    if (sample)
      measured(now - sample_sent);
    else
      unback();  // the peer answers: the back-off of earlier timeouts is over
  }
  void unback() noexcept {
    if (srtt_us_) rto_us_ = std::clamp(srtt_us_ + 4 * rttvar_us_, cfg_->rto_min_us, cfg_->rto_max_us);
  }
  void measured(uint64_t rtt_ns) noexcept;

  static const config& defaults() noexcept {
    static const config c;
    return c;
  }

  std::unique_ptr<flight[]> ring_;
  const config* cfg_ = &defaults();  // the endpoint's (configure)
  uint32_t mask_ = 0;
  uint32_t next_ = 0;         // number of the next data datagram we send
  uint32_t una_ = 0;          // oldest of ours not acknowledged
  uint32_t expect_ = 0;       // number of the next datagram we take from the peer
  uint32_t peer_epoch_ = 0;   // the peer's incarnation, 0: none heard yet
  uint32_t peer_instance_ = 0;  // the peer endpoint's instance, with peer_epoch_
  uint32_t my_epoch_ = 1;     // ours on this link (start / reset)
  uint32_t peer_window_ = min_window;  // until the peer says what it takes
  uint32_t cfg_window_ = 256;
  uint32_t rto_us_ = 20000;
  uint32_t srtt_us_ = 0, rttvar_us_ = 0;
  uint32_t dup_acks_ = 0;
  uint64_t progress_ns_ = 0;  // when the peer last acknowledged something (or we started waiting)
  bool ack_due_ = false;
  bool fast_resend_ = false;
  bool refusing_ = false;   // we could not take the peer's next datagram (refuse)
  bool peer_held_ = false;  // the peer could not take ours (it advertised window 0)
  bool resuming_ = false;   // it reopened: one probe until it takes something
  bool fresh_ = true;       // made by start(), not reset(): its datagrams say flag_fresh
};

}  // namespace weft::util::rd
