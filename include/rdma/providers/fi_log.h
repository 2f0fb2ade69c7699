/* SPDX-License-Identifier: MIT */
/* weft — provider logging: levels, subsystems, fi_log and the FI_LOG macros */

#ifndef WEFT_RDMA_PROVIDERS_FI_LOG_H
#define WEFT_RDMA_PROVIDERS_FI_LOG_H

#include <errno.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/providers/fi_prov.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Selected with FI_LOG_SUBSYS; numbering is ABI. */
enum fi_log_subsys {
	FI_LOG_CORE,
	FI_LOG_FABRIC,
	FI_LOG_DOMAIN,
	FI_LOG_EP_CTRL,
	FI_LOG_EP_DATA,
	FI_LOG_AV,
	FI_LOG_CQ,
	FI_LOG_EQ,
	FI_LOG_MR,
	FI_LOG_CNTR,
	FI_LOG_SUBSYS_MAX
};

/* Selected with FI_LOG_LEVEL; each level includes the ones above it. */
enum fi_log_level {
	FI_LOG_WARN,
	FI_LOG_TRACE,
	FI_LOG_INFO,
	FI_LOG_DEBUG,
	FI_LOG_MAX
};

/* Non-zero if a line for prov at this level and subsystem would print. */
int fi_log_enabled(const struct fi_provider *prov, enum fi_log_level level,
		   enum fi_log_subsys subsys);

/*
 * Like fi_log_enabled, for rate-limited lines: also requires that the
 * time in *showtime has passed, and then moves *showtime forward.
 */
int fi_log_ready(const struct fi_provider *prov, enum fi_log_level level,
		 enum fi_log_subsys subsys, uint64_t *showtime);

/* Print one line. Callers check fi_log_enabled first (the macros do). */
void fi_log(const struct fi_provider *prov, enum fi_log_level level,
	    enum fi_log_subsys subsys, const char *func, int line,
	    const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 6, 7)))
#endif
	;

/*
 * The macros below cost one call and one branch when the line is
 * disabled: arguments are evaluated only if it will print. Logging never
 * changes errno, so a caller may log between a failing call and reading
 * errno.
 */
/* Printf-style argument checking for logging functions. */
#define FI_FORMAT_PRINTF(string, first) \
	__attribute__((format(printf, string, first)))

/* A provider whose log output FI_LOG_PROV filters away. */
#define FI_LOG_PROV_FILTERED	(1ULL << 0)

#define FI_LOG(prov, level, subsys, ...)				\
	do {								\
		if (fi_log_enabled((prov), (level), (subsys))) {	\
			int fi_log_errno_ = errno;			\
			fi_log((prov), (level), (subsys),		\
			       __func__, __LINE__, __VA_ARGS__);	\
			errno = fi_log_errno_;				\
		}							\
	} while (0)

/* At most one line per rate-limit interval from this call site. */
#define FI_LOG_SPARSE(prov, level, subsys, ...)			\
	do {								\
		static uint64_t fi_log_showtime_;			\
		if (fi_log_ready((prov), (level), (subsys),		\
				 &fi_log_showtime_)) {			\
			int fi_log_errno_ = errno;			\
			fi_log((prov), (level), (subsys),		\
			       __func__, __LINE__, __VA_ARGS__);	\
			errno = fi_log_errno_;				\
		}							\
	} while (0)

#define FI_WARN(prov, subsys, ...) \
	FI_LOG(prov, FI_LOG_WARN, subsys, __VA_ARGS__)
#define FI_WARN_SPARSE(prov, subsys, ...) \
	FI_LOG_SPARSE(prov, FI_LOG_WARN, subsys, __VA_ARGS__)
#define FI_TRACE(prov, subsys, ...) \
	FI_LOG(prov, FI_LOG_TRACE, subsys, __VA_ARGS__)
#define FI_INFO(prov, subsys, ...) \
	FI_LOG(prov, FI_LOG_INFO, subsys, __VA_ARGS__)

/*
 * Warn the first time this call site fires with warnings enabled, never
 * again. The flag is claimed atomically where the compiler allows, so
 * racing threads print once.
 */
#if defined(__GNUC__)
#define WEFT_LOG_CLAIM_ONCE_(flag) \
	(__atomic_exchange_n((flag), 1, __ATOMIC_RELAXED) == 0)
#else
#define WEFT_LOG_CLAIM_ONCE_(flag) (*(flag) ? 0 : (*(flag) = 1))
#endif

#define FI_WARN_ONCE(prov, subsys, ...)				\
	do {								\
		static int fi_log_warned_;				\
		if (fi_log_enabled((prov), FI_LOG_WARN, (subsys)) &&	\
		    WEFT_LOG_CLAIM_ONCE_(&fi_log_warned_)) {		\
			int fi_log_errno_ = errno;			\
			fi_log((prov), FI_LOG_WARN, (subsys),		\
			       __func__, __LINE__, __VA_ARGS__);	\
			errno = fi_log_errno_;				\
		}							\
	} while (0)

/*
 * Debug lines exist only in builds with ENABLE_DEBUG set non-zero. In
 * other builds they compile to nothing, but their arguments are still
 * type-checked (and count as used) inside a dead branch.
 */
#if defined(ENABLE_DEBUG) && (ENABLE_DEBUG + 0)
#define FI_DBG(prov, subsys, ...) \
	FI_LOG(prov, FI_LOG_DEBUG, subsys, __VA_ARGS__)
#define FI_DBG_TRACE(prov, subsys, ...) \
	FI_LOG(prov, FI_LOG_TRACE, subsys, __VA_ARGS__)
#else
#define FI_DBG(prov, subsys, ...)					\
	do {								\
		if (0)							\
			fi_log((prov), FI_LOG_DEBUG, (subsys),		\
			       __func__, __LINE__, __VA_ARGS__);	\
	} while (0)
#define FI_DBG_TRACE(prov, subsys, ...)				\
	do {								\
		if (0)							\
			fi_log((prov), FI_LOG_TRACE, (subsys),		\
			       __func__, __LINE__, __VA_ARGS__);	\
	} while (0)
#endif

#ifdef __cplusplus
}
#endif

#endif /* WEFT_RDMA_PROVIDERS_FI_LOG_H */
