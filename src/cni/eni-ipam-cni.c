/*
 * eni-ipam-cni: the CNI IPAM plugin that container runtimes execute on the host.
 *
 * It only carries the call to the eni-ipam agent of the node, which implements the CNI
 * protocol (src/agent/cni.ts): it reads the network configuration from stdin and the CNI_*
 * variables, sends them to POST /v1/cni on the agent's unix socket, prints the body of the
 * answer and exits with the code in its x-cni-exit-code header. It answers VERSION itself (the
 * runtime asks without an agent), and prints a CNI error itself when the agent cannot be
 * asked: code 11 (try again later) when the socket is unreachable or the agent does not
 * answer within ipam.timeoutSeconds (default 10 s); code 50 for STATUS in those cases.
 *
 * Only libc, statically linked (scripts/build-cni.sh): nothing else is installed on the host.
 *
 * Reading the configuration: a small JSON parser (strings with every escape, \uXXXX and
 * surrogate pairs; numbers; nesting up to 64 levels) finds the top-level "cniVersion" and
 * "ipam": {"socket", "timeoutSeconds"}; duplicate keys take the last value, as in the agent.
 * A configuration it cannot parse goes to the default socket, and the agent names the error.
 *
 * Bounds: stdin up to 128 KiB (read within 10 s), the request up to 1 MiB (the agent's limit),
 * the answer up to 1 MiB.
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

#define DEFAULT_SOCKET "/run/eni-ipam/agent.sock"
#define DEFAULT_TIMEOUT_S 10.0
#define MAX_TIMEOUT_S 600.0
#define STDIN_TIMEOUT_MS 10000
#define MAX_STDIN (128 * 1024)
#define MAX_MESSAGE (1024 * 1024)
#define MAX_DEPTH 64
/* Keep in step with SUPPORTED_VERSIONS in src/agent/cni.ts (a test compares them). */
#define VERSION_ANSWER "{\"cniVersion\":\"1.0.0\",\"supportedVersions\":[\"0.3.0\",\"0.3.1\",\"0.4.0\",\"1.0.0\",\"1.1.0\"]}\n"
static const char *const SUPPORTED[] = {"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"};

extern char **environ;

/* ---- a growable byte buffer with a hard limit ---- */

struct buf {
  char *p;
  size_t len, cap, max;
};

static int buf_add(struct buf *b, const char *s, size_t n) {
  if (n > b->max - b->len) return -1;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
  return 0;
}

static int buf_str(struct buf *b, const char *s) { return buf_add(b, s, strlen(s)); }

/* s as a JSON string: quotes, backslashes and control characters escaped; other bytes as they are. */
static int buf_json(struct buf *b, const char *s, size_t n) {
  if (buf_add(b, "\"", 1)) return -1;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    char esc[8];
    if (c == '"' || c == '\\') {
      esc[0] = '\\';
      esc[1] = (char)c;
      if (buf_add(b, esc, 2)) return -1;
    } else if (c < 0x20 || c == 0x7f) {
      snprintf(esc, sizeof esc, "\\u%04x", c);
      if (buf_add(b, esc, 6)) return -1;
    } else if (buf_add(b, (const char *)&s[i], 1)) {
      return -1;
    }
  }
  return buf_add(b, "\"", 1);
}

/* ---- output ---- */

static void write_all(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

static char cni_version[16] = "1.0.0";

/* Prints a CNI error object and returns the exit code (1). */
static int cni_error(int code, const char *msg) {
  struct buf b = {0, 0, 0, 64 * 1024};
  char head[64];
  snprintf(head, sizeof head, "{\"cniVersion\":\"%s\",\"code\":%d,\"msg\":", cni_version, code);
  if (buf_str(&b, head) || buf_json(&b, msg, strlen(msg)) || buf_str(&b, "}\n")) {
    static const char fallback[] = "{\"cniVersion\":\"1.0.0\",\"code\":5,\"msg\":\"eni-ipam-cni: out of memory\"}\n";
    write_all(1, fallback, sizeof fallback - 1);
  } else {
    write_all(1, b.p, b.len);
  }
  free(b.p);
  return 1;
}

/* ---- time ---- */

static long long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Waits for events on fd until the deadline: 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, long long deadline) {
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

/* ---- the configuration: a minimal JSON reader ---- */

struct conf {
  char socket[sizeof(((struct sockaddr_un *)0)->sun_path)];
  int socket_state; /* 0 absent, 1 found, -1 not a usable string */
  double timeout_s;
  int timeout_state; /* 0 absent, 1 found, -1 not a number */
  char version[16];
};

static const char *ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

static int hex4(const char *p, const char *end, unsigned *out) {
  if (end - p < 4) return -1;
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else return -1;
  }
  *out = v;
  return 0;
}

