/* GPT-2 config, parameter layout, llm.c checkpoints (read, atomic write,
 * every malformed-file error).  test_gpt2_model_io DATADIR TMPDIR */
#include "test_gpt2_common.h"

#include <dirent.h>

#include "tsr_check.h"
#include "tsr_core.h"
#include "tsr_files.h"
#include "tsr_gpt2_io.h"

static const char *tmpdir;

static void test_presets(void)
{
    tsr_gpt2_config_t c;
    CHECK_RC(tsr_gpt2_config_preset("124M", &c), 0);
    CHECK(c.maxT == 1024 && c.V == 50257 && c.Vp == 50304 && c.L == 12 && c.NH == 12 && c.C == 768);
    CHECK(tsr_gpt2_num_params(&c) == 124475904);
    /* llm.c's d24, d36, d48 (train_gpt2.cu): layers, heads, channels; maxT 1024 */
    const struct { const char *name; int L, NH, C; size_t np; } larger[] = {
        { "350M", 24, 16, 1024, 354871296 }, { "774M", 36, 20, 1280, 774090240 },
        { "1558M", 48, 25, 1600, 1557686400 } };
    for (size_t i = 0; i < sizeof larger / sizeof larger[0]; i++) {
        CHECK_RC(tsr_gpt2_config_preset(larger[i].name, &c), 0);
        CHECK(c.maxT == 1024 && c.V == 50257 && c.Vp == 50304 && c.L == larger[i].L && c.NH == larger[i].NH &&
              c.C == larger[i].C);
        CHECK(tsr_gpt2_num_params(&c) == larger[i].np);
    }
    CHECK_RC(tsr_gpt2_config_preset("d2", &c), 0);
    CHECK(c.maxT == 64 && c.V == 50257 && c.Vp == 50304 && c.L == 2 && c.NH == 4 && c.C == 128);
    CHECK(tsr_gpt2_num_params(&c) == 6843904);
    CHECK_RC(tsr_gpt2_config_preset("micro", &c), 0);
    CHECK(c.maxT == 32 && c.V == 500 && c.Vp == 512 && c.L == 2 && c.NH == 4 && c.C == 64);
    CHECK(tsr_gpt2_num_params(&c) == 134912);
    capture_begin(tmpdir);
    int rc = tsr_gpt2_config_preset("gpt5", &c);
    const char *msg = capture_end();
    CHECK_RC(rc, TSR_EINVAL);
    CHECK(has_all(msg, "gpt5", "124M"));

    /* sizes and offsets in checkpoint order (micro: C 64, L 2, Vp 512, maxT 32) */
    CHECK_RC(tsr_gpt2_config_preset("micro", &c), 0);
    size_t sz[TSR_GPT2_NUM_PARAM_TENSORS], off[TSR_GPT2_NUM_PARAM_TENSORS];
    tsr_gpt2_param_sizes(&c, sz);
    tsr_gpt2_param_offsets(&c, off);
    const size_t expect[TSR_GPT2_NUM_PARAM_TENSORS] = {
        512 * 64, 32 * 64, 2 * 64, 2 * 64, 2 * 192 * 64, 2 * 192, 2 * 64 * 64, 2 * 64,
        2 * 64, 2 * 64, 2 * 256 * 64, 2 * 256, 2 * 64 * 256, 2 * 64, 64, 64};
    int ok = 1;
    size_t o = 0;
    for (int i = 0; i < TSR_GPT2_NUM_PARAM_TENSORS; i++) {
        ok &= sz[i] == expect[i] && off[i] == o;
        o += sz[i];
    }
    CHECK(ok);
    CHECK(strcmp(tsr_gpt2_param_name(TSR_GPT2_WTE), "wte") == 0);
    CHECK(strcmp(tsr_gpt2_param_name(TSR_GPT2_FCPROJW), "fcprojw") == 0);
    CHECK(strcmp(tsr_gpt2_param_name(TSR_GPT2_LNFB), "lnfb") == 0);
    CHECK(strcmp(tsr_gpt2_param_name(16), "?") == 0);

    /* validation */
    tsr_gpt2_config_t b = c;
    b.NH = 5;
    capture_begin(tmpdir);
    rc = tsr_gpt2_config_validate(&b, "cfgtest");
    msg = capture_end();
    CHECK_RC(rc, TSR_EINVAL);
    CHECK(has_all(msg, "cfgtest", "multiple"));
    b = c;
    b.Vp = 499;
    capture_begin(tmpdir);
    CHECK_RC(tsr_gpt2_config_validate(&b, NULL), TSR_EINVAL);
    msg = capture_end();
    CHECK(has_all(msg, "Vp", NULL));
    b = c;
    b.L = 0;
    capture_begin(tmpdir);
    CHECK_RC(tsr_gpt2_config_validate(&b, NULL), TSR_EINVAL);
    capture_end();
    b = c;
    b.C = 1 << 30;
    b.NH = 1;
    capture_begin(tmpdir);
    CHECK_RC(tsr_gpt2_config_validate(&b, NULL), TSR_EINVAL); /* too large */
    capture_end();
    CHECK_RC(tsr_gpt2_config_validate(&c, NULL), 0);
}

