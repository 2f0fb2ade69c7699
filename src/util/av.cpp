// SPDX-License-Identifier: MIT
// weft — the address vector.
#include "util/av.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/log.hpp"
#include "util/av_shared.hpp"
#include "util/eq.hpp"
#include "util/nosys.hpp"

namespace weft::util {

// ---- av: the ops table -------------------------------------------------

namespace {

const fi_provider* prov_of(const av* a) noexcept {
  return a->dom().provider();
}

// One table per lock policy; the thunks keep exceptions (bad_alloc) inside.
template <class Lock>
struct av_ops {
  static av* self(fid_av* a) noexcept { return av::from(a); }
  static int insert(fid_av* a, const void* addr, size_t count, fi_addr_t* fi_addr, uint64_t flags,
                    void* context) noexcept {
    return inserted(a, abi_guard([&] {
                      return self(a)->template insert<Lock>(addr, count, fi_addr, flags, context);
                    }));
  }
  static int insertsvc(fid_av* a, const char* node, const char* service, fi_addr_t* fi_addr,
                       uint64_t flags, void* context) noexcept {
    return inserted(a, abi_guard([&] {
                      return self(a)->template insertsvc<Lock>(node, service, fi_addr, flags,
                                                               context);
                    }));
  }
  static int insertsym(fid_av* a, const char* node, size_t nodecnt, const char* service,
                       size_t svccnt, fi_addr_t* fi_addr, uint64_t flags, void* context) noexcept {
    return inserted(a, abi_guard([&] {
                      return self(a)->template insertsym<Lock>(node, nodecnt, service, svccnt,
                                                               fi_addr, flags, context);
                    }));
  }
  static int remove(fid_av* a, fi_addr_t* fi_addr, size_t count, uint64_t flags) noexcept {
    int rc = abi_guard([&] { return self(a)->template remove<Lock>(fi_addr, count, flags); });
    // Even a partly refused remove removed the valid addresses.
    if (count && rc != -FI_EBADFLAGS && rc != -FI_EPERM) self(a)->notify(false);
    return rc;
  }
  static int lookup(fid_av* a, fi_addr_t fi_addr, void* addr, size_t* addrlen) noexcept {
    return abi_guard([&] { return self(a)->template lookup<Lock>(fi_addr, addr, addrlen); });
  }
  static const char* straddr(fid_av* a, const void* addr, char* buf, size_t* len) noexcept {
    return self(a)->straddr(addr, buf, len);
  }
  static int set_user_id(fid_av* a, fi_addr_t fi_addr, fi_addr_t user_id,
                         uint64_t flags) noexcept {
    int rc =
        abi_guard([&] { return self(a)->template set_user_id<Lock>(fi_addr, user_id, flags); });
    if (!rc) self(a)->notify(false);  // messages are labelled with user ids
    return rc;
  }
  // After an insert: endpoints holding messages from unknown senders look
  // again (with FI_EVENT, rc 0 may still have added addresses).
  static int inserted(fid_av* a, int rc) noexcept {
    if (rc >= 0) self(a)->notify(true);
    return rc;
  }
  static constexpr fi_ops_av table = {
      .size = sizeof(fi_ops_av),
      .insert = insert,
      .insertsvc = insertsvc,
      .insertsym = insertsym,
      .remove = remove,
      .lookup = lookup,
      .straddr = straddr,
      WEFT_NOSYS(fi_ops_av, av_set),
      WEFT_NOSYS(fi_ops_av, insert_auth_key),
      WEFT_NOSYS(fi_ops_av, lookup_auth_key),
      .set_user_id = set_user_id,
  };
};

// fi_av_open's count is a hint; beyond this the table grows as it fills
// rather than committing memory for a guess.
constexpr size_t count_hint_cap = size_t{1} << 22;

// fi_av_insert with FI_SYNC_ERR: context is an int array of per-address
// results; with FI_AV_USER_ID, fi_addr carries the user ids in. fi_av_remove
// and friends take no flags. FI_AV_USER_ID at open announces user ids.
constexpr uint64_t insert_flags = FI_MORE | FI_SYNC_ERR | FI_AV_USER_ID;
constexpr uint64_t open_flags = FI_EVENT | FI_READ | FI_SYMMETRIC | FI_AV_USER_ID;

}  // namespace

int av::open(domain& dom, fi_av_attr* attr, fid_av** out, void* context) noexcept {
  const fi_provider* prov = dom.provider();
  if (!attr || !out) {
    WEFT_WARN(prov, FI_LOG_AV, "fi_av_open: %s is NULL", attr ? "av" : "attr");
    return to_fi(errc::inval);
  }
  const av_codec* codec = dom.hooks().codec ? dom.hooks().codec(dom) : nullptr;
  if (!codec) {
    WEFT_WARN(prov, FI_LOG_AV, "no address vector for address format %u", dom.addr_format());
    return to_fi(errc::nosys);
  }
  // The raw value: an application may store anything in the enum.
  std::underlying_type_t<fi_av_type> raw;
  std::memcpy(&raw, &attr->type, sizeof raw);
  if (raw != FI_AV_UNSPEC && raw != FI_AV_MAP && raw != FI_AV_TABLE) {
    WEFT_WARN(prov, FI_LOG_AV, "unknown AV type %d", static_cast<int>(raw));
    return to_fi(errc::inval);
  }
  fi_av_type type = attr->type;
  if (type != FI_AV_UNSPEC && dom.av_type() != FI_AV_UNSPEC && type != dom.av_type()) {
    WEFT_WARN(prov, FI_LOG_AV, "AV type %d, but the domain was opened for type %d",
              static_cast<int>(type), static_cast<int>(dom.av_type()));
    return to_fi(errc::inval);
  }
  if (attr->flags & ~open_flags) {
    WEFT_WARN(prov, FI_LOG_AV, "unsupported AV flags %#llx",
              static_cast<unsigned long long>(attr->flags & ~open_flags));
    return to_fi(errc::badflags);
  }
  if (attr->rx_ctx_bits != 0 && !dom.offers_contexts()) {
    WEFT_WARN(prov, FI_LOG_AV, "rx_ctx_bits %d: scalable endpoints are not supported",
              attr->rx_ctx_bits);
    return to_fi(attr->rx_ctx_bits < 0 ? errc::inval : errc::nosys);
  }
  // fi_addr values are indices below 2^31: up to 32 bits above them are free.
  if (attr->rx_ctx_bits < 0 || attr->rx_ctx_bits > max_rx_ctx_bits) {
    WEFT_WARN(prov, FI_LOG_AV, "rx_ctx_bits %d: it must be 0 to %d", attr->rx_ctx_bits,
              max_rx_ctx_bits);
    return to_fi(errc::inval);
  }
  if ((attr->flags & FI_AV_USER_ID) && !(dom.caps() & FI_AV_USER_ID)) {
    WEFT_WARN(prov, FI_LOG_AV, "FI_AV_USER_ID needs a domain opened with that capability");
    return to_fi(errc::badflags);
  }
  if ((attr->flags & FI_READ) && !attr->name) {
    WEFT_WARN(prov, FI_LOG_AV, "FI_READ opens an existing named AV, and no name was given");
    return to_fi(errc::inval);
  }
  if (attr->name && !codec->shareable) {
    WEFT_WARN(prov, FI_LOG_AV, "named (shared) AV \"%s\": %s addresses cannot be shared",
              attr->name, dom.provider() ? dom.provider()->name : "this provider's");
    return to_fi(errc::nosys);
  }
  if (attr->name && (attr->flags & FI_AV_USER_ID)) {
    WEFT_WARN(prov, FI_LOG_AV, "FI_AV_USER_ID: user ids are per process, a named AV has none");
    return to_fi(errc::badflags);
  }
  if (type == FI_AV_UNSPEC) type = dom.av_type();
  std::unique_ptr<av_file> file;
  if (attr->name) {
    // A reader takes the file's type unless one was asked for.
    bool writer = !(attr->flags & FI_READ);
    if (writer && type == FI_AV_UNSPEC) type = FI_AV_TABLE;
    if (errc e = av_file::open(attr->name, writer, *codec, type, attr->count, prov, file);
        e != errc::ok)
      return to_fi(e);
  }
  if (type == FI_AV_UNSPEC) type = FI_AV_TABLE;
  void* map_addr = file ? file->base() : nullptr;
  fi_av_attr a = *attr;
  a.type = type;
  int rc = abi_guard([&] {
    *out = new av(dom, *codec, a, context, std::move(file));
    return 0;
  });
  if (rc != 0) return rc;
  attr->type = type;  // fi_av(3): FI_AV_UNSPEC reports the type chosen
  // fi_av(3): "If name is non-NULL and map_addr is 0, then the map_addr used
  // by the provider will be returned". fi_addr values do not depend on it.
  if (attr->name && !attr->map_addr) attr->map_addr = map_addr;
  return 0;
}

av::av(domain& dom, const av_codec& codec, const fi_av_attr& attr, void* context,
       std::unique_ptr<av_file> file)
    : fid_object(FI_CLASS_AV, context),
      domain_(&dom),
      codec_(&codec),
      type_(attr.type),
      events_(attr.flags & FI_EVENT),
      rx_bits_(attr.rx_ctx_bits),
      shared_(std::move(file)),
      reader_(shared_ && (attr.flags & FI_READ)),
      table_(codec) {
  // AVs are not among the objects FI_THREAD_COMPLETION makes the application
  // serialise (fi_domain(3) names endpoints, contexts, CQs, counters, wait
  // and poll sets), so only FI_THREAD_DOMAIN lets the AV go unlocked.
  auto install = [this]<class Lock>() {
    ops = writable(av_ops<Lock>::table);
    reverse_ = reader_ ? &av::reverse_shared<Lock> : &av::reverse_as<Lock>;
  };
  // Under the handoff policy the AV's guard enters the domain's handoff.
  if (dom.locks() == lock_kind::handoff) {
    handoff_ = &dom.handoff();
    install.template operator()<handoff_lock>();
  } else if (dom.lock_threading() == FI_THREAD_DOMAIN) {
    install.template operator()<null_lock>();
  } else {
    install.template operator()<mutex_lock>();
  }
  if (shared_) table_.use_storage(shared_->entries(), shared_->capacity());
  if (reader_) {
    (void)follow(0);
    return;
  }
  table_.reserve(std::min({attr.count, count_hint_cap, shared_ ? shared_->capacity() : SIZE_MAX}));
  if (attr.flags & FI_AV_USER_ID) table_.enable_ids();
}

av::~av() = default;

int av::close() { return close_if_unused(prov_of(this), FI_LOG_AV, "AV"); }

void av::watch(void* obj, watch_fn fn) {
  std::lock_guard g{watch_mutex_};
  watchers_.emplace_back(obj, fn);
}

void av::unwatch(void* obj) noexcept {
  std::lock_guard g{watch_mutex_};
  std::erase_if(watchers_, [&](const auto& w) { return w.first == obj; });
}

void av::notify(bool inserted_only) noexcept {
  std::lock_guard g{watch_mutex_};
  for (auto [obj, fn] : watchers_) fn(obj, inserted_only);
}

int av::bind(struct fid* bfid, uint64_t flags) {
  if (!is_class(bfid, FI_CLASS_EQ)) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "an AV binds only to an event queue");
    return to_fi(errc::inval);
  }
  if (flags) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "fi_av_bind flags are reserved, got %#llx",
              static_cast<unsigned long long>(flags));
    return to_fi(errc::badflags);
  }
  std::lock_guard g{mutex_};
  if (eq_) return to_fi(errc::already);
  eq_.reset(eq::from(bfid));
  return 0;
}

