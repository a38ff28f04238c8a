/* The tile search: candidates -> model -> shortlist -> refine -> trial
 * plan -> cached trials -> fastest, for every problem whose tiles
 * --tiles auto chooses (internal/tsr_tile_model.h; docs/tiles-auto.md). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "tsr_algorithms.h"
#include "internal/tsr_tile_model.h"

typedef tsr_tile_choice_t choice_t;

/* The workers of all ranks. */
static int workers(void)
{
    return (tsr_ncpu_workers() + tsr_ncuda_workers()) * tsr_size();
}

double tsr_tile_phase_seconds(double work, double tasks, double task_work, double chain, int p)
{
    double rounds = ceil(tasks / p) * task_work / tasks;
    double t = work / p > rounds ? work / p : rounds;
    return t > chain ? t : chain;
}

int tsr_trials_granularity(double tasks, int workers)
{
    double rounds = ceil(tasks / (workers > 0 ? workers : 1));
    int g = rounds > 1 ? (int)ceil(log2(rounds)) : 0;
    return g < TSR_TRIAL_GRAINS - 1 ? g : TSR_TRIAL_GRAINS - 1;
}

int tsr_trials_plan(const double *predicted, const double *tasks, int n, double bytes, int *order)
{
    int p = workers(), k = 0;
    char seen[TSR_TRIAL_GRAINS] = { 0 }, taken[TSR_TRIAL_PLANNED] = { 0 };
    n = n < TSR_TRIAL_PLANNED ? n : TSR_TRIAL_PLANNED;
    for (int i = 0; i < n; i++) {
        int g = tsr_trials_granularity(tasks[i], p);
        if (predicted[i] <= TSR_TRIAL_WINDOW * predicted[0] && !seen[g]) {
            seen[g] = taken[i] = 1;
            order[k++] = i;
        }
    }
    for (int i = 0; i < n; i++)
        if (!taken[i])
            order[k++] = i;
    if (tsr_size() != 1 || bytes > TSR_TRIAL_BYTES)
        return 0;
    int afford = 0;
    double cost = 0;
    while (afford < n && afford < TSR_TRIAL_MAX &&
           (TSR_TRIAL_RUNS + 1) * (cost + predicted[order[afford]]) <= TSR_TRIAL_BUDGET)
        cost += predicted[order[afford++]];
    return afford >= 2 ? afford : 0;
}

/* "mb 128 nb 192 kb 500" (static). */
static const char *tile_text(const tsr_tile_problem_t *pb, const int *tile)
{
    static char text[160];
    int n = 0;
    for (int d = 0; d < pb->ndims; d++)
        n += snprintf(text + n, sizeof text - n, "%s%s %d", d ? " " : "", pb->dim_names[d], tile[d]);
    return text;
}

/* c inserted into list (n entries, best first, at most size; an equal
 * prediction after those listed): the size best are kept, none that failed
 * (NaN) or is infinite. Returns the new count. */
static int keep_best(choice_t *list, int n, int size, choice_t c)
{
    if (!(c.predicted < INFINITY) || (n == size && c.predicted >= list[size - 1].predicted))
        return n;
    int at = n < size ? n : size - 1;
    for (; at > 0 && list[at - 1].predicted > c.predicted; at--)
        list[at] = list[at - 1];
    list[at] = c;
    return n + (n < size);
}

/* Every candidate priced from the calibration alone, in order (the first
 * dimension outermost); the best of each group kept in top (returns how
 * many), and in finest the best of each granularity. */
static int rank_candidates(const tsr_tile_problem_t *pb, choice_t *top, choice_t *finest)
{
    int idx[TSR_TILE_DIMS] = { 0 }, ntop = 0, p = workers();
    choice_t group = { .predicted = INFINITY };
    for (int g = 0; g < TSR_TRIAL_GRAINS; g++)
        finest[g].predicted = INFINITY;
    for (;;) {
        choice_t c = { { 0 }, 0, 0 };
        for (int d = 0; d < pb->ndims; d++)
            c.tile[d] = pb->sizes[d][idx[d]];
        c.predicted = pb->predict(pb->ctx, c.tile, 0, &c.tasks);
        int g = tsr_trials_granularity(c.tasks, p);
        if (c.predicted < finest[g].predicted)
            finest[g] = c;
        if (c.predicted < group.predicted)
            group = c;
        int d = pb->ndims - 1; /* the next candidate */
        while (d >= 0 && ++idx[d] == pb->nsizes[d])
            idx[d--] = 0;
        if (d < pb->group_dims) { /* the group is complete */
            ntop = keep_best(top, ntop, pb->policy->shortlist, group);
            group.predicted = INFINITY;
        }
        if (d < 0)
            return ntop;
    }
}

