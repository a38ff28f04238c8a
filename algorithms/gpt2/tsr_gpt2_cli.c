/* tsr_gpt2's command line: the options, their defaults and checks, --help. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tsr_gpt2.h"
#include "tsr_files.h"

static void usage(FILE *out)
{
    fprintf(out,
"usage: tsr_gpt2 [options]\n"
"Train GPT-2 (llm.c's model, loss and AdamW, bit-compatible checkpoints) with Tessera.\n\n"
"Model\n"
"  --model NAME        preset initialised from --seed: %s\n"
"                      (default d2). 124M, 350M, 774M, 1558M: GPT-2 small to XL,\n"
"                      llm.c's d12, d24, d36, d48 (maxT 1024; their memory is printed\n"
"                      in the model line, see --max-memory); they and d2 take GPT-2\n"
"                      token files; micro is llm.c's test model (V 500, maxT 32): it\n"
"                      needs -T <= 32 and token ids < 500, which the bundled tiny\n"
"                      Shakespeare does not have. With --load or --resume\n"
"                      their model is trained: a --model given must match it\n"
"  --load FILE         start from an llm.c checkpoint (version 3) instead\n"
"  --seed N            initialisation seed, llm.c's MT19937 init (default 42, 0 to 1e9)\n"
"Data (defaults: the bundled tiny Shakespeare)\n"
"  --train FILE --val FILE\n"
"                      llm.c token files, or glob patterns of shards (quoted:\n"
"                      --train 'fineweb_train_*.bin'); batches are read from\n"
"                      disk as they are needed, each rank its own rows\n"
"  --tokenizer FILE    GPT-2 decode table for the samples\n"
"  --no-shuffle        sequential batches (default: llm.c's shuffled order, seed 42)\n"
"Training\n"
"  -B, --batch N       sequences per step (default 4; 1 to 1e9, and memory: --max-memory)\n"
"  -T, --seq N         sequence length (default 64; 1 to the model's maxT)\n"
"  --steps N           training steps (default 20; 0 to 1e9)\n"
"  --lr X --beta1 X --beta2 X --eps X --wd X   AdamW (defaults 1e-4 0.9 0.999 1e-8 0): finite\n"
"                      as floats (at most 3.4e38), >= 0; beta1, beta2 < 1; eps > 0\n"
"  (every integer option: at most 1000000000, 1e9)\n"
"Tiles (parallelism vs task size; defaults on CPUs: token tile of whole sequences, 256 tokens\n"
"or a quarter of one rank's share of the batch if more, C/2, 2C, Vp/8, NH/2 heads, q = k = T;\n"
"with GPUs: the whole sub-batch of one GPU up to 8192 tokens, C, 4C, Vp (Vp / (2 ranks), at most\n"
"16 tiles, under several ranks), NH heads)\n"
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
"  --threads N         CPU workers (default: all cores, or none when CUDA workers run: GPT-2\n"
"                      is faster on the GPUs alone; more than the cores: a warning)\n"
"  --max-memory SIZE   the memory a rank may use, e.g. 8G, 512M (K, M, G, T: powers of\n"
"                      1024); default: what the machine has (MemAvailable, a cgroup's\n"
"                      memory.max; no limit under simulation). The run's memory\n"
"                      (parameters, AdamW, gradients, activations for B, T) is estimated\n"
"                      before anything is allocated, printed in the model line, and a run\n"
"                      needing more is refused; a larger SIZE overrides the check (e.g.\n"
"                      with swap)\n"
"  --gpus N            GPUs (default: every GPU, alone; 0: CPUs only; more than StarPU starts:\n"
"                      an error); with N > 1 the default is one sub-batch per GPU\n"
"  --strict-fp32       float32 GEMMs on GPUs without TF32 tensor cores (default: TF32\n"
"                      where the GPU has it, as llm.c; also TSR_GPU_TF32=0)\n"
"  --precision P       fp32 (default) or bf16, as llm.c's bf16 trainer: activations, the\n"
"                      parameters the forward and backward read and the gradients in bf16\n"
"                      (computed in float32: on CPU workers on float32 copies of the bf16\n"
"                      tiles); float32 master weights, AdamW state and loss; checkpoints\n"
"                      and --save states hold the float32 master weights\n"
"  --sub-batches N     data parallelism: N sub-batches with their own activations and\n"
"                      gradients, added before the update (divides B; default 1, one per\n"
"                      rank under MPI so each rank reduces its own gradients, one per GPU;\n"
"                      under MPI without it B must be a multiple of the ranks)\n"
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
"                      the exit code is 128 + the signal): FILE is a manifest, and each\n"
"                      rank writes its own tiles to FILE.shard.<host>.<pid>.<id>.r<rank>\n"
"                      beside it (under mpirun a directory every rank sees). Atomic:\n"
"                      the manifest's rename commits the new shards, then the old ones\n"
"                      are removed; an existing FILE must be a regular file (a device,\n"
"                      FIFO or directory is refused), a symlink's target is replaced\n"
"                      and the link kept. Checked before the first step. Under mpirun\n"
"                      send SIGUSR1 to mpirun: it passes it to every rank, which save\n"
"                      and stop; on SIGINT or SIGTERM mpirun kills the ranks seconds\n"
"                      later, maybe before the state is committed (FILE then stays the\n"
"                      previous state; the next save removes the files such a kill leaves)\n"
"  --resume FILE       continue from such a state (same losses as without stopping) on\n"
"                      any number of ranks, or from a single-file state of an earlier\n"
"                      version; it records its training file (size, hash): another\n"
"                      --train is refused\n"
"  --resume-any-data   resume onto another training file: at the saved data position\n"
"                      where it fits the file, else from the file's first batch (said)\n"
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
    o->model = NULL; /* d2, or --load's / --resume's model */
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
        fprintf(stderr, "error: --%s %s: expected an integer from %d to 1000000000 (1e9)\n", name, s, min);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* A float option: finite as a float (1e39 is not), >= 0, or > 0 where
 * positive (and then not 0 once rounded to a float: 1e-50 is). */
