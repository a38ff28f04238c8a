/* tsr_gpt2: train GPT-2 with Tessera (llm.c's train_gpt2.c, tiled on StarPU).
 * See --help. Under mpirun every rank runs this program; each computes its
 * slice of the batch and rank 0 prints. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "tessera.h"
#include "gpt2_model.h"
#include "gpt2_data.h"
#include "gpt2_init.h"
#include "gpt2_tokenizer.h"
#include "gpt2_train_state.h"
#include "tsr_files.h"
#include "tsr_schedule_report.h"

typedef struct {
    const char *model, *load, *train, *val, *tokenizer, *csv, *save, *resume, *write_ckpt, *sched, *trace;
    int B, T, steps, val_every, val_batches, sample_every, sample_len, save_every;
    int threads, gpus, pws, nsub, no_shuffle, quiet, profile, auto_tiles, strict_fp32, state_on_rank0;
    unsigned seed;
    float lr, beta1, beta2, eps, wd;
    tsr_gpt2_tiles_t tiles; /* 0 = default */
    tsr_dtype_t precision;  /* TSR_FLOAT32 or TSR_BFLOAT16 */
} options_t;

static void usage(FILE *out)
{
    fprintf(out,
"usage: tsr_gpt2 [options]\n"
"Train GPT-2 (llm.c's model, loss and AdamW, bit-compatible checkpoints) with Tessera.\n\n"
"Model\n"
"  --model NAME        preset initialised from --seed: %s (default d2). 124M and\n"
"                      d2 take GPT-2 token files; micro is llm.c's test model (V 500,\n"
"                      maxT 32): it needs -T <= 32 and token ids < 500, which the\n"
"                      bundled tiny Shakespeare does not have\n"
"  --load FILE         start from an llm.c checkpoint (version 3) instead\n"
"  --seed N            initialisation seed, llm.c's MT19937 init (default 42)\n"
"Data (defaults: the bundled tiny Shakespeare)\n"
"  --train FILE --val FILE --tokenizer FILE\n"
"  --no-shuffle        sequential batches (default: llm.c's shuffled order, seed 42)\n"
"Training\n"
"  -B, --batch N       sequences per step (default 4)\n"
"  -T, --seq N         sequence length (default 64)\n"
"  --steps N           training steps (default 20)\n"
"  --lr X --beta1 X --beta2 X --eps X --wd X   AdamW (defaults 1e-4 0.9 0.999 1e-8 0)\n"
"Tiles (parallelism vs task size; defaults on CPUs: token tile of whole sequences, 256 tokens\n"
"or a quarter of one rank's share of the batch if more, C/2, 2C, Vp/8, NH/2 heads, q = k = T;\n"
"with GPUs: the whole sub-batch of one GPU up to 8192 tokens, C, 4C, Vp, NH heads)\n"
"  --tile-tok N        token tile (divides T, or a multiple of T: several sequences)\n"
"  --tile-ch N         channel tile                --tile-hid N  hidden (4C) tile\n"
"  --tile-voc N        vocabulary tile             --tile-heads N heads per attention tile (divides NH)\n"
"  --tile-q N          attention query tile        --tile-k N    attention key tile\n"
"                      (<= T; default the token tile, or T when it is longer; when both\n"
"                      equal a token tile dividing T the projections write the attention\n"
"                      tensors directly, otherwise through split/merge tasks)\n"
"  --tiles auto        choose the tiles: a model of the step's phases (the GEMM kernel\n"
"                      and the loss calibrated on first use) ranks every tile set, its\n"
"                      3 best and the default tiles are tried for a few steps each, the\n"
"                      fastest wins (once: kept in ~/.cache/tessera/tile_models); prints\n"
"                      the predicted and the trial step time\n"
"  --redux             accumulate sums over tiles with STARPU_REDUX (default ordered)\n"
"Runtime\n"
"  --threads N         CPU workers (default: all cores)\n"
"  --gpus N            CUDA workers (default: every GPU; 0: CPUs only); with N > 1 the\n"
"                      default is one sub-batch per GPU\n"
"  --strict-fp32       float32 GEMMs on GPUs without TF32 tensor cores (default: TF32\n"
"                      where the GPU has it, as llm.c; also TSR_GPU_TF32=0)\n"
"  --precision P       fp32 (default) or bf16, as llm.c's bf16 trainer: activations, the\n"
"                      parameters the forward and backward read and the gradients in bf16\n"
"                      (computed in float32: on CPU workers on float32 copies of the bf16\n"
"                      tiles); float32 master weights, AdamW state and loss; checkpoints\n"
"                      and --save states hold the float32 master weights\n"
"  --sub-batches N     data parallelism: N sub-batches with their own activations and\n"
"                      gradients, added before the update (divides B; default 1, one per\n"
"                      rank under MPI so each rank reduces its own gradients, one per GPU)\n"
"  --state-on-rank0    under MPI, keep the parameters, gradient sums and AdamW state on\n"
"                      rank 0 (a parameter server) instead of sharding their tiles\n"
"                      over the ranks; for comparison (docs/gpt2.md)\n"
"  --pws N             parallel-worker size: GEMM tasks on combined workers of N cores\n"
"                      with multi-threaded BLAS inside (tensor parallelism)\n"
"  --sched NAME        StarPU scheduler\n"
"  --trace DIR         record StarPU's FxT trace of the run; at exit DIR holds paje.trace\n"
"                      (ViTE) and tasks.rec (the task list), made by starpu_fxt_tool\n"
"  --trace FILE.png    draw the run's schedule: a Gantt chart (one lane per worker, steps\n"
"                      marked) from StarPU's profiling data, the task list in FILE.csv,\n"
"                      and the --profile summary\n"
"  --profile           at exit, print the schedule summary: time per operation, busy /\n"
"                      idle / runtime overhead per worker, critical path, a verdict\n"
"Output\n"
"  --val-every N       validation loss every N steps (default 10, 0: never)\n"
"  --val-batches N     validation batches (default 5)\n"
"  --sample-every N    generate a sample every N steps (default 20, 0: never)\n"
"  --sample-len N      generated tokens (default min(64, T))\n"
"  --csv FILE          per-step records (step,loss,step_ms,tokens_per_ms,val_loss,timing)\n"
"                      step_ms: from the previous step's loss to this one's (steps are\n"
"                      pipelined); timing: first (from submission: its backward runs on\n"
"                      in the next step), steady, last (includes finishing every task)\n"
"  --quiet             no per-step lines (summary only)\n"
"Checkpoints\n"
"  --save FILE         training state (model, AdamW, step, data position) at the end,\n"
"                      every --save-every steps and on Ctrl-C, SIGTERM or SIGUSR1 (then\n"
"                      the exit code is 128 + the signal). Atomic: a temporary file is\n"
"                      renamed over FILE; an existing FILE must be a regular file (a\n"
"                      device, FIFO or directory is refused), a symlink's target is\n"
"                      replaced and the link kept. Checked before the first step.\n"
"                      Under mpirun send SIGUSR1 to mpirun: it passes it to every rank,\n"
"                      which save and stop; on SIGINT or SIGTERM mpirun kills the ranks\n"
"                      seconds later, maybe before the state is written (the next run\n"
"                      removes the temporary file such a kill leaves)\n"
"  --resume FILE       continue from such a state (same losses as without stopping)\n"
"  --write-checkpoint FILE   the final model as an llm.c checkpoint\n"
"  -h, --help\n", tsr_gpt2_preset_names());
}

