/* tsr_gpt2's run: the model, data and outputs set up from the options,
 * the training state files (--save / --resume), the files written at the end. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tsr_gpt2.h"
#include "tsr_files.h"

/* Every rank writes its own tiles, rank 0 the manifest that commits them
 * (tsr_gpt2_state_save; collective). */
int gpt2_save_state(trainer_t *t, const char *path)
{
    int root = tsr_rank() == 0, rc = 0;
    tsr_gpt2_train_state_t st = { t->step, t->gen_rng, NULL, NULL, NULL, t->train_id };
    size_t lb = tsr_gpt2_loader_state_bytes(&t->train);
    void *ls = root ? malloc(lb ? lb : 1) : NULL;
    if (root)
        rc = ls ? tsr_gpt2_loader_save_state(&t->train, ls, lb) : TSR_ENOMEM;
    if (!rc && root && st.data.size < 0 && tsr_gpt2_data_id(t->opt.train, &st.data) != 0) {
        tsr_log(TSR_LOG_ERROR, "cannot read the training file %s again to record it", t->opt.train);
        rc = TSR_EIO;
    }
    if (tsr_any(rc))
        rc = rc ? rc : TSR_EIO;
    else
        rc = tsr_gpt2_state_save(&t->model, path, &st, ls, lb);
    if (!rc && root)
        tsr_log(TSR_LOG_INFO, "saved training state (step %d) to %s and its %d shard file(s)", t->step, path,
                tsr_size());
    free(ls);
    return rc;
}

/* A sharded state (version 3): every rank reads its own tiles and the
 * manifest's step, sampler and data position (collective). */
static int load_sharded(trainer_t *t, const char *path)
{
    tsr_gpt2_train_state_info_t info;
    void *ls = NULL;
    int rc = tsr_gpt2_state_load(&t->model, path, &info, &ls);
    if (!rc && t->keep_position)
        rc = tsr_gpt2_loader_restore_state(&t->train, ls, info.loader_bytes);
    free(ls);
    if (tsr_any(rc))
        return rc ? rc : TSR_EFORMAT;
    t->step = info.step;
    t->gen_rng = info.gen_rng;
    if (tsr_rank() == 0)
        tsr_log(TSR_LOG_INFO, "resumed from %s at step %d", path, t->step);
    return 0;
}

/* Rank 0 reads a single-file state (version 1 or 2; its header already
 * checked against the run by check_inputs); the model, step, data position
 * and sampler of every rank continue from it (collective). */
static int load_single_file(trainer_t *t, const char *path)
{
    int root = tsr_rank() == 0, rc = 0;
    tsr_gpt2_train_state_t st = { 0 };
    tsr_gpt2_loader_t *train = t->keep_position ? &t->train : NULL;
    if (root)
        rc = tsr_gpt2_train_state_read(path, &t->cfg, t->opt.B, t->opt.T, train, &st);
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
    if (!rc && tsr_size() > 1 && train) {
        /* rank 0 read the file: the others replay the loader to the same
         * place. The ranks read the same training file (check_inputs), so
         * the image has the same size everywhere; checked again before the
         * broadcast, which would otherwise overrun a smaller buffer */
        uint64_t lb = tsr_gpt2_loader_state_bytes(&t->train), lb0 = lb;
        rc = tsr_broadcast(&lb0, sizeof lb0, 0);
        if (!rc && tsr_any(lb0 != lb)) {
            if (lb0 != lb)
                tsr_log(TSR_LOG_ERROR, "--train %s: rank %d's data position takes %llu bytes, rank 0's %llu: "
                        "the ranks read different training files", t->opt.train, tsr_rank(),
                        (unsigned long long)lb, (unsigned long long)lb0);
            rc = TSR_EFORMAT;
        }
        void *ls = rc ? NULL : malloc(lb);
        if (!rc)
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
    }
    if (!rc && tsr_size() > 1)
        rc = tsr_broadcast(&step, sizeof step, 0);
    if (!rc && tsr_size() > 1)
        rc = tsr_broadcast(&rng, sizeof rng, 0);
    t->step = step;
    t->gen_rng = rng;
    if (!rc)
        tsr_log(TSR_LOG_INFO, "resumed from %s at step %d", path, t->step);
    return rc;
}

