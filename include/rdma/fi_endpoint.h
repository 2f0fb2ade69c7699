/* SPDX-License-Identifier: MIT */
/* weft — endpoint objects, endpoint options and the message (fi_msg) data path */

#ifndef FI_ENDPOINT_H
#define FI_ENDPOINT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Message descriptor for fi_sendmsg / fi_recvmsg.  Layout is ABI: binaries
 * built against libfabric 1.x hand this structure to us unchanged.
 */
struct fi_msg {
	const struct iovec *msg_iov;  /* local buffers */
	void **desc;                  /* one MR descriptor per msg_iov entry */
	size_t iov_count;
	fi_addr_t addr;               /* peer; ignored on connected endpoints */
	void *context;                /* returned in the completion */
	uint64_t data;                /* remote CQ data, with FI_REMOTE_CQ_DATA */
};

/* Option levels for fi_getopt / fi_setopt. */
enum {
	FI_OPT_ENDPOINT
};

/*
 * Option names at level FI_OPT_ENDPOINT.  The numeric values are ABI, so
 * new names only ever go at the end.  The comment gives the optval type.
 */
enum {
	FI_OPT_MIN_MULTI_RECV,           /* size_t */
	FI_OPT_CM_DATA_SIZE,             /* size_t, read only */
	FI_OPT_BUFFERED_MIN,             /* size_t */
	FI_OPT_BUFFERED_LIMIT,           /* size_t */
	FI_OPT_SEND_BUF_SIZE,            /* size_t */
	FI_OPT_RECV_BUF_SIZE,            /* size_t */
	FI_OPT_TX_SIZE,                  /* size_t */
	FI_OPT_RX_SIZE,                  /* size_t */
	FI_OPT_FI_HMEM_P2P,              /* int, one of FI_HMEM_P2P_* */
	FI_OPT_XPU_TRIGGER,              /* struct fi_trigger_xpu, getopt only */
	FI_OPT_CUDA_API_PERMITTED,       /* bool */
	FI_OPT_SHARED_MEMORY_PERMITTED,  /* bool */
	FI_OPT_MAX_MSG_SIZE,             /* size_t */
	FI_OPT_MAX_TAGGED_SIZE,          /* size_t */
	FI_OPT_MAX_RMA_SIZE,             /* size_t */
	FI_OPT_MAX_ATOMIC_SIZE,          /* size_t */
	FI_OPT_INJECT_MSG_SIZE,          /* size_t */
	FI_OPT_INJECT_TAGGED_SIZE,       /* size_t */
	FI_OPT_INJECT_RMA_SIZE,          /* size_t */
	FI_OPT_INJECT_ATOMIC_SIZE        /* size_t */
};

/* Values for FI_OPT_FI_HMEM_P2P: how device memory may move peer to peer. */
enum {
	FI_HMEM_P2P_ENABLED,    /* provider decides per transfer (default) */
	FI_HMEM_P2P_REQUIRED,   /* transfers that cannot go p2p fail */
	FI_HMEM_P2P_PREFERRED,  /* p2p when possible, copy otherwise */
	FI_HMEM_P2P_DISABLED    /* never p2p */
};

/*
 * ep_attr::mem_tag_format (API 2.x): a small value names a tag format, a
 * value of FI_TAG_MAX_FORMAT or more is the 1.x bit-field description.
 * FI_TAG_BITS (0, what fi_allocinfo leaves) is 64 bits of tag as in 1.x.
 */
enum {
	FI_TAG_BITS,
	FI_TAG_MPI,		/* 32-bit tag, 8-bit payload id: fi_tag_mpi */
	FI_TAG_CCL,		/* payload id only, matched exactly */
	FI_TAG_MAX_FORMAT = 1 << 16
};

/* Ignore masks for FI_TAG_MPI tags: the tag field, the payload id field. */
#define FI_MPI_IGNORE_TAG	((uint64_t) 0xFFFFFFFF)
#define FI_MPI_IGNORE_PAYLOAD	(((uint64_t) 0xFF) << 32)

/* An FI_TAG_MPI tag: the MPI tag in the low 32 bits, payload id above. */
static inline uint64_t fi_tag_mpi(int tag, uint8_t payload_id)
{
	return ((uint64_t) payload_id << 32) | (uint64_t) (uint32_t) tag;
}

/* Tables installed by other headers; only pointers are needed here. */
struct fi_ops_cm;
struct fi_ops_rma;
struct fi_ops_tagged;
struct fi_ops_atomic;
struct fi_ops_collective;

/* Control-path operations shared by active, passive and shared-tx objects. */
struct fi_ops_ep {
	size_t size;
	ssize_t (*cancel)(fid_t fid, void *context);
	int (*getopt)(fid_t fid, int level, int optname,
		      void *optval, size_t *optlen);
	int (*setopt)(fid_t fid, int level, int optname,
		      const void *optval, size_t optlen);
	int (*tx_ctx)(struct fid_ep *sep, int index, struct fi_tx_attr *attr,
		      struct fid_ep **tx_ep, void *context);
	int (*rx_ctx)(struct fid_ep *sep, int index, struct fi_rx_attr *attr,
		      struct fid_ep **rx_ep, void *context);
	ssize_t (*rx_size_left)(struct fid_ep *ep);  /* deprecated */
	ssize_t (*tx_size_left)(struct fid_ep *ep);  /* deprecated */
};

