/* SPDX-License-Identifier: MIT */
/* weft — fi_pingpong's out-of-band TCP control channel: sockets, name framing, sync and counts. */
#include "pp_ctrl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PP_COUNT_LEN 10 /* decimal count, NUL padded */

static int ctrl_error(int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("[error] ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return -err;
}

static void set_io_timeouts(int fd) {
  struct timeval tv = {.tv_sec = PP_CTRL_IO_TIMEOUT_S, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static int parse_port(const char *s, uint16_t *port) {
  char *end;
  unsigned long v = strtoul(s, &end, 10);
  if (!*s || *end || v > 65535) return ctrl_error(EINVAL, "invalid port \"%s\"", s);
  *port = (uint16_t)v;
  return 0;
}

int pp_ctrl_accept(const char *port, bool ipv6, int *fd) {
  struct sockaddr_storage ss;
  socklen_t len;
  uint16_t p;
  int one = 1, ls, ret = parse_port(port, &p);
  if (ret) return ret;
  memset(&ss, 0, sizeof ss);
  if (ipv6) {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    s6->sin6_family = AF_INET6;
    s6->sin6_addr = in6addr_any;
    s6->sin6_port = htons(p);
    len = sizeof *s6;
  } else {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    s4->sin_family = AF_INET;
    s4->sin_addr.s_addr = htonl(INADDR_ANY);
    s4->sin_port = htons(p);
    len = sizeof *s4;
  }
  ls = socket(ss.ss_family, SOCK_STREAM, 0);
  if (ls < 0) return ctrl_error(errno, "socket: %s", strerror(errno));
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(ls, (struct sockaddr *)&ss, len) || listen(ls, 10)) {
    int e = errno;
    close(ls);
    return ctrl_error(e, "cannot listen on port %s: %s", port, strerror(e));
  }
  struct pollfd pfd = {.fd = ls, .events = POLLIN};
  if (poll(&pfd, 1, PP_CTRL_ACCEPT_TIMEOUT_MS) <= 0) {
    close(ls);
    return ctrl_error(ETIMEDOUT, "no client connected within %d s", PP_CTRL_ACCEPT_TIMEOUT_MS / 1000);
  }
  *fd = accept(ls, NULL, NULL);
  ret = *fd < 0 ? ctrl_error(errno, "accept: %s", strerror(errno)) : 0;
  close(ls);
  if (!ret) set_io_timeouts(*fd);
  return ret;
}

/* Binds fd to the wildcard address with port src_port. */
static int bind_source(int fd, int family, const char *src_port) {
  struct addrinfo hints = {0}, *src;
  int one = 1, ret;
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (getaddrinfo(NULL, src_port, &hints, &src)) return EINVAL;
  ret = bind(fd, src->ai_addr, src->ai_addrlen) ? errno : 0;
  freeaddrinfo(src);
  return ret;
}

int pp_ctrl_connect(const char *host, const char *port, const char *src_port, bool ipv6, int *fd) {
  struct addrinfo hints = {0}, *res, *ai;
  int s = -1, err = ECONNREFUSED, r;
  hints.ai_family = ipv6 ? AF_INET6 : AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  r = getaddrinfo(host, port, &hints, &res);
  if (r) return ctrl_error(EADDRNOTAVAIL, "cannot resolve %s: %s", host, gai_strerror(r));
  for (ai = res; ai; ai = ai->ai_next) {
    s = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (s < 0) { err = errno; continue; }
    if (src_port && (err = bind_source(s, ai->ai_family, src_port))) {
      close(s);
      s = -1;
      continue;
    }
    if (!connect(s, ai->ai_addr, ai->ai_addrlen)) break;
    err = errno;
    close(s);
    s = -1;
  }
  freeaddrinfo(res);
  if (s < 0) return ctrl_error(err, "failed to connect: %s", strerror(err));
  set_io_timeouts(s);
  *fd = s;
  return 0;
}

int pp_ctrl_send(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ctrl_error(ECONNABORTED, "ctrl/send: %s", strerror(errno));
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int pp_ctrl_recv(int fd, void *data, size_t len) {
  char *p = data;
  while (len) {
    ssize_t n = recv(fd, p, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return ctrl_error(ETIMEDOUT, "ctrl/recv: peer silent for %d s", PP_CTRL_IO_TIMEOUT_S);
    if (n <= 0) return ctrl_error(ECONNABORTED, "ctrl/recv: no data or remote connection closed");
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int pp_ctrl_send_name(int fd, uint32_t format, const void *name, size_t len) {
  uint32_t wire_len = htonl((uint32_t)len);
  int ret = pp_ctrl_send(fd, &wire_len, sizeof wire_len);
  if (!ret) ret = pp_ctrl_send(fd, &format, sizeof format);
  if (!ret) ret = pp_ctrl_send(fd, name, len);
  return ret;
}

int pp_ctrl_recv_name(int fd, uint32_t *format, void **name, size_t *len) {
  uint32_t wire_len;
  int ret = pp_ctrl_recv(fd, &wire_len, sizeof wire_len);
  if (!ret) ret = pp_ctrl_recv(fd, format, sizeof *format);
  if (ret) return ret;
  *len = ntohl(wire_len);
  if (!*len || *len > PP_CTRL_MAX_NAME) return ctrl_error(EPROTO, "peer sent a name of %zu bytes", *len);
  *name = malloc(*len);
  if (!*name) return -ENOMEM;
  ret = pp_ctrl_recv(fd, *name, *len);
  if (ret) {
    free(*name);
    *name = NULL;
  }
  return ret;
}

int pp_ctrl_sync(int fd, bool server) {
  char msg[2];
  int ret;
  if (server) {
    if ((ret = pp_ctrl_recv(fd, msg, 2))) return ret;
    if (msg[0] != 'q') return ctrl_error(EPROTO, "bad sync message from client");
    return pp_ctrl_send(fd, "a", 2);
  }
  if ((ret = pp_ctrl_send(fd, "q", 2)) || (ret = pp_ctrl_recv(fd, msg, 2))) return ret;
  return msg[0] == 'a' ? 0 : ctrl_error(EPROTO, "bad sync message from server");
}

int pp_ctrl_count(int fd, bool server, long own, long *peer) {
  char msg[PP_COUNT_LEN + 1];
  int ret;
  if (server) {
    if ((ret = pp_ctrl_recv(fd, msg, PP_COUNT_LEN))) return ret;
    msg[PP_COUNT_LEN] = '\0';
    *peer = strtol(msg, NULL, 10);
    return pp_ctrl_send(fd, "cnt ok", 7);
  }
  char digits[24];
  snprintf(digits, sizeof digits, "%ld", own);
  if (strlen(digits) >= PP_COUNT_LEN) return ctrl_error(EOVERFLOW, "count %ld too long", own);
  memset(msg, 0, sizeof msg);
  memcpy(msg, digits, strlen(digits));
  if ((ret = pp_ctrl_send(fd, msg, PP_COUNT_LEN)) || (ret = pp_ctrl_recv(fd, msg, 7))) return ret;
  if (memcmp(msg, "cnt ok", 7)) return ctrl_error(EPROTO, "server did not acknowledge the count");
  *peer = own;
  return 0;
}