/* A bundled data file: the source tree's copy, else the installed one
 * (<bin>/../share/tessera/gpt2). */
static const char *bundled_data(const char *name)
{
    static char paths[3][4096];
    static int next;
    char *path = paths[next++ % 3], exe[2048];
    snprintf(path, sizeof paths[0], "%s/%s", TSR_GPT2_DATA_DIR, name);
    if (access(path, R_OK) == 0)
        return path;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
        snprintf(path, sizeof paths[0], "%s/../share/tessera/gpt2/%s", exe, name);
    }
    return path;
}

static void default_options(options_t *o)
{
    memset(o, 0, sizeof *o);
    o->model = "d2";
    o->B = 4;
    o->T = 64;
    o->steps = 20;
    o->val_every = 10;
    o->val_batches = 5;
    o->sample_every = 20;
    o->seed = 42;
    o->lr = 1e-4f;
    o->beta1 = 0.9f;
    o->beta2 = 0.999f;
    o->eps = 1e-8f;
    o->threads = -1;
    o->gpus = -1; /* all */
    o->pws = 1;
    o->nsub = 0; /* 1, or one per rank under MPI */
    o->train = bundled_data("tiny_shakespeare_train.bin");
    o->val = bundled_data("tiny_shakespeare_val.bin");
    o->tokenizer = bundled_data("gpt2_tokenizer.bin");
}

