/* GPT-2 decode table.  test_gpt2_tokenizer DATADIR TMPDIR */
#include "test_gpt2_common.h"

#include "tsr_check.h"
#include "tsr_core.h"
#include "tsr_gpt2_io.h"

static const char *tmpdir;

static void expect_bad(const char *name, const void *data, size_t bytes, int code, const char *needle)
{
    char path[4096];
    bad_file(path, sizeof path, tmpdir, name, data, bytes);
    tsr_gpt2_tokenizer_t tok;
    capture_begin(tmpdir);
    int rc = tsr_gpt2_tokenizer_read(path, &tok);
    const char *msg = capture_end();
    CHECK_RC(rc, code);
    check_message(msg, name, needle);
    CHECK(tok.offset == NULL && tsr_gpt2_decode(&tok, 0, NULL) == NULL);
    tsr_gpt2_tokenizer_free(&tok);
}

int main(int argc, char **argv)
{
    tmpdir = test_tmpdir(argc, argv);
    char path[4096], valp[4096];
    join(path, sizeof path, argv[1], "gpt2_tokenizer.bin");
    join(valp, sizeof valp, argv[1], "tiny_shakespeare_val.bin");

    tsr_gpt2_tokenizer_t tok;
    CHECK_RC(tsr_gpt2_tokenizer_read(path, &tok), 0);
    CHECK(tok.vocab_size == 50257 && tok.eot == 50256);
    size_t len;
    const char *s = tsr_gpt2_decode(&tok, 50256, &len);
    CHECK(s && len == 13 && strcmp(s, "<|endoftext|>") == 0);
    s = tsr_gpt2_decode(&tok, 0, &len);
    CHECK(s && len == 1 && s[0] == '!');
    CHECK(tsr_gpt2_decode(&tok, -1, &len) == NULL && len == 0);
    CHECK(tsr_gpt2_decode(&tok, 50257, NULL) == NULL);
    CHECK(tsr_gpt2_decode(NULL, 5, NULL) == NULL);

    /* the first 16 validation tokens */
    tsr_gpt2_tokens_t val;
    CHECK_RC(tsr_gpt2_tokens_read(valp, 50257, &val), 0);
    int ids[16];
    for (int i = 0; i < 16; i++)
        ids[i] = val.tokens ? val.tokens[i] : 0;
    const char *expect = "<|endoftext|>First Citizen:\nBefore we proceed any further, hear me speak.\n\n";
    char text[256];
    size_t need = tsr_gpt2_decode_tokens(&tok, ids, 16, text, sizeof text);
    CHECK(need == strlen(expect) && strcmp(text, expect) == 0);
    printf("val[0:16] decodes to \"%s\"\n", text);
    char small[8]; /* truncation, snprintf-style */
    CHECK(tsr_gpt2_decode_tokens(&tok, ids, 16, small, sizeof small) == need);
    CHECK(strcmp(small, "<|endof") == 0);
    int with_bad[3] = {5962, 99999, 22307}; /* invalid ids are skipped */
    CHECK(tsr_gpt2_decode_tokens(&tok, with_bad, 3, text, sizeof text) == strlen("First Citizen"));
    CHECK(strcmp(text, "First Citizen") == 0);
    /* the whole val split decodes (EOTs aside) to plain ASCII text */
    size_t total = 0, nonascii = 0;
    for (size_t i = 0; val.tokens && i < val.ntok; i++) {
        if (val.tokens[i] == 50256)
            continue;
        s = tsr_gpt2_decode(&tok, val.tokens[i], &len);
        total += len;
        for (size_t j = 0; j < len; j++)
            nonascii += (unsigned char)s[j] >= 128;
    }
    CHECK(total > 100000 && nonascii == 0);
    tsr_gpt2_tokens_free(&val);

    /* print_token: printable / whitespace only */
    char pp[4096];
    join(pp, sizeof pp, tmpdir, "print.txt");
    FILE *f = fopen(pp, "w");
    tsr_gpt2_print_token(&tok, 5962, f);  /* "First" */
    tsr_gpt2_print_token(&tok, 198, f);   /* "\n" */
    tsr_gpt2_print_token(&tok, 50257, f); /* invalid: nothing */
    tsr_gpt2_print_token(&tok, 188, f);   /* a single control byte: nothing */
    fclose(f);
    size_t n = 0;
    char *printed = read_file(pp, &n);
    CHECK(printed && n == 6 && memcmp(printed, "First\n", 6) == 0);
    free(printed);

    /* malformed tables */
    size_t gn = 0;
    unsigned char *good = read_file(path, &gn);
    unsigned char *buf = malloc(gn + 4);
    uint32_t *h = (uint32_t *)buf;
    expect_bad("tokz_missing.bin", NULL, 0, TSR_EIO, "cannot open");
    memcpy(buf, good, gn);
    expect_bad("tokz_header.bin", buf, 1000, TSR_EFORMAT, "truncated");
    expect_bad("tokz_truncated.bin", buf, gn - 3, TSR_EFORMAT, "truncated");
    memset(buf + gn, 'x', 4);
    expect_bad("tokz_trailing.bin", buf, gn + 4, TSR_EFORMAT, "trailing");
    h[0] = 20240520;
    expect_bad("tokz_magic.bin", buf, gn, TSR_EFORMAT, "bad magic");
    memcpy(buf, good, gn);
    h[1] = 3;
    expect_bad("tokz_version.bin", buf, gn, TSR_EFORMAT, "bad version");
    memcpy(buf, good, gn);
    h[3] = 50257; /* EOT outside the vocabulary */
    expect_bad("tokz_eot.bin", buf, gn, TSR_EFORMAT, "inconsistent header");
    memcpy(buf, good, gn);
    h[2] = 4000000000u;
    expect_bad("tokz_vocab.bin", buf, gn, TSR_EFORMAT, "inconsistent header");
    memcpy(buf, good, gn);
    buf[1024] = 0; /* token 0 of length 0 */
    expect_bad("tokz_zero.bin", buf, gn, TSR_EFORMAT, "length 0");
    free(buf);
    free(good);
    tsr_gpt2_tokenizer_free(&tok);
    tsr_gpt2_tokenizer_free(&tok);
    return tsr_check_report("test_gpt2_tokenizer");
}