/* --resume's state, in its format (rank 0 read its version; collective). */
static int load_state(trainer_t *t, const char *path)
{
    int32_t version = t->resume_version;
    int rc = tsr_size() > 1 ? tsr_broadcast(&version, sizeof version, 0) : 0;
    if (rc)
        return rc;
    t->resume_version = version;
    return version == 3 ? load_sharded(t, path) : load_single_file(t, path);
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

/* ---- the inputs, checked before the model is built --------------------------------- */

/* Under mpirun the batch is split over the ranks by samples, one sub-batch
 * (its activations and weight gradients) per rank by default: a batch the
 * ranks cannot split evenly is refused rather than run as one sub-batch
 * whose weight gradients all sit on rank 0. An explicit --sub-batches N is
 * the user's split (it must divide B). Every rank decides alike (no
 * communication); rank 0 says why. 0 or 1. */
static int check_batch_split(const options_t *o)
{
    int P = tsr_size(), root = tsr_rank() == 0;
    if (o->nsub && o->B % o->nsub) {
        if (root)
            fprintf(stderr, "error: --sub-batches %d does not divide the batch (-B %d): every sub-batch has "
                    "the same number of sequences\n", o->nsub, o->B);
        return 1;
    }
    if (o->nsub || P < 2 || o->B % P == 0)
        return 0;
    if (root) {
        char lower[64] = "";
        if (o->B > P)
            snprintf(lower, sizeof lower, "-B %d or ", o->B / P * P);
        fprintf(stderr, "error: -B %d is not a multiple of the %d ranks: each rank computes an equal share of "
                "the batch; give %s-B %d, or --sub-batches N (N divides %d) to split it otherwise\n", o->B, P,
                lower, (o->B / P + 1) * P, o->B);
    }
    return 1;
}

/* The input files, by option, in one order on every rank; NULL paths for
 * those the run does not read (the validation file with --val-every 0). */
enum { IN_TRAIN, IN_VAL, IN_TOKENIZER, IN_LOAD, IN_RESUME, NINPUTS };
static void input_files(const options_t *o, const char *path[NINPUTS])
{
    path[IN_TRAIN] = o->train;
    path[IN_VAL] = o->val_every ? o->val : NULL;
    path[IN_TOKENIZER] = o->tokenizer;
    path[IN_LOAD] = o->load;
    path[IN_RESUME] = o->resume;
}
static const char *const input_options[NINPUTS] = { "--train", "--val", "--tokenizer", "--load", "--resume" };

static void describe_id(const tsr_gpt2_file_id_t *id, char *out, size_t n)
{
    if (id->size < 0)
        snprintf(out, n, "cannot read it: %s", id->err == EINVAL ? "not a regular file" : strerror(id->err));
    else
        snprintf(out, n, "%lld bytes, FNV-1a %016llx", (long long)id->size, (unsigned long long)id->hash);
}

/* Under mpirun the same options can name other files on each rank (another
 * working directory, another node's disk): every rank's inputs must have
 * rank 0's size and content hash, checked before anything sizes a buffer
 * from them. Every rank gets every rank's identities and decides alike;
 * rank 0 names each difference. Also fills t->train_id (rank 0's; read on
 * one rank only with --save or --resume, else size -1). 0, 1 when
 * the ranks differ, or a TSR_E* code. */
static int same_inputs_on_every_rank(trainer_t *t)
{
    const options_t *o = &t->opt;
    const char *path[NINPUTS];
    input_files(o, path);
    int P = tsr_size(), bad = 0;
    tsr_gpt2_file_id_t mine[NINPUTS], *all = calloc((size_t)P * NINPUTS, sizeof *all);
    if (!all)
        return TSR_ENOMEM;
    for (int i = 0; i < NINPUTS; i++) {
        mine[i] = (tsr_gpt2_file_id_t){ -1, 0, 0 };
        /* one rank hashes the training file alone, for a state to record */
        if (path[i] && (P > 1 || (i == IN_TRAIN && (o->save || o->resume)))) {
            if (i == IN_TRAIN || i == IN_VAL) /* a file or a glob of shards */
                tsr_gpt2_data_id(path[i], &mine[i]);
            else
                tsr_gpt2_file_id(path[i], &mine[i]);
        }
    }
    int rc = tsr_allgather(mine, all, sizeof mine);
    for (int r = 1; !rc && r < P; r++)
        for (int i = 0; i < NINPUTS; i++) {
            const tsr_gpt2_file_id_t *a = &all[i], *b = &all[(size_t)r * NINPUTS + i];
            if (!path[i] || (a->size == b->size && (a->size < 0 || a->hash == b->hash)))
                continue;
            if (tsr_rank() == 0) {
                char da[128], db[128];
                describe_id(a, da, sizeof da);
                describe_id(b, db, sizeof db);
                fprintf(stderr, "error: %s %s is another file on rank %d than on rank 0 (rank %d: %s; rank 0: "
                        "%s): every rank must read the same files\n", input_options[i], path[i], r, r, db, da);
            }
            bad = 1;
        }
    if (!rc)
        t->train_id = all[IN_TRAIN];
    free(all);
    return rc ? rc : bad;
}

static int same_config(const tsr_gpt2_config_t *a, const tsr_gpt2_config_t *b)
{
    return a->maxT == b->maxT && a->V == b->V && a->Vp == b->Vp && a->L == b->L && a->NH == b->NH && a->C == b->C;
}

static void describe_config(const tsr_gpt2_config_t *c, char *out, size_t n)
{
    snprintf(out, n, "L %d, C %d, NH %d, V %d, Vp %d, maxT %d", c->L, c->C, c->NH, c->V, c->Vp, c->maxT);
}

/* The model's configuration (rank 0): --load's checkpoint or --resume's
 * state decides it, else --model (default d2); a --model given with either
 * must match it. With --resume, *state gets the state file's checked header. */
static int model_config(trainer_t *t, tsr_gpt2_train_state_info_t *state)
{
    const options_t *o = &t->opt;
    tsr_gpt2_config_t named;
    int rc = tsr_gpt2_config_preset(o->model ? o->model : "d2", &named);
    if (rc)
        return rc;
    const char *option = o->load ? "--load" : "--resume", *file = o->load ? o->load : o->resume;
    if (o->load)
        rc = tsr_gpt2_checkpoint_read_config(o->load, &t->cfg);
    else if (o->resume && (rc = tsr_gpt2_train_state_info(o->resume, state)) == 0) {
        t->cfg = state->cfg;
        t->resume_version = state->version;
    }
    else if (!o->resume)
        t->cfg = named;
    if (!rc && o->model && file && !same_config(&named, &t->cfg)) {
        char a[160], b[160];
        describe_config(&named, a, sizeof a);
        describe_config(&t->cfg, b, sizeof b);
        fprintf(stderr, "error: --model %s (%s) does not match %s %s (%s): leave --model out (%s decides the "
                "model) or name the matching one\n", o->model, a, option, file, b, option);
        rc = TSR_EINVAL;
    }
    return rc;
}

/* --resume's header against this run (rank 0; the model was checked by
 * model_config): the batch shape, and the training file it was saved on:
 * the same one (size and hash, recorded from format version 2), else
 * --resume-any-data, which starts the data from the beginning when the saved
 * position does not fit this file. Sets t->keep_position. */
static int check_resume(trainer_t *t, const tsr_gpt2_train_state_info_t *st)
{
    const options_t *o = &t->opt;
    t->keep_position = 1;
    if (st->B != o->B || st->T != o->T) {
        fprintf(stderr, "error: --resume %s was saved for another batch shape (B %d T %d; this run has -B %d "
                "-T %d)\n", o->resume, st->B, st->T, o->B, o->T);
        return TSR_EINVAL;
    }
    char saved[128], now[128];
    describe_id(&st->data, saved, sizeof saved);
    describe_id(&t->train_id, now, sizeof now);
    int fits = st->loader_bytes == tsr_gpt2_loader_state_bytes(&t->train);
    int same = st->data.size < 0 ? fits
                                 : st->data.size == t->train_id.size && st->data.hash == t->train_id.hash;
    if (st->data.size < 0)
        printf("note: --resume %s is a version 1 state, which does not record its training file: --train %s is "
               "not checked (beyond its token count)\n", o->resume, o->train);
    if (same && fits)
        return 0;
    if (!o->resume_any_data) {
        if (st->data.size < 0)
            fprintf(stderr, "error: --resume %s was saved on another training file (its data position does not "
                    "fit --train %s): give the same --train, or --resume-any-data to start this file from its "
                    "beginning\n", o->resume, o->train);
        else
            fprintf(stderr, "error: --resume %s was saved on another training file (%s); --train %s has %s: "
                    "give the same --train, or --resume-any-data to continue on this one\n", o->resume, saved,
                    o->train, now);
        return TSR_EINVAL;
    }
    t->keep_position = same && fits;
    printf("note: --resume-any-data: %s was saved on another training file (%s); continuing on --train %s "
           "(%s), %s\n", o->resume, st->data.size < 0 ? "unrecorded" : saved, o->train, now,
           fits ? "at the saved data position" : "from its first batch (the saved position does not fit it)");
    return 0;
}

/* Rank 0's data and outputs, checked before the model is built: the data
 * (train; val only when validated), the decode table, the outputs' paths,
 * the state against the run (the model was checked by model_config). */
static int check_data_root(trainer_t *t, const tsr_gpt2_train_state_info_t *state)
{
    const options_t *o = &t->opt;
    int rc = gpt2_open_loaders(t);
    if (!rc)
        rc = tsr_gpt2_tokenizer_read(o->tokenizer, &t->tok);
    if (!rc)
        rc = check_output_paths(o);
    if (!rc && o->resume)
        rc = check_resume(t, state);
    return rc;
}

/* The weights (rank 0): --load's, else llm.c's initialisation; none with
 * --resume (its state holds them). */
static int read_params(trainer_t *t, float **params)
{
    if (t->opt.resume)
        return 0;
    if (t->opt.load)
        return tsr_gpt2_checkpoint_read(t->opt.load, &t->cfg, params);
    return tsr_gpt2_init_alloc(&t->cfg, t->opt.seed, params);
}

/* The memory this process may use: the smallest of MemAvailable
 * (/proc/meminfo; else the physical memory) and a cgroup v2 limit; *what
 * names it. */
static double machine_memory(const char **what)
{
    double avail = 0;
    char line[256];
    FILE *f = fopen("/proc/meminfo", "re");
    while (f && fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
            avail = (double)kb * 1024;
            *what = "MemAvailable in /proc/meminfo";
            break;
        }
    }
    if (f)
        fclose(f);
    if (avail <= 0) {
        long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
        avail = pages > 0 && size > 0 ? (double)pages * size : 0;
        *what = "the physical memory";
    }
    f = fopen("/sys/fs/cgroup/memory.max", "re");
    unsigned long long limit;
    if (f && fscanf(f, "%llu", &limit) == 1 && (avail <= 0 || (double)limit < avail)) {
        avail = (double)limit;
        *what = "the cgroup's memory.max";
    }
    if (f)
        fclose(f);
    return avail;
}

