/* SPDX-License-Identifier: MIT */
/* weft — peer provider interface: objects one provider shares with another */

#ifndef FI_PEER_H
#define FI_PEER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The owner of an object opens the peer's matching object with FI_PEER
 * and a *_context naming the shared object; the peer calls back into
 * the owner through owner_ops.  Peers must be built against the same
 * library version: these layouts are not a stable ABI.
 */

/* ------------------------------------------------------------------ */
/* Address vectors                                                     */
/* ------------------------------------------------------------------ */

struct fid_peer_av;

struct fi_ops_av_owner {
	size_t	size;
	int	(*query)(struct fid_peer_av *av, struct fi_av_attr *attr);
	/* FI_ADDR_NOTAVAIL when ep's address is not in the AV */
	fi_addr_t (*ep_addr)(struct fid_peer_av *av, struct fid_ep *ep);
};

struct fid_peer_av {
	struct fid		fid;
	struct fi_ops_av_owner	*owner_ops;
};

struct fi_peer_av_context {
	size_t			size;
	struct fid_peer_av	*av;
};

/* ------------------------------------------------------------------ */
/* AV sets                                                             */
/* ------------------------------------------------------------------ */

struct fid_peer_av_set;

struct fi_ops_av_set_owner {
	size_t	size;
	/* count is in/out; -FI_ETOOSMALL when addr cannot hold them all */
	int	(*members)(struct fid_peer_av_set *av, fi_addr_t *addr,
			   size_t *count);
};

struct fid_peer_av_set {
	struct fid			fid;
	struct fi_ops_av_set_owner	*owner_ops;
};

struct fi_peer_av_set_context {
	size_t			size;
	struct fid_peer_av_set	*av_set;
};

/* ------------------------------------------------------------------ */
/* Completion queues                                                   */
/* ------------------------------------------------------------------ */

struct fid_peer_cq;

/*
 * The owner locks, signals and handles overrun.  src is relative to the
 * peer's AV; the owner translates it when source addressing is on.
 */
struct fi_ops_cq_owner {
	size_t	size;
	ssize_t	(*write)(struct fid_peer_cq *cq, void *context, uint64_t flags,
			 size_t len, void *buf, uint64_t data, uint64_t tag,
			 fi_addr_t src);
	ssize_t	(*writeerr)(struct fid_peer_cq *cq,
			    const struct fi_cq_err_entry *err_entry);
};

struct fid_peer_cq {
	struct fid		fid;
	struct fi_ops_cq_owner	*owner_ops;
};

struct fi_peer_cq_context {
	size_t			size;
	struct fid_peer_cq	*cq;
};

/* ------------------------------------------------------------------ */
/* Counters                                                            */
/* ------------------------------------------------------------------ */

struct fid_peer_cntr;

struct fi_ops_cntr_owner {
	size_t	size;
	void	(*inc)(struct fid_peer_cntr *cntr);
	void	(*incerr)(struct fid_peer_cntr *cntr);
};

struct fid_peer_cntr {
	struct fid		fid;
	struct fi_ops_cntr_owner *owner_ops;
};

struct fi_peer_cntr_context {
	size_t			size;
	struct fid_peer_cntr	*cntr;
};

/* ------------------------------------------------------------------ */
/* Domains and event queues: the owner's object is used directly       */
/* ------------------------------------------------------------------ */

struct fi_peer_domain_context {
	size_t			size;
	struct fid_domain	*domain;
};

struct fi_peer_eq_context {
	size_t			size;
	struct fid_eq		*eq;
};

/* ------------------------------------------------------------------ */
/* Shared receive contexts                                             */
/* ------------------------------------------------------------------ */

struct fid_peer_srx;

/*
 * A posted receive or an unexpected message, always allocated by the
 * owner.  next/prev let it sit on a doubly linked list.  Only the owner
 * writes the fields, except peer_context, which belongs to the peer.
 */
struct fi_peer_rx_entry {
	struct fi_peer_rx_entry	*next;
	struct fi_peer_rx_entry	*prev;
	struct fid_peer_srx	*srx;
	fi_addr_t		addr;
	size_t			msg_size;
	uint64_t		tag;
	uint64_t		cq_data;
	uint64_t		flags;
	void			*context;
	size_t			count;
	void			**desc;
	void			*peer_context;
	void			*owner_context;
	struct iovec		*iov;
};

/* What the peer knows about an arrived message when asking for a match. */
struct fi_peer_match_attr {
	fi_addr_t		addr;
	size_t			msg_size;
	uint64_t		tag;
};

/*
 * Implemented by the owner.  get_msg / get_tag always hand back an entry:
 * 0 when it matched a posted receive, -FI_ENOENT when it did not; in
 * that case the peer prepares the message and calls queue_msg/queue_tag.
 * foreach_unspec_addr asks the owner to re-resolve entries whose source
 * was unknown, using get_addr.  free_entry returns an entry when done.
 */
struct fi_ops_srx_owner {
	size_t	size;
	int	(*get_msg)(struct fid_peer_srx *srx,
			   struct fi_peer_match_attr *attr,
			   struct fi_peer_rx_entry **entry);
	int	(*get_tag)(struct fid_peer_srx *srx,
			   struct fi_peer_match_attr *attr,
			   struct fi_peer_rx_entry **entry);
	int	(*queue_msg)(struct fi_peer_rx_entry *entry);
	int	(*queue_tag)(struct fi_peer_rx_entry *entry);
	void	(*foreach_unspec_addr)(struct fid_peer_srx *srx,
			fi_addr_t (*get_addr)(struct fi_peer_rx_entry *entry));
	void	(*free_entry)(struct fi_peer_rx_entry *entry);
};

/*
 * Implemented by the peer and installed before its fi_srx_context
 * returns.  start_*: a queued message now has a buffer; discard_*: drop
 * it without a completion.  Either way the entry goes back to the peer.
 */
struct fi_ops_srx_peer {
	size_t	size;
	int	(*start_msg)(struct fi_peer_rx_entry *entry);
	int	(*start_tag)(struct fi_peer_rx_entry *entry);
	int	(*discard_msg)(struct fi_peer_rx_entry *entry);
	int	(*discard_tag)(struct fi_peer_rx_entry *entry);
};

struct fid_peer_srx {
	struct fid_ep		ep_fid;
	struct fi_ops_srx_owner	*owner_ops;
	struct fi_ops_srx_peer	*peer_ops;
};

struct fi_peer_srx_context {
	size_t			size;
	struct fid_peer_srx	*srx;
};

/* ------------------------------------------------------------------ */
/* Peer transfers (fi_endpoint2 with FI_PEER_TRANSFER)                 */
/* ------------------------------------------------------------------ */

/* Filled in by the peer; the owner reports peer-initiated transfers. */
struct fi_ops_transfer_peer {
	size_t	size;
	ssize_t	(*complete)(struct fid_ep *ep, struct fi_cq_tagged_entry *buf,
			    fi_addr_t src_addr);
	ssize_t	(*comperr)(struct fid_ep *ep, struct fi_cq_err_entry *buf);
};

struct fi_peer_transfer_context {
	size_t				size;
	struct fi_info			*info;
	struct fid_ep			*ep;
	struct fi_ops_transfer_peer	*peer_ops;
};

#ifdef __cplusplus
}
#endif

#endif /* FI_PEER_H */
