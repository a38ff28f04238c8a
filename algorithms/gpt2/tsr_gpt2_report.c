/* tsr_gpt2's evaluation, sampling and reports: the validation loss, the
 * generated text, the progress bar, the summary and --profile's rank report. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "tsr_gpt2.h"

int gpt2_val_loss(trainer_t *t, float *out)
{
    double sum = 0;
    int rc = tsr_gpt2_loader_reset(&t->val);
    for (int i = 0; i < t->opt.val_batches && !rc; i++) {
        float loss;
        rc = gpt2_next_batch(t, &t->val);
        if (!rc)
            rc = tsr_gpt2_forward(&t->model, t->inputs, t->targets, &loss);
        if (!rc)
            sum += loss;
    }
    *out = (float)(sum / t->opt.val_batches);
    return rc;
}

static unsigned random_u32(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (unsigned)((*s * 0x2545F4914F6CDD1Dull) >> 32);
}

static float random_f32(uint64_t *s) { return (random_u32(s) >> 8) / 16777216.0f; }

/* llm.c's sampler: softmax over the first V logits, inverse CDF at coin. */
static int sample_token(float *logits, int V, float coin)
{
    float maxv = logits[0], sum = 0, cdf = 0;
    for (int i = 1; i < V; i++)
        maxv = fmaxf(maxv, logits[i]);
    for (int i = 0; i < V; i++)
        sum += (logits[i] = expf(logits[i] - maxv));
    for (int i = 0; i < V; i++) {
        cdf += logits[i] / sum;
        if (coin < cdf)
            return i;
    }
    return V - 1;
}

/* Generates from <|endoftext|> with a full B x T forward per token (as llm.c). */
int gpt2_generate(trainer_t *t)
{
    int n = t->opt.sample_len ? t->opt.sample_len : t->opt.T, BT = t->opt.B * t->opt.T, rc = 0;
    int eot = t->tok.eot >= 0 && t->tok.eot < t->cfg.V ? t->tok.eot : 0;
    if (n > t->opt.T)
        n = t->opt.T;
    float *col = malloc(t->cfg.V * sizeof(float));
    for (int i = 0; i < BT; i++)
        t->inputs[i] = eot;
    if (tsr_rank() == 0)
        printf("generating:\n---\n");
    for (int pos = 1; pos < n && !rc; pos++) {
        rc = tsr_gpt2_forward(&t->model, t->inputs, NULL, NULL);
        if (!rc)
            rc = tsr_gpt2_logits_column(&t->model, pos - 1, col);
        int next = 0;
        if (!rc && tsr_rank() == 0)
            next = sample_token(col, t->cfg.V, random_f32(&t->gen_rng));
        if (!rc)
            rc = tsr_broadcast(&next, sizeof next, 0);
        t->inputs[pos] = next;
        if (!rc && tsr_rank() == 0) {
            tsr_gpt2_print_token(&t->tok, next, stdout);
            fflush(stdout);
        }
    }
    if (tsr_rank() == 0)
        printf("\n---\n");
    free(col);
    return rc;
}

static int progress_shown;

/* Erase the progress bar before a line is printed (stdout and the bar share
 * the terminal). */
void gpt2_clear_progress(void)
{
    if (!progress_shown)
        return;
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
    progress_shown = 0;
}