/* Bytes the process holds besides the model's tiles: the runtime and its
 * libraries (StarPU, BLAS; measured 180 MB on CPUs with d2, more with CUDA:
 * 100 MB counted), the batches (the token files are read batch by batch:
 * their size does not count) and the flat parameters on rank 0: three
 * copies (weights, m and v) to resume a single-file state, one while the
 * final checkpoint is written; none for a sharded state (each rank reads and
 * writes its own tiles). The flat initial weights are freed once scattered,
 * before AdamW's state and the gradients are first written, so they do not
 * add to the peak (350M B1 T64 on 2 CPU workers: 6.13 GB of peak RSS; 7.31
 * GB estimated when they were counted, 5.89 GB now). */
static double host_bytes(const trainer_t *t)
{
    const options_t *o = &t->opt;
    double bytes = 100e6 + (double)o->B * o->T * 16;
    int copies = o->resume && t->resume_version < 3 ? 3 : o->write_ckpt ? 1 : 0;
    if (tsr_rank() == 0)
        bytes += (double)tsr_gpt2_num_params(&t->cfg) * 4 * copies;
    return bytes;
}

/* The run's memory, estimated before anything large is allocated, against
 * --max-memory or what the machine has. d2 T 64 on 2 CPU workers: 14.5 MB a
 * sample estimated, 15.4 MB of peak RSS measured (B 1, 8, 32, 96: 0.22,
 * 0.33, 0.67, 1.60 GB estimated, 0.35, 0.46, 0.83, 1.82 GB peak RSS): the
 * estimate stays below the peak (StarPU's per-tile data and packing buffers
 * are not counted), so a run it refuses cannot fit, and one that fits is
 * never refused; --max-memory overrides. Collective; 0 or TSR_ENOMEM
 * (said). */
