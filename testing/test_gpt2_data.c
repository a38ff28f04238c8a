/* llm.c token files and batch order.  test_gpt2_data DATADIR TMPDIR */
#include "test_gpt2_common.h"

#include "tsr_check.h"
#include "tsr_core.h"
#include "tsr_gpt2_io.h"

static const char *tmpdir;
static char train[4096], val[4096];

static void test_files(void)
{
    tsr_gpt2_tokens_t t;
    CHECK_RC(tsr_gpt2_tokens_read(train, 50257, &t), 0);
    CHECK(t.ntok == 305260);
    tsr_gpt2_tokens_free(&t);
    CHECK_RC(tsr_gpt2_tokens_read(val, 50257, &t), 0);
    CHECK(t.ntok == 32768);
    static const uint16_t first[16] = {50256, 5962, 22307, 25, 198, 8421, 356, 5120,
                                       597,   2252, 11,    3285, 502, 2740, 13,  628};
    CHECK(t.tokens && memcmp(t.tokens, first, sizeof first) == 0);
    size_t eot = 0;
    for (size_t i = 0; i < t.ntok; i++)
        eot += t.tokens[i] == 50256;
    CHECK(eot == 809); /* data/README.md */
    tsr_gpt2_tokens_free(&t);
}

/* the token files read whole, to check what the loaders serve */
static tsr_gpt2_tokens_t train_tokens, val_tokens;

/* x, y are sample k of the one-file loader ld over tokens */
static int consistent_in(const tsr_gpt2_tokens_t *tokens, const tsr_gpt2_loader_t *ld, size_t k, const int *x,
                         const int *y)
{
    size_t bt = (size_t)ld->B * ld->T;
    const uint16_t *s = tokens->tokens + k * bt;
    for (size_t i = 0; i < bt; i++)
        if (x[i] != s[i] || y[i] != s[i + 1])
            return 0;
    return 1;
}

static int consistent(const tsr_gpt2_loader_t *ld, size_t k, const int *x, const int *y)
{
    return consistent_in(ld->nsamples == 1192 ? &train_tokens : &val_tokens, ld, k, x, y);
}

static void test_train_order(void)
{
    tsr_gpt2_loader_t ld;
    CHECK_RC(tsr_gpt2_loader_open(&ld, train, 50257, 4, 64, 1, 42), 0);
    CHECK(ld.nsamples == 1192);
    /* llmc_baseline.md: steps 0..11 of llm.c's train loader */
    static const size_t expect[12] = {408, 791, 914, 1057, 81, 450, 299, 907, 582, 321, 670, 134};
    int x[256], y[256], ok = 1, data_ok = 1;
    for (int s = 0; s < 12; s++) {
        size_t k;
        CHECK_RC(tsr_gpt2_loader_next(&ld, x, y, &k), 0);
        ok &= k == expect[s];
        data_ok &= consistent(&ld, k, x, y);
    }
    CHECK(ok);
    CHECK(data_ok);
    printf("train order, steps 0..11:");
    for (int s = 0; s < 12; s++)
        printf(" %zu", expect[s]);
    printf(" %s\n", ok ? "(match)" : "(MISMATCH)");

    /* the rest of epoch 0 visits every sample once; then a new epoch is drawn
     * from the same stream: identity + Fisher-Yates again */
    unsigned char *seen = calloc(1192, 1);
    for (int s = 0; s < 12; s++)
        seen[expect[s]] = 1;
    int once = 1;
    for (int s = 12; s < 1192; s++) {
        size_t k;
        tsr_gpt2_loader_next(&ld, NULL, NULL, &k);
        once &= !seen[k];
        seen[k] = 1;
    }
    CHECK(once);
    CHECK(ld.epoch == 0 && ld.pos == 1192);
    tsr_gpt2_rng_t r;
    tsr_gpt2_rng_seed(&r, 42);
    int *p0 = malloc(1192 * sizeof(int)), *p1 = malloc(1192 * sizeof(int));
    tsr_gpt2_identity_permutation(p0, 1192);
    tsr_gpt2_shuffle(p0, 1192, &r);
    tsr_gpt2_identity_permutation(p1, 1192);
    tsr_gpt2_shuffle(p1, 1192, &r);
    size_t k;
    CHECK_RC(tsr_gpt2_loader_next(&ld, x, y, &k), 0);
    CHECK(ld.epoch == 1 && ld.pos == 1);
    CHECK(k == (size_t)p1[0]);
    CHECK(memcmp(ld.perm, p1, 1192 * sizeof(int)) == 0); /* reshuffled ... */
    CHECK(memcmp(p0, p1, 1192 * sizeof(int)) != 0);      /* ... differently */
    CHECK(consistent(&ld, k, x, y));
    printf("epoch 1 starts with samples %d %d %d\n", p1[0], p1[1], p1[2]);
    free(p0);
    free(p1);
    free(seen);

    /* reset: back to the first order */
    CHECK_RC(tsr_gpt2_loader_reset(&ld), 0);
    CHECK_RC(tsr_gpt2_loader_next(&ld, NULL, NULL, &k), 0);
    CHECK(k == 408);
    tsr_gpt2_loader_free(&ld);
    tsr_gpt2_loader_free(&ld); /* twice is harmless */
}

