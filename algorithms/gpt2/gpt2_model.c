/* GPT-2 forward, loss, backward and AdamW as Tessera tiled algorithms
 * (llm.c's train_gpt2.c, feature-major activations: see docs/transformer.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "gpt2_model.h"

/* Per-layer parameter slots, in checkpoint order. */
enum { LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB };
/* Global parameter slots. */
enum { WTE, WPE, LNFW, LNFB, NGLOBAL };

/* Columns of tiles of the token embedding's gradient a rank makes ahead of
 * the oldest one not yet summed (wte_grad_by_columns), the first ones'
 * LM-head part during the backward's last WTE_HEAD_LAYERS layers
 * (lm_head_columns_early). Simulated weak T256 on 2 nodes of 16 workers:
 * 0.945 of one node's rate (0.99 ungated; 0.91 with all made after the
 * backward, two rounds of GEMM chains on half the workers). 124M B8 T64 on
 * 4 ranks: busiest peak RSS 1210 MB (0.44x one rank's; 1179 MB all after
 * the backward; six columns ahead: about 100 MB more). */
enum { WTE_COLUMNS_IN_FLIGHT = 4 };
/* (two: as fast as four in that simulation, with less held; one: 0.93) */
enum { WTE_HEAD_LAYERS = 2 };
/* A column made after the backward runs alone on the workers (its sums and
 * AdamW wait for it): on a sub-batch of at least WTE_SPLIT_TOKEN_TILES token
 * tiles its LM-head part is two ordered chains over the halves of the token
 * tiles, the second into a tile of its own then added, twice as many chains
 * half as long (simulated weak T256, 16 token tiles on 16 workers: the four
 * columns' 8 chains of 16 GEMMs had 8 workers waiting 181 ms). */
enum { WTE_SPLIT_TOKEN_TILES = 4 };

static int slot(int layer, int k) { return NGLOBAL + layer * TSR_GPT2_PER_LAYER + k; }

/* Checkpoint tensor of a slot, and the layer (or -1) it belongs to. */
static int slot_tensor(int s, int *layer)
{
    static const int global[NGLOBAL] = { TSR_GPT2_WTE, TSR_GPT2_WPE, TSR_GPT2_LNFW, TSR_GPT2_LNFB };
    if (s < NGLOBAL) {
        *layer = -1;
        return global[s];
    }
    *layer = (s - NGLOBAL) / TSR_GPT2_PER_LAYER;
    return TSR_GPT2_LN1W + (s - NGLOBAL) % TSR_GPT2_PER_LAYER;
}

int tsr_gpt2_rank_of_row(int row, int B, int ranks)
{
    return (int)((long)row * ranks / B);
}

int tsr_gpt2_default_sub_batches(int B)
{
    int ranks = tsr_size(), groups = tsr_worker_groups();
    int n = ranks > 1 ? ranks * (groups > 1 ? groups : 1) : tsr_ncuda_workers();
    if (n > 1 && B % n == 0)
        return n;
    n = ranks > 1 ? ranks : groups;
    return n > 1 && B % n == 0 ? n : 1;
}

/* Halves a token tile, down to 128 tokens: whole sequences while there are
 * two or more, then divisors of T. 0 when it cannot be halved. */
static int half_token_tile(int tok, int T)
{
    if (tok % 2 || tok / 2 < 128)
        return 0;
    if (tok > T)
        return (tok / T) % 2 == 0 ? tok / 2 : 0;
    return T % (tok / 2) == 0 ? tok / 2 : 0;
}

/* Feature tiles for `parts` (4 or more) parts of the features: C / parts
 * channels (at least 128), 4C / parts hidden, ~Vp / (4 parts) vocabulary,
 * NH / parts heads where NH divides. 0 when C does not divide. */
static int split_features(const tsr_gpt2_config_t *cfg, int parts, tsr_gpt2_tiles_t *tiles)
{
    if (cfg->C % parts || cfg->C / parts < 128)
        return 0;
    tiles->ch = cfg->C / parts;
    tiles->hid = 4 * cfg->C / parts;
    tiles->voc = (cfg->Vp + 4 * parts - 1) / (4 * parts);
    if (cfg->NH % parts == 0)
        tiles->heads = cfg->NH / parts;
    return 1;
}

/* the most vocabulary tiles the GPU default cuts (tsr_gpt2_tiles_default) */
#define TSR_GPT2_MAX_VOCAB_TILES_GPU 16

void tsr_gpt2_tiles_default(const tsr_gpt2_config_t *cfg, int B, int T, tsr_gpt2_tiles_t *tiles)
{
    /* CPU: token tiles of whole sequences within one rank's samples, of 256
     * tokens or a quarter of them when that is more: GEMMs with n and k of 256
     * run markedly faster than with 64 (about 5 % a step for GPT-2 124M at
     * B 4, T 64), and larger batches want larger ones (124M B 16 T 256: 19.3 s
     * a step with 256, 13.0 s with 1024); feature tiles of half the width give
     * the tasks for two workers instead. GPU: the whole sub-batch up to 8192
     * tokens and whole features and vocabulary: on an H100 (124M B8 T1024,
     * timing/results/tiles_auto_gpt2_124M_gpu.csv) 2048-token tiles with a
     * quarter of the vocabulary took 129 ms a step, 8192 tokens with the
     * whole vocabulary 100 ms: every task costs the runtime ~20 us there */
    int gpus = tsr_ncuda_workers(), ranks = tsr_size();
    /* the samples of one rank, or of one GPU's sub-batch (also when the
     * GPUs of several ranks share the batch: its token tile then stays
     * within the sub-batch, as on one rank) */
    int subs = tsr_gpt2_default_sub_batches(B), parts = ranks > 1 ? ranks : subs;
    if (gpus > 0 && subs > parts)
        parts = subs;
    int per_part = B / parts > 1 ? B / parts : 1, tokens = per_part * T;
    int target = gpus > 0 ? 8192 : tokens / 4 > 256 ? tokens / 4 : 256, seqs = target / T;
    seqs = seqs < 1 ? 1 : seqs > per_part ? per_part : seqs;
    tiles->tok = seqs * T;
    tiles->q = 0;
    tiles->k = 0;
    tiles->accum = TSR_REDUCTION_ORDERED;
    if (gpus > 0) {
        /* GPU tasks few and large: a launch and a transfer cost more than a
         * CPU task's overhead, and cuBLAS needs big GEMMs to fill the GPU */
        tiles->ch = cfg->C;
        tiles->hid = 4 * cfg->C;
        tiles->heads = cfg->NH;
        /* several ranks: the token embedding in two tiles a rank, so that
         * its gradient's sum, AdamW and way back to every rank are shared
         * out and pipelined, not one rank's 154 MB round trip at the step's
         * edge; at most 16 tiles, as narrower ones cost more than they
         * share out (each tile adds LM-head GEMMs, gathers and sums: one
         * simulated node of 8 H200s takes 71.0 ms a step with the whole
         * vocabulary, 77.7 with 8 tiles, 85.0 with 16; docs/simulation.md) */
        int vparts = ranks > 1 ? 2 * ranks : 1;
        vparts = vparts < TSR_GPT2_MAX_VOCAB_TILES_GPU ? vparts : TSR_GPT2_MAX_VOCAB_TILES_GPU;
        tiles->voc = (cfg->Vp + vparts - 1) / vparts;
        return;
    }
    tiles->ch = cfg->C % 2 ? cfg->C : cfg->C / 2;
    tiles->hid = 2 * cfg->C;
    tiles->voc = (cfg->Vp + 7) / 8;
    tiles->heads = cfg->NH % 2 ? cfg->NH : cfg->NH / 2;
    int fparts = cfg->C % 2 ? 1 : 2;
    /* More workers: token and feature tiles halved in turn until a linear
     * layer has a task per worker, or they reach 128 (below that a step's
     * GEMMs run markedly slower). With one tile of 256 tokens every
     * per-token operation is a chain, and the step's critical path caps it
     * from 8 workers on: 124M B4 T64, replayed from a 2-worker run with the
     * measured task times (docs/schedule.md), takes 398 and 393 ms a step on 8 and 16
     * workers with the 2-worker tiles, 278 and 187 ms with these. */
    int workers = tsr_ncpu_workers(), ntok = (tokens + tiles->tok - 1) / tiles->tok;
    for (int turn = 0; ntok * fparts < workers; turn++) {
        int half = half_token_tile(tiles->tok, T);
        if (turn % 2 == 0 && half) {
            tiles->tok = half;
            ntok *= 2;
        } else if (split_features(cfg, 2 * fparts, tiles)) {
            fparts *= 2;
        } else if (half) {
            tiles->tok = half;
            ntok *= 2;
        } else {
            break;
        }
    }
}

/* Activation tiles live on the rank of their batch sample (contiguous slices
 * of the batch per rank), so each rank computes its part of the batch. */
static int owner_2d(int bi, int i, int j, void *arg)
{
    const tsr_gpt2_dist_arg_t *a = arg;
    int sample = a->first + (int)((long)j * a->tok / a->T);
    return tsr_gpt2_rank_of_row(sample, a->B, a->size);
}

static int owner_3d(int bi, int i, int j, void *arg)
{
    const tsr_gpt2_dist_arg_t *a = arg;
    int sample = a->first + bi * a->depth / a->NH;
    return tsr_gpt2_rank_of_row(sample, a->B, a->size);
}

static int check_tiles(const tsr_gpt2_config_t *c, int B, int T, const tsr_gpt2_tiles_t *t)
{
    if (B < 1 || T < 1 || T > c->maxT) {
        tsr_log(TSR_LOG_ERROR, "gpt2: batch %d x %d: need B >= 1 and 1 <= T <= maxT = %d", B, T, c->maxT);
        return TSR_ESHAPE;
    }
    char why[160] = "";
    if (t->tok < 1 || (T % t->tok && t->tok % T))
        snprintf(why, sizeof why, "the token tile %d must divide T = %d or be a multiple of it", t->tok, T);
    else if (t->ch < 1 || t->hid < 1 || t->voc < 1)
        snprintf(why, sizeof why, "the %s tile %d must be at least 1",
                 t->ch < 1 ? "channel" : t->hid < 1 ? "hidden" : "vocabulary",
                 t->ch < 1 ? t->ch : t->hid < 1 ? t->hid : t->voc);
    else if (t->heads < 1 || c->NH % t->heads)
        snprintf(why, sizeof why, "the head tile %d must divide NH = %d", t->heads, c->NH);
    else if (t->q < 1 || t->q > T || t->k < 1 || t->k > T)
        snprintf(why, sizeof why, "the %s tile %d must be in [1, T = %d]", t->q < 1 || t->q > T ? "query" : "key",
                 t->q < 1 || t->q > T ? t->q : t->k, T);
    if (why[0]) {
        tsr_log(TSR_LOG_ERROR, "gpt2: bad tiles: %s", why);
        return TSR_ETILE;
    }
    return TSR_SUCCESS;
}

/* The tiles with query and key tiles 0 resolved to min(tok, T). */
static tsr_gpt2_tiles_t resolve_qk(const tsr_gpt2_tiles_t *tiles, int T)
{
    tsr_gpt2_tiles_t t = *tiles;
    int attention_tile = t.tok < T ? t.tok : T;
    t.q = t.q ? t.q : attention_tile;
    t.k = t.k ? t.k : attention_tile;
    return t;
}

/* Whether the QKV and output projections read/write the head tensors
 * directly (resolved tiles): query and key tiles equal a token tile that
 * divides T. */
static int projections_fused(const tsr_gpt2_tiles_t *t, int T)
{
    return t->q == t->tok && t->k == t->tok && T % t->tok == 0;
}

