/* FxT execution traces: StarPU records one trace file per rank into the
 * trace directory; after StarPU stops, rank 0 converts them with
 * starpu_fxt_tool into paje.trace (ViTE) and tasks.rec (the task list). */
#define _GNU_SOURCE
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>
#include <starpu.h>
#include "tsr_context.h"

#define TRACE_FILE_STEM "tessera_fxt" /* StarPU appends _<rank> */

static char trace_dir[4096];

#ifdef STARPU_USE_FXT
static int make_directory(const char *dir)
{
    struct stat st;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        tsr_log(TSR_LOG_ERROR, "trace: cannot create directory %s: %s", dir, strerror(errno));
        return TSR_EIO;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        tsr_log(TSR_LOG_ERROR, "trace: %s is not a directory", dir);
        return TSR_EIO;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        tsr_log(TSR_LOG_ERROR, "trace: directory %s is not writable", dir);
        return TSR_EIO;
    }
    return TSR_SUCCESS;
}
#endif

int tsr_trace_prepare(const char *dir)
{
    trace_dir[0] = '\0';
    if (!dir)
        return TSR_SUCCESS;
#ifndef STARPU_USE_FXT
    tsr_log(TSR_LOG_ERROR, "trace: this StarPU was built without FxT; build one with deps/starpu/build.sh");
    return TSR_ENOTSUP;
#else
    if (!*dir || strlen(dir) >= sizeof trace_dir - 64) {
        tsr_log(TSR_LOG_ERROR, "trace: bad directory name '%s'", dir);
        return TSR_EINVAL;
    }
    int rc = make_directory(dir);
    if (rc)
        return rc;
    snprintf(trace_dir, sizeof trace_dir, "%s", dir);
    setenv("STARPU_FXT_TRACE", "1", 1);
    setenv("STARPU_FXT_PREFIX", dir, 1);
    setenv("STARPU_FXT_SUFFIX", TRACE_FILE_STEM, 1);
    return TSR_SUCCESS;
#endif
}

int tsr_trace_active(void) { return trace_dir[0] != '\0'; }

/* starpu_fxt_tool of the StarPU Tessera was built with, else the one beside
 * this program (a relocated bundle), else the one on PATH. */
static const char *fxt_tool_path(char *buf, size_t size)
{
    snprintf(buf, size, "%s/bin/starpu_fxt_tool", TSR_STARPU_PREFIX);
    if (access(buf, X_OK) == 0)
        return buf;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *slash = n > 0 ? (exe[n] = '\0', strrchr(exe, '/')) : NULL;
    if (slash) {
        *slash = '\0';
        snprintf(buf, size, "%s/starpu_fxt_tool", exe);
        if (access(buf, X_OK) == 0)
            return buf;
    }
    return "starpu_fxt_tool";
}

/* Run starpu_fxt_tool -d DIR -i DIR/tessera_fxt_0 ... with its output in
 * DIR/starpu_fxt_tool.log. */
static int convert(int nranks)
{
    char tool[4096 + 32], log_path[sizeof trace_dir + 32];
    char (*inputs)[sizeof trace_dir + 32] = calloc((size_t)nranks, sizeof *inputs);
    char **argv = calloc((size_t)nranks + 6, sizeof *argv);
    int rc = TSR_SUCCESS;
    if (!inputs || !argv) {
        rc = TSR_ENOMEM;
        goto out;
    }
    int a = 0;
    argv[a++] = (char *)fxt_tool_path(tool, sizeof tool);
    argv[a++] = "-d";
    argv[a++] = trace_dir;
    argv[a++] = "-i";
    for (int r = 0; r < nranks; r++) {
        snprintf(inputs[r], sizeof inputs[r], "%s/" TRACE_FILE_STEM "_%d", trace_dir, r);
        argv[a++] = inputs[r];
    }
    snprintf(log_path, sizeof log_path, "%s/starpu_fxt_tool.log", trace_dir);
    posix_spawn_file_actions_t io;
    posix_spawn_file_actions_init(&io);
    /* O_NONBLOCK: a FIFO planted there fails at once instead of blocking the tool */
    posix_spawn_file_actions_addopen(&io, 1, log_path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK, 0666);
    posix_spawn_file_actions_adddup2(&io, 1, 2);
    pid_t pid;
    extern char **environ;
    int err = posix_spawnp(&pid, argv[0], &io, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&io);
    int status = 0;
    if (err) {
        tsr_log(TSR_LOG_ERROR, "trace: cannot run %s: %s", argv[0], strerror(err));
        rc = TSR_ERUNTIME;
    } else if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        tsr_log(TSR_LOG_ERROR, "trace: %s failed (see %s)", argv[0], log_path);
        rc = TSR_ERUNTIME;
    } else {
        tsr_log(TSR_LOG_INFO, "trace: %s/paje.trace (ViTE), %s/tasks.rec (task list)", trace_dir, trace_dir);
    }
out:
    free(inputs);
    free(argv);
    return rc;
}

int tsr_trace_finish(int rank, int nranks)
{
    if (!tsr_trace_active())
        return TSR_SUCCESS;
    int rc = rank == 0 ? convert(nranks) : TSR_SUCCESS;
    trace_dir[0] = '\0';
    unsetenv("STARPU_FXT_TRACE"); /* a later tsr_init without a trace records none */
    unsetenv("STARPU_FXT_PREFIX");
    unsetenv("STARPU_FXT_SUFFIX");
    return rc;
}
