/* Sequences of calls on the caller's arrays: see tsr_algorithms.h for why a
 * sequence is only a list of views and a status. */
#include <stdlib.h>
#include "tsr_context.h"
#include "internal/tsr_sequence.h"

/* A descriptor the sequence holds until it waits: a view of the caller's
 * memory [lo, hi), or a temporary (lo = hi = NULL). */
typedef struct {
    tsr_desc_t *desc;
    const char *lo, *hi;
    int written; /* a call of the sequence writes it */
} entry_t;

struct tsr_sequence {
    int status;             /* the first error of a call */
    uint64_t failed_before; /* tsr_failed_tasks() when the sequence (re)started */
    int n, cap;
    entry_t *entries;
};

int tsr_sequence_create(tsr_sequence_t **seq)
{
    if (!seq) {
        tsr_log(TSR_LOG_ERROR, "tsr_sequence_create: seq is NULL");
        return TSR_EINVAL;
    }
    *seq = NULL;
    if (!tsr_initialized())
        return TSR_ENOTINIT;
    tsr_sequence_t *s = calloc(1, sizeof *s);
    if (!s)
        return TSR_ENOMEM;
    s->failed_before = tsr_failed_tasks();
    *seq = s;
    return TSR_SUCCESS;
}

/* Unregistering a descriptor waits for its tasks and brings its data home. */
static void release(tsr_sequence_t *seq, int k)
{
    tsr_desc_destroy(seq->entries[k].desc);
    seq->entries[k] = seq->entries[--seq->n];
}

int tsr_sequence_wait(tsr_sequence_t *seq)
{
    if (!seq) {
        tsr_log(TSR_LOG_ERROR, "tsr_sequence_wait: seq is NULL");
        return TSR_EINVAL;
    }
    while (seq->n > 0)
        release(seq, seq->n - 1);
    int rc = seq->status;
    uint64_t failed = tsr_failed_tasks();
    if (!rc && failed > seq->failed_before) {
        tsr_log(TSR_LOG_ERROR, "tsr_sequence_wait: %llu task(s) failed in their kernels: results are wrong",
                (unsigned long long)(failed - seq->failed_before));
        rc = TSR_ERUNTIME;
    }
    seq->status = TSR_SUCCESS; /* the sequence starts again */
    seq->failed_before = failed;
    return rc;
}

int tsr_sequence_destroy(tsr_sequence_t *seq)
{
    if (!seq)
        return TSR_SUCCESS;
    int rc = tsr_sequence_wait(seq);
    free(seq->entries);
    free(seq);
    return rc;
}

int tsr_sequence_begin(tsr_sequence_t *seq, const char *fn)
{
    if (!seq) {
        tsr_log(TSR_LOG_ERROR, "%s: seq is NULL", fn);
        return TSR_EINVAL;
    }
    if (seq->status)
        return seq->status; /* an earlier call failed: its results are missing */
    if (tsr_size() > 1) {
        tsr_log(TSR_LOG_ERROR, "%s: the caller's arrays are used in place by one process only, not %d ranks (use the "
                "synchronous call, which copies, or distributed descriptors)", fn, tsr_size());
        return tsr_sequence_record(seq, TSR_EINVAL);
    }
    return TSR_SUCCESS;
}

int tsr_sequence_record(tsr_sequence_t *seq, int rc)
{
    if (seq && rc && !seq->status)
        seq->status = rc;
    return rc;
}

/* The bytes an array spans: its first element to one past its last. */
static void span(const tsr_array_t *a, const char **lo, const char **hi)
{
    size_t es = tsr_dtype_size(a->dtype);
    size_t last = ((size_t)(a->b - 1) * a->n + (size_t)(a->n - 1)) * a->ld + (size_t)a->m;
    *lo = a->ptr;
    *hi = (const char *)a->ptr + last * es;
}

static int spans_overlap(const char *lo1, const char *hi1, const char *lo2, const char *hi2)
{
    return lo1 && lo2 && lo1 < hi2 && lo2 < hi1;
}

int tsr_arrays_overlap(const tsr_array_t *x, const tsr_array_t *y)
{
    const char *xl, *xh, *yl, *yh;
    if (!x->ptr || !y->ptr)
        return 0;
    span(x, &xl, &xh);
    span(y, &yl, &yh);
    return spans_overlap(xl, xh, yl, yh);
}

