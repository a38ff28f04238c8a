/* Mutation fuzzing of the GPT-2 file loaders: llm.c checkpoints, token files
 * (and the batch loader on them), the GPT-2 decode table, llm.c debug states
 * and tsr_gpt2's training states (single files and sharded states'
 * manifests). Each iteration mutates a seed file (bundled,
 * or written here for the training state; the unmutated seed must load) (byte flips, header integers
 * set to edge values, truncation, appended bytes), writes it, loads it and
 * checks that the loader returned 0 or a TSR_E* code; a crash or hang fails
 * the run. Deterministic (xorshift from SEED): a failure names its iteration
 * and keeps the file as WORKDIR/fuzz_fail_<loader>.bin.
 *
 *   fuzz_gpt2_loaders DATA_DIR WORKDIR ITERATIONS [SEED]
 *   (CI: 5000 iterations per loader; the long run: 1000000, WORKDIR on tmpfs) */
#include "test_gpt2_common.h" /* read_file, write_file */
#include "tsr_core.h"
#include "gpt2_data.h"
#include "gpt2_debug_state.h"
#include "gpt2_model_io.h"
#include "gpt2_tokenizer.h"
#include "gpt2_train_state.h"
#include "tsr_fuzz_random.h"


/* One to eight mutations of buf (capacity size + 4096); returns the new size. */
static size_t mutate(unsigned char *buf, size_t size)
{
    static const int32_t edges[] = { 0, 1, -1, 2, 3, 7, 64, 255, 256, 1024, 50257, 50304, 65535, 65536,
                                     1 << 20, 1 << 30, INT32_MAX, INT32_MIN, -2, 20240326, 20240327 };
    int n = 1 + (int)(next_random() % 8);
    for (int k = 0; k < n && size > 0; k++) {
        uint64_t r = next_random();
        switch (r % 5) {
        case 0: /* flip a byte anywhere */
            buf[(r >> 8) % size] ^= (unsigned char)(1 + (r >> 40) % 255);
            break;
        case 1: /* a header integer (first 256 int32) gets an edge value */
        case 2: {
            size_t slots = size / 4 < 256 ? size / 4 : 256;
            if (slots) {
                int32_t v = edges[(r >> 8) % (sizeof edges / sizeof edges[0])];
                memcpy(buf + 4 * ((r >> 20) % slots), &v, 4);
            }
            break;
        }
        case 3: /* truncate */
            size = (r >> 8) % (size + 1);
            break;
        default: { /* append up to 4 KiB of random bytes, last (the buffer has 4 KiB spare) */
            size_t extra = 1 + (r >> 8) % 4096;
            for (size_t i = 0; i < extra; i++)
                buf[size + i] = (unsigned char)next_random();
            size += extra;
            n = k + 1;
        }
        }
    }
    return size;
}

typedef int (*load_fn)(const char *path);

static int load_checkpoint(const char *path)
{
    tsr_gpt2_config_t cfg;
    float *params = NULL;
    int rc = tsr_gpt2_checkpoint_read(path, &cfg, &params);
    free(params);
    return rc;
}

static int load_tokens(const char *path)
{
    tsr_gpt2_loader_t ld;
    int rc = tsr_gpt2_loader_open(&ld, path, 50257, 2, 8, 1, 42);
    int in[16], tg[16];
    size_t sample;
    for (int i = 0; !rc && i < 4; i++)
        rc = tsr_gpt2_loader_next(&ld, in, tg, &sample);
    tsr_gpt2_loader_free(&ld);
    return rc;
}

static int load_tokenizer(const char *path)
{
    tsr_gpt2_tokenizer_t tok;
    int rc = tsr_gpt2_tokenizer_read(path, &tok);
    if (!rc)
        tsr_gpt2_tokenizer_free(&tok);
    return rc;
}

static int load_debug_state(const char *path)
{
    tsr_gpt2_config_t cfg;
    tsr_gpt2_debug_state_t st;
    int rc = tsr_gpt2_config_preset("micro", &cfg);
    if (!rc)
        rc = tsr_gpt2_debug_state_read(path, &cfg, &st);
    if (!rc)
        tsr_gpt2_debug_state_free(&st);
    return rc;
}

/* The training state's seed: a tiny model (the loader state, 2048 samples of
 * the val tokens, is most of the file, so random flips land in it). */
