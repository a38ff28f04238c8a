/* llm.c's from-scratch GPT-2 initialisation. Compiled with
 * -ffp-contract=off (see CMakeLists.txt), like the reference. */
#include "gpt2_init.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_rand.h"
#include "tsr_core.h"

/* The entry points' checks: their output given (missing: the message) and
 * the configuration valid. */
static int check_call(const void *out, const char *missing, const tsr_gpt2_config_t *cfg)
{
    if (!out) {
        tsr_log(TSR_LOG_ERROR, "%s", missing);
        return TSR_EINVAL;
    }
    return tsr_gpt2_config_validate(cfg, "GPT-2 init");
}

int tsr_gpt2_init_params(const tsr_gpt2_config_t *cfg, uint32_t seed, float *params)
{
    int rc = check_call(params, "tsr_gpt2_init_params: NULL parameter array", cfg);
    if (rc)
        return rc;
    size_t sizes[TSR_GPT2_NUM_PARAM_TENSORS], off[TSR_GPT2_NUM_PARAM_TENSORS];
    tsr_gpt2_param_sizes(cfg, sizes);
    tsr_gpt2_param_offsets(cfg, off);
    size_t np = tsr_gpt2_num_params(cfg);
    size_t L = (size_t)cfg->L, C = (size_t)cfg->C;

    memset(params, 0, np * sizeof(float)); /* biases, padded wte rows */
    const int ones[] = {TSR_GPT2_LN1W, TSR_GPT2_LN2W, TSR_GPT2_LNFW};
    for (size_t k = 0; k < sizeof ones / sizeof ones[0]; k++)
        for (size_t j = 0; j < sizes[ones[k]]; j++)
            params[off[ones[k]] + j] = 1.0f;

    tsr_gpt2_rng_t rng;
    tsr_gpt2_rng_seed(&rng, seed);
    const float std = 0.02f;
    /* as llm.c: 1/sqrtf(2L) in float, then 0.02f times it */
    const float residual_scale = 1.0f / sqrtf(2.0f * (float)cfg->L);
    const float std_residual = std * residual_scale;

    /* wte: only the V real rows draw numbers */
    tsr_gpt2_rng_normal(params + off[TSR_GPT2_WTE], (size_t)cfg->V * C, 0.0f, std, &rng);
    tsr_gpt2_rng_normal(params + off[TSR_GPT2_WPE], sizes[TSR_GPT2_WPE], 0.0f, std, &rng);
    const int per_layer[] = {TSR_GPT2_QKVW, TSR_GPT2_ATTPROJW, TSR_GPT2_FCW, TSR_GPT2_FCPROJW};
    for (size_t l = 0; l < L; l++) {
        for (size_t k = 0; k < sizeof per_layer / sizeof per_layer[0]; k++) {
            int t = per_layer[k];
            size_t n = sizes[t] / L;
            float s = (t == TSR_GPT2_ATTPROJW || t == TSR_GPT2_FCPROJW) ? std_residual : std;
            tsr_gpt2_rng_normal(params + off[t] + l * n, n, 0.0f, s, &rng);
        }
    }
    return 0;
}

int tsr_gpt2_init_alloc(const tsr_gpt2_config_t *cfg, uint32_t seed, float **params)
{
    if (params)
        *params = NULL;
    int rc = check_call(params, "tsr_gpt2_init_alloc: NULL output pointer", cfg);
    if (rc)
        return rc;
    size_t np = tsr_gpt2_num_params(cfg);
    float *p = malloc(np * sizeof(float));
    if (!p) {
        tsr_log(TSR_LOG_ERROR, "GPT-2 init: out of memory for %zu parameters", np);
        return TSR_ENOMEM;
    }
    rc = tsr_gpt2_init_params(cfg, seed, p);
    if (rc) {
        free(p);
        return rc;
    }
    *params = p;
    return 0;
}