/*
 * A string at p (after ws): decoded into out (NUL-terminated; *fits = 0 when it is longer than
 * cap - 1 or holds a NUL). Returns the position after it, or NULL when it is not a valid string.
 */
static const char *string(const char *p, const char *end, char *out, size_t cap, int *fits) {
  size_t n = 0;
  int ok = 1;
  if (p >= end || *p != '"') return NULL;
  for (p++; p < end; p++) {
    unsigned char c = (unsigned char)*p;
    char u[4];
    size_t un = 0;
    if (c == '"') {
      if (out && cap) out[n < cap ? n : cap - 1] = '\0';
      if (fits) *fits = ok;
      return p + 1;
    }
    if (c < 0x20) return NULL;
    if (c != '\\') {
      u[0] = (char)c;
      un = 1;
    } else {
      if (++p >= end) return NULL;
      switch (*p) {
      case '"': case '\\': case '/': u[0] = *p; un = 1; break;
      case 'b': u[0] = '\b'; un = 1; break;
      case 'f': u[0] = '\f'; un = 1; break;
      case 'n': u[0] = '\n'; un = 1; break;
      case 'r': u[0] = '\r'; un = 1; break;
      case 't': u[0] = '\t'; un = 1; break;
      case 'u': {
        unsigned cp, lo;
        if (hex4(p + 1, end, &cp)) return NULL;
        p += 4;
        if (cp >= 0xd800 && cp <= 0xdbff && end - p >= 7 && p[1] == '\\' && p[2] == 'u' && !hex4(p + 3, end, &lo) && lo >= 0xdc00 && lo <= 0xdfff) {
          cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          p += 6;
        } else if (cp >= 0xd800 && cp <= 0xdfff) {
          cp = 0xfffd; /* a lone surrogate, as JSON.parse then UTF-8 encoding gives */
        }
        if (cp == 0) ok = 0;
        if (cp < 0x80) { u[0] = (char)cp; un = 1; }
        else if (cp < 0x800) { u[0] = (char)(0xc0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 0x3f)); un = 2; }
        else if (cp < 0x10000) { u[0] = (char)(0xe0 | (cp >> 12)); u[1] = (char)(0x80 | ((cp >> 6) & 0x3f)); u[2] = (char)(0x80 | (cp & 0x3f)); un = 3; }
        else { u[0] = (char)(0xf0 | (cp >> 18)); u[1] = (char)(0x80 | ((cp >> 12) & 0x3f)); u[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); u[3] = (char)(0x80 | (cp & 0x3f)); un = 4; }
        break;
      }
      default:
        return NULL;
      }
    }
    for (size_t i = 0; i < un; i++) {
      if (out && n + 1 < cap) out[n] = u[i];
      else ok = 0;
      n++;
    }
  }
  return NULL;
}

static const char *number(const char *p, const char *end, double *out) {
  const char *s = p;
  if (p < end && *p == '-') p++;
  if (p >= end || *p < '0' || *p > '9') return NULL;
  if (*p == '0') p++;
  else while (p < end && *p >= '0' && *p <= '9') p++;
  if (p < end && *p == '.') {
    if (++p >= end || *p < '0' || *p > '9') return NULL;
    while (p < end && *p >= '0' && *p <= '9') p++;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    p++;
    if (p < end && (*p == '+' || *p == '-')) p++;
    if (p >= end || *p < '0' || *p > '9') return NULL;
    while (p < end && *p >= '0' && *p <= '9') p++;
  }
  if (out) {
    char tmp[64];
    size_t n = (size_t)(p - s) < sizeof tmp - 1 ? (size_t)(p - s) : sizeof tmp - 1;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    *out = strtod(tmp, NULL);
  }
  return p;
}

static const char *value(const char *p, const char *end, int depth);

/*
 * An object at p. For each member, on_member(key, position of its value) either reads the
 * value and returns the position after it, or returns NULL to have it skipped.
 */
typedef const char *(*member_fn)(const char *key, const char *p, const char *end, int depth, struct conf *c);