static int check_memory(trainer_t *t)
{
    const options_t *o = &t->opt;
    int nsub = o->nsub ? o->nsub : tsr_gpt2_default_sub_batches(o->B);
    const tsr_gpt2_tiles_t *tiles = o->auto_tiles ? NULL : &o->tiles;
    tsr_gpt2_tiles_t def = o->tiles;
    if (tiles && !def.tok) { /* the default token tile decides whether split/merge buffers exist */
        tsr_gpt2_tiles_t d;
        tsr_gpt2_tiles_default(&t->cfg, o->B, o->T, &d);
        def.tok = d.tok;
        tiles = &def;
    }
    tsr_gpt2_memory_t mem;
    tsr_gpt2_memory_estimate(&t->cfg, o->B, o->T, nsub, tiles, tsr_size(), o->state_on_rank0, o->precision, &mem);
    double need = mem.total + host_bytes(t);
    const char *what = "--max-memory";
    /* a simulation allocates no tile (its kernels do not run): only
     * --max-memory limits it */
    double limit = o->max_memory > 0 ? o->max_memory : tsr_simulated() ? 0 : machine_memory(&what);
    t->mem_estimate = need;
    int over = limit > 0 && need > limit;
    if (over)
        fprintf(stderr,
                "error: rank %d would need about %.2f GB (parameters %.2f, AdamW m and v %.2f, gradients %.2f, "
                "activations for B %d x T %d %.2f, runtime and host copies %.2f), more than the %.2f GB of %s: "
                "lower -B or -T%s, or give --max-memory SIZE (e.g. 64G) to run anyway\n",
                tsr_rank(), need / 1e9, mem.params / 1e9, mem.adam / 1e9, mem.grads / 1e9, o->B, o->T,
                mem.acts / 1e9, (need - mem.total) / 1e9, limit / 1e9, what,
                tsr_size() > 1 ? "" : ", or share the batch over more ranks (mpirun)");
    return tsr_any(over) ? TSR_ENOMEM : 0;
}

