// SPDX-License-Identifier: MIT
// weft — reliable datagrams: an acknowledgement held back for the datagram
// that would carry it, and the thread that sends it if none comes.
//
// Why. A receiver that sends its bare acknowledgement at the end of the
// progress call that took a message puts a system call on a ping-pong's
// path just before the answer, which carries the acknowledgement anyway
// (every data datagram does: rd_link.hpp). Held back, it goes with the
// answer and costs nothing. But under manual progress an application may
// take its last message and never call again (a server that exits, a thread
// that has what it wanted); its peer's send completes only on that
// acknowledgement, and would fail at its peer timeout for a message that
// was delivered (docs/decisions.md, "udp RDM: the acknowledgement waits one
// call"). So a held acknowledgement is also given to the keeper, a thread
// that sends it if it is still held a tick later.
//
// The contract. One held_ack per endpoint; hold, holds and take are the
// endpoint's (called under whatever serializes its progress):
//  * hold(peer, h, to): keep the bare acknowledgement `h` (stamped, and
//    counted sent by the link: ack_sent) for `peer`. Nothing may be held.
//    False if it cannot be (the keeper cannot run, or still sends an
//    earlier one): send it now.
//  * holds(peer): whether this endpoint last held one for `peer` and has not
//    taken it back (the keeper may have sent it meanwhile).
//  * take(): takes the held acknowledgement back and answers its peer, or
//    null when nothing is held or the keeper sent it. The endpoint then
//    drops it (a datagram to the peer carried a newer one, or the peer's
//    link was reset) or sends a newly stamped one. The endpoint takes back
//    what it holds in its next progress call: an acknowledgement waits at
//    most one call of the application's, or one to two keeper ticks.
//  * close(): before the socket closes; the keeper is done with it on return.
// The keeper sends only what the endpoint holds for two consecutive ticks,
// which it claims first (so the endpoint never takes back what is being
// sent, and never sends it twice, except that both may send one when the
// endpoint takes it back while the keeper has claimed it: an acknowledgement
// sent twice is a duplicate the peer ignores). It never touches the
// endpoint, only its socket, which close() keeps open until it is done.
//
// Cost. On the endpoint's path: a plain load to check, a compare-and-swap to
// hold or take back. The keeper is one thread per process, started at the
// first hold. It looks while anything was held within the last
// keeper_quiet_us (see below for how often), then sleeps until a hold wakes
// it (one futex call after a quiet spell, none while it looks). It lives
// until the library is unloaded.
#pragma once

#include "util/rd_proto.hpp"

#include <sys/socket.h>

#include <atomic>
#include <cstdint>

namespace weft::util::rd {

// The keeper looks every keeper_tick_us while it finds something held, and
// backs off (doubling) to keeper_slow_us while it finds nothing: a ping-pong
// holds for a microsecond per message and is rarely caught holding, so it
// pays for about one look every keeper_slow_us, not one per tick (each look
// is an interrupt and a context switch on a core the application uses). An
// acknowledgement the endpoint keeps holding goes out within
// keeper_slow_us + keeper_tick_us (the look that finds it, then the one that
// finds it still held).
inline constexpr uint64_t keeper_tick_us = 500;
inline constexpr uint64_t keeper_slow_us = 8000;
inline constexpr uint64_t keeper_quiet_us = 100'000;  // then asleep until a hold

class held_ack {
 public:
  held_ack() noexcept = default;
  held_ack(const held_ack&) = delete;
  held_ack& operator=(const held_ack&) = delete;
  ~held_ack() { close(); }

  // The socket the keeper sends on (set before the first hold).
  void set_socket(int fd) noexcept { fd_ = fd; }
  bool hold(const void* peer, const dgram& h, const sockaddr* to, socklen_t len) noexcept;
  bool holds(const void* peer) const noexcept { return peer_ == peer; }
  const void* take() noexcept;
  void close() noexcept;

  // ---- the keeper's (under its lock) ----
  // Sends what has been held since the last tick; whether anything is held.
  bool tick() noexcept;
  bool held() const noexcept { return (word_.load(std::memory_order_seq_cst) & 3) == held_state; }

 private:
  static constexpr uint32_t empty_state = 0, held_state = 1, claimed_state = 2;
  // Bits 0-1: the state; above: a count of holds, so the keeper tells a new
  // hold from the one it saw at its last tick.
  std::atomic<uint32_t> word_{0};
  // Written by the endpoint while the word is empty; read by the keeper
  // once it has claimed a hold (acquire).
  dgram h_{};
  sockaddr_storage to_{};
  socklen_t len_ = 0;
  int fd_ = -1;
  const void* peer_ = nullptr;  // the endpoint's own record
  uint32_t seen_ = 0;           // the keeper's: the word at its last tick
  bool registered_ = false;     // the endpoint's: the keeper knows us
};

}  // namespace weft::util::rd