int tsr_gpt2_qkv_tile(const tsr_gpt2_config_t *cfg, int T, const tsr_gpt2_tiles_t *tiles)
{
    tsr_gpt2_tiles_t t = resolve_qk(tiles, T);
    if (!projections_fused(&t, T) && tiles->heads == cfg->NH)
        return 3 * cfg->C;
    return tiles->heads * (cfg->C / cfg->NH);
}

int tsr_gpt2_attention_depth(const tsr_gpt2_config_t *cfg, int T, const tsr_gpt2_tiles_t *tiles)
{
    if (tiles->heads == cfg->NH && tiles->tok > T)
        return cfg->NH * (tiles->tok / T);
    return tiles->heads;
}

/* Descriptor creation with one error path: *rc keeps the first failure. */
static tsr_desc_t *make(int *rc, tsr_dtype_t t, int b, int m, int n, int bb, int mb, int nb, const tsr_dist_t *dist)
{
    tsr_desc_t *d = NULL;
    if (*rc == 0)
        *rc = tsr_desc_create(&d, t, b, m, n, bb, mb, nb, dist);
    return d;
}

/* Shape and tiles of a parameter slot. */
static void param_shape(const tsr_gpt2_model_t *m, int s, int *rows, int *cols, int *rtile, int *ctile)
{
    const tsr_gpt2_config_t *c = &m->cfg;
    const tsr_gpt2_tiles_t *t = &m->tiles;
    int C = c->C, hd = C / c->NH, fb = t->heads * hd, qkv = tsr_gpt2_qkv_tile(c, m->T, t), layer;
    int tensor = slot_tensor(s, &layer);
    *cols = 1;
    *ctile = 1;
    switch (tensor) {
    case TSR_GPT2_WTE: *rows = C; *rtile = t->ch; *cols = c->Vp; *ctile = t->voc; break;
    case TSR_GPT2_WPE: *rows = C; *rtile = t->ch; *cols = c->maxT; *ctile = t->tok < m->T ? t->tok : m->T; break;
    case TSR_GPT2_QKVW: *rows = C; *rtile = t->ch; *cols = 3 * C; *ctile = qkv; break;
    case TSR_GPT2_QKVB: *rows = 3 * C; *rtile = qkv; break;
    case TSR_GPT2_ATTPROJW: *rows = C; *rtile = fb; *cols = C; *ctile = t->ch; break;
    case TSR_GPT2_FCW: *rows = C; *rtile = t->ch; *cols = 4 * C; *ctile = t->hid; break;
    case TSR_GPT2_FCB: *rows = 4 * C; *rtile = t->hid; break;
    case TSR_GPT2_FCPROJW: *rows = 4 * C; *rtile = t->hid; *cols = C; *ctile = t->ch; break;
    default: *rows = C; *rtile = t->ch; break; /* LayerNorm weights/biases, C-sized biases */
    }
}

/* The owner of a training-state tile, as deal_shards chose it. */
static int owner_shard(int bi, int i, int j, void *arg)
{
    const tsr_gpt2_shard_arg_t *a = arg;
    return a->owner[(long)i * a->col_tiles + j];
}

typedef struct {
    long elems;
    int index; /* in shard_owner */
} shard_tile_t;

/* Larger tiles first; tiles alike in the order of the model. */
static int larger_tile_first(const void *pa, const void *pb)
{
    const shard_tile_t *a = pa, *b = pb;
    if (a->elems != b->elems)
        return a->elems < b->elems ? 1 : -1;
    return a->index - b->index;
}

/* Deal the training-state tiles over the ranks, the largest first, each to
 * the rank that owns the fewest elements so far (the lowest such rank): tiles
 * alike go round-robin, and the busiest rank ends above 1/P of the state by
 * at most the last (smallest) tile it was dealt. A rank's AdamW work and its
 * traffic a step (it sends its tiles to every other rank and receives their
 * gradients for them) grow with what it owns, so the busiest rank sets both.
 * Round-robin in the model's order left the busiest of 2 ranks 1.26x the
 * mean (124M, whole-matrix tiles). */
static int deal_shards(tsr_gpt2_model_t *m, int nranks)
{
    if (!(m->shard = calloc(m->ntensors, sizeof *m->shard)))
        return TSR_ENOMEM;
    size_t total = 0;
    for (int s = 0; s < m->ntensors; s++) {
        int rows, cols, rt, ct;
        param_shape(m, s, &rows, &cols, &rt, &ct);
        total += (size_t)((rows + rt - 1) / rt) * (size_t)((cols + ct - 1) / ct);
    }
    long *held = calloc(nranks, sizeof *held);
    shard_tile_t *order = malloc(total * sizeof *order);
    m->shard_owner = malloc(total * sizeof *m->shard_owner);
    if (!held || !order || !m->shard_owner) {
        free(held);
        free(order);
        return TSR_ENOMEM;
    }
    int n = 0;
    for (int s = 0; s < m->ntensors; s++) {
        int rows, cols, rt, ct;
        param_shape(m, s, &rows, &cols, &rt, &ct);
        int row_tiles = (rows + rt - 1) / rt, col_tiles = (cols + ct - 1) / ct;
        m->shard[s] = (tsr_gpt2_shard_arg_t){ col_tiles, m->shard_owner + n };
        for (int i = 0; i < row_tiles; i++)
            for (int j = 0; j < col_tiles; j++, n++)
                order[n] = (shard_tile_t){ (long)(i < row_tiles - 1 ? rt : rows - i * rt) *
                                               (j < col_tiles - 1 ? ct : cols - j * ct), n };
    }
    qsort(order, total, sizeof *order, larger_tile_first);
    for (size_t t = 0; t < total; t++) {
        int r = 0;
        for (int k = 1; k < nranks; k++)
            if (held[k] < held[r])
                r = k;
        held[r] += order[t].elems;
        m->shard_owner[order[t].index] = r;
    }
    free(held);
    free(order);
    return TSR_SUCCESS;
}

/* Parameters, AdamW moments and, with several sub-batches under MPI, the
 * summed gradients: one rank alone holds them all, under MPI each rank a
 * share of their tiles (deal_shards). */
static int create_param_sets(tsr_gpt2_model_t *m, int state_on_rank0)
{
    int sharded = tsr_size() > 1 && !state_on_rank0, rc = 0;
    /* in bf16 the parameters the forward and backward read and the gradient
     * sums are bf16; the AdamW state and the master weights float32 */
    tsr_desc_t ***sets[5] = { &m->params, &m->adam_m, &m->adam_v, &m->grad_sum, &m->master };
    tsr_dtype_t types[5] = { m->dtype, TSR_FLOAT32, TSR_FLOAT32, m->dtype, TSR_FLOAT32 };
    int has[5] = { 1, 1, 1, sharded && m->nsub > 1, m->dtype == TSR_BFLOAT16 };
    for (int k = 0; k < 5; k++) {
        if (!has[k])
            continue;
        *sets[k] = calloc(m->ntensors, sizeof(tsr_desc_t *));
        if (!*sets[k])
            return TSR_ENOMEM;
    }
    if (sharded && (rc = deal_shards(m, tsr_size())) != TSR_SUCCESS)
        return rc;
    for (int s = 0; s < m->ntensors; s++) {
        int rows, cols, rt, ct;
        param_shape(m, s, &rows, &cols, &rt, &ct);
        tsr_dist_t dist = tsr_dist_single(0);
        if (sharded)
            dist = tsr_dist_custom(owner_shard, &m->shard[s]);
        for (int k = 0; k < 5; k++)
            if (has[k])
                (*sets[k])[s] = make(&rc, types[k], 1, rows, cols, 1, rt, ct, &dist);
        /* a rank drops its copy of another rank's parameter tile once its
         * sub-batches' tasks reading it are submitted (drop_params), and
         * fetches it again for the next use, a prefetch window ahead
         * (fetch_layer_after): ZeRO-3 */
        tsr_desc_keep_received(m->params[s], 1);
    }
    return rc;
}

/* The gradients the update reads. */
static tsr_desc_t **summed_grads(const tsr_gpt2_model_t *m) { return m->grad_sum ? m->grad_sum : m->sub[0].grads; }

/* Gradients shaped like the parameters, on the rank of the sub-batch's first
 * sample: each rank's sub-batches compute their weight gradients locally,
 * and only the finished partial gradients travel, each tile to the owner of
 * its parameter tile, to be added there. When they are summed into
 * grad_sum (ZeRO-2) a tile holds memory only from its first write in the
 * backward to its reduction (tsr_desc_alloc_on_write): the layers' gradients
 * are reduced as the backward produces them, so the whole model's partial
 * gradients never exist at once. */
static int create_grads(tsr_gpt2_model_t *m, tsr_gpt2_batch_t *b, int first)
{
    tsr_dist_t root = tsr_dist_single(tsr_gpt2_rank_of_row(first, m->B, tsr_size()));
    int rc = 0;
    if (!(b->grads = calloc(m->ntensors, sizeof(tsr_desc_t *))))
        return TSR_ENOMEM;
    for (int s = 0; s < m->ntensors; s++) {
        int rows, cols, rt, ct;
        param_shape(m, s, &rows, &cols, &rt, &ct);
        b->grads[s] = make(&rc, m->dtype, 1, rows, cols, 1, rt, ct, &root);
        if (m->grad_sum)
            tsr_desc_alloc_on_write(b->grads[s]);
    }
    return rc;
}

/* Views of each tile column of d, or (by_rows) of each tile row over its
 * tile columns [j0, j0 + nt): tsr_desc_view; *rc keeps the first failure. */
static tsr_desc_t **tile_views_in(int *rc, tsr_desc_t *d, int by_rows, int j0, int nt)
{
    int n = by_rows ? d->mt : d->nt;
    tsr_desc_t **views = *rc ? NULL : calloc(n, sizeof *views);
    if (!*rc && !views)
        *rc = TSR_ENOMEM;
    for (int c = 0; views && c < n && !*rc; c++)
        *rc = by_rows ? tsr_desc_view(&views[c], d, c, 1, j0, nt) : tsr_desc_view(&views[c], d, 0, d->mt, c, 1);
    return views;
}

/* tile_views_in over every tile column. */
static tsr_desc_t **tile_views(int *rc, tsr_desc_t *d, int by_rows) { return tile_views_in(rc, d, by_rows, 0, d->nt); }

/* The second-half tiles of the token embedding's partial gradient (shaped
 * and placed as the sub-batch's, alloc on write) and the views the halves
 * read (WTE_SPLIT_TOKEN_TILES). */
static int create_wte_halves(tsr_gpt2_batch_t *b)
{
    const tsr_desc_t *g = b->grads[WTE];
    int rc = TSR_SUCCESS, nt = b->lnf->nt, half = nt / 2;
    b->dwte_half = make(&rc, g->dtype, 1, g->m, g->n, 1, g->mb, g->nb, &g->dist);
    if (!rc)
        tsr_desc_alloc_on_write(b->dwte_half);
    b->dwte_half_cols = tile_views(&rc, b->dwte_half, 0);
    for (int k = 0; k < 2; k++) {
        int j0 = k ? half : 0, n = k ? nt - half : half;
        if (!rc)
            rc = tsr_desc_view(&b->lnf_halves[k], b->lnf, 0, b->lnf->mt, j0, n);
        b->logits_row_halves[k] = tile_views_in(&rc, b->logits, 1, j0, n);
    }
    return rc;
}

/* Sharded, the views wte_grad_by_columns works on: the columns of the token
 * embedding, of its summed and partial gradients, and the logits' rows
 * (the vocabulary tiles of the tied LM head). */