/* no "*.tmp.*" file left in tmpdir */
static int no_temp_files(void)
{
    DIR *d = opendir(tmpdir);
    if (!d)
        return 0;
    struct dirent *e;
    int found = 0;
    while ((e = readdir(d)))
        found |= strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return !found;
}

static void test_roundtrip(const char *datadir)
{
    char src[4096], dst[4096];
    join(src, sizeof src, datadir, "micro_init.bin");
    join(dst, sizeof dst, tmpdir, "copy.bin");
    tsr_gpt2_config_t c, c2;
    float *p = NULL, *q = NULL;
    CHECK_RC(tsr_gpt2_checkpoint_read_config(src, &c), 0);
    CHECK(c.maxT == 32 && c.V == 500 && c.Vp == 512 && c.L == 2 && c.NH == 4 && c.C == 64);
    CHECK_RC(tsr_gpt2_checkpoint_read(src, &c, &p), 0);
    CHECK(p != NULL);
    if (!p)
        return;
    /* overwrite an existing file: atomic replace */
    CHECK(write_file(dst, "old", 3) == 0);
    CHECK_RC(tsr_gpt2_checkpoint_write(dst, &c, p), 0);
    CHECK(no_temp_files());
    size_t n1 = 0, n2 = 0;
    void *a = read_file(src, &n1), *b = read_file(dst, &n2);
    CHECK(a && b && n1 == n2 && memcmp(a, b, n1) == 0); /* byte-identical, header included */
    free(a);
    free(b);
    CHECK_RC(tsr_gpt2_checkpoint_read(dst, &c2, &q), 0);
    CHECK(q && memcmp(&c, &c2, sizeof c) == 0 && memcmp(p, q, tsr_gpt2_num_params(&c) * 4) == 0);
    free(q);

    /* write errors: missing directory, invalid config; nothing left behind */
    char bad[4096];
    join(bad, sizeof bad, tmpdir, "no/such/dir/x.bin");
    capture_begin(tmpdir);
    int rc = tsr_gpt2_checkpoint_write(bad, &c, p);
    const char *msg = capture_end();
    CHECK_RC(rc, TSR_EIO);
    CHECK(has_all(msg, "no/such/dir/x.bin", NULL));
    tsr_gpt2_config_t badc = c;
    badc.NH = 3;
    capture_begin(tmpdir);
    CHECK_RC(tsr_gpt2_checkpoint_write(dst, &badc, p), TSR_EINVAL);
    capture_end();
    CHECK(no_temp_files());

    /* atomic writer directly: abort leaves the old file untouched */
    tsr_atomic_file_t af;
    CHECK_RC(tsr_atomic_begin(&af, dst), 0);
    CHECK_RC(tsr_atomic_write(&af, "garbage", 7), 0);
    tsr_atomic_abort(&af);
    CHECK(no_temp_files());
    CHECK_RC(tsr_gpt2_checkpoint_read_config(dst, &c2), 0);
    free(p);
}