static const tsr_gpt2_config_t tiny_cfg = { 8, 16, 16, 1, 1, 4 };
static char val_tokens[4096];

static int open_val_loader(tsr_gpt2_loader_t *ld) { return tsr_gpt2_loader_open(ld, val_tokens, 50257, 2, 8, 1, 42); }

static int write_train_state_seed(const char *path)
{
    size_t np = tsr_gpt2_num_params(&tiny_cfg);
    tsr_gpt2_train_state_t st = { 3, 1234567, calloc(np, sizeof(float)), calloc(np, sizeof(float)),
                                  calloc(np, sizeof(float)), { 0, 0, 0 } };
    tsr_gpt2_loader_t ld;
    int in[16], tg[16], rc = st.params && st.m && st.v ? open_val_loader(&ld) : TSR_ENOMEM;
    if (!rc)
        rc = tsr_gpt2_file_id(val_tokens, &st.data);
    size_t sample;
    for (int i = 0; !rc && i < 5; i++) /* a position mid-epoch */
        rc = tsr_gpt2_loader_next(&ld, in, tg, &sample);
    if (!rc)
        rc = tsr_gpt2_train_state_write(path, &tiny_cfg, 2, 8, &st, &ld);
    tsr_gpt2_loader_free(&ld);
    tsr_gpt2_train_state_free(&st);
    return rc;
}

static int load_train_state(const char *path)
{
    tsr_gpt2_loader_t ld;
    tsr_gpt2_train_state_t st;
    int in[16], tg[16], rc = open_val_loader(&ld);
    size_t sample;
    if (!rc)
        rc = tsr_gpt2_train_state_read(path, &tiny_cfg, 2, 8, &ld, &st);
    if (!rc) { /* the restored loader must work */
        rc = tsr_gpt2_loader_next(&ld, in, tg, &sample);
        tsr_gpt2_train_state_free(&st);
    }
    tsr_gpt2_loader_free(&ld);
    return rc;
}

/* A sharded state's manifest for the tiny model (one shard file, named but
 * not read: the manifest's own checks): slot 0 holds all but one parameter
 * per other slot, each slot one tile. */
static int write_manifest_seed(const char *path)
{
    size_t np = tsr_gpt2_num_params(&tiny_cfg);
    int nslots = 4 + 12 * tiny_cfg.L;
    tsr_gpt2_shard_slot_t slots[64];
    for (int s = 0; s < nslots; s++)
        slots[s] = (tsr_gpt2_shard_slot_t){ s ? 1 : (int)np - (nslots - 1), 1, s ? 1 : (int)np - (nslots - 1), 1 };
    tsr_gpt2_shard_layout_t l;
    tsr_gpt2_train_state_t st = { 3, 1234567, NULL, NULL, NULL, { 0, 0, 0 } };
    tsr_gpt2_loader_t ld;
    int rc = tsr_gpt2_shard_layout_init(&l, nslots, slots, 1);
    if (rc)
        return rc;
    l.generation = 42;
    l.file_bytes[0] = sizeof(tsr_gpt2_shard_header_t);
    snprintf(l.names[0], TSR_GPT2_SHARD_NAME, "seed.shard.r0");
    for (size_t r = 0; r < l.nrecords; r++) {
        int s = (int)(r % l.per_kind);
        l.records[r].offset = l.file_bytes[0];
        l.file_bytes[0] += (uint64_t)slots[s].rows * sizeof(float);
    }
    size_t lb = 0;
    void *ls = NULL;
    rc = open_val_loader(&ld);
    if (!rc)
        rc = tsr_gpt2_file_id(val_tokens, &st.data);
    if (!rc) {
        lb = tsr_gpt2_loader_state_bytes(&ld);
        rc = (ls = malloc(lb)) ? tsr_gpt2_loader_save_state(&ld, ls, lb) : TSR_ENOMEM;
    }
    if (!rc)
        rc = tsr_gpt2_train_state_manifest_write(path, &tiny_cfg, 2, 8, &st, &l, ls, lb);
    free(ls);
    tsr_gpt2_loader_free(&ld);
    tsr_gpt2_shard_layout_free(&l);
    return rc;
}