template <class Lock>
fi_addr_t av::reverse_as(const av& self, const uint8_t* e) noexcept {
  [[maybe_unused]] auto g = self.guard<Lock>();
  uint32_t i = self.table_.find(e);
  return i == av_table::none ? FI_ADDR_NOTAVAIL : fi_addr_t{i};
}

// ---- named AVs ------------------------------------------------------------

const uint8_t* av::follow(fi_addr_t a) const noexcept {
  const av_file_header& h = shared_->header();
  table_.follow(h.bound.load(std::memory_order_acquire), h.live.load(std::memory_order_relaxed));
  return table_.get(a);
}

// An FI_READ AV's reverse index is a cache of the writer's entries: brought
// up to date here (entries appended since: indexed; any removed or reused:
// rebuilt), under the lock as any reverse lookup.
template <class Lock>
fi_addr_t av::reverse_shared(const av& cself, const uint8_t* e) noexcept {
  [[maybe_unused]] auto g = cself.guard<Lock>();
  av& self = const_cast<av&>(cself);  // never a const object: made by open
  const av_file_header& h = self.shared_->header();
  uint64_t gen = h.gen.load(std::memory_order_acquire);  // before the entries
  (void)self.follow(0);
  if (gen != self.indexed_gen_ || self.table_.bound() != self.indexed_bound_) {
    try {
      self.indexed_bound_ = self.table_.index_published(self.indexed_bound_, gen != self.indexed_gen_);
      self.indexed_gen_ = gen;
    } catch (const std::bad_alloc&) {
      WEFT_WARN(prov_of(&self), FI_LOG_AV, "out of memory indexing shared AV %s",
                self.shared_->path().c_str());
      return FI_ADDR_NOTAVAIL;
    }
  }
  uint32_t i = self.table_.find(e);
  return i == av_table::none ? FI_ADDR_NOTAVAIL : fi_addr_t{i};
}

