/*
 * eni-ipam-cni: reads the network configuration with a small JSON parser (strings with every
 * escape, \uXXXX and surrogate pairs; numbers; nesting up to 64 levels) to find the top-level
 * "cniVersion" and "ipam": {"socket", "timeoutSeconds"}. Duplicate keys take the last value, as
 * JSON.parse in the agent does.
 */
#include <stdlib.h>
#include <string.h>

#include "eni-ipam-cni.h"

#define MAX_DEPTH 64

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

int read_conf(const char *text, size_t n, struct conf *c) {
  const char *end = text + n;
  const char *p = object(ws(text, end), end, 0, top_member, c);
  return p && ws(p, end) == end ? 0 : -1;
}