/* Untagged message data path. */
struct fi_ops_msg {
	size_t size;
	ssize_t (*recv)(struct fid_ep *ep, void *buf, size_t len, void *desc,
			fi_addr_t src_addr, void *context);
	ssize_t (*recvv)(struct fid_ep *ep, const struct iovec *iov,
			 void **desc, size_t count, fi_addr_t src_addr,
			 void *context);
	ssize_t (*recvmsg)(struct fid_ep *ep, const struct fi_msg *msg,
			   uint64_t flags);
	ssize_t (*send)(struct fid_ep *ep, const void *buf, size_t len,
			void *desc, fi_addr_t dest_addr, void *context);
	ssize_t (*sendv)(struct fid_ep *ep, const struct iovec *iov,
			 void **desc, size_t count, fi_addr_t dest_addr,
			 void *context);
	ssize_t (*sendmsg)(struct fid_ep *ep, const struct fi_msg *msg,
			   uint64_t flags);
	ssize_t (*inject)(struct fid_ep *ep, const void *buf, size_t len,
			  fi_addr_t dest_addr);
	ssize_t (*senddata)(struct fid_ep *ep, const void *buf, size_t len,
			    void *desc, uint64_t data, fi_addr_t dest_addr,
			    void *context);
	ssize_t (*injectdata)(struct fid_ep *ep, const void *buf, size_t len,
			      uint64_t data, fi_addr_t dest_addr);
};

/*
 * Active endpoint (also scalable endpoints, their tx/rx contexts and shared
 * receive contexts).  A table the endpoint does not support may be NULL;
 * callers are expected to have asked for the matching capability.
 */
struct fid_ep {
	struct fid fid;
	struct fi_ops_ep *ops;
	struct fi_ops_cm *cm;
	struct fi_ops_msg *msg;
	struct fi_ops_rma *rma;
	struct fi_ops_tagged *tagged;
	struct fi_ops_atomic *atomic;
	struct fi_ops_collective *collective;
};

/* Passive (listening) endpoint. */
struct fid_pep {
	struct fid fid;
	struct fi_ops_ep *ops;
	struct fi_ops_cm *cm;
};

/* Shared transmit context. */
struct fid_stx {
	struct fid fid;
	struct fi_ops_ep *ops;
};

/*
 * Recover the endpoint from its fid, for the calls that take a fid_t.  The fid
 * is the first member of every endpoint kind, and the ops pointer follows it
 * at the same offset in fid_ep, fid_pep and fid_stx, so fi_getopt and friends
 * also work on passive endpoints and shared contexts.
 */
static inline struct fid_ep *fi_ep_from_fid_(fid_t fid)
{
	return (struct fid_ep *) (void *) fid;
}

/* ---- creation ---------------------------------------------------------- */

static inline int
fi_passive_ep(struct fid_fabric *fabric, struct fi_info *info,
	      struct fid_pep **pep, void *context)
{
	return fabric->ops->passive_ep(fabric, info, pep, context);
}

static inline int
fi_endpoint(struct fid_domain *domain, struct fi_info *info,
	    struct fid_ep **ep, void *context)
{
	return domain->ops->endpoint(domain, info, ep, context);
}

/*
 * Without flags this is plain fi_endpoint.  endpoint2 was appended to
 * fi_ops_domain later, so a table too old to hold it cannot take flags.
 */
static inline int
fi_endpoint2(struct fid_domain *domain, struct fi_info *info,
	     struct fid_ep **ep, uint64_t flags, void *context)
{
	if (flags == 0)
		return fi_endpoint(domain, info, ep, context);
	if (!FI_CHECK_OP(domain->ops, struct fi_ops_domain, endpoint2))
		return -FI_ENOSYS;
	return domain->ops->endpoint2(domain, info, ep, flags, context);
}

static inline int
fi_scalable_ep(struct fid_domain *domain, struct fi_info *info,
	       struct fid_ep **sep, void *context)
{
	return domain->ops->scalable_ep(domain, info, sep, context);
}

static inline int
fi_stx_context(struct fid_domain *domain, struct fi_tx_attr *attr,
	       struct fid_stx **stx, void *context)
{
	return domain->ops->stx_ctx(domain, attr, stx, context);
}

static inline int
fi_srx_context(struct fid_domain *domain, struct fi_rx_attr *attr,
	       struct fid_ep **rx_ep, void *context)
{
	return domain->ops->srx_ctx(domain, attr, rx_ep, context);
}

static inline int
fi_tx_context(struct fid_ep *ep, int index, struct fi_tx_attr *attr,
	      struct fid_ep **tx_ep, void *context)
{
	return ep->ops->tx_ctx(ep, index, attr, tx_ep, context);
}

