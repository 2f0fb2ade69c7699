// SPDX-License-Identifier: MIT
// weft — the tcp passive endpoint (pep.cpp): fi_listen, FI_CONNREQ events
// and the requests they hand to fi_endpoint or fi_reject.
#pragma once

#include "prov/tcp/conn.hpp"
#include "util/fabric.hpp"
#include "util/fd.hpp"

#include <rdma/fi_cm.h>

#include <sys/socket.h>

#include <memory>
#include <mutex>
#include <vector>

namespace weft::tcp {

// ---- the passive endpoint (pep.cpp) ----

class pep;

// fi_connect / fi_accept / fi_reject's private data: param may be null only
// with len 0, and len may not pass FI_OPT_CM_DATA_SIZE. fi_cm(3) speaks of
// truncating what the protocol cannot carry; libfabric's tcp refuses more
// than its maximum with -FI_EINVAL at the call, and clients test for that
// (docs/decisions.md). 0, or -FI_EINVAL with one log line naming `call`.
int check_cm_data(const char* call, const void* param, size_t len) noexcept;

// The handle of an FI_CONNREQ event (info->handle): the accepted socket
// with its cm_req read, until fi_endpoint takes it or fi_reject refuses it.
struct connreq {
  struct fid fid;  // first: &fid converts back
  pep* owner;
  std::unique_ptr<conn> c;
  bool announced = false;
  static connreq* from(struct fid* f) noexcept { return reinterpret_cast<connreq*>(f); }
};

class pep : public util::fid_object<pep, fid_pep> {
 public:
  static int open(util::fabric& fab, fi_info* info, fid_pep** out, void* context) noexcept;
  pep(util::fabric& fab, fi_info* info, void* context);
  ~pep() override;

  int close();
  int bind(struct fid* bfid, uint64_t flags);
  int control(int command, void* arg);
  int getname(void* addr, size_t* addrlen);
  int setname(const void* addr, size_t addrlen);
  int listen();
  int listen_locked();
  int reject(struct fid* handle, const void* param, size_t len);
  int getopt(int level, int name, void* val, size_t* len);

  // fi_endpoint with info->handle == the request: the connection leaves.
  std::unique_ptr<conn> take(connreq* r) noexcept;
  // Manual progress: the EQ's progress list gathers, drives the endpoints
  // bound to the EQ, then announces (pep.cpp says why).
  static void gather_thunk(void* obj) noexcept { static_cast<pep*>(obj)->gather(); }
  static void announce_thunk(void* obj) noexcept { static_cast<pep*>(obj)->announce_ready(); }
  // Automatic control progress: the fabric's thread runs progress when the
  // epoll set is ready (a connection, a request's bytes, the timer).
  static bool auto_work(void* obj) noexcept {
    static_cast<pep*>(obj)->progress();
    return true;
  }

 private:
  void progress() noexcept;
  // Accepts connections and reads their requests: true if one is ready to
  // announce.
  bool gather() noexcept;
  void announce_ready() noexcept;
  void accept_all() noexcept;
  void read_request(connreq& r) noexcept;
  bool announce(connreq& r) noexcept;
  void drop(connreq& r, const char* why) noexcept;
  errc open_socket(const sockaddr* addr);
  void arm_timer(uint64_t now) noexcept;

  util::ref<util::fabric> fabric_;
  fi_info* info_;  // owned copy, the template of every FI_CONNREQ info
  util::unique_fd sock_;
  util::unique_fd epoll_;
  sockaddr_storage local_{};
  util::ref<util::eq> eq_;
  int backlog_ = 128;
  bool listening_ = false;
  // FI_PROGRESS_AUTO for control (util::control_is_auto of the info): the
  // fabric's progress thread runs progress(); timer_ wakes it for deadlines
  // and for announcements a full EQ put off.
  const bool auto_;
  util::unique_fd timer_;
  uint64_t timer_at_ = 0;  // what timer_ is armed for (0: disarmed)
  bool registered_ = false;  // with the fabric's thread; only listen/close
  std::mutex m_;
  std::vector<std::unique_ptr<connreq>> reqs_;
};

}  // namespace weft::tcp
