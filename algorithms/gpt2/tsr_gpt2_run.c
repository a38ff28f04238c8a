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

/* Gathers the state on rank 0, which writes it (collective). */
int gpt2_save_state(trainer_t *t, const char *path)
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

/* The model's dimensions on every rank, from --load's header or the preset:
 * nothing large read or allocated. */
static int run_config(trainer_t *t)
{
    return t->opt.load ? tsr_gpt2_checkpoint_read_config(t->opt.load, &t->cfg)
                       : tsr_gpt2_config_preset(t->opt.model, &t->cfg);
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
 * 100 MB counted), the flat parameters on rank 0 (three copies: weights, m
 * and v, while a state is saved) and the token files and batches. */
static double host_bytes(const trainer_t *t)
{
    const options_t *o = &t->opt;
    double bytes = 100e6 + (double)o->B * o->T * 16;
    if (tsr_rank() == 0)
        bytes += (double)tsr_gpt2_num_params(&t->cfg) * 4 * (o->save ? 3 : 1);
    struct stat st;
    const char *files[] = { o->train, o->val };
    for (int i = 0; i < 2; i++)
        if (files[i] && stat(files[i], &st) == 0 && S_ISREG(st.st_mode))
            bytes += (double)st.st_size * 3; /* the tokens and the sample order */
    return bytes;
}

/* The run's memory, estimated before anything large is allocated, against
 * --max-memory or what the machine has. d2 T 64 on 2 CPU workers: 14.5 MB a
 * sample estimated, 15.4 MB of peak RSS measured (B 1, 8, 32, 96: 0.25,
 * 0.35, 0.70, 1.63 GB estimated, 0.35, 0.46, 0.83, 1.82 GB peak RSS): the
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
    double limit = o->max_memory > 0 ? o->max_memory : machine_memory(&what);
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

int gpt2_setup(trainer_t *t)
{
    const options_t *o = &t->opt;
    float *params = NULL;
    /* every rank reads the (small) config; rank 0 reads or makes the weights
     * and scatters them into the tiles. This is host-only work: the StarPU workers are
     * paused, else idle ones poll the cores it runs on (124M init: 3.7 s
     * alone, 10 s beside two polling workers on 2 cores). */
    tsr_pause();
    int rc = run_config(t);
    if (!rc)
        rc = check_memory(t);
    if (!rc)
        rc = load_model_params(t, &params);
    if (!rc)
        rc = gpt2_open_loaders(t);
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
               "hid %d voc %d heads %d q %d k %d (%s%s); %d sub-batch(es); memory %.2f GB (estimate, rank 0)\n", t->cfg.L, t->cfg.C, t->cfg.NH, t->cfg.V, t->cfg.Vp, t->cfg.maxT,
               tsr_gpt2_num_params(&t->cfg), o->B, o->T, o->tiles.tok, o->tiles.ch, o->tiles.hid, o->tiles.voc,
               o->tiles.heads, t->model.tiles.q, t->model.tiles.k,
               o->tiles.accum == TSR_REDUCTION_REDUX ? "redux" : "ordered",
               t->model.fused ? "" : ", split/merge",
               o->nsub, t->mem_estimate / 1e9);
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
        rc = tsr_gpt2_loader_open(&t->val, o->val, t->cfg.V, o->B, o->T, 0, 42);
    if (!rc)
        rc = set_loader_rows(&t->train, o->B);
    if (!rc)
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