static int parse_int(const char *s, const char *name, int min, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end || v < min || v > 1000000000) {
        fprintf(stderr, "error: --%s %s: expected an integer >= %d\n", name, s, min);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int parse_float(const char *s, const char *name, float *out)
{
    char *end;
    double v = strtod(s, &end);
    if (*s == '\0' || *end || !isfinite(v) || v < 0) {
        fprintf(stderr, "error: --%s %s: expected a non-negative number\n", name, s);
        return -1;
    }
    *out = (float)v;
    return 0;
}

enum { O_MODEL = 256, O_LOAD, O_SEED, O_TRAIN, O_VAL, O_TOKENIZER, O_NOSHUFFLE, O_STEPS, O_LR, O_BETA1, O_BETA2,
       O_EPS, O_WD, O_TTOK, O_TCH, O_THID, O_TVOC, O_THEADS, O_TQ, O_TK, O_REDUX, O_THREADS, O_PWS, O_SCHED, O_VALEVERY,
       O_VALBATCHES, O_SAMPLEEVERY, O_SAMPLELEN, O_CSV, O_QUIET, O_SAVE, O_SAVEEVERY, O_RESUME, O_WRITECKPT,
       O_NSUB, O_TRACE, O_PROFILE, O_TILES, O_GPUS, O_STRICT_FP32, O_STATE_RANK0, O_PRECISION };

static const struct option long_options[] = {
    { "model", 1, 0, O_MODEL }, { "load", 1, 0, O_LOAD }, { "seed", 1, 0, O_SEED }, { "train", 1, 0, O_TRAIN },
    { "val", 1, 0, O_VAL }, { "tokenizer", 1, 0, O_TOKENIZER }, { "no-shuffle", 0, 0, O_NOSHUFFLE },
    { "batch", 1, 0, 'B' }, { "seq", 1, 0, 'T' }, { "steps", 1, 0, O_STEPS }, { "lr", 1, 0, O_LR },
    { "beta1", 1, 0, O_BETA1 }, { "beta2", 1, 0, O_BETA2 }, { "eps", 1, 0, O_EPS }, { "wd", 1, 0, O_WD },
    { "tile-tok", 1, 0, O_TTOK }, { "tile-ch", 1, 0, O_TCH }, { "tile-hid", 1, 0, O_THID },
    { "tile-voc", 1, 0, O_TVOC }, { "tile-heads", 1, 0, O_THEADS }, { "tile-q", 1, 0, O_TQ },
    { "tile-k", 1, 0, O_TK }, { "tiles", 1, 0, O_TILES }, { "redux", 0, 0, O_REDUX },
    { "threads", 1, 0, O_THREADS }, { "gpus", 1, 0, O_GPUS }, { "strict-fp32", 0, 0, O_STRICT_FP32 },
    { "precision", 1, 0, O_PRECISION },
    { "pws", 1, 0, O_PWS }, { "sub-batches", 1, 0, O_NSUB }, { "sched", 1, 0, O_SCHED },
    { "state-on-rank0", 0, 0, O_STATE_RANK0 },
    { "trace", 1, 0, O_TRACE }, { "profile", 0, 0, O_PROFILE },
    { "val-every", 1, 0, O_VALEVERY }, { "val-batches", 1, 0, O_VALBATCHES },
    { "sample-every", 1, 0, O_SAMPLEEVERY }, { "sample-len", 1, 0, O_SAMPLELEN }, { "csv", 1, 0, O_CSV },
    { "quiet", 0, 0, O_QUIET }, { "save", 1, 0, O_SAVE }, { "save-every", 1, 0, O_SAVEEVERY },
    { "resume", 1, 0, O_RESUME }, { "write-checkpoint", 1, 0, O_WRITECKPT }, { "help", 0, 0, 'h' },
    { 0, 0, 0, 0 } };

/* Options that are valid alone but not together (or not without another). */
static int check_option_combinations(const options_t *o)
{
    const char *error = NULL;
    if (o->beta1 >= 1 || o->beta2 >= 1)
        error = "--beta1 and --beta2 must be < 1";
    else if (o->save_every && !o->save)
        error = "--save-every needs --save FILE";
    else if (o->load && o->resume)
        error = "--load and --resume both give the model: --resume's state holds it";
    else if (o->sample_len > o->T)
        error = "--sample-len is longer than the sequence (-T): the model sees at most T tokens";
    else if (o->auto_tiles && (o->tiles.tok || o->tiles.ch || o->tiles.hid || o->tiles.voc || o->tiles.heads ||
                               o->tiles.q || o->tiles.k))
        error = "--tiles auto chooses every tile: leave out the --tile-* options";
    else if (o->pws > 1 && o->threads > 0 && o->pws > o->threads)
        error = "--pws is larger than --threads: a parallel worker combines that many CPU workers";
    if (error)
        fprintf(stderr, "error: %s\n", error);
    return error ? -1 : 0;
}

/* Returns 0, 1 for --help, -1 on a bad option (message printed). */
static int parse_options(int argc, char **argv, options_t *o)
{
    int c, seed = 42, bad = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "B:T:h", long_options, NULL)) != -1 && !bad) {
        const char *name = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        switch (c) {
        case 'h': return 1;
        case O_MODEL: o->model = optarg; break;
        case O_LOAD: o->load = optarg; break;
        case O_SEED: bad = parse_int(optarg, "seed", 0, &seed); o->seed = (unsigned)seed; break;
        case O_TRAIN: o->train = optarg; break;
        case O_VAL: o->val = optarg; break;
        case O_TOKENIZER: o->tokenizer = optarg; break;
        case O_NOSHUFFLE: o->no_shuffle = 1; break;
        case 'B': bad = parse_int(optarg, "batch", 1, &o->B); break;
        case 'T': bad = parse_int(optarg, "seq", 1, &o->T); break;
        case O_STEPS: bad = parse_int(optarg, "steps", 0, &o->steps); break;
        case O_LR: bad = parse_float(optarg, "lr", &o->lr); break;
        case O_BETA1: bad = parse_float(optarg, "beta1", &o->beta1); break;
        case O_BETA2: bad = parse_float(optarg, "beta2", &o->beta2); break;
        case O_EPS: bad = parse_float(optarg, "eps", &o->eps); break;
        case O_WD: bad = parse_float(optarg, "wd", &o->wd); break;
        case O_TTOK: bad = parse_int(optarg, "tile-tok", 1, &o->tiles.tok); break;
        case O_TCH: bad = parse_int(optarg, "tile-ch", 1, &o->tiles.ch); break;
        case O_THID: bad = parse_int(optarg, "tile-hid", 1, &o->tiles.hid); break;
        case O_TVOC: bad = parse_int(optarg, "tile-voc", 1, &o->tiles.voc); break;
        case O_THEADS: bad = parse_int(optarg, "tile-heads", 1, &o->tiles.heads); break;
        case O_TQ: bad = parse_int(optarg, "tile-q", 1, &o->tiles.q); break;
        case O_TK: bad = parse_int(optarg, "tile-k", 1, &o->tiles.k); break;
        case O_REDUX: o->tiles.accum = TSR_ACCUM_REDUX; break;
        case O_TILES:
            o->auto_tiles = strcmp(optarg, "auto") == 0;
            if (!o->auto_tiles) {
                fprintf(stderr, "error: --tiles %s: the only value is auto (else give --tile-* sizes)\n", optarg);
                bad = 1;
            }
            break;
        case O_THREADS: bad = parse_int(optarg, "threads", 1, &o->threads); break;
        case O_GPUS: bad = parse_int(optarg, "gpus", 0, &o->gpus); break;
        case O_STRICT_FP32: o->strict_fp32 = 1; break;
        case O_PRECISION:
            if (strcmp(optarg, "fp32") == 0) {
                o->precision = TSR_FLOAT32;
            } else if (strcmp(optarg, "bf16") == 0) {
                o->precision = TSR_BFLOAT16;
            } else {
                fprintf(stderr, "error: --precision %s: the values are fp32 and bf16\n", optarg);
                bad = 1;
            }
            break;
        case O_PWS: bad = parse_int(optarg, "pws", 1, &o->pws); break;
        case O_NSUB: bad = parse_int(optarg, "sub-batches", 1, &o->nsub); break;
        case O_STATE_RANK0: o->state_on_rank0 = 1; break;
        case O_SCHED: o->sched = optarg; break;
        case O_TRACE: o->trace = optarg; break;
        case O_PROFILE: o->profile = 1; break;
        case O_VALEVERY: bad = parse_int(optarg, "val-every", 0, &o->val_every); break;
        case O_VALBATCHES: bad = parse_int(optarg, "val-batches", 1, &o->val_batches); break;
        case O_SAMPLEEVERY: bad = parse_int(optarg, "sample-every", 0, &o->sample_every); break;
        case O_SAMPLELEN: bad = parse_int(optarg, "sample-len", 1, &o->sample_len); break;
        case O_CSV: o->csv = optarg; break;
        case O_QUIET: o->quiet = 1; break;
        case O_SAVE: o->save = optarg; break;
        case O_SAVEEVERY: bad = parse_int(optarg, "save-every", 0, &o->save_every); break;
        case O_RESUME: o->resume = optarg; break;
        case O_WRITECKPT: o->write_ckpt = optarg; break;
        default:
            fprintf(stderr, "error: unknown or incomplete option '%s'\n", name);
            return -1;
        }
    }
    if (bad)
        return -1;
    if (optind < argc) {
        fprintf(stderr, "error: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    return check_option_combinations(o);
}

/* ---- training state files (--save / --resume) ----------------------------- */

/* SIGINT (Ctrl-C), SIGTERM (what batch schedulers send before killing a
 * job) and SIGUSR1 (a pre-emption warning): stop after the current step,
 * saving the state when --save is given; exit with 128 + the signal. */
static volatile sig_atomic_t interrupted;
static void on_stop_signal(int sig) { interrupted = sig; }

typedef struct {
    options_t opt;
    tsr_gpt2_config_t cfg;
    tsr_gpt2_model_t model;
    tsr_gpt2_loader_t train, val;
    tsr_gpt2_tokenizer_t tok;
    int *inputs, *targets;
    int step;              /* next step */
    uint64_t gen_rng;      /* sampling RNG (llm.c's xorshift) */
    FILE *csv;
    double *step_ms;       /* per step, for the summary */
    double *submit_ms;     /* per step: the time its tasks took to submit */
    double cached_params;        /* --profile: most bytes of other ranks' parameters held in
                                  * a steady step; step_cached_params: in the last step */
    double step_cached_params;
    double *sent_from, *sent_to; /* --profile: bytes sent to each rank before the
                                  * first steady step and after the last one */
    int comm_steps;        /* steady steps between them */
    unsigned char *step_kind; /* per step: a step_timing_t */
    uint64_t step_tasks;   /* tasks this rank submitted for the last training step */
    float last_loss, last_val; /* for the summary (NAN: none) */
} trainer_t;

/* Gathers the state on rank 0, which writes it (collective). */
static int save_state(trainer_t *t, const char *path)
{
    size_t np = tsr_gpt2_num_params(&t->cfg);
    int root = tsr_rank() == 0, rc = 0;
    tsr_gpt2_train_state_t st = { t->step, t->gen_rng, NULL, NULL, NULL };
    if (root) {
        st.params = malloc(np * sizeof(float));
        st.m = malloc(np * sizeof(float));
        st.v = malloc(np * sizeof(float));
        rc = st.params && st.m && st.v ? 0 : TSR_ENOMEM;
    }
    rc = tsr_any(rc) ? TSR_ENOMEM : 0;
    if (!rc)
        rc = tsr_gpt2_params_gather(&t->model, st.params);
    if (!rc)
        rc = tsr_gpt2_adam_gather(&t->model, st.m, st.v);
    if (!rc && root)
        rc = tsr_gpt2_train_state_write(path, &t->cfg, t->opt.B, t->opt.T, &st, &t->train);
    if (!rc && root)
        tsr_log(TSR_LOG_INFO, "saved training state (step %d) to %s", t->step, path);
    tsr_gpt2_train_state_free(&st);
    return tsr_any(rc) ? (rc ? rc : TSR_EIO) : 0;
}

/* Rank 0 reads a state file; the model, step, data position and sampler of
 * every rank continue from it (collective). */
static int load_state(trainer_t *t, const char *path)
{
    int root = tsr_rank() == 0, rc = 0;
    tsr_gpt2_train_state_t st = { 0 };
    if (root)
        rc = tsr_gpt2_train_state_read(path, &t->cfg, t->opt.B, t->opt.T, &t->train, &st);
    if (tsr_any(rc)) {
        tsr_gpt2_train_state_free(&st);
        return rc ? rc : TSR_EFORMAT;
    }
    rc = tsr_gpt2_params_scatter(&t->model, st.params);
    if (!rc)
        rc = tsr_gpt2_adam_scatter(&t->model, st.m, st.v);
    int32_t step = st.step;
    uint64_t rng = st.gen_rng;
    tsr_gpt2_train_state_free(&st);
    if (!rc && tsr_size() > 1) {
        /* rank 0 read the file: the others replay the loader to the same place */
        size_t lb = tsr_gpt2_loader_state_bytes(&t->train);
        void *ls = malloc(lb);
        rc = ls ? 0 : TSR_ENOMEM;
        if (!rc && root)
            rc = tsr_gpt2_loader_save_state(&t->train, ls, lb);
        if (tsr_any(rc))
            rc = rc ? rc : TSR_ENOMEM;
        else
            rc = tsr_broadcast(ls, lb, 0);
        if (!rc && !root)
            rc = tsr_gpt2_loader_restore_state(&t->train, ls, lb);
        free(ls);
        if (!rc)
            rc = tsr_broadcast(&step, sizeof step, 0);
        if (!rc)
            rc = tsr_broadcast(&rng, sizeof rng, 0);
    }
    t->step = step;
    t->gen_rng = rng;
    if (!rc)
        tsr_log(TSR_LOG_INFO, "resumed from %s at step %d", path, t->step);
    return rc;
}

/* ---- evaluation and sampling ---------------------------------------------- */

static int val_loss(trainer_t *t, float *out)
{
    double sum = 0;
    int rc = tsr_gpt2_loader_reset(&t->val);
    for (int i = 0; i < t->opt.val_batches && !rc; i++) {
        float loss;
        size_t sample;
        rc = tsr_gpt2_loader_next(&t->val, t->inputs, t->targets, &sample);
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
static int generate(trainer_t *t)
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

/* ---- the loop -------------------------------------------------------------- */

static int progress_shown;

/* Erase the progress bar before a line is printed (stdout and the bar share
 * the terminal). */
static void clear_progress(void)
{
    if (!progress_shown)
        return;
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
    progress_shown = 0;
}

static void progress(const trainer_t *t, int step, double elapsed_ms)
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
        clear_progress();
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

/* One training step, submitted whole (forward, loss, backward, AdamW) before
 * it waits for its loss alone: the step's backward and update run on while
 * the next step is submitted, and the next forward starts on each layer as
 * soon as its parameters are updated. A step's time is thus the interval
 * between two losses (the steady-state throughput). A step that drains the
 * pipeline (drain: see step_timing) also waits for all its tasks. */
static int train_step(trainer_t *t, float *loss, double *ms, double *submit_ms, int drain)
{
    size_t sample;
    double t0 = tsr_wtime();
    int rc = tsr_gpt2_loader_next(&t->train, t->inputs, t->targets, &sample);
    if (!rc)
        rc = tsr_gpt2_forward_submit(&t->model, t->inputs, t->targets);
    if (!rc)
        rc = tsr_gpt2_backward(&t->model);
    if (!rc && t->sent_to) /* --profile: the step's fetches, before the update drops them */
        t->step_cached_params = tsr_gpt2_cached_param_bytes(&t->model);
    if (!rc)
        rc = tsr_gpt2_update(&t->model, t->opt.lr, t->opt.beta1, t->opt.beta2, t->opt.eps, t->opt.wd, t->step);
    *submit_ms = (tsr_wtime() - t0) * 1e3;
    if (!rc)
        rc = tsr_gpt2_loss(&t->model, loss);
    if (!rc && drain)
        rc = tsr_wait();
    *ms = (tsr_wtime() - t0) * 1e3;
    return rc;
}

/* What a step's time covers. Steps are pipelined: a step's time is the
 * interval between the previous step's loss and its own (the steady-state
 * throughput). A step that fills the empty pipeline (the first one, or the
 * one after a validation or a sample) runs from its submission to its loss,
 * its backward and update overlapping the next step; a step that drains it
 * (the last one, or the one before a validation or a sample) also waits for
 * every task. */
typedef enum { STEP_STEADY, STEP_FILL, STEP_DRAIN, STEP_WHOLE } step_timing_t;
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

static int train(trainer_t *t)
{
    int rc = 0, first = t->step, BT = t->opt.B * t->opt.T;
    double start = tsr_wtime();
    for (; t->step < t->opt.steps && !rc; t->step++) {
        int s = t->step;
        float vl = NAN, loss = NAN;
        double ms = 0, submit_ms = 0;
        int evaluate = t->opt.val_every && s % t->opt.val_every == 0;
        int sample = t->opt.sample_every && s > 0 && s % t->opt.sample_every == 0;
        clear_progress();
        step_timing_t kind = step_timing(t, first, s);
        if (!rc && evaluate) {
            rc = val_loss(t, &vl);
            t->last_val = vl;
            if (!rc && tsr_rank() == 0 && !t->opt.quiet)
                printf("val loss %f\n", vl);
        }
        if (!rc && sample)
            rc = generate(t);
        char mark[32];
        snprintf(mark, sizeof mark, "step %d", s);
        tsr_schedule_mark(mark);
        uint64_t tasks_before = tsr_tasks_submitted();
        if (t->sent_from && kind == STEP_STEADY && t->comm_steps == 0)
            tsr_comm_bytes_sent(t->sent_from);
        if (!rc)
            rc = train_step(t, &loss, &ms, &submit_ms, kind == STEP_DRAIN || kind == STEP_WHOLE);
        if (t->sent_to && kind == STEP_STEADY && !rc) {
            tsr_comm_bytes_sent(t->sent_to);
            t->comm_steps++;
            if (t->step_cached_params > t->cached_params)
                t->cached_params = t->step_cached_params;
        }
        t->step_tasks = tsr_tasks_submitted() - tasks_before;
        if (rc)
            break;
        t->step_ms[s] = ms;
        t->submit_ms[s] = submit_ms;
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
        progress(t, s, (tsr_wtime() - start) * 1e3);
        if (t->opt.save && t->opt.save_every && (s + 1) % t->opt.save_every == 0 && s + 1 < t->opt.steps) {
            t->step = s + 1;
            rc = save_state(t, t->opt.save);
            t->step = s;
        }
        if (tsr_any(interrupted)) {
            t->step = s + 1;
            if (tsr_rank() == 0)
                fprintf(stderr, "\ninterrupted (%s) after step %d%s\n", strsignal(interrupted ? interrupted : SIGINT), s,
                        t->opt.save ? ": saving the state" : "");
            if (t->opt.save)
                rc = save_state(t, t->opt.save);
            return rc ? rc : 130;
        }
    }
    if (!rc && t->opt.val_every && t->step % t->opt.val_every == 0 && t->step > first) {
        float vl;
        rc = val_loss(t, &vl);
        t->last_val = vl;
        if (!rc && tsr_rank() == 0 && !t->opt.quiet)
            printf("val loss %f\n", vl);
    }
    return rc;
}

/* --profile: what each rank holds (the tiles it owns) and sends and
 * receives a steady step, and its peak RSS (collective; rank 0 prints). */
static void rank_report(trainer_t *t)
{
    int size = tsr_size(), n = TSR_GPT2_BYTE_KINDS + 3 + size;
    double *mine = calloc((size_t)n, sizeof(double)), *all = calloc((size_t)n * size, sizeof(double));
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    if (!mine || !all || !t->sent_from) {
        free(mine);
        free(all);
        return;
    }
    tsr_gpt2_rank_bytes(&t->model, mine);
    mine[TSR_GPT2_BYTE_KINDS] = ru.ru_maxrss * 1024.0;
    mine[TSR_GPT2_BYTE_KINDS + 1] = t->comm_steps;
    mine[TSR_GPT2_BYTE_KINDS + 2] = t->cached_params;
    for (int r = 0; r < size; r++) /* bytes sent to rank r a steady step */
        mine[TSR_GPT2_BYTE_KINDS + 3 + r] = t->comm_steps ? (t->sent_to[r] - t->sent_from[r]) / t->comm_steps : 0;
    if (tsr_allgather(mine, all, (size_t)n * sizeof(double)) == 0 && tsr_rank() == 0)
        for (int r = 0; r < size; r++) {
            const double *v = all + (size_t)r * n;
            double sent = 0, received = 0;
            for (int q = 0; q < size; q++) {
                sent += v[TSR_GPT2_BYTE_KINDS + 3 + q];
                received += all[(size_t)q * n + TSR_GPT2_BYTE_KINDS + 3 + r];
            }
            printf("rank %d holds %.1f MB of parameters, %.1f MB of AdamW state, %.1f MB of gradients, %.1f MB of "
                   "activations; peak RSS %.1f MB", r, v[0] / 1e6, v[1] / 1e6, v[2] / 1e6, v[3] / 1e6,
                   v[TSR_GPT2_BYTE_KINDS] / 1e6);
            if (size > 1)
                printf("; a steady step: %.2f MB sent, %.2f MB received (over %d steps); up to %.1f MB of other "
                       "ranks' parameters cached", sent / 1e6, received / 1e6, (int)v[TSR_GPT2_BYTE_KINDS + 1],
                       v[TSR_GPT2_BYTE_KINDS + 2] / 1e6);
            printf("\n");
        }
    free(mine);
    free(all);
}

/* Steady-state figures come from the steady steps (see step_timing); the
 * rate over all steps from the sum of their times (evaluations excluded). */
static void summary(const trainer_t *t, int first)
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

/* ---- setup ------------------------------------------------------------------ */

/* The model's configuration on every rank; its weights on rank 0 alone (they
 * are scattered from there: 500 MB and seconds of initialisation for 124M
 * that the other ranks would throw away). */
static int load_model_params(trainer_t *t, float **params)
{
    int rc, root = tsr_rank() == 0;
    if (t->opt.load)
        rc = root ? tsr_gpt2_checkpoint_read(t->opt.load, &t->cfg, params)
                  : tsr_gpt2_checkpoint_read_config(t->opt.load, &t->cfg);
    else if ((rc = tsr_gpt2_config_preset(t->opt.model, &t->cfg)) == 0 && root)
        rc = tsr_gpt2_init_alloc(&t->cfg, t->opt.seed, params);
    return rc;
}

/* The tiles: --tiles auto, else the defaults where no --tile-* was given.
 * Called with the workers paused; the calibration needs them running. */
static int fill_tiles(trainer_t *t)
{
    tsr_gpt2_tiles_t def, *o = &t->opt.tiles;
    if (t->opt.auto_tiles) {
        double predicted = 0, trial = 0;
        tsr_resume();
        int rc = tsr_gpt2_tiles_auto(&t->cfg, t->opt.B, t->opt.T, t->opt.nsub, o, &predicted, &trial);
        tsr_pause();
        if (!rc && tsr_rank() == 0)
            printf("tiles: --tiles auto predicts %.1f ms a step (its model); its trial ran %.1f ms a step "
                   "(the measured steps follow)\n", predicted * 1e3, trial * 1e3);
        return rc;
    }
    tsr_gpt2_tiles_default(&t->cfg, t->opt.B, t->opt.T, &def);
    if (!o->tok) o->tok = def.tok;
    if (!o->ch) o->ch = def.ch;
    if (!o->hid) o->hid = def.hid;
    if (!o->voc) o->voc = def.voc;
    if (!o->heads) o->heads = def.heads;
    return TSR_SUCCESS;
}

/* A file the run reads or writes, named by its option. */
typedef struct {
    const char *option, *path;
    int output;
} run_file_t;

/* The files the options name: inputs, outputs and the names an output
 * derives (--trace X.png also writes X.csv). Returns their number. */
static int run_files(const options_t *o, run_file_t *f, char *trace_csv, size_t n)
{
    int k = 0;
    const run_file_t all[] = { { "--load", o->load, 0 },        { "--resume", o->resume, 0 },
                               { "--train", o->train, 0 },      { "--val", o->val, 0 },
                               { "--tokenizer", o->tokenizer, 0 }, { "--save", o->save, 1 },
                               { "--write-checkpoint", o->write_ckpt, 1 }, { "--csv", o->csv, 1 },
                               { "--trace", o->trace, 1 } };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i].path)
            f[k++] = all[i];
    size_t len = o->trace ? strlen(o->trace) : 0;
    if (len > 4 && strcmp(o->trace + len - 4, ".png") == 0) {
        snprintf(trace_csv, n, "%.*s.csv", (int)(len - 4), o->trace);
        f[k++] = (run_file_t){ "--trace's task list", trace_csv, 1 };
    }
    return k;
}

/* No output may be an input or another output: a CSV appended to the
 * training state, a checkpoint written over the tokenizer, the task list
 * over the per-step CSV. Replacing what was read at the start is allowed
 * where it is the point (--save onto --resume, --write-checkpoint onto
 * --load: both are atomic). 0, or 2 after saying which pair clashes. */
static int check_distinct_files(const options_t *o)
{
    run_file_t f[12];
    char trace_csv[4200];
    int n = run_files(o, f, trace_csv, sizeof trace_csv);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            if ((!f[i].output && !f[j].output) || !tsr_same_file(f[i].path, f[j].path))
                continue;
            const char *a = f[i].option, *b = f[j].option;
            if ((!strcmp(a, "--resume") && !strcmp(b, "--save")) ||
                (!strcmp(a, "--load") && !strcmp(b, "--write-checkpoint")))
                continue;
            fprintf(stderr, "error: %s %s and %s %s are the same file: %s\n", a, f[i].path, b, f[j].path,
                    f[i].output ? "one run cannot write it twice" : "an output would overwrite an input");
            return 2;
        }
    return 0;
}