void av::publish(bool reshaped) noexcept {
  if (shared_) shared_->publish(table_.bound(), table_.live(), reshaped);
}

bool av::refuse_read_only(const char* what) const noexcept {
  if (!reader_) return false;
  WEFT_WARN(prov_of(this), FI_LOG_AV, "%s: AV %s was opened with FI_READ", what,
            shared_->path().c_str());
  return true;
}

const char* av::straddr(const void* addr, char* buf, size_t* len) noexcept {
  if (!addr || !len || (!buf && *len)) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "fi_av_straddr: %s is NULL",
              !addr  ? "addr"
              : !len ? "len"
                     : "buf");
    return nullptr;
  }
  size_t need = codec_->straddr(addr, buf, *len);
  if (!need) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "fi_av_straddr: not an address of format %u",
              codec_->addr_format);
    return nullptr;
  }
  *len = need;
  return buf;
}

template <class Lock>
int av::lookup(fi_addr_t fi_addr, void* addr, size_t* addrlen) {
  if (!addrlen || (!addr && *addrlen)) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "fi_av_lookup: %s is NULL", addrlen ? "addr" : "addrlen");
    return to_fi(errc::inval);
  }
  [[maybe_unused]] auto g = guard<Lock>();
  // An address fi_rx_addr made names the same peer.
  const uint8_t* e = entry(strip_rx(fi_addr));  // an FI_READ AV catches up first
  if (!e) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "fi_av_lookup: %#llx is not an address of this AV",
              static_cast<unsigned long long>(fi_addr));
    return to_fi(errc::inval);
  }
  // fi_av(3): a short buffer gets a truncated address, and addrlen the size
  // needed; the call still succeeds.
  *addrlen = codec_->decode(e, addr, *addrlen);
  return 0;
}

