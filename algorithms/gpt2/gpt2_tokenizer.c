/* GPT-2 decode table reader. */
#include "gpt2_tokenizer.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_model_io.h" /* file helpers */
#include "tsr_core.h"

static const char *const TOKZ = "tokenizer file";

int tsr_gpt2_tokenizer_read(const char *path, tsr_gpt2_tokenizer_t *tok)
{
    int rc = tsr_gpt2_output_clear(tok, sizeof *tok, "tsr_gpt2_tokenizer_read");
    if (rc)
        return rc;
    FILE *f;
    int64_t fsize;
    uint32_t h[TSR_GPT2_HEADER_INTS];
    rc = tsr_gpt2_file_open_header(path, TOKZ, TSR_GPT2_TOKENIZER_MAGIC, "a GPT-2 decode table", &f, &fsize,
                                       (int32_t *)h);
    if (rc)
        return rc;
    if (h[1] != 1 && h[1] != 2) {
        tsr_log(TSR_LOG_ERROR, "%s %s: bad version %u (expected 1 or 2)", TOKZ, path, h[1]);
        fclose(f);
        return TSR_EFORMAT;
    }
    uint32_t nv = h[2];
    uint32_t eot = h[1] == 1 ? 50256u : h[3];
    /* each token takes at least 2 bytes (length + one byte) */
    if (nv == 0 || nv > (uint32_t)((fsize - (int64_t)sizeof h) / 2) || eot >= nv) {
        tsr_log(TSR_LOG_ERROR,
                "%s %s: inconsistent header: vocabulary size %u, EOT id %u, for a file of %lld bytes",
                TOKZ, path, nv, eot, (long long)fsize);
        fclose(f);
        return TSR_EFORMAT;
    }
    size_t body = (size_t)(fsize - (int64_t)sizeof h);
    unsigned char *raw = malloc(body);
    uint32_t *off = malloc(((size_t)nv + 1) * sizeof(uint32_t));
    char *bytes = malloc(body + 1); /* body - nv length bytes + nv NULs <= body */
    if (!raw || !off || !bytes) {
        tsr_log(TSR_LOG_ERROR, "%s %s: out of memory", TOKZ, path);
        rc = TSR_ENOMEM;
        goto fail;
    }
    rc = tsr_gpt2_file_read(f, raw, body, path, TOKZ, "the token table");
    if (rc)
        goto fail;
    size_t r = 0, w = 0;
    for (uint32_t i = 0; i < nv; i++) {
        if (r >= body) {
            tsr_log(TSR_LOG_ERROR, "%s %s: truncated: the table ends before token %u of %u", TOKZ,
                    path, i, nv);
            rc = TSR_EFORMAT;
            goto fail;
        }
        size_t len = raw[r++];
        if (len == 0) {
            tsr_log(TSR_LOG_ERROR, "%s %s: token %u has length 0", TOKZ, path, i);
            rc = TSR_EFORMAT;
            goto fail;
        }
        if (len > body - r) {
            tsr_log(TSR_LOG_ERROR, "%s %s: truncated: token %u needs %zu bytes, %zu left", TOKZ,
                    path, i, len, body - r);
            rc = TSR_EFORMAT;
            goto fail;
        }
        off[i] = (uint32_t)w;
        memcpy(bytes + w, raw + r, len);
        r += len;
        w += len;
        bytes[w++] = '\0';
    }
    off[nv] = (uint32_t)w;
    if (r != body) {
        tsr_log(TSR_LOG_ERROR, "%s %s: %zu trailing bytes after the %u tokens", TOKZ, path,
                body - r, nv);
        rc = TSR_EFORMAT;
        goto fail;
    }
    free(raw);
    fclose(f);
    tok->vocab_size = (int)nv;
    tok->eot = (int)eot;
    tok->offset = off;
    tok->bytes = bytes;
    return 0;
fail:
    free(raw);
    free(off);
    free(bytes);
    fclose(f);
    return rc;
}

void tsr_gpt2_tokenizer_free(tsr_gpt2_tokenizer_t *tok)
{
    if (!tok)
        return;
    free(tok->offset);
    free(tok->bytes);
    memset(tok, 0, sizeof *tok);
}

const char *tsr_gpt2_decode(const tsr_gpt2_tokenizer_t *tok, int token, size_t *len)
{
    if (len)
        *len = 0;
    if (!tok || !tok->offset || token < 0 || token >= tok->vocab_size)
        return NULL;
    /* offsets include each token's NUL */
    if (len)
        *len = tok->offset[token + 1] - tok->offset[token] - 1;
    return tok->bytes + tok->offset[token];
}

size_t tsr_gpt2_decode_tokens(const tsr_gpt2_tokenizer_t *tok, const int *tokens, size_t n,
                              char *buf, size_t cap)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *s = tsr_gpt2_decode(tok, tokens[i], &len);
        if (!s)
            continue;
        if (buf && total < cap) {
            size_t room = cap - total;
            memcpy(buf + total, s, len < room ? len : room);
        }
        total += len;
    }
    if (buf && cap > 0)
        buf[total < cap ? total : cap - 1] = '\0';
    return total;
}

void tsr_gpt2_print_token(const tsr_gpt2_tokenizer_t *tok, int token, FILE *out)
{
    size_t len;
    const char *s = tsr_gpt2_decode(tok, token, &len);
    if (!s || len == 0)
        return;
    if (len == 1) {
        unsigned char c = (unsigned char)s[0];
        if (!(isprint(c) || isspace(c)))
            return;
    }
    fwrite(s, 1, len, out);
}
