/* Internal (not installed): how Tessera opens the files it is given by name
 * (docs/files.md states the rules). Names come from users, environments
 * and caches, so every file is written through a private temporary that
 * is renamed over its target, read only if it is a regular file, and never
 * written where another of the run's files lives. */
#ifndef TSR_FILES_H
#define TSR_FILES_H
#include <stddef.h>
#include <stdio.h>

/* This host's name with anything but [A-Za-z0-9-] made '_' (it goes into
 * file names), in out (n bytes). */
void tsr_host_name(char *out, size_t n);

/* A new private temporary beside target, to be renamed over it:
 * "<target>.tmp.<host>.<pid>.XXXXXX", created with O_EXCL (a planted file or
 * link of that name is never opened) and mode 0600. Returns its descriptor
 * and its name in tmp (n bytes), or -1 with errno set. */
int tsr_temp_beside(const char *target, char *tmp, size_t n);

/* Gives the temporary the mode a new file would have (0666 less the umask)
 * or target's own when target exists, just before the rename. */
int tsr_temp_publish_mode(int fd, const char *target);

/* Whether process pid of this host may still run: 1 unless it is gone or
 * a zombie (its exit not yet collected: under a container's init that
 * does not reap, an orphan stays one for good). Own process included. */
int tsr_process_runs(long pid);

/* Removes the temporaries of tsr_temp_beside(target) that processes of this
 * host left behind and that no longer run (killed, power lost); says so for
 * each. Files of other users or hosts are left alone. */
void tsr_remove_stale_temps(const char *target);

/* fopen(path, "r") for a regular file only: a FIFO or device is refused
 * (errno EINVAL) without blocking, and O_CLOEXEC is set. NULL with errno on
 * failure. */
FILE *tsr_open_regular(const char *path);

/* An output written in place (a per-step CSV): opened for writing, created
 * 0666 less the umask, truncated or (append) appended to. Never blocks: it
 * is opened with O_NONBLOCK (a FIFO without a reader fails at once, ENXIO)
 * and must be a regular file (else EINVAL: a FIFO with a reader, a device);
 * the stream then blocks as usual. NULL with errno on failure. */
FILE *tsr_open_output(const char *path, int append);
/* Whether path can be such an output, before anything starts: absent, or
 * an existing regular file (through links). 0, or -1 with errno (EINVAL:
 * exists and is not a regular file). */
int tsr_output_check(const char *path);

/* 1 when a and b name the same file: the same device and inode when both
 * exist, otherwise the same directory (resolved) and the same last name. */
int tsr_same_file(const char *a, const char *b);

/* Atomic file writing, for every file Tessera writes by name: begin removes
 * the temporaries of path that dead processes of this host left, then
 * creates a private one next to path (tsr_temp_beside: O_EXCL, mode 0600,
 * never a planted file or link); write appends (errors are remembered);
 * commit flushes, fsyncs, gives it path's mode (or 0666 less the umask),
 * closes, renames over path and fsyncs the directory (af->f may also be
 * written directly: a write error there fails the commit); abort (or a
 * failed commit) removes the temp file. An existing
 * path must be a regular file (never a device, FIFO or directory); a symlink
 * is followed: its target is replaced atomically and the link stays. check
 * does begin + abort: is the path writable, before a long run. */
typedef struct {
    FILE *f;
    char *path;
    char *tmp_path;
    int failed;
} tsr_atomic_file_t;
int tsr_atomic_begin(tsr_atomic_file_t *af, const char *path);
int tsr_atomic_write(tsr_atomic_file_t *af, const void *data, size_t bytes);
int tsr_atomic_commit(tsr_atomic_file_t *af);
void tsr_atomic_abort(tsr_atomic_file_t *af);
int tsr_atomic_check(const char *path);

#endif
