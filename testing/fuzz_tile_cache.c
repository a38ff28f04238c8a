/* Mutation fuzzing of the tile-model cache files (the trials of GEMM,
 * attention and the GPT-2 step, and the attention task times are all read
 * by tsr_trials_load): each iteration writes a cache file of valid lines
 * with mutations (a number replaced by an edge value such as 1e308, nan,
 * -1 or 99999999999999999999, bytes flipped, lines cut or glued, the key
 * line damaged), loads it and checks that the load returns, keeps at most
 * TSR_MAX_TRIALS entries, and that every entry kept has a time within
 * [TSR_TILE_TIME_MIN, TSR_TILE_TIME_MAX]. A crash or hang fails the run.
 * Deterministic (xorshift from SEED); a failure keeps its file as
 * WORKDIR/fuzz_fail.txt.
 *
 *   fuzz_tile_cache WORKDIR ITERATIONS [SEED] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "tessera.h"
#include "tsr_check.h"
#include "internal/tsr_tile_model.h"
#include "tsr_fuzz_random.h"


static const char *const edges[] = { "1e308", "-1e308", "1e30", "1e10", "0", "-0", "-1", "nan", "inf", "-inf",
                                     "1e-320", "99999999999999999999", "-2147483649", "2147483648", "0x10",
                                     "", "--", "1e", ".", "3.5e-9", "86400", "86401" };

/* One cache file's text: the key line (sometimes damaged), then rows of
 * nkeys integers and a time, with mutations. Returns its length. */
static size_t make_file(char *buf, size_t cap, const char *key, int nkeys)
{
    size_t len = (size_t)snprintf(buf, cap, "# %s\n", key);
    if (next_random() % 16 == 0)
        buf[2 + next_random() % (strlen(key) + 1)] ^= 0x20; /* a damaged key: the file is not this model's */
    int rows = (int)(next_random() % 40);
    for (int r = 0; r < rows && len + 256 < cap; r++) {
        for (int i = 0; i <= nkeys; i++) {
            char num[64];
            if (next_random() % 8 == 0)
                snprintf(num, sizeof num, "%s", edges[next_random() % (sizeof edges / sizeof edges[0])]);
            else if (i < nkeys)
                snprintf(num, sizeof num, "%d", (int)(next_random() % 5000));
            else
                snprintf(num, sizeof num, "%.17g", (double)(next_random() % 1000000) * 1e-7);
            len += (size_t)snprintf(buf + len, cap - len, "%s%s", num, i < nkeys ? " " : "\n");
        }
    }
    int flips = (int)(next_random() % 4);
    for (int f = 0; f < flips && len > 0; f++)
        buf[next_random() % len] = (char)(next_random() % 256); /* a byte anywhere, newlines and NULs too */
    if (len > 0 && next_random() % 4 == 0)
        len = next_random() % len; /* cut short */
    return len;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s WORKDIR ITERATIONS [SEED]\n", argv[0]);
        return 2;
    }
    const char *work = argv[1];
    long iterations = strtol(argv[2], NULL, 10);
    rng_state = argc > 3 ? strtoull(argv[3], NULL, 10) | 1 : 88172645463325252ull;
    setenv("TSR_CACHE_DIR", work, 1);
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    cfg.ncpus = 1;
    cfg.verbose = 0;
    if (tsr_init(&cfg, &argc, &argv) != 0)
        return 2;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tile_models", work);
    mkdir(work, 0700);
    mkdir(dir, 0700);
    static char buf[1 << 16];
    static tsr_trials_t tr;
    for (long it = 0; it < iterations && !tsr_checks_failed; it++) {
        char name[32];
        int nkeys = 1 + (int)(next_random() % TSR_TRIAL_KEYS);
        snprintf(name, sizeof name, "fuzz trials %ld", it); /* a new key: load reads the file again */
        tsr_tile_cache_t c = { "", "" };
        tsr_tile_cache_init(&c, name);
        size_t len = make_file(buf, sizeof buf, c.key, nkeys);
        FILE *f = fopen(c.path, "w");
        if (f) {
            fwrite(buf, 1, len, f);
            fclose(f);
        }
        int rc = tsr_trials_load(&tr, name, nkeys);
        int ok = rc == TSR_SUCCESS && tr.n >= 0 && tr.n <= TSR_MAX_TRIALS;
        for (int j = 0; ok && j < tr.n; j++)
            ok = tsr_tile_time_ok(tr.seconds[j]);
        if (!ok) {
            char keep[4200];
            snprintf(keep, sizeof keep, "%s/fuzz_fail.txt", work);
            FILE *f = fopen(keep, "w");
            if (f) {
                fwrite(buf, 1, len, f);
                fclose(f);
            }
            fprintf(stderr, "iteration %ld: load returned %d with %d entries (file kept as %s)\n", it, rc, tr.n, keep);
        }
        CHECK(ok);
        remove(c.path);
    }
    int rc = tsr_check_report("fuzz_tile_cache");
    tsr_finalize();
    return rc;
}
