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
 * The parts: conf.c reads the configuration (a configuration it cannot parse goes to the
 * default socket, and the agent names the error), agent.c makes the call, buf.c builds it.
 *
 * Bounds: stdin up to 128 KiB (read within 10 s), the request up to 1 MiB (the agent's limit),
 * the answer up to 1 MiB.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eni-ipam-cni.h"

#define DEFAULT_TIMEOUT_S 10.0
#define MAX_TIMEOUT_S 600.0
#define STDIN_TIMEOUT_MS 10000
#define MAX_STDIN (128 * 1024)
/* Keep in step with SUPPORTED_VERSIONS in src/agent/cni.ts (a test compares them). */
#define VERSION_ANSWER "{\"cniVersion\":\"1.0.0\",\"supportedVersions\":[\"0.3.0\",\"0.3.1\",\"0.4.0\",\"1.0.0\",\"1.1.0\"]}\n"
static const char *const SUPPORTED[] = {"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"};

extern char **environ;

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
  /* Someone running it by hand: no agent call needed to say what is missing (the agent's words). */
  if (!command || !*command) return cni_error(4, "CNI_COMMAND is not set; the container runtime sets it for every CNI call");
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
