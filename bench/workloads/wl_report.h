/* The output contract every workload program keeps (bench/workloads/README.md):
 * success: one stdout line {"workload":..., "foms":[...], "info":{...}}, exit 0;
 * hardware or library absent: "skip: <reason>" on stderr, exit 77;
 * failure: a message on stderr, exit 1. */
#ifndef CTR_WL_REPORT_H
#define CTR_WL_REPORT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { WL_EXIT_SKIP = 77 };

/* A growable string; the report and the info object are built in these. */
struct wl_buf {
  char *data;
  size_t len, cap;
};

struct wl_report {
  const char *workload;
  struct wl_buf foms; /* comma-joined FOM objects */
  struct wl_buf info; /* comma-joined "key":value members */
};

void wl_report_init(struct wl_report *r, const char *workload);
/* direction: "higher" for rates, "lower" for times. */
void wl_report_fom(struct wl_report *r, const char *name, double value, const char *unit,
                   const char *direction, double delta);
void wl_info_str(struct wl_report *r, const char *key, const char *value);
void wl_info_num(struct wl_report *r, const char *key, double value);
void wl_info_int(struct wl_report *r, const char *key, long long value);
void wl_info_bool(struct wl_report *r, const char *key, int value);
/* value must already be valid JSON (an array or object built with wl_buf_*). */
void wl_info_json(struct wl_report *r, const char *key, const char *json);
/* Prints the one JSON line on stdout and frees the report. */
void wl_report_print(struct wl_report *r);

void wl_buf_append(struct wl_buf *b, const char *s);
void wl_buf_printf(struct wl_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void wl_buf_json_string(struct wl_buf *b, const char *s);
/* A finite double as JSON (NaN and infinities become null). */
void wl_buf_json_num(struct wl_buf *b, double v);
void wl_buf_free(struct wl_buf *b);

void wl_skip(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void wl_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

double wl_now(void); /* CLOCK_MONOTONIC, seconds */

/* "1024,2048,4k,1M" -> values (K/M/G suffixes are powers of 1024). Returns the count, or
 * dies naming the option on a malformed list. *out is malloc'd. */
size_t wl_parse_size_list(const char *option, const char *text, long long **out);
long long wl_parse_size(const char *option, const char *text);

/* Median and maximum of n values (the array is sorted in place). */
double wl_median(double *v, size_t n);
double wl_max(const double *v, size_t n);
double wl_min(const double *v, size_t n);

/* "8B", "64KiB", "1MiB": the size part of FOM names. */
void wl_size_label(char *out, size_t outlen, long long bytes);

#ifdef __cplusplus
}
#endif
#endif