void gpt2_progress(const trainer_t *t, int step, double elapsed_ms)
{
    if (tsr_rank() != 0 || !isatty(STDERR_FILENO))
        return;
    progress_shown = 1;
    int total = t->opt.steps, done = step + 1, width = 30, filled = width * done / (total ? total : 1);
    double eta = done ? elapsed_ms / done * (total - done) / 1000 : 0;
    fprintf(stderr, "\r[%.*s%*s] %d/%d ETA %.0fs ", filled, "##############################", width - filled, "",
            done, total, eta);
    fflush(stderr);
    if (done == total)
        gpt2_clear_progress();
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n-1] (n >= 1); sorts v. */
static double median_of(double *v, int n)
{
    qsort(v, n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The median of v over the steady steps from `first` on (0 when none). */
static double steady_median(const trainer_t *t, int first, const double *v)
{
    int n = 0;
    double *steady = malloc((size_t)(t->opt.steps + 1) * sizeof(double));
    for (int s = first; steady && s < t->opt.steps; s++)
        if (t->step_kind[s] == STEP_STEADY)
            steady[n++] = v[s];
    double median = n > 0 ? median_of(steady, n) : 0;
    free(steady);
    return median;
}

static void *sample_live_bytes(void *arg)
{
    trainer_t *t = arg;
    tsr_gpt2_live_t *peak = &t->live_peak;
    while (t->sampling) {
        tsr_gpt2_live_t now;
        tsr_gpt2_live_bytes(&t->model, &now);
        peak->cached = fmax(peak->cached, now.cached);
        peak->grads = fmax(peak->grads, now.grads);
        peak->buffers = fmax(peak->buffers, now.buffers);
        usleep(10000);
    }
    return NULL;
}

/* Not under simulation: there every rank's sampler walks every tile of the
 * parameters and of every sub-batch's partial gradients 100 times a
 * simulated second, in real time, so N ranks cost N^2 walks; at 32
 * simulated nodes that was 95 % of the simulation's time. */
void gpt2_sampler_start(trainer_t *t)
{
    if (tsr_simulated())
        return;
    t->sampling = 1;
    if (pthread_create(&t->sampler, NULL, sample_live_bytes, t) != 0)
        t->sampling = 0; /* the report then shows zeros */
}

void gpt2_sampler_stop(trainer_t *t)
{
    if (!t->sampling)
        return;
    t->sampling = 0;
    pthread_join(t->sampler, NULL);
}

/* --profile: what each rank holds (the tiles it owns, and the peak of what
 * it holds for a while: other ranks' parameters, its partial gradients,
 * receive buffers), its peak RSS, what it sends and receives a steady step,
 * and what submitting a steady step cost it (collective; rank 0 prints). */
enum { OWNED_KINDS = TSR_GPT2_BYTE_KINDS, LIVE_KINDS = 3, RSS = OWNED_KINDS + LIVE_KINDS, STEPS, SUBMIT, SUBMIT_CPU, TASKS,
       SENT };
void gpt2_rank_report(trainer_t *t, int first)
{
    int size = tsr_size(), n = SENT + size;
    double *mine = calloc((size_t)n, sizeof(double)), *all = calloc((size_t)n * size, sizeof(double));
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    if (!mine || !all || !t->sent_from) {
        free(mine);
        free(all);
        return;
    }
    tsr_gpt2_rank_bytes(&t->model, mine);
    mine[OWNED_KINDS] = t->live_peak.cached;
    mine[OWNED_KINDS + 1] = t->live_peak.grads;
    mine[OWNED_KINDS + 2] = t->live_peak.buffers;
    mine[RSS] = ru.ru_maxrss * 1024.0;
    mine[STEPS] = t->comm_steps;
    mine[SUBMIT] = steady_median(t, first, t->submit_ms);
    mine[SUBMIT_CPU] = steady_median(t, first, t->submit_cpu_ms);
    mine[TASKS] = (double)t->step_tasks;
    for (int r = 0; r < size; r++) /* bytes sent to rank r a steady step */
        mine[SENT + r] = t->comm_steps ? (t->sent_to[r] - t->sent_from[r]) / t->comm_steps : 0;
    if (tsr_allgather(mine, all, (size_t)n * sizeof(double)) == 0 && tsr_rank() == 0)
        for (int r = 0; r < size; r++) {
            const double *v = all + (size_t)r * n;
            double sent = 0, received = 0;
            for (int q = 0; q < size; q++) {
                sent += v[SENT + q];
                received += all[(size_t)q * n + SENT + r];
            }
            printf("rank %d holds %.1f MB of parameters, %.1f MB of AdamW state, %.1f MB of gradients, %.1f MB of "
                   "activations of its own", r, v[0] / 1e6, v[1] / 1e6, v[2] / 1e6, v[3] / 1e6);
            if (tsr_simulated())
                printf("; other ranks' parameters cached, partial gradients and other buffers not sampled "
                       "(simulation)");
            else
                printf("; at most %.1f MB of other ranks' parameters cached, %.1f MB of its partial gradients, "
                       "%.1f MB of other buffers", v[OWNED_KINDS] / 1e6, v[OWNED_KINDS + 1] / 1e6,
                       v[OWNED_KINDS + 2] / 1e6);
            printf("; peak RSS %.1f MB", v[RSS] / 1e6);
            if (size > 1)
                printf("; a steady step: %.2f MB sent, %.2f MB received (over %d steps)", sent / 1e6,
                       received / 1e6, (int)v[STEPS]);
            printf("; submitting a steady step: %.1f ms, %.1f ms CPU for its %.0f tasks (median)\n", v[SUBMIT],
                   v[SUBMIT_CPU], v[TASKS]);
        }
    free(mine);
    free(all);
}

/* Steady-state figures come from the steady steps (see step_timing); the
 * rate over all steps from the sum of their times (evaluations excluded). */
void gpt2_summary(const trainer_t *t, int first)
{
    if (tsr_rank() != 0)
        return;
    int nsteps = t->opt.steps - first;
    if (nsteps <= 0) {
        printf("summary: nothing to do (the state is at step %d, --steps is %d)\n", first, t->opt.steps);
        return;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    int BT = t->opt.B * t->opt.T, n = 0;
    double all = 0, steady = 0, *sorted = malloc(nsteps * sizeof(double)), *submit = malloc(nsteps * sizeof(double));
    for (int s = first; s < t->opt.steps; s++) {
        all += t->step_ms[s];
        if (t->step_kind[s] == STEP_STEADY && sorted && submit) {
            submit[n] = t->submit_ms[s];
            steady += (sorted[n++] = t->step_ms[s]);
        }
    }
    printf("summary: %d steps in %.1f ms (%.4f tokens/ms over all steps); final train loss %f", nsteps, all,
           nsteps * BT / all, t->last_loss);
    if (!isnan(t->last_val))
        printf(", last val loss %f", t->last_val);
    if (n > 0) {
        double median = median_of(sorted, n);
        printf("; steady state (%d steps): median step %.1f ms, %.4f tokens/ms (mean %.4f); submitting its tasks "
               "took %.1f ms (median)", n, median, BT / median, n * BT / steady, median_of(submit, n));
    } else {
        printf("; no steady-state step (it needs a step between two others, with no evaluation before it)");
    }
    free(submit);
    free(sorted);
    printf("; %llu tasks a step (rank 0)", (unsigned long long)t->step_tasks);
    printf("; peak RSS %.1f MB (rank 0), %d rank(s) x %d CPU + %d CUDA workers, BLAS %s\n", ru.ru_maxrss / 1024.0,
           tsr_size(), tsr_ncpu_workers(), tsr_ncuda_workers(), TSR_BLAS_NAME);
}