/* The best of each granularity that top lacks, predicted within
 * TSR_TRIAL_WINDOW of the best, best first, in others: candidates for the
 * trials alone (refining and ranking them too would let the model's known
 * misses, e.g. CPU GEMM tiles of 2048 cubed, win where no trial runs).
 * Returns how many. */
static int other_granularities(const choice_t *finest, const choice_t *top, int ntop, choice_t *others)
{
    int n = 0, p = workers();
    for (int g = 0; ntop && g < TSR_TRIAL_GRAINS; g++) {
        int listed = finest[g].predicted > TSR_TRIAL_WINDOW * top[0].predicted;
        for (int i = 0; i < ntop && !listed; i++)
            listed = tsr_trials_granularity(top[i].tasks, p) == g;
        if (!listed)
            n = keep_best(others, n, TSR_TRIAL_GRAINS, finest[g]);
    }
    return n;
}

/* The shortlist (*ntop) priced again with its tasks measured, best first
 * (those whose prediction failed dropped). */
static int refine(const tsr_tile_problem_t *pb, choice_t *top, int *ntop)
{
    int rc = pb->measure ? pb->measure(pb->ctx, top, *ntop) : TSR_SUCCESS;
    if (rc)
        return rc;
    choice_t refined[TSR_TRIAL_PLANNED] = { { { 0 }, 0, 0 } };
    int n = 0;
    for (int i = 0; i < *ntop; i++) {
        choice_t c = top[i];
        c.predicted = pb->predict(pb->ctx, c.tile, 1, &c.tasks);
        tsr_log(TSR_LOG_DEBUG, "%s: %s, %.4f s from the calibration, %.4f s with its tasks measured", pb->name,
                tile_text(pb, c.tile), top[i].predicted, c.predicted);
        n = keep_best(refined, n, *ntop, c);
    }
    memcpy(top, refined, n * sizeof *top);
    *ntop = n;
    return TSR_SUCCESS;
}

static double volume(const choice_t *c, int ndims)
{
    double v = 1.0;
    for (int d = 0; d < ndims; d++)
        v *= c->tile[d];
    return v;
}

/* The policy's tie: the largest tiles predicted within tie of the best go
 * first. */
static void prefer_larger(const tsr_tile_problem_t *pb, choice_t *list, int n)
{
    int pick = 0;
    for (int i = 1; pb->policy->tie > 0 && i < n; i++)
        if (list[i].predicted <= list[0].predicted * pb->policy->tie &&
            volume(&list[i], pb->ndims) > volume(&list[pick], pb->ndims))
            pick = i;
    choice_t first = list[pick];
    list[pick] = list[0];
    list[0] = first;
}

/* TSR_TRIALS_BUDGETED: the shortlist, then the other granularities' best,
 * as tsr_trials_plan orders and affords them. Returns how many. */
static int plan_budgeted(const tsr_tile_problem_t *pb, const choice_t *list, int n, choice_t *tried)
{
    double predicted[TSR_TRIAL_PLANNED], tasks[TSR_TRIAL_PLANNED];
    int order[TSR_TRIAL_PLANNED];
    n = n < TSR_TRIAL_PLANNED ? n : TSR_TRIAL_PLANNED;
    for (int i = 0; i < n; i++)
        predicted[i] = list[i].predicted, tasks[i] = list[i].tasks;
    int ntry = tsr_trials_plan(predicted, tasks, n, pb->bytes, order);
    for (int i = 0; i < ntry; i++)
        tried[i] = list[order[i]];
    return ntry;
}

/* TSR_TRIALS_WITH_DEFAULT: the tried - 1 best of the shortlist and the
 * default tiles (the next best when the defaults are among those): the
 * choice is never slower than the defaults but for the noise. Returns how
 * many. */
