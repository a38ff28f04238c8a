/* tsr_gemm_auto_tiles: calibrates once and caches the model in
 * $TSR_CACHE_DIR/tile_models, reads it back, returns tiles within the
 * shape and the calibrated range, prefers chains short enough to keep the
 * workers busy, computes a right product with the tiles it chose, and
 * refuses bad arguments; small products have their best candidates tried
 * as whole products. tsr_attention_auto_tiles: tiles that divide T and
 * run the algorithm, tried as whole passes, bad arguments refused. The cache: keyed by the worker
 * set (a restart with other workers calibrates anew, one with the same
 * workers reads the times back), a file of another key or a damaged one
 * calibrated again.   test_tiles_auto CACHE_DIR */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tessera.h"
#include "tsr_check.h"
#include "internal/tsr_tile_model.h"

static const char *slurp(const char *path);

/* How many cached models whose name starts with `prefix`; the path of the
 * last one whose text holds `with` (NULL: any). */
static int count_models(const char *cache, const char *prefix, const char *with, char *path, size_t size)
{
    char dir[3000], file[4200];
    snprintf(dir, sizeof dir, "%s/tile_models", cache);
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && strstr(e->d_name, ".txt") &&
            !strstr(e->d_name, ".tmp")) {
            n++;
            snprintf(file, sizeof file, "%s/%s", dir, e->d_name);
            if (path && (!with || strstr(slurp(file), with)))
                snprintf(path, size, "%s", file);
        }
    if (d)
        closedir(d);
    return n;
}

/* The test's cache starts empty (a former run's files removed). */
static void clear_models(const char *cache)
{
    char dir[3000], path[4200];
    snprintf(dir, sizeof dir, "%s/tile_models", cache);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (strstr(e->d_name, ".txt")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            remove(path);
        }
    if (d)
        closedir(d);
}

/* The whole of a small file, or "" (static). */
static const char *slurp(const char *path)
{
    static char text[65536];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f)
        fclose(f);
    return text;
}

static int restart(tsr_config_t *cfg, int ncpus)
{
    tsr_finalize();
    cfg->ncpus = ncpus;
    return tsr_init(cfg, NULL, NULL);
}

/* A run on one worker (both models used there), then back on two: the
 * two-worker models come from the cache files again. */
static void via_one_worker(tsr_config_t *cfg)
{
    tsr_tiles_t t;
    CHECK_RC(restart(cfg, 1), TSR_SUCCESS);
    CHECK_RC(tsr_attention_auto_tiles(128, 64, 4, 1, 0, TSR_REDUCTION_ORDERED, &t), TSR_SUCCESS);
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 1000, 700, 3000, TSR_REDUCTION_ORDERED, &t), TSR_SUCCESS);
    CHECK_RC(restart(cfg, 2), TSR_SUCCESS);
}

/* The cache: its key names the CPU and CUDA workers; a restart on one
 * worker calibrates a model of its own; back on two, the attention times
 * are read back (the file unchanged, the same tiles and prediction); a file
 * of another key, or a damaged one, is measured again and replaced. */
/* Which candidates the trials try (2 workers, one process): the best of
 * each granularity first, as many as the budget affords, none when fewer
 * than 2 fit or the operands are too large. */
static void check_trial_plan(void)
{
    CHECK(tsr_trials_granularity(16, 16) == 0 && tsr_trials_granularity(17, 16) == 1 &&
          tsr_trials_granularity(64, 16) == 2 && tsr_trials_granularity(65, 16) == 3);
    /* on 2 workers, rounds 1, 1, 4, 32, 2: granularities 0, 0, 2, 5, 1 (the last too slow to count) */
    const double predicted[5] = { 0.10, 0.11, 0.12, 0.13, 0.30 }, tasks[5] = { 2, 2, 8, 64, 4 };
    int order[TSR_TRIAL_PLANNED];
    CHECK(tsr_trials_plan(predicted, tasks, 5, 1e6, order) == 4); /* 3 x (0.46 + 0.30) s is over 2 s */
    CHECK(order[0] == 0 && order[1] == 2 && order[2] == 3 && order[3] == 1 && order[4] == 4);
    CHECK(tsr_trials_plan(predicted, tasks, 5, 2 * TSR_TRIAL_BYTES, order) == 0);
    const double slow[2] = { 0.5, 0.5 };
    CHECK(tsr_trials_plan(slow, tasks, 2, 1e6, order) == 0); /* one affordable: the model decides */
    double quick[20], many[20];
    for (int i = 0; i < 20; i++)
        quick[i] = 0.001, many[i] = 2;
    CHECK(tsr_trials_plan(quick, many, 20, 1e6, order) == TSR_TRIAL_MAX);
}

