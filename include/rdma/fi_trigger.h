/* SPDX-License-Identifier: MIT */
/* weft — triggered operations and deferred work requests */

#ifndef FI_TRIGGER_H
#define FI_TRIGGER_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_atomic.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Triggered operations: FI_TRIGGER plus a triggered context           */
/* ------------------------------------------------------------------ */

/* Operation flag: the operation is triggered by a device (FI_XPU). */
#define FI_XPU_TRIGGER		(1ULL << 44)

enum fi_trigger_event {
	FI_TRIGGER_THRESHOLD,
	FI_TRIGGER_XPU
};

/* Start once cntr (successes plus errors) reaches threshold. */
struct fi_trigger_threshold {
	struct fid_cntr		*cntr;
	size_t			threshold;
};

/*
 * One location a device must write to start an XPU-triggered transfer.
 * count == 1: the value sits in the val* member matching datatype;
 * count > 1: datatype is FI_UINT8 and data holds count bytes.
 */
struct fi_trigger_var {
	enum fi_datatype	datatype;
	int			count;
	void			*addr;
	union {
		uint8_t		val8;
		uint16_t	val16;
		uint32_t	val32;
		uint64_t	val64;
		uint8_t		*data;
	} value;
};

/* In: the triggering device and var capacity; out: the vars to write. */
struct fi_trigger_xpu {
	int			count;
	enum fi_hmem_iface	iface;
	union {
		uint64_t	reserved;
		int		cuda;
		int		ze;
	} device;
	struct fi_trigger_var	*var;
};

/*
 * Passed as the operation context in place of fi_context / fi_context2,
 * whose sizes (32 and 64 bytes) these match.
 */
struct fi_triggered_context {
	enum fi_trigger_event	event_type;
	union {
		struct fi_trigger_threshold	threshold;
		struct fi_trigger_xpu		xpu;
		void				*internal[3];
	} trigger;
};

struct fi_triggered_context2 {
	enum fi_trigger_event	event_type;
	union {
		struct fi_trigger_threshold	threshold;
		struct fi_trigger_xpu		xpu;
		void				*internal[7];
	} trigger;
};

/* ------------------------------------------------------------------ */
/* Deferred work: queued on a domain with fi_control(FI_QUEUE_WORK)    */
/* ------------------------------------------------------------------ */

/*
 * The operation a deferred work request performs. fi_fabric(3) calls the
 * type enum fi_op_type (FI_TYPE_OP_TYPE); fi_trigger(3) writes enum
 * fi_trigger_op in struct fi_deferred_work. Both spellings name this one
 * type (a macro: C has no alias for an enum tag), in C and C++ alike.
 */
#define fi_trigger_op fi_op_type

enum fi_op_type {
	FI_OP_RECV,
	FI_OP_SEND,
	FI_OP_TRECV,
	FI_OP_TSEND,
	FI_OP_READ,
	FI_OP_WRITE,
	FI_OP_ATOMIC,
	FI_OP_FETCH_ATOMIC,
	FI_OP_COMPARE_ATOMIC,
	FI_OP_CNTR_SET,
	FI_OP_CNTR_ADD
};

/* fi_msg_fetch and fi_msg_compare come from fi_atomic.h. */

struct fi_op_msg {
	struct fid_ep		*ep;
	struct fi_msg		msg;
	uint64_t		flags;
};

struct fi_op_tagged {
	struct fid_ep		*ep;
	struct fi_msg_tagged	msg;
	uint64_t		flags;
};

struct fi_op_rma {
	struct fid_ep		*ep;
	struct fi_msg_rma	msg;
	uint64_t		flags;
};

struct fi_op_atomic {
	struct fid_ep		*ep;
	struct fi_msg_atomic	msg;
	uint64_t		flags;
};

struct fi_op_fetch_atomic {
	struct fid_ep		*ep;
	struct fi_msg_atomic	msg;
	struct fi_msg_fetch	fetch;
	uint64_t		flags;
};

struct fi_op_compare_atomic {
	struct fid_ep		*ep;
	struct fi_msg_atomic	msg;
	struct fi_msg_fetch	fetch;
	struct fi_msg_compare	compare;
	uint64_t		flags;
};

/* FI_OP_CNTR_SET / FI_OP_CNTR_ADD: value applied to cntr. */
struct fi_op_cntr {
	struct fid_cntr		*cntr;
	uint64_t		value;
};

/*
 * The request and the op it points to must stay valid until the work
 * completes or is cancelled (FI_CANCEL_WORK / FI_FLUSH_WORK).
 * completion_cntr must be NULL for counter operations.
 */
struct fi_deferred_work {
	struct fi_context2	context;
	uint64_t		threshold;
	struct fid_cntr		*triggering_cntr;
	struct fid_cntr		*completion_cntr;
	enum fi_op_type		op_type;
	union {
		struct fi_op_msg		*msg;
		struct fi_op_tagged		*tagged;
		struct fi_op_rma		*rma;
		struct fi_op_atomic		*atomic;
		struct fi_op_fetch_atomic	*fetch_atomic;
		struct fi_op_compare_atomic	*compare_atomic;
		struct fi_op_cntr		*cntr;
	} op;
};

#ifdef __cplusplus
}
#endif

#endif /* FI_TRIGGER_H */