/* llm.c's own loader (llmc/dataloader.h at commit f1e2ace, run on this file
 * with B 4, T 64, shuffling) served these samples at steps 0..2499 (three
 * epochs: 1192 samples each): FNV-1a 64 of the indices as little-endian
 * uint32, and a few of them */
static void test_llmc_order_2500(void)
{
    tsr_gpt2_loader_t ld;
    CHECK_RC(tsr_gpt2_loader_open(&ld, train, 50257, 4, 64, 1, 42), 0);
    uint64_t h = 0xcbf29ce484222325u;
    size_t k[2500];
    for (int s = 0; s < 2500; s++) {
        tsr_gpt2_loader_next(&ld, NULL, NULL, &k[s]);
        for (int b = 0; b < 4; b++) {
            h ^= (k[s] >> (8 * b)) & 0xff;
            h *= 0x100000001b3u;
        }
    }
    CHECK(k[1191] == 166 && k[1192] == 820 && k[1193] == 64 && k[1194] == 871);
    CHECK(k[2383] == 234 && k[2384] == 822 && ld.epoch == 2);
    CHECK(h == 0x4bce22eada2497ecu);
    printf("2500 steps: order hash %#llx (llm.c: 0x4bce22eada2497ec)\n", (unsigned long long)h);
    tsr_gpt2_loader_free(&ld);
}

/* save mid-epoch (and just before an epoch wrap), restore in a fresh loader:
 * the same batches follow */
