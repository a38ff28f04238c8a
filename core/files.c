/* Files given by name: private temporaries, stale-temporary cleanup,
 * regular-file reads, same-file checks (tsr_files.h). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tsr_core.h"
#include "tsr_files.h"

void tsr_host_name(char *out, size_t n)
{
    if (gethostname(out, n) != 0 || !*out)
        snprintf(out, n, "host");
    out[n - 1] = '\0';
    for (char *p = out; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-'))
            *p = '_';
}

int tsr_process_runs(long pid)
{
    if (pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH))
        return 0;
    /* /proc/<pid>/stat: "pid (comm) S ...", comm may hold ')' */
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "re");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    const char *close_paren = strrchr(buf, ')');
    return !(close_paren && close_paren[1] == ' ' && (close_paren[2] == 'Z' || close_paren[2] == 'X'));
}

/* "<target>.tmp.<host>." : the part of a temporary's name before the pid. */
static int temp_prefix(const char *target, char *out, size_t n)
{
    char host[64];
    tsr_host_name(host, sizeof host);
    int len = snprintf(out, n, "%s.tmp.%s.", target, host);
    return len < 0 || (size_t)len >= n ? -1 : len;
}

int tsr_temp_beside(const char *target, char *tmp, size_t n)
{
    int len = temp_prefix(target, tmp, n);
    if (len < 0 || (size_t)len + 32 > n) {
        errno = ENAMETOOLONG;
        return -1;
    }
    snprintf(tmp + len, n - (size_t)len, "%ld.XXXXXX", (long)getpid());
    return mkostemp(tmp, O_CLOEXEC); /* O_CREAT | O_EXCL, mode 0600 */
}

/* The process umask, read without changing it (umask() would, for every
 * thread of the process at once). */
static mode_t current_umask(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    unsigned mask = 022;
    char line[128];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Umask: %o", &mask) == 1)
            break;
    if (f)
        fclose(f);
    return (mode_t)mask;
}

int tsr_temp_publish_mode(int fd, const char *target)
{
    struct stat st;
    mode_t mode = stat(target, &st) == 0 ? st.st_mode & 07777 : 0666 & ~current_umask();
    return fchmod(fd, mode);
}

/* The directory of path (".", "/" or its leading part), in out. */
static void dir_of(const char *path, char *out, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, n, ".");
    else if (slash == path)
        snprintf(out, n, "/");
    else
        snprintf(out, n, "%.*s", (int)(slash - path), path);
}

void tsr_remove_stale_temps(const char *target)
{
    char prefix[PATH_MAX + 96], dir[PATH_MAX];
    if (!target || temp_prefix(target, prefix, sizeof prefix) < 0)
        return;
    dir_of(target, dir, sizeof dir);
    const char *slash = strrchr(prefix, '/');
    const char *name_prefix = slash ? slash + 1 : prefix;
    size_t plen = strlen(name_prefix);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, name_prefix, plen) != 0)
            continue;
        char *end;
        errno = 0;
        long pid = strtol(e->d_name + plen, &end, 10);
        if (errno || pid <= 0 || end == e->d_name + plen || strncmp(end, ".", 1) != 0 || strlen(end) != 7 ||
            pid == (long)getpid() || tsr_process_runs(pid))
            continue; /* not one of ours, or its process still runs */
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != getuid())
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0)
            tsr_log(TSR_LOG_INFO, "removed %s/%s, a temporary file that process %ld left (it no longer runs)", dir,
                    e->d_name, pid);
    }
    closedir(d);
}

/* open(path, oflags | O_NONBLOCK, mode) on a regular file only (EINVAL for a
 * FIFO, a device or a directory: O_NONBLOCK keeps a FIFO from blocking the
 * open), then blocking again. Returns the descriptor, or -1 with errno. */