bool av::user_ids_offered() const noexcept {
  // Only a provider that reports them has the capability, and only a domain
  // opened with it (fi_getinfo(3)) may use it.
  if (domain_->caps() & FI_AV_USER_ID) return true;
  WEFT_WARN(prov_of(this), FI_LOG_AV, "user ids need a domain opened with FI_AV_USER_ID");
  return false;
}

template <class Lock>
int av::set_user_id(fi_addr_t fi_addr, fi_addr_t user_id, uint64_t flags) {
  if (!user_ids_offered()) return to_fi(errc::nosys);
  if (shared_) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "fi_av_set_user_id: a named AV keeps no user ids");
    return to_fi(refuse_read_only("fi_av_set_user_id") ? errc::perm : errc::nosys);
  }
  if (flags) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "fi_av_set_user_id flags are reserved, got %#llx",
              static_cast<unsigned long long>(flags));
    return to_fi(errc::badflags);
  }
  [[maybe_unused]] auto g = guard<Lock>();
  if (!table_.get(fi_addr)) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "fi_av_set_user_id: %#llx is not an address of this AV",
              static_cast<unsigned long long>(fi_addr));
    return to_fi(errc::inval);
  }
  table_.enable_ids();  // bad_alloc: -FI_ENOMEM from the thunk
  table_.set_user_id(static_cast<uint32_t>(fi_addr), user_id);
  return 0;
}

