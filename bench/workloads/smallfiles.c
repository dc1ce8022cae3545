/* ctr-wl-smallfiles: the deep-learning read pattern, many small files read whole in a
 * shuffled order (the metadata storm that stalls training on shared filesystems). */
#define _GNU_SOURCE
#include "wl_report.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
    "usage: ctr-wl-smallfiles --prepare DIR [--count N] [--size BYTES] [--seed S]\n"
    "       ctr-wl-smallfiles --read DIR [--epochs N] [--seed S] [--drop-caches]\n"
    "                         [--threads K] [--shard I/N] [--start-at UNIX_TIME]\n"
    "       ctr-wl-smallfiles [--quick] [--dir PARENT] [--count N] [--size BYTES] [--epochs N]\n"
    "--prepare writes N files of BYTES random (incompressible, all distinct) bytes as\n"
    "  DIR/0000/0000000.bin ... (1000 per directory) and a marker DIR/.ctr-wl-smallfiles;\n"
    "  a DIR that already holds the same dataset is left as it is. Defaults: 20000 x 16 KiB\n"
    "  (--quick: 2000). Prints nothing on stdout.\n"
    "--read lists DIR's files (timed apart: list_s in info), then reads each whole with\n"
    "  open/read/close in an order shuffled by --seed, --epochs times (a new order each\n"
    "  epoch; default 3, --quick 1). FOMs: files_per_s and MBps (10^6 B), the median epoch.\n"
    "  The page cache is kept unless --drop-caches (root on the host only) empties it first.\n"
    "  --threads K: K threads share each epoch's files (default 1). --shard I/N: this\n"
    "  process reads only the files at positions I, I+N, ... of each shuffled order, so N\n"
    "  processes with the same seed read the dataset once between them. --start-at T: the\n"
    "  first epoch starts at T (CLOCK_REALTIME seconds), after the listing, so that several\n"
    "  processes start together; info has epoch1_end_realtime for their common rate.\n"
    "With neither, the program prepares a dataset in a temporary directory under --dir\n"
    "(default $TMPDIR or /tmp), reads it and removes it: a self-contained run.\n"
    "From a squashfs image: smallfiles-squashfs.sh up WORKDIR prepares the dataset, packs it\n"
    "with mksquashfs and mounts it with squashfuse at WORKDIR/mnt; then --read WORKDIR/mnt\n"
    "(bound into a container or bare) measures reads from the image; 'down WORKDIR' unmounts.\n"
    "Exit 0 (with one JSON line for a read), 1 on failure.\n";

static const char marker_name[] = ".ctr-wl-smallfiles";
enum { FILES_PER_DIR = 1000 };

