/* Test harness: an LD_PRELOAD library that moves a process's wall clock.
 *
 * clock_gettime(CLOCK_REALTIME and CLOCK_REALTIME_COARSE), gettimeofday and
 * time answer the real time plus an offset in milliseconds, read on every
 * call from the first 8 bytes (a native int64, written atomically) of the
 * file named by $REDSYNC_CLOCK_OFFSET_FILE, so a test can step the clock of
 * a running redis-server (tests/support/clock_offset.hpp writes it). Every
 * other clock, and every process without the variable, is left alone.
 *
 * libfaketime hangs redis-server here (its dlsym runs inside jemalloc's
 * initialisation); this shim calls the kernel directly and never allocates.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int64_t* offset_ms_at(void) {
  static int64_t* mapped = NULL;
  static int tried = 0;
  int64_t* m = __atomic_load_n(&mapped, __ATOMIC_ACQUIRE);
  if (m != NULL || __atomic_load_n(&tried, __ATOMIC_ACQUIRE)) return m;
  const char* path = getenv("REDSYNC_CLOCK_OFFSET_FILE");
  if (path != NULL) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      void* p = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
      close(fd);
      if (p != MAP_FAILED) m = (int64_t*)p;
    }
  }
  /* Two threads may both map it: each mapping is as good as the other. */
  __atomic_store_n(&mapped, m, __ATOMIC_RELEASE);
  __atomic_store_n(&tried, 1, __ATOMIC_RELEASE);
  return m;
}

static int64_t offset_ns(void) {
  int64_t* m = offset_ms_at();
  return m == NULL ? 0 : __atomic_load_n(m, __ATOMIC_RELAXED) * 1000000;
}

static int real_clock_gettime(clockid_t id, struct timespec* ts) {
  return (int)syscall(SYS_clock_gettime, id, ts);
}

int clock_gettime(clockid_t id, struct timespec* ts) {
  int r = real_clock_gettime(id, ts);
  if (r != 0 || (id != CLOCK_REALTIME && id != CLOCK_REALTIME_COARSE)) return r;
  int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + offset_ns();
  ts->tv_sec = ns / 1000000000;
  ts->tv_nsec = ns % 1000000000;
  return 0;
}

int gettimeofday(struct timeval* tv, void* tz) {
  (void)tz;
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = ts.tv_nsec / 1000;
  return 0;
}

time_t time(time_t* out) {
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
  if (out != NULL) *out = ts.tv_sec;
  return ts.tv_sec;
}
