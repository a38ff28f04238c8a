/* GPT-2 tile sizes chosen from the calibrated GEMM model (tiles/gemm.c).
 *
 * A training step is modelled by its GEMMs, which are most of its work: per
 * layer the QKV, attention-projection, MLP-up and MLP-down linear layers, and
 * the LM head, each forward (out = W in: a chain over the input-feature
 * tiles), backward-data (din = W^T dout: a chain over the output-feature
 * tiles) and backward-weight (dW += dout in^T: a chain over the token tiles).
 * The forward and backward-data phases follow each other through the layers;
 * each takes max(work / p, rounds of tasks, its chain). The weight gradients
 * fill the gaps the backward-data phases leave (not the forward's: they need
 * the backward's output gradients); what does not fit is spread over the
 * workers. The step takes max(all the work / p, the sum of the phases plus
 * that excess) plus the runtime's cost of the other tasks (layernorm, attention, AdamW;
 * counted per tile, spread over the workers), and never less than the
 * submission of all its tasks by the one submitting thread
 * (with_submission: tasks x its cost a task). The loss over the vocabulary
 * is a phase of its own, with a per-logit cost measured once: the softmax
 * statistics chain over the vocabulary tiles of a token tile (ordered), the
 * gradient's tasks are independent. Every combination of token,
 * channel, hidden, vocabulary and head tiles from a candidate list (divisors
 * where the model needs them) is evaluated, with every GEMM task priced from
 * the calibrated square sizes.
 *
 * The choice (the search of tiles/search.c, with this file's callbacks):
 * per (token, channel) tile pair, the tiles the parallelism and
 * the task granularity depend on most, the model's best hidden, vocabulary
 * and head tiles; the TSR_TILE_SHORTLIST best pairs are priced again with their GEMM
 * task shapes measured (thin tasks, as the LM head's, run faster than the
 * squares' interpolation says); the TRIALS - 1 best of those and the
 * default tiles (tsr_gpt2_tiles_default) run a few steps for real on the
 * running workers (their median step), and the fastest wins: never slower
 * than the defaults but for the noise. The trials measure what the model
 * sees poorly: the tasks besides the GEMMs, whose chains shorten as the
 * channel tiles split, and memory contention on many workers. They are
 * cached like the calibrations. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "gpt2_model.h"
#include "internal/tsr_tile_model.h"
#include "tsr_context.h"

#define TRIALS 4           /* the tile sets run for real */
#define TRIAL_STEPS 2      /* timed steps a trial at least, after one that fills the pipeline, */
#define TRIAL_SECONDS 0.5  /* and at least this long, */
#define MAX_TRIAL_STEPS 20 /* in at most this many steps */

/* The runtime's tasks besides the GEMMs, per layer: per (channel, token)
 * tile (layernorms, residuals), per (head, query) tile (attention), and
 * the head copies of the split/merge path per such tile; per (vocabulary,
 * token) tile of the LM head; AdamW one per parameter tile (adamw_tasks). */
#define TASKS_PER_CHANNEL_TILE 14
#define TASKS_PER_HEAD_TILE 6
#define HEAD_COPIES_PER_TILE 9
#define TASKS_PER_VOCAB_TILE 3

/* The loss calibration's one tile of logits (vocabulary x tokens): the
 * 124M model's default vocabulary tile, Vp / 8. */
#define LOSS_ROWS 6288
#define LOSS_COLS 256

typedef struct {
    double work;        /* every task's time */
    double phases;      /* forward, backward-data and loss phases, one after another */
    double weight_work; /* the weight-gradient GEMMs */
    double bwd_idle;    /* worker time the backward-data phases leave idle */
    double tasks;       /* the GEMM and loss tasks */
    int p;
    int measure; /* 0: GEMM tasks priced from the square sizes; 1: their shapes measured */
    int failed;
} step_model_t;

/* Work, task count and longest chain of C (M x N) = sum over K of A B in
 * tiles mb x nb x kb, chained along K: the GEMM model's (tiles/gemm.c),
 * from its measured task shapes where it has them. */
static void gemm_phase(step_model_t *s, int M, int N, int K, int mb, int nb, int kb, double *work, double *tasks,
                       double *chain)
{
    if (tsr_gemm_phase_seconds(TSR_FLOAT32, M, N, K, mb, nb, kb, s->measure, work, tasks, chain))
        s->failed = 1;
    s->tasks += *tasks;
}