static void check_cache(tsr_config_t *cfg, const char *cache)
{
    char gemm2[4200], att[4200];
    static char text[65536];
    tsr_tiles_t a, a2, t;
    CHECK_RC(tsr_attention_auto_tiles(1024, 64, 4, 1, 1, TSR_REDUCTION_ORDERED, &a), TSR_SUCCESS);
    CHECK(count_models(cache, "gemm_float32_", NULL, gemm2, sizeof gemm2) == 1);
    CHECK(count_models(cache, "attention_tasks_", NULL, att, sizeof att) == 1);
    CHECK(strstr(slurp(gemm2), ", 2 CPU workers, 0 CUDA workers, ") != NULL);
    snprintf(text, sizeof text, "%s", slurp(att));
    CHECK(strncmp(text, "# attention tasks, 2 CPU workers, 0 CUDA workers, ", 50) == 0);

    via_one_worker(cfg);
    CHECK(count_models(cache, "gemm_float32_", NULL, NULL, 0) == 2 &&
          count_models(cache, "attention_tasks_", NULL, NULL, 0) == 2);
    CHECK_RC(tsr_attention_auto_tiles(1024, 64, 4, 1, 1, TSR_REDUCTION_ORDERED, &a2), TSR_SUCCESS);
    CHECK(a2.qb == a.qb && a2.kvb == a.kvb && a2.predicted_seconds == a.predicted_seconds);
    CHECK(a.mb == 0 && a.nb == 0 && a.kb == 0); /* the attention's tiles alone */
    CHECK(strcmp(slurp(att), text) == 0);

    FILE *f = fopen(att, "w"); /* another key */
    if (f) {
        fputs("# attention tasks, 2 CPU workers, 0 CUDA workers, another BLAS\n64 1 64 64 1 0 1e-9\n", f);
        fclose(f);
    }
    via_one_worker(cfg);
    CHECK_RC(tsr_attention_auto_tiles(1024, 64, 4, 1, 1, TSR_REDUCTION_ORDERED, &a2), TSR_SUCCESS);
    CHECK(strncmp(slurp(att), text, strcspn(text, "\n")) == 0 && !strstr(slurp(att), "1e-09"));

    snprintf(text, sizeof text, "%s", slurp(gemm2));
    text[strcspn(text, "\n")] = '\0';
    f = fopen(gemm2, "w"); /* the right key, then a damaged calibration */
    if (f) {
        fprintf(f, "%s\n32 -1\n", text);
        fclose(f);
    }
    char trials[4200]; /* and trials with a damaged line: those after it run again */
    CHECK(count_models(cache, "gemm_trials_float32_", " 2 CPU workers", trials, sizeof trials) == 2);
    snprintf(text, sizeof text, "%s", slurp(trials));
    text[strcspn(text, "\n")] = '\0';
    if ((f = fopen(trials, "w")) != NULL) {
        fprintf(f, "%s\n1000 700 3000 0 512 nan\n", text);
        fclose(f);
    }
    via_one_worker(cfg);
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 1000, 700, 3000, TSR_REDUCTION_ORDERED, &t), TSR_SUCCESS);
    CHECK(t.predicted_seconds > 0 && isfinite(t.predicted_seconds));
    CHECK(strstr(slurp(gemm2), "\n32 -1\n") == NULL && strstr(slurp(gemm2), "\n2048 ") != NULL);
    CHECK(strstr(slurp(trials), " nan") == NULL && strstr(slurp(trials), "\n1000 700 3000 0 ") != NULL);
}

