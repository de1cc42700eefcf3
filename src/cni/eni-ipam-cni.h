/* Shared by the parts of eni-ipam-cni (see eni-ipam-cni.c). */
#ifndef ENI_IPAM_CNI_H
#define ENI_IPAM_CNI_H

#include <stddef.h>
#include <sys/un.h>

#define DEFAULT_SOCKET "/run/eni-ipam/agent.sock"
#define MAX_MESSAGE (1024 * 1024)

/* buf.c: a growable byte buffer with a hard limit; each returns -1 when it would pass it. */
struct buf {
  char *p;
  size_t len, cap, max;
};
int buf_add(struct buf *b, const char *s, size_t n);
int buf_str(struct buf *b, const char *s);
/* s as a JSON string: quotes, backslashes and control characters escaped; other bytes as they are. */
int buf_json(struct buf *b, const char *s, size_t n);

/* conf.c: what the plugin needs from the network configuration. */
struct conf {
  char socket[sizeof(((struct sockaddr_un *)0)->sun_path)];
  int socket_state; /* 0 absent, 1 found, -1 not a usable string */
  double timeout_s;
  int timeout_state; /* 0 absent, 1 found, -1 not a number */
  char version[16];
};
/* 0 when the text is a JSON object (trailing whitespace only), -1 otherwise. */
int read_conf(const char *text, size_t n, struct conf *c);

/* agent.c: one call to the agent's POST /v1/cni, within a deadline. */
long long now_ms(void);
/* Waits for events on fd until the deadline: 1 ready, 0 timed out, -1 error. */
int wait_fd(int fd, short events, long long deadline);
enum outcome { OK, UNREACHABLE, TIMED_OUT, BAD_ANSWER };
struct answer {
  int status, exit_code;
  const char *body;
  size_t body_len;
  char why[160];
};
enum outcome ask(const char *socket_path, struct buf *request, long long deadline, struct buf *in, struct answer *a);

#endif