static int create_wte_columns(tsr_gpt2_model_t *m)
{
    int rc = TSR_SUCCESS;
    m->wte_ncols = m->params[WTE]->nt;
    m->wte_cols = tile_views(&rc, m->params[WTE], 0);
    for (int c = 0; c < m->wte_ncols && !rc; c++)
        tsr_desc_keep_received(m->wte_cols[c], 1);
    m->dwte_sum_cols = tile_views(&rc, m->grad_sum[WTE], 0);
    for (int r = 0; r < m->nsub; r++) {
        m->sub[r].dwte_cols = tile_views(&rc, m->sub[r].grads[WTE], 0);
        m->sub[r].logits_rows = tile_views(&rc, m->sub[r].logits, 1);
        if (!rc && m->sub[r].lnf->nt >= WTE_SPLIT_TOKEN_TILES)
            rc = create_wte_halves(&m->sub[r]);
    }
    return rc;
}

static int create_batch(tsr_gpt2_model_t *m, tsr_gpt2_batch_t *b, int first)
{
    const tsr_gpt2_config_t *c = &m->cfg;
    const tsr_gpt2_tiles_t *t = &m->tiles;
    int C = c->C, BT = b->B * m->T, hd = C / c->NH, BNH = b->B * c->NH, rc = 0;
    int depth = tsr_gpt2_attention_depth(c, m->T, t);
    b->dist2d = (tsr_gpt2_dist_arg_t){ m->B, m->T, c->NH, t->tok, depth, tsr_size(), first };
    b->dist3d = b->dist2d;
    tsr_dist_t d2 = tsr_dist_custom(owner_2d, &b->dist2d), d3 = tsr_dist_custom(owner_3d, &b->dist3d);
    tsr_dtype_t dt = m->dtype;
#define ACT(rows, rtile) make(&rc, dt, 1, rows, BT, 1, rtile, t->tok, &d2)
#define HEADS(rows, tile) make(&rc, dt, BNH, rows, m->T, depth, rows, tile, &d3)
    b->encoded = ACT(C, t->ch);
    b->acts = calloc(c->L, sizeof *b->acts);
    if (!b->acts)
        return TSR_ENOMEM;
    for (int l = 0; l < c->L; l++) {
        tsr_gpt2_layer_acts_t *a = &b->acts[l];
        a->ln1 = ACT(C, t->ch);
        a->ln1_mean = ACT(1, 1);
        a->ln1_rstd = ACT(1, 1);
        a->q = HEADS(hd, t->q);
        a->k = HEADS(hd, t->k);
        a->v = HEADS(hd, t->k);
        a->atty = HEADS(hd, t->q);
        a->att_stats = HEADS(2, t->q);
        a->res2 = ACT(C, t->ch);
        a->ln2 = ACT(C, t->ch);
        a->ln2_mean = ACT(1, 1);
        a->ln2_rstd = ACT(1, 1);
        a->fch = ACT(4 * C, t->hid);
        a->fch_gelu = ACT(4 * C, t->hid);
        a->res3 = ACT(C, t->ch);
    }
    b->lnf = ACT(C, t->ch);
    b->lnf_mean = ACT(1, 1);
    b->lnf_rstd = ACT(1, 1);
    b->logits = ACT(c->Vp, t->voc);
    /* the loss and its softmax statistics in float32 whatever the activations */
    b->ce_stats = make(&rc, TSR_FLOAT32, 1, 2, BT, 1, 2, t->tok, &d2);
    b->losses = make(&rc, TSR_FLOAT32, 1, 1, BT, 1, 1, t->tok, &d2);
    b->dres = ACT(C, t->ch);
    b->dln = ACT(C, t->ch);
    b->dfch = ACT(4 * C, t->hid);
    b->datty = HEADS(hd, t->q);
    b->dq = HEADS(hd, t->q);
    b->dk = HEADS(hd, t->k);
    b->dv = HEADS(hd, t->k);
    if (!m->fused) {
        int fb = t->heads * hd;
        b->qkv2d = ACT(3 * C, tsr_gpt2_qkv_tile(c, m->T, t));
        b->att2d = ACT(C, fb);
        b->datt2d = ACT(C, fb);
    }
#undef ACT
#undef HEADS
    if (rc == 0)
        rc = tsr_layernorm_workspace_create(&b->ln_work, b->lnf_mean);
    b->inputs = calloc((size_t)b->B * m->T, sizeof(int));
    b->targets = calloc((size_t)b->B * m->T, sizeof(int));
    if (rc == 0 && (!b->inputs || !b->targets))
        rc = TSR_ENOMEM;
    return rc;
}

/* ---- owner-computes: a rank submits only the sub-batches it runs --------------- */

/* The rank all of sub-batch b's samples are on (owner_2d), or -1 when they
 * span several ranks. */
static int sub_batch_rank(const tsr_gpt2_model_t *m, const tsr_gpt2_batch_t *b)
{
    int first = b->dist2d.first, P = tsr_size(), rank = tsr_gpt2_rank_of_row(first, m->B, P);
    return rank == tsr_gpt2_rank_of_row(first + b->B - 1, m->B, P) ? rank : -1;
}

/* Whether a rank may leave out the forward and backward of the sub-batches
 * wholly on another rank rather than walk their tasks to skip each one (a
 * walk that grows with the cluster): their tasks then involve it only
 * through the parameter tiles it owns, which each call reads whole and which
 * it sends instead (tsr_desc_send_read). That holds with the gradients
 * summed into shards (grad_sum: the sub-batches' own stay on their rank),
 * ordered accumulation (REDUX runs tasks on the parameters' owners), fused
 * projections without temporaries or none (a temporary takes MPI tags,
 * which every rank must count alike) and StarPU-MPI's communication cache
 * (STARPU_MPI_CACHE=0: every rank walks every sub-batch). */
static int leaves_out_other_ranks(const tsr_gpt2_model_t *m)
{
    const tsr_gpt2_batch_t *b = &m->sub[0];
    const tsr_gpt2_layer_acts_t *a = &b->acts[0];
    int no_temporaries = !m->fused || (tsr_linear_qkv_fusable(a->ln1, m->params[slot(0, QKVW)], a->q) &&
                                       tsr_linear_attproj_fusable(a->atty, m->params[slot(0, ATTPROJW)], a->res2));
    return tsr_size() > 1 && m->grad_sum && m->tiles.accum == TSR_REDUCTION_ORDERED && no_temporaries &&
           tsr_mpi_cache_enabled();
}

/* Whether this rank submits sub-batch b's forward and backward. */
static int runs_here(const tsr_gpt2_model_t *m, const tsr_gpt2_batch_t *b)
{
    int rank = m->own_only ? sub_batch_rank(m, b) : -1;
    return rank < 0 || rank == tsr_rank();
}

/* In place of calls of sub-batch b (on another rank) that read the
 * parameters of slots[0 .. n) whole, in that order: the tiles this rank
 * owns go to b's rank. */
static int send_params(const tsr_gpt2_model_t *m, const tsr_gpt2_batch_t *b, const int *slots, int n)
{
    int rank = sub_batch_rank(m, b), rc = TSR_SUCCESS;
    for (int k = 0; k < n && !rc; k++)
        rc = tsr_desc_send_read(m->params[slots[k]], rank);
    return rc;
}

/* What block_forward, block_backward, loss_forward and head_backward read
 * of the parameters, call by call (layernorms read their weights and
 * biases, linear layers their weights, the forward their biases too; the
 * backward's weight gradients read no parameter). */
static int block_forward_reads(int l, int slots[TSR_GPT2_PER_LAYER])
{
    for (int k = 0; k < TSR_GPT2_PER_LAYER; k++) /* LN1W .. FCPROJB: the order of block_forward */
        slots[k] = slot(l, k);
    return TSR_GPT2_PER_LAYER;
}

static int block_backward_reads(int l, int slots[TSR_GPT2_PER_LAYER])
{
    const int read[] = { FCPROJW, FCW, LN2W, ATTPROJW, QKVW, LN1W };
    for (size_t k = 0; k < sizeof read / sizeof read[0]; k++)
        slots[k] = slot(l, read[k]);
    return (int)(sizeof read / sizeof read[0]);
}

static int loss_forward_reads(int l, int slots[TSR_GPT2_PER_LAYER])
{
    (void)l;
    slots[0] = LNFW, slots[1] = LNFB, slots[2] = WTE;
    return 3;
}

static int head_backward_reads(int l, int slots[TSR_GPT2_PER_LAYER])
{
    (void)l;
    slots[0] = WTE, slots[1] = LNFW; /* the LM head's input gradient, the final layernorm's */
    return 2;
}

int tsr_gpt2_model_create(tsr_gpt2_model_t *m, const tsr_gpt2_config_t *cfg, int B, int T, int nsub,
                          const tsr_gpt2_tiles_t *tiles, int state_on_rank0)
{
    return tsr_gpt2_model_create_dtype(m, cfg, B, T, nsub, tiles, state_on_rank0, TSR_FLOAT32);
}

static void place_batch(const tsr_gpt2_model_t *m, tsr_gpt2_batch_t *b, int group);

/* Several sub-batches on one rank, no sharded sum: the LM head's parts of
 * the token embedding's gradient are summed as soon as the head's backward
 * has made them (during the rest of the backward: sum_wte_head_parts), and
 * every sub-batch's embedding forward and backward run where the embedding
 * is homed (create_embedding_views), moving the sub-batch's activations or
 * their gradient (C x BT). Left for the end of the step are those
 * scatters, not nsub - 1 additions of the C x Vp gradient in a chain on
 * its GPU, and the step starts without a copy of the embedding to every
 * GPU (the LM head's copies come during the forward: prefetch_lm_head).
 * Simulated 124M B8 T1024 a GPU, 8 H200s, with the prefetches of
 * forward_layers: 70.8 ms a step, 74.7 without it. */
int tsr_gpt2_wte_summed_early(const tsr_gpt2_model_t *m) { return m->nsub > 1 && !m->grad_sum && tsr_size() == 1; }

/* The views of encoded_at_wte, dres_at_wte and dwte_own (gpt2_model.h). */
static int create_embedding_views(const tsr_gpt2_model_t *m, tsr_gpt2_batch_t *b, int group)
{
    int home = m->params[WTE]->home - 1; /* -1: none */
    int rc = tsr_desc_view(&b->encoded_at_wte, b->encoded, 0, b->encoded->mt, 0, b->encoded->nt);
    if (!rc)
        rc = tsr_desc_view(&b->dres_at_wte, b->dres, 0, b->dres->mt, 0, b->dres->nt);
    if (!rc)
        rc = tsr_desc_view(&b->dwte_own, b->grads[WTE], 0, b->grads[WTE]->mt, 0, b->grads[WTE]->nt);
    tsr_desc_run_on(b->dwte_own, group);
    tsr_desc_run_on(b->encoded_at_wte, home);
    tsr_desc_run_on(b->dres_at_wte, home);
    return rc;
}

/* Whether every rank has GPUs or worker groups (collective): then the
 * parameters a rank receives are kept from the forward to the backward,
 * one receive a step rather than two, and their copies on its GPUs stay
 * (simulated 124M B8 T1024 on 2 nodes of 8 GPUs: 96.5 -> 90.5 ms a step).
 * A CPU rank without groups drops them layer by layer: it holds a layer's
 * worth of other ranks' parameters, not the model's. */
static int keeps_received_params(void)
{
    return tsr_size() > 1 && !tsr_any(tsr_ncuda_workers() == 0 && tsr_worker_groups() < 2);
}