int main(int argc, char **argv)
{
    if (!tsr_check_cache_dir_arg(argc, argv))
        return 2;
    clear_models(argv[1]);
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    cfg.ncpus = 2;
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 64, 64, 64, TSR_REDUCTION_ORDERED, &(tsr_tiles_t){ 0 }),
             TSR_ENOTINIT);
    CHECK_RC(tsr_init(&cfg, NULL, NULL), TSR_SUCCESS);

    tsr_tiles_t t, again;
    double t0 = tsr_wtime();
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 1000, 700, 3000, TSR_REDUCTION_ORDERED, &t), TSR_SUCCESS);
    double first = tsr_wtime() - t0;
    CHECK(count_models(argv[1], "gemm_", NULL, NULL, 0) >= 1);
    CHECK(t.mb >= 1 && t.mb <= 1000 && t.nb >= 1 && t.nb <= 700 && t.kb >= 1 && t.kb <= 2048);
    CHECK(t.predicted_seconds > 0 && isfinite(t.predicted_seconds));
    CHECK(t.qb == 0 && t.kvb == 0); /* the GEMM's tiles alone */
    printf("1000x700x3000 ordered: tiles %d x %d x %d, predicted %.4f s (first call %.2f s)\n", t.mb, t.nb, t.kb,
           t.predicted_seconds, first);
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 1000, 700, 3000, TSR_REDUCTION_ORDERED, &again), TSR_SUCCESS);
    CHECK(again.mb == t.mb && again.nb == t.nb && again.kb == t.kb);
    /* a small product: its best candidates were tried as whole products
     * (cached, the pick among them); a large one is not tried */
    char trials[4200];
    CHECK(count_models(argv[1], "gemm_trials_float32_", NULL, trials, sizeof trials) == 1);
    CHECK(strstr(slurp(trials), "\n1000 700 3000 0 ") != NULL);
    char line[64];
    snprintf(line, sizeof line, "\n1000 700 3000 0 %d %d %d ", t.mb, t.nb, t.kb);
    CHECK(strstr(slurp(trials), line) != NULL);
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 16384, 16384, 16384, TSR_REDUCTION_ORDERED, &again), TSR_SUCCESS);
    CHECK(strstr(slurp(trials), "\n16384 16384 16384 ") == NULL);

    /* one C tile of 512 x 512 and k = 16384, two workers: one chain of
     * k-tiles would idle a worker; REDUX or a C split must be chosen */
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 512, 512, 16384, TSR_REDUCTION_REDUX, &t), TSR_SUCCESS);
    CHECK(t.kb < 16384);
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 512, 512, 16384, TSR_REDUCTION_ORDERED, &t), TSR_SUCCESS);
    CHECK(t.mb < 512 || t.nb < 512);

    /* the chosen tiles compute the right product */
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 300, 200, 500, TSR_REDUCTION_ORDERED, &t), TSR_SUCCESS);
    tsr_dist_t grid = tsr_dist_block_cyclic(1, 1);
    tsr_desc_t *A, *B, *C;
    CHECK_RC(tsr_desc_create_2d(&A, TSR_FLOAT32, 300, 500, t.mb, t.kb, &grid), TSR_SUCCESS);
    CHECK_RC(tsr_desc_create_2d(&B, TSR_FLOAT32, 500, 200, t.kb, t.nb, &grid), TSR_SUCCESS);
    CHECK_RC(tsr_desc_create_2d(&C, TSR_FLOAT32, 300, 200, t.mb, t.nb, &grid), TSR_SUCCESS);
    tsr_desc_fill_random(A, 1);
    tsr_desc_fill_random(B, 2);
    CHECK_RC(tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 1.0, A, B, 0.0, C, TSR_REDUCTION_ORDERED), TSR_SUCCESS);
    float *c = malloc(sizeof(float) * 300 * 200);
    CHECK_RC(tsr_desc_gather(C, c, 300, 0), TSR_SUCCESS);
    double ref = 0;
    for (int l = 0; l < 500; l++)
        ref += tsr_random_value(1, 0, 299, l) * tsr_random_value(2, 0, l, 199);
    CHECK(fabs(c[199 * 300 + 299] - ref) < 1e-3);
    free(c);
    tsr_desc_destroy(A);
    tsr_desc_destroy(B);
    tsr_desc_destroy(C);

    /* tile rules: a QKV projection's whole heads dividing C, token tiles
     * dividing T; a rule no size can follow is refused */
    tsr_gemm_tile_rules_t rules = { { 64, 0, 0 }, { 768, 256, 0 } };
    CHECK_RC(tsr_gemm_auto_tiles_ruled(TSR_FLOAT32, 2304, 1024, 768, TSR_REDUCTION_ORDERED, &rules, &t), TSR_SUCCESS);
    printf("2304x1024x768 ruled: tiles %d x %d x %d\n", t.mb, t.nb, t.kb);
    CHECK(t.mb % 64 == 0 && 768 % t.mb == 0 && 256 % t.nb == 0 && t.kb >= 1 && t.kb <= 768);
    rules = (tsr_gemm_tile_rules_t){ { 96, 0, 0 }, { 64, 0, 0 } };
    CHECK_RC(tsr_gemm_auto_tiles_ruled(TSR_FLOAT32, 512, 512, 512, TSR_REDUCTION_ORDERED, &rules, &t), TSR_EINVAL);
    rules = (tsr_gemm_tile_rules_t){ { -1, 0, 0 }, { 0, 0, 0 } };
    CHECK_RC(tsr_gemm_auto_tiles_ruled(TSR_FLOAT32, 512, 512, 512, TSR_REDUCTION_ORDERED, &rules, &t), TSR_EINVAL);
    rules = (tsr_gemm_tile_rules_t){ { 0, 0, 100 }, { 0, 0, 0 } }; /* multiples of 100 within k 512 */
    CHECK_RC(tsr_gemm_auto_tiles_ruled(TSR_FLOAT32, 512, 512, 512, TSR_REDUCTION_ORDERED, &rules, &t), TSR_SUCCESS);
    CHECK(t.kb % 100 == 0 && t.kb <= 512);

    /* bad arguments */
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 0, 10, 10, TSR_REDUCTION_ORDERED, &t), TSR_EINVAL);
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 10, 10, 10, (tsr_reduction_t)7, &t), TSR_EINVAL);
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 10, 10, 10, TSR_REDUCTION_ORDERED, NULL), TSR_EINVAL);
    double s;
    CHECK_RC(tsr_gemm_task_seconds(TSR_FLOAT32, 0, 1, 1, &s), TSR_EINVAL);
    /* a whole ordered product: 2 x 2 C tiles, chains of 3 k tiles (the last
     * one shorter), its task shapes measured first: the 256^3 task time below
     * is then the one the phase used (a calibration curve point and a
     * measured shape differ by the machine's noise, under load by more than
     * the margins here) */
    double work, tasks, chain, one_k, one_chain;
    CHECK_RC(tsr_gemm_phase_seconds(TSR_FLOAT32, 512, 512, 640, 256, 256, 256, 1, &work, &tasks, &chain), TSR_SUCCESS);
    CHECK_RC(tsr_gemm_task_seconds(TSR_FLOAT32, 256, 256, 256, &s), TSR_SUCCESS);
    CHECK(s > 0);
    CHECK(tasks == 12);
    printf("phase 512x512x640 in 256 tiles: chain %.3g s, one 256^3 task %.3g s\n", chain, s);
    CHECK(chain > 2 * s && chain < 3 * s * 2); /* two full tasks and a shorter one, each also reading memory */
    CHECK(work > 4 * chain * 0.99 && work < 4 * chain * 1.01); /* four equal chains */
    CHECK_RC(tsr_gemm_phase_seconds(TSR_FLOAT32, 256, 256, 256, 256, 256, 256, 1, &one_k, &tasks, &one_chain),
             TSR_SUCCESS);
    CHECK(tasks == 1 && one_k == one_chain && one_k > s); /* the task plus reading its A and B tiles */
    CHECK_RC(tsr_gemm_phase_seconds(TSR_FLOAT32, 512, 0, 640, 256, 256, 256, 0, &work, &tasks, &chain), TSR_EINVAL);
    CHECK_RC(tsr_gemm_phase_seconds(TSR_FLOAT32, 512, 512, 640, 256, 256, 256, 0, NULL, &tasks, &chain), TSR_EINVAL);

    /* attention: tiles that divide T, a valid tiling for the algorithm */
    for (int backward = 0; backward <= 1; backward++) {
        tsr_tiles_t a = { 0 };
        CHECK_RC(tsr_attention_auto_tiles(512, 64, 4, 1, backward, TSR_REDUCTION_REDUX, &a), TSR_SUCCESS);
        int qb = a.qb, kb = a.kvb;
        double pred = a.predicted_seconds;
        CHECK(qb >= 64 && qb <= 512 && 512 % qb == 0 && kb >= 64 && kb <= 512 && 512 % kb == 0);
        CHECK(pred > 0 && isfinite(pred));
        /* a small pass: its best candidates were tried, the pick among them */
        char trials[4200], line[64];
        CHECK(count_models(argv[1], "attention_trials_", NULL, trials, sizeof trials) == 1);
        snprintf(line, sizeof line, "\n512 64 4 1 %d 1 %d %d ", backward, qb, kb);
        CHECK(strstr(slurp(trials), line) != NULL);
        if (!backward) {
            tsr_desc_t *q = NULL, *k = NULL, *v = NULL, *o = NULL, *st = NULL;
            CHECK_RC(tsr_desc_create(&q, TSR_FLOAT32, 4, 64, 512, 1, 64, qb, NULL), TSR_SUCCESS);
            CHECK_RC(tsr_desc_create(&o, TSR_FLOAT32, 4, 64, 512, 1, 64, qb, NULL), TSR_SUCCESS);
            CHECK_RC(tsr_desc_create(&st, TSR_FLOAT32, 4, 2, 512, 1, 2, qb, NULL), TSR_SUCCESS);
            CHECK_RC(tsr_desc_create(&k, TSR_FLOAT32, 4, 64, 512, 1, 64, kb, NULL), TSR_SUCCESS);
            CHECK_RC(tsr_desc_create(&v, TSR_FLOAT32, 4, 64, 512, 1, 64, kb, NULL), TSR_SUCCESS);
            CHECK_RC(tsr_desc_fill_random(q, 1), TSR_SUCCESS);
            CHECK_RC(tsr_desc_fill_random(k, 2), TSR_SUCCESS);
            CHECK_RC(tsr_desc_fill_random(v, 3), TSR_SUCCESS);
            CHECK_RC(tsr_attention_forward(q, k, v, o, st), TSR_SUCCESS);
            CHECK_RC(tsr_wait(), TSR_SUCCESS);
            tsr_desc_t *all[] = { q, k, v, o, st };
            for (int i = 0; i < 5; i++)
                tsr_desc_destroy(all[i]);
        }
    }
    tsr_tiles_t a = { 0 };
    CHECK_RC(tsr_attention_auto_tiles(96, 32, 2, 1, 0, TSR_REDUCTION_ORDERED, &a), TSR_SUCCESS);
    CHECK(a.qb == 96 && a.kvb == 96); /* no candidate divides 96: one tile */
    CHECK_RC(tsr_attention_auto_tiles(0, 64, 4, 1, 0, TSR_REDUCTION_ORDERED, &a), TSR_EINVAL);
    CHECK_RC(tsr_attention_auto_tiles(512, 64, 4, 1, 2, TSR_REDUCTION_ORDERED, &a), TSR_EINVAL);
    CHECK_RC(tsr_attention_auto_tiles(512, 64, 4, 1, 1, (tsr_reduction_t)7, &a), TSR_EINVAL);
    CHECK_RC(tsr_attention_auto_tiles(512, 64, 4, 1, 0, TSR_REDUCTION_ORDERED, NULL), TSR_EINVAL);
    check_trial_plan();
    check_cache(&cfg, argv[1]);
    tsr_finalize();
    return tsr_check_report("test_tiles_auto");
}