/* Rank 0's model configuration on every rank (collective). */
static int share_config(trainer_t *t)
{
    if (tsr_size() == 1)
        return 0;
    int32_t c[6] = { t->cfg.maxT, t->cfg.V, t->cfg.Vp, t->cfg.L, t->cfg.NH, t->cfg.C };
    int rc = tsr_broadcast(c, sizeof c, 0);
    if (!rc)
        t->cfg = (tsr_gpt2_config_t){ c[0], c[1], c[2], c[3], c[4], c[5] };
    return rc;
}

/* The data and decode table rank 0 checked, read by the others, and rank
 * 0's choice of data position (collective). */
static int other_ranks_data(trainer_t *t)
{
    if (tsr_size() == 1)
        return 0;
    int rc = tsr_rank() == 0 ? 0 : gpt2_open_loaders(t);
    if (!rc && tsr_rank() != 0)
        rc = tsr_gpt2_tokenizer_read(t->opt.tokenizer, &t->tok);
    if (tsr_any(rc))
        return rc == TSR_ENOMEM ? rc : GPT2_BAD_INPUT;
    int32_t keep = t->keep_position;
    rc = tsr_broadcast(&keep, sizeof keep, 0);
    t->keep_position = keep;
    return rc;
}

/* Every input checked, before StarPU-heavy work: the batch split, the same
 * files on every rank, the model (rank 0), the memory the run needs (before
 * any data is read), then the data and outputs (rank 0 checks them, the
 * others read theirs), and last the weights (on rank 0 alone: 500 MB and
 * seconds of initialisation for 124M that the others would throw away).
 * 0, GPT2_BAD_INPUT on every rank after a message, or a TSR_E* code. */