/* Every file the run will write can be written (a temporary file is created
 * and removed), before hours of training rather than after. */
static int check_output_paths(const options_t *o)
{
    int rc = 0;
    if (o->save)
        rc = tsr_atomic_check(o->save);
    if (!rc && o->write_ckpt)
        rc = tsr_atomic_check(o->write_ckpt);
    return rc;
}

static int setup(trainer_t *t)
{
    const options_t *o = &t->opt;
    float *params = NULL;
    /* every rank reads the (small) config; rank 0 reads or makes the weights
     * and scatters them into the tiles. This is host-only work: the StarPU workers are
     * paused, else idle ones poll the cores it runs on (124M init: 3.7 s
     * alone, 10 s beside two polling workers on 2 cores). */
    tsr_pause();
    int rc = load_model_params(t, &params);
    if (!rc)
        rc = tsr_gpt2_loader_open(&t->train, o->train, t->cfg.V, o->B, o->T, !o->no_shuffle, 42);
    if (!rc)
        rc = tsr_gpt2_loader_open(&t->val, o->val, t->cfg.V, o->B, o->T, 0, 42);
    if (!rc)
        rc = tsr_gpt2_tokenizer_read(o->tokenizer, &t->tok);
    if (!rc && tsr_rank() == 0)
        rc = check_output_paths(o);
    if (tsr_any(rc)) {
        tsr_resume();
        free(params);
        return rc ? rc : TSR_EIO;
    }
    if (!t->opt.nsub)
        t->opt.nsub = tsr_gpt2_default_sub_batches(o->B);
    rc = fill_tiles(t);
    if (!rc)
        rc = tsr_gpt2_model_create_dtype(&t->model, &t->cfg, o->B, o->T, o->nsub, &o->tiles, o->state_on_rank0,
                                         o->precision);
    if (!rc && tsr_rank() == 0)
        printf("model: L %d, C %d, NH %d, V %d (Vp %d), maxT %d, %zu parameters; B %d, T %d; tiles tok %d ch %d "
               "hid %d voc %d heads %d q %d k %d (%s%s); %d sub-batch(es)\n", t->cfg.L, t->cfg.C, t->cfg.NH, t->cfg.V, t->cfg.Vp, t->cfg.maxT,
               tsr_gpt2_num_params(&t->cfg), o->B, o->T, o->tiles.tok, o->tiles.ch, o->tiles.hid, o->tiles.voc,
               o->tiles.heads, t->model.tiles.q, t->model.tiles.k,
               o->tiles.accum == TSR_ACCUM_REDUX ? "redux" : "ordered",
               t->model.fused ? "" : ", split/merge",
               o->nsub);
    if (!rc && tsr_rank() == 0 && o->precision == TSR_BFLOAT16)
        printf("precision: bf16 activations, parameters (forward, backward) and gradients; float32 master "
               "weights, AdamW state and loss\n");
    if (!rc)
        rc = tsr_gpt2_params_scatter(&t->model, tsr_rank() == 0 ? params : NULL);
    tsr_resume();
    free(params);
    t->inputs = malloc((size_t)o->B * o->T * sizeof(int));
    t->targets = malloc((size_t)o->B * o->T * sizeof(int));
    t->step_ms = calloc(o->steps + 1, sizeof(double));
    t->submit_ms = calloc(o->steps + 1, sizeof(double));
    if (o->profile) {
        t->sent_from = calloc((size_t)tsr_size(), sizeof(double));
        t->sent_to = calloc((size_t)tsr_size(), sizeof(double));
    }
    t->step_kind = calloc(o->steps + 1, 1);
    if (!t->inputs || !t->targets || !t->step_ms || !t->submit_ms || !t->step_kind)
        rc = rc ? rc : TSR_ENOMEM;
    t->gen_rng = 1337;
    t->last_loss = t->last_val = NAN;
    if (!rc && o->resume)
        rc = load_state(t, o->resume);
    if (!rc && o->csv && tsr_rank() == 0) {
        /* a resumed run appends to its CSV */
        t->csv = fopen(o->csv, t->step ? "a" : "w");
        if (!t->csv) {
            tsr_log(TSR_LOG_ERROR, "cannot write %s", o->csv);
            rc = TSR_EIO;
        } else if (ftell(t->csv) == 0) {
            fprintf(t->csv, "step,loss,step_ms,tokens_per_ms,val_loss,timing\n");
        }
    }
    return tsr_any(rc) ? (rc ? rc : TSR_EIO) : 0;
}

