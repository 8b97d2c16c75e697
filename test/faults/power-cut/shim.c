/*
 * TEST ONLY: a power cut emulated for one process (test/faults/power-loss.test.ts).
 *
 * LD_PRELOADed into `gatehouse serve`. Every write the process makes to a regular file under
 * $POWERCUT_DIR (the SQLite database and its WAL; not the -shm index, which SQLite rebuilds) is
 * preceded by an undo record appended to $POWERCUT_LOG: the bytes and the file size it is about to
 * change. A successful fsync/fdatasync of a file marks every record of that file written before the
 * sync began as durable. After SIGKILL the test applies, newest first, every record not marked
 * durable (./power-cut.ts), which leaves each file as a disk would after losing power: exactly what
 * was synced, nothing written since (the harshest outcome a real disk may give).
 *
 * Writes of one file and the record of them are serialised by one mutex, so records are in the order
 * the writes happened, across threads (the event loop, libuv's pool, the checkpointer worker).
 *
 * While $POWERCUT_FAIL exists, syncing a tracked file fails as Linux reports a writeback error
 * (errseq_t, since 4.13): the first fsync through each file description open at the time returns
 * EIO, and every later fsync of that file returns 0 without making anything durable, since the
 * kernel dropped the pages it could not write (the 2018 PostgreSQL "fsyncgate"). A program that
 * retries the fsync and trusts the success loses data; the power cut then shows it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAXFD 65536
#define MAXFILES 16

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off64_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off64_t);
static int (*real_fallocate)(int, int, off_t, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static ssize_t (*real_pread)(int, void *, size_t, off_t);

static char dir[1024];
static size_t dirlen;
static char logpath[1024];
static char failpath[1024];
static int logfd = -1;
static uint64_t seq; /* undo records written so far */

/* What an fd was found to be, valid while the fd still refers to the same inode. */
struct fdinfo {
  dev_t dev;
  ino_t ino;
  int known;
  int file; /* index into files[], or -1 when not tracked */
  int error_pending;
};
static struct fdinfo fds[MAXFD];
static struct {
  char path[1024];
  int failed;
} files[MAXFILES];
static int nfiles;

static void init(void) {
  if (real_write) return;
  real_write = dlsym(RTLD_NEXT, "write");
  real_pwrite = dlsym(RTLD_NEXT, "pwrite");
  real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
  real_writev = dlsym(RTLD_NEXT, "writev");
  real_pwritev = dlsym(RTLD_NEXT, "pwritev");
  real_ftruncate = dlsym(RTLD_NEXT, "ftruncate");
  real_ftruncate64 = dlsym(RTLD_NEXT, "ftruncate64");
  real_fallocate = dlsym(RTLD_NEXT, "fallocate");
  real_fsync = dlsym(RTLD_NEXT, "fsync");
  real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
  real_pread = dlsym(RTLD_NEXT, "pread");
  const char *d = getenv("POWERCUT_DIR"), *l = getenv("POWERCUT_LOG"), *f = getenv("POWERCUT_FAIL");
  if (!d || !l) return;
  snprintf(dir, sizeof dir, "%s/", d);
  dirlen = strlen(dir);
  snprintf(logpath, sizeof logpath, "%s", l);
  snprintf(failpath, sizeof failpath, "%s", f ? f : "");
  logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
}

__attribute__((constructor)) static void setup(void) { init(); }

static void die(const char *what) {
  char line[256];
  int n = snprintf(line, sizeof line, "powercut shim: %s (errno %d)\n", what, errno);
  real_write(2, line, n);
  abort();
}

/* The tracked file `fd` refers to, or -1. Called with mu held. */
static int tracked(int fd) {
  init();
  if (logfd < 0 || fd < 0 || fd >= MAXFD) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0) return -1;
  struct fdinfo *info = &fds[fd];
  if (info->known && info->dev == st.st_dev && info->ino == st.st_ino) return info->file;
  info->known = 1;
  info->dev = st.st_dev;
  info->ino = st.st_ino;
  info->file = -1;
  info->error_pending = 0;
  if (!S_ISREG(st.st_mode)) return -1;
  char link[64], path[1024];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return -1;
  path[n] = 0;
  if (strncmp(path, dir, dirlen) != 0) return -1;
  if (n > 4 && strcmp(path + n - 4, "-shm") == 0) return -1;
  for (int i = 0; i < nfiles; i++)
    if (strcmp(files[i].path, path) == 0) return info->file = i;
  if (nfiles == MAXFILES) die("too many files");
  snprintf(files[nfiles].path, sizeof files[nfiles].path, "%s", path);
  return info->file = nfiles++;
}

static void append(const void *data, size_t len) {
  const char *p = data;
  while (len > 0) {
    ssize_t n = real_write(logfd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) die("cannot append to the undo log");
    p += n;
    len -= (size_t)n;
  }
}

/*
 * Undo record: 'U', u32 path length, path, i64 offset, i64 old size, i64 old-bytes length, old bytes,
 * 'E'. Undoing it writes the old bytes back at offset and sets the size back to old size. Called with
 * mu held, before the change it undoes.
 */
