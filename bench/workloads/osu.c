/* ctr-wl-osu: OSU-style MPI micro-benchmarks (latency, bw, bibw, allreduce), written for
 * this suite; rank 0 prints one JSON line (wl_report.h). MB = 10^6 bytes. */
#include "wl_report.h"

#include <getopt.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: mpirun -np 2 ctr-wl-osu [--quick] [options] [latency|bw|bibw|allreduce|all ...]\n"
    "Point-to-point tests run between ranks 0 and 1 (others wait); allreduce uses all ranks.\n"
    "  latency    half round trip of a blocking ping-pong, 1 B..4 MiB; 10000 iterations\n"
    "             + 100 warm-up up to 8 KiB, 1000 + 10 above            (latency_<size>_us)\n"
    "  bw         rank 0 -> 1, a window of 64 non-blocking sends, then a 4-byte ack;\n"
    "             100 + 10 windows up to 8 KiB, 20 + 2 above           (bw_<size>_MBps)\n"
    "  bibw       the same window in both directions at once            (bibw_<size>_MBps)\n"
    "  allreduce  MPI_Allreduce sum, 4 B..1 MiB; 1000 + 100 up to 8 KiB, 100 + 10 above;\n"
    "             each rank's mean time, the FOM is the maximum over ranks (allreduce_<size>_us)\n"
    "  all        all four (the default)\n"
    "Options:\n"
    "  --quick             sizes up to 1 MiB and about 1/20 of the iterations\n"
    "  --max-size B        largest message (default 4M; allreduce stops at 1M)\n"
    "  --iters N --skip N  fixed timed and warm-up iterations for every size\n"
    "  --window N          messages in flight for bw/bibw (default 64)\n"
    "  --dtype T           allreduce element type: float (default), double or int8\n"
    "FOMs are a few representative sizes (8 B, 8 KiB, 1 MiB); every size is in info.\n"
    "Run as root with OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.\n";

enum test { LATENCY, BW, BIBW, ALLREDUCE, NTESTS };
static const char *test_names[NTESTS] = {"latency", "bw", "bibw", "allreduce"};

struct options {
  int run[NTESTS];
  int quick;
  long long max_size;
  int iters, skip; /* 0: the per-size defaults */
  int window;
  MPI_Datatype dtype;
  int dtype_size;
  const char *dtype_name;
};

struct series {
  long long size[32];
  double value[32];
  int n;
};

static int rank, nranks;

/* OSU's iteration counts: many for small messages, fewer above 8 KiB; --quick /20. */
static void iterations(const struct options *o, enum test t, long long size, int *iters, int *skip) {
  static const int small[NTESTS][2] = {{10000, 100}, {100, 10}, {100, 10}, {1000, 100}};
  static const int large[NTESTS][2] = {{1000, 10}, {20, 2}, {20, 2}, {100, 10}};
  const int *v = size <= 8192 ? small[t] : large[t];
  *iters = v[0];
  *skip = v[1];
  if (o->quick) {
    *iters = *iters / 20 > 2 ? *iters / 20 : 2;
    *skip = *skip / 10 > 1 ? *skip / 10 : 1;
  }
  if (o->iters > 0)
    *iters = o->iters;
  if (o->skip >= 0)
    *skip = o->skip;
}

