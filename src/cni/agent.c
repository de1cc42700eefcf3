/*
 * eni-ipam-cni: one call to the agent, POST /v1/cni over its unix socket, HTTP/1.1 with
 * "Connection: close". Every step (connect, send, receive) ends by the deadline. The answer's
 * body is what the plugin prints, its x-cni-exit-code header the code it exits with.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "eni-ipam-cni.h"

long long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int wait_fd(int fd, short events, long long deadline) {
  for (;;) {
    long long left = deadline - now_ms();
    if (left <= 0) return 0;
    struct pollfd p = {fd, events, 0};
    int r = poll(&p, 1, left > 60000 ? 60000 : (int)left);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r > 0) return 1;
  }
}

static int header_is(const char *line, size_t len, const char *name) {
  size_t n = strlen(name);
  return len > n && line[n] == ':' && !strncasecmp(line, name, n);
}

static enum outcome parse_answer(struct buf *in, struct answer *a) {
  char *headers_end = in->p ? strstr(in->p, "\r\n\r\n") : NULL;
  if (!headers_end || sscanf(in->p, "HTTP/1.%*d %d", &a->status) != 1) {
    snprintf(a->why, sizeof a->why, "the answer is not HTTP");
    return BAD_ANSWER;
  }
  long content_length = -1;
  a->exit_code = -1;
  for (char *line = strstr(in->p, "\r\n") + 2; line < headers_end + 2;) {
    char *eol = strstr(line, "\r\n");
    size_t len = (size_t)(eol - line);
    const char *v = memchr(line, ':', len);
    if (v) {
      v++;
      while (*v == ' ' || *v == '\t') v++;
      if (header_is(line, len, "content-length")) content_length = strtol(v, NULL, 10);
      if (header_is(line, len, "x-cni-exit-code")) a->exit_code = (int)strtol(v, NULL, 10);
      if (header_is(line, len, "transfer-encoding")) {
        snprintf(a->why, sizeof a->why, "the answer is chunked, which this plugin does not read");
        return BAD_ANSWER;
      }
    }
    line = eol + 2;
  }
  a->body = headers_end + 4;
  a->body_len = in->len - (size_t)(a->body - in->p);
  if (content_length >= 0) {
    if ((size_t)content_length > a->body_len) {
      snprintf(a->why, sizeof a->why, "the answer ended after %zu of its %ld bytes", a->body_len, content_length);
      return BAD_ANSWER;
    }
    a->body_len = (size_t)content_length;
  }
  return OK;
}

/* Whether what arrived so far is a complete answer (headers and content-length bytes). */
static int complete(struct buf *in) {
  char *h = in->p ? strstr(in->p, "\r\n\r\n") : NULL;
  if (!h) return 0;
  for (char *p = in->p; p < h; p++) {
    if ((p == in->p || p[-1] == '\n') && !strncasecmp(p, "content-length:", 15)) {
      long n = strtol(p + 15, NULL, 10);
      return in->len - (size_t)(h + 4 - in->p) >= (size_t)n;
    }
  }
  return 0;
}

enum outcome ask(const char *socket_path, struct buf *request, long long deadline, struct buf *in, struct answer *a) {
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, socket_path, strlen(socket_path) + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    snprintf(a->why, sizeof a->why, "socket: %s", strerror(errno));
    return UNREACHABLE;
  }
  /* A full backlog answers EAGAIN at once on unix sockets: retry until the deadline. */
  while (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN && now_ms() < deadline) {
      struct timespec pause = {0, 5 * 1000000};
      nanosleep(&pause, NULL);
      continue;
    }
    if (err == EINPROGRESS) {
      int r = wait_fd(fd, POLLOUT, deadline);
      socklen_t len = sizeof err;
      if (r == 1 && !getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) && err == 0) break;
      if (r == 0) err = EAGAIN;
    }
    snprintf(a->why, sizeof a->why, "%s", err == EAGAIN ? "its connection queue stayed full" : strerror(err));
    close(fd);
    return err == EAGAIN ? TIMED_OUT : UNREACHABLE;
  }
  for (size_t sent = 0; sent < request->len;) {
    int r = wait_fd(fd, POLLOUT, deadline);
    if (r <= 0) {
      if (r < 0) snprintf(a->why, sizeof a->why, "poll failed: %s", strerror(errno));
      close(fd);
      return r == 0 ? TIMED_OUT : UNREACHABLE;
    }
    ssize_t w = send(fd, request->p + sent, request->len - sent, MSG_NOSIGNAL);
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (w < 0) {
      snprintf(a->why, sizeof a->why, "sending failed: %s", strerror(errno));
      close(fd);
      return UNREACHABLE;
    }
    sent += (size_t)w;
  }
  char chunk[16384];
  while (!complete(in)) {
    int r = wait_fd(fd, POLLIN, deadline);
    if (r <= 0) {
      if (r < 0) snprintf(a->why, sizeof a->why, "poll failed: %s", strerror(errno));
      close(fd);
      return r == 0 ? TIMED_OUT : UNREACHABLE;
    }
    ssize_t got = read(fd, chunk, sizeof chunk);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got < 0) {
      snprintf(a->why, sizeof a->why, "reading failed: %s", strerror(errno));
      close(fd);
      return BAD_ANSWER;
    }
    if (got == 0) break;
    if (buf_add(in, chunk, (size_t)got)) {
      snprintf(a->why, sizeof a->why, "the answer exceeds %d bytes", MAX_MESSAGE);
      close(fd);
      return BAD_ANSWER;
    }
  }
  close(fd);
  if (in->len == 0) {
    /* An agent that stopped (or restarted) with the call in flight: the runtime may retry it. */
    snprintf(a->why, sizeof a->why, "it closed the connection without answering");
    return UNREACHABLE;
  }
  return parse_answer(in, a);
}

