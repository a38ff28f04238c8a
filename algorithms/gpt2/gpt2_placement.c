/* Where the training state lives when one process drives several GPUs
 * (worker groups: tsr_worker_groups). */
#include <stdlib.h>
#include "gpt2_model.h"

/* The bytes of a tensor whose sum and AdamW take as long as the fixed cost
 * of their two tasks: on an H200 both take about 60 us a tensor up to 9 MB
 * (GPT-2 124M's), 560 us for the token embedding's 154 MB */
#define TENSOR_FIXED_BYTES 16e6

static double desc_bytes(const tsr_desc_t *d) { return (double)d->b * d->m * d->n * d->elsize; }

/* Each tensor's parameters, AdamW moments, master weights and gradients to
 * the group with the least work so far (a fixed cost a tensor and its
 * bytes), in the model's order (the token embedding, a third of GPT-2
 * 124M, first): its gradients are summed there and AdamW updates it there,
 * and the other groups read replicas of its parameters. The busiest group
 * ends above its share by at most one tensor after the first. */
int tsr_gpt2_place_state(tsr_gpt2_model_t *m)
{
    int groups = tsr_worker_groups();
    if (groups < 2)
        return TSR_SUCCESS;
    double *held = calloc((size_t)groups, sizeof *held);
    if (!held)
        return TSR_ENOMEM;
    tsr_desc_t **sets[] = { m->params, m->adam_m, m->adam_v, m->master, m->grad_sum };
    for (int s = 0; s < m->ntensors; s++) {
        int g = 0;
        for (int k = 1; k < groups; k++)
            if (held[k] < held[g])
                g = k;
        held[g] += 1 + desc_bytes(m->params[s]) / TENSOR_FIXED_BYTES;
        for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++)
            if (sets[k])
                tsr_desc_home_on(sets[k][s], g);
        for (int r = 0; r < m->nsub; r++)
            tsr_desc_home_on(m->sub[r].grads[s], g);
    }
    free(held);
    return TSR_SUCCESS;
}
