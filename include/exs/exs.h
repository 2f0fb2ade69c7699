/* SPDX-License-Identifier: MIT */
/*
 * weft's Extended Sockets library (libexs): the Open Group's ES-API model
 * (asynchronous, zero-copy sockets with event queues and explicit memory
 * registration) over the libfabric API of libfabric.so.1.
 *
 * Written from the ES-API's published descriptions and UNH EXS's slides; the
 * choices the ES-API leaves open are in docs/decisions.md ("Extended
 * sockets") and in the manual pages (man/exs.7 and the pages it lists).
 *
 * Every function returns -1 (or EXS_QHANDLE_INVALID / EXS_MHANDLE_INVALID)
 * and sets errno on failure, as the POSIX socket calls do.
 */
#ifndef EXS_EXS_H
#define EXS_EXS_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- versions ---- */
typedef unsigned int exs_version_t;
#define EXS_VERSION(major, minor) ((exs_version_t)(((major) << 16) | (minor)))
#define EXS_VERSION_MAJOR(v) ((unsigned)(v) >> 16)
#define EXS_VERSION_MINOR(v) ((unsigned)(v) & 0xffffu)
#define EXS_VERSION1 EXS_VERSION(1, 0)

/* Returns `requested` when this library implements it, otherwise the version
 * it prefers (the caller may continue only if it accepts that one). */
exs_version_t exs_init(exs_version_t requested);

/* ---- handles ---- */
typedef int exs_qhandle_t;      /* event queue */
typedef uint64_t exs_mhandle_t; /* registered memory */
#define EXS_QHANDLE_INVALID ((exs_qhandle_t)-1)
#define EXS_MHANDLE_INVALID ((exs_mhandle_t)0)

/* ---- events ---- */
typedef enum exs_evt_type {
  EXS_EVT_NONE = 0,
  EXS_EVT_SEND = 1,    /* exs_send / exs_sendv finished */
  EXS_EVT_RECV = 2,    /* exs_recv / exs_recvv finished */
  EXS_EVT_ACCEPT = 3,  /* exs_accept: a new connected socket */
  EXS_EVT_CONNECT = 4, /* exs_connect finished */
} exs_evt_type_t;

/* exs_evt_flags of an EXS_EVT_RECV event */
#define EXS_EVT_FLAG_TRUNC 0x1 /* SOCK_SEQPACKET: the message was longer than the buffer */
#define EXS_EVT_FLAG_EOF 0x2   /* the peer shut its side down in order: no more data */

typedef struct exs_event {
  exs_evt_type_t exs_evt_type;
  int exs_evt_errno;     /* 0, or why the operation failed */
  int exs_evt_fd;        /* the socket the operation was posted on */
  int exs_evt_flags;     /* EXS_EVT_FLAG_* */
  ssize_t exs_evt_bytes; /* bytes sent or received */
  void *exs_evt_context; /* the caller's context */
  union {
    struct {
      int fd; /* the accepted socket */
      socklen_t addrlen;
      struct sockaddr_storage addr; /* its peer */
    } accept;
  } exs_evt_u;
} exs_event_t;

/* The descriptor of the socket an EXS_EVT_ACCEPT event made. */
#define EXS_EVT_NEW_SOCKET(ev) ((ev).exs_evt_u.accept.fd)

/* ---- event queues ---- */
exs_qhandle_t exs_qcreate(int depth);
int exs_qdelete(exs_qhandle_t qh);
/* Waits for at least one event (timeout NULL: for ever; {0, 0}: not at
 * all) and returns how many it stored (at most nevents), 0 on timeout. */
int exs_qdequeue(exs_qhandle_t qh, exs_event_t *events, int nevents,
                 const struct timespec *timeout);

/* ---- memory ---- */
#define EXS_ACCESS_READ 0x1  /* the region may be sent from */
#define EXS_ACCESS_WRITE 0x2 /* the region may be received into */
exs_mhandle_t exs_mregister(const void *addr, size_t len, int access);
int exs_mderegister(exs_mhandle_t *mh);

/* ---- sockets ---- */
int exs_socket(int domain, int type, int protocol);
int exs_bind(int fd, const struct sockaddr *addr, socklen_t addrlen);
int exs_listen(int fd, int backlog);
int exs_accept(int fd, int flags, exs_qhandle_t qh, void *context);
int exs_connect(int fd, const struct sockaddr *addr, socklen_t addrlen, int flags,
                exs_qhandle_t qh, void *context);
int exs_shutdown(int fd, int how);
int exs_close(int fd);
int exs_getsockname(int fd, struct sockaddr *addr, socklen_t *addrlen);
int exs_getpeername(int fd, struct sockaddr *addr, socklen_t *addrlen);

/* ---- data transfer: post, complete on qh ---- */
ssize_t exs_send(int fd, const void *buf, size_t len, int flags, exs_mhandle_t mh,
                 exs_qhandle_t qh, void *context);
ssize_t exs_sendv(int fd, const struct iovec *iov, int iovcnt, int flags,
                  const exs_mhandle_t *mh, exs_qhandle_t qh, void *context);
ssize_t exs_recv(int fd, void *buf, size_t len, int flags, exs_mhandle_t mh,
                 exs_qhandle_t qh, void *context);
ssize_t exs_recvv(int fd, const struct iovec *iov, int iovcnt, int flags,
                  const exs_mhandle_t *mh, exs_qhandle_t qh, void *context);
#define EXS_IOV_MAX 16

/* Cancels the outstanding operation of fd posted with `context`: it
 * completes on its queue with ECANCELED (unless it finishes first). */
int exs_cancel(int fd, void *context);

/* ---- options ---- */
#define EXS_SOL_EXS 0x4558 /* level of weft's own options */
#define EXS_SO_PROVIDER 1  /* char[]: the libfabric provider (before bind/listen/connect) */
#define EXS_SO_FABRIC 2    /* char[], read only: the fabric name in use */
#define EXS_SO_DOMAIN 3    /* char[], read only: the domain name in use */
#define EXS_SO_STREAM_BUFS 4 /* int: SOCK_STREAM receive buffers (before connecting) */
#define EXS_SO_STREAM_CHUNK 5 /* int: bytes per SOCK_STREAM buffer (before connecting) */
int exs_setsockopt(int fd, int level, int name, const void *val, socklen_t len);
int exs_getsockopt(int fd, int level, int name, void *val, socklen_t *len);

/* ---- readiness ---- */
int exs_poll(struct pollfd *fds, nfds_t nfds, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif /* EXS_EXS_H */