static int parse_float(const char *s, const char *name, int positive, float *out)
{
    char *end;
    double v = strtod(s, &end);
    float f = (float)v;
    if (*s == '\0' || *end || !isfinite(v) || !isfinite(f) || v < 0 || (positive && !(f > 0))) {
        fprintf(stderr, "error: --%s %s: expected a number %s to 3.4e38 (finite as a float%s)\n", name, s,
                positive ? "above 0" : "from 0", positive ? ", and not 0 once rounded to one" : "");
        return -1;
    }
    *out = f;
    return 0;
}

/* A word option: one of the n words (*out its index); expected: the message's
 * hint when it is none. */
static int parse_word(const char *s, const char *name, const char *const *words, int n, const char *expected,
                      int *out)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, words[i]) == 0) {
            *out = i;
            return 0;
        }
    fprintf(stderr, "error: --%s %s: %s\n", name, s, expected);
    return -1;
}

/* A size: a positive number of bytes, or with K, M, G or T (powers of 1024,
 * e.g. 8G, 512M, 1.5T). */
static int parse_size(const char *s, const char *name, double *out)
{
    char *end;
    double v = strtod(s, &end);
    const char *units = "KMGT", *u = *end ? strchr(units, *end) : NULL;
    if (u && *u) {
        for (const char *p = units; p <= u; p++)
            v *= 1024;
        end++;
        if (*end == 'B' || *end == 'b')
            end++;
    }
    if (*s == '\0' || *end || !isfinite(v) || v < 1 || v > 1e18) {
        fprintf(stderr, "error: --%s %s: expected a size such as 8G, 512M or a number of bytes (1 to 1e18)\n", name,
                s);
        return -1;
    }
    *out = v;
    return 0;
}

enum { O_MODEL = 256, O_LOAD, O_SEED, O_TRAIN, O_VAL, O_TOKENIZER, O_NOSHUFFLE, O_STEPS, O_LR, O_BETA1, O_BETA2,
       O_EPS, O_WD, O_TTOK, O_TCH, O_THID, O_TVOC, O_THEADS, O_TQ, O_TK, O_REDUX, O_THREADS, O_PWS, O_SCHED, O_VALEVERY,
       O_VALBATCHES, O_SAMPLEEVERY, O_SAMPLELEN, O_CSV, O_QUIET, O_SAVE, O_SAVEEVERY, O_RESUME, O_WRITECKPT,
       O_NSUB, O_TRACE, O_PROFILE, O_TILES, O_GPUS, O_STRICT_FP32, O_STATE_RANK0, O_PRECISION, O_MAXMEM,
       O_RESUME_ANY_DATA };

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
    { "resume", 1, 0, O_RESUME }, { "resume-any-data", 0, 0, O_RESUME_ANY_DATA },
    { "write-checkpoint", 1, 0, O_WRITECKPT }, { "help", 0, 0, 'h' }, { "max-memory", 1, 0, O_MAXMEM },
    { 0, 0, 0, 0 } };

