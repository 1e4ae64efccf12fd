/*
 * floor_epoll: the physical floor under a Redlock cycle (issue 34).
 *
 *   floor_epoll --nodes redis://HOST:PORT,... [--warmup N] [--samples N]
 *               [--mode all|quorum]
 *
 * What the kernel and the servers allow, with no library in between: one
 * thread, one epoll, one non-blocking TCP_NODELAY socket per node, RESP
 * written and parsed by hand. One cycle is the Redlock cycle the library
 * runs:
 *   1. `SET <name> <value> NX PX 10000` written to every node (one write(2)
 *      each), replies read as they arrive;
 *   2. `EVALSHA <sha> 1 <name> <value>` (compare-and-delete, loaded once with
 *      SCRIPT LOAD) the same way.
 * Mode `all` waits for every node's reply in each round (what the library's
 * default does); mode `quorum` returns from a round at a majority and reads
 * the late replies at the start of the next round (what node-redlock and the
 * library's fail_fast do).
 *
 * Each cycle is timed with CLOCK_MONOTONIC; after --warmup unmeasured cycles,
 * --samples measured ones give one JSON object on stdout: median, p99, mean,
 * min, max (microseconds, nearest-rank like bench/stats.cpp) and this
 * process's CPU per cycle (getrusage). A node that does not answer within
 * 2 s, refuses a connection or sends an error is reported on stderr, exit 1.
 * Bad arguments: a message naming them, exit 2.
 *
 * redsync_bench (bench/floor_epoll_run.cpp) runs it next to itself so every
 * cycle figure of the same invocation can be read as a ratio to this floor.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum { max_nodes = 16, buffer_size = 4096, reply_timeout_ms = 2000 };

static const char script[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/* One node: its socket and the replies read from it. Replies arrive in the
 * order the commands were written, so `received` counts them: the reply to
 * the k-th command written is the k-th reply read. */
struct node {
  char address[256];
  int fd;
  char buf[buffer_size];
  size_t len; /* bytes in buf not yet parsed */
  long sent;
  long received;
  long refused;       /* SET NX answered nil (the name was taken) */
  char last_bulk[64]; /* the last bulk string read (SCRIPT LOAD's sha) */
};

static struct node nodes[max_nodes];
static int node_count;
static int epoll_fd = -1;