int tsr_gpt2_model_create_dtype(tsr_gpt2_model_t *m, const tsr_gpt2_config_t *cfg, int B, int T, int nsub,
                                const tsr_gpt2_tiles_t *tiles, int state_on_rank0, tsr_dtype_t dtype)
{
    memset(m, 0, sizeof *m);
    if (dtype != TSR_FLOAT32 && dtype != TSR_BFLOAT16) {
        tsr_log(TSR_LOG_ERROR, "gpt2: precision %s: float32 or bf16 only", tsr_dtype_name(dtype));
        return TSR_EINVAL;
    }
    tsr_gpt2_tiles_t t = resolve_qk(tiles, T);
    int rc = tsr_gpt2_config_validate(cfg, "gpt2 model");
    if (rc == 0)
        rc = check_tiles(cfg, B, T, &t);
    if (rc == 0 && (nsub < 1 || B % nsub)) {
        tsr_log(TSR_LOG_ERROR, "gpt2: %d sub-batches do not divide the batch of %d sequences", nsub, B);
        rc = TSR_EINVAL;
    }
    if (rc)
        return rc;
    m->cfg = *cfg;
    m->dtype = dtype;
    m->B = B;
    m->T = T;
    m->nsub = nsub;
    m->tiles = t;
    m->fused = projections_fused(&t, T);
    m->ntensors = NGLOBAL + TSR_GPT2_PER_LAYER * cfg->L;
    if (!(m->sub = calloc(nsub, sizeof *m->sub)))
        return TSR_ENOMEM;
    rc = create_param_sets(m, state_on_rank0);
    for (int r = 0; r < nsub && rc == 0; r++) {
        m->sub[r].B = B / nsub;
        rc = create_batch(m, &m->sub[r], r * (B / nsub));
        if (rc == 0)
            rc = create_grads(m, &m->sub[r], r * (B / nsub));
        if (rc == 0)
            place_batch(m, &m->sub[r], tsr_worker_group_of(r));
    }
    if (rc == 0 && m->grad_sum)
        rc = create_wte_columns(m);
    if (rc == 0)
        rc = tsr_gpt2_place_state(m);
    for (int r = 0; r < nsub && rc == 0 && tsr_gpt2_wte_summed_early(m); r++)
        rc = create_embedding_views(m, &m->sub[r], tsr_worker_group_of(r));
    if (rc)
        tsr_gpt2_model_destroy(m);
    else
        m->own_only = leaves_out_other_ranks(m);
    m->keep_params = keeps_received_params();
    return rc;
}

static void destroy_set(tsr_desc_t **set, int n)
{
    for (int s = 0; set && s < n; s++)
        tsr_desc_destroy(set[s]);
    free(set);
}

/* f(d, arg) for every activation and scratch descriptor of a sub-batch
 * (everything but its gradients). */
static void each_activation(const tsr_gpt2_model_t *m, tsr_gpt2_batch_t *b, void (*f)(tsr_desc_t *, void *),
                            void *arg)
{
    for (int l = 0; b->acts && l < m->cfg.L; l++) {
        tsr_desc_t **a = (tsr_desc_t **)&b->acts[l];
        for (size_t k = 0; k < sizeof b->acts[l] / sizeof(tsr_desc_t *); k++)
            f(a[k], arg);
    }
    tsr_desc_t *rest[] = { b->encoded, b->lnf, b->lnf_mean, b->lnf_rstd, b->logits, b->ce_stats, b->losses,
                           b->dres, b->dln, b->dfch, b->datty, b->dq, b->dk, b->dv, b->ln_work,
                           b->qkv2d, b->att2d, b->datt2d };
    for (size_t k = 0; k < sizeof rest / sizeof rest[0]; k++)
        f(rest[k], arg);
}

static void run_on_group(tsr_desc_t *d, void *arg) { tsr_desc_run_on(d, *(const int *)arg); }

/* Every task of the sub-batch (those touching its activations) runs on the
 * workers of `group` (a GPU of several: tsr_worker_groups); the gradients'
 * sums and AdamW run where the state is homed (tsr_gpt2_place_state). */
static void place_batch(const tsr_gpt2_model_t *m, tsr_gpt2_batch_t *b, int group)
{
    each_activation(m, b, run_on_group, &group);
}

static void destroy_one(tsr_desc_t *d, void *arg)
{
    (void)arg;
    tsr_desc_destroy(d);
}

static void destroy_batch(const tsr_gpt2_model_t *m, tsr_gpt2_batch_t *b)
{
    tsr_desc_destroy(b->encoded_at_wte); /* views first */
    tsr_desc_destroy(b->dres_at_wte);
    tsr_desc_destroy(b->dwte_own);
    destroy_set(b->dwte_cols, m->wte_ncols); /* views first */
    destroy_set(b->logits_rows, m->wte_ncols);
    destroy_set(b->dwte_half_cols, m->wte_ncols);
    for (int k = 0; k < 2; k++) {
        destroy_set(b->logits_row_halves[k], m->wte_ncols);
        tsr_desc_destroy(b->lnf_halves[k]);
    }
    tsr_desc_destroy(b->dwte_half);
    destroy_set(b->grads, m->ntensors);
    each_activation(m, b, destroy_one, NULL);
    free(b->acts);
    free(b->inputs);
    free(b->targets);
}

/* Adds to *(double *)arg the bytes of d's tiles this rank owns and holds
 * for good (not those allocated on write: tsr_gpt2_live_bytes). */
static void add_owned_bytes(tsr_desc_t *d, void *arg)
{
    for (int bi = 0; d && !d->alloc_on_write && bi < d->bt; bi++)
        for (int i = 0; i < d->mt; i++)
            for (int j = 0; j < d->nt; j++)
                if (tsr_tile_is_local(d, bi, i, j))
                    *(double *)arg += (double)tsr_tile_depth(d, bi) * tsr_tile_rows(d, i) * tsr_tile_cols(d, j) *
                                      d->elsize;
}

static double set_bytes(tsr_desc_t **set, int n)
{
    double bytes = 0;
    for (int s = 0; set && s < n; s++)
        add_owned_bytes(set[s], &bytes);
    return bytes;
}

void tsr_gpt2_rank_bytes(tsr_gpt2_model_t *m, double bytes[TSR_GPT2_BYTE_KINDS])
{
    bytes[0] = set_bytes(m->params, m->ntensors) + set_bytes(m->master, m->ntensors);
    bytes[1] = set_bytes(m->adam_m, m->ntensors) + set_bytes(m->adam_v, m->ntensors);
    bytes[2] = set_bytes(m->grad_sum, m->ntensors);
    bytes[3] = 0;
    for (int r = 0; r < m->nsub; r++) {
        bytes[2] += set_bytes(m->sub[r].grads, m->ntensors);
        each_activation(m, &m->sub[r], add_owned_bytes, &bytes[3]);
    }
}

void tsr_gpt2_memory_estimate(const tsr_gpt2_config_t *cfg, int B, int T, int nsub, const tsr_gpt2_tiles_t *tiles,
                              int nranks, int state_on_rank0, tsr_dtype_t dtype, tsr_gpt2_memory_t *mem)
{
    double np = (double)tsr_gpt2_num_params(cfg), es = dtype == TSR_BFLOAT16 ? 2 : 4;
    double C = cfg->C, NH = cfg->NH, L = cfg->L, Vp = cfg->Vp;
    nranks = nranks < 1 ? 1 : nranks;
    nsub = nsub < 1 ? 1 : nsub;
    int sharded = nranks > 1 && !state_on_rank0;
    double share = sharded ? 1.0 / nranks : 1.0; /* rank 0's part of the state */
    mem->params = np * (es + (dtype == TSR_BFLOAT16 ? 4 : 0)) * share;
    mem->adam = 2 * np * 4 * share;
    /* the sub-batches whose first sample is on rank 0 keep their gradients
     * there: all of them, or, summed into the shards as the backward goes
     * (alloc-on-write), the token embedding's columns in flight
     * (wte_grad_by_columns) and a layer or two, left out here */
    int subs = 0;
    for (int r = 0; r < nsub; r++)
        subs += tsr_gpt2_rank_of_row(r * (B / nsub), B, nranks) == 0;
    double wte_cols = tiles && tiles->voc > 0 ? fmin(Vp, WTE_COLUMNS_IN_FLIGHT * (double)tiles->voc) : Vp;
    long sub_tokens = (long)(B / nsub) * T;
    if (tiles && tiles->tok > 0 && (sub_tokens + tiles->tok - 1) / tiles->tok >= WTE_SPLIT_TOKEN_TILES)
        wte_cols *= 2; /* and their second halves */
    if (sharded && nsub > 1)
        mem->grads = np * es * share + subs * wte_cols * C * es;
    else
        mem->grads = np * es * subs;
    /* rank 0's samples; per token (create_batch): encoded, per layer ln1 and
     * its statistics, q k v and the attention output, its statistics, res2,
     * ln2, fch, gelu, res3; lnf, logits; the backward's dres, dln, dfch and
     * head gradients; split/merge buffers unless fused */
    long samples = 0;
    for (int b = 0; b < B; b++)
        samples += tsr_gpt2_rank_of_row(b, B, nranks) == 0;
    tsr_gpt2_tiles_t rt = tiles ? resolve_qk(tiles, T) : (tsr_gpt2_tiles_t){ 0 };
    int fused = rt.tok > 0 && rt.q > 0 && rt.k > 0 ? projections_fused(&rt, T) : 0;
    double per_token = C + L * (16 * C + 4 + 2 * NH) + (C + 2) + Vp + 10 * C + (fused ? 0 : 5 * C);
    /* float32 whatever the precision: the loss, its softmax and layernorm scratch */
    double per_token_f32 = 3 + 2;
    mem->acts = (double)samples * T * (per_token * es + per_token_f32 * 4);
    mem->total = mem->params + mem->adam + mem->grads + mem->acts;
}

void tsr_gpt2_live_bytes(const tsr_gpt2_model_t *m, tsr_gpt2_live_t *live)
{
    live->cached = live->grads = 0;
    for (int s = 0; m->params && s < m->ntensors; s++) {
        live->cached += tsr_desc_resident_bytes(m->params[s], 0);
        for (int r = 0; r < m->nsub; r++)
            live->grads += tsr_desc_resident_bytes(m->sub[r].grads[s], 1);
    }
    for (int r = 0; r < m->nsub; r++)
        live->grads += m->sub[r].dwte_half ? tsr_desc_resident_bytes(m->sub[r].dwte_half, 1) : 0;
    live->buffers = tsr_runtime_allocated_bytes() - live->cached - live->grads;
    if (live->buffers < 0) /* the samples are not taken at one instant */
        live->buffers = 0;
}

void tsr_gpt2_model_destroy(tsr_gpt2_model_t *m)
{
    destroy_set(m->wte_cols, m->wte_ncols); /* views first */
    destroy_set(m->dwte_sum_cols, m->wte_ncols);
    destroy_set(m->params, m->ntensors);
    destroy_set(m->adam_m, m->ntensors);
    destroy_set(m->adam_v, m->ntensors);
    destroy_set(m->grad_sum, m->ntensors);
    destroy_set(m->master, m->ntensors);
    for (int r = 0; m->sub && r < m->nsub; r++)
        destroy_batch(m, &m->sub[r]);
    free(m->sub);
    free(m->shard);
    free(m->shard_owner);
    memset(m, 0, sizeof *m);
}

/* Scatter n floats at into d, or gather d into them (root 0; at NULL on
 * other ranks); a bf16 d through a bf16 copy, rounded on the way in. */