/* One linear layer (in I features in tiles it, out O in tiles ot, N tokens
 * in tiles tok) added to the step. */
static void add_linear(step_model_t *s, int I, int it, int O, int ot, int N, int tok)
{
    double work, tasks, chain;
    gemm_phase(s, O, N, I, ot, tok, it, &work, &tasks, &chain); /* forward */
    s->work += work;
    s->phases += tsr_tile_phase_seconds(work, tasks, work, chain, s->p);
    gemm_phase(s, I, N, O, it, tok, ot, &work, &tasks, &chain); /* backward data */
    double t = tsr_tile_phase_seconds(work, tasks, work, chain, s->p);
    s->work += work;
    s->phases += t;
    s->bwd_idle += s->p * t - work;
    gemm_phase(s, O, I, N, ot, it, tok, &work, &tasks, &chain); /* backward weight */
    s->work += work;
    s->weight_work += work;
}

/* Seconds of the softmax statistics (forward) task on one tile of
 * LOSS_ROWS x LOSS_COLS logits, the best of TSR_CALIBRATION_RUNS. */
static int calibrate_loss(void *unused, double *seconds)
{
    (void)unused;
    const int rows = LOSS_ROWS, cols = LOSS_COLS;
    tsr_dist_t grid = tsr_dist_block_cyclic(1, 1);
    tsr_desc_t *logits = NULL, *stats = NULL;
    int *targets = calloc(cols, sizeof(int));
    int rc = targets ? 0 : TSR_ENOMEM;
    if (!rc) rc = tsr_desc_create_2d(&logits, TSR_FLOAT32, rows, cols, rows, cols, &grid);
    if (!rc) rc = tsr_desc_create_2d(&stats, TSR_FLOAT32, 2, cols, 2, cols, &grid);
    if (!rc) rc = tsr_desc_fill_random(logits, 3);
    if (!rc) rc = tsr_wait();
    double best = INFINITY;
    for (int it = 0; !rc && it <= TSR_CALIBRATION_RUNS; it++) {
        double t0 = tsr_wtime();
        rc = tsr_crossentropy_forward(logits, stats, NULL, targets, rows, TSR_REDUCTION_ORDERED);
        if (!rc)
            rc = tsr_wait();
        if (it > 0)
            best = fmin(best, tsr_wtime() - t0);
    }
    if (logits) tsr_desc_destroy(logits);
    if (stats) tsr_desc_destroy(stats);
    free(targets);
    *seconds = best;
    return rc;
}

/* Seconds per logit of that task, measured once and cached like the GEMM
 * calibrations: a second run predicts the same and picks the same tiles,
 * however loaded the machine is now. */
static int loss_seconds_per_logit(double *per_logit)
{
    static tsr_trials_t trials;
    const int key[2] = { LOSS_ROWS, LOSS_COLS };
    double seconds = 0;
    int rc = tsr_trials_load(&trials, "crossentropy forward tile", 2);
    if (!rc)
        rc = tsr_trials_measure(&trials, key, calibrate_loss, NULL, &seconds, NULL);
    tsr_trials_save(&trials);
    *per_logit = seconds / ((double)LOSS_ROWS * LOSS_COLS);
    return rc;
}

/* The submitting thread's cost a task: the simulation's reference
 * (TSR_SIM_TASK_US), measured in a 124M B4 T64 step beside 16 busy Xeon
 * workers (182 ms for 13,120 tasks); the 2-core VM's steps take about
 * 6-8 us a task. A calibration of tiny GEMM tasks does not reproduce it
 * (1.6 to 26 us from one run to the next on the loaded VM): a step's tasks
 * carry more tiles and arguments than any cheap stand-in. */
const double tsr_gpt2_submit_seconds = TSR_SIM_TASK_US * 1e-6;

/* The loss phases: softmax statistics (a chain over the vocabulary tiles
 * when ordered) and the gradient (independent tasks, about as long). */
