/* tsr_gpt2's run: the model, data and outputs set up from the options,
 * the training state files (--save / --resume), the files written at the end. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tsr_gpt2.h"
#include "tsr_files.h"

/* Gathers the state on rank 0, which writes it (collective). */
int gpt2_save_state(trainer_t *t, const char *path)
{
    size_t np = tsr_gpt2_num_params(&t->cfg);
    int root = tsr_rank() == 0, rc = 0;
    tsr_gpt2_train_state_t st = { t->step, t->gen_rng, NULL, NULL, NULL, { 0, 0, 0 } };
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
    if (!rc && root && tsr_gpt2_file_id(t->train.data.path, &st.data) != 0) {
        tsr_log(TSR_LOG_ERROR, "cannot read the training file %s again to record it", t->train.data.path);
        rc = TSR_EIO;
    }
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
               o->tiles.accum == TSR_REDUCTION_REDUX ? "redux" : "ordered",
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