static void test_resume(size_t skip)
{
    tsr_gpt2_loader_t a, b;
    CHECK_RC(tsr_gpt2_loader_open(&a, train, 50257, 4, 64, 1, 42), 0);
    CHECK_RC(tsr_gpt2_loader_open(&b, train, 50257, 4, 64, 1, 42), 0);
    for (size_t s = 0; s < skip; s++)
        tsr_gpt2_loader_next(&a, NULL, NULL, NULL);
    size_t nbytes = tsr_gpt2_loader_state_bytes(&a);
    unsigned char *img = malloc(nbytes);
    CHECK_RC(tsr_gpt2_loader_save_state(&a, img, nbytes), 0);
    /* b has advanced elsewhere: restoring must overwrite all of it */
    for (int s = 0; s < 1500; s++)
        tsr_gpt2_loader_next(&b, NULL, NULL, NULL);
    CHECK_RC(tsr_gpt2_loader_restore_state(&b, img, nbytes), 0);
    int xa[256], ya[256], xb[256], yb[256], same = 1;
    for (int s = 0; s < 40; s++) {
        size_t ka, kb;
        tsr_gpt2_loader_next(&a, xa, ya, &ka);
        tsr_gpt2_loader_next(&b, xb, yb, &kb);
        same &= ka == kb && memcmp(xa, xb, sizeof xa) == 0 && memcmp(ya, yb, sizeof ya) == 0;
    }
    CHECK(same);
    CHECK(a.epoch == b.epoch && a.pos == b.pos);

    /* corrupt or foreign images are refused and leave the loader unchanged */
    size_t pos = b.pos;
    capture_begin(tmpdir);
    CHECK_RC(tsr_gpt2_loader_restore_state(&b, img, nbytes - 1), TSR_EFORMAT);
    capture_end();
    unsigned char *bad = malloc(nbytes);
    memcpy(bad, img, nbytes);
    memcpy(bad + nbytes - 4, bad + nbytes - 8, 4); /* duplicate entry */
    capture_begin(tmpdir);
    CHECK_RC(tsr_gpt2_loader_restore_state(&b, bad, nbytes), TSR_EFORMAT);
    const char *msg = capture_end();
    CHECK(has_all(msg, "permutation", NULL));
    memcpy(bad, img, nbytes);
    bad[0] ^= 1;
    capture_begin(tmpdir);
    CHECK_RC(tsr_gpt2_loader_restore_state(&b, bad, nbytes), TSR_EFORMAT);
    capture_end();
    CHECK(b.pos == pos);
    tsr_gpt2_loader_t c;
    CHECK_RC(tsr_gpt2_loader_open(&c, train, 50257, 2, 64, 1, 42), 0); /* other B */
    capture_begin(tmpdir);
    CHECK_RC(tsr_gpt2_loader_restore_state(&c, img, nbytes), TSR_EFORMAT);
    capture_end();
    tsr_gpt2_loader_free(&c);
    free(bad);
    free(img);
    tsr_gpt2_loader_free(&a);
    tsr_gpt2_loader_free(&b);
}

static void test_sequential_and_val(void)
{
    tsr_gpt2_loader_t ld;
    /* val: unshuffled, batch i = tokens [256 i, 256 i + 257) */
    CHECK_RC(tsr_gpt2_loader_open(&ld, val, 50257, 4, 64, 0, 42), 0);
    CHECK(ld.nsamples == 127); /* (32768 - 1) / 256 */
    int x[256], y[256], ok = 1;
    for (size_t i = 0; i < 127; i++) {
        size_t k;
        tsr_gpt2_loader_next(&ld, x, y, &k);
        ok &= k == i && consistent(&ld, i, x, y);
    }
    CHECK(ok);
    CHECK(x[255] == val_tokens.tokens[126 * 256 + 255] && y[255] == val_tokens.tokens[127 * 256]);
    size_t k;
    tsr_gpt2_loader_next(&ld, x, y, &k); /* wraps to 0 */
    CHECK(k == 0 && ld.epoch == 1);
    CHECK(x[0] == 50256 && x[1] == 5962 && y[0] == 5962);
    CHECK_RC(tsr_gpt2_loader_sample(&ld, 3, x, y), 0);
    CHECK(consistent(&ld, 3, x, y));
    capture_begin(tmpdir);
    CHECK_RC(tsr_gpt2_loader_sample(&ld, 127, x, y), TSR_EINVAL);
    capture_end();
    tsr_gpt2_loader_free(&ld);
    /* no_shuffle on the train file: sequential */
    CHECK_RC(tsr_gpt2_loader_open(&ld, train, 50257, 4, 64, 0, 42), 0);
    ok = 1;
    for (size_t i = 0; i < 20; i++) {
        tsr_gpt2_loader_next(&ld, NULL, NULL, &k);
        ok &= k == i;
    }
    CHECK(ok);
    tsr_gpt2_loader_free(&ld);
}

