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

/* This host's name with anything but [A-Za-z0-9-] made '_' (it goes into
 * file names). */
static void host_name(char *out, size_t n)
{
    if (gethostname(out, n) != 0 || !*out)
        snprintf(out, n, "host");
    out[n - 1] = '\0';
    for (char *p = out; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-'))
            *p = '_';
}

/* "<target>.tmp.<host>." : the part of a temporary's name before the pid. */
static int temp_prefix(const char *target, char *out, size_t n)
{
    char host[64];
    host_name(host, sizeof host);
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
            pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
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

FILE *tsr_open_regular(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return NULL;
    }
    int flags = fcntl(fd, F_GETFL);
    FILE *f = flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ? NULL : fdopen(fd, "r");
    if (!f)
        close(fd);
    return f;
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