static int transfer(tsr_desc_t *d, float *at, int to_desc)
{
    if (d->dtype == TSR_FLOAT32)
        return to_desc ? tsr_desc_scatter(d, at, d->m, 0) : tsr_desc_gather(d, at, d->m, 0);
    size_t n = (size_t)d->m * d->n;
    tsr_bf16_t *h = at ? malloc(n * sizeof *h) : NULL;
    if (at && !h)
        return TSR_ENOMEM;
    for (size_t i = 0; h && to_desc && i < n; i++)
        h[i] = tsr_float_to_bf16(at[i]);
    int rc = to_desc ? tsr_desc_scatter(d, h, d->m, 0) : tsr_desc_gather(d, h, d->m, 0);
    for (size_t i = 0; h && !to_desc && !rc && i < n; i++)
        at[i] = tsr_bf16_to_float(h[i]);
    free(h);
    return rc;
}

/* Move every parameter-shaped descriptor of a set to/from the flat array. */
static int flat_transfer(tsr_gpt2_model_t *m, tsr_desc_t **set, float *flat, int to_desc)
{
    size_t sizes[TSR_GPT2_NUM_PARAM_TENSORS], offsets[TSR_GPT2_NUM_PARAM_TENSORS];
    tsr_gpt2_param_sizes(&m->cfg, sizes);
    tsr_gpt2_param_offsets(&m->cfg, offsets);
    for (int s = 0; s < m->ntensors; s++) {
        int layer, tensor = slot_tensor(s, &layer);
        size_t per_layer = layer < 0 ? 0 : sizes[tensor] / m->cfg.L;
        float *at = flat ? flat + offsets[tensor] + (layer < 0 ? 0 : layer * per_layer) : NULL;
        int rc = transfer(set[s], at, to_desc);
        if (rc)
            return rc;
    }
    return TSR_SUCCESS;
}

/* In bf16 the float32 master weights are the model; params their bf16 copy. */
int tsr_gpt2_params_scatter(tsr_gpt2_model_t *m, const float *flat)
{
    int rc = m->master ? flat_transfer(m, m->master, (float *)flat, 1) : TSR_SUCCESS;
    return rc ? rc : flat_transfer(m, m->params, (float *)flat, 1);
}

int tsr_gpt2_params_gather(tsr_gpt2_model_t *m, float *flat)
{
    return flat_transfer(m, m->master ? m->master : m->params, flat, 0);
}
int tsr_gpt2_grads_gather(tsr_gpt2_model_t *m, float *flat) { return flat_transfer(m, summed_grads(m), flat, 0); }

int tsr_gpt2_adam_scatter(tsr_gpt2_model_t *m, const float *flat_m, const float *flat_v)
{
    int rc = flat_transfer(m, m->adam_m, (float *)flat_m, 1);
    return rc ? rc : flat_transfer(m, m->adam_v, (float *)flat_v, 1);
}

int tsr_gpt2_adam_gather(tsr_gpt2_model_t *m, float *flat_m, float *flat_v)
{
    int rc = flat_transfer(m, m->adam_m, flat_m, 0);
    return rc ? rc : flat_transfer(m, m->adam_v, flat_v, 0);
}

static int check_tokens(const tsr_gpt2_model_t *m, const int *ids, int limit, const char *what)
{
    for (int i = 0; i < m->B * m->T; i++)
        if (ids[i] < 0 || ids[i] >= limit) {
            tsr_log(TSR_LOG_ERROR, "gpt2: %s[%d] = %d is not a token id in [0, %d)", what, i, ids[i], limit);
            return TSR_EINVAL;
        }
    return TSR_SUCCESS;
}

/* ln1 -> QKV projection -> attention -> output projection -> res2 (before
 * the residual add); unfused, the head tensors are filled from and read
 * back into the 2D scratch by split/merge tasks. */
static int attention_block_forward(tsr_gpt2_model_t *m, tsr_gpt2_batch_t *b, int l)
{
    tsr_desc_t **p = m->params;
    tsr_gpt2_layer_acts_t *a = &b->acts[l];
    tsr_reduction_t acc = m->tiles.accum;
    int rc;
    if (m->fused)
        rc = tsr_linear_qkv_forward(a->ln1, p[slot(l, QKVW)], p[slot(l, QKVB)], a->q, a->k, a->v, acc);
    else if (!(rc = tsr_linear_forward(a->ln1, p[slot(l, QKVW)], p[slot(l, QKVB)], b->qkv2d, acc)))
        rc = tsr_heads_split(b->qkv2d, a->q, a->k, a->v, TSR_OVERWRITE);
    if (!rc)
        rc = tsr_attention_forward(a->q, a->k, a->v, a->atty, a->att_stats);
    if (rc)
        return rc;
    if (m->fused)
        return tsr_linear_attproj_forward(a->atty, p[slot(l, ATTPROJW)], p[slot(l, ATTPROJB)], a->res2, acc);
    rc = tsr_heads_merge(a->atty, NULL, NULL, b->att2d, TSR_OVERWRITE);
    return rc ? rc : tsr_linear_forward(b->att2d, p[slot(l, ATTPROJW)], p[slot(l, ATTPROJB)], a->res2, acc);
}

/* One transformer block, forward: x -> a->res3. */
static int block_forward(tsr_gpt2_model_t *m, tsr_gpt2_batch_t *b, int l, tsr_desc_t *x)
{
    tsr_desc_t **p = m->params;
    tsr_gpt2_layer_acts_t *a = &b->acts[l];
    tsr_reduction_t acc = m->tiles.accum;
    int rc = tsr_layernorm_forward(x, p[slot(l, LN1W)], p[slot(l, LN1B)], a->ln1, a->ln1_mean, a->ln1_rstd, acc);
    if (!rc)
        rc = attention_block_forward(m, b, l);
    if (!rc)
        rc = tsr_residual_forward(x, a->res2, a->res2);
    if (!rc)
        rc = tsr_layernorm_forward(a->res2, p[slot(l, LN2W)], p[slot(l, LN2B)], a->ln2, a->ln2_mean, a->ln2_rstd,
                                   acc);
    if (!rc)
        rc = tsr_linear_gelu_forward(a->ln2, p[slot(l, FCW)], p[slot(l, FCB)], a->fch, a->fch_gelu, acc);
    if (!rc)
        rc = tsr_linear_forward(a->fch_gelu, p[slot(l, FCPROJW)], p[slot(l, FCPROJB)], a->res3, acc);
    if (!rc)
        rc = tsr_residual_forward(a->res2, a->res3, a->res3);
    return rc;
}

static tsr_desc_t *block_input(tsr_gpt2_batch_t *b, int l) { return l == 0 ? b->encoded : b->acts[l - 1].res3; }

/* Whether some of the sub-batch's samples are this rank's (owner_2d). */
static int has_samples_here(const tsr_gpt2_model_t *m, const tsr_gpt2_batch_t *b)
{
    int me = tsr_rank(), P = tsr_size();
    return tsr_gpt2_rank_of_row(b->dist2d.first, m->B, P) <= me &&
           tsr_gpt2_rank_of_row(b->dist2d.first + b->B - 1, m->B, P) >= me;
}

/* Hold back the transfers of set[first .. first + n) until this rank's last
 * sub-batch's (first) tile of gate(b, l) is written by the tasks submitted so far
 * (tsr_desc_fetch_after; every rank calls it, each with its own gate). The
 * tasks run a few layers behind their submission, so without it the
 * copies of every layer's parameters (and partial gradients) would be
 * received as soon as their owners have them, and held at once. */
static tsr_desc_t *own_gate(tsr_gpt2_model_t *m, tsr_desc_t *(*gate)(tsr_gpt2_batch_t *, int), int l)
{
    tsr_desc_t *g = NULL;
    for (int r = m->nsub - 1; r >= 0 && !g && tsr_size() > 1; r--)
        if (has_samples_here(m, &m->sub[r]))
            g = gate(&m->sub[r], l);
    return g;
}

static int fetch_after(tsr_gpt2_model_t *m, tsr_desc_t **set, int first, int n,
                       tsr_desc_t *(*gate)(tsr_gpt2_batch_t *, int), int l)
{
    tsr_desc_t *g = own_gate(m, gate, l);
    int rc = TSR_SUCCESS;
    tsr_desc_fetch_batch_begin(); /* one gate task for the n */
    for (int s = first; g && s < first + n && !rc; s++)
        rc = tsr_desc_fetch_after(set[s], g);
    int end_rc = tsr_desc_fetch_batch_end();
    return rc ? rc : end_rc;
}

static int fetch_layer_after(tsr_gpt2_model_t *m, int layer, tsr_desc_t *(*gate)(tsr_gpt2_batch_t *, int), int l)
{
    return fetch_after(m, m->params, slot(layer, 0), TSR_GPT2_PER_LAYER, gate, l);
}

/* The gates of the prefetch window: the forward fetches layer l + 1 once
 * layer l's input is written, the backward layer l - 1 once d(res3) of
 * layer l is; a step's first fetches wait for the last step's backward,
 * the backward's first for the logits. */
static tsr_desc_t *input_gate(tsr_gpt2_batch_t *b, int l) { return block_input(b, l); }
static tsr_desc_t *dres_gate(tsr_gpt2_batch_t *b, int l) { (void)l; return b->dres; }
static tsr_desc_t *logits_gate(tsr_gpt2_batch_t *b, int l) { (void)l; return b->logits; }

static int loss_forward(tsr_gpt2_model_t *m, tsr_gpt2_batch_t *b, int with_loss)
{
    tsr_desc_t **p = m->params;
    tsr_reduction_t acc = m->tiles.accum;
    int rc = tsr_layernorm_forward(block_input(b, m->cfg.L), p[LNFW], p[LNFB], b->lnf, b->lnf_mean, b->lnf_rstd, acc);
    if (!rc)
        rc = tsr_linear_forward(b->lnf, p[WTE], NULL, b->logits, acc); /* tied LM head */
    if (!rc && with_loss)
        rc = tsr_crossentropy_forward(b->logits, b->ce_stats, b->losses, b->targets, m->cfg.V, acc);
    return rc;
}

/* Several GPUs (worker groups): the replicas of this rank's parameter tiles
 * [first, first + n) on each of its sub-batches' GPUs copied once
 * gate(sub-batch, l) is written, a layer ahead of the tasks that read them
 * (which would ask for them only once ready, and wait for them then). */
static int prefetch_params_after(tsr_gpt2_model_t *m, int first, int n, tsr_desc_t *(*gate)(tsr_gpt2_batch_t *, int),
                                 int l)
{
    int rc = TSR_SUCCESS;
    for (int r = 0; r < m->nsub; r++)
        for (int s = first; s < first + n && !rc; s++)
            rc = tsr_desc_prefetch_to_group_after(m->params[s], tsr_worker_group_of(r), gate(&m->sub[r], l));
    return rc;
}

/* Several ranks: the copies this rank received of parameters [first,
 * first + n), read by all its sub-batches, are kept for them all (one
 * receive, not one a sub-batch: tsr_desc_keep_received) and dropped here,
 * once every task reading them is submitted. */
static void drop_params(tsr_desc_t **set, int first, int n)
{
    for (int s = first; s < first + n; s++)
        tsr_desc_drop_received(set[s]);
}

/* Several ranks: what this rank received of parameters [first, first + n)
 * (the tasks reading them are submitted) copied to each of its GPUs as it
 * arrives, not when a task there is ready to read it. */
static int prefetch_received_params(tsr_gpt2_model_t *m, int first, int n)
{
    int rc = TSR_SUCCESS;
    for (int s = first; s < first + n && !rc; s++)
        rc = tsr_desc_prefetch_received(m->params[s]);
    return rc;
}

/* The forward's tasks reading parameters [first, first + n) are submitted:
 * the received ones go to the GPUs, and are dropped unless kept for the
 * backward (keep_params). */
