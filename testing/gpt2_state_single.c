/* Writes a sharded training state (a manifest and its shard files) as one
 * single-file state of format version 2, the format tsr_gpt2 wrote before
 * its states were sharded: testing/check_gpt2_state_shards.sh resumes from
 * it to check that such files are still read.
 *   gpt2_state_single MANIFEST TRAIN_FILE OUTPUT
 * TRAIN_FILE: the training file the state was saved on (its loader carries
 * the data position over). Plain C (tsr_gpt2io); exit 0, or 1 with a
 * message. */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpt2_train_state.h"
#include "tsr_core.h"

/* The flat (checkpoint-order) offset of slot s: wte, wpe, lnfw, lnfb, then
 * the 12 tensors of each layer (gpt2_model.c's slots). */
static size_t slot_offset(const tsr_gpt2_config_t *cfg, int s)
{
    static const int global[4] = { TSR_GPT2_WTE, TSR_GPT2_WPE, TSR_GPT2_LNFW, TSR_GPT2_LNFB };
    size_t sizes[TSR_GPT2_NUM_PARAM_TENSORS], offsets[TSR_GPT2_NUM_PARAM_TENSORS];
    tsr_gpt2_param_sizes(cfg, sizes);
    tsr_gpt2_param_offsets(cfg, offsets);
    if (s < 4)
        return offsets[global[s]];
    int layer = (s - 4) / 12, tensor = TSR_GPT2_LN1W + (s - 4) % 12;
    return offsets[tensor] + (size_t)layer * (sizes[tensor] / cfg->L);
}

/* Every tile of kind k into the flat array out. */
static int read_kind(const tsr_gpt2_shard_layout_t *l, const tsr_gpt2_config_t *cfg, FILE **files, int k, float *out)
{
    for (int s = 0; s < l->nslots; s++) {
        const tsr_gpt2_shard_slot_t *sl = &l->slots[s];
        float *slot = out + slot_offset(cfg, s);
        for (int i = 0; i * sl->rtile < sl->rows; i++)
            for (int j = 0; j * sl->ctile < sl->cols; j++) {
                const tsr_gpt2_shard_record_t *r = &l->records[tsr_gpt2_shard_record(l, k, s, i, j)];
                int r0 = i * sl->rtile, c0 = j * sl->ctile;
                int rows = sl->rows - r0 < sl->rtile ? sl->rows - r0 : sl->rtile;
                int cols = sl->cols - c0 < sl->ctile ? sl->cols - c0 : sl->ctile;
                if (fseek(files[r->file], (long)r->offset, SEEK_SET) != 0)
                    return TSR_EIO;
                for (int c = 0; c < cols; c++) /* a column of the tile into the slot's column-major matrix */
                    if (fread(slot + (size_t)(c0 + c) * sl->rows + r0, sizeof(float), (size_t)rows, files[r->file]) !=
                        (size_t)rows)
                        return TSR_EIO;
            }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s MANIFEST TRAIN_FILE OUTPUT\n", argv[0]);
        return 2;
    }
    tsr_gpt2_train_state_info_t info;
    tsr_gpt2_shard_layout_t l;
    void *ls = NULL;
    int rc = tsr_gpt2_train_state_manifest_read(argv[1], &info, &l, &ls);
    if (rc)
        return 1;
    char *copy = strdup(argv[1]);
    const char *dir = dirname(copy);
    FILE **files = calloc((size_t)l.nfiles, sizeof *files);
    for (int f = 0; files && f < l.nfiles && !rc; f++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, l.names[f]);
        if (!(files[f] = fopen(path, "rb"))) {
            fprintf(stderr, "cannot open %s\n", path);
            rc = TSR_EIO;
        }
    }
    size_t np = tsr_gpt2_num_params(&info.cfg);
    tsr_gpt2_train_state_t st = { info.step, info.gen_rng, malloc(np * 4), malloc(np * 4), malloc(np * 4), info.data };
    float *kinds[3] = { st.params, st.m, st.v };
    rc = rc || !files || !st.params || !st.m || !st.v ? TSR_ENOMEM : 0;
    for (int k = 0; !rc && k < TSR_GPT2_SHARD_KINDS; k++)
        rc = read_kind(&l, &info.cfg, files, k, kinds[k]);
    tsr_gpt2_loader_t ld;
    memset(&ld, 0, sizeof ld);
    if (!rc)
        rc = tsr_gpt2_loader_open(&ld, argv[2], info.cfg.V, info.B, info.T, 1, 42);
    if (!rc)
        rc = tsr_gpt2_loader_restore_state(&ld, ls, info.loader_bytes);
    if (!rc)
        rc = tsr_gpt2_train_state_write(argv[3], &info.cfg, info.B, info.T, &st, &ld);
    if (rc)
        fprintf(stderr, "%s: %s\n", argv[0], tsr_strerror(rc));
    tsr_gpt2_loader_free(&ld);
    for (int f = 0; files && f < l.nfiles; f++)
        if (files[f])
            fclose(files[f]);
    free(files);
    free(copy);
    free(ls);
    tsr_gpt2_train_state_free(&st);
    tsr_gpt2_shard_layout_free(&l);
    return rc ? 1 : 0;
}
