// SPDX-License-Identifier: MIT
// weft — poll sets: fi_poll over the CQs and counters of a domain.
#include "core/log.hpp"
#include "util/domain.hpp"
#include "util/wait_set.hpp"

#include <algorithm>
#include <new>

namespace weft::util {

namespace {

// Guards every poll set's membership together with the members' poll_links.
// Membership changes from two sides (fi_poll_add/del and closing the poll set
// on one, closing a CQ or counter on the other); one lock taken before any
// poll set's own makes both directions deadlock-free. It is never held by
// fi_poll, only by these rare control-path changes.
std::mutex& membership() noexcept {
  static std::mutex m;
  return m;
}

poll_set* self(fid_poll* p) noexcept { return poll_set::from(p); }

int poll_thunk(fid_poll* p, void** context, int count) noexcept {
  return abi_guard([&] { return self(p)->poll(context, count); });
}
int poll_add_thunk(fid_poll* p, struct fid* event_fid, uint64_t flags) noexcept {
  return abi_guard([&] { return self(p)->poll_add(event_fid, flags); });
}
int poll_del_thunk(fid_poll* p, struct fid* event_fid, uint64_t flags) noexcept {
  return abi_guard([&] { return self(p)->poll_del(event_fid, flags); });
}

constexpr fi_ops_poll poll_ops = {
    .size = sizeof(fi_ops_poll),
    .poll = poll_thunk,
    .poll_add = poll_add_thunk,
    .poll_del = poll_del_thunk,
};

}  // namespace

poll_links::~poll_links() {
  std::lock_guard g{membership()};
  for (poll_set* s : sets_) s->forget(this);
}

int poll_set::open(domain& dom, fi_poll_attr* attr, fid_poll** out) noexcept {
  auto* prov = dom.provider();
  if (!attr || !out) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "fi_poll_open needs attributes and a result pointer");
    return to_fi(errc::inval);
  }
  if (attr->flags) {
    // The man page reserves the field: it must be 0.
    WEFT_WARN(prov, FI_LOG_DOMAIN, "poll set flags 0x%llx are reserved and must be 0",
              static_cast<unsigned long long>(attr->flags));
    return to_fi(errc::badflags);
  }
  return abi_guard([&] {
    *out = new poll_set(dom);
    return 0;
  });
}

poll_set::poll_set(domain& dom) : fid_object(FI_CLASS_POLL, nullptr), domain_(&dom) {
  ops = const_cast<fi_ops_poll*>(&poll_ops);
}

poll_set::~poll_set() {
  std::lock_guard g{membership()};
  std::lock_guard g2{m_};
  for (const auto& m : members_) std::erase(m.links->sets_, this);
}

int poll_set::close() { return close_if_unused(domain_->provider(), FI_LOG_DOMAIN, "poll set"); }

void poll_set::forget(const poll_links* l) noexcept {
  std::lock_guard g{m_};
  std::erase_if(members_, [l](const wait_member& m) { return m.links == l; });
}

int poll_set::poll_add(struct fid* event_fid, uint64_t flags) noexcept {
  auto* prov = domain_->provider();
  if (!event_fid) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "fi_poll_add: NULL fid");
    return to_fi(errc::inval);
  }
  if (flags) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "fi_poll_add: unknown flags 0x%llx",
              static_cast<unsigned long long>(flags));
    return to_fi(errc::badflags);
  }
  wait_member m;
  if (is_class(event_fid, FI_CLASS_CQ)) {
    m = cq_wait_member(event_fid);
  } else if (is_class(event_fid, FI_CLASS_CNTR)) {
    m = cntr_wait_member(event_fid);
  } else {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "fi_poll_add: class %zu is not a CQ or a counter",
              event_fid->fclass);
    return to_fi(errc::inval);
  }
  return add_member(m);
}

int poll_set::add_member(const wait_member& m) noexcept {
  auto* prov = domain_->provider();
  if (!m.owner || !m.links || !m.has_event) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "fi_poll_add: this object cannot be polled");
    return to_fi(errc::inval);
  }
  if (m.dom && m.dom != domain_.get()) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "fi_poll_add: the object belongs to another domain");
    return to_fi(errc::inval);
  }
  std::lock_guard g{membership()};
  std::lock_guard g2{m_};
  for (const auto& have : members_)
    if (have.owner == m.owner) return 0;  // already listed: adding twice is harmless
  try {
    members_.reserve(members_.size() + 1);
    m.links->sets_.reserve(m.links->sets_.size() + 1);
  } catch (const std::bad_alloc&) {
    return to_fi(errc::nomem);
  }
  members_.push_back(m);
  m.links->sets_.push_back(this);
  return 0;
}

int poll_set::poll_del(struct fid* event_fid, uint64_t flags) noexcept {
  auto* prov = domain_->provider();
  if (!event_fid) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "fi_poll_del: NULL fid");
    return to_fi(errc::inval);
  }
  if (flags) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "fi_poll_del: unknown flags 0x%llx",
              static_cast<unsigned long long>(flags));
    return to_fi(errc::badflags);
  }
  std::lock_guard g{membership()};
  std::lock_guard g2{m_};
  auto it = std::find_if(members_.begin(), members_.end(),
                         [event_fid](const wait_member& m) { return m.owner == event_fid; });
  if (it == members_.end()) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "fi_poll_del: the object is not in this poll set");
    return to_fi(errc::noent);
  }
  std::erase(it->links->sets_, this);
  members_.erase(it);
  return 0;
}

int poll_set::poll(void** context, int count) noexcept {
  if (count < 0 || (count > 0 && !context)) {
    WEFT_WARN(domain_->provider(), FI_LOG_DOMAIN, "fi_poll: %d contexts at %p", count,
              static_cast<void*>(context));
    return to_fi(errc::inval);
  }
  std::lock_guard g{m_};
  int n = 0;
  for (const auto& m : members_) {
    // Every member progresses; only as many are asked as can be reported, so
    // a counter's change is not consumed without being returned.
    if (n < count) {
      if (member_ready(m, false)) context[n++] = m.owner->context;
    } else if (m.progress) {
      m.progress->run_locked();
    }
  }
  return n;
}

}  // namespace weft::util