/* a small token file: header {magic, version, n}, then tokens */
static void make_tokens(const char *name, int32_t magic, int32_t version, int32_t nhdr,
                        size_t nwrite, uint16_t bad_token, char *path)
{
    join(path, 4096, tmpdir, name);
    size_t bytes = 1024 + 2 * nwrite;
    unsigned char *buf = calloc(1, bytes);
    int32_t *h = (int32_t *)buf;
    h[0] = magic;
    h[1] = version;
    h[2] = nhdr;
    uint16_t *t = (uint16_t *)(buf + 1024);
    for (size_t i = 0; i < nwrite; i++)
        t[i] = (uint16_t)(i % 50000);
    if (bad_token && nwrite > 10)
        t[10] = bad_token;
    CHECK(write_file(path, buf, bytes) == 0);
    free(buf);
}

static void expect_open_fails(const char *path, const char *name, int code, const char *needle)
{
    tsr_gpt2_loader_t ld;
    capture_begin(tmpdir);
    int rc = tsr_gpt2_loader_open(&ld, path, 50257, 4, 64, 1, 42);
    const char *msg = capture_end();
    CHECK_RC(rc, code);
    check_message(msg, name, needle);
    CHECK(ld.perm == NULL && ld.shards == NULL);
    tsr_gpt2_loader_free(&ld); /* safe after a failed open */
}

static void test_bad_files(void)
{
    char p[4096];
    join(p, sizeof p, tmpdir, "tok_missing.bin");
    expect_open_fails(p, "tok_missing.bin", TSR_EIO, "cannot open");
    make_tokens("tok_ok.bin", 20240520, 1, 1000, 1000, 0, p);
    tsr_gpt2_loader_t ld;
    CHECK_RC(tsr_gpt2_loader_open(&ld, p, 50257, 4, 64, 1, 42), 0);
    CHECK(ld.nsamples == 3);
    tsr_gpt2_loader_free(&ld);
    join(p, sizeof p, tmpdir, "tok_header.bin");
    CHECK(write_file(p, "\x48\xd8\x34\x01", 4) == 0);
    expect_open_fails(p, "tok_header.bin", TSR_EFORMAT, "truncated");
    make_tokens("tok_truncated.bin", 20240520, 1, 1000, 999, 0, p);
    expect_open_fails(p, "tok_truncated.bin", TSR_EFORMAT, "truncated");
    make_tokens("tok_trailing.bin", 20240520, 1, 1000, 1001, 0, p);
    expect_open_fails(p, "tok_trailing.bin", TSR_EFORMAT, "trailing");
    make_tokens("tok_magic.bin", 20240326, 1, 1000, 1000, 0, p);
    expect_open_fails(p, "tok_magic.bin", TSR_EFORMAT, "bad magic");
    make_tokens("tok_version.bin", 20240520, 2, 1000, 1000, 0, p);
    expect_open_fails(p, "tok_version.bin", TSR_EFORMAT, "bad version");
    make_tokens("tok_count.bin", 20240520, 1, -5, 0, 0, p);
    expect_open_fails(p, "tok_count.bin", TSR_EFORMAT, "inconsistent header");
    /* token ids are checked as they are read */
    make_tokens("tok_badid.bin", 20240520, 1, 1000, 1000, 50257, p);
    CHECK_RC(tsr_gpt2_loader_open(&ld, p, 50257, 4, 64, 0, 42), 0);
    int x[256], y[256];
    capture_begin(tmpdir);
    CHECK_RC(tsr_gpt2_loader_sample(&ld, 0, x, y), TSR_EFORMAT);
    const char *msg = capture_end();
    CHECK(has_all(msg, "tok_badid.bin", "token id 50257 at position 10"));
    CHECK_RC(tsr_gpt2_loader_sample(&ld, 1, x, y), 0);
    tsr_gpt2_loader_free(&ld);
    make_tokens("tok_small.bin", 20240520, 1, 256, 256, 0, p); /* B*T + 1 = 257 needed */
    expect_open_fails(p, "tok_small.bin", TSR_ESHAPE, "too small for one batch");
    make_tokens("tok_one.bin", 20240520, 1, 257, 257, 0, p);   /* exactly one batch */
    CHECK_RC(tsr_gpt2_loader_open(&ld, p, 50257, 4, 64, 1, 42), 0);
    CHECK(ld.nsamples == 1);
    size_t k;
    for (int s = 0; s < 3; s++)
        CHECK_RC(tsr_gpt2_loader_next(&ld, NULL, NULL, &k), 0);
    CHECK(k == 0 && ld.epoch == 2);
    tsr_gpt2_loader_free(&ld);
    /* token ids checked only against the V given */
    make_tokens("tok_badid2.bin", 20240520, 1, 1000, 1000, 60000, p);
    tsr_gpt2_tokens_t t;
    CHECK_RC(tsr_gpt2_tokens_read(p, 0, &t), 0);
    tsr_gpt2_tokens_free(&t);
    capture_begin(tmpdir);
    CHECK_RC(tsr_gpt2_loader_open(&ld, train, 50257, 0, 64, 1, 42), TSR_EINVAL);
    capture_end();
}