int tsr_check_arrays(const char *fn, const tsr_array_t *arrays, int n)
{
    for (int i = 0; i < n; i++)
        if (!arrays[i].ptr || arrays[i].ld < arrays[i].m) {
            tsr_log(TSR_LOG_ERROR, "%s: %s is %p with leading dimension %d, for %d rows", fn, arrays[i].name,
                    arrays[i].ptr, arrays[i].ld, arrays[i].m);
            return TSR_EINVAL;
        }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n && arrays[i].written; j++)
            if (j != i && tsr_arrays_overlap(&arrays[i], &arrays[j])) {
                tsr_log(TSR_LOG_ERROR, "%s: %s overlaps %s in memory: an output cannot also be another operand", fn,
                        arrays[i].name, arrays[j].name);
                return TSR_EINVAL;
            }
    return TSR_SUCCESS;
}

static int cut(int tile, int extent) { return tile < extent ? tile : extent; }

/* Whether descriptor d is the view that array a asks for (tile sizes as
 * they cut the shape: a 64-row array in tiles of 64 or 128 is one view). */
static int same_view(const tsr_desc_t *d, const tsr_array_t *a)
{
    return d->user == a->ptr && d->dtype == a->dtype && d->user_ld == a->ld && d->b == a->b && d->m == a->m &&
           d->n == a->n && cut(d->bb, d->b) == cut(a->bb, a->b) && cut(d->mb, d->m) == cut(a->mb, a->m) &&
           cut(d->nb, d->n) == cut(a->nb, a->n);
}

static int append(tsr_sequence_t *seq, tsr_desc_t *d, const char *lo, const char *hi, int written)
{
    if (seq->n == seq->cap) {
        int cap = seq->cap ? 2 * seq->cap : 8;
        entry_t *e = realloc(seq->entries, (size_t)cap * sizeof *e);
        if (!e)
            return TSR_ENOMEM;
        seq->entries = e;
        seq->cap = cap;
    }
    seq->entries[seq->n++] = (entry_t){ d, lo, hi, written };
    return TSR_SUCCESS;
}

int tsr_sequence_adopt(tsr_sequence_t *seq, tsr_desc_t *d)
{
    return append(seq, d, NULL, NULL, 0);
}

/* StarPU orders tasks by handle: two views of the same memory are two
 * handles, so before a call uses another view of memory that a call of the
 * sequence wrote (or, to write it, memory an earlier view reads), that
 * view's tasks are waited for and the view released. */
static void release_conflicts(tsr_sequence_t *seq, const tsr_array_t *a)
{
    const char *lo, *hi;
    span(a, &lo, &hi);
    for (int k = seq->n - 1; k >= 0; k--) {
        entry_t *e = &seq->entries[k];
        if (spans_overlap(lo, hi, e->lo, e->hi) && !same_view(e->desc, a) && (a->written || e->written)) {
            tsr_log(TSR_LOG_DEBUG, "sequence: %s is another view of memory an earlier call used: waiting for its "
                    "tasks", a->name);
            release(seq, k);
        }
    }
}

static int find_or_create(tsr_sequence_t *seq, tsr_array_t *a)
{
    for (int k = 0; k < seq->n; k++) {
        entry_t *e = &seq->entries[k];
        if (e->lo && same_view(e->desc, a)) {
            e->written |= a->written;
            a->desc = e->desc;
            return TSR_SUCCESS;
        }
    }
    int rc = tsr_desc_create_user(&a->desc, a->dtype, a->b, a->m, a->n, a->bb, a->mb, a->nb, (void *)a->ptr, a->ld);
    if (rc)
        return rc;
    const char *lo, *hi;
    span(a, &lo, &hi);
    rc = append(seq, a->desc, lo, hi, a->written);
    if (rc) {
        tsr_desc_destroy(a->desc);
        a->desc = NULL;
    }
    return rc;
}

int tsr_sequence_views(tsr_sequence_t *seq, tsr_array_t *arrays, int n)
{
    for (int i = 0; i < n; i++)
        release_conflicts(seq, &arrays[i]);
    for (int i = 0; i < n; i++) {
        int rc = find_or_create(seq, &arrays[i]);
        if (rc)
            return rc;
    }
    return TSR_SUCCESS;
}