static const char *object(const char *p, const char *end, int depth, member_fn on_member, struct conf *c) {
  if (depth > MAX_DEPTH || p >= end || *p != '{') return NULL;
  p = ws(p + 1, end);
  if (p < end && *p == '}') return p + 1;
  for (;;) {
    char key[32];
    int fits;
    p = string(ws(p, end), end, key, sizeof key, &fits);
    if (!p) return NULL;
    p = ws(p, end);
    if (p >= end || *p != ':') return NULL;
    p = ws(p + 1, end);
    const char *after = on_member && fits ? on_member(key, p, end, depth, c) : NULL;
    p = after ? after : value(p, end, depth + 1);
    if (!p) return NULL;
    p = ws(p, end);
    if (p < end && *p == ',') { p++; continue; }
    if (p < end && *p == '}') return p + 1;
    return NULL;
  }
}

static const char *value(const char *p, const char *end, int depth) {
  if (depth > MAX_DEPTH) return NULL;
  p = ws(p, end);
  if (p >= end) return NULL;
  if (*p == '{') return object(p, end, depth, NULL, NULL);
  if (*p == '"') return string(p, end, NULL, 0, NULL);
  if (*p == '[') {
    p = ws(p + 1, end);
    if (p < end && *p == ']') return p + 1;
    for (;;) {
      p = value(p, end, depth + 1);
      if (!p) return NULL;
      p = ws(p, end);
      if (p < end && *p == ',') { p++; continue; }
      if (p < end && *p == ']') return p + 1;
      return NULL;
    }
  }
  static const char *const words[] = {"true", "false", "null"};
  for (int i = 0; i < 3; i++) {
    size_t n = strlen(words[i]);
    if ((size_t)(end - p) >= n && !memcmp(p, words[i], n)) return p + n;
  }
  return number(p, end, NULL);
}

static const char *ipam_member(const char *key, const char *p, const char *end, int depth, struct conf *c) {
  (void)depth;
  if (!strcmp(key, "socket")) {
    int fits;
    const char *after = string(p, end, c->socket, sizeof c->socket, &fits);
    c->socket_state = after && fits && c->socket[0] ? 1 : -1;
    return after;
  }
  if (!strcmp(key, "timeoutSeconds")) {
    const char *after = number(p, end, &c->timeout_s);
    c->timeout_state = after ? 1 : -1;
    return after;
  }
  return NULL;
}

static const char *top_member(const char *key, const char *p, const char *end, int depth, struct conf *c) {
  if (!strcmp(key, "ipam")) {
    c->socket_state = c->timeout_state = 0;
    if (p < end && *p == '{') return object(p, end, depth + 1, ipam_member, c);
    return NULL;
  }
  if (!strcmp(key, "cniVersion")) {
    int fits;
    const char *after = string(p, end, c->version, sizeof c->version, &fits);
    if (!after || !fits) c->version[0] = '\0';
    return after;
  }
  return NULL;
}

/* Reads the configuration; 0 when it is a JSON object (trailing whitespace only), -1 otherwise. */
static int read_conf(const char *text, size_t n, struct conf *c) {
  const char *end = text + n;
  const char *p = object(ws(text, end), end, 0, top_member, c);
  return p && ws(p, end) == end ? 0 : -1;
}

/* ---- talking to the agent ---- */

enum outcome { OK, UNREACHABLE, TIMED_OUT, BAD_ANSWER };

struct answer {
  int status, exit_code;
  const char *body;
  size_t body_len;
  char why[160];
};

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

static enum outcome ask(const char *socket_path, struct buf *request, long long deadline, struct buf *in, struct answer *a) {
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

/* ---- main ---- */

static int read_stdin(struct buf *in) {
  if (isatty(0)) return 0; /* run by hand: no configuration to wait for */
  long long deadline = now_ms() + STDIN_TIMEOUT_MS;
  char chunk[16384];
  for (;;) {
    if (wait_fd(0, POLLIN, deadline) <= 0) return -1;
    ssize_t got = read(0, chunk, sizeof chunk);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got < 0 && errno == EBADF) return 0; /* no stdin at all: an empty configuration */
    if (got < 0) return -1;
    if (got == 0) return 0;
    if (buf_add(in, chunk, (size_t)got)) return -2;
  }
}

