/* tsr_gemm_auto_tiles: calibrates once and caches the model in
 * $TSR_CACHE_DIR/tile_models, reads it back, returns tiles within the
 * shape and the calibrated range, prefers chains short enough to keep the
 * workers busy, computes a right product with the tiles it chose, and
 * refuses bad arguments. tsr_attention_auto_tiles: tiles that divide T and
 * run the algorithm, bad arguments refused.   test_tiles_auto CACHE_DIR */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tessera.h"
#include "tsr_check.h"

static int count_models(const char *cache)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tile_models", cache);
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strstr(e->d_name, ".txt") != NULL;
    if (d)
        closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CACHE_DIR\n", argv[0]);
        return 2;
    }
    setenv("TSR_CACHE_DIR", argv[1], 1);
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    cfg.ncpus = 2;
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 64, 64, 64, TSR_ACCUM_ORDERED, &(tsr_gemm_tiles_t){ 0 }),
             TSR_ENOTINIT);
    CHECK_RC(tsr_init(&cfg, NULL, NULL), TSR_SUCCESS);

    tsr_gemm_tiles_t t, again;
    double t0 = tsr_wtime();
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 1000, 700, 3000, TSR_ACCUM_ORDERED, &t), TSR_SUCCESS);
    double first = tsr_wtime() - t0;
    CHECK(count_models(argv[1]) >= 1);
    CHECK(t.mb >= 1 && t.mb <= 1000 && t.nb >= 1 && t.nb <= 700 && t.kb >= 1 && t.kb <= 2048);
    CHECK(t.predicted_seconds > 0 && isfinite(t.predicted_seconds));
    printf("1000x700x3000 ordered: tiles %d x %d x %d, predicted %.4f s (first call %.2f s)\n", t.mb, t.nb, t.kb,
           t.predicted_seconds, first);
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 1000, 700, 3000, TSR_ACCUM_ORDERED, &again), TSR_SUCCESS);
    CHECK(again.mb == t.mb && again.nb == t.nb && again.kb == t.kb);

    /* one C tile of 512 x 512 and k = 16384, two workers: one chain of
     * k-tiles would idle a worker; REDUX or a C split must be chosen */
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 512, 512, 16384, TSR_ACCUM_REDUX, &t), TSR_SUCCESS);
    CHECK(t.kb < 16384);
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 512, 512, 16384, TSR_ACCUM_ORDERED, &t), TSR_SUCCESS);
    CHECK(t.mb < 512 || t.nb < 512);

    /* the chosen tiles compute the right product */
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 300, 200, 500, TSR_ACCUM_ORDERED, &t), TSR_SUCCESS);
    tsr_dist_t grid = tsr_dist_block_cyclic(1, 1);
    tsr_desc_t *A, *B, *C;
    CHECK_RC(tsr_desc_create_2d(&A, TSR_FLOAT32, 300, 500, t.mb, t.kb, &grid), TSR_SUCCESS);
    CHECK_RC(tsr_desc_create_2d(&B, TSR_FLOAT32, 500, 200, t.kb, t.nb, &grid), TSR_SUCCESS);
    CHECK_RC(tsr_desc_create_2d(&C, TSR_FLOAT32, 300, 200, t.mb, t.nb, &grid), TSR_SUCCESS);
    tsr_desc_fill_random(A, 1);
    tsr_desc_fill_random(B, 2);
    CHECK_RC(tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 1.0, A, B, 0.0, C, TSR_ACCUM_ORDERED), TSR_SUCCESS);
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
    CHECK_RC(tsr_gemm_auto_tiles_ruled(TSR_FLOAT32, 2304, 1024, 768, TSR_ACCUM_ORDERED, &rules, &t), TSR_SUCCESS);
    printf("2304x1024x768 ruled: tiles %d x %d x %d\n", t.mb, t.nb, t.kb);
    CHECK(t.mb % 64 == 0 && 768 % t.mb == 0 && 256 % t.nb == 0 && t.kb >= 1 && t.kb <= 768);
    rules = (tsr_gemm_tile_rules_t){ { 96, 0, 0 }, { 64, 0, 0 } };
    CHECK_RC(tsr_gemm_auto_tiles_ruled(TSR_FLOAT32, 512, 512, 512, TSR_ACCUM_ORDERED, &rules, &t), TSR_EINVAL);
    rules = (tsr_gemm_tile_rules_t){ { -1, 0, 0 }, { 0, 0, 0 } };
    CHECK_RC(tsr_gemm_auto_tiles_ruled(TSR_FLOAT32, 512, 512, 512, TSR_ACCUM_ORDERED, &rules, &t), TSR_EINVAL);
    rules = (tsr_gemm_tile_rules_t){ { 0, 0, 100 }, { 0, 0, 0 } }; /* multiples of 100 within k 512 */
    CHECK_RC(tsr_gemm_auto_tiles_ruled(TSR_FLOAT32, 512, 512, 512, TSR_ACCUM_ORDERED, &rules, &t), TSR_SUCCESS);
    CHECK(t.kb % 100 == 0 && t.kb <= 512);

    /* bad arguments */
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 0, 10, 10, TSR_ACCUM_ORDERED, &t), TSR_EINVAL);
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 10, 10, 10, (tsr_accum_t)7, &t), TSR_EINVAL);
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 10, 10, 10, TSR_ACCUM_ORDERED, NULL), TSR_EINVAL);
    double s;
    CHECK_RC(tsr_gemm_task_seconds(TSR_FLOAT32, 0, 1, 1, &s), TSR_EINVAL);
    CHECK_RC(tsr_gemm_task_seconds(TSR_FLOAT32, 256, 256, 256, &s), TSR_SUCCESS);
    CHECK(s > 0);
    /* a whole ordered product: 2 x 2 C tiles, chains of 3 k tiles (the last one shorter) */
    double work, tasks, chain, one_k, one_chain;
    CHECK_RC(tsr_gemm_phase_seconds(TSR_FLOAT32, 512, 512, 640, 256, 256, 256, &work, &tasks, &chain), TSR_SUCCESS);
    CHECK(tasks == 12);
    CHECK(chain > 2 * s && chain < 3 * s * 2); /* two full tasks and a shorter one, each also reading memory */
    CHECK(work > 4 * chain * 0.99 && work < 4 * chain * 1.01); /* four equal chains */
    CHECK_RC(tsr_gemm_phase_seconds(TSR_FLOAT32, 256, 256, 256, 256, 256, 256, &one_k, &tasks, &one_chain),
             TSR_SUCCESS);
    CHECK(tasks == 1 && one_k == one_chain && one_k > s); /* the task plus reading its A and B tiles */
    CHECK_RC(tsr_gemm_phase_seconds(TSR_FLOAT32, 512, 0, 640, 256, 256, 256, &work, &tasks, &chain), TSR_EINVAL);
    CHECK_RC(tsr_gemm_phase_seconds(TSR_FLOAT32, 512, 512, 640, 256, 256, 256, NULL, &tasks, &chain), TSR_EINVAL);

    /* attention: tiles that divide T, a valid tiling for the algorithm */
    for (int backward = 0; backward <= 1; backward++) {
        int qb = 0, kb = 0;
        double pred = 0;
        CHECK_RC(tsr_attention_auto_tiles(512, 64, 4, 1, backward, TSR_ACCUM_REDUX, &qb, &kb, &pred), TSR_SUCCESS);
        CHECK(qb >= 64 && qb <= 512 && 512 % qb == 0 && kb >= 64 && kb <= 512 && 512 % kb == 0);
        CHECK(pred > 0 && isfinite(pred));
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
    int qb = 0, kb = 0;
    CHECK_RC(tsr_attention_auto_tiles(96, 32, 2, 1, 0, TSR_ACCUM_ORDERED, &qb, &kb, NULL), TSR_SUCCESS);
    CHECK(qb == 96 && kb == 96); /* no candidate divides 96: one tile */
    CHECK_RC(tsr_attention_auto_tiles(0, 64, 4, 1, 0, TSR_ACCUM_ORDERED, &qb, &kb, NULL), TSR_EINVAL);
    CHECK_RC(tsr_attention_auto_tiles(512, 64, 4, 1, 2, TSR_ACCUM_ORDERED, &qb, &kb, NULL), TSR_EINVAL);
    CHECK_RC(tsr_attention_auto_tiles(512, 64, 4, 1, 1, (tsr_accum_t)7, &qb, &kb, NULL), TSR_EINVAL);
    CHECK_RC(tsr_attention_auto_tiles(512, 64, 4, 1, 0, TSR_ACCUM_ORDERED, NULL, &kb, NULL), TSR_EINVAL);
    tsr_finalize();
    return tsr_check_report("test_tiles_auto");
}
