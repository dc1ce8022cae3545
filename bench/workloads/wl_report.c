#include "wl_report.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void reserve(struct wl_buf *b, size_t extra) {
  if (b->len + extra + 1 <= b->cap)
    return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra + 1)
    cap *= 2;
  char *p = realloc(b->data, cap);
  if (!p)
    wl_die("out of memory");
  b->data = p;
  b->cap = cap;
}

void wl_buf_append(struct wl_buf *b, const char *s) {
  size_t n = strlen(s);
  reserve(b, n);
  memcpy(b->data + b->len, s, n + 1);
  b->len += n;
}

void wl_buf_printf(struct wl_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0)
    wl_die("vsnprintf failed");
  reserve(b, (size_t)n);
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void wl_buf_json_string(struct wl_buf *b, const char *s) {
  wl_buf_append(b, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p; ++p) {
    if (*p == '"' || *p == '\\')
      wl_buf_printf(b, "\\%c", *p);
    else if (*p < 0x20)
      wl_buf_printf(b, "\\u%04x", *p);
    else
      wl_buf_printf(b, "%c", *p);
  }
  wl_buf_append(b, "\"");
}

void wl_buf_json_num(struct wl_buf *b, double v) {
  if (isfinite(v))
    wl_buf_printf(b, "%.6g", v);
  else
    wl_buf_append(b, "null");
}

void wl_buf_free(struct wl_buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

void wl_report_init(struct wl_report *r, const char *workload) {
  memset(r, 0, sizeof *r);
  r->workload = workload;
}

void wl_report_fom(struct wl_report *r, const char *name, double value, const char *unit,
                   const char *direction, double delta) {
  if (!isfinite(value))
    wl_die("figure of merit %s is not a finite number", name);
  if (r->foms.len)
    wl_buf_append(&r->foms, ",");
  wl_buf_append(&r->foms, "{\"name\":");
  wl_buf_json_string(&r->foms, name);
  wl_buf_append(&r->foms, ",\"value\":");
  wl_buf_json_num(&r->foms, value);
  wl_buf_append(&r->foms, ",\"unit\":");
  wl_buf_json_string(&r->foms, unit);
  wl_buf_append(&r->foms, ",\"direction\":");
  wl_buf_json_string(&r->foms, direction);
  wl_buf_printf(&r->foms, ",\"delta\":%g}", delta);
}

static void info_key(struct wl_report *r, const char *key) {
  if (r->info.len)
    wl_buf_append(&r->info, ",");
  wl_buf_json_string(&r->info, key);
  wl_buf_append(&r->info, ":");
}

void wl_info_str(struct wl_report *r, const char *key, const char *value) {
  info_key(r, key);
  wl_buf_json_string(&r->info, value);
}

void wl_info_num(struct wl_report *r, const char *key, double value) {
  info_key(r, key);
  wl_buf_json_num(&r->info, value);
}

void wl_info_int(struct wl_report *r, const char *key, long long value) {
  info_key(r, key);
  wl_buf_printf(&r->info, "%lld", value);
}

void wl_info_bool(struct wl_report *r, const char *key, int value) {
  info_key(r, key);
  wl_buf_append(&r->info, value ? "true" : "false");
}

void wl_info_json(struct wl_report *r, const char *key, const char *json) {
  info_key(r, key);
  wl_buf_append(&r->info, json);
}

void wl_report_print(struct wl_report *r) {
  struct wl_buf line = {0};
  wl_buf_append(&line, "{\"workload\":");
  wl_buf_json_string(&line, r->workload);
  wl_buf_append(&line, ",\"foms\":[");
  if (r->foms.len)
    wl_buf_append(&line, r->foms.data);
  wl_buf_append(&line, "],\"info\":{");
  if (r->info.len)
    wl_buf_append(&line, r->info.data);
  wl_buf_append(&line, "}}\n");
  fputs(line.data, stdout);
  fflush(stdout);
  wl_buf_free(&line);
  wl_buf_free(&r->foms);
  wl_buf_free(&r->info);
}

void wl_skip(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("skip: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(WL_EXIT_SKIP);
}

void wl_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

double wl_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

long long wl_parse_size(const char *option, const char *text) {
  errno = 0;
  char *end = NULL;
  long long v = strtoll(text, &end, 10);
  if (errno || end == text || v < 0)
    wl_die("%s: '%s' is not a size", option, text);
  switch (toupper((unsigned char)*end)) {
  case 'K': v <<= 10; ++end; break;
  case 'M': v <<= 20; ++end; break;
  case 'G': v <<= 30; ++end; break;
  default: break;
  }
  if (*end == 'i' || *end == 'I')
    ++end;
  if (*end == 'B' || *end == 'b')
    ++end;
  if (*end)
    wl_die("%s: '%s' is not a size (a number with an optional K, M or G)", option, text);
  return v;
}

size_t wl_parse_size_list(const char *option, const char *text, long long **out) {
  char *copy = strdup(text);
  if (!copy)
    wl_die("out of memory");
  size_t n = 0, cap = 8;
  long long *v = malloc(cap * sizeof *v);
  if (!v)
    wl_die("out of memory");
  for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (n == cap) {
      cap *= 2;
      long long *p = realloc(v, cap * sizeof *v);
      if (!p)
        wl_die("out of memory");
      v = p;
    }
    v[n++] = wl_parse_size(option, tok);
  }
  free(copy);
  if (n == 0)
    wl_die("%s: empty list", option);
  *out = v;
  return n;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double wl_median(double *v, size_t n) {
  if (n == 0)
    return NAN;
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double wl_max(const double *v, size_t n) {
  double m = -INFINITY;
  for (size_t i = 0; i < n; ++i)
    m = v[i] > m ? v[i] : m;
  return m;
}

double wl_min(const double *v, size_t n) {
  double m = INFINITY;
  for (size_t i = 0; i < n; ++i)
    m = v[i] < m ? v[i] : m;
  return m;
}

void wl_size_label(char *out, size_t outlen, long long bytes) {
  if (bytes >= (1LL << 30) && bytes % (1LL << 30) == 0)
    snprintf(out, outlen, "%lldGiB", bytes >> 30);
  else if (bytes >= (1LL << 20) && bytes % (1LL << 20) == 0)
    snprintf(out, outlen, "%lldMiB", bytes >> 20);
  else if (bytes >= 1024 && bytes % 1024 == 0)
    snprintf(out, outlen, "%lldKiB", bytes >> 10);
  else
    snprintf(out, outlen, "%lldB", bytes);
}