/* Shards of the training file: tokens [first, first + n) of it as a token file. */
static void make_shard(const char *name, size_t first, size_t n, char *path)
{
    join(path, 4096, tmpdir, name);
    size_t bytes = 1024 + 2 * n;
    unsigned char *buf = calloc(1, bytes);
    int32_t *h = (int32_t *)buf;
    h[0] = 20240520;
    h[1] = 1;
    h[2] = (int32_t)n;
    memcpy(buf + 1024, train_tokens.tokens + first, 2 * n);
    CHECK(write_file(path, buf, bytes) == 0);
    free(buf);
}

/* Sample k of a loader over the three shards below, read from the training file. */
static const size_t shard_first[3] = { 0, 2000, 5001 }, shard_samples[3] = { 7, 11, 5 };
static int shard_sample_ok(size_t k, const int *x, const int *y)
{
    int s = 0;
    while (k >= shard_samples[s])
        k -= shard_samples[s++];
    const uint16_t *t = train_tokens.tokens + shard_first[s] + k * 256;
    for (int i = 0; i < 256; i++)
        if (x[i] != t[i] || y[i] != t[i + 1])
            return 0;
    return 1;
}

/* Three shards of 2000, 3001 and 1500 tokens (7, 11 and 5 samples of 4 x 64)
 * through a glob: llm.c's order over shards (the shard order drawn anew each
 * epoch, then each shard's sample order, from one stream), every sample
 * once an epoch, the tokens right, resume across a shard boundary. */