static int forward_read_params(tsr_gpt2_model_t *m, int first, int n)
{
    int rc = prefetch_received_params(m, first, n);
    if (!m->keep_params)
        drop_params(m->params, first, n);
    return rc;
}

/* The LM head's replicas of the token embedding on the sub-batches' GPUs
 * (tsr_gpt2_wte_summed_early: no earlier task there reads it), sub-batch
 * r's copied once its layer r (L - 1) / nsub is done: one copy at a time
 * overlaps the forward, where copies made at once, or when the LM head
 * asks, share its home GPU's link and hold up the layers' parameters. */
static int prefetch_lm_head(tsr_gpt2_model_t *m, int l)
{
    int rc = TSR_SUCCESS;
    for (int r = 0; r < m->nsub && !rc && tsr_gpt2_wte_summed_early(m); r++)
        if (r * (m->cfg.L - 1) / m->nsub == l)
            rc = tsr_desc_prefetch_to_group_after(m->params[WTE], tsr_worker_group_of(r), m->sub[r].acts[l].res3);
    return rc;
}

/* ---- a layer of every sub-batch, by several submitting threads ---------------- */

typedef struct {
    tsr_gpt2_model_t *m;
    int l, n, with_loss;
    int *subs; /* the sub-batches this rank submits */
} layer_streams_t;

/* A phase of the step over the sub-batches: one's tasks (stream) and the
 * parameters they read whole (reads), sent in their place to a sub-batch
 * on another rank. */
typedef struct {
    int (*stream)(int s, void *arg);
    int (*reads)(int l, int slots[TSR_GPT2_PER_LAYER]);
} sub_batch_phase_t;

static int forward_stream(int s, void *arg)
{
    const layer_streams_t *w = arg;
    tsr_gpt2_batch_t *b = &w->m->sub[w->subs[s]];
    return block_forward(w->m, b, w->l, block_input(b, w->l));
}

static int block_backward(tsr_gpt2_model_t *m, tsr_gpt2_batch_t *b, int l, tsr_desc_t *x);
static int loss_forward(tsr_gpt2_model_t *m, tsr_gpt2_batch_t *b, int with_loss);
static int head_backward(tsr_gpt2_model_t *m, tsr_gpt2_batch_t *b);
static void invalidate_layer(tsr_gpt2_batch_t *b, int l);

static int loss_stream(int s, void *arg)
{
    const layer_streams_t *w = arg;
    return loss_forward(w->m, &w->m->sub[w->subs[s]], w->with_loss);
}

static int head_stream(int s, void *arg)
{
    const layer_streams_t *w = arg;
    return head_backward(w->m, &w->m->sub[w->subs[s]]);
}

static int backward_stream(int s, void *arg)
{
    const layer_streams_t *w = arg;
    tsr_gpt2_batch_t *b = &w->m->sub[w->subs[s]];
    int rc = block_backward(w->m, b, w->l, block_input(b, w->l));
    if (!rc)
        invalidate_layer(b, w->l);
    return rc;
}

/* Whether the sub-batches' streams may be submitted by several threads: one
 * rank, or each rank submitting only its own sub-batches (own_only: then
 * no call makes a temporary, whose MPI tags every rank must take in one
 * order, and no task of one sub-batch runs on another rank). */
static int streams_in_parallel(const tsr_gpt2_model_t *m) { return tsr_size() == 1 || m->own_only; }

/* The threads that submit the streams of `here` sub-batches of this rank. */
static int submitting_threads(const tsr_gpt2_model_t *m, int here)
{
    int threads = tsr_submit_threads();
    return !streams_in_parallel(m) || here < 2 ? 1 : here < threads ? here : threads;
}

int tsr_gpt2_submitting_threads(const tsr_gpt2_model_t *m)
{
    int here = 0;
    for (int r = 0; r < m->nsub; r++)
        here += runs_here(m, &m->sub[r]);
    return submitting_threads(m, here);
}

/* Phase ph (layer l) of every sub-batch: the parameters of the sub-batches
 * on other ranks sent, then this rank's sub-batches as streams
 * (tsr_submit_streams: each writes only its own activations and
 * gradients). By several threads under several ranks, the parameter tiles
 * they read are received first, by this thread, so that no stream's task
 * is submitted before the receive another stream's task would post. */
static int sub_batches_phase(tsr_gpt2_model_t *m, const sub_batch_phase_t *ph, int l, int with_loss)
{
    layer_streams_t w = { m, l, 0, with_loss, malloc((size_t)m->nsub * sizeof(int)) };
    if (!w.subs)
        return TSR_ENOMEM;
    int rc = TSR_SUCCESS, slots[TSR_GPT2_PER_LAYER], nread = ph->reads(l, slots);
    for (int r = 0; r < m->nsub && !rc; r++) {
        if (runs_here(m, &m->sub[r]))
            w.subs[w.n++] = r;
        else
            rc = send_params(m, &m->sub[r], slots, nread);
    }
    int parallel = submitting_threads(m, w.n) > 1;
    for (int k = 0; k < nread && !rc && parallel && tsr_size() > 1; k++)
        rc = tsr_desc_receive_read(m->params[slots[k]]);
    if (!rc && parallel)
        rc = tsr_submit_streams(w.n, ph->stream, &w);
    for (int s = 0; s < w.n && !rc && !parallel; s++)
        rc = ph->stream(s, &w);
    free(w.subs);
    return rc;
}

static const sub_batch_phase_t block_forward_phase = { forward_stream, block_forward_reads };
static const sub_batch_phase_t loss_forward_phase = { loss_stream, loss_forward_reads };
static const sub_batch_phase_t head_backward_phase = { head_stream, head_backward_reads };
static const sub_batch_phase_t block_backward_phase = { backward_stream, block_backward_reads };

/* Submit the forward (and loss tasks with targets), layer by layer over the
 * sub-batches, so that every rank reaches a layer's prefetch gate at the
 * same point of the flow. */
static int forward_layers(tsr_gpt2_model_t *m, int with_loss)
{
    tsr_desc_t **p = m->params;
    int L = m->cfg.L;
    int rc = fetch_after(m, p, WTE, 2, dres_gate, 0);
    if (!rc)
        rc = fetch_layer_after(m, 0, dres_gate, 0);
    for (int r = 0; r < m->nsub && !rc; r++) {
        tsr_gpt2_batch_t *b = &m->sub[r];
        rc = tsr_encoder_forward(b->encoded_at_wte ? b->encoded_at_wte : b->encoded, p[WTE], p[WPE], b->inputs, b->B,
                                 m->T);
    }
    if (!rc)
        rc = prefetch_received_params(m, WTE, 2);
    for (int l = 0; l < L && !rc; l++) {
        if (l + 1 < L) {
            rc = fetch_layer_after(m, l + 1, input_gate, l);
            if (!rc)
                rc = prefetch_params_after(m, slot(l + 1, 0), TSR_GPT2_PER_LAYER, input_gate, l);
        } else if (!(rc = fetch_after(m, p, WTE, 1, input_gate, l))) { /* the LM head's */
            rc = fetch_after(m, p, LNFW, 2, input_gate, l);
        }
        if (!rc)
            rc = sub_batches_phase(m, &block_forward_phase, l, 0);
        if (!rc)
            rc = forward_read_params(m, slot(l, 0), TSR_GPT2_PER_LAYER);
        if (!rc)
            rc = prefetch_lm_head(m, l);
    }
    if (!rc)
        rc = sub_batches_phase(m, &loss_forward_phase, L, with_loss);
    if (!rc) /* the final layernorm's (the embeddings' went to the GPUs after their tasks) */
        rc = forward_read_params(m, LNFW, 2);
    if (!rc && !m->keep_params) /* the embeddings' and the LM head's */
        drop_params(m->params, WTE, 2);
    return rc;
}

int tsr_gpt2_forward_submit(tsr_gpt2_model_t *m, const int *inputs, const int *targets)
{
    int rc = check_tokens(m, inputs, m->cfg.Vp, "inputs");
    if (!rc && targets)
        rc = check_tokens(m, targets, m->cfg.V, "targets");
    /* the token ids are copied into the tasks' arguments at submission, so
     * b->inputs and b->targets may be refilled by the next step right away */
    for (int r = 0; r < m->nsub && !rc; r++) {
        tsr_gpt2_batch_t *b = &m->sub[r];
        size_t n = (size_t)b->B * m->T, first = (size_t)r * n;
        memcpy(b->inputs, inputs + first, n * sizeof(int));
        if (targets)
            memcpy(b->targets, targets + first, n * sizeof(int));
    }
    return rc ? rc : forward_layers(m, targets != NULL);
}

int tsr_gpt2_loss(tsr_gpt2_model_t *m, float *loss)
{
    double sum = 0;
    int rc = TSR_SUCCESS;
    for (int r = 0; r < m->nsub && !rc; r++) {
        float mean;
        rc = tsr_crossentropy_mean(m->sub[r].losses, &mean);
        sum += mean;
    }
    if (rc)
        return rc;
    *loss = (float)(sum / m->nsub); /* equal sub-batches: the mean of means is the batch mean */
    if (!isfinite(*loss)) {
        tsr_log(TSR_LOG_ERROR, "gpt2: the loss is %f (NaN or Inf)", *loss);
        return TSR_ENAN;
    }
    return TSR_SUCCESS;
}

int tsr_gpt2_forward(tsr_gpt2_model_t *m, const int *inputs, const int *targets, float *loss)
{
    int rc = tsr_gpt2_forward_submit(m, inputs, targets);
    return rc || !targets ? rc : tsr_gpt2_loss(m, loss);
}

/* Backward of attention_block_forward: b->dres (d res2) -> b->dln (d ln1)
 * and the four projection gradients. Unfused, the attention output is
 * merged again from the layer's head tensor (the 2D scratch is shared by
 * the layers). */
static int attention_block_backward(tsr_gpt2_model_t *m, tsr_gpt2_batch_t *b, int l)
{
    tsr_desc_t **p = m->params, **g = b->grads;
    tsr_gpt2_layer_acts_t *a = &b->acts[l];
    tsr_reduction_t acc = m->tiles.accum;
    const tsr_write_t set = TSR_OVERWRITE;
    int rc;
    if (m->fused) {
        rc = tsr_linear_attproj_backward(a->atty, p[slot(l, ATTPROJW)], b->dres, b->datty, g[slot(l, ATTPROJW)],
                                         g[slot(l, ATTPROJB)], set, set, acc);
    } else {
        rc = tsr_heads_merge(a->atty, NULL, NULL, b->att2d, set);
        if (!rc)
            rc = tsr_linear_backward(b->att2d, p[slot(l, ATTPROJW)], b->dres, b->datt2d, g[slot(l, ATTPROJW)],
                                     g[slot(l, ATTPROJB)], set, set, acc);
        if (!rc)
            rc = tsr_heads_split(b->datt2d, b->datty, NULL, NULL, set);
    }
    if (!rc)
        rc = tsr_attention_backward(a->q, a->k, a->v, a->atty, b->datty, a->att_stats, b->dq, b->dk, b->dv,
                                    TSR_OVERWRITE, acc);
    if (rc)
        return rc;
    if (m->fused)
        return tsr_linear_qkv_backward(a->ln1, p[slot(l, QKVW)], b->dq, b->dk, b->dv, b->dln, g[slot(l, QKVW)],
                                       g[slot(l, QKVB)], set, set, acc);
    rc = tsr_heads_merge(b->dq, b->dk, b->dv, b->qkv2d, set);
    return rc ? rc : tsr_linear_backward(a->ln1, p[slot(l, QKVW)], b->qkv2d, b->dln, g[slot(l, QKVW)],
                                         g[slot(l, QKVB)], set, set, acc);
}

