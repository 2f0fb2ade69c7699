/* SPDX-License-Identifier: MIT */
/* weft — fabric error codes (FI_E*) and fi_strerror */

#ifndef WEFT_RDMA_FI_ERRNO_H
#define WEFT_RDMA_FI_ERRNO_H

#include <errno.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Calls return 0 on success and a negated code on failure (-FI_EAGAIN, ...).
 * Codes below FI_ERRNO_OFFSET are the platform's errno values, so a
 * provider can pass a failed system call's errno straight through.
 */
#define FI_SUCCESS		0

#define FI_EPERM		EPERM
#define FI_ENOENT		ENOENT
#define FI_EINTR		EINTR
#define FI_EIO			EIO
#define FI_E2BIG		E2BIG
#define FI_EBADF		EBADF
#define FI_EAGAIN		EAGAIN
#define FI_ENOMEM		ENOMEM
#define FI_EACCES		EACCES
#define FI_EFAULT		EFAULT
#define FI_EBUSY		EBUSY
#define FI_ENODEV		ENODEV
#define FI_EINVAL		EINVAL
#define FI_EMFILE		EMFILE
#define FI_ENOSPC		ENOSPC
#define FI_ENOSYS		ENOSYS
#define FI_EWOULDBLOCK		EWOULDBLOCK
#define FI_ENOMSG		ENOMSG
#define FI_ENODATA		ENODATA
#define FI_EOVERFLOW		EOVERFLOW
#define FI_EMSGSIZE		EMSGSIZE
#define FI_ENOPROTOOPT		ENOPROTOOPT
#define FI_EOPNOTSUPP		EOPNOTSUPP
#define FI_EADDRINUSE		EADDRINUSE
#define FI_EADDRNOTAVAIL	EADDRNOTAVAIL
#define FI_ENETDOWN		ENETDOWN
#define FI_ENETUNREACH		ENETUNREACH
#define FI_ECONNABORTED		ECONNABORTED
#define FI_ECONNRESET		ECONNRESET
#define FI_ENOBUFS		ENOBUFS
#define FI_EISCONN		EISCONN
#define FI_ENOTCONN		ENOTCONN
#define FI_ESHUTDOWN		ESHUTDOWN
#define FI_ETIMEDOUT		ETIMEDOUT
#define FI_ECONNREFUSED		ECONNREFUSED
#define FI_EHOSTDOWN		EHOSTDOWN
#define FI_EHOSTUNREACH		EHOSTUNREACH
#define FI_EALREADY		EALREADY
#define FI_EINPROGRESS		EINPROGRESS
#define FI_EREMOTEIO		EREMOTEIO
#define FI_ECANCELED		ECANCELED
#define FI_EKEYREJECTED		EKEYREJECTED
#define FI_EPROTO		EPROTO		/* API 2.x */

/* Fabric-specific codes start here, clear of every errno value. */
#define FI_ERRNO_OFFSET		256

/* The numbering is ABI: values are fixed by position from FI_ERRNO_OFFSET. */
enum {
	FI_EOTHER = FI_ERRNO_OFFSET,	/* 256: unspecified error */
	FI_ETOOSMALL,			/* 257: caller's buffer too small */
	FI_EOPBADSTATE,			/* 258: not allowed in this state */
	FI_EAVAIL,			/* 259: error entry waiting to be read */
	FI_EBADFLAGS,			/* 260: flags not supported */
	FI_ENOEQ,			/* 261: no (usable) event queue */
	FI_EDOMAIN,			/* 262: wrong resource domain */
	FI_ENOCQ,			/* 263: no (usable) completion queue */
	FI_ECRC,			/* 264: checksum mismatch */
	FI_ETRUNC,			/* 265: data truncated */
	FI_ENOKEY,			/* 266: required key not available */
	FI_ENOAV,			/* 267: no (usable) address vector */
	FI_EOVERRUN,			/* 268: queue overrun */
	FI_ENORX,			/* 269: no receive buffer posted */
	FI_ENOMR,			/* 270: registration limit reached */
	FI_ERRNO_MAX
};

/*
 * Text for an FI_E* code; accepts the code with either sign. The string is
 * static and must not be freed.
 */
const char *fi_strerror(int errnum);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_RDMA_FI_ERRNO_H */