static void test_shards(void)
{
    char p[4096], pattern[4096];
    make_shard("shard_000.bin", 0, 2000, p);
    make_shard("shard_001.bin", 2000, 3001, p);
    make_shard("shard_002.bin", 5001, 1500, p);
    join(pattern, sizeof pattern, tmpdir, "shard_*.bin");
    tsr_gpt2_loader_t ld;
    CHECK_RC(tsr_gpt2_loader_open(&ld, pattern, 50257, 4, 64, 1, 42), 0);
    CHECK(ld.nshards == 3 && ld.nsamples == 23 && ld.max_samples == 11 && ld.ntok == 6501);
    /* the expected order, drawn as llm.c's DataLoader draws it */
    tsr_gpt2_rng_t r;
    tsr_gpt2_rng_seed(&r, 42);
    int order[3] = { 0, 1, 2 }, perm[11], ok = 1, data_ok = 1;
    size_t first_of[3] = { 0, 7, 18 };
    for (int epoch = 0; epoch < 3; epoch++) {
        tsr_gpt2_shuffle(order, 3, &r);
        unsigned char seen[23] = { 0 };
        for (int sp = 0; sp < 3; sp++) {
            int s = order[sp], n = (int)shard_samples[s];
            tsr_gpt2_identity_permutation(perm, n);
            tsr_gpt2_shuffle(perm, n, &r);
            for (int i = 0; i < n; i++) {
                int x[256], y[256];
                size_t k;
                CHECK_RC(tsr_gpt2_loader_next(&ld, x, y, &k), 0);
                ok &= k == first_of[s] + (size_t)perm[i] && !seen[k];
                seen[k] = 1;
                data_ok &= shard_sample_ok(k, x, y);
            }
        }
    }
    CHECK(ok && data_ok && ld.epoch == 2);
    /* resume across a shard boundary and an epoch */
    tsr_gpt2_loader_reset(&ld);
    for (int s = 0; s < 20; s++)
        tsr_gpt2_loader_next(&ld, NULL, NULL, NULL);
    size_t nbytes = tsr_gpt2_loader_state_bytes(&ld);
    CHECK(nbytes == tsr_gpt2_loader_state_bytes(&ld)); /* the same at every position */
    unsigned char *img = malloc(nbytes);
    CHECK_RC(tsr_gpt2_loader_save_state(&ld, img, nbytes), 0);
    tsr_gpt2_loader_t b;
    CHECK_RC(tsr_gpt2_loader_open(&b, pattern, 50257, 4, 64, 1, 42), 0);
    CHECK_RC(tsr_gpt2_loader_restore_state(&b, img, nbytes), 0);
    int same = 1;
    for (int s = 0; s < 30; s++) {
        size_t ka, kb;
        tsr_gpt2_loader_next(&ld, NULL, NULL, &ka);
        tsr_gpt2_loader_next(&b, NULL, NULL, &kb);
        same &= ka == kb;
    }
    CHECK(same && b.epoch == ld.epoch);
    /* a one-file loader refuses the image */
    tsr_gpt2_loader_t c;
    CHECK_RC(tsr_gpt2_loader_open(&c, train, 50257, 4, 64, 1, 42), 0);
    capture_begin(tmpdir);
    CHECK_RC(tsr_gpt2_loader_restore_state(&c, img, nbytes), TSR_EFORMAT);
    capture_end();
    tsr_gpt2_loader_free(&c);
    free(img);
    tsr_gpt2_loader_free(&b);
    /* without shuffling: shards in name order, samples in file order */
    tsr_gpt2_loader_free(&ld);
    CHECK_RC(tsr_gpt2_loader_open(&ld, pattern, 50257, 4, 64, 0, 42), 0);
    ok = 1;
    for (size_t i = 0; i < 30; i++) {
        size_t k;
        tsr_gpt2_loader_next(&ld, NULL, NULL, &k);
        ok &= k == i % 23;
    }
    CHECK(ok);
    tsr_gpt2_loader_free(&ld);
    /* no match; a shard too small, named */
    join(pattern, sizeof pattern, tmpdir, "nothing_*.bin");
    expect_open_fails(pattern, "nothing_*.bin", TSR_EIO, "no file matches");
    make_tokens("shard_003.bin", 20240520, 1, 200, 200, 0, p);
    join(pattern, sizeof pattern, tmpdir, "shard_*.bin");
    expect_open_fails(pattern, "shard_003.bin", TSR_ESHAPE, "too small for one batch");
    remove(p);
}

