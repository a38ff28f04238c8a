/* --tiles auto for flash attention: the query and key tiles of one pass
 * chosen from the measured time of each candidate's tile-pair task and a
 * model of the pass's schedule.
 *
 * Calibration: for each candidate pair (qb, kb), as many tasks as there are
 * workers run at once (every worker busy, as in a real run), the best of 3
 * after a warm-up; the forward and the backward task apart, and each for two
 * positions: fully visible (the queries after the keys) and on the diagonal
 * (last query = last key); about two seconds for 25 pairs. The times are
 * cached on disk per worker set and BLAS kernels (model_cache.c), so
 * every process on a machine works from the same measurements.
 *
 * A pair's time: the CPU kernels compute only the scores each chunk of
 * queries sees (tsr_attn_computed_pairs), so a pair that straddles the
 * diagonal costs less than a full one, but more than its share of the
 * scores (smaller GEMMs). Its time is interpolated in that share between
 * the two measured positions (and 0 at share 0). The CUDA kernels compute
 * the whole block: there both measurements are about the same.
 *
 * Schedule model of one pass over heads / bb head tiles of T tokens, with
 * nq = T / qb query tiles and nk = T / kb key tiles, each query tile seeing
 * the key tiles up to its last query:
 *   forward: the key tiles of a query tile are an ordered chain (online
 *     softmax): max(work / p, its longest chain = nk tasks, task rounds);
 *   backward, ordered: dQ chains over key tiles and dK, dV over query tiles,
 *     so a head tile's tasks form a wavefront of nq + nk - 1 tasks;
 *   backward, REDUX: no chain beyond one task, plus the additions of the
 *     per-worker copies of dQ, dK and dV.
 *
 * Trials: when the pass is small enough (tensors of at most 1 GiB; one
 * process), as many candidates as 2 s of trials afford by the model (up to
 * 8, the best of each granularity first: tsr_trials_plan) run as whole
 * passes and the fastest measured wins, cached per pass and worker set (as
 * gemm.c does). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "tsr_attention.h"
#include "tsr_runtime_attention.h"
#include "internal/tsr_tile_model.h"
#include "tsr_compute_attention.h"

static const int CANDIDATES[] = { 64, 128, 256, 512, 1024 };
#define NCAND (int)(sizeof CANDIDATES / sizeof CANDIDATES[0])

/* The tile-pair task times of the running workers, named hd bb qb kb
 * backward diagonal (cached: model_cache.c). */
static tsr_trials_t task_times;

/* Descriptors of p head tiles for one tile pair: query tensors of qb tokens,
 * key tensors of kb tokens (one tile each per head tile). */
typedef struct { tsr_desc_t *Q, *K, *V, *O, *L, *dO, *dQ, *dK, *dV; } pair_descs_t;

static void destroy_pair(pair_descs_t *d)
{
    tsr_desc_t **all[] = { &d->Q, &d->K, &d->V, &d->O, &d->L, &d->dO, &d->dQ, &d->dK, &d->dV };
    for (int i = 0; i < 9; i++)
        if (*all[i]) {
            tsr_desc_destroy(*all[i]);
            *all[i] = NULL;
        }
}

/* Descriptors of heads heads (bb a tile) of Tq queries in tiles of qb and
 * Tk keys in tiles of kb; Q, K, V and dO random. */
static int create_descs(int hd, int bb, int heads, int Tq, int qb, int Tk, int kb, pair_descs_t *d)
{
    tsr_dist_t grid = tsr_dist_block_cyclic(1, 1);
    int rc = 0;
    tsr_desc_t **query[] = { &d->Q, &d->O, &d->dO, &d->dQ }, **key[] = { &d->K, &d->V, &d->dK, &d->dV };
    for (int i = 0; !rc && i < 4; i++)
        rc = tsr_desc_create(query[i], TSR_FLOAT32, heads, hd, Tq, bb, hd, qb, &grid);
    for (int i = 0; !rc && i < 4; i++)
        rc = tsr_desc_create(key[i], TSR_FLOAT32, heads, hd, Tk, bb, hd, kb, &grid);
    if (!rc)
        rc = tsr_desc_create(&d->L, TSR_FLOAT32, heads, 2, Tq, bb, 2, qb, &grid);
    tsr_desc_t *inputs[] = { d->Q, d->K, d->V, d->dO };
    for (int i = 0; !rc && i < 4; i++)
        rc = tsr_desc_fill_random(inputs[i], (uint64_t)i + 1);
    return rc;
}

