/* The tsr_gpt2 program's parts (not a library): its command line
 * (tsr_gpt2_cli.c), the run's setup and state files (tsr_gpt2_run.c), the
 * evaluation, sampling and reports (tsr_gpt2_report.c); tsr_gpt2.c holds
 * main and the training loop. */
#ifndef TSR_GPT2_H
#define TSR_GPT2_H
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include "tessera.h"
#include "gpt2_model.h"
#include "gpt2_data.h"
#include "gpt2_init.h"
#include "gpt2_tokenizer.h"
#include "gpt2_train_state.h"
#include "gpt2_state_shards.h"

typedef struct {
    const char *model; /* NULL: not given (--load's or --resume's model, else d2) */
    const char *load, *train, *val, *tokenizer, *csv, *save, *resume, *write_ckpt, *sched, *trace;
    int B, T, steps, val_every, val_batches, sample_every, sample_len, save_every;
    int threads, gpus, pws, nsub, no_shuffle, quiet, profile, auto_tiles, strict_fp32, state_on_rank0;
    int resume_any_data; /* --resume onto another training file than the state's */
    unsigned seed;
    float lr, beta1, beta2, eps, wd;
    tsr_gpt2_tiles_t tiles; /* 0 = default */
    tsr_dtype_t precision;  /* TSR_FLOAT32 or TSR_BFLOAT16 */
    double max_memory;      /* --max-memory in bytes; 0: what the machine has */
} options_t;

/* What a step's time covers. Steps are pipelined: a step's time is the
 * interval between the previous step's loss and its own (the steady-state
 * throughput). A step that fills the empty pipeline (the first one, or the
 * one after a validation or a sample) runs from its submission to its loss,
 * its backward and update overlapping the next step; a step that drains it
 * (the last one, or the one before a validation or a sample) also waits for
 * every task. */
typedef enum { STEP_STEADY, STEP_FILL, STEP_DRAIN, STEP_WHOLE } step_timing_t;

typedef struct {
    options_t opt;
    tsr_gpt2_config_t cfg;
    tsr_gpt2_model_t model;
    tsr_gpt2_loader_t train, val; /* val: opened only when validated (--val-every) */
    tsr_gpt2_file_id_t train_id;  /* the training file's size and hash (recorded by --save); size -1
                                   * when not read for that (one rank without --save or --resume) */
    int keep_position;     /* --resume: restore the state's data position (0: --resume-any-data
                            * onto a file it does not fit) */
    int resume_version;    /* --resume's format: 1, 2 (one file) or 3 (sharded); rank 0's until
                            * the state is loaded */
    tsr_gpt2_tokenizer_t tok;
    int *inputs, *targets;
    int step;              /* next step */
    uint64_t gen_rng;      /* sampling RNG (llm.c's xorshift) */
    FILE *csv;
    double *step_ms;       /* per step, for the summary */
    double *submit_ms;     /* per step: the time its tasks took to submit */
    tsr_gpt2_live_t live_peak;   /* --profile: the most of each kind held while training */
    pthread_t sampler;           /* --profile: samples live_peak (gpt2_sampler_start) */
    atomic_int sampling;         /* the sampler runs while set (read by its thread) */
    double *submit_cpu_ms; /* per step: the submitting thread's CPU time in the forward,
                            * backward and update submission (the batch read left out) */
    double *sent_from, *sent_to; /* --profile: bytes sent to each rank before the
                                  * first steady step and after the last one */
    int comm_steps;        /* steady steps between them */
    unsigned char *step_kind; /* per step: a step_timing_t */
    uint64_t step_tasks;   /* tasks this rank submitted for the last training step */
    float last_loss, last_val; /* for the summary (NAN: none) */
    double mem_estimate;   /* bytes rank 0 needs (check_memory), for the model line */
} trainer_t;

/* tsr_gpt2_cli.c: fills o from the command line after its defaults;
 * returns -1 to run, else the exit status (0 after --help, 2 after an error
 * it printed). */
int gpt2_command_line(int argc, char **argv, options_t *o);
/* FNV-1a over the command line's arguments (argv[0] left out). */
unsigned long long gpt2_options_hash(int argc, char **argv);

/* What gpt2_setup returns on every rank after a bad input was named: exit 2. */
#define GPT2_BAD_INPUT 2

/* tsr_gpt2_run.c (collective calls) */
int gpt2_setup(trainer_t *t);
int gpt2_finish(trainer_t *t);
int gpt2_save_state(trainer_t *t, const char *path);
/* The training loader, and the validation one when --val-every asks for
 * it, each rank reading its own rows of a batch. */
int gpt2_open_loaders(trainer_t *t);
/* The next batch of ld into t->inputs and t->targets, whole on every rank. */
int gpt2_next_batch(trainer_t *t, tsr_gpt2_loader_t *ld);
/* Frees what gpt2_setup allocated (not collective). */
void gpt2_free(trainer_t *t);

/* tsr_gpt2_report.c */
int gpt2_val_loss(trainer_t *t, float *out);
int gpt2_generate(trainer_t *t);
void gpt2_progress(const trainer_t *t, int step, double elapsed_ms);
void gpt2_clear_progress(void);
void gpt2_summary(const trainer_t *t, int first);
void gpt2_rank_report(trainer_t *t, int first);
/* --profile: sample what each rank holds besides its own tiles
 * (tsr_gpt2_live_bytes) every 10 ms from a thread of its own, from start to
 * stop, keeping each kind's peak in t->live_peak. */
void gpt2_sampler_start(trainer_t *t);
void gpt2_sampler_stop(trainer_t *t);

#endif
