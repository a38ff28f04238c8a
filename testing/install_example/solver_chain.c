/* A solver chaining calls on its own arrays, in place, with one wait:
 * Q = Wq X and K = Wk X (two GEMMs), then causal attention out(Q, K, V),
 * checked against plain loops. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <tessera.h>

enum { HD = 32, C = 48, T = 100, TILE = 32 };

static float value(int seed, int i) { return (float)sin(0.37 * i + seed); }

/* y (HD x T) = W (HD x C) X (C x T), column-major */
static void gemm_ref(const float *W, const float *X, float *y)
{
    for (int t = 0; t < T; t++)
        for (int d = 0; d < HD; d++) {
            double s = 0;
            for (int c = 0; c < C; c++)
                s += (double)W[c * HD + d] * X[t * C + c];
            y[t * HD + d] = (float)s;
        }
}

/* one head: token t attends to tokens u <= t */
static void attention_ref(const float *q, const float *k, const float *v, float *out)
{
    double w[T];
    for (int t = 0; t < T; t++) {
        double max = -INFINITY, sum = 0;
        for (int u = 0; u <= t; u++) {
            double s = 0;
            for (int d = 0; d < HD; d++)
                s += (double)q[t * HD + d] * k[u * HD + d];
            w[u] = s / sqrt(HD);
            max = fmax(max, w[u]);
        }
        for (int u = 0; u <= t; u++)
            sum += w[u] = exp(w[u] - max);
        for (int d = 0; d < HD; d++) {
            double o = 0;
            for (int u = 0; u <= t; u++)
                o += w[u] * v[u * HD + d];
            out[t * HD + d] = (float)(o / sum);
        }
    }
}

int main(int argc, char **argv)
{
    int rc = tsr_init(NULL, &argc, &argv);
    if (rc) {
        fprintf(stderr, "tsr_init: %s\n", tsr_strerror(rc));
        return 1;
    }
    static float Wq[HD * C], Wk[HD * C], X[C * T], V[HD * T], Q[HD * T], K[HD * T], out[HD * T];
    static float Qr[HD * T], Kr[HD * T], ref[HD * T];
    for (int i = 0; i < HD * C; i++)
        Wq[i] = 0.2f * value(1, i), Wk[i] = 0.2f * value(2, i);
    for (int i = 0; i < C * T; i++)
        X[i] = value(3, i);
    for (int i = 0; i < HD * T; i++)
        V[i] = value(4, i);

    /* submitted one after the other, no wait between: the attention's tasks
     * follow the GEMMs' through the tiles of Q and K */
    tsr_sequence_t *seq;
    rc = tsr_sequence_create(&seq);
    if (!rc) {
        tsr_gemm_array_async(seq, TSR_FLOAT32, TSR_NOTRANS, TSR_NOTRANS, HD, T, C, 1.0, Wq, HD, X, C, 0.0, Q, HD,
                             TILE, TSR_REDUCTION_ORDERED);
        tsr_gemm_array_async(seq, TSR_FLOAT32, TSR_NOTRANS, TSR_NOTRANS, HD, T, C, 1.0, Wk, HD, X, C, 0.0, K, HD,
                             TILE, TSR_REDUCTION_ORDERED);
        tsr_attention_array_async(seq, 1, T, HD, Q, K, V, out, TILE);
        rc = tsr_sequence_destroy(seq); /* the one wait: the first error of the three, if any */
    }

    gemm_ref(Wq, X, Qr);
    gemm_ref(Wk, X, Kr);
    attention_ref(Qr, Kr, V, ref);
    double err = 0;
    for (int i = 0; i < HD * T; i++)
        err = fmax(err, fabs(out[i] - ref[i]));
    printf("solver_chain: %s, max error %.1e\n", rc ? tsr_strerror(rc) : "ok", err);
    tsr_finalize();
    return rc || err > 1e-4;
}