static void add_loss(step_model_t *s, int Vp, int voc, int N, int tok, double per_logit, tsr_reduction_t accum)
{
    double nv = ceil((double)Vp / voc), nt = ceil((double)N / tok), task = per_logit * voc * tok;
    double tasks = nv * nt, work = tasks * task;
    double chain = accum == TSR_REDUCTION_ORDERED ? nv * task : task;
    s->work += 2 * work;
    s->tasks += 2 * tasks;
    s->phases += tsr_tile_phase_seconds(work, tasks, work, chain, s->p);
    s->phases += tsr_tile_phase_seconds(work, tasks, work, task, s->p);
}

/* The batch as the model sees it (N tokens a sub-batch) and its calibrations. */
typedef struct {
    const tsr_gpt2_config_t *cfg;
    int B, N, T, sub_b, nsub, p;
    tsr_reduction_t accum;
    double task_cost, per_logit, submit;
} step_ctx_t;

static tsr_gpt2_tiles_t tiles_of(const step_ctx_t *x, const int *tile)
{
    return (tsr_gpt2_tiles_t){ tile[0], tile[1], tile[2], tile[3], tile[4], 0, 0, x->accum };
}

/* The step as the one submitting thread allows it: it inserts the step's
 * tasks one after another, `submit` seconds each, and a worker cannot run a
 * task before it is inserted, so however many workers share the work the
 * step takes at least tasks x submit. The workers' own cost a task (the
 * scheduling, the kernel call) is in `workers_step` already: in every GEMM
 * task's calibrated time and task_cost for the others. */
static double with_submission(double workers_step, double tasks, double submit)
{
    return fmax(workers_step, tasks * submit);
}

static double parts(int n, int tile)
{
    return ceil((double)n / tile);
}

/* AdamW's tasks: one per parameter tile (gpt2_model.c's param_shape), qkv
 * and fb the QKV and attention-projection feature tiles. */
static double adamw_tasks(const tsr_gpt2_config_t *c, int T, const tsr_gpt2_tiles_t *t, int qkv, int fb)
{
    int C = c->C;
    double nch = parts(C, t->ch), nqkv = parts(3 * C, qkv), nhid = parts(4 * C, t->hid);
    double layer = (nch + 1) * nqkv + parts(C, fb) * nch + (2 * nch + 1) * nhid + 6 * nch; /* and 6 C-sized vectors */
    return c->L * layer + nch * (parts(c->Vp, t->voc) + parts(c->maxT, t->tok < T ? t->tok : T) + 2);
}

/* tsr_tile_problem_t.predict: the step in tiles tok ch hid voc heads
 * (measured: their GEMM task shapes measured first, once), and its tasks
 * (*tasks); NaN when the GEMM model fails. */
static double predict(void *ctx, const int *tile, int measured, double *tasks)
{
    const step_ctx_t *x = ctx;
    const tsr_gpt2_config_t *c = x->cfg;
    const tsr_gpt2_tiles_t tiles = tiles_of(x, tile), *t = &tiles;
    int N = x->N, T = x->T, p = x->p;
    *tasks = 0;
    int C = c->C, hd = C / c->NH, fb = t->heads * hd, qkv = tsr_gpt2_qkv_tile(c, T, t);
    step_model_t s = { 0, 0, 0, 0, 0, p, measured, 0 };
    add_linear(&s, C, t->ch, 3 * C, qkv, N, t->tok);    /* QKV */
    add_linear(&s, C, fb, C, t->ch, N, t->tok);         /* attention projection */
    add_linear(&s, C, t->ch, 4 * C, t->hid, N, t->tok); /* MLP up */
    add_linear(&s, 4 * C, t->hid, C, t->ch, N, t->tok); /* MLP down */
    s.work *= c->L; /* every layer is the same */
    s.phases *= c->L;
    s.weight_work *= c->L;
    s.bwd_idle *= c->L;
    s.tasks *= c->L;
    add_linear(&s, C, t->ch, c->Vp, t->voc, N, t->tok); /* LM head */
    add_loss(&s, c->Vp, t->voc, N, t->tok, x->per_logit, t->accum);
    if (s.failed)
        return NAN;
    /* tasks besides the GEMMs (TASKS_PER_*, HEAD_COPIES_PER_TILE), and AdamW */
    double nch = parts(C, t->ch), ntok = parts(N, t->tok);
    double natt = parts(N, T) * c->NH / tsr_gpt2_attention_depth(c, T, t); /* attention tiles */
    double nq = ceil((double)(t->tok < T ? t->tok : T) / (t->q ? t->q : (t->tok < T ? t->tok : T)));
    int fused = t->tok <= T && T % t->tok == 0; /* the projections write the head tensors (no copies) */
    double per_head_tile = TASKS_PER_HEAD_TILE + (fused ? 0 : HEAD_COPIES_PER_TILE);
    double per_sub = c->L * (TASKS_PER_CHANNEL_TILE * nch * ntok + per_head_tile * natt * nq) +
                     TASKS_PER_VOCAB_TILE * parts(c->Vp, t->voc) * ntok; /* each sub-batch's */
    double adamw = adamw_tasks(c, T, t, qkv, fb), other = per_sub + adamw;
    double work = x->nsub * (s.work + per_sub * x->task_cost) + adamw * x->task_cost;
    double weight_excess = fmax(0, s.weight_work - s.bwd_idle); /* what the backward's gaps cannot take */
    *tasks = x->nsub * (s.tasks + per_sub) + adamw;
    return with_submission(fmax(work / p, s.phases + weight_excess / p + other * x->task_cost / p), *tasks,
                           x->submit);
}