/* set_rows: the rows asked for, read from disk, the rest 0 */
static void test_rows(void)
{
    tsr_gpt2_loader_t a, b;
    CHECK_RC(tsr_gpt2_loader_open(&a, train, 50257, 4, 64, 1, 42), 0);
    CHECK_RC(tsr_gpt2_loader_open(&b, train, 50257, 4, 64, 1, 42), 0);
    CHECK_RC(tsr_gpt2_loader_set_rows(&b, 1, 2), 0);
    int xa[256], ya[256], xb[256], yb[256], ok = 1;
    for (int s = 0; s < 5; s++) {
        size_t ka, kb;
        tsr_gpt2_loader_next(&a, xa, ya, &ka);
        tsr_gpt2_loader_next(&b, xb, yb, &kb);
        ok &= ka == kb;
        for (int i = 0; i < 256; i++) {
            int mine = i >= 64 && i < 192;
            ok &= mine ? xb[i] == xa[i] && yb[i] == ya[i] : xb[i] == 0 && yb[i] == 0;
        }
    }
    CHECK(ok);
    capture_begin(tmpdir);
    CHECK_RC(tsr_gpt2_loader_set_rows(&b, 3, 2), TSR_EINVAL);
    capture_end();
    tsr_gpt2_loader_free(&a);
    tsr_gpt2_loader_free(&b);
}

/* A version 1 image (one file, before shards) still restores. */
static void test_state_version1(void)
{
    tsr_gpt2_loader_t a, b;
    CHECK_RC(tsr_gpt2_loader_open(&a, train, 50257, 4, 64, 1, 42), 0);
    CHECK_RC(tsr_gpt2_loader_open(&b, train, 50257, 4, 64, 1, 42), 0);
    for (int s = 0; s < 7; s++)
        tsr_gpt2_loader_next(&a, NULL, NULL, NULL);
    size_t v2 = tsr_gpt2_loader_state_bytes(&a), v1 = v2 - 4 - 2 * 8 - 4;
    unsigned char *img = malloc(v2), *old = malloc(v1);
    CHECK_RC(tsr_gpt2_loader_save_state(&a, img, v2), 0);
    /* v1: 6 u32 (version 1), ntok, nsamples, epoch, pos, last, RNG, permutation */
    size_t rng = 4 * (TSR_GPT2_MT_N + 2);
    memcpy(old, img, 24);
    old[4] = 1;
    memcpy(old + 24, img + 28, 16);                 /* ntok, nsamples */
    memcpy(old + 40, img + 28 + 24, 8);             /* epoch */
    memcpy(old + 48, img + 28 + 40, 16);            /* pos, last */
    memcpy(old + 64, img + 28 + 56, rng);           /* RNG */
    memcpy(old + 64 + rng, img + 28 + 56 + rng + 4, v1 - 64 - rng); /* after the one-entry shard order */
    CHECK_RC(tsr_gpt2_loader_restore_state(&b, old, v1), 0);
    size_t ka, kb;
    tsr_gpt2_loader_next(&a, NULL, NULL, &ka);
    tsr_gpt2_loader_next(&b, NULL, NULL, &kb);
    CHECK(ka == kb && b.pos == 8);
    free(img);
    free(old);
    tsr_gpt2_loader_free(&a);
    tsr_gpt2_loader_free(&b);
}

int main(int argc, char **argv)
{
    tmpdir = test_tmpdir(argc, argv);
    join(train, sizeof train, argv[1], "tiny_shakespeare_train.bin");
    join(val, sizeof val, argv[1], "tiny_shakespeare_val.bin");
    CHECK_RC(tsr_gpt2_tokens_read(train, 50257, &train_tokens), 0);
    CHECK_RC(tsr_gpt2_tokens_read(val, 50257, &val_tokens), 0);
    test_files();
    test_train_order();
    test_llmc_order_2500();
    test_resume(5);    /* mid-epoch */
    test_resume(1180); /* the following 40 batches cross into epoch 1 */
    test_resume(1192); /* saved exactly at the end of an epoch */
    test_resume(0);    /* before the first batch */
    test_sequential_and_val();
    test_bad_files();
    test_shards();
    test_rows();
    test_state_version1();
    tsr_gpt2_tokens_free(&train_tokens);
    tsr_gpt2_tokens_free(&val_tokens);
    return tsr_check_report("test_gpt2_data");
}
