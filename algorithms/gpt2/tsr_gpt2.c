/* tsr_gpt2: train GPT-2 with Tessera (llm.c's train_gpt2.c, tiled on StarPU).
 * See --help. Under mpirun every rank runs this program; each computes its
 * slice of the batch and rank 0 prints. */
#define _GNU_SOURCE
#include <errno.h>
#include <starpu_config.h> /* STARPU_SIMGRID */
#ifndef STARPU_SIMGRID /* SMPI redefines malloc, which malloc.h then breaks */
#include <malloc.h>
#endif
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "tsr_gpt2.h"
#include "tsr_schedule_report.h"

/* SIGINT (Ctrl-C), SIGTERM (what batch schedulers send before killing a
 * job) and SIGUSR1 (a pre-emption warning): stop after the current step,
 * saving the state when --save is given; exit with 128 + the signal. Before
 * the first step (nothing to save yet) and on a second signal the process
 * ends at once, killed by the signal: whatever the main thread is blocked
 * in (an open, a calibration) cannot keep it running, since the handler may
 * run on any thread and a restarted system call never sees the flag. */
static volatile sig_atomic_t interrupted, training;
static void on_stop_signal(int sig)
{
    if (!training || interrupted) {
        static const char msg[] = "\ntsr_gpt2: stopped by a signal before the first step or a second time: "
                                  "exiting now\n";
        ssize_t ignored = write(2, msg, sizeof msg - 1);
        (void)ignored;
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    interrupted = sig;
}

/* Seconds of CPU time the calling thread has used. */
static double thread_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* One training step, submitted whole (forward, loss, backward, AdamW) before
 * it waits for its loss alone: the step's backward and update run on while
 * the next step is submitted, and the next forward starts on each layer as
 * soon as its parameters are updated. A step's time is thus the interval
 * between two losses (the steady-state throughput). A step that drains the
 * pipeline (drain: see step_timing) also waits for all its tasks. */
static int train_step(trainer_t *t, float *loss, double *ms, double *submit_ms, double *submit_cpu_ms, int drain)
{
    double t0 = tsr_wtime();
    int rc = gpt2_next_batch(t, &t->train);
    double cpu0 = thread_cpu_seconds();
    if (!rc)
        rc = tsr_gpt2_forward_submit(&t->model, t->inputs, t->targets);
    if (!rc)
        rc = tsr_gpt2_backward(&t->model);
    if (!rc)
        rc = tsr_gpt2_update(&t->model, t->opt.lr, t->opt.beta1, t->opt.beta2, t->opt.eps, t->opt.wd, t->step);
    *submit_cpu_ms = (thread_cpu_seconds() - cpu0) * 1e3;
    *submit_ms = (tsr_wtime() - t0) * 1e3;
    if (!rc)
        rc = tsr_gpt2_loss(&t->model, loss);
    if (!rc && drain)
        rc = tsr_wait();
    *ms = (tsr_wtime() - t0) * 1e3;
    return rc;
}

static const char *timing_words[] = { "steady", "fill", "drain", "whole" };
static const char *timing_notes[] = { "", " [fills the pipeline: its backward runs on in the next step]",
                                      " [drains the pipeline: includes finishing every task]",
                                      " [fills and drains the pipeline: the whole step]" };

static int evaluates_before(const trainer_t *t, int s)
{
    return (t->opt.val_every && s % t->opt.val_every == 0) || (t->opt.sample_every && s > 0 && s % t->opt.sample_every == 0);
}

static step_timing_t step_timing(const trainer_t *t, int first, int s)
{
    int fills = s == first || evaluates_before(t, s);
    int drains = s + 1 == t->opt.steps || evaluates_before(t, s + 1);
    return fills && drains ? STEP_WHOLE : fills ? STEP_FILL : drains ? STEP_DRAIN : STEP_STEADY;
}

/* A step that fails on one rank of several (out of memory, a read error, a
 * failed task) leaves the others waiting on its messages: every rank ends,
 * with the reason on the failing one's stderr. */
static int ends_every_rank_on_failure(int rc, int step)
{
    if (rc && tsr_size() > 1) {
        fprintf(stderr, "tsr_gpt2: rank %d: step %d failed: %s; ending every rank\n", tsr_rank(), step,
                tsr_strerror(rc));
        tsr_abort_ranks(1);
    }
    return rc;
}

static int train(trainer_t *t)
{
    int rc = 0, first = t->step, BT = t->opt.B * t->opt.T;
    double start = tsr_wtime();
    training = 1; /* from here a stop signal ends the run after its step */
    for (; t->step < t->opt.steps && !rc; t->step++) {
        int s = t->step;
        float vl = NAN, loss = NAN;
        double ms = 0, submit_ms = 0, submit_cpu_ms = 0;
        int evaluate = t->opt.val_every && s % t->opt.val_every == 0;
        int sample = t->opt.sample_every && s > 0 && s % t->opt.sample_every == 0;
        gpt2_clear_progress();
        step_timing_t kind = step_timing(t, first, s);
        if (!rc && evaluate) {
            rc = ends_every_rank_on_failure(gpt2_val_loss(t, &vl), s);
            t->last_val = vl;
            if (!rc && tsr_rank() == 0 && !t->opt.quiet)
                printf("val loss %f\n", vl);
        }
        if (!rc && sample)
            rc = ends_every_rank_on_failure(gpt2_generate(t), s);
        char mark[32];
        snprintf(mark, sizeof mark, "step %d", s);
        tsr_schedule_mark(mark);
        uint64_t tasks_before = tsr_tasks_submitted();
        if (t->sent_from && kind == STEP_STEADY && t->comm_steps == 0)
            tsr_comm_bytes_sent(t->sent_from);
        if (!rc)
            rc = ends_every_rank_on_failure(
                train_step(t, &loss, &ms, &submit_ms, &submit_cpu_ms, kind == STEP_DRAIN || kind == STEP_WHOLE), s);
        if (t->sent_to && kind == STEP_STEADY && !rc) {
            tsr_comm_bytes_sent(t->sent_to);
            t->comm_steps++;
        }
        t->step_tasks = tsr_tasks_submitted() - tasks_before;
        if (rc)
            break;
        t->step_ms[s] = ms;
        t->submit_ms[s] = submit_ms;
        t->submit_cpu_ms[s] = submit_cpu_ms;
        t->last_loss = loss;
        t->step_kind[s] = (unsigned char)kind;
        int csv_failed = 0;
        if (tsr_rank() == 0) {
            if (!t->opt.quiet)
                printf("step %d: train loss %f (took %.1f ms, %.4f tokens/ms)%s\n", s, loss, ms, BT / ms,
                       timing_notes[kind]);
            if (t->csv) {
                fprintf(t->csv, "%d,%.6f,%.3f,%.5f,", s, loss, ms, BT / ms);
                fprintf(t->csv, isnan(vl) ? "," : "%.6f,", vl);
                fprintf(t->csv, "%s\n", timing_words[kind]);
                csv_failed = fflush(t->csv) != 0 || ferror(t->csv);
                if (csv_failed)
                    tsr_log(TSR_LOG_ERROR, "cannot write --csv %s: %s", t->opt.csv, strerror(errno));
            }
            fflush(stdout);
        }
        if (t->opt.csv && tsr_any(csv_failed)) {
            rc = TSR_EIO;
            break;
        }
        gpt2_progress(t, s, (tsr_wtime() - start) * 1e3);
        if (t->opt.save && t->opt.save_every && (s + 1) % t->opt.save_every == 0 && s + 1 < t->opt.steps) {
            t->step = s + 1;
            rc = gpt2_save_state(t, t->opt.save);
            t->step = s;
        }
        if (tsr_any(interrupted)) {
            t->step = s + 1;
            if (tsr_rank() == 0)
                fprintf(stderr, "\ninterrupted (%s) after step %d%s\n", strsignal(interrupted ? interrupted : SIGINT), s,
                        t->opt.save ? ": saving the state" : "");
            if (t->opt.save)
                rc = gpt2_save_state(t, t->opt.save);
            return rc ? rc : 130;
        }
    }
    if (!rc && t->opt.val_every && t->step % t->opt.val_every == 0 && t->step > first) {
        float vl;
        rc = gpt2_val_loss(t, &vl);
        t->last_val = vl;
        if (!rc && tsr_rank() == 0 && !t->opt.quiet)
            printf("val loss %f\n", vl);
    }
    return rc;
}

/* Under mpirun every rank must run the same options: ranks that disagree
 * (another --csv, --steps, tile) would wait on each other forever. */
static int same_options_on_every_rank(unsigned long long mine)
{
    unsigned long long rank0 = mine;
    int bad = tsr_broadcast(&rank0, sizeof rank0, 0) != 0 || rank0 != mine;
    if (bad)
        fprintf(stderr, "error: rank %d was started with other options than rank 0: every rank must get the "
                "same command line\n", tsr_rank());
    return !tsr_any(bad);
}

/* "; sub-batch 0 on GPU 0, 1 on GPU 1" (each sub-batch's worker group:
 * tsr_gpt2_default_sub_batches; under MPI "on rank 1 GPU 0"), or "" when
 * the sub-batches are not placed. Past PLACEMENTS_SHOWN sub-batches the rest
 * is counted, not listed. */
enum { PLACEMENTS_SHOWN = 16 };
static void describe_placement(int B, int nsub, char *out, size_t size)
{
    out[0] = '\0';
    int len = 0;
    for (int r = 0; r < nsub && r < PLACEMENTS_SHOWN && tsr_worker_groups() > 0 && len < (int)size; r++) {
        char name[64], rank[32] = "";
        tsr_worker_group_name(tsr_worker_group_of(r), name, sizeof name);
        if (tsr_size() > 1)
            snprintf(rank, sizeof rank, "rank %d ", tsr_gpt2_rank_of_row(r * (B / nsub), B, tsr_size()));
        len += snprintf(out + len, size - (size_t)len, "%s %d on %s%s", r ? "," : "; sub-batch", r, rank, name);
    }
    if (nsub > PLACEMENTS_SHOWN && len > 0 && len < (int)size)
        snprintf(out + len, size - (size_t)len, ", ... (%d sub-batches)", nsub);
}

/* StarPU (and MPI) up as the options say, every rank checked to run the same
 * options; -1 to go on, else the exit status. */
static int start_runtime(const options_t *o, unsigned long long options, int *argc, char ***argv)
{
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    cfg.ncpus = o->threads;
    cfg.ncuda = o->gpus;
    if (o->strict_fp32)
        cfg.gpu_tf32 = 0;
    cfg.parallel_worker_size = o->pws;
    cfg.sched = o->sched;
    size_t trace_len = o->trace ? strlen(o->trace) : 0;
    if (trace_len > 4 && strcmp(o->trace + trace_len - 4, ".png") == 0)
        cfg.schedule_png = o->trace;
    else
        cfg.trace_dir = o->trace;
    cfg.schedule_summary = o->profile;
    cfg.schedule_report = tsr_schedule_report;
    int rc = tsr_init(&cfg, argc, argv);
    if (rc) {
        fprintf(stderr, "error: %s\n", tsr_strerror(rc));
        return 1;
    }
    if (!same_options_on_every_rank(options)) {
        tsr_finalize();
        return 2;
    }
    if (o->pws > 1 && o->pws > tsr_ncpu_workers()) {
        if (tsr_rank() == 0)
            fprintf(stderr, "error: --pws %d is larger than the %d CPU workers\n", o->pws, tsr_ncpu_workers());
        tsr_finalize();
        return 2;
    }
    char placement[1024];
    describe_placement(o->B, o->nsub ? o->nsub : tsr_gpt2_default_sub_batches(o->B), placement, sizeof placement);
    if (tsr_rank() == 0)
        printf("runtime: %s; %s%s\n", tsr_runtime_summary(), tsr_blas_description(), placement);
    signal(SIGINT, on_stop_signal);
    signal(SIGTERM, on_stop_signal);
    signal(SIGUSR1, on_stop_signal);
    return -1;
}

/* Frees the run, stops StarPU; the exit status of a run that ended with rc
 * (130: stopped by a signal; GPT2_BAD_INPUT: a bad input, already named). */
static int stop(trainer_t *t, int rc)
{
    fflush(stdout); /* whole lines before the schedule reports (stderr, at tsr_finalize) */
    if (rc && rc != 130 && rc != GPT2_BAD_INPUT && tsr_rank() == 0)
        fprintf(stderr, "tsr_gpt2: stopped: %s\n", tsr_strerror(rc));
    if (t->csv && fclose(t->csv) != 0 && !rc) {
        fprintf(stderr, "tsr_gpt2: cannot write --csv %s: %s\n", t->opt.csv, strerror(errno));
        rc = TSR_EIO;
    }
    gpt2_free(t);
    int frc = tsr_finalize();
    if (frc && !rc)
        rc = frc;
    if ((fflush(stdout) != 0 || ferror(stdout)) && !rc) { /* e.g. > /dev/full: the losses were lost */
        fprintf(stderr, "tsr_gpt2: cannot write the output: %s\n", strerror(errno));
        rc = TSR_EIO;
    }
    return rc == 130 ? 128 + (interrupted ? (int)interrupted : SIGINT) : rc == GPT2_BAD_INPUT ? 2 : rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    /* The tiles a rank holds for a while (other ranks' parameters, its
     * partial gradients, receive buffers) are malloc'd by StarPU and freed
     * after their last use. glibc maps large blocks of their own, but after
     * the first such block is freed it raises that threshold (up to 32 MB),
     * and later tiles come from the heap, whose freed holes stay in the
     * process: a fixed threshold gives every tile its own mapping, returned
     * when freed, so the peak RSS follows what is held. */
#ifndef STARPU_SIMGRID
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
    trainer_t t;
    memset(&t, 0, sizeof t);
    int status = gpt2_command_line(argc, argv, &t.opt);
    if (status >= 0)
        return status;
    status = start_runtime(&t.opt, gpt2_options_hash(argc, argv), &argc, &argv);
    if (status >= 0)
        return status;
    int rc = gpt2_setup(&t), first = t.step;
    if (!rc && t.opt.profile)
        gpt2_sampler_start(&t);
    if (!rc)
        rc = train(&t);
    gpt2_sampler_stop(&t);
    if (!rc)
        rc = gpt2_finish(&t);
    if (!rc) {
        gpt2_summary(&t, first);
        if (t.opt.profile)
            gpt2_rank_report(&t, first);
    }
    return stop(&t, rc);
}
