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

static int consistent(const tsr_gpt2_loader_t *ld, size_t k, const int *x, const int *y)
{
    size_t bt = (size_t)ld->B * ld->T;
    const uint16_t *s = ld->data.tokens + k * bt;
    for (size_t i = 0; i < bt; i++)
        if (x[i] != s[i] || y[i] != s[i + 1])
            return 0;
    return 1;
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
    CHECK(x[255] == ld.data.tokens[126 * 256 + 255] && y[255] == ld.data.tokens[127 * 256]);
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
    CHECK(ld.perm == NULL && ld.data.tokens == NULL);
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
    make_tokens("tok_badid.bin", 20240520, 1, 1000, 1000, 50257, p);
    expect_open_fails(p, "tok_badid.bin", TSR_EFORMAT, "token id 50257 at position 10");
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

int main(int argc, char **argv)
{
    tmpdir = test_tmpdir(argc, argv);
    join(train, sizeof train, argv[1], "tiny_shakespeare_train.bin");
    join(val, sizeof val, argv[1], "tiny_shakespeare_val.bin");
    test_files();
    test_train_order();
    test_llmc_order_2500();
    test_resume(5);    /* mid-epoch */
    test_resume(1180); /* the following 40 batches cross into epoch 1 */
    test_resume(1192); /* saved exactly at the end of an epoch */
    test_resume(0);    /* before the first batch */
    test_sequential_and_val();
    test_bad_files();
    return tsr_check_report("test_gpt2_data");
}