static int check_inputs(trainer_t *t, float **params)
{
    int root = tsr_rank() == 0;
    tsr_gpt2_train_state_info_t state;
    if (check_batch_split(&t->opt))
        return GPT2_BAD_INPUT;
    int rc = same_inputs_on_every_rank(t);
    if (rc)
        return rc == 1 ? GPT2_BAD_INPUT : rc;
    rc = root ? model_config(t, &state) : 0;
    if (tsr_any(rc))
        return rc == TSR_ENOMEM ? rc : GPT2_BAD_INPUT;
    if ((rc = share_config(t)))
        return rc;
    if (check_memory(t))
        return GPT2_BAD_INPUT;
    rc = root ? check_data_root(t, &state) : 0;
    if (tsr_any(rc))
        return rc == TSR_ENOMEM ? rc : GPT2_BAD_INPUT;
    if ((rc = other_ranks_data(t)))
        return rc;
    rc = root ? read_params(t, params) : 0;
    return tsr_any(rc) ? (rc ? rc : TSR_EIO) : 0;
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

int gpt2_setup(trainer_t *t)
{
    const options_t *o = &t->opt;
    float *params = NULL;
    /* every input is checked first (check_inputs); rank 0 reads or makes the
     * weights and scatters them into the tiles. This is host-only work: the StarPU workers are
     * paused, else idle ones poll the cores it runs on (124M init: 3.7 s
     * alone, 10 s beside two polling workers on 2 cores). */
    tsr_pause();
    int rc = check_inputs(t, &params);
    if (rc) {
        tsr_resume();
        free(params);
        return rc;
    }
    if (!t->opt.nsub)
        t->opt.nsub = tsr_gpt2_default_sub_batches(o->B);
    rc = fill_tiles(t);
    if (!rc)
        rc = tsr_gpt2_model_create_dtype(&t->model, &t->cfg, o->B, o->T, o->nsub, &o->tiles, o->state_on_rank0,
                                         o->precision);
    if (!rc && tsr_rank() == 0)
        printf("model: L %d, C %d, NH %d, V %d (Vp %d), maxT %d, %zu parameters; B %d, T %d; tiles tok %d ch %d "
               "hid %d voc %d heads %d q %d k %d (%s%s); %d sub-batch(es), submitted by %d thread(s); memory %.2f GB (estimate, rank 0)\n", t->cfg.L, t->cfg.C, t->cfg.NH, t->cfg.V, t->cfg.Vp, t->cfg.maxT,
               tsr_gpt2_num_params(&t->cfg), o->B, o->T, o->tiles.tok, o->tiles.ch, o->tiles.hid, o->tiles.voc,
               o->tiles.heads, t->model.tiles.q, t->model.tiles.k,
               o->tiles.accum == TSR_REDUCTION_REDUX ? "redux" : "ordered",
               t->model.fused ? "" : ", split/merge",
               o->nsub, tsr_gpt2_submitting_threads(&t->model), t->mem_estimate / 1e9);
    if (!rc && tsr_rank() == 0 && o->precision == TSR_BFLOAT16)
        printf("precision: bf16 activations, parameters (forward, backward) and gradients; float32 master "
               "weights, AdamW state and loss\n");
    if (!rc && !o->resume) /* a resumed run's weights come from its state (load_state) */
        rc = tsr_gpt2_params_scatter(&t->model, tsr_rank() == 0 ? params : NULL);
    tsr_resume();
    free(params);
    t->inputs = malloc((size_t)o->B * o->T * sizeof(int));
    t->targets = malloc((size_t)o->B * o->T * sizeof(int));
    t->step_ms = calloc(o->steps + 1, sizeof(double));
    t->submit_ms = calloc(o->steps + 1, sizeof(double));
    t->submit_cpu_ms = calloc(o->steps + 1, sizeof(double));
    if (o->profile) {
        t->sent_from = calloc((size_t)tsr_size(), sizeof(double));
        t->sent_to = calloc((size_t)tsr_size(), sizeof(double));
    }
    t->step_kind = calloc(o->steps + 1, 1);
    if (!t->inputs || !t->targets || !t->step_ms || !t->submit_ms || !t->submit_cpu_ms || !t->step_kind)
        rc = rc ? rc : TSR_ENOMEM;
    t->gen_rng = 1337;
    t->last_loss = t->last_val = NAN;
    if (!rc && o->resume)
        rc = load_state(t, o->resume);
    if (!rc && o->csv && tsr_rank() == 0) {
        /* a resumed run appends to its CSV */
        t->csv = tsr_open_output(o->csv, t->step > 0); /* never blocks: a FIFO is refused */
        if (!t->csv) {
            tsr_log(TSR_LOG_ERROR, "--csv %s: %s", o->csv,
                    errno == EINVAL || errno == ENXIO ? "not a regular file (a FIFO or device is refused)"
                                                      : strerror(errno));
            rc = TSR_EIO;
        } else if (ftell(t->csv) == 0) {
            fprintf(t->csv, "step,loss,step_ms,tokens_per_ms,val_loss,timing\n");
        }
    }
    return tsr_any(rc) ? (rc ? rc : TSR_EIO) : 0;
}

int gpt2_finish(trainer_t *t)
{
    int rc = 0;
    if (t->opt.save)
        rc = gpt2_save_state(t, t->opt.save);
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

void gpt2_free(trainer_t *t)
{
    if (t->model.sub)
        tsr_gpt2_model_destroy(&t->model);
    tsr_gpt2_loader_free(&t->train);
    tsr_gpt2_loader_free(&t->val);
    tsr_gpt2_tokenizer_free(&t->tok);
    free(t->inputs);
    free(t->targets);
    free(t->step_ms);
    free(t->submit_ms);
    free(t->submit_cpu_ms);
    free(t->sent_from);
    free(t->sent_to);
    free(t->step_kind);
}

/* Each rank reads its own rows of every batch (the rows of its part when the
 * ranks split the batch evenly, else all of them). */
static int set_loader_rows(tsr_gpt2_loader_t *ld, int B)
{
    int size = tsr_size();
    if (size == 1 || B % size)
        return 0;
    return tsr_gpt2_loader_set_rows(ld, tsr_rank() * (B / size), B / size);
}

int gpt2_open_loaders(trainer_t *t)
{
    const options_t *o = &t->opt;
    int rc = tsr_gpt2_loader_open(&t->train, o->train, t->cfg.V, o->B, o->T, !o->no_shuffle, 42);
    if (!rc)
        rc = set_loader_rows(&t->train, o->B);
    if (!rc && o->val_every) /* the validation data only when it is read */
        rc = tsr_gpt2_loader_open(&t->val, o->val, t->cfg.V, o->B, o->T, 0, 42);
    if (!rc && o->val_every)
        rc = set_loader_rows(&t->val, o->B);
    return rc;
}

/* Every rank submits the same tasks, and which tasks a step has depends on
 * all of its tokens (the embedding gradients' columns): the ranks exchange
 * the rows they read, inputs and targets together. */
static int exchange_rows(trainer_t *t, const tsr_gpt2_loader_t *ld)
{
    size_t part = (size_t)ld->nrows * ld->T, BT = (size_t)ld->B * ld->T;
    int *mine = malloc(2 * part * sizeof(int)), *all = malloc(2 * BT * sizeof(int));
    int rc = mine && all ? 0 : TSR_ENOMEM;
    if (!tsr_any(rc)) {
        memcpy(mine, t->inputs + (size_t)ld->row0 * ld->T, part * sizeof(int));
        memcpy(mine + part, t->targets + (size_t)ld->row0 * ld->T, part * sizeof(int));
        rc = tsr_allgather(mine, all, 2 * part * sizeof(int));
        for (int r = 0; r < tsr_size() && !rc; r++) {
            memcpy(t->inputs + r * part, all + 2 * r * part, part * sizeof(int));
            memcpy(t->targets + r * part, all + (2 * r + 1) * part, part * sizeof(int));
        }
    } else {
        rc = rc ? rc : TSR_ENOMEM;
    }
    free(mine);
    free(all);
    return rc;
}

int gpt2_next_batch(trainer_t *t, tsr_gpt2_loader_t *ld)
{
    size_t sample;
    int rc = tsr_gpt2_loader_next(ld, t->inputs, t->targets, &sample);
    if (tsr_any(rc))
        return rc ? rc : TSR_EIO;
    return ld->nrows == ld->B ? 0 : exchange_rows(t, ld);
}
