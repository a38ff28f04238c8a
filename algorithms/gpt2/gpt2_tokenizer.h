/* GPT-2 decode table (llm.c's gpt2_tokenizer.bin): token id -> bytes.
 *
 * File (little-endian): 256 x uint32 header {20240328, version, vocab size,
 * EOT id (version 2; version 1 implies 50256), 0, ...}, then for each id in
 * order one uint8 length (1..255) and that many raw bytes. A token may be a
 * partial UTF-8 sequence. Plain C, no StarPU. */
#ifndef GPT2_TOKENIZER_H
#define GPT2_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TSR_GPT2_TOKENIZER_MAGIC 20240328

typedef struct {
    int vocab_size;
    int eot;           /* end-of-text id (50256 for GPT-2) */
    uint32_t *offset;  /* vocab_size + 1 offsets into bytes */
    char *bytes;       /* token i: bytes[offset[i] .. offset[i+1]-1], then a NUL */
} tsr_gpt2_tokenizer_t;

/* Errors: TSR_EIO (missing), TSR_EFORMAT (truncated, bad magic, bad version,
 * inconsistent header (vocab size <= 0, EOT out of range), a zero-length
 * token, trailing bytes), TSR_ENOMEM. *tok is zeroed on error. */
int tsr_gpt2_tokenizer_read(const char *path, tsr_gpt2_tokenizer_t *tok);
void tsr_gpt2_tokenizer_free(tsr_gpt2_tokenizer_t *tok);

/* The bytes of a token (NUL-terminated, *len without the NUL; len may be
 * NULL), or NULL for an id outside [0, vocab_size) or an unloaded table. */
const char *tsr_gpt2_decode(const tsr_gpt2_tokenizer_t *tok, int token, size_t *len);

/* Concatenates the bytes of n tokens into buf (capacity cap, always
 * NUL-terminated when cap > 0); invalid ids are skipped. Returns the length
 * the full text needs (without the NUL), like snprintf. */
size_t tsr_gpt2_decode_tokens(const tsr_gpt2_tokenizer_t *tok, const int *tokens, size_t n,
                              char *buf, size_t cap);

/* Prints a token as llm.c's sampler does: single-byte tokens only when
 * printable or whitespace, invalid ids not at all. */
void tsr_gpt2_print_token(const tsr_gpt2_tokenizer_t *tok, int token, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
