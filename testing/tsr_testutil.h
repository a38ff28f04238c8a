/* Helpers for tests comparing descriptors with plain reference arrays.
 * Full arrays are column-major b x (m x n) with leading dimension m. */
#ifndef TSR_TESTUTIL_H
#define TSR_TESTUTIL_H
#include <stddef.h>
#include "tessera.h"

/* Gather a float32 descriptor on rank 0 (malloc'd, caller frees); NULL on
 * other ranks. Collective. */
float *tsr_test_gather_f32(tsr_desc_t *d);
/* Scatter a full float32 array held by rank 0 into the descriptor. Collective. */
int tsr_test_scatter_f32(tsr_desc_t *d, const float *full);
/* The float values x (d->b matrices of d->m x d->n, column-major, on every
 * rank) into the bf16 descriptor d, rounded to bf16. tsr_desc_scatter's code. */
int tsr_test_scatter_bf16(tsr_desc_t *d, const float *x);
/* max |x - ref| / max(|ref|, floor) over n elements (NaN anywhere -> inf). */
double tsr_test_max_rel_err(const float *x, const float *ref, size_t n, double floor);
/* max |x - ref| over n elements (NaN anywhere -> inf). */
double tsr_test_max_abs_err(const float *x, const float *ref, size_t n);
/* Causal attention of heads heads of T x hd (element (h, t, d) at
 * (h * T + t) * hd + d, tsr_attention_array's layout), in double: out =
 * softmax(q k^T / sqrt(hd), keys up to the query) v. */
void tsr_test_attention_ref(int heads, int T, int hd, const float *Q, const float *K, const float *V, float *out);
/* The central difference (loss(x + h) - loss(x - h)) / 2h of loss(arg)
 * along *x (an element that loss reads through arg), *x restored. */
double tsr_test_central_diff(double *x, double h, double (*loss)(void *arg), void *arg);
/* tsr_init for the op tests: quiet (the expected failures would print
 * errors), one CPU worker per rank under mpirun; *grid = P x (size/P) with
 * P from argv[1] (1 when absent or not dividing the ranks). 0 on success. */
int tsr_test_init(int *argc, char ***argv, tsr_dist_t *grid);
/* tsr_init with one CPU worker (per rank), the defaults otherwise. 0 on success. */
int tsr_test_init_one_worker(int *argc, char ***argv);
/* Destroys the n descriptors of all (NULL ones skipped); TSR_TEST_DESTROY
 * takes them as a list. */
void tsr_test_destroy(tsr_desc_t *const *all, size_t n);
#define TSR_TEST_DESTROY(...)                                                                               \
    tsr_test_destroy((tsr_desc_t *[]){ __VA_ARGS__ }, sizeof((tsr_desc_t *[]){ __VA_ARGS__ }) / sizeof(tsr_desc_t *))
#endif