static void fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("floor_epoll: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static void usage_error(const char* fmt, const char* value) {
  fputs("floor_epoll: ", stderr);
  fprintf(stderr, fmt, value);
  fputs("\nusage: floor_epoll --nodes redis://HOST:PORT,... [--warmup N] [--samples N] [--mode all|quorum]\n",
        stderr);
  exit(2);
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double cpu_us(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* A count argument: a whole number in [lo, hi]. */
static long parse_count(const char* flag, const char* value, long lo, long hi) {
  char* end = NULL;
  errno = 0;
  const long v = strtol(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0' || v < lo || v > hi) {
    char msg[128];
    snprintf(msg, sizeof msg, "%s: '%%s' is not a whole number in [%ld, %ld]", flag, lo, hi);
    usage_error(msg, value);
  }
  return v;
}

/* Connects to "redis://HOST:PORT" or "HOST:PORT" within 2 s (SO_SNDTIMEO
 * bounds a blocking connect on Linux), then makes the socket non-blocking and
 * adds it to the epoll set with its index as data. */
static void connect_node(struct node* n, int index) {
  char host[256];
  const char* spec = n->address;
  if (strncmp(spec, "redis://", 8) == 0) spec += 8;
  if (strstr(spec, "://") != NULL)
    usage_error("--nodes: '%s' is not redis://HOST:PORT (no TLS or cluster here)", n->address);
  const char* colon = strrchr(spec, ':');
  if (colon == NULL || colon == spec || colon[1] == '\0' || (size_t)(colon - spec) >= sizeof host)
    usage_error("--nodes: '%s' is not redis://HOST:PORT", n->address);
  memcpy(host, spec, (size_t)(colon - spec));
  host[colon - spec] = '\0';
  const char* port = colon + 1;
  for (const char* p = port; *p; ++p)
    if (*p < '0' || *p > '9') usage_error("--nodes: '%s' has a port that is not a number", n->address);

  struct addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = NULL;
  const int rc = getaddrinfo(host, port, &hints, &res);
  if (rc != 0) fail("%s: cannot resolve: %s", n->address, gai_strerror(rc));
  n->fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (n->fd < 0) fail("%s: socket: %s", n->address, strerror(errno));
  const struct timeval limit = {reply_timeout_ms / 1000, 0};
  setsockopt(n->fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  if (connect(n->fd, res->ai_addr, res->ai_addrlen) != 0)
    fail("%s: connect: %s", n->address, errno == EINPROGRESS ? "no answer within 2 s" : strerror(errno));
  freeaddrinfo(res);
  const int one = 1;
  if (setsockopt(n->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
    fail("%s: TCP_NODELAY: %s", n->address, strerror(errno));
  /* Non-blocking only now: the connect above is the one call that may wait. */
  const int fl = fcntl(n->fd, F_GETFL);
  if (fl < 0 || fcntl(n->fd, F_SETFL, fl | O_NONBLOCK) != 0)
    fail("%s: O_NONBLOCK: %s", n->address, strerror(errno));
  struct epoll_event ev;
  memset(&ev, 0, sizeof ev);
  ev.events = EPOLLIN;
  ev.data.u32 = (unsigned)index;
  if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, n->fd, &ev) != 0)
    fail("%s: epoll_ctl: %s", n->address, strerror(errno));
}

/* Parses one RESP reply at the start of n->buf: simple string (+), error
 * (-), integer (:) or bulk string ($, nil included), the only kinds SET,
 * EVALSHA and SCRIPT LOAD answer. Returns the bytes it spans, 0 when it is
 * not complete yet. An error reply or any other kind ends the run. */
static size_t parse_reply(struct node* n) {
  const char* b = n->buf;
  const char* eol = memchr(b, '\r', n->len);
  if (eol == NULL || (size_t)(eol - b) + 2 > n->len) return 0;
  const size_t line = (size_t)(eol - b) + 2; /* with its \r\n */
  switch (b[0]) {
    case '+':
    case ':': return line;
    case '-': fail("%s: error reply: %.*s", n->address, (int)(eol - b - 1), b + 1); return 0;
    case '$': {
      const long size = strtol(b + 1, NULL, 10);
      if (size < 0) { /* nil: SET NX found the name taken */
        ++n->refused;
        return line;
      }
      if (line + (size_t)size + 2 > n->len) return 0;
      if ((size_t)size < sizeof n->last_bulk) {
        memcpy(n->last_bulk, b + line, (size_t)size);
        n->last_bulk[size] = '\0';
      }
      return line + (size_t)size + 2;
    }
    default: fail("%s: unexpected reply type '%c'", n->address, b[0]); return 0;
  }
}

/* Reads what node i has and counts the complete replies in it. */
static void read_node(int i) {
  struct node* n = &nodes[i];
  for (;;) {
    const size_t space = sizeof n->buf - n->len;
    if (space == 0) fail("%s: a reply larger than %d bytes", n->address, buffer_size);
    const ssize_t r = read(n->fd, n->buf + n->len, space);
    if (r == 0) fail("%s: connection closed by the server", n->address);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      fail("%s: read: %s", n->address, strerror(errno));
    }
    n->len += (size_t)r;
    size_t used;
    while (n->len > 0 && (used = parse_reply(n)) > 0) {
      memmove(n->buf, n->buf + used, n->len - used);
      n->len -= used;
      ++n->received;
    }
    /* A short read means the socket is drained: no second read just to see
     * EAGAIN (epoll is level-triggered, so anything later is reported). */
    if ((size_t)r < space) break;
  }
}

/* One write per node; a command this small always fits an idle socket's
 * buffer, so a short write means something is badly wrong. */
static void write_all(const char* cmd, size_t len) {
  for (int i = 0; i < node_count; ++i) {
    const ssize_t w = write(nodes[i].fd, cmd, len);
    if (w != (ssize_t)len) fail("%s: write: %s", nodes[i].address, w < 0 ? strerror(errno) : "short write");
    ++nodes[i].sent;
  }
}

/* Nodes whose reply to their latest command has arrived. */
static int answered(void) {
  int k = 0;
  for (int i = 0; i < node_count; ++i) k += nodes[i].received == nodes[i].sent;
  return k;
}

/* Reads replies as they arrive until `need` nodes have answered their latest
 * command; 2 s without that is an error naming the silent nodes. */
static void wait_for(int need) {
  const double deadline = now_us() + reply_timeout_ms * 1000.0;
  struct epoll_event events[max_nodes];
  while (answered() < need) {
    const int left_ms = (int)((deadline - now_us()) / 1000.0);
    const int k = left_ms <= 0 ? 0 : epoll_wait(epoll_fd, events, max_nodes, left_ms);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) fail("epoll_wait: %s", strerror(errno));
    if (k == 0) {
      for (int i = 0; i < node_count; ++i)
        if (nodes[i].received != nodes[i].sent)
          fprintf(stderr, "floor_epoll: %s: no reply within 2 s\n", nodes[i].address);
      fail("%d of %d nodes answered within 2 s, %d needed", answered(), node_count, need);
    }
    for (int e = 0; e < k; ++e) read_node((int)events[e].data.u32);
  }
}

/* Reads, without waiting, every reply that has already arrived: quorum mode
 * consumes the last round's late replies this way before the next round. */
static void drain_ready(void) {
  struct epoll_event events[max_nodes];
  const int k = epoll_wait(epoll_fd, events, max_nodes, 0);
  for (int e = 0; e < k; ++e) read_node((int)events[e].data.u32);
}

/* Appends "$<len>\r\n<s>\r\n" to out. */
static size_t bulk(char* out, const char* s) {
  const size_t len = strlen(s);
  return (size_t)sprintf(out, "$%zu\r\n%s\r\n", len, s);
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Nearest rank on sorted data, as bench/stats.cpp. */
static double percentile(const double* sorted, long n, double p) {
  long rank = (long)(p * (double)n);
  if ((double)rank < p * (double)n) ++rank; /* ceil without libm */
  if (rank < 1) rank = 1;
  if (rank > n) rank = n;
  return sorted[rank - 1];
}

int main(int argc, char** argv) {
  const char* node_list = NULL;
  long warmup = 200, samples = 2000;
  int quorum_mode = 0;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      puts("usage: floor_epoll --nodes redis://HOST:PORT,... [--warmup N] [--samples N] [--mode all|quorum]");
      return 0;
    }
    if (i + 1 >= argc) usage_error("%s needs a value (or is unknown)", a);
    const char* v = argv[++i];
    if (strcmp(a, "--nodes") == 0) {
      node_list = v;
    } else if (strcmp(a, "--warmup") == 0) {
      warmup = parse_count(a, v, 0, 10000000);
    } else if (strcmp(a, "--samples") == 0) {
      samples = parse_count(a, v, 1, 10000000);
    } else if (strcmp(a, "--mode") == 0) {
      if (strcmp(v, "all") == 0) {
        quorum_mode = 0;
      } else if (strcmp(v, "quorum") == 0) {
        quorum_mode = 1;
      } else {
        usage_error("--mode: '%s' is neither all nor quorum", v);
      }
    } else {
      usage_error("unknown argument '%s'", a);
    }
  }
  if (node_list == NULL) usage_error("--nodes is required%s", "");

  epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) fail("epoll_create1: %s", strerror(errno));
  for (const char* p = node_list; *p;) {
    const char* comma = strchr(p, ',');
    const size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len > 0) {
      if (node_count == max_nodes) usage_error("--nodes: more than 16 nodes in '%s'", node_list);
      if (len >= sizeof nodes[0].address) usage_error("--nodes: an address too long in '%s'", node_list);
      memcpy(nodes[node_count].address, p, len);
      nodes[node_count].address[len] = '\0';
      connect_node(&nodes[node_count], node_count);
      ++node_count;
    }
    p += len + (comma ? 1 : 0);
  }
  if (node_count == 0) usage_error("--nodes: no address in '%s'", node_list);
  const int quorum = node_count / 2 + 1;
  const int need = quorum_mode ? quorum : node_count;

  /* SCRIPT LOAD once on every node; each answers the same SHA-1. */
  char cmd[512];
  size_t len = (size_t)sprintf(cmd, "*3\r\n");
  len += bulk(cmd + len, "SCRIPT");
  len += bulk(cmd + len, "LOAD");
  len += bulk(cmd + len, script);
  write_all(cmd, len);
  wait_for(node_count);
  char sha[64];
  strcpy(sha, nodes[0].last_bulk);
  if (strlen(sha) != 40) fail("%s: SCRIPT LOAD answered '%s', not a SHA-1", nodes[0].address, sha);

  /* One name for the run; a fresh 22-character value per cycle, as a lock's
   * random value would be (the library's are 22 characters too). */
  char name[64];
  snprintf(name, sizeof name, "floor_epoll:%ld", (long)getpid());
  double* us = malloc((size_t)samples * sizeof *us);
  if (us == NULL) fail("out of memory for %ld samples", samples);
  double cpu0 = 0;
  long refused_before = 0;
  for (long c = 0; c < warmup + samples; ++c) {
    if (c == warmup) {
      cpu0 = cpu_us();
      for (int i = 0; i < node_count; ++i) refused_before += nodes[i].refused;
    }
    char value[32];
    snprintf(value, sizeof value, "v%021ld", c);
    const double t0 = now_us();
    if (quorum_mode) drain_ready();
    len = (size_t)sprintf(cmd, "*6\r\n");
    len += bulk(cmd + len, "SET");
    len += bulk(cmd + len, name);
    len += bulk(cmd + len, value);
    len += bulk(cmd + len, "NX");
    len += bulk(cmd + len, "PX");
    len += bulk(cmd + len, "10000");
    write_all(cmd, len);
    wait_for(need);
    if (quorum_mode) drain_ready();
    len = (size_t)sprintf(cmd, "*5\r\n");
    len += bulk(cmd + len, "EVALSHA");
    len += bulk(cmd + len, sha);
    len += bulk(cmd + len, "1");
    len += bulk(cmd + len, name);
    len += bulk(cmd + len, value);
    write_all(cmd, len);
    wait_for(need);
    if (c >= warmup) us[c - warmup] = now_us() - t0;
  }
  const double cpu = cpu_us() - cpu0;
  /* The late replies of the last round, so every command was answered. */
  wait_for(node_count);
  long refused = -refused_before;
  for (int i = 0; i < node_count; ++i) refused += nodes[i].refused;

  double sum = 0;
  for (long i = 0; i < samples; ++i) sum += us[i];
  qsort(us, (size_t)samples, sizeof *us, by_value);
  printf(
      "{\"mode\":\"%s\",\"nodes\":%d,\"waits_for\":%d,\"warmup\":%ld,\"samples\":%ld,"
      "\"median_us\":%.3f,\"p99_us\":%.3f,\"mean_us\":%.3f,\"min_us\":%.3f,\"max_us\":%.3f,"
      "\"client_cpu_us_per_cycle\":%.3f,\"set_refused\":%ld}\n",
      quorum_mode ? "quorum" : "all", node_count, need, warmup, samples, percentile(us, samples, 0.5),
      percentile(us, samples, 0.99), sum / (double)samples, us[0], us[samples - 1], cpu / (double)samples,
      refused);
  free(us);
  return 0;
}