template <class Lock>
int av::remove(fi_addr_t* fi_addr, size_t count, uint64_t flags) {
  if (flags) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "fi_av_remove flags are reserved, got %#llx",
              static_cast<unsigned long long>(flags));
    return to_fi(errc::badflags);
  }
  if (refuse_read_only("fi_av_remove")) return to_fi(errc::perm);
  if (!count) return 0;
  if (!fi_addr) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "fi_av_remove: fi_addr is NULL");
    return to_fi(errc::inval);
  }
  [[maybe_unused]] auto g = guard<Lock>();
  table_.reserve_removals(count);
  size_t bad = 0;
  fi_addr_t first_bad = 0;
  for (size_t i = 0; i < count; ++i) {
    if (table_.remove(fi_addr[i])) continue;
    if (!bad++) first_bad = fi_addr[i];
  }
  if (bad < count) publish(true);
  if (!bad) return 0;
  // The valid addresses are gone either way; the call reports the rest.
  WEFT_WARN(prov_of(this), FI_LOG_AV, "fi_av_remove: %zu of %zu not in the AV (first %#llx)", bad,
            count, static_cast<unsigned long long>(first_bad));
  return to_fi(errc::inval);
}

int av::check_insert_flags(uint64_t flags, void* context, const fi_addr_t* fi_addr) const noexcept {
  if (refuse_read_only("fi_av_insert")) return to_fi(errc::perm);
  if ((flags & FI_AV_USER_ID) && shared_) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "FI_AV_USER_ID: a named AV keeps no user ids");
    return to_fi(errc::badflags);
  }
  if (flags & ~insert_flags) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "unsupported insert flags %#llx",
              static_cast<unsigned long long>(flags & ~insert_flags));
    return to_fi(errc::badflags);
  }
  if ((flags & FI_AV_USER_ID) && !user_ids_offered()) return to_fi(errc::badflags);
  if ((flags & FI_AV_USER_ID) && !fi_addr) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "FI_AV_USER_ID needs the user ids in fi_addr");
    return to_fi(errc::inval);
  }
  if ((flags & FI_SYNC_ERR) && events_) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "FI_SYNC_ERR on an AV opened with FI_EVENT");
    return to_fi(errc::badflags);
  }
  if ((flags & FI_SYNC_ERR) && !context) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "FI_SYNC_ERR needs an int array as context");
    return to_fi(errc::inval);
  }
  if (events_ && !eq_) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "AV opened with FI_EVENT has no EQ bound");
    return to_fi(errc::noeq);
  }
  return 0;
}

template <class Lock, class Source>
int av::add_all(size_t n, Source&& source, fi_addr_t* fi_addr, uint64_t flags, void* context,
                bool warned) {
  int* errs = (flags & FI_SYNC_ERR) ? static_cast<int*>(context) : nullptr;
  auto fail_all = [&](errc code) {
    for (size_t i = 0; i < n; ++i) {
      if (fi_addr) fi_addr[i] = FI_ADDR_NOTAVAIL;
      if (errs) errs[i] = static_cast<int>(code);
    }
    return to_fi(code);
  };
  const bool user_ids = flags & FI_AV_USER_ID;
  [[maybe_unused]] auto g = guard<Lock>();
  if (shared_) {
    // The file backs every index this insert may use, or it fails whole.
    size_t span = table_.span_after(n);
    errc e = span > shared_->capacity() ? errc::nospc : shared_->ensure(span);
    if (e != errc::ok) {
      WEFT_WARN(prov_of(this), FI_LOG_AV, "shared AV %s: no room for %zu more entries (%s)",
                shared_->path().c_str(), n,
                span > shared_->capacity() ? "its capacity, set by fi_av_attr.count at creation"
                                           : fi_strerror(-to_fi(e)));
      return fail_all(e);
    }
  }
  const bool reuses = table_.free_count() > 0;  // an index readers may have seen before
  try {
    table_.reserve(n);
    if (user_ids) table_.enable_ids();
  } catch (const std::bad_alloc&) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "out of memory growing the AV by %zu entries", n);
    return fail_all(errc::nomem);
  }
  // Encoded a group at a time, with the index slots prefetched before the
  // adds: a million-peer insert is bound by cache misses, not by work.
  constexpr size_t group = 16;
  size_t size = codec_->entry_size;
  std::vector<uint8_t> buf(group * size);
  int err[group];
  std::vector<std::pair<size_t, int>> failed;  // FI_EVENT: reported after the loop
  size_t ok = 0, bad = 0;
  int first_err = 0;
  for (size_t base = 0; base < n; base += group) {
    size_t m = std::min(group, n - base);
    for (size_t k = 0; k < m; ++k)
      if (!(err[k] = source(base + k, &buf[k * size]))) table_.prefetch(&buf[k * size]);
    for (size_t k = 0; k < m; ++k) {
      size_t i = base + k;
      fi_addr_t a = FI_ADDR_NOTAVAIL;
      if (!err[k]) {
        a = table_.add(&buf[k * size]);
        if (user_ids) table_.set_user_id(static_cast<uint32_t>(a), fi_addr[i]);  // read, then replaced
        ++ok;
      } else {
        if (!bad++) first_err = err[k];
        if (events_) failed.emplace_back(i, err[k]);
      }
      if (fi_addr) fi_addr[i] = a;
      if (errs) errs[i] = err[k];
    }
  }
  if (bad && !warned)
    WEFT_WARN(prov_of(this), FI_LOG_AV, "%zu of %zu addresses not inserted (first: %s)", bad, n,
              fi_strerror(first_err));
  if (ok) publish(reuses);
  if (!events_) return static_cast<int>(ok);
  return report<Lock>(n, failed, ok, fi_addr, context);
}