/* p head tiles of one tile pair each */
static int create_pair(int hd, int bb, int qb, int kb, int p, pair_descs_t *d)
{
    return create_descs(hd, bb, p * bb, qb, qb, kb, kb, d);
}

/* Positions of the calibrated pairs: the queries after the keys, or the
 * last query on the last key. */
static tsr_attn_pos_t calibrated_pos(int qb, int kb, int diagonal)
{
    tsr_attn_pos_t full = { kb, 0 }, diag = { kb > qb ? kb - qb : 0, qb > kb ? qb - kb : 0 };
    return diagonal ? diag : full;
}

/* One round: a task of the pair at pos per head tile. */
static int submit_round(const pair_descs_t *d, int p, int backward, tsr_attn_pos_t pos)
{
    int rc = 0;
    for (int b = 0; !rc && b < p; b++) {
        if (backward)
            rc = tsr_insert_attention_bwd(tsr_tile(d->Q, b, 0, 0), tsr_tile(d->K, b, 0, 0), tsr_tile(d->V, b, 0, 0),
                                          tsr_tile(d->dO, b, 0, 0), tsr_tile(d->L, b, 0, 0), tsr_tile(d->dQ, b, 0, 0),
                                          tsr_tile(d->dK, b, 0, 0), tsr_tile(d->dV, b, 0, 0), pos, STARPU_W,
                                          STARPU_W, -1);
        else
            rc = tsr_insert_attention_fwd(tsr_tile(d->Q, b, 0, 0), tsr_tile(d->K, b, 0, 0), tsr_tile(d->V, b, 0, 0),
                                          tsr_tile(d->O, b, 0, 0), tsr_tile(d->L, b, 0, 0), pos, STARPU_W);
    }
    return rc ? rc : tsr_wait();
}

/* Seconds of one round of a task per worker of the pair named by key (hd
 * bb qb kb backward diagonal), the best of TSR_CALIBRATION_RUNS after a
 * warm-up (tsr_trials_measure's run). */
static int calibrate_pair(void *key, double *seconds)
{
    const int *k = key, hd = k[0], bb = k[1], qb = k[2], kb = k[3], backward = k[4], diagonal = k[5];
    int p = tsr_ncpu_workers() + tsr_ncuda_workers();
    pair_descs_t d = { 0 };
    tsr_attn_pos_t pos = calibrated_pos(qb, kb, diagonal);
    int rc = create_pair(hd, bb, qb, kb, p, &d);
    *seconds = INFINITY;
    /* the backward reads the forward's logsumexp and D = dO . O */
    if (!rc && backward)
        rc = submit_round(&d, p, 0, pos);
    for (int b = 0; !rc && backward && b < p; b++)
        rc = tsr_insert_attention_bwd_prep(tsr_tile(d.O, b, 0, 0), tsr_tile(d.dO, b, 0, 0), tsr_tile(d.L, b, 0, 0));
    for (int it = 0; !rc && it <= TSR_CALIBRATION_RUNS; it++) {
        tsr_barrier();
        double t0 = tsr_wtime();
        rc = submit_round(&d, p, backward, pos);
        double s = tsr_wtime() - t0;
        if (it > 0 && s < *seconds)
            *seconds = s;
    }
    destroy_pair(&d);
    return rc ? rc : tsr_broadcast(seconds, sizeof *seconds, 0);
}

/* The task time of the pair at a calibrated position for the running
 * workers: cached, or measured on first use (and then cached). */
static int task_time(int hd, int bb, int qb, int kb, int backward, int diagonal, double *seconds)
{
    int key[6] = { hd, bb, qb, kb, backward, diagonal };
    return tsr_trials_measure(&task_times, key, calibrate_pair, key, seconds, NULL);
}

/* The measured times of a candidate pair (qb, kb). */
typedef struct { int qb, kb; double full, diag, diag_share; } pair_times_t;

/* Share of the pair's scores the CPU kernels compute at pos. */
static double computed_share(int qb, int kb, tsr_attn_pos_t pos)
{
    tsr_attn_pair_t pair = { 1, qb, kb, pos.q0, pos.k0, 1.0f };
    return (double)tsr_attn_computed_pairs(&pair) / ((double)qb * kb);
}