/* malformed checkpoints: each gives its code and a message naming file + problem */
static void expect_bad(const char *name, const void *data, size_t bytes, int code, const char *needle)
{
    char path[4096];
    bad_file(path, sizeof path, tmpdir, name, data, bytes);
    tsr_gpt2_config_t c;
    float *p = (float *)&c; /* must come back NULL */
    capture_begin(tmpdir);
    int rc = tsr_gpt2_checkpoint_read(path, &c, &p);
    const char *msg = capture_end();
    CHECK_RC(rc, code);
    CHECK(p == NULL);
    check_message(msg, name, needle);
    capture_begin(tmpdir);
    CHECK_RC(tsr_gpt2_checkpoint_read_config(path, &c), code);
    capture_end();
}

static void test_bad_files(const char *datadir)
{
    char src[4096];
    join(src, sizeof src, datadir, "micro_init.bin");
    size_t n = 0;
    unsigned char *good = read_file(src, &n);
    CHECK(good && n == 1024 + 4 * 134912);
    if (!good)
        return;
    unsigned char *buf = malloc(n + 8);
    int32_t *h = (int32_t *)buf;

    expect_bad("ckpt_missing.bin", NULL, 0, TSR_EIO, "cannot open");
    expect_bad("ckpt_empty.bin", buf, 0, TSR_EFORMAT, "truncated");
    memcpy(buf, good, n);
    expect_bad("ckpt_short_header.bin", buf, 100, TSR_EFORMAT, "truncated");
    expect_bad("ckpt_truncated.bin", buf, n - 4, TSR_EFORMAT, "truncated");
    memset(buf + n, 0, 8);
    expect_bad("ckpt_trailing.bin", buf, n + 8, TSR_EFORMAT, "trailing");
    h[0] = 12345;
    expect_bad("ckpt_magic.bin", buf, n, TSR_EFORMAT, "bad magic");
    memcpy(buf, good, n);
    h[1] = 2;
    expect_bad("ckpt_version.bin", buf, n, TSR_EFORMAT, "bad version");
    h[1] = 5;
    expect_bad("ckpt_bf16.bin", buf, n, TSR_EFORMAT, "bf16");
    memcpy(buf, good, n);
    h[5] = 3; /* NH = 3 does not divide C = 64 */
    expect_bad("ckpt_heads.bin", buf, n, TSR_EFORMAT, "inconsistent header");
    memcpy(buf, good, n);
    h[7] = 400; /* Vp < V */
    expect_bad("ckpt_vp.bin", buf, n, TSR_EFORMAT, "inconsistent header");
    memcpy(buf, good, n);
    h[4] = -2;
    expect_bad("ckpt_negative.bin", buf, n, TSR_EFORMAT, "inconsistent header");
    memcpy(buf, good, n);
    h[4] = 3; /* valid header, but the file holds L = 2 */
    expect_bad("ckpt_wrong_size.bin", buf, n, TSR_EFORMAT, "truncated");
    memcpy(buf, good, n);
    h[6] = 1 << 30; /* C huge: no overflow, no giant malloc */
    h[5] = 1;
    expect_bad("ckpt_huge.bin", buf, n, TSR_EFORMAT, "inconsistent header");
    /* a directory is not a checkpoint */
    capture_begin(tmpdir);
    tsr_gpt2_config_t c;
    float *p = NULL;
    CHECK_RC(tsr_gpt2_checkpoint_read(tmpdir, &c, &p), TSR_EIO);
    capture_end();
    capture_begin(tmpdir);
    CHECK_RC(tsr_gpt2_checkpoint_read(NULL, &c, &p), TSR_EINVAL);
    capture_end();
    free(buf);
    free(good);
}

int main(int argc, char **argv)
{
    tmpdir = test_tmpdir(argc, argv);
    test_presets();
    test_roundtrip(argv[1]);
    test_bad_files(argv[1]);
    return tsr_check_report("test_gpt2_model_io");
}