// FI_EVENT: the insert is done; fi_av(3) wants one error entry per failed
// address, then one FI_AV_COMPLETE whose data counts the successes.
template <class Lock>
int av::report(size_t n, const std::vector<std::pair<size_t, int>>& failed, size_t ok,
               fi_addr_t* fi_addr, void* context) {
  int rc = 0;
  for (auto [index, err] : failed) {
    fi_eq_err_entry ee{};
    ee.fid = as_fid();
    ee.context = context;
    ee.data = index;
    ee.err = err;
    if ((rc = eq_->write_error(ee)) != 0) break;
  }
  if (!rc) {
    fi_eq_entry done{as_fid(), context, ok};
    rc = eq_->write_event(FI_AV_COMPLETE, &done, sizeof done, 0);
  }
  if (!rc) return 0;
  // The EQ is full: the insert cannot be reported, so it is undone (which
  // needs the fi_addr array; error entries already queued stay queued).
  WEFT_WARN(prov_of(this), FI_LOG_AV, "event queue full: insert of %zu addresses undone", n);
  if (fi_addr) {
    table_.reserve_removals(n);
    for (size_t i = 0; i < n; ++i) {
      if (fi_addr[i] != FI_ADDR_NOTAVAIL) table_.remove(fi_addr[i]);
      fi_addr[i] = FI_ADDR_NOTAVAIL;
    }
    publish(true);
  }
  return rc;
}

template <class Lock>
int av::insert(const void* addr, size_t count, fi_addr_t* fi_addr, uint64_t flags, void* context) {
  if (int rc = check_insert_flags(flags, context, fi_addr)) return rc;
  if (!count) return events_ ? report<Lock>(0, {}, 0, fi_addr, context) : 0;
  if (!addr || (!fi_addr && type_ == FI_AV_MAP) || count > INT_MAX) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "fi_av_insert: %s",
              !addr             ? "addr is NULL"
              : count > INT_MAX ? "count too large"
                                : "fi_addr is NULL for an FI_AV_MAP");
    return to_fi(errc::inval);
  }
  if (count > av_table::max_entries - table_.live()) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "fi_av_insert: %zu more addresses exceed the AV", count);
    return to_fi(errc::nospc);
  }
  const auto* base = static_cast<const uint8_t*>(addr);
  size_t stride = codec_->stride(addr);
  auto encode = [&](size_t i, uint8_t* e) { return -codec_->encode(base + i * stride, e); };
  return add_all<Lock>(count, encode, fi_addr, flags, context);
}