static void record_undo(int fd, int file, off_t offset, off_t end) {
  struct stat st;
  if (fstat(fd, &st) != 0) die("fstat");
  int64_t oldsize = st.st_size;
  int64_t from = offset, to = end < oldsize ? end : oldsize;
  int64_t oldlen = to > from ? to - from : 0;
  const char *path = files[file].path;
  uint32_t plen = (uint32_t)strlen(path);
  size_t total = 1 + 4 + plen + 8 * 3 + (size_t)oldlen + 1;
  char *buf = malloc(total);
  if (!buf) die("malloc");
  char *p = buf;
  *p++ = 'U';
  memcpy(p, &plen, 4), p += 4;
  memcpy(p, path, plen), p += plen;
  memcpy(p, &from, 8), p += 8;
  memcpy(p, &oldsize, 8), p += 8;
  memcpy(p, &oldlen, 8), p += 8;
  int64_t got = 0;
  while (got < oldlen) {
    ssize_t n = real_pread(fd, p + got, (size_t)(oldlen - got), from + got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) die("cannot read the bytes a write replaces");
    got += n;
  }
  p += oldlen;
  *p++ = 'E';
  append(buf, total);
  free(buf);
  seq++;
}

/* Sync record: 'S', u32 path length, path, u64 undo records before the sync began, 'E'. */
static void record_sync(int file, uint64_t before) {
  const char *path = files[file].path;
  uint32_t plen = (uint32_t)strlen(path);
  char buf[1 + 4 + 1024 + 8 + 1];
  char *p = buf;
  *p++ = 'S';
  memcpy(p, &plen, 4), p += 4;
  memcpy(p, path, plen), p += plen;
  memcpy(p, &before, 8), p += 8;
  *p++ = 'E';
  append(buf, (size_t)(p - buf));
}

ssize_t pwrite(int fd, const void *data, size_t len, off_t offset) {
  init();
  pthread_mutex_lock(&mu);
  int file = tracked(fd);
  if (file >= 0) record_undo(fd, file, offset, offset + (off_t)len);
  ssize_t n = real_pwrite(fd, data, len, offset);
  pthread_mutex_unlock(&mu);
  return n;
}

ssize_t pwrite64(int fd, const void *data, size_t len, off64_t offset) {
  init();
  pthread_mutex_lock(&mu);
  int file = tracked(fd);
  if (file >= 0) record_undo(fd, file, offset, offset + (off64_t)len);
  ssize_t n = real_pwrite64(fd, data, len, offset);
  pthread_mutex_unlock(&mu);
  return n;
}

ssize_t write(int fd, const void *data, size_t len) {
  init();
  pthread_mutex_lock(&mu);
  int file = tracked(fd);
  if (file >= 0) {
    if (fcntl(fd, F_GETFL) & O_APPEND) die("O_APPEND write to a tracked file");
    off_t at = lseek(fd, 0, SEEK_CUR);
    record_undo(fd, file, at, at + (off_t)len);
  }
  ssize_t n = real_write(fd, data, len);
  pthread_mutex_unlock(&mu);
  return n;
}

ssize_t writev(int fd, const struct iovec *iov, int count) {
  init();
  pthread_mutex_lock(&mu);
  if (tracked(fd) >= 0) die("writev to a tracked file is not emulated");
  pthread_mutex_unlock(&mu);
  return real_writev(fd, iov, count);
}

ssize_t pwritev(int fd, const struct iovec *iov, int count, off_t offset) {
  init();
  pthread_mutex_lock(&mu);
  if (tracked(fd) >= 0) die("pwritev to a tracked file is not emulated");
  pthread_mutex_unlock(&mu);
  return real_pwritev(fd, iov, count, offset);
}

static int truncate_to(int fd, off_t size, int (*real)(int, off_t)) {
  pthread_mutex_lock(&mu);
  int file = tracked(fd);
  if (file >= 0) {
    struct stat st;
    if (fstat(fd, &st) != 0) die("fstat");
    /* The bytes a shrink drops, or the old size when it grows. */
    record_undo(fd, file, size < st.st_size ? size : st.st_size, st.st_size);
  }
  int r = real(fd, size);
  pthread_mutex_unlock(&mu);
  return r;
}

int ftruncate(int fd, off_t size) {
  init();
  return truncate_to(fd, size, real_ftruncate);
}

int ftruncate64(int fd, off64_t size) {
  init();
  return truncate_to(fd, size, (int (*)(int, off_t))real_ftruncate64);
}

int fallocate(int fd, int mode, off_t offset, off_t len) {
  init();
  pthread_mutex_lock(&mu);
  int file = tracked(fd);
  if (file >= 0) record_undo(fd, file, offset, offset + len);
  int r = real_fallocate(fd, mode, offset, len);
  pthread_mutex_unlock(&mu);
  return r;
}

static int sync_file(int fd, int (*real)(int)) {
  pthread_mutex_lock(&mu);
  int file = tracked(fd);
  if (file < 0) {
    pthread_mutex_unlock(&mu);
    return real(fd);
  }
  if (!files[file].failed && failpath[0] && access(failpath, F_OK) == 0) {
    /* Writeback failed: every description open on the file now sees the error once. */
    files[file].failed = 1;
    for (int i = 0; i < MAXFD; i++)
      if (fds[i].known && fds[i].file == file) fds[i].error_pending = 1;
  }
  if (files[file].failed) {
    int pending = fds[fd].error_pending;
    fds[fd].error_pending = 0;
    pthread_mutex_unlock(&mu);
    if (pending) {
      errno = EIO;
      return -1;
    }
    return 0; /* "success", and nothing is durable: the pages were dropped */
  }
  /* Every record of this file appended so far is of a write that completed before this sync. */
  uint64_t before = seq;
  pthread_mutex_unlock(&mu);
  int r = real(fd);
  if (r != 0) return r;
  pthread_mutex_lock(&mu);
  record_sync(file, before);
  pthread_mutex_unlock(&mu);
  return r;
}

int fsync(int fd) {
  init();
  return sync_file(fd, real_fsync);
}

int fdatasync(int fd) {
  init();
  return sync_file(fd, real_fdatasync);
}