static int plan_with_default(const tsr_tile_problem_t *pb, const choice_t *top, int ntop, choice_t *tried)
{
    choice_t def = { { 0 }, 0, 0 };
    pb->default_tile(pb->ctx, def.tile);
    int n = 0, def_in = 0;
    for (; n < ntop && n < pb->policy->tried - 1; n++) {
        def_in |= memcmp(top[n].tile, def.tile, sizeof def.tile) == 0;
        tried[n] = top[n];
    }
    if (!def_in) {
        def.predicted = pb->predict(pb->ctx, def.tile, 1, &def.tasks);
        tried[n++] = def;
    } else if (n < ntop) {
        tried[n] = top[n];
        n++;
    }
    return n;
}

/* A trial of tile (tsr_trials_measure's run). */
typedef struct { const tsr_tile_problem_t *pb; const int *tile; } trial_run_t;

static int run_trial(void *arg, double *seconds)
{
    const trial_run_t *r = arg;
    return r->pb->trial(r->pb->ctx, r->tile, seconds);
}

/* The trial times of the n candidates: cached (per problem, worker set and
 * kernels), else run and cached. */
static int cached_trials(const tsr_tile_problem_t *pb, const choice_t *tried, int n, double *seconds)
{
    int rc = tsr_trials_load(pb->trials, pb->trials_name, pb->nkeys + pb->ndims), ran = 0;
    for (int i = 0; !rc && i < n; i++) {
        int key[TSR_TRIAL_KEYS], now = 0;
        memcpy(key, pb->key, pb->nkeys * sizeof *key);
        memcpy(key + pb->nkeys, tried[i].tile, pb->ndims * sizeof *key);
        trial_run_t r = { pb, tried[i].tile };
        rc = tsr_trials_measure(pb->trials, key, run_trial, &r, &seconds[i], &now);
        if (now)
            tsr_log(TSR_LOG_DEBUG, "%s: %s, %.4f s predicted, %.4f s in its trial", pb->name,
                    tile_text(pb, tried[i].tile), tried[i].predicted, seconds[i]);
        ran += now;
    }
    char note[sizeof pb->trials->cache.path + 32];
    if (ran)
        tsr_log(TSR_LOG_INFO, "%s: tried %d tile sets (%s)", pb->name, ran,
                tsr_tile_cache_note(&pb->trials->cache, note, sizeof note));
    tsr_trials_save(pb->trials);
    return rc;
}

int tsr_tile_search(const tsr_tile_problem_t *pb, tsr_tile_choice_t *choice, double *trial_seconds)
{
    const tsr_tile_policy_t *pol = pb->policy;
    for (int d = 0; d < pb->ndims; d++)
        if (pb->nsizes[d] < 1)
            return TSR_EINVAL;
    choice_t list[2 * TSR_TRIAL_PLANNED] = { { { 0 }, 0, 0 } }, finest[TSR_TRIAL_GRAINS], tried[TSR_TRIAL_PLANNED];
    int n = rank_candidates(pb, list, finest), nothers = 0, rc = TSR_SUCCESS;
    if (pol->trials == TSR_TRIALS_BUDGETED)
        nothers = other_granularities(finest, list, n, list + TSR_TRIAL_PLANNED);
    if (pol->refine && (rc = refine(pb, list, &n)) != TSR_SUCCESS)
        return rc;
    prefer_larger(pb, list, n);
    memmove(list + n, list + TSR_TRIAL_PLANNED, nothers * sizeof *list);
    int ntry = pol->trials == TSR_TRIALS_BUDGETED ? plan_budgeted(pb, list, n + nothers, tried)
                                                  : plan_with_default(pb, list, n, tried);
    double trial[TSR_TRIAL_PLANNED], fastest = INFINITY;
    if (ntry)
        rc = cached_trials(pb, tried, ntry, trial);
    *choice = list[0];
    for (int i = 0; !rc && i < ntry; i++)
        if (trial[i] < fastest) {
            fastest = trial[i];
            *choice = tried[i];
        }
    if (trial_seconds)
        *trial_seconds = fastest;
    return rc;
}