template <class Lock>
int av::add_resolved(const std::vector<uint8_t>& entries, const std::vector<int>& errs,
                     fi_addr_t* fi_addr, uint64_t flags, void* context, bool warned) {
  size_t size = codec_->entry_size;
  auto copy = [&](size_t i, uint8_t* e) {
    if (errs[i]) return errs[i];
    std::memcpy(e, entries.data() + i * size, size);
    return 0;
  };
  return add_all<Lock>(errs.size(), copy, fi_addr, flags, context, warned);
}

template <class Lock>
int av::insertsvc(const char* node, const char* service, fi_addr_t* fi_addr, uint64_t flags,
                  void* context) {
  if (int rc = check_insert_flags(flags, context, fi_addr)) return rc;
  if (!codec_->resolve) return to_fi(errc::nosys);
  bool addr_str = node && std::strstr(node, "://");
  if (!node || addr_str == (service != nullptr) || (!fi_addr && type_ == FI_AV_MAP)) {
    WEFT_WARN(prov_of(this), FI_LOG_AV, "fi_av_insertsvc: %s",
              !node      ? "node is NULL"
              : addr_str ? "service must be NULL with an FI_ADDR_STR node"
              : !service ? "service is NULL"
                         : "fi_addr is NULL for an FI_AV_MAP");
    return to_fi(errc::inval);
  }
  std::vector<uint8_t> entries(codec_->entry_size);
  std::vector<int> errs(1);
  // Resolution may block on DNS: outside the lock.
  errs[0] = -codec_->resolve(node, service, entries.data());
  if (errs[0])
    WEFT_WARN(prov_of(this), FI_LOG_AV, "cannot resolve %s%s%s: %s", node, service ? ":" : "",
              service ? service : "", fi_strerror(errs[0]));
  return add_resolved<Lock>(entries, errs, fi_addr, flags, context, errs[0] != 0);
}

template <class Lock>
int av::insertsym(const char* node, size_t nodecnt, const char* service, size_t svccnt,
                  fi_addr_t* fi_addr, uint64_t flags, void* context) {
  if (int rc = check_insert_flags(flags, context, fi_addr)) return rc;
  if (!codec_->resolve || !codec_->step_node) return to_fi(errc::nosys);
  const fi_provider* prov = prov_of(this);
  if (!node || !service || (!fi_addr && type_ == FI_AV_MAP)) {
    WEFT_WARN(prov, FI_LOG_AV, "fi_av_insertsym: %s is NULL",
              !node      ? "node"
              : !service ? "service"
                         : "fi_addr");
    return to_fi(errc::inval);
  }
  if (!nodecnt || !svccnt) return events_ ? report<Lock>(0, {}, 0, fi_addr, context) : 0;
  if (nodecnt > INT_MAX / svccnt) {
    WEFT_WARN(prov, FI_LOG_AV, "fi_av_insertsym: %zu x %zu addresses", nodecnt, svccnt);
    return to_fi(errc::inval);
  }
  char* end = nullptr;
  unsigned long port = std::strtoul(service, &end, 10);
  bool numeric = *service && *end == '\0' && port <= 65535;
  char name[1025];  // NI_MAXHOST
  bool bad_service = !numeric && svccnt > 1;
  if (bad_service || (nodecnt > 1 && codec_->step_node(node, 1, name, sizeof name) != 0)) {
    WEFT_WARN(prov, FI_LOG_AV, "fi_av_insertsym: %s has no number to count from",
              bad_service ? service : node);
    return to_fi(errc::inval);
  }
  size_t total = nodecnt * svccnt, size = codec_->entry_size;
  std::vector<uint8_t> entries(total * size);
  std::vector<int> errs(total);
  // Resolution may block on DNS: outside the lock.
  for (size_t i = 0; i < nodecnt; ++i) {
    int step_rc = codec_->step_node(node, i, name, sizeof name);
    for (size_t j = 0; j < svccnt; ++j) {
      size_t k = i * svccnt + j;
      if (step_rc || (numeric && port + j > 65535)) {
        errs[k] = FI_EINVAL;
        continue;
      }
      std::string svc = numeric ? std::to_string(port + j) : std::string{service};
      errs[k] = -codec_->resolve(name, svc.c_str(), entries.data() + k * size);
    }
  }
  return add_resolved<Lock>(entries, errs, fi_addr, flags, context);
}

}  // namespace weft::util
