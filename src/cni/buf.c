/* eni-ipam-cni: a bounded byte buffer, and JSON strings written into it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eni-ipam-cni.h"

int buf_add(struct buf *b, const char *s, size_t n) {
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

int buf_str(struct buf *b, const char *s) { return buf_add(b, s, strlen(s)); }

int buf_json(struct buf *b, const char *s, size_t n) {
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