static void check(int err, const char *what) {
  if (err != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, msg, &len);
    fprintf(stderr, "osu: rank %d: %s: %s\n", rank, what, msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

static double run_latency(const struct options *o, char *sbuf, char *rbuf, long long size) {
  int iters, skip, n = (int)size;
  iterations(o, LATENCY, size, &iters, &skip);
  double t0 = 0;
  check(MPI_Barrier(MPI_COMM_WORLD), "barrier");
  if (rank > 1)
    return 0;
  for (int i = 0; i < iters + skip; ++i) {
    if (i == skip)
      t0 = MPI_Wtime();
    if (rank == 0) {
      check(MPI_Send(sbuf, n, MPI_CHAR, 1, 1, MPI_COMM_WORLD), "send");
      check(MPI_Recv(rbuf, n, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "recv");
    } else {
      check(MPI_Recv(rbuf, n, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "recv");
      check(MPI_Send(sbuf, n, MPI_CHAR, 0, 1, MPI_COMM_WORLD), "send");
    }
  }
  return (MPI_Wtime() - t0) * 1e6 / (2.0 * iters);
}

/* bw: rank 0 sends a window, rank 1 acks it. bibw: both send and receive a window. */
static double run_bandwidth(const struct options *o, int bidirectional, char *sbuf, char *rbuf,
                            long long size, MPI_Request *req) {
  int iters, skip, n = (int)size, w = o->window;
  iterations(o, bidirectional ? BIBW : BW, size, &iters, &skip);
  double t0 = 0;
  char ack[4] = {0};
  check(MPI_Barrier(MPI_COMM_WORLD), "barrier");
  if (rank > 1)
    return 0;
  int peer = 1 - rank;
  for (int i = 0; i < iters + skip; ++i) {
    if (i == skip)
      t0 = MPI_Wtime();
    int nreq = 0;
    /* Concurrent receives need a slice each (MPI forbids overlapping ones); concurrent
     * sends may share one buffer. */
    if (bidirectional || rank == 1)
      for (int k = 0; k < w; ++k)
        check(MPI_Irecv(rbuf + (size_t)k * (size_t)n, n, MPI_CHAR, peer, 2, MPI_COMM_WORLD, &req[nreq++]), "irecv");
    if (bidirectional || rank == 0)
      for (int k = 0; k < w; ++k)
        check(MPI_Isend(sbuf, n, MPI_CHAR, peer, 2, MPI_COMM_WORLD, &req[nreq++]), "isend");
    check(MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE), "waitall");
    if (!bidirectional) {
      if (rank == 0)
        check(MPI_Recv(ack, 4, MPI_CHAR, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "recv ack");
      else
        check(MPI_Send(ack, 4, MPI_CHAR, 0, 3, MPI_COMM_WORLD), "send ack");
    }
  }
  double t = MPI_Wtime() - t0;
  double bytes = (double)size * w * iters * (bidirectional ? 2 : 1);
  return bytes / t / 1e6;
}

/* Returns the maximum over ranks of each rank's mean time (us). */
static double run_allreduce(const struct options *o, char *sbuf, char *rbuf, long long size) {
  int iters, skip, count = (int)(size / o->dtype_size);
  iterations(o, ALLREDUCE, size, &iters, &skip);
  /* Every element = rank + 1, so the sum is known: a wrong reduction fails the run. */
  for (int k = 0; k < count; ++k) {
    if (o->dtype == MPI_FLOAT)
      ((float *)sbuf)[k] = (float)(rank + 1);
    else if (o->dtype == MPI_DOUBLE)
      ((double *)sbuf)[k] = rank + 1;
    else
      ((int8_t *)sbuf)[k] = (int8_t)((rank + 1) & 0x3f);
  }
  double total = 0;
  for (int i = 0; i < iters + skip; ++i) {
    check(MPI_Barrier(MPI_COMM_WORLD), "barrier");
    double t0 = MPI_Wtime();
    check(MPI_Allreduce(sbuf, rbuf, count, o->dtype, MPI_SUM, MPI_COMM_WORLD), "allreduce");
    if (i >= skip)
      total += MPI_Wtime() - t0;
  }
  double expect = 0, got;
  for (int r = 0; r < nranks; ++r)
    expect += o->dtype == MPI_INT8_T ? (double)((r + 1) & 0x3f) : r + 1;
  got = o->dtype == MPI_FLOAT    ? (double)((float *)rbuf)[count - 1]
        : o->dtype == MPI_DOUBLE ? ((double *)rbuf)[count - 1]
                                 : (double)((int8_t *)rbuf)[count - 1];
  if (o->dtype == MPI_INT8_T)
    expect = (double)(int8_t)(int)expect;
  if (got != expect) {
    fprintf(stderr, "osu: allreduce of %lld B: got %g, expected %g\n", size, got, expect);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  double mean = total * 1e6 / iters, worst = 0;
  check(MPI_Reduce(&mean, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD), "reduce");
  return worst;
}

static void parse(int argc, char **argv, struct options *o) {
  static const struct option longopts[] = {
      {"quick", no_argument, NULL, 'q'},       {"max-size", required_argument, NULL, 'm'},
      {"iters", required_argument, NULL, 'i'}, {"skip", required_argument, NULL, 's'},
      {"window", required_argument, NULL, 'w'}, {"dtype", required_argument, NULL, 'd'},
      {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0}};
  *o = (struct options){.max_size = 0, .skip = -1, .window = 64, .dtype = MPI_FLOAT,
                        .dtype_size = 4, .dtype_name = "float"};
  for (int ch; (ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1;) {
    switch (ch) {
    case 'q': o->quick = 1; break;
    case 'm': o->max_size = wl_parse_size("--max-size", optarg); break;
    case 'i': o->iters = atoi(optarg); break;
    case 's': o->skip = atoi(optarg); break;
    case 'w': o->window = atoi(optarg); break;
    case 'd':
      if (!strcmp(optarg, "float"))
        o->dtype = MPI_FLOAT, o->dtype_size = 4;
      else if (!strcmp(optarg, "double"))
        o->dtype = MPI_DOUBLE, o->dtype_size = 8;
      else if (!strcmp(optarg, "int8"))
        o->dtype = MPI_INT8_T, o->dtype_size = 1;
      else
        wl_die("--dtype: float, double or int8");
      o->dtype_name = optarg;
      break;
    case 'h':
      if (rank == 0)
        fputs(usage, stdout);
      MPI_Finalize();
      exit(0);
    default:
      if (rank == 0)
        fputs(usage, stderr);
      MPI_Finalize();
      exit(2);
    }
  }
  int any = 0;
  for (int i = optind; i < argc; ++i) {
    int found = 0;
    for (int t = 0; t < NTESTS; ++t)
      if (!strcmp(argv[i], test_names[t]) || !strcmp(argv[i], "all"))
        o->run[t] = found = 1;
    if (!found)
      wl_die("osu: unknown test '%s' (latency, bw, bibw, allreduce, all)", argv[i]);
    any = 1;
  }
  if (!any)
    for (int t = 0; t < NTESTS; ++t)
      o->run[t] = 1;
  if (o->max_size == 0)
    o->max_size = o->quick ? 1 << 20 : 4 << 20;
  if (o->max_size < 8 || o->max_size > (1LL << 30))
    wl_die("--max-size: between 8 B and 1 GiB");
  if (o->window < 1 || o->window > 1024)
    wl_die("--window: 1..1024");
}

static int is_fom_size(long long size) { return size == 8 || size == 8192 || size == 1 << 20; }

static void add_series(struct wl_report *r, const char *key, const struct series *s) {
  struct wl_buf b = {0};
  wl_buf_append(&b, "{");
  for (int i = 0; i < s->n; ++i) {
    wl_buf_printf(&b, "%s\"%lld\":", i ? "," : "", s->size[i]);
    wl_buf_json_num(&b, s->value[i]);
  }
  wl_buf_append(&b, "}");
  wl_info_json(r, key, b.data);
  wl_buf_free(&b);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  struct options o;
  parse(argc, argv, &o);
  if (nranks < 2 && (o.run[LATENCY] || o.run[BW] || o.run[BIBW]))
    wl_die("osu: latency, bw and bibw need 2 ranks: run under mpirun -np 2 (or ask for allreduce only)");

  size_t message_bytes = (size_t)(o.max_size > (1 << 20) ? o.max_size : 1 << 20);
  size_t recv_bytes = rank < 2 && (o.run[BW] || o.run[BIBW]) ? (size_t)o.max_size * (size_t)o.window : message_bytes;
  recv_bytes = recv_bytes > message_bytes ? recv_bytes : message_bytes;
  char *sbuf = aligned_alloc(4096, (message_bytes + 4095) / 4096 * 4096);
  char *rbuf = aligned_alloc(4096, (recv_bytes + 4095) / 4096 * 4096);
  MPI_Request *req = malloc(2 * (size_t)o.window * sizeof *req);
  if (!sbuf || !rbuf || !req)
    wl_die("osu: rank %d cannot allocate %zu + %zu bytes", rank, message_bytes, recv_bytes);
  memset(sbuf, 'a', message_bytes);
  memset(rbuf, 0, recv_bytes);

  struct series results[NTESTS] = {0};
  double t_start = MPI_Wtime();
  for (int t = 0; t < NTESTS; ++t) {
    if (!o.run[t])
      continue;
    long long first = t == ALLREDUCE ? (o.dtype_size > 4 ? o.dtype_size : 4) : 1;
    long long last = t == ALLREDUCE && o.max_size > (1 << 20) ? 1 << 20 : o.max_size;
    for (long long size = first; size <= last; size *= 2) {
      double v = t == LATENCY     ? run_latency(&o, sbuf, rbuf, size)
                 : t == ALLREDUCE ? run_allreduce(&o, sbuf, rbuf, size)
                                  : run_bandwidth(&o, t == BIBW, sbuf, rbuf, size, req);
      struct series *s = &results[t];
      s->size[s->n] = size;
      s->value[s->n++] = v;
    }
  }
  double elapsed = MPI_Wtime() - t_start;

  char hosts[2][MPI_MAX_PROCESSOR_NAME] = {"", ""};
  int len = 0;
  MPI_Get_processor_name(hosts[0], &len);
  if (nranks > 1) {
    if (rank == 1)
      MPI_Send(hosts[0], MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, 4, MPI_COMM_WORLD);
    else if (rank == 0)
      MPI_Recv(hosts[1], MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 1, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }

  if (rank == 0) {
    static const char *units[NTESTS] = {"us", "MB/s (10^6 B)", "MB/s (10^6 B)", "us"};
    static const char *suffix[NTESTS] = {"us", "MBps", "MBps", "us"};
    struct wl_report r;
    wl_report_init(&r, "osu");
    for (int t = 0; t < NTESTS; ++t) {
      for (int i = 0; i < results[t].n; ++i) {
        long long size = results[t].size[i];
        if (!is_fom_size(size))
          continue;
        char label[32], name[64];
        wl_size_label(label, sizeof label, size);
        snprintf(name, sizeof name, "%s_%s_%s", test_names[t], label, suffix[t]);
        int lower = t == LATENCY || t == ALLREDUCE;
        double delta = t == ALLREDUCE ? 0.05 : t == LATENCY && size <= 8192 ? 0.05 : 0.03;
        wl_report_fom(&r, name, results[t].value[i], units[t], lower ? "lower" : "higher", delta);
      }
    }
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Get_library_version(version, &len);
    version[strcspn(version, "\n,")] = 0;
    wl_info_str(&r, "mpi_library", version);
    wl_info_int(&r, "ranks", nranks);
    wl_info_str(&r, "rank0_host", hosts[0]);
    wl_info_str(&r, "rank1_host", hosts[1]);
    wl_info_bool(&r, "quick", o.quick);
    wl_info_int(&r, "window", o.window);
    wl_info_str(&r, "allreduce_dtype", o.dtype_name);
    wl_info_str(&r, "allreduce_statistic", "max over ranks of each rank's mean");
    static const char *keys[NTESTS] = {"latency_us", "bw_MBps", "bibw_MBps", "allreduce_us"};
    for (int t = 0; t < NTESTS; ++t)
      if (o.run[t])
        add_series(&r, keys[t], &results[t]);
    wl_info_num(&r, "elapsed_s", elapsed);
    wl_report_print(&r);
  }
  free(sbuf);
  free(rbuf);
  free(req);
  MPI_Finalize();
  return 0;
}
