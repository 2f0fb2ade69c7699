/* SPDX-License-Identifier: MIT */
/* weft — fi_pingpong's out-of-band TCP control channel (wire format: see tools/fi_pingpong.c). */
#ifndef WEFT_TOOLS_PP_CTRL_H
#define WEFT_TOOLS_PP_CTRL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PP_CTRL_DEFAULT_PORT "47592"
#define PP_CTRL_IO_TIMEOUT_S 10        /* a silent peer on an open socket is an error */
#define PP_CTRL_ACCEPT_TIMEOUT_MS 60000 /* how long a server waits for its client */
#define PP_CTRL_MAX_NAME 4096

/* All functions print their own error line to stderr and return 0 or a negative errno. */

/* Server: listens on port (IPv6 wildcard with ipv6), accepts one client; *fd gets it. */
int pp_ctrl_accept(const char *port, bool ipv6, int *fd);

/* Client: connects to host:port, from src_port when it is not NULL. */
int pp_ctrl_connect(const char *host, const char *port, const char *src_port, bool ipv6, int *fd);

int pp_ctrl_send(int fd, const void *data, size_t len);
int pp_ctrl_recv(int fd, void *data, size_t len);

/* Endpoint name: u32 length (network order), u32 fi_addr_format (host order), bytes. */
int pp_ctrl_send_name(int fd, uint32_t format, const void *name, size_t len);
/* *name is malloc'ed; the caller frees it. */
int pp_ctrl_recv_name(int fd, uint32_t *format, void **name, size_t *len);

/* Per-size barrier: the client sends "q", the server answers "a". */
int pp_ctrl_sync(int fd, bool server);

/* After a size: the client reports own (its pong count) and needs "cnt ok" back;
 * the server returns the client's number in *peer and always acknowledges. */
int pp_ctrl_count(int fd, bool server, long own, long *peer);

#endif