static inline int
fi_rx_context(struct fid_ep *ep, int index, struct fi_rx_attr *attr,
	      struct fid_ep **rx_ep, void *context)
{
	return ep->ops->rx_ctx(ep, index, attr, rx_ep, context);
}

/* ---- binding, enabling, control ---------------------------------------- */

static inline int fi_ep_bind(struct fid_ep *ep, struct fid *bfid, uint64_t flags)
{
	return ep->fid.ops->bind(&ep->fid, bfid, flags);
}

static inline int fi_pep_bind(struct fid_pep *pep, struct fid *bfid, uint64_t flags)
{
	return pep->fid.ops->bind(&pep->fid, bfid, flags);
}

static inline int
fi_scalable_ep_bind(struct fid_ep *sep, struct fid *bfid, uint64_t flags)
{
	return sep->fid.ops->bind(&sep->fid, bfid, flags);
}

static inline int fi_enable(struct fid_ep *ep)
{
	return ep->fid.ops->control(&ep->fid, FI_ENABLE, NULL);
}

/* Takes the endpoint's fid (not the fid_ep), as the published API does. */
static inline ssize_t fi_cancel(fid_t fid, void *context)
{
	return fi_ep_from_fid_(fid)->ops->cancel(fid, context);
}

static inline int
fi_setopt(fid_t fid, int level, int optname, const void *optval, size_t optlen)
{
	return fi_ep_from_fid_(fid)->ops->setopt(fid, level, optname,
						  optval, optlen);
}

static inline int
fi_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	return fi_ep_from_fid_(fid)->ops->getopt(fid, level, optname,
						  optval, optlen);
}

static inline int
fi_ep_alias(struct fid_ep *ep, struct fid_ep **alias_ep, uint64_t flags)
{
	struct fid *alias_fid = NULL;
	int ret = fi_alias(&ep->fid, &alias_fid, flags);

	if (ret == 0)
		*alias_ep = fi_ep_from_fid_(alias_fid);
	return ret;
}

/*
 * fi_endpoint(3) and fi_cntr(3) name fi_control on an endpoint or counter
 * fi_ep_control / fi_cntr_control; they are that call (docs/decisions.md).
 */
static inline int fi_ep_control(struct fid *ep, int command, void *arg)
{
	return fi_control(ep, command, arg);
}

/*
 * Deprecated queue-depth queries; kept because 1.x binaries and sources still
 * call them.  Sources get a deprecation warning, as with the published API.
 */
#if defined(__GNUC__) || defined(__clang__)
#define FI_EP_SIZE_LEFT_DEPRECATED_ __attribute__((deprecated))
#else
#define FI_EP_SIZE_LEFT_DEPRECATED_
#endif

FI_EP_SIZE_LEFT_DEPRECATED_ static inline ssize_t
fi_rx_size_left(struct fid_ep *ep)
{
	return ep->ops->rx_size_left(ep);
}

FI_EP_SIZE_LEFT_DEPRECATED_ static inline ssize_t
fi_tx_size_left(struct fid_ep *ep)
{
	return ep->ops->tx_size_left(ep);
}

#undef FI_EP_SIZE_LEFT_DEPRECATED_

/* ---- message data path ------------------------------------------------- */

static inline ssize_t
fi_recv(struct fid_ep *ep, void *buf, size_t len, void *desc,
	fi_addr_t src_addr, void *context)
{
	return ep->msg->recv(ep, buf, len, desc, src_addr, context);
}

static inline ssize_t
fi_recvv(struct fid_ep *ep, const struct iovec *iov, void **desc,
	 size_t count, fi_addr_t src_addr, void *context)
{
	return ep->msg->recvv(ep, iov, desc, count, src_addr, context);
}

static inline ssize_t
fi_recvmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
	return ep->msg->recvmsg(ep, msg, flags);
}

static inline ssize_t
fi_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
	fi_addr_t dest_addr, void *context)
{
	return ep->msg->send(ep, buf, len, desc, dest_addr, context);
}

static inline ssize_t
fi_sendv(struct fid_ep *ep, const struct iovec *iov, void **desc,
	 size_t count, fi_addr_t dest_addr, void *context)
{
	return ep->msg->sendv(ep, iov, desc, count, dest_addr, context);
}

static inline ssize_t
fi_sendmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
	return ep->msg->sendmsg(ep, msg, flags);
}

static inline ssize_t
fi_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest_addr)
{
	return ep->msg->inject(ep, buf, len, dest_addr);
}

static inline ssize_t
fi_senddata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
	    uint64_t data, fi_addr_t dest_addr, void *context)
{
	return ep->msg->senddata(ep, buf, len, desc, data, dest_addr, context);
}

static inline ssize_t
fi_injectdata(struct fid_ep *ep, const void *buf, size_t len,
	      uint64_t data, fi_addr_t dest_addr)
{
	return ep->msg->injectdata(ep, buf, len, data, dest_addr);
}

#ifdef __cplusplus
}
#endif

#endif /* FI_ENDPOINT_H */