static int open_regular_fd(const char *path, int oflags, mode_t mode)
{
    int fd = open(path, oflags | O_NONBLOCK | O_CLOEXEC, mode);
    if (fd < 0)
        return -1;
    struct stat st;
    int flags;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    if ((flags = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

FILE *tsr_open_regular(const char *path)
{
    int fd = open_regular_fd(path, O_RDONLY, 0);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "r");
    if (!f)
        close(fd);
    return f;
}

FILE *tsr_open_output(const char *path, int append)
{
    int fd = open_regular_fd(path, O_WRONLY | O_CREAT | (append ? O_APPEND : 0), 0666);
    if (fd < 0)
        return NULL;
    FILE *f = NULL;
    /* appending: at the end already, so that ftell tells an empty file from a written one */
    if (append ? lseek(fd, 0, SEEK_END) >= 0 : ftruncate(fd, 0) == 0)
        f = fdopen(fd, append ? "a" : "w");
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

int tsr_output_check(const char *path)
{
    struct stat st;
    if (!path || !*path) {
        errno = ENOENT;
        return -1;
    }
    if (stat(path, &st) != 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISREG(st.st_mode)) {
        errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        return -1;
    }
    return 0;
}

/* The resolved directory of path and its last name, "dir/name", in out. */
static int resolved_name(const char *path, char *out, size_t n)
{
    char dir[PATH_MAX], real[PATH_MAX];
    dir_of(path, dir, sizeof dir);
    const char *slash = strrchr(path, '/');
    if (!realpath(dir, real))
        return -1;
    int len = snprintf(out, n, "%s/%s", real, slash ? slash + 1 : path);
    return len < 0 || (size_t)len >= n ? -1 : 0;
}

int tsr_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (!a || !b)
        return 0;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char ra[PATH_MAX + NAME_MAX + 2], rb[PATH_MAX + NAME_MAX + 2];
    if (resolved_name(a, ra, sizeof ra) != 0 || resolved_name(b, rb, sizeof rb) != 0)
        return strcmp(a, b) == 0;
    return strcmp(ra, rb) == 0;
}

/* ---- atomic files ---------------------------------------------------------- */

/* The file an atomic write replaces: path itself, or the file a symlink
 * points to (the link stays a link). Existing targets must be regular files:
 * a device, FIFO or directory is never replaced. Returns a malloc'd path or
 * NULL (message printed). */
static char *atomic_target(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return strdup(path);
        tsr_log(TSR_LOG_ERROR, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *target = S_ISLNK(st.st_mode) ? realpath(path, NULL) : strdup(path);
    if (!target) {
        tsr_log(TSR_LOG_ERROR, "%s: a symbolic link to a missing file: give the target itself", path);
        return NULL;
    }
    if (stat(target, &st) == 0 && !S_ISREG(st.st_mode)) {
        tsr_log(TSR_LOG_ERROR, "%s exists and is not a regular file: refusing to replace it", path);
        free(target);
        return NULL;
    }
    return target;
}

int tsr_atomic_begin(tsr_atomic_file_t *af, const char *path)
{
    if (!af || !path || !*path) {
        tsr_log(TSR_LOG_ERROR, "tsr_atomic_begin: no file name");
        return TSR_EINVAL;
    }
    memset(af, 0, sizeof *af);
    char *target = atomic_target(path);
    if (!target)
        return TSR_EIO;
    path = target;
    size_t n = strlen(path) + 128;
    af->path = malloc(strlen(path) + 1);
    af->tmp_path = malloc(n);
    if (!af->path || !af->tmp_path) {
        free(af->path);
        free(af->tmp_path);
        af->path = af->tmp_path = NULL;
        tsr_log(TSR_LOG_ERROR, "%s: out of memory", path);
        free(target);
        return TSR_ENOMEM;
    }
    strcpy(af->path, path);
    free(target);
    path = af->path;
    tsr_remove_stale_temps(path);
    int fd = tsr_temp_beside(path, af->tmp_path, n);
    if (fd < 0) {
        tsr_log(TSR_LOG_ERROR, "%s: cannot create temporary file %s: %s", path, af->tmp_path,
                strerror(errno));
        free(af->path);
        free(af->tmp_path);
        af->path = af->tmp_path = NULL;
        return TSR_EIO;
    }
    af->f = fdopen(fd, "wb");
    if (!af->f) {
        tsr_log(TSR_LOG_ERROR, "%s: fdopen: %s", af->tmp_path, strerror(errno));
        close(fd);
        unlink(af->tmp_path);
        free(af->path);
        free(af->tmp_path);
        af->path = af->tmp_path = NULL;
        return TSR_EIO;
    }
    return 0;
}

int tsr_atomic_write(tsr_atomic_file_t *af, const void *data, size_t bytes)
{
    if (!af || !af->f)
        return TSR_EINVAL;
    if (af->failed)
        return TSR_EIO;
    if (bytes && fwrite(data, 1, bytes, af->f) != bytes) {
        tsr_log(TSR_LOG_ERROR, "%s: write failed: %s", af->tmp_path, strerror(errno));
        af->failed = 1;
        return TSR_EIO;
    }
    return 0;
}

static void free_af(tsr_atomic_file_t *af)
{
    free(af->path);
    free(af->tmp_path);
    af->path = af->tmp_path = NULL;
    af->f = NULL;
}

void tsr_atomic_abort(tsr_atomic_file_t *af)
{
    if (!af)
        return;
    if (af->f)
        fclose(af->f);
    if (af->tmp_path)
        unlink(af->tmp_path);
    free_af(af);
}

static void fsync_parent_dir(const char *path)
{
    char *dir = malloc(strlen(path) + 2);
    if (!dir)
        return;
    strcpy(dir, path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        fsync(fd); /* best effort: some file systems refuse fsync on directories */
        close(fd);
    }
    free(dir);
}

int tsr_atomic_commit(tsr_atomic_file_t *af)
{
    if (!af || !af->f)
        return TSR_EINVAL;
    int ok = !af->failed && !ferror(af->f); /* also writes made with fprintf(af->f) */
    if (ok && fflush(af->f) != 0) {
        tsr_log(TSR_LOG_ERROR, "%s: write failed: %s", af->tmp_path, strerror(errno));
        ok = 0;
    }
    if (ok && fsync(fileno(af->f)) != 0) {
        tsr_log(TSR_LOG_ERROR, "%s: fsync failed: %s", af->tmp_path, strerror(errno));
        ok = 0;
    }
    if (ok && tsr_temp_publish_mode(fileno(af->f), af->path) != 0) {
        tsr_log(TSR_LOG_ERROR, "%s: chmod failed: %s", af->tmp_path, strerror(errno));
        ok = 0;
    }
    int closed = fclose(af->f);
    af->f = NULL;
    if (ok && closed != 0) {
        tsr_log(TSR_LOG_ERROR, "%s: close failed: %s", af->tmp_path, strerror(errno));
        ok = 0;
    }
    if (ok && rename(af->tmp_path, af->path) != 0) {
        tsr_log(TSR_LOG_ERROR, "%s: cannot rename %s over it: %s", af->path, af->tmp_path,
                strerror(errno));
        ok = 0;
    }
    if (!ok) {
        unlink(af->tmp_path);
        free_af(af);
        return TSR_EIO;
    }
    fsync_parent_dir(af->path);
    free_af(af);
    return 0;
}

int tsr_atomic_check(const char *path)
{
    tsr_atomic_file_t af;
    int rc = tsr_atomic_begin(&af, path);
    if (!rc)
        tsr_atomic_abort(&af);
    return rc;
}