static int finish(trainer_t *t)
{
    int rc = 0;
    if (t->opt.save)
        rc = save_state(t, t->opt.save);
    if (!rc && t->opt.write_ckpt) {
        size_t np = tsr_gpt2_num_params(&t->cfg);
        float *p = tsr_rank() == 0 ? malloc(np * sizeof(float)) : NULL;
        rc = tsr_gpt2_params_gather(&t->model, p);
        if (!rc && tsr_rank() == 0 && (rc = tsr_gpt2_checkpoint_write(t->opt.write_ckpt, &t->cfg, p)) == 0)
            tsr_log(TSR_LOG_INFO, "wrote llm.c checkpoint %s", t->opt.write_ckpt);
        free(p);
    }
    return rc;
}

/* FNV-1a over the command line's arguments (argv[0] left out). */
static unsigned long long options_hash(int argc, char **argv)
{
    unsigned long long h = 1469598103934665603ull;
    for (int i = 1; i < argc; i++)
        for (const char *c = argv[i];; c++) {
            h = (h ^ (unsigned char)*c) * 1099511628211ull;
            if (!*c)
                break;
        }
    return h;
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

int main(int argc, char **argv)
{
    trainer_t t;
    memset(&t, 0, sizeof t);
    default_options(&t.opt);
    int p = parse_options(argc, argv, &t.opt);
    if (p > 0)
        usage(stdout);
    if (p < 0)
        fprintf(stderr, "(tsr_gpt2 --help lists the options)\n");
    if (p)
        return p > 0 ? 0 : 2;
    if (check_distinct_files(&t.opt))
        return 2;
    unsigned long long options = options_hash(argc, argv);
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    cfg.ncpus = t.opt.threads;
    cfg.ncuda = t.opt.gpus;
    if (t.opt.strict_fp32)
        cfg.gpu_tf32 = 0;
    cfg.parallel_worker_size = t.opt.pws;
    cfg.sched = t.opt.sched;
    size_t trace_len = t.opt.trace ? strlen(t.opt.trace) : 0;
    if (trace_len > 4 && strcmp(t.opt.trace + trace_len - 4, ".png") == 0)
        cfg.schedule_png = t.opt.trace;
    else
        cfg.trace_dir = t.opt.trace;
    cfg.schedule_summary = t.opt.profile;
    cfg.schedule_report = tsr_schedule_report;
    int rc = tsr_init(&cfg, &argc, &argv);
    if (rc) {
        fprintf(stderr, "error: %s\n", tsr_strerror(rc));
        return 1;
    }
    if (!same_options_on_every_rank(options)) {
        tsr_finalize();
        return 2;
    }
    if (t.opt.pws > 1 && t.opt.pws > tsr_ncpu_workers()) {
        if (tsr_rank() == 0)
            fprintf(stderr, "error: --pws %d is larger than the %d CPU workers\n", t.opt.pws, tsr_ncpu_workers());
        tsr_finalize();
        return 2;
    }
    if (tsr_rank() == 0)
        printf("runtime: %s; %s\n", tsr_runtime_summary(), tsr_blas_description());
    signal(SIGINT, on_stop_signal);
    signal(SIGTERM, on_stop_signal);
    signal(SIGUSR1, on_stop_signal);
    rc = setup(&t);
    int first = t.step;
    if (!rc)
        rc = train(&t);
    if (rc == 0 || rc == 130) {
        int frc = rc == 0 ? finish(&t) : 0;
        if (rc == 0 && !frc) {
            summary(&t, first);
            if (t.opt.profile)
                rank_report(&t);
        }
        fflush(stdout); /* whole lines before the schedule reports (stderr, at tsr_finalize) */
        rc = rc ? rc : frc;
    }
    if (rc && rc != 130 && tsr_rank() == 0)
        fprintf(stderr, "tsr_gpt2: stopped: %s\n", tsr_strerror(rc));
    if (t.csv && fclose(t.csv) != 0 && !rc) {
        fprintf(stderr, "tsr_gpt2: cannot write --csv %s: %s\n", t.opt.csv, strerror(errno));
        rc = TSR_EIO;
    }
    if (t.model.sub)
        tsr_gpt2_model_destroy(&t.model);
    tsr_gpt2_loader_free(&t.train);
    tsr_gpt2_loader_free(&t.val);
    tsr_gpt2_tokenizer_free(&t.tok);
    free(t.inputs);
    free(t.targets);
    free(t.step_ms);
    free(t.submit_ms);
    free(t.sent_from);
    free(t.sent_to);
    free(t.step_kind);
    int frc = tsr_finalize();
    if (frc && !rc)
        rc = frc;
    if ((fflush(stdout) != 0 || ferror(stdout)) && !rc) { /* e.g. > /dev/full: the losses were lost */
        fprintf(stderr, "tsr_gpt2: cannot write the output: %s\n", strerror(errno));
        rc = TSR_EIO;
    }
    return rc == 130 ? 128 + (interrupted ? (int)interrupted : SIGINT) : rc ? 1 : 0;
}
