/* Helpers for the GPT-2 I/O tests: capture what the code under test logs on
 * stderr (to check that error messages name the file and the problem), and
 * write small files. Header-only; include once per test program. */
#ifndef TEST_GPT2_COMMON_H
#define TEST_GPT2_COMMON_H
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tsr_check.h"

static int capture_saved_fd = -1;
static char capture_path[4096];
static char capture_text[8192];

/* Redirect stderr into a file under dir until capture_end. */
static inline void capture_begin(const char *dir)
{
    fflush(stderr);
    snprintf(capture_path, sizeof capture_path, "%s/stderr_capture.txt", dir);
    int fd = open(capture_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(capture_path);
        exit(2);
    }
    capture_saved_fd = dup(2);
    dup2(fd, 2);
    close(fd);
}

/* Restore stderr; returns what was written meanwhile (also echoed). */
static inline const char *capture_end(void)
{
    fflush(stderr);
    dup2(capture_saved_fd, 2);
    close(capture_saved_fd);
    capture_saved_fd = -1;
    capture_text[0] = '\0';
    FILE *f = fopen(capture_path, "r");
    if (f) {
        size_t n = fread(capture_text, 1, sizeof capture_text - 1, f);
        capture_text[n] = '\0';
        fclose(f);
    }
    fprintf(stderr, "  (expected) %s", capture_text);
    return capture_text;
}

/* 1 when text contains every non-NULL needle */
static inline int has_all(const char *text, const char *a, const char *b)
{
    return (!a || strstr(text, a)) && (!b || strstr(text, b));
}

/* CHECKs that a failure's message (msg) names the file and the problem. */
static inline void check_message(const char *msg, const char *name, const char *needle)
{
    if (!has_all(msg, name, needle))
        fprintf(stderr, "FAILED: message for %s lacks '%s'\n", name, needle);
    CHECK(has_all(msg, name, needle));
}

/* 0 when all bytes were written and the file closed without error */
static inline int write_file(const char *path, const void *data, size_t bytes)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = bytes ? fwrite(data, 1, bytes, f) : 0;
    int closed = fclose(f);
    return w == bytes && closed == 0 ? 0 : -1;
}

/* malloc'd contents of a file (*bytes its size), NULL if unreadable */
static inline void *read_file(const char *path, size_t *bytes)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf)
        *bytes = (size_t)n;
    return buf;
}

static inline void make_dir(const char *dir)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        perror(dir);
        exit(2);
    }
}

static inline void join(char *out, size_t cap, const char *dir, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

/* A bad input of the tests: path = dir/name (cap bytes) holding data
 * (bytes), or no such file when data is NULL. */
static inline void bad_file(char *path, size_t cap, const char *dir, const char *name, const void *data,
                            size_t bytes)
{
    join(path, cap, dir, name);
    if (data)
        CHECK(write_file(path, data, bytes) == 0);
}

/* The GPT-2 test programs' arguments, DATADIR TMPDIR: TMPDIR is made and
 * returned, a wrong count exits with the usage (status 2). */
static inline const char *test_tmpdir(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s DATADIR TMPDIR\n", argv[0]);
        exit(2);
    }
    make_dir(argv[2]);
    return argv[2];
}
#endif