static uint64_t splitmix(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static void write_all(int fd, const char *buf, size_t len, const char *path) {
  while (len) {
    ssize_t n = write(fd, buf, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      wl_die("smallfiles: write %s: %s", path, strerror(errno));
    buf += n;
    len -= (size_t)n;
  }
}

/* durable: flush the dataset to disk (a dataset made by setup for many launches); the
 * self-contained run skips it, its files are read from the page cache at once anyway. */
static void prepare(const char *dir, long long count, long long size, unsigned long long seed, int durable) {
  char path[4096], want[128], have[128] = "";
  snprintf(want, sizeof want, "count %lld size %lld seed %llu\n", count, size, seed);
  snprintf(path, sizeof path, "%s/%s", dir, marker_name);
  FILE *m = fopen(path, "r");
  if (m) {
    if (!fgets(have, sizeof have, m))
      have[0] = 0;
    fclose(m);
    if (!strcmp(have, want)) {
      fprintf(stderr, "smallfiles: %s already holds %lld files of %lld B\n", dir, count, size);
      return;
    }
    wl_die("smallfiles: %s holds another dataset (%.*s); remove it first", dir,
           (int)strcspn(have, "\n"), have);
  }
  if (mkdir(dir, 0755) && errno != EEXIST)
    wl_die("smallfiles: mkdir %s: %s", dir, strerror(errno));
  char *buf = malloc((size_t)size + 8);
  if (!buf)
    wl_die("out of memory");
  double t0 = wl_now();
  for (long long i = 0; i < count; ++i) {
    if (i % FILES_PER_DIR == 0) {
      snprintf(path, sizeof path, "%s/%04lld", dir, i / FILES_PER_DIR);
      if (mkdir(path, 0755) && errno != EEXIST)
        wl_die("smallfiles: mkdir %s: %s", path, strerror(errno));
    }
    uint64_t state = seed * 1000003ULL + (uint64_t)i;
    for (long long k = 0; k < size; k += 8) {
      uint64_t v = splitmix(&state);
      memcpy(buf + k, &v, 8);
    }
    snprintf(path, sizeof path, "%s/%04lld/%07lld.bin", dir, i / FILES_PER_DIR, i);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
      wl_die("smallfiles: create %s: %s", path, strerror(errno));
    write_all(fd, buf, (size_t)size, path);
    close(fd);
  }
  free(buf);
  if (durable) {
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || syncfs(dfd))
      wl_die("smallfiles: syncfs %s: %s", dir, strerror(errno));
    close(dfd);
  }
  /* The marker last: a dataset interrupted half-way is not taken for a complete one. */
  snprintf(path, sizeof path, "%s/%s", dir, marker_name);
  if (!(m = fopen(path, "w")) || fputs(want, m) < 0 || fclose(m))
    wl_die("smallfiles: write %s: %s", path, strerror(errno));
  fprintf(stderr, "smallfiles: wrote %lld files of %lld B to %s in %.2f s\n", count, size, dir,
          wl_now() - t0);
}

struct file_list {
  char **path;
  size_t n, cap;
};

static void list_add(struct file_list *l, const char *path) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 4096;
    char **p = realloc(l->path, l->cap * sizeof *p);
    if (!p)
      wl_die("out of memory");
    l->path = p;
  }
  if (!(l->path[l->n++] = strdup(path)))
    wl_die("out of memory");
}

/* Regular files one directory level down (the layout --prepare writes), hidden ones skipped. */
static void list_files(const char *dir, struct file_list *l) {
  DIR *top = opendir(dir);
  if (!top)
    wl_die("smallfiles: open %s: %s", dir, strerror(errno));
  for (struct dirent *e; (e = readdir(top));) {
    if (e->d_name[0] == '.')
      continue;
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
    DIR *d = opendir(sub);
    if (!d)
      continue;
    for (struct dirent *f; (f = readdir(d));) {
      if (f->d_name[0] == '.')
        continue;
      char path[sizeof sub + sizeof f->d_name + 1];
      snprintf(path, sizeof path, "%s/%s", sub, f->d_name);
      list_add(l, path);
    }
    closedir(d);
  }
  closedir(top);
}

static long long read_file(const char *path, char *buf, size_t buflen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    wl_die("smallfiles: open %s: %s", path, strerror(errno));
  long long total = 0;
  for (;;) {
    ssize_t n = read(fd, buf, buflen);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      wl_die("smallfiles: read %s: %s", path, strerror(errno));
    if (n == 0)
      break;
    total += n;
  }
  close(fd);
  return total;
}

static void drop_caches(void) {
  sync();
  int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, "3", 1) != 1)
    wl_die("smallfiles: --drop-caches: cannot write /proc/sys/vm/drop_caches (%s); it needs "
           "root on the host", strerror(errno));
  close(fd);
}