static int load_manifest(const char *path)
{
    tsr_gpt2_train_state_info_t info;
    tsr_gpt2_shard_layout_t l;
    void *ls;
    int rc = tsr_gpt2_train_state_manifest_read(path, &info, &l, &ls);
    if (!rc) {
        tsr_gpt2_shard_layout_free(&l);
        free(ls);
    }
    return rc;
}

static const struct {
    const char *name, *seed_file; /* seed_file in DATA_DIR, or NULL: written by make_seed in WORKDIR */
    int (*make_seed)(const char *path);
    load_fn load;
} loaders[] = {
    { "checkpoint", "micro_init.bin", NULL, load_checkpoint },
    { "tokens", "tiny_shakespeare_val.bin", NULL, load_tokens },
    { "tokenizer", "gpt2_tokenizer.bin", NULL, load_tokenizer },
    { "debug_state", "micro_debug_state.bin", NULL, load_debug_state },
    { "train_state", NULL, write_train_state_seed, load_train_state },
    { "train_manifest", NULL, write_manifest_seed, load_manifest },
};

int main(int argc, char **argv)
{
    if (argc < 4 || atol(argv[3]) < 1) {
        fprintf(stderr, "usage: %s DATA_DIR WORKDIR ITERATIONS [SEED]\n", argv[0]);
        return 2;
    }
    const char *data = argv[1], *work = argv[2];
    long iterations = atol(argv[3]);
    uint64_t seed = argc > 4 ? strtoull(argv[4], NULL, 10) : 1;
    char path[4096], fuzz_path[4096];
    snprintf(fuzz_path, sizeof fuzz_path, "%s/fuzz.bin", work);
    snprintf(val_tokens, sizeof val_tokens, "%s/tiny_shakespeare_val.bin", data);
    int failed = 0, verbose = tsr_get_verbose();
    for (size_t l = 0; l < sizeof loaders / sizeof loaders[0]; l++) {
        size_t seed_size;
        if (loaders[l].seed_file)
            snprintf(path, sizeof path, "%s/%s", data, loaders[l].seed_file);
        else
            snprintf(path, sizeof path, "%s/seed_%s.bin", work, loaders[l].name);
        if (!loaders[l].seed_file && loaders[l].make_seed(path) != 0) {
            fprintf(stderr, "error: cannot write the seed %s\n", path);
            return 2;
        }
        if (loaders[l].load(path) != 0) { /* a seed that is refused would test nothing */
            fprintf(stderr, "error: the unmutated seed %s is refused by the %s loader\n", path, loaders[l].name);
            return 2;
        }
        tsr_set_verbose(-1); /* the loaders' messages for every bad file: not wanted here */
        unsigned char *orig = read_file(path, &seed_size), *buf = orig ? malloc(seed_size + 4096) : NULL;
        if (!orig || !buf) {
            fprintf(stderr, "error: cannot read %s\n", path);
            return 2;
        }
        rng_state = seed * 0x9E3779B97F4A7C15ull + l + 1;
        long accepted = 0;
        for (long i = 0; i < iterations; i++) {
            memcpy(buf, orig, seed_size);
            size_t size = mutate(buf, seed_size);
            if (write_file(fuzz_path, buf, size) != 0) {
                fprintf(stderr, "error: cannot write %s\n", fuzz_path);
                return 2;
            }
            int rc = loaders[l].load(fuzz_path);
            accepted += rc == 0;
            if (rc > 0 || rc < TSR_EALREADY) { /* neither 0 nor a TSR_E* code */
                char kept[4200];
                snprintf(kept, sizeof kept, "%s/fuzz_fail_%s.bin", work, loaders[l].name);
                rename(fuzz_path, kept);
                fprintf(stderr, "FAILED %s iteration %ld: return code %d (file kept as %s)\n", loaders[l].name, i,
                        rc, kept);
                failed++;
                break;
            }
        }
        tsr_set_verbose(verbose);
        printf("%s: %ld mutated files, %ld accepted, the rest refused with an error\n", loaders[l].name, iterations,
               accepted);
        free(orig);
        free(buf);
    }
    unlink(fuzz_path);
    printf("fuzz_gpt2_loaders: %d passed, %d failed\n", (int)(sizeof loaders / sizeof loaders[0]) - failed, failed);
    return failed ? 1 : 0;
}