/* Seconds of the pair at pos (see the top of the file). */
static double pair_seconds(const pair_times_t *t, tsr_attn_pos_t pos)
{
    double s = computed_share(t->qb, t->kb, pos), d = t->diag_share;
    if (s < d)
        return t->diag * s / d;
    return d < 1.0 ? t->diag + (t->full - t->diag) * (s - d) / (1.0 - d) : t->full;
}

/* A pass over heads heads of T tokens (bb a tile), and its candidates'
 * measured pair times (times[a * n + b]: query tile cand[a], key tile cand[b]). */
typedef struct {
    int T, hd, heads, bb, backward;
    tsr_reduction_t accum;
    int n, cand[NCAND + 1], p;
    pair_times_t times[(NCAND + 1) * (NCAND + 1)];
} pass_t;

/* The measured times of the pair qb x kb = tile. */
static const pair_times_t *pair_of(const pass_t *pass, const int *tile)
{
    int a = 0, b = 0;
    while (pass->cand[a] != tile[0])
        a++;
    while (pass->cand[b] != tile[1])
        b++;
    return &pass->times[a * pass->n + b];
}

/* tsr_tile_problem_t.predict: the pass in tiles qb x kb (its pair tasks
 * measured already; see the top of the file), and its task count. */
static double predict(void *ctx, const int *tile, int measured, double *ntasks)
{
    const pass_t *pass = ctx;
    const pair_times_t *pt = pair_of(pass, tile);
    int T = pass->T, bb = pass->bb, p = pass->p;
    int qb = pt->qb, kb = pt->kb, htiles = (pass->heads + bb - 1) / bb, nq = T / qb, nk = T / kb;
    double tasks = 0, work = 0, last_chain = 0, t = pt->full;
    for (int i = 0; i < nq; i++)
        for (int j = 0; j <= ((i + 1) * qb - 1) / kb; j++) { /* key tiles up to the query tile's last query */
            double s = pair_seconds(pt, (tsr_attn_pos_t){ i * qb, j * kb });
            tasks += htiles;
            work += htiles * s;
            if (i == nq - 1)
                last_chain += s;
        }
    double pair_work = work, chain; /* the pair tasks' own, without REDUX's additions */
    if (!pass->backward) {
        chain = last_chain;
    } else if (pass->accum == TSR_REDUCTION_ORDERED) {
        chain = (nq + nk - 1) * t;
    } else {
        /* every worker may hold a copy of each dQ, dK, dV tile: (p - 1) additions each */
        double bytes = 4.0 * bb * pass->hd * (nq * (double)qb + 2.0 * nk * kb) * htiles;
        double adds = (p - 1) * 3.0 * bytes / TSR_TILE_BYTES_PER_S;
        work += adds;
        chain = t + adds / p;
    }
    *ntasks = tasks;
    double seconds = tsr_tile_phase_seconds(work, tasks, pair_work, chain, p);
    tsr_log(TSR_LOG_DEBUG, "tsr_attention_auto_tiles T %d %s: qb %d kb %d, task %.3f ms (diagonal %.3f), "
            "predicted %.4f s", T, pass->backward ? "bwd" : "fwd", qb, kb, pt->full * 1e3, pt->diag * 1e3, seconds);
    return seconds;
}

/* ---- the search -------------------------------------------------------------- */

/* The candidate pairs' tasks, measured on first use (cached). */
static int calibrate_pass(pass_t *pass)
{
    int known = task_times.n, rc = TSR_SUCCESS;
    for (int a = 0; !rc && a < pass->n; a++)
        for (int b = 0; !rc && b < pass->n; b++) {
            pair_times_t *pt = &pass->times[a * pass->n + b];
            *pt = (pair_times_t){ pass->cand[a], pass->cand[b], 0, 0, 0 };
            pt->diag_share = computed_share(pt->qb, pt->kb, calibrated_pos(pt->qb, pt->kb, 1));
            rc = task_time(pass->hd, pass->bb, pt->qb, pt->kb, pass->backward, 0, &pt->full);
            if (!rc)
                rc = task_time(pass->hd, pass->bb, pt->qb, pt->kb, pass->backward, 1, &pt->diag);
        }
    if (rc)
        return rc;
    char note[sizeof task_times.cache.path + 32];
    if (task_times.n > known)
        tsr_log(TSR_LOG_INFO, "attention tiles: measured %d tile-pair tasks on %d workers (%s)",
                task_times.n - known, pass->p / tsr_size(), tsr_tile_cache_note(&task_times.cache, note, sizeof note));
    tsr_trials_save(&task_times);
    return TSR_SUCCESS;
}