/* Options that are valid alone but not together (or not without another). */
static int check_option_combinations(const options_t *o)
{
    const char *error = NULL;
    if (o->beta1 >= 1 || o->beta2 >= 1)
        error = "--beta1 and --beta2 must be < 1";
    else if (o->save_every && !o->save)
        error = "--save-every needs --save FILE";
    else if (o->resume_any_data && !o->resume)
        error = "--resume-any-data needs --resume FILE";
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
    int c, seed = 42, bad = 0, word = 0;
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
        case O_LR: bad = parse_float(optarg, "lr", 0, &o->lr); break;
        case O_BETA1: bad = parse_float(optarg, "beta1", 0, &o->beta1); break;
        case O_BETA2: bad = parse_float(optarg, "beta2", 0, &o->beta2); break;
        case O_EPS: bad = parse_float(optarg, "eps", 1, &o->eps); break;
        case O_WD: bad = parse_float(optarg, "wd", 0, &o->wd); break;
        case O_TTOK: bad = parse_int(optarg, "tile-tok", 1, &o->tiles.tok); break;
        case O_TCH: bad = parse_int(optarg, "tile-ch", 1, &o->tiles.ch); break;
        case O_THID: bad = parse_int(optarg, "tile-hid", 1, &o->tiles.hid); break;
        case O_TVOC: bad = parse_int(optarg, "tile-voc", 1, &o->tiles.voc); break;
        case O_THEADS: bad = parse_int(optarg, "tile-heads", 1, &o->tiles.heads); break;
        case O_TQ: bad = parse_int(optarg, "tile-q", 1, &o->tiles.q); break;
        case O_TK: bad = parse_int(optarg, "tile-k", 1, &o->tiles.k); break;
        case O_REDUX: o->tiles.accum = TSR_REDUCTION_REDUX; break;
        case O_TILES:
            bad = parse_word(optarg, "tiles", (const char *const[]){ "auto" }, 1,
                             "the only value is auto (else give --tile-* sizes)", &word);
            o->auto_tiles = !bad;
            break;
        case O_THREADS: bad = parse_int(optarg, "threads", 1, &o->threads); break;
        case O_GPUS: bad = parse_int(optarg, "gpus", 0, &o->gpus); break;
        case O_STRICT_FP32: o->strict_fp32 = 1; break;
        case O_PRECISION:
            bad = parse_word(optarg, "precision", (const char *const[]){ "fp32", "bf16" }, 2,
                             "the values are fp32 and bf16", &word);
            if (!bad)
                o->precision = word == 1 ? TSR_BFLOAT16 : TSR_FLOAT32;
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
        case O_RESUME_ANY_DATA: o->resume_any_data = 1; break;
        case O_WRITECKPT: o->write_ckpt = optarg; break;
        case O_MAXMEM: bad = parse_size(optarg, "max-memory", &o->max_memory); break;
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

/* FNV-1a over the command line's arguments (argv[0] left out). */
unsigned long long gpt2_options_hash(int argc, char **argv)
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

int gpt2_command_line(int argc, char **argv, options_t *o)
{
    default_options(o);
    int p = parse_options(argc, argv, o);
    if (p > 0) {
        usage(stdout);
        return 0;
    }
    if (p < 0) {
        fprintf(stderr, "(tsr_gpt2 --help lists the options)\n");
        return 2;
    }
    if (check_distinct_files(o))
        return 2;
    /* the per-step CSV is written in place: checked before StarPU starts */
    if (o->csv && tsr_output_check(o->csv) != 0) {
        fprintf(stderr, "error: --csv %s: %s\n", o->csv,
                errno == EINVAL ? "not a regular file (a FIFO or device is refused: the run would block on it)"
                                : strerror(errno));
        return 2;
    }
    return -1;
}
