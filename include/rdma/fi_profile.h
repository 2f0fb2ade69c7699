/* SPDX-License-Identifier: MIT */
/* weft — profiling interface: variables and events of an endpoint or domain (API 2.x) */

#ifndef FI_PROFILE_H
#define FI_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_domain.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Variables and events libfabric defines (fi_profile(3)); providers number
 * their own with FI_PROV_SPECIFIC set.  Variable ids and event ids are
 * separate spaces.
 */
enum {
	FI_VAR_UNEXP_MSG_CNT,		/* uint64_t: unexpected messages queued */
	FI_VAR_UNEXP_MSG_QUEUE		/* struct fi_cq_err_entry per message */
};

enum {
	FI_EVENT_UNEXP_MSG_RECVD,	/* an unexpected message was queued */
	FI_EVENT_UNEXP_MSG_MATCHED	/* a queued one met its receive */
};

/* Which member of fi_profile_desc::datatype describes the data. */
enum fi_profile_type {
	fi_primitive_type,		/* datatype.primitive (enum fi_datatype) */
	fi_defined_type			/* datatype.defined (enum fi_type) */
};

/* One variable or event; name and desc belong to the provider. */
struct fi_profile_desc {
	uint32_t		id;
	enum fi_profile_type	datatype_sel;
	union {
		enum fi_datatype	primitive;
		enum fi_type		defined;
	} datatype;
	uint64_t		flags;
	size_t			size;		/* bytes of the data */
	const char		*name;
	const char		*desc;
};

struct fid_profile;

/*
 * The profile object's operations.  fi_profile(3) documents only the calls
 * below; this table is weft's (docs/decisions.md): read_var reads any
 * variable into data (size in/out), fi_profile_read_u64 is that read for
 * an FI_UINT64 variable.
 */
struct fi_ops_profile {
	size_t	size;
	void	(*reset)(struct fid_profile *prof_fid, uint64_t flags);
	ssize_t	(*query_vars)(struct fid_profile *prof_fid,
			      struct fi_profile_desc *varlist, size_t *count);
	ssize_t	(*query_events)(struct fid_profile *prof_fid,
				struct fi_profile_desc *eventlist,
				size_t *count);
	ssize_t	(*read_var)(struct fid_profile *prof_fid, uint32_t var_id,
			    void *data, size_t *size);
	int	(*reg_callback)(struct fid_profile *prof_fid, uint32_t event_id,
				int (*callback)(struct fid_profile *prof_fid,
						struct fi_profile_desc *event,
						void *param, size_t size,
						void *context),
				void *context);
	void	(*start_reads)(struct fid_profile *prof_fid, uint64_t flags);
	void	(*end_reads)(struct fid_profile *prof_fid, uint64_t flags);
};

/* fid.fclass is FI_CLASS_PROFILE. */
struct fid_profile {
	struct fid		fid;
	struct fi_ops_profile	*ops;
};

/*
 * The target (an endpoint or a domain) hands out its profile object
 * through fi_open_ops under the name "fi_profile_ops"; an object without
 * profiling answers -FI_ENOSYS, as every weft object does today.
 */
static inline int
fi_profile_open(struct fid *fid, uint64_t flags,
		struct fid_profile **prof_fid, void *context)
{
	return fi_open_ops(fid, "fi_profile_ops", flags, (void **) prof_fid,
			   context);
}

static inline int
fi_profile_close(struct fid_profile *prof_fid)
{
	return fi_close(&prof_fid->fid);
}

static inline void
fi_profile_reset(struct fid_profile *prof_fid, uint64_t flags)
{
	prof_fid->ops->reset(prof_fid, flags);
}

/* count is in/out; varlist NULL asks only for the count. */
static inline ssize_t
fi_profile_query_vars(struct fid_profile *prof_fid,
		      struct fi_profile_desc *varlist, size_t *count)
{
	return prof_fid->ops->query_vars(prof_fid, varlist, count);
}

static inline ssize_t
fi_profile_query_events(struct fid_profile *prof_fid,
			struct fi_profile_desc *eventlist, size_t *count)
{
	return prof_fid->ops->query_events(prof_fid, eventlist, count);
}

static inline int
fi_profile_register_callback(struct fid_profile *prof_fid, uint32_t event_id,
			     int (*callback)(struct fid_profile *prof_fid,
					     struct fi_profile_desc *event,
					     void *param, size_t size,
					     void *context),
			     void *context)
{
	return prof_fid->ops->reg_callback(prof_fid, event_id, callback,
					   context);
}

/* fi_profile(3) also calls the registration fi_profile_reg_callback. */
static inline int
fi_profile_reg_callback(struct fid_profile *prof_fid, uint32_t event_id,
			int (*callback)(struct fid_profile *prof_fid,
					struct fi_profile_desc *event,
					void *param, size_t size,
					void *context),
			void *context)
{
	return fi_profile_register_callback(prof_fid, event_id, callback,
					    context);
}

static inline ssize_t
fi_profile_read_u64(struct fid_profile *prof_fid, uint32_t var_id,
		    uint64_t *data)
{
	size_t size = sizeof(*data);

	return prof_fid->ops->read_var(prof_fid, var_id, data, &size);
}

/* Variables read between these two calls come from one snapshot. */
static inline void
fi_profile_start_reads(struct fid_profile *prof_fid, uint64_t flags)
{
	prof_fid->ops->start_reads(prof_fid, flags);
}

static inline void
fi_profile_end_reads(struct fid_profile *prof_fid, uint64_t flags)
{
	prof_fid->ops->end_reads(prof_fid, flags);
}

#ifdef __cplusplus
}
#endif

#endif /* FI_PROFILE_H */
