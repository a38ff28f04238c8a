/* GPT-2 model configuration, parameter layout and llm.c checkpoints.
 *
 * Checkpoint (llm.c "version 3", little-endian): 256 x int32 header
 * {20240326, 3, maxT, V, L, NH, C, Vp, 0, ...}, then the 16 float32 tensors
 * back to back in the order of tsr_gpt2_param_t. Weights are (out, in)
 * row-major. Plain C, no StarPU. Every function returns 0 or a negative
 * TSR_E* code and logs a message naming the file and the problem. */
#ifndef GPT2_MODEL_IO_H
#define GPT2_MODEL_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TSR_GPT2_CHECKPOINT_MAGIC 20240326
#define TSR_GPT2_CHECKPOINT_VERSION 3 /* fp32, padded vocab */
#define TSR_GPT2_HEADER_INTS 256
#define TSR_GPT2_HEADER_BYTES (TSR_GPT2_HEADER_INTS * 4)

typedef struct {
    int maxT; /* max sequence length (rows of wpe) */
    int V;    /* vocabulary size */
    int Vp;   /* padded vocabulary size (rows of wte), Vp >= V */
    int L;    /* layers */
    int NH;   /* heads, C % NH == 0 */
    int C;    /* channels */
} tsr_gpt2_config_t;

/* The 16 parameter tensors, in checkpoint order. */
typedef enum {
    TSR_GPT2_WTE = 0,  /* Vp x C */
    TSR_GPT2_WPE,      /* maxT x C */
    TSR_GPT2_LN1W,     /* L x C */
    TSR_GPT2_LN1B,     /* L x C */
    TSR_GPT2_QKVW,     /* L x 3C x C */
    TSR_GPT2_QKVB,     /* L x 3C */
    TSR_GPT2_ATTPROJW, /* L x C x C */
    TSR_GPT2_ATTPROJB, /* L x C */
    TSR_GPT2_LN2W,     /* L x C */
    TSR_GPT2_LN2B,     /* L x C */
    TSR_GPT2_FCW,      /* L x 4C x C */
    TSR_GPT2_FCB,      /* L x 4C */
    TSR_GPT2_FCPROJW,  /* L x C x 4C */
    TSR_GPT2_FCPROJB,  /* L x C */
    TSR_GPT2_LNFW,     /* C */
    TSR_GPT2_LNFB,     /* C */
    TSR_GPT2_NUM_PARAM_TENSORS
} tsr_gpt2_param_t;

/* "wte", "wpe", "ln1w", ... ; "?" for an out-of-range index. */
const char *tsr_gpt2_param_name(int tensor);

/* Presets: "124M" (GPT-2 small: maxT 1024, V 50257, Vp 50304, L 12, NH 12,
 * C 768), "d2" (the small tiny-Shakespeare config of llmc_baseline.md:
 * maxT 64, V 50257, Vp 50304, L 2, NH 4, C 128) and "micro" (the
 * shared/reference model: maxT 32, V 500, Vp 512, L 2, NH 4, C 64).
 * Unknown name: TSR_EINVAL (and an error message listing the presets). */
int tsr_gpt2_config_preset(const char *name, tsr_gpt2_config_t *cfg);
/* "124M, d2, micro" (for --help) */
const char *tsr_gpt2_preset_names(void);

/* All sizes positive, C % NH == 0, Vp >= V, total size representable.
 * what (e.g. a file name) prefixes the error message; may be NULL. */
int tsr_gpt2_config_validate(const tsr_gpt2_config_t *cfg, const char *what);

/* Element counts of the 16 tensors (checkpoint order) and their offsets in
 * the flat parameter array. The config must be valid. */
void tsr_gpt2_param_sizes(const tsr_gpt2_config_t *cfg, size_t sizes[TSR_GPT2_NUM_PARAM_TENSORS]);
void tsr_gpt2_param_offsets(const tsr_gpt2_config_t *cfg, size_t offsets[TSR_GPT2_NUM_PARAM_TENSORS]);
size_t tsr_gpt2_num_params(const tsr_gpt2_config_t *cfg);

/* Header only: fills cfg. TSR_EIO (missing / unreadable), TSR_EFORMAT (short
 * header, bad magic, version other than 3, inconsistent header values, file
 * size != 1024 + 4 * num_params). */
int tsr_gpt2_checkpoint_read_config(const char *path, tsr_gpt2_config_t *cfg);
/* Header + parameters into a malloc'd array of tsr_gpt2_num_params floats
 * (*params = NULL on error; free() it). Errors as above, TSR_ENOMEM. */
int tsr_gpt2_checkpoint_read(const char *path, tsr_gpt2_config_t *cfg, float **params);
/* Writes atomically (temp file in the same directory, fsync, rename). */
int tsr_gpt2_checkpoint_write(const char *path, const tsr_gpt2_config_t *cfg, const float *params);


/* Small helpers shared by the readers: open + size (TSR_EIO with a message
 * when missing), exact reads (TSR_EFORMAT "truncated" on a short read). */
int tsr_gpt2_file_open(const char *path, const char *kind, FILE **f, int64_t *size);
int tsr_gpt2_file_read(FILE *f, void *buf, size_t bytes, const char *path, const char *kind,
                       const char *what);
/* The rest of f (bytes) into a new malloc'd *buf (NULL on error; free() it),
 * f closed either way: TSR_ENOMEM ("out of memory for <n> <units>") or
 * tsr_gpt2_file_read's errors (what: the part read). */
int tsr_gpt2_file_read_body(FILE *f, size_t bytes, size_t n, const char *units, const char *path, const char *kind,
                            const char *what, void **buf);
/* The check of a reader's output argument: TSR_EINVAL ("<fn>: NULL output")
 * when out is NULL, else out (size bytes) zeroed and 0. */
int tsr_gpt2_output_clear(void *out, size_t size, const char *fn);
/* A file's identity: its size and the FNV-1a 64 hash of its bytes, read in
 * 1 MiB pieces (regular files only; opened non-blocking, so a FIFO never
 * blocks). Quiet: on failure size is -1 and err the errno (EINVAL for a file
 * that is not a regular one), for the caller's message; returns 0 or TSR_EIO. */
typedef struct {
    int64_t size;  /* bytes, -1: unreadable */
    uint64_t hash; /* FNV-1a 64 of the bytes */
    int err;       /* errno when unreadable */
} tsr_gpt2_file_id_t;
int tsr_gpt2_file_id(const char *path, tsr_gpt2_file_id_t *id);

/* The 256 x int32 header every llm.c file starts with: TSR_EFORMAT with a
 * message when the file (fsize bytes) is shorter than it ("truncated") or
 * h[0] is not magic ("bad magic ...: not <is_not>"; is_not may be NULL). */
int tsr_gpt2_read_header(FILE *f, int64_t fsize, const char *path, const char *kind, int32_t magic,
                         const char *is_not, int32_t h[TSR_GPT2_HEADER_INTS]);
/* The opening of every llm.c file: tsr_gpt2_file_open, then
 * tsr_gpt2_read_header. 0 with the file open (its size in *size) after the
 * header, or their error with the file closed (*f NULL). */
int tsr_gpt2_file_open_header(const char *path, const char *kind, int32_t magic, const char *is_not, FILE **f,
                              int64_t *size, int32_t h[TSR_GPT2_HEADER_INTS]);

#ifdef __cplusplus
}
#endif
#endif