/* One transformer block, backward; b->dres holds d(res3) on entry and
 * d(x) on exit (the residual stream's gradient is accumulated in place). */
static int block_backward(tsr_gpt2_model_t *m, tsr_gpt2_batch_t *b, int l, tsr_desc_t *x)
{
    tsr_desc_t **p = m->params, **g = b->grads;
    tsr_gpt2_layer_acts_t *a = &b->acts[l];
    tsr_reduction_t acc = m->tiles.accum;
    const tsr_write_t set = TSR_OVERWRITE;
    int rc = tsr_linear_backward(a->fch_gelu, p[slot(l, FCPROJW)], b->dres, b->dfch, g[slot(l, FCPROJW)],
                                 g[slot(l, FCPROJB)], set, set, acc);
    if (!rc)
        rc = tsr_linear_gelu_backward(a->ln2, p[slot(l, FCW)], a->fch, b->dfch, b->dfch, b->dln, g[slot(l, FCW)],
                                      g[slot(l, FCB)], set, set, acc);
    if (!rc)
        rc = tsr_layernorm_backward(b->dln, a->res2, p[slot(l, LN2W)], a->ln2_mean, a->ln2_rstd, b->dres,
                                    g[slot(l, LN2W)], g[slot(l, LN2B)], TSR_ACCUMULATE, TSR_OVERWRITE, acc,
                                    b->ln_work);
    if (!rc)
        rc = attention_block_backward(m, b, l);
    if (!rc)
        rc = tsr_layernorm_backward(b->dln, x, p[slot(l, LN1W)], a->ln1_mean, a->ln1_rstd, b->dres,
                                    g[slot(l, LN1W)], g[slot(l, LN1B)], TSR_ACCUMULATE, TSR_OVERWRITE, acc,
                                    b->ln_work);
    return rc;
}

/* Activations and scratch are dead once the backward has read them (the
 * next step writes them first): invalidating lets StarPU drop their copies
 * instead of moving or writing back dead data. */
static void invalidate(tsr_desc_t *const *d, size_t n)
{
    for (size_t k = 0; k < n; k++)
        tsr_desc_invalidate(d[k]);
}

static void invalidate_layer(tsr_gpt2_batch_t *b, int l)
{
    invalidate((tsr_desc_t *const *)&b->acts[l], sizeof b->acts[l] / sizeof(tsr_desc_t *));
}

/* The tied LM head's weight gradient of one sub-batch (written over dwte),
 * after which its logits and final layernorm output are dead. */
static int lm_head_weight_grad(tsr_gpt2_batch_t *b, tsr_desc_t *wte, tsr_desc_t *dwte, tsr_reduction_t acc)
{
    int rc = tsr_linear_backward(b->lnf, wte, b->logits, NULL, dwte, NULL, TSR_OVERWRITE, TSR_OVERWRITE, acc);
    if (!rc) {
        tsr_desc_t *head[] = { b->logits, b->lnf };
        invalidate(head, sizeof head / sizeof head[0]);
    }
    return rc;
}

/* The loss, LM head and final layernorm backward of one sub-batch; sharded,
 * the LM head's weight gradient waits for wte_grad_by_columns (the logits'
 * gradient is smaller than the token embedding's, which would otherwise be
 * held through the whole backward). */
static int head_backward(tsr_gpt2_model_t *m, tsr_gpt2_batch_t *b)
{
    tsr_desc_t **p = m->params, **g = b->grads;
    tsr_reduction_t acc = m->tiles.accum;
    float dloss = 1.0f / ((float)m->B * m->T); /* the whole batch's mean loss */
    int rc = tsr_crossentropy_backward(b->logits, b->ce_stats, b->targets, m->cfg.V, dloss); /* in place */
    if (!rc) /* every gradient's first write overwrites it: no zero-grad pass */
        rc = tsr_linear_backward(b->lnf, p[WTE], b->logits, b->dln, NULL, NULL, TSR_OVERWRITE, TSR_OVERWRITE, acc);
    if (!rc && !m->grad_sum) /* sharded, it comes last: wte_grad_by_columns */
        rc = lm_head_weight_grad(b, p[WTE], g[WTE], acc);
    if (!rc)
        rc = tsr_layernorm_backward(b->dln, block_input(b, m->cfg.L), p[LNFW], b->lnf_mean, b->lnf_rstd, b->dres,
                                    g[LNFW], g[LNFB], TSR_OVERWRITE, TSR_OVERWRITE, acc, b->ln_work);
    if (!rc) {
        tsr_desc_t *head[] = { b->ce_stats, b->lnf_mean, b->lnf_rstd };
        invalidate(head, sizeof head / sizeof head[0]);
    }
    return rc;
}

/* The embeddings' weight gradients of one sub-batch (sharded, the token
 * embedding's was made by wte_grad_by_columns), then its scratch is dead. */
static int embeddings_backward(tsr_gpt2_model_t *m, tsr_gpt2_batch_t *b)
{
    tsr_desc_t **g = b->grads;
    tsr_reduction_t acc = m->tiles.accum;
    int rc = TSR_SUCCESS;
    if (b->dres_at_wte) /* into the sum of the LM head's gradients, where it is homed */
        rc = tsr_encoder_backward(m->sub[0].grads[WTE], NULL, b->dres_at_wte, b->inputs, b->B, m->T, TSR_ACCUMULATE,
                                  acc);
    else if (!m->grad_sum) /* wte holds the LM head's gradient: add to it */
        rc = tsr_encoder_backward(g[WTE], NULL, b->dres, b->inputs, b->B, m->T, TSR_ACCUMULATE, acc);
    if (!rc)
        rc = tsr_encoder_backward(NULL, g[WPE], b->dres, b->inputs, b->B, m->T, TSR_OVERWRITE, acc);
    if (!rc) {
        tsr_desc_t *scratch[] = { b->encoded, b->dres, b->dln, b->dfch, b->datty, b->dq, b->dk, b->dv,
                                  b->qkv2d, b->att2d, b->datt2d };
        invalidate(scratch, sizeof scratch / sizeof scratch[0]);
    }
    return rc;
}

/* ---- owner-computes: the partial gradients' gates ------------------------------ */

typedef struct {
    tsr_desc_t *const *parts;
    int n, r;
    const tsr_desc_t *sum;
} partial_grad_pick_t;

/* Whether this rank sends or receives tile (bi, i, j) of sub-batch r's
 * partial gradient in the tree of sum_grads_by_tree. */
static int moves_partial_grad(const tsr_desc_t *d, int bi, int i, int j, void *arg)
{
    const partial_grad_pick_t *p = arg;
    return tsr_tile_is_local(d, bi, i, j) ||
           tsr_sum_tree_reader(p->parts, p->n, p->sum, p->r, bi, i, j) == tsr_rank();
}

/* fetch_after for parts[r] on the tiles this rank sends or receives in the
 * tree that sums parts[0 .. nsub) into sum. */
static int fetch_moved_after(const tsr_gpt2_model_t *m, tsr_desc_t *const *parts, int r, const tsr_desc_t *sum,
                             tsr_desc_t *g)
{
    partial_grad_pick_t p = { parts, m->nsub, r, sum };
    return tsr_desc_fetch_after_some(parts[r], g, moves_partial_grad, &p);
}

/* fetch_after for sub-batch r's partial gradients of slots [first, first +
 * n), on the tiles this rank sends or receives alone: the others' gates
 * would hold back nothing here, and a rank would gate every sub-batch's. */
static int fetch_moved_partial_grads_after(tsr_gpt2_model_t *m, int r, int first, int n)
{
    tsr_desc_t *g = own_gate(m, dres_gate, 0), **parts = malloc(m->nsub * sizeof *parts);
    int rc = parts ? TSR_SUCCESS : TSR_ENOMEM;
    for (int s = first; g && s < first + n && !rc; s++) {
        for (int k = 0; k < m->nsub; k++)
            parts[k] = m->sub[k].grads[s];
        rc = fetch_moved_after(m, parts, r, m->grad_sum[s], g);
    }
    free(parts);
    return rc;
}

/* The gates of every sub-batch's partial gradients of slots [first, first
 * + n) (their transfers wait for this rank's backward), as one task. */
static int fetch_partial_grads_after(tsr_gpt2_model_t *m, int first, int n)
{
    int rc = TSR_SUCCESS;
    tsr_desc_fetch_batch_begin();
    for (int r = 0; r < m->nsub && !rc; r++)
        rc = m->own_only ? fetch_moved_partial_grads_after(m, r, first, n)
                         : fetch_after(m, m->sub[r].grads, first, n, dres_gate, 0);
    int end_rc = tsr_desc_fetch_batch_end();
    return rc ? rc : end_rc;
}

static int is_local_tile(const tsr_desc_t *d, int bi, int i, int j, void *arg)
{
    (void)arg;
    return tsr_tile_is_local(d, bi, i, j);
}

static tsr_desc_t *dwte_column_gate(tsr_gpt2_batch_t *b, int c) { return b->dwte_cols[c]; }

/* Column c of sub-batch r's partial token-embedding gradient waits for
 * column c - WTE_COLUMNS_IN_FLIGHT of this rank's own to be summed. */
static int fetch_wte_column_after(tsr_gpt2_model_t *m, tsr_desc_t *const *parts, int r, int c)
{
    int gate_column = c - WTE_COLUMNS_IN_FLIGHT, rc = TSR_SUCCESS;
    tsr_desc_t *g = own_gate(m, dwte_column_gate, gate_column), *half = m->sub[r].dwte_half;
    tsr_desc_fetch_batch_begin(); /* one gate task with the second half's */
    if (m->own_only)
        rc = fetch_moved_after(m, parts, r, m->dwte_sum_cols[c], g);
    else
        rc = fetch_after(m, m->sub[r].dwte_cols, c, 1, dwte_column_gate, gate_column);
    if (!rc && half && g)
        rc = tsr_desc_fetch_after_some(m->sub[r].dwte_half_cols[c], g, is_local_tile, NULL);
    int end_rc = tsr_desc_fetch_batch_end();
    return rc ? rc : end_rc;
}

/* part = the LM head's weight gradient of column c over the first half of
 * b's token tiles, plus (added after) that over the second half, made in
 * dwte_half (WTE_SPLIT_TOKEN_TILES). */
static int lm_head_weight_grad_halves(tsr_gpt2_model_t *m, tsr_gpt2_batch_t *b, tsr_desc_t *part, int c)
{
    tsr_desc_t *dst[2] = { part, b->dwte_half_cols[c] };
    int rc = TSR_SUCCESS;
    for (int k = 0; k < 2 && !rc; k++)
        rc = tsr_linear_backward(b->lnf_halves[k], m->wte_cols[c], b->logits_row_halves[k][c], NULL, dst[k], NULL,
                                 TSR_OVERWRITE, TSR_OVERWRITE, m->tiles.accum);
    if (!rc)
        rc = tsr_residual_forward(part, dst[1], part);
    if (!rc)
        tsr_desc_invalidate(dst[1]);
    return rc;
}

/* The tied LM head's weight gradient into column c of the token embedding's
 * partial gradients (parts), for the sub-batches this rank makes (in halves
 * where the column is made after the backward and the sub-batch has them);
 * column c of their logits is dead after it. */