/* tsr_tile_problem_t.trial: the fastest of TSR_TRIAL_RUNS passes in tiles
 * qb x kb (after one untimed; the backward after one forward, for its
 * statistics). */
static int trial_pass(void *ctx, const int *tile, double *seconds)
{
    const pass_t *pass = ctx;
    pair_descs_t d = { 0 };
    int rc = create_descs(pass->hd, pass->bb, pass->heads, pass->T, tile[0], pass->T, tile[1], &d);
    if (!rc && pass->backward)
        rc = tsr_attention_forward(d.Q, d.K, d.V, d.O, d.L);
    if (!rc)
        rc = tsr_wait();
    *seconds = INFINITY;
    for (int it = 0; !rc && it <= TSR_TRIAL_RUNS; it++) {
        double t0 = tsr_wtime();
        rc = pass->backward ? tsr_attention_backward(d.Q, d.K, d.V, d.O, d.dO, d.L, d.dQ, d.dK, d.dV, TSR_OVERWRITE, pass->accum)
                            : tsr_attention_forward(d.Q, d.K, d.V, d.O, d.L);
        if (!rc)
            rc = tsr_wait();
        if (it > 0)
            *seconds = fmin(*seconds, tsr_wtime() - t0);
    }
    destroy_pair(&d);
    return rc;
}

/* The search of a pass's tiles: every pair ranked (the model measures
 * every candidate's tasks: nothing to refine); trials when the pass is
 * small. */
static const tsr_tile_policy_t ATTENTION_POLICY = { TSR_TRIAL_PLANNED, 0, 0, TSR_TRIALS_BUDGETED, 0 };

int tsr_attention_auto_tiles(int T, int hd, int heads, int bb, int backward, tsr_reduction_t accum,
                             tsr_tiles_t *tiles)
{
    if (!tiles) {
        tsr_log(TSR_LOG_ERROR, "tsr_attention_auto_tiles: the output (tsr_tiles_t *) is NULL");
        return TSR_EINVAL;
    }
    if (T < 1 || hd < 1 || heads < 1 || bb < 1 || (backward != 0 && backward != 1) ||
        (accum != TSR_REDUCTION_ORDERED && accum != TSR_REDUCTION_REDUX)) {
        tsr_log(TSR_LOG_ERROR, "tsr_attention_auto_tiles: bad arguments (T %d, hd %d, heads %d, bb %d, backward %d, "
                "accumulation %d)", T, hd, heads, bb, backward, (int)accum);
        return TSR_EINVAL;
    }
    if (!tsr_initialized())
        return TSR_ENOTINIT;
    pass_t pass = { .T = T, .hd = hd, .heads = heads, .bb = bb, .backward = backward, .accum = accum,
                    .p = (tsr_ncpu_workers() + tsr_ncuda_workers()) * tsr_size() };
    for (int i = 0; i < NCAND && CANDIDATES[i] <= T; i++) /* tiles that divide T (T itself when none does) */
        if (T % CANDIDATES[i] == 0)
            pass.cand[pass.n++] = CANDIDATES[i];
    if (pass.n == 0)
        pass.cand[pass.n++] = T;
    int rc = tsr_trials_load(&task_times, "attention tasks", 6);
    if (!rc)
        rc = calibrate_pass(&pass);
    if (rc)
        return rc;
    static tsr_trials_t trials;
    tsr_tile_problem_t pb = { .policy = &ATTENTION_POLICY, .ndims = 2, .group_dims = 2, .dim_names = { "qb", "kb" },
                              .nsizes = { pass.n, pass.n }, .bytes = 9.0 * heads * hd * T * sizeof(float),
                              .trials = &trials, .trials_name = "attention trials", .nkeys = 6,
                              .key = { T, hd, heads, bb, backward, (int)accum }, .ctx = &pass,
                              .predict = predict, .trial = trial_pass };
    snprintf(pb.name, sizeof pb.name, "attention tiles T %d %s", T, backward ? "bwd" : "fwd");
    memcpy(pb.sizes[0], pass.cand, pass.n * sizeof *pass.cand);
    memcpy(pb.sizes[1], pass.cand, pass.n * sizeof *pass.cand);
    tsr_tile_choice_t c;
    rc = tsr_tile_search(&pb, &c, NULL);
    if (!rc)
        *tiles = (tsr_tiles_t){ .qb = c.tile[0], .kvb = c.tile[1], .predicted_seconds = c.predicted };
    return rc;
}