int main(void) {
  const char *command = getenv("CNI_COMMAND");
  struct buf conf_text = {0, 0, 0, MAX_STDIN};
  char msg[512];
  int rs = read_stdin(&conf_text);
  if (command && !strcmp(command, "VERSION")) {
    write_all(1, VERSION_ANSWER, sizeof VERSION_ANSWER - 1);
    return 0;
  }
  if (rs == -2) return cni_error(5, "the network configuration on stdin exceeds 128 KiB");
  if (rs < 0) return cni_error(5, "cannot read the network configuration from stdin (it must be closed within 10 s)");

  struct conf c = {DEFAULT_SOCKET, 0, DEFAULT_TIMEOUT_S, 0, ""};
  int parsed = conf_text.p ? read_conf(conf_text.p, conf_text.len, &c) : -1;
  for (size_t i = 0; i < sizeof SUPPORTED / sizeof *SUPPORTED; i++)
    if (!strcmp(c.version, SUPPORTED[i])) snprintf(cni_version, sizeof cni_version, "%s", c.version);
  if (parsed == 0 && c.socket_state < 0)
    return cni_error(7, "ipam.socket must be the path of the eni-ipam agent socket (at most 107 bytes), e.g. " DEFAULT_SOCKET);
  if (parsed == 0 && (c.timeout_state < 0 || (c.timeout_state > 0 && !(c.timeout_s > 0 && c.timeout_s <= MAX_TIMEOUT_S))))
    return cni_error(7, "ipam.timeoutSeconds must be a number of seconds above 0 and at most 600");
  if (parsed != 0 || c.socket_state == 0) snprintf(c.socket, sizeof c.socket, "%s", DEFAULT_SOCKET);
  if (parsed != 0 || c.timeout_state == 0) c.timeout_s = DEFAULT_TIMEOUT_S;

  /* {"env":{"CNI_...":"..."},"stdin":"..."} */
  struct buf body = {0, 0, 0, MAX_MESSAGE};
  int failed = buf_str(&body, "{\"env\":{");
  int first = 1;
  for (char **e = environ; *e && !failed; e++) {
    const char *eq = strchr(*e, '=');
    if (strncmp(*e, "CNI_", 4) || !eq) continue;
    failed = (!first && buf_str(&body, ",")) || buf_json(&body, *e, (size_t)(eq - *e)) || buf_str(&body, ":") || buf_json(&body, eq + 1, strlen(eq + 1));
    first = 0;
  }
  failed = failed || buf_str(&body, "},\"stdin\":") || buf_json(&body, conf_text.p ? conf_text.p : "", conf_text.len) || buf_str(&body, "}");
  struct buf request = {0, 0, 0, MAX_MESSAGE + 256};
  char head[256];
  snprintf(head, sizeof head, "POST /v1/cni HTTP/1.1\r\nHost: eni-ipam-agent\r\nContent-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", body.len);
  failed = failed || buf_str(&request, head) || buf_add(&request, body.p, body.len);
  if (failed) return cni_error(5, "the CNI request (environment and configuration) exceeds 1 MiB");

  struct buf in = {0, 0, 0, MAX_MESSAGE + 4096};
  struct answer a;
  memset(&a, 0, sizeof a);
  long long deadline = now_ms() + (long long)(c.timeout_s * 1000);
  enum outcome o = ask(c.socket, &request, deadline, &in, &a);
  int status = command && !strcmp(command, "STATUS");
  if (o == UNREACHABLE) {
    snprintf(msg, sizeof msg, "cannot reach the eni-ipam agent at %s (%s); %s", c.socket, a.why, status ? "is the agent running on this node?" : "try again later: is the agent running on this node?");
    return cni_error(status ? 50 : 11, msg);
  }
  if (o == TIMED_OUT) {
    snprintf(msg, sizeof msg, "the eni-ipam agent at %s did not answer within %g s (ipam.timeoutSeconds)%s", c.socket, c.timeout_s, status ? "" : "; try again later");
    return cni_error(status ? 50 : 11, msg);
  }
  if (o == BAD_ANSWER || a.status != 200 || a.exit_code < 0 || a.exit_code > 255) {
    int shown = a.body_len > 200 ? 200 : (int)a.body_len;
    if (o == BAD_ANSWER) snprintf(msg, sizeof msg, "the eni-ipam agent at %s answered something unreadable: %s", c.socket, a.why);
    else snprintf(msg, sizeof msg, "the eni-ipam agent at %s refused the request: HTTP %d %.*s", c.socket, a.status, shown, a.body ? a.body : "");
    return cni_error(5, msg);
  }
  write_all(1, a.body, a.body_len);
  return a.exit_code;
}