static double realtime_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_until(double when) {
  double wait = when - realtime_now();
  if (wait <= 0)
    return;
  struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* One epoch's reads: the files at positions shard, shard + shards, ... of the shuffled
 * list, dealt round-robin to `threads` threads. Returns the bytes read. */
struct reader {
  const struct file_list *l;
  size_t first, step;
  long long bytes;
};

static void *reader_main(void *arg) {
  struct reader *r = arg;
  enum { BUFLEN = 1 << 20 };
  char *buf = malloc(BUFLEN);
  if (!buf)
    wl_die("out of memory");
  for (size_t i = r->first; i < r->l->n; i += r->step)
    r->bytes += read_file(r->l->path[i], buf, BUFLEN);
  free(buf);
  return NULL;
}

static long long read_parallel(const struct file_list *l, int threads, int shard, int shards) {
  struct reader rs[256];
  pthread_t ids[256];
  for (int t = 0; t < threads; ++t) {
    rs[t] = (struct reader){l, (size_t)shard + (size_t)t * (size_t)shards, (size_t)threads * (size_t)shards, 0};
    if (t > 0 && pthread_create(&ids[t], NULL, reader_main, &rs[t]) != 0)
      wl_die("smallfiles: pthread_create: %s", strerror(errno));
  }
  reader_main(&rs[0]);
  long long bytes = rs[0].bytes;
  for (int t = 1; t < threads; ++t) {
    pthread_join(ids[t], NULL);
    bytes += rs[t].bytes;
  }
  return bytes;
}

static void read_dataset(const char *dir, int epochs, unsigned long long seed, int drop, int threads, int shard,
                         int shards, double start_at) {
  struct file_list l = {0};
  if (drop)
    drop_caches();
  double t0 = wl_now();
  list_files(dir, &l);
  double list_s = wl_now() - t0;
  if (l.n == 0)
    wl_die("smallfiles: no files under %s/*/ (make them with --prepare)", dir);

  long long marker_count = -1, marker_size = -1;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, marker_name);
  FILE *m = fopen(path, "r");
  if (m) {
    if (fscanf(m, "count %lld size %lld", &marker_count, &marker_size) != 2)
      marker_count = marker_size = -1;
    fclose(m);
  }
  if (marker_count >= 0 && (long long)l.n != marker_count)
    wl_die("smallfiles: %s lists %zu files, its marker says %lld", dir, l.n, marker_count);
  /* This process's share: positions shard, shard + shards, ... */
  const size_t files_mine = l.n > (size_t)shard ? (l.n - (size_t)shard + (size_t)shards - 1) / (size_t)shards : 0;
  double end_realtime = 0;

  double *files_per_s = malloc((size_t)epochs * sizeof *files_per_s);
  double *mbps = malloc((size_t)epochs * sizeof *mbps);
  if (!files_per_s || !mbps)
    wl_die("out of memory");
  long long bytes = 0;
  for (int e = 0; e < epochs; ++e) {
    uint64_t state = seed + (uint64_t)e;
    for (size_t i = l.n - 1; i > 0; --i) { /* Fisher-Yates */
      size_t j = (size_t)(splitmix(&state) % (i + 1));
      char *t = l.path[i];
      l.path[i] = l.path[j];
      l.path[j] = t;
    }
    if (e == 0 && start_at > 0)
      sleep_until(start_at);
    double t = wl_now();
    bytes = read_parallel(&l, threads, shard, shards);
    t = wl_now() - t;
    if (e == 0)
      end_realtime = realtime_now();
    files_per_s[e] = (double)files_mine / t;
    mbps[e] = (double)bytes / t / 1e6;
    fprintf(stderr, "smallfiles: epoch %d: %.0f files/s, %.1f MB/s\n", e + 1, files_per_s[e], mbps[e]);
  }
  if (marker_size >= 0 && bytes != marker_size * (long long)files_mine)
    wl_die("smallfiles: read %lld B of %zu files, the marker says %lld B each", bytes, files_mine, marker_size);

  struct wl_buf all = {0};
  wl_buf_append(&all, "[");
  for (int e = 0; e < epochs; ++e)
    wl_buf_printf(&all, "%s%.1f", e ? "," : "", files_per_s[e]);
  wl_buf_append(&all, "]");

  struct wl_report r;
  wl_report_init(&r, "smallfiles");
  wl_report_fom(&r, "files_per_s", wl_median(files_per_s, (size_t)epochs), "files/s", "higher", 0.05);
  wl_report_fom(&r, "MBps", wl_median(mbps, (size_t)epochs), "MB/s (10^6 B)", "higher", 0.05);
  wl_info_str(&r, "dir", dir);
  wl_info_int(&r, "files", (long long)files_mine);
  wl_info_int(&r, "files_listed", (long long)l.n);
  wl_info_int(&r, "threads", threads);
  wl_info_int(&r, "shard", shard);
  wl_info_int(&r, "shards", shards);
  if (start_at > 0) {
    char when[64]; /* full precision: wl_info_num's %g keeps 6 digits */
    snprintf(when, sizeof when, "%.6f", start_at);
    wl_info_json(&r, "start_realtime", when);
    snprintf(when, sizeof when, "%.6f", end_realtime);
    wl_info_json(&r, "epoch1_end_realtime", when);
  }
  wl_info_int(&r, "bytes_per_epoch", bytes);
  wl_info_num(&r, "list_s", list_s);
  wl_info_int(&r, "epochs", epochs);
  wl_info_json(&r, "files_per_s_epochs", all.data);
  wl_info_str(&r, "order", "shuffled per epoch (seeded Fisher-Yates)");
  wl_info_str(&r, "page_cache", drop ? "dropped before listing" : "as found (not dropped)");
  wl_report_print(&r);
  wl_buf_free(&all);
  for (size_t i = 0; i < l.n; ++i)
    free(l.path[i]);
  free(l.path);
  free(files_per_s);
  free(mbps);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

int main(int argc, char **argv) {
  static const struct option longopts[] = {
      {"prepare", required_argument, NULL, 'p'}, {"read", required_argument, NULL, 'r'},
      {"dir", required_argument, NULL, 'd'},     {"count", required_argument, NULL, 'n'},
      {"size", required_argument, NULL, 's'},    {"seed", required_argument, NULL, 'S'},
      {"epochs", required_argument, NULL, 'e'},  {"drop-caches", no_argument, NULL, 'D'},
      {"quick", no_argument, NULL, 'q'},         {"help", no_argument, NULL, 'h'},
      {"threads", required_argument, NULL, 't'}, {"shard", required_argument, NULL, 'x'},
      {"start-at", required_argument, NULL, 'A'},
      {NULL, 0, NULL, 0}};
  const char *prepare_dir = NULL, *read_dir = NULL, *parent = NULL;
  long long count = -1, size = 16384;
  unsigned long long seed = 1;
  int epochs = 0, quick = 0, drop = 0, threads = 1, shard = 0, shards = 1;
  double start_at = 0;
  for (int ch; (ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1;) {
    switch (ch) {
    case 'p': prepare_dir = optarg; break;
    case 'r': read_dir = optarg; break;
    case 'd': parent = optarg; break;
    case 'n': count = wl_parse_size("--count", optarg); break;
    case 's': size = wl_parse_size("--size", optarg); break;
    case 'S': seed = strtoull(optarg, NULL, 10); break;
    case 'e': epochs = atoi(optarg); break;
    case 'D': drop = 1; break;
    case 'q': quick = 1; break;
    case 't': threads = atoi(optarg); break;
    case 'x':
      if (sscanf(optarg, "%d/%d", &shard, &shards) != 2 || shards < 1 || shard < 0 || shard >= shards)
        wl_die("smallfiles: --shard I/N with 0 <= I < N, not '%s'", optarg);
      break;
    case 'A': start_at = strtod(optarg, NULL); break;
    case 'h': fputs(usage, stdout); return 0;
    default: fputs(usage, stderr); return 2;
    }
  }
  if (optind < argc)
    wl_die("smallfiles: unexpected argument '%s'\n%s", argv[optind], usage);
  if (count < 0)
    count = quick ? 2000 : 20000;
  if (epochs <= 0)
    epochs = quick ? 1 : 3;
  if (count < 1 || count > 10000000 || size < 1 || size > (1LL << 30))
    wl_die("smallfiles: --count 1..10M and --size 1 B..1 GiB");
  if (threads < 1 || threads > 256)
    wl_die("smallfiles: --threads 1..256");

  if (prepare_dir)
    prepare(prepare_dir, count, size, seed, 1);
  if (read_dir)
    read_dataset(read_dir, epochs, seed, drop, threads, shard, shards, start_at);
  if (prepare_dir || read_dir)
    return 0;

  if (!parent)
    parent = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s/ctr-wl-smallfiles.XXXXXX", parent);
  if (!mkdtemp(tmp))
    wl_die("smallfiles: mkdtemp %s: %s", tmp, strerror(errno));
  prepare(tmp, count, size, seed, 0);
  read_dataset(tmp, epochs, seed, drop, threads, shard, shards, start_at);
  if (nftw(tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS))
    wl_die("smallfiles: cannot remove %s: %s", tmp, strerror(errno));
  return 0;
}
