/* SPDX-License-Identifier: MIT */
/* weft — published extensions: provider options, fid export/import, imports */

#ifndef WEFT_RDMA_FI_EXT_H
#define WEFT_RDMA_FI_EXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/providers/fi_prov.h>
#include <rdma/providers/fi_log.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Provider-specific values (endpoint options, fid classes, ...) are
 * negative numbers built from a provider code: each provider owns a
 * 12-bit code shifted left by 16, leaving the low 16 bits for its values
 * and the top 4 bits clear.
 */
#define FI_PROV_SPECIFIC_EFA	(0xefa << 16)
#define FI_PROV_SPECIFIC_TCP	(0x7cb << 16)

/* fi_setopt / fi_getopt names at level FI_OPT_ENDPOINT, efa provider. */
enum {
	FI_OPT_EFA_RNR_RETRY = -FI_PROV_SPECIFIC_EFA,	/* size_t */
	FI_OPT_EFA_EMULATED_READ,			/* bool */
	FI_OPT_EFA_EMULATED_WRITE,			/* bool */
	FI_OPT_EFA_EMULATED_ATOMICS,			/* bool */
	FI_OPT_EFA_USE_DEVICE_RDMA,			/* bool */
	FI_OPT_EFA_SENDRECV_IN_ORDER_ALIGNED_128_BYTES,	/* bool */
	FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES,	/* bool */
	FI_OPT_EFA_HOMOGENEOUS_PEERS			/* bool */
};

/* ------------------------------------------------ fid export / import */

/* Argument of fi_control(FI_EXPORT_FID). */
struct fi_fid_export {
	struct fid		**fid;
	uint64_t		flags;
	void			*context;
};

/* Ask fid for an object another component may bind to (*expfid). */
static inline int fi_export_fid(struct fid *fid, uint64_t flags,
				struct fid **expfid, void *context)
{
	struct fi_fid_export exp;

	exp.fid = expfid;
	exp.flags = flags;
	exp.context = context;
	return fi_control(fid, FI_EXPORT_FID, &exp);
}

/* fi_import_fid and fi_import are in fabric.h, where fi_provider(3) puts
 * fi_import. */

/* ------------------------------------------------ memory monitor import */

/*
 * An application-provided memory monitor for the registration cache:
 * fi_open("mr_cache"), then fi_import_fid the monitor (fclass
 * FI_CLASS_MEM_MONITOR). The application fills export_ops; the library
 * fills import_ops, through which the monitor reports that a range
 * changed.
 */
struct fid_mem_monitor;

struct fi_ops_mem_monitor {
	size_t	size;
	int	(*start)(struct fid_mem_monitor *monitor);
	void	(*stop)(struct fid_mem_monitor *monitor);
	int	(*subscribe)(struct fid_mem_monitor *monitor,
			     const void *addr, size_t len);
	void	(*unsubscribe)(struct fid_mem_monitor *monitor,
			       const void *addr, size_t len);
	bool	(*valid)(struct fid_mem_monitor *monitor,
			 const void *addr, size_t len);
};

struct fi_ops_mem_notify {
	size_t	size;
	void	(*notify)(struct fid_mem_monitor *monitor, const void *addr,
			  size_t len);
};

struct fid_mem_monitor {
	struct fid			fid;
	struct fi_ops_mem_monitor	*export_ops;
	struct fi_ops_mem_notify	*import_ops;
};

/* -------------------------------------------------------- logging import */

/* Replacement logging callbacks, installed through the "logging" object. */
struct fi_ops_log {
	size_t	size;
	int	(*enabled)(const struct fi_provider *prov,
			   enum fi_log_level level,
			   enum fi_log_subsys subsys, uint64_t flags);
	int	(*ready)(const struct fi_provider *prov,
			 enum fi_log_level level,
			 enum fi_log_subsys subsys, uint64_t flags,
			 uint64_t *showtime);
	void	(*log)(const struct fi_provider *prov,
		       enum fi_log_level level, enum fi_log_subsys subsys,
		       const char *func, int line, const char *msg);
};

struct fid_logging {
	struct fid		fid;
	struct fi_ops_log	*ops;
};

/*
 * Route all library logging through log_fid->ops. The caller provides
 * ops; this sets the fclass and ops size. Only one import is active;
 * a later one replaces an earlier one.
 */
static inline int fi_import_log(uint32_t version, uint64_t flags,
				struct fid_logging *log_fid)
{
	log_fid->fid.fclass = FI_CLASS_LOG;
	log_fid->ops->size = sizeof(struct fi_ops_log);
	return fi_import(version, "logging", NULL, 0, flags, &log_fid->fid,
			 log_fid);
}

#ifdef __cplusplus
}
#endif

#endif /* WEFT_RDMA_FI_EXT_H */