/* Candidate sizes: n / d for the divisors d of n up to max_parts. */
static int divisions(int n, int max_parts, int *out, int max_out)
{
    int c = 0;
    for (int d = 1; d <= max_parts && c < max_out; d++)
        if (n % d == 0)
            out[c++] = n / d;
    return c;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The steady step time of tiles t: a model of cfg with these tiles (zero
 * parameters; the kernels' speed does not depend on the values), fed the
 * same made-up tokens every step; one step fills the pipeline, then steps
 * timed from one loss to the next as the trainer times them, at least
 * TRIAL_STEPS and TRIAL_SECONDS of them (at most MAX_TRIAL_STEPS): their
 * median. Rank 0's time on every rank. */
static int trial_step(const tsr_gpt2_config_t *cfg, int B, int T, int nsub, const tsr_gpt2_tiles_t *t, double *seconds)
{
    tsr_gpt2_model_t m;
    memset(&m, 0, sizeof m);
    int *tokens = malloc((size_t)B * T * sizeof(int));
    int rc = tokens ? tsr_gpt2_model_create(&m, cfg, B, T, nsub, t, 0) : TSR_ENOMEM;
    for (int i = 0; tokens && i < B * T; i++)
        tokens[i] = (int)((i * 7919L) % cfg->V);
    double steps[MAX_TRIAL_STEPS] = { 0 }, last = tsr_wtime(), timed = 0;
    int n = 0;
    for (int step = 0; !rc && n < MAX_TRIAL_STEPS && (n < TRIAL_STEPS || timed < TRIAL_SECONDS); step++) {
        float loss;
        rc = tsr_gpt2_forward_submit(&m, tokens, tokens);
        if (!rc)
            rc = tsr_gpt2_backward(&m);
        if (!rc)
            rc = tsr_gpt2_update(&m, 1e-4f, 0.9f, 0.999f, 1e-8f, 0.0f, step + 1);
        if (!rc)
            rc = tsr_gpt2_loss(&m, &loss);
        double now = tsr_wtime();
        if (step > 0) {
            steps[n++] = now - last;
            timed += now - last;
        }
        last = now;
        /* every rank takes the same number of steps */
        if (!rc && tsr_size() > 1)
            rc = tsr_broadcast(&timed, sizeof timed, 0);
    }
    int wrc = tsr_wait();
    rc = rc ? rc : wrc;
    if (m.sub)
        tsr_gpt2_model_destroy(&m);
    free(tokens);
    qsort(steps, n, sizeof(double), cmp_double);
    *seconds = n == 0 ? INFINITY : n % 2 ? steps[n / 2] : 0.5 * (steps[n / 2 - 1] + steps[n / 2]);
    return rc ? rc : tsr_broadcast(seconds, sizeof *seconds, 0);
}

/* tsr_tile_problem_t.default_tile: tsr_gpt2_tiles_default's. */
static void default_tile(void *ctx, int *tile)
{
    const step_ctx_t *x = ctx;
    tsr_gpt2_tiles_t def;
    tsr_gpt2_tiles_default(x->cfg, x->B, x->T, &def);
    const int sizes[5] = { def.tok, def.ch, def.hid, def.voc, def.heads };
    memcpy(tile, sizes, sizeof sizes);
}

/* tsr_tile_problem_t.trial: a few steps (trial_step). */
static int trial(void *ctx, const int *tile, double *seconds)
{
    const step_ctx_t *x = ctx;
    tsr_gpt2_tiles_t t = tiles_of(x, tile);
    return trial_step(x->cfg, x->B, x->T, x->nsub, &t, seconds);
}

/* The candidate sizes: token tiles dividing T (at least 16) or of several
 * whole sequences, channel and hidden tiles of n / d for the divisors d
 * of n up to 16, vocabulary tiles of Vp / 1 .. 32, heads per tile dividing NH. */
static void candidate_sizes(const step_ctx_t *x, tsr_tile_problem_t *pb)
{
    const tsr_gpt2_config_t *cfg = x->cfg;
    int T = x->T, *toks = pb->sizes[0], nt = 0, nhd = 0;
    for (int d = T; d >= 1 && nt < 16; d--)
        if (T % d == 0 && d >= (T < 16 ? T : 16))
            toks[nt++] = d;
    for (int s = 2; s <= x->sub_b && nt < 32; s++)
        if (x->sub_b % s == 0)
            toks[nt++] = s * T;
    pb->nsizes[0] = nt;
    pb->nsizes[1] = divisions(cfg->C, 16, pb->sizes[1], 16);
    pb->nsizes[2] = divisions(4 * cfg->C, 16, pb->sizes[2], 16);
    static const int voc_parts[] = { 1, 2, 4, 8, 16, 32 };
    for (int v = 0; v < 6; v++)
        pb->sizes[3][v] = (cfg->Vp + voc_parts[v] - 1) / voc_parts[v];
    pb->nsizes[3] = 6;
    for (int d = 1; d <= cfg->NH && nhd < 16; d++)
        if (cfg->NH % d == 0)
            pb->sizes[4][nhd++] = d;
    pb->nsizes[4] = nhd;
}

/* The search of a step's tiles: per (token, channel) tile pair, the tiles
 * the parallelism and the task granularity depend on most, the model's
 * best hidden, vocabulary and head tiles; the TSR_TILE_SHORTLIST best
 * pairs refined; TRIALS tried, the defaults among them. */
static const tsr_tile_policy_t STEP_POLICY = { TSR_TILE_SHORTLIST, 1, 0, TSR_TRIALS_WITH_DEFAULT, TRIALS };
/* The model alone: its best, nothing refined or tried (budgeted trials of
 * operands over TSR_TRIAL_BYTES: none). */
static const tsr_tile_policy_t MODEL_POLICY = { TSR_TILE_SHORTLIST, 0, 0, TSR_TRIALS_BUDGETED, 0 };

/* The batch of cfg, B, T in nsub sub-batches on p workers as the model sees
 * it, with its calibrations (measured once, cached); submit < 0: the
 * measured submission cost a task. */
static int step_ctx(const tsr_gpt2_config_t *cfg, int B, int T, int nsub, int p, tsr_reduction_t accum,
                    double submit, step_ctx_t *x)
{
    if (!cfg || B < 1 || T < 1 || nsub < 1 || B % nsub || p < 1)
        return TSR_EINVAL;
    int per_rank = B / tsr_size() > 0 ? B / tsr_size() : 1, sub_b = per_rank / nsub > 0 ? per_rank / nsub : 1;
    *x = (step_ctx_t){ cfg, B, sub_b * T, T, sub_b, nsub, p, accum, 0, 0, submit };
    int rc = tsr_gemm_task_seconds(TSR_FLOAT32, 1, 1, 1, &x->task_cost); /* the smallest task: the runtime's cost */
    if (!rc)
        rc = loss_seconds_per_logit(&x->per_logit);
    if (submit < 0)
        x->submit = tsr_gpt2_submit_seconds;
    if (rc)
        tsr_tile_cache_unlock();
    return rc;
}

/* The search of x's tiles under policy into *tiles (accum kept), the
 * choice's prediction and task count, and the fastest trial's time. */
static int search(step_ctx_t *x, const tsr_tile_policy_t *policy, tsr_gpt2_tiles_t *tiles, tsr_tile_choice_t *c,
                  double *trial_seconds)
{
    const tsr_gpt2_config_t *cfg = x->cfg;
    static tsr_trials_t trials;
    tsr_tile_problem_t pb = { .name = "gpt2 tiles", .policy = policy, .ndims = 5, .group_dims = 2,
                              .dim_names = { "tok", "ch", "hid", "voc", "heads" }, .trials = &trials, .ctx = x,
                              .predict = predict, .default_tile = default_tile, .trial = trial,
                              .bytes = INFINITY /* MODEL_POLICY: no budgeted trial */ };
    snprintf(pb.trials_name, sizeof pb.trials_name, "gpt2 step, L %d C %d NH %d Vp %d, B %d T %d, %d sub-batches, "
             "%s, %d ranks", cfg->L, cfg->C, cfg->NH, cfg->Vp, x->B, x->T, x->nsub,
             x->accum == TSR_REDUCTION_REDUX ? "redux" : "ordered", tsr_size());
    candidate_sizes(x, &pb);
    int rc = tsr_tile_search(&pb, c, trial_seconds);
    tsr_tile_cache_unlock(); /* measured: the training that follows holds no lock */
    if (!rc)
        *tiles = tiles_of(x, c->tile);
    return rc;
}

int tsr_gpt2_tiles_auto(const tsr_gpt2_config_t *cfg, int B, int T, int nsub, tsr_gpt2_tiles_t *tiles,
                        double *predicted_seconds, double *trial_seconds)
{
    step_ctx_t x;
    if (!tiles)
        return TSR_EINVAL;
    int rc = step_ctx(cfg, B, T, nsub, tsr_ncpu_workers() + tsr_ncuda_workers(), tiles->accum, -1, &x);
    tsr_tile_choice_t c = { { 0 }, NAN, 0 };
    double best = INFINITY;
    if (!rc)
        rc = search(&x, &STEP_POLICY, tiles, &c, &best);
    if (!rc && !isfinite(best))
        rc = TSR_ERUNTIME;
    if (rc)
        return rc;
    tsr_log(TSR_LOG_INFO, "gpt2 tiles: the model counts %.0f tasks a step, submitted in at least %.1f ms (%.1f us a "
            "task)", c.tasks, c.tasks * x.submit * 1e3, x.submit * 1e6);
    if (predicted_seconds)
        *predicted_seconds = c.predicted;
    if (trial_seconds)
        *trial_seconds = best;
    return TSR_SUCCESS;
}

int tsr_gpt2_tiles_predict(const tsr_gpt2_config_t *cfg, int B, int T, int nsub, int workers, double submit_seconds,
                           const tsr_gpt2_tiles_t *tiles, double *seconds, double *tasks)
{
    step_ctx_t x;
    if (!tiles || !seconds || !tasks)
        return TSR_EINVAL;
    int rc = step_ctx(cfg, B, T, nsub, workers, tiles->accum, submit_seconds, &x);
    const int tile[5] = { tiles->tok, tiles->ch, tiles->hid, tiles->voc, tiles->heads };
    if (!rc)
        *seconds = predict(&x, tile, 0, tasks);
    tsr_tile_cache_unlock();
    return rc ? rc : isfinite(*seconds) ? TSR_SUCCESS : TSR_ERUNTIME;
}

int tsr_gpt2_tiles_model(const tsr_gpt2_config_t *cfg, int B, int T, int nsub, int workers, double submit_seconds,
                         tsr_gpt2_tiles_t *tiles, double *seconds, double *tasks)
{
    step_ctx_t x;
    if (!tiles || !seconds || !tasks)
        return TSR_EINVAL;
    tsr_tile_choice_t c = { { 0 }, NAN, 0 };
    int rc = step_ctx(cfg, B, T, nsub, workers, tiles->accum, submit_seconds, &x);
    if (!rc)
        rc = search(&x, &MODEL_POLICY, tiles, &c, NULL);
    if (!rc)
        *seconds = c.predicted, *tasks = c.tasks;
    return rc ? rc : isfinite(*seconds) ? TSR_SUCCESS : TSR_ERUNTIME;
}