static int lm_head_weight_grad_column(tsr_gpt2_model_t *m, tsr_desc_t *const *parts, int c)
{
    int rc = TSR_SUCCESS, late = c >= WTE_COLUMNS_IN_FLIGHT; /* lm_head_columns_early made the others */
    for (int r = 0; r < m->nsub && !rc; r++) {
        tsr_gpt2_batch_t *b = &m->sub[r];
        if (!runs_here(m, b)) /* its rank makes it from its own tiles alone */
            continue;
        if (late && b->dwte_half)
            rc = lm_head_weight_grad_halves(m, b, parts[r], c);
        else
            rc = tsr_linear_backward(b->lnf, m->wte_cols[c], b->logits_rows[c], NULL, parts[r], NULL,
                                     TSR_OVERWRITE, TSR_OVERWRITE, m->tiles.accum);
        if (!rc)
            tsr_desc_invalidate(b->logits_rows[c]);
    }
    return rc;
}

/* Column c of every sub-batch's partial token-embedding gradient. */
static void wte_column_parts(const tsr_gpt2_model_t *m, int c, tsr_desc_t **parts)
{
    for (int r = 0; r < m->nsub; r++)
        parts[r] = m->sub[r].dwte_cols[c];
}

/* Sharded, WTE_HEAD_LAYERS before the backward's end: the LM head's weight
 * gradient of the first WTE_COLUMNS_IN_FLIGHT columns (its inputs are ready
 * since the loss), this rank's partial tiles held back (fetch_after) until
 * its backward is as far; the copies other ranks receive of them wait for
 * the end, as the other columns' (wte_grad_by_columns). Its GEMMs are
 * ordered chains over a tile's token tiles: made after the backward, each
 * round of columns ran them on half the workers while the rest waited. */
static int lm_head_columns_early(tsr_gpt2_model_t *m)
{
    tsr_desc_t *g = own_gate(m, dres_gate, 0), **parts = malloc(m->nsub * sizeof *parts);
    int rc = parts ? TSR_SUCCESS : TSR_ENOMEM, ncols = m->wte_ncols < WTE_COLUMNS_IN_FLIGHT ? m->wte_ncols : WTE_COLUMNS_IN_FLIGHT;
    tsr_desc_fetch_batch_begin(); /* one gate task for them all */
    for (int r = 0; r < m->nsub && !rc; r++)
        for (int c = 0; c < ncols && !rc; c++)
            rc = tsr_desc_fetch_after_some(m->sub[r].dwte_cols[c], g, is_local_tile, NULL);
    int end_rc = tsr_desc_fetch_batch_end();
    rc = rc ? rc : end_rc;
    for (int c = 0; c < ncols && !rc; c++) {
        wte_column_parts(m, c, parts);
        rc = lm_head_weight_grad_column(m, parts, c);
        if (!rc)
            drop_params(m->wte_cols, c, 1);
    }
    free(parts);
    return rc;
}

/* Sharded: the token embedding's gradient (the tied LM head's weight
 * gradient plus the encoder's), a column of vocabulary tiles at a time:
 * made, summed into its owners' tiles (sum_grads_by_tree's tree) and freed,
 * each column's partial tiles and the copies received to add them held back
 * (fetch_after) until the column WTE_COLUMNS_IN_FLIGHT before is summed.
 * Whole, each rank held every sub-batch's partial gradient of it at once
 * (154 MB for 124M) plus the copies it adds. The first columns' LM-head
 * part was made during the backward (lm_head_columns_early); the encoder's
 * part reads the end of the backward. The logits and the final layernorm
 * output are dead after it. */
static int wte_grad_by_columns(tsr_gpt2_model_t *m)
{
    tsr_reduction_t acc = m->tiles.accum;
    tsr_desc_t **parts = malloc(m->nsub * sizeof *parts);
    int rc = parts ? TSR_SUCCESS : TSR_ENOMEM;
    if (!rc)
        rc = fetch_partial_grads_after(m, WTE, 1);
    for (int c = 0; c < m->wte_ncols && !rc; c++) {
        wte_column_parts(m, c, parts);
        for (int r = 0; r < m->nsub && !rc && c >= WTE_COLUMNS_IN_FLIGHT; r++)
            rc = fetch_wte_column_after(m, parts, r, c);
        if (!rc && c >= WTE_COLUMNS_IN_FLIGHT && !(rc = lm_head_weight_grad_column(m, parts, c)))
            drop_params(m->wte_cols, c, 1);
        for (int r = 0; r < m->nsub && !rc; r++) {
            tsr_gpt2_batch_t *b = &m->sub[r];
            if (runs_here(m, b))
                rc = tsr_encoder_backward(parts[r], NULL, b->dres, b->inputs, b->B, m->T, TSR_ACCUMULATE, acc);
        }
        if (!rc)
            rc = tsr_sum_tree(parts, m->nsub, m->dwte_sum_cols[c]);
        if (!rc)
            invalidate(parts, m->nsub);
    }
    free(parts);
    for (int r = 0; r < m->nsub && !rc; r++) {
        tsr_desc_t *head[] = { m->sub[r].logits, m->sub[r].lnf };
        invalidate(head, sizeof head / sizeof head[0]);
    }
    return rc;
}

/* The sharded sum of slots [first, first + n), placed like the parameters:
 * a tree over the sub-batches (log2 deep rather than a chain of nsub - 1
 * additions on each tile's owner, which the last gradients of a step, all
 * ready at once, wait for). Submitted as soon as the backward has submitted
 * the slots' last writes, with the partial gradients' transfers held back
 * until this rank's backward is as far (so a rank holds the partial
 * gradients of a layer or two, not of the model); the partial gradients
 * are dead afterwards (their memory goes back: tsr_desc_alloc_on_write). */
static int sum_grads_by_tree(tsr_gpt2_model_t *m, int first, int n)
{
    tsr_desc_t **parts = malloc(m->nsub * sizeof *parts);
    int rc = parts ? TSR_SUCCESS : TSR_ENOMEM;
    if (!rc)
        rc = fetch_partial_grads_after(m, first, n);
    for (int s = first; s < first + n && !rc; s++) {
        for (int r = 0; r < m->nsub; r++)
            parts[r] = m->sub[r].grads[s];
        rc = tsr_sum_tree(parts, m->nsub, m->grad_sum[s]);
    }
    free(parts);
    for (int r = 0; r < m->nsub && !rc; r++)
        invalidate(m->sub[r].grads + first, n);
    return rc;
}

/* The LM head's parts of the token embedding's gradient summed
 * (tsr_gpt2_wte_summed_early): those of sub-batches 1 .. nsub - 1 by a
 * tree (at level h, sub-batch q adds in q + h's on q's workers: dwte_own),
 * then their sum into sub-batch 0's. The GPU of sub-batch 0, which also
 * runs every embedding task, adds once; no other more than log2 nsub times. */
static int sum_wte_head_parts(tsr_gpt2_model_t *m)
{
    tsr_desc_t *sum = m->sub[0].grads[WTE];
    for (int h = 1; h < m->nsub - 1; h *= 2)
        for (int q = 1; q + h < m->nsub; q += 2 * h) {
            tsr_desc_t *part = m->sub[q].dwte_own;
            int rc = tsr_residual_forward(part, m->sub[q + h].grads[WTE], part);
            if (rc)
                return rc;
            invalidate(&m->sub[q + h].grads[WTE], 1);
        }
    int rc = tsr_residual_forward(sum, m->sub[1].grads[WTE], sum);
    if (!rc)
        invalidate(&m->sub[1].grads[WTE], 1);
    return rc;
}

/* One rank's (or the rank-0 placement's) sum: sub-batch 0's gradients plus
 * each other sub-batch's in order, on the owner of each tile (the token
 * embedding's already summed where tsr_gpt2_wte_summed_early). */
static int sum_grads_in_order(tsr_gpt2_model_t *m)
{
    tsr_desc_t **sum = m->sub[0].grads;
    for (int r = 1; r < m->nsub; r++) {
        for (int s = tsr_gpt2_wte_summed_early(m) ? WTE + 1 : 0; s < m->ntensors; s++) {
            int rc = tsr_residual_forward(sum[s], m->sub[r].grads[s], sum[s]);
            if (rc)
                return rc;
        }
        invalidate(m->sub[r].grads, m->ntensors);
    }
    return TSR_SUCCESS;
}

/* Layer by layer over the sub-batches (as the forward), each layer's
 * parameters fetched a layer ahead (unless kept from the forward:
 * keep_params) and, sharded, its gradients summed as soon as they are
 * written. */
int tsr_gpt2_backward(tsr_gpt2_model_t *m)
{
    tsr_desc_t **p = m->params;
    int L = m->cfg.L, rc = TSR_SUCCESS, fetch = !m->keep_params; /* else received in the forward */
    if (fetch)
        rc = fetch_after(m, p, WTE, 1, logits_gate, 0);
    if (!rc && fetch)
        rc = fetch_after(m, p, LNFW, 2, logits_gate, 0);
    if (!rc && fetch)
        rc = fetch_layer_after(m, L - 1, logits_gate, 0);
    if (!rc)
        rc = sub_batches_phase(m, &head_backward_phase, L, 0);
    if (!rc)
        drop_params(m->params, 0, NGLOBAL);
    if (!rc && tsr_gpt2_wte_summed_early(m))
        rc = sum_wte_head_parts(m);
    if (!rc && m->grad_sum)
        rc = sum_grads_by_tree(m, LNFW, 2);
    for (int l = L - 1; l >= 0 && !rc; l--) {
        if (l > 0 && fetch)
            rc = fetch_layer_after(m, l - 1, dres_gate, l);
        if (!rc && m->grad_sum && l == (L < WTE_HEAD_LAYERS ? L : WTE_HEAD_LAYERS) - 1)
            rc = lm_head_columns_early(m);
        if (!rc)
            rc = sub_batches_phase(m, &block_backward_phase, l, 0);
        if (!rc)
            drop_params(m->params, slot(l, 0), TSR_GPT2_PER_LAYER);
        if (!rc && m->grad_sum)
            rc = sum_grads_by_tree(m, slot(l, 0), TSR_GPT2_PER_LAYER);
    }
    if (!rc && m->grad_sum)
        rc = wte_grad_by_columns(m);
    for (int r = 0; r < m->nsub && !rc; r++) /* on another rank: it reads no parameter */
        rc = runs_here(m, &m->sub[r]) ? embeddings_backward(m, &m->sub[r]) : TSR_SUCCESS;
    if (rc)
        return rc;
    return m->grad_sum ? sum_grads_by_tree(m, WPE, 1) : sum_grads_in_order(m);
}

int tsr_gpt2_update(tsr_gpt2_model_t *m, float lr, float beta1, float beta2, float eps, float weight_decay,
                    int step)
{
    for (int s = 0; s < m->ntensors; s++) {
        tsr_desc_t *g = summed_grads(m)[s];
        int rc = m->master ? tsr_adamw_master(m->master[s], g, m->adam_m[s], m->adam_v[s], m->params[s], lr, beta1,
                                              beta2, eps, weight_decay, step)
                           : tsr_adamw(m->params[s], g, m->adam_m[s], m->adam_v[s], lr, beta1, beta2, eps,
                                       weight_decay, step);
        if (rc)
            return rc;
    }
    return TSR_SUCCESS;
}

int tsr_gpt2_logits_column(tsr_gpt2_model_t *m, int bt, float *out)
{
    int per_sub = m->sub[0].B * m->T;
    tsr_gpt2_batch_t *b = &m->sub[bt / per_sub];
    size_t Vp = m->cfg.Vp, n = Vp * per_sub;
    float *all = tsr_rank() == 0 ? malloc(n * sizeof(float)) : NULL;
    if (tsr_rank() == 0 && !all)
        return TSR_ENOMEM;
    int rc = transfer(b->logits, all, 0);
    if (!rc && all)
        memcpy(out, all + (size_t)(bt % per_sub) * Vp, m->cfg.V * sizeof(float));
    free(all);
    return rc;
}
