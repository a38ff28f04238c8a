/* GPT-2 as Tessera tiled algorithms: parameters, gradients and AdamW state
 * as descriptors (owned by rank 0), activations as descriptors distributed
 * by batch sample over the ranks (data parallelism), forward, loss,
 * backward and update submitted as one task flow per step. Descriptors are
 * created once and reused every step, so memory stays bounded. */
#ifndef GPT2_MODEL_H
#define GPT2_MODEL_H

#include "tessera.h"
#include "gpt2_model_io.h"

/* Tile sizes per dimension (the parallelism vs task-granularity knobs). */
typedef struct {
    int tok;   /* token tile: columns of every 2D activation; divides T, or is
                * a multiple of T (a tile of several whole sequences) */
    int ch;    /* channel tile: rows of C-sized activations and weights */
    int hid;   /* hidden tile: rows of the 4C activations */
    int voc;   /* vocabulary tile: rows of the logits, columns of wte */
    int heads; /* heads per attention tile (divides NH); the QKV/attproj
                * feature tile is heads * hd. With all NH heads and a token
                * tile of several sequences, an attention tile holds the
                * heads of all of them (tsr_gpt2_attention_depth) */
    int q, k;  /* attention query and key tiles (<= T; 0: min(tok, T), the
                * model keeps the resolved value); when both equal a
                * token tile that divides T the QKV and attention-output
                * projections read/write the head tensors directly, otherwise
                * through 2D scratch and head split/merge tasks */
    tsr_reduction_t accum; /* accumulation of the sums over tiles */
} tsr_gpt2_tiles_t;

/* Defaults for a model and batch (call after tsr_init: they depend on the
 * number of ranks and workers): token tiles of whole sequences of 256
 * tokens, or a quarter of one rank's share of the batch when that is more
 * (never more than the share), channel tile C/2, hidden tile
 * 2C, vocabulary tile ~ Vp/8, NH/2 heads per attention tile (whole C or NH
 * when odd), query and key tiles 0 (= min(tok, T), so they follow a token
 * tile set afterwards). With more CPU workers than token tiles times
 * feature parts, the token tile (down to 128, dividing T or whole sequences)
 * and the feature parts (C/f >= 128 channels, 4C/f hidden, ~Vp/4f vocabulary,
 * NH/f heads where NH divides) are halved and doubled in turn until there
 * are as many parts as workers. With CUDA workers: token tiles up to 2048
 * tokens within one GPU's sub-batch, whole C, 4C and NH, vocabulary tile ~ Vp/4. */
void tsr_gpt2_tiles_default(const tsr_gpt2_config_t *cfg, int B, int T, tsr_gpt2_tiles_t *tiles);
/* The rank that holds batch row `row` of B among `ranks`: the rows are
 * dealt over the ranks in equal blocks (the activations' distribution); a
 * sub-batch's gradients live on the rank of its first row. */
int tsr_gpt2_rank_of_row(int row, int B, int ranks);
/* The default sub-batch count: one per rank under MPI (each rank reduces
 * its own gradients), else one per CUDA worker, or else one per worker
 * group (GPU: tsr_worker_groups), when B divides; else 1. Sub-batch r runs
 * on worker group r mod the groups (tsr_worker_group_of). */
int tsr_gpt2_default_sub_batches(int B);

/* Rows of a QKV projection tile (the columns of its weight, the rows of its
 * bias and output): all 3C when the projection goes through the 2D scratch
 * and a tile holds all NH heads (one GEMM task instead of three), else the
 * heads of a tile, heads * hd. */
int tsr_gpt2_qkv_tile(const tsr_gpt2_config_t *cfg, int T, const tsr_gpt2_tiles_t *tiles);

/* (sequence, head) pairs per attention tile: the heads of every sequence
 * of a token tile when a tile holds all NH heads (one task, one batched
 * GEMM, one head split for them all), else `heads` of one sequence. */
int tsr_gpt2_attention_depth(const tsr_gpt2_config_t *cfg, int T, const tsr_gpt2_tiles_t *tiles);

/* Tiles chosen for the running workers (gpt2_tiles_auto.c): a calibrated
 * model of the step (its GEMMs and loss phase by phase, plus the runtime's
 * cost of the other tasks) ranks every combination of candidate tiles; the
 * best few, with their GEMM tasks measured, are tried for a few steps of a
 * model with zero parameters, and the fastest wins (the trials are cached
 * in $TSR_CACHE_DIR/tile_models per model, batch, ranks and worker set).
 * tiles->accum is kept, q and k set to 0. *predicted_seconds: the model's
 * step time for the chosen tiles; *trial_seconds: their step in the trial
 * (either may be NULL). Collective under MPI. Needs the memory of a second
 * model while it runs: call it before creating the one to train. */
int tsr_gpt2_tiles_auto(const tsr_gpt2_config_t *cfg, int B, int T, int nsub, tsr_gpt2_tiles_t *tiles,
                        double *predicted_seconds, double *trial_seconds);
/* The seconds the one submitting thread spends on a task (13.7 us, the
 * simulation's reference, measured beside 16 busy Xeon workers): a step is
 * never shorter than its tasks times this. */
extern const double tsr_gpt2_submit_seconds;
/* tsr_gpt2_tiles_auto's model alone, as if `workers` workers shared the
 * step (their calibrations are the running workers'), the submitting
 * thread spending submit_seconds a task (< 0: tsr_gpt2_submit_seconds).
 * _predict: the step time (*seconds) and task count (*tasks) of tiles, its
 * GEMM tasks priced from the calibration. _model: the model's best tiles
 * (tiles->accum kept), their step time and task count: every candidate
 * ranked, nothing tried. */
int tsr_gpt2_tiles_predict(const tsr_gpt2_config_t *cfg, int B, int T, int nsub, int workers, double submit_seconds,
                           const tsr_gpt2_tiles_t *tiles, double *seconds, double *tasks);
int tsr_gpt2_tiles_model(const tsr_gpt2_config_t *cfg, int B, int T, int nsub, int workers, double submit_seconds,
                         tsr_gpt2_tiles_t *tiles, double *seconds, double *tasks);

/* Activations and scratch of one layer. */
typedef struct {
    tsr_desc_t *ln1, *ln1_mean, *ln1_rstd;
    tsr_desc_t *q, *k, *v, *atty, *att_stats;
    tsr_desc_t *res2; /* residual after attention */
    tsr_desc_t *ln2, *ln2_mean, *ln2_rstd;
    tsr_desc_t *fch, *fch_gelu;
    tsr_desc_t *res3; /* residual after the MLP = the next layer's input */
} tsr_gpt2_layer_acts_t;

/* Owner of an activation tile: the rank of its batch sample. */
typedef struct {
    int B, T, NH, tok, depth, size; /* depth: (sequence, head) pairs per 3D tile */
    int first; /* the sub-batch's first sample in the batch */
} tsr_gpt2_dist_arg_t;

#define TSR_GPT2_PER_LAYER 12 /* ln1w ln1b qkvw qkvb attprojw attprojb ln2w ln2b fcw fcb fcprojw fcprojb */

/* One sub-batch: its rows of the batch, its own activations, scratch and
 * gradients (sub-batch 0's gradients are the model's), so the sub-batches
 * run as independent task flows until their gradients are added. */
typedef struct {
    int B;                   /* sequences of this sub-batch */
    tsr_gpt2_dist_arg_t dist2d, dist3d;
    tsr_desc_t *encoded;     /* layer 0 input */
    tsr_gpt2_layer_acts_t *acts;
    tsr_desc_t *lnf, *lnf_mean, *lnf_rstd, *logits, *ce_stats, *losses;
    /* backward scratch, shared by the layers */
    tsr_desc_t *dres, *dln, *dfch, *datty, *dq, *dk, *dv, *ln_work;
    /* unfused attention projections only (NULL otherwise), shared by the
     * layers: [Q; K; V] or its gradient (3C x BT), the attention output or
     * its recomputation in the backward, and its gradient (C x BT) */
    tsr_desc_t *qkv2d, *att2d, *datt2d;
    tsr_desc_t **grads;      /* one per parameter tensor */
    /* sharded: views of the columns of grads' token embedding and of the
     * matching rows of the logits (wte_grad_by_columns), else NULL */
    tsr_desc_t **dwte_cols, **logits_rows;
    /* sharded, at least WTE_SPLIT_TOKEN_TILES token tiles (gpt2_model.c):
     * the second half of the token tiles' part of the LM head's weight
     * gradient of a column made after the backward (alloc on write, its
     * columns), and the halves of lnf and of logits_rows it reads, else NULL */
    tsr_desc_t *dwte_half, **dwte_half_cols, *lnf_halves[2], **logits_row_halves[2];
    /* several sub-batches on one rank (tsr_gpt2_wte_summed_early): views of
     * encoded and dres whose tasks run where the token embedding is homed
     * (the embedding's forward and backward), and of grads' token embedding
     * whose tasks run on this sub-batch's workers (the sum of the LM head's
     * parts); else NULL */
    tsr_desc_t *encoded_at_wte, *dres_at_wte, *dwte_own;
    int *inputs, *targets;   /* B*T, the same on every rank */
} tsr_gpt2_batch_t;

/* Owner of a training-state tile under MPI: owner[i * col_tiles + j] for
 * tile (i, j) of one parameter tensor (a slice of the model's shard_owner). */
typedef struct {
    int col_tiles;
    const int *owner;
} tsr_gpt2_shard_arg_t;

typedef struct {
    tsr_gpt2_config_t cfg;
    int B, T, nsub;          /* batch, sequence, sub-batches */
    tsr_gpt2_tiles_t tiles;
    int fused;               /* QKV / attproj fused with the head reshape */
    int ntensors;            /* 4 + 12 L parameter descriptors */
    tsr_dtype_t dtype;       /* of activations, parameters read by the forward and
                              * backward, and gradients: float32 or bf16 */
    tsr_desc_t **params, **adam_m, **adam_v;
    tsr_desc_t **master;     /* bf16: the float32 master weights AdamW updates (params
                              * is their bf16 copy); NULL in float32 */
    tsr_desc_t **grad_sum;   /* the sub-batches' gradients added, placed like the
                              * parameters (NULL: sub-batch 0's are the sum) */
    tsr_gpt2_shard_arg_t *shard; /* per tensor, under MPI (NULL: all on rank 0) */
    int *shard_owner;        /* the owner of every training-state tile, tensor after tensor */
    tsr_gpt2_batch_t *sub;   /* nsub sub-batches */
    /* with grad_sum: views of the columns of the token embedding and of its
     * summed gradient (wte_grad_by_columns), else NULL */
    tsr_desc_t **wte_cols, **dwte_sum_cols;
    int wte_ncols;
    int own_only;            /* a rank submits only the sub-batches on it (the
                              * others: the parameter tiles it sends them) */
    int keep_params;         /* several ranks, each with GPUs or worker groups: the
                              * parameter tiles a rank receives for the forward
                              * stay (and on its GPUs) for the backward */
} tsr_gpt2_model_t;

/* Create every descriptor (collective). Checks the tiles against the model;
 * nsub sub-batches must divide B: their activations and gradients are their
 * own (data parallelism inside the process), and under MPI each sub-batch's
 * gradients live on the rank of its samples, so with at least one
 * sub-batch per rank the weight gradients are computed where the
 * activations are. Under MPI the training state (parameters, AdamW moments
 * and the summed gradients) is sharded: its tiles are dealt over the ranks,
 * the largest first, each to the one owning the fewest bytes so far; each
 * rank receives the partial gradients of the tiles it owns (a
 * reduce-scatter), updates them, and the forward fetches the tiles it reads
 * from their owners. state_on_rank0 keeps the earlier placement
 * instead, every state tile on rank 0 (a parameter server; for comparison). */
int tsr_gpt2_model_create(tsr_gpt2_model_t *m, const tsr_gpt2_config_t *cfg, int B, int T, int nsub,
                          const tsr_gpt2_tiles_t *tiles, int state_on_rank0);
/* The same with the training precision (llm.c's bf16 trainer for
 * TSR_BFLOAT16): activations, the parameters the forward and backward read
 * and the gradients in dtype; float32 master weights, AdamW state, loss and
 * softmax statistics. tsr_gpt2_model_create is this with TSR_FLOAT32. */
int tsr_gpt2_model_create_dtype(tsr_gpt2_model_t *m, const tsr_gpt2_config_t *cfg, int B, int T, int nsub,
                                const tsr_gpt2_tiles_t *tiles, int state_on_rank0, tsr_dtype_t dtype);
void tsr_gpt2_model_destroy(tsr_gpt2_model_t *m);
/* With several worker groups (GPUs of one process: tsr_worker_groups), each
 * tensor's state (parameters, AdamW moments, master weights, gradients)
 * homed on one group, spread by bytes (gpt2_placement.c); the create calls
 * it. Nothing to do otherwise. */
int tsr_gpt2_place_state(tsr_gpt2_model_t *m);
/* Whether the token embedding's gradient is summed as the LM head makes
 * it, its embedding tasks running where it is homed (gpt2_model.c): several
 * sub-batches on one rank without a sharded sum. */
int tsr_gpt2_wte_summed_early(const tsr_gpt2_model_t *m);
/* How many threads submit a layer of this rank's sub-batches
 * (tsr_submit_streams): up to TSR_SUBMIT_THREADS, one a sub-batch; 1 when
 * they cannot be submitted apart (several ranks each walking every
 * sub-batch). */
int tsr_gpt2_submitting_threads(const tsr_gpt2_model_t *m);

/* The bytes of the tiles this rank owns for good: parameters, AdamW
 * moments, gradients (their sum; the sub-batches' own only when they are
 * not summed into grad_sum: otherwise tsr_gpt2_live_bytes), activations
 * and scratch. */
#define TSR_GPT2_BYTE_KINDS 4
void tsr_gpt2_rank_bytes(tsr_gpt2_model_t *m, double bytes[TSR_GPT2_BYTE_KINDS]);
/* The memory a model of these dimensions holds on its busiest rank (rank
 * 0), before anything is allocated: parameters (and bf16's float32 master
 * weights), AdamW m and v, gradients (its sub-batches' and, sharded, their
 * sum; sharded, of its sub-batches' only the token embedding's, which is
 * held through the backward) and activations with the loss's scratch, for nranks ranks (state
 * sharded over them unless state_on_rank0; activations split by sample).
 * tiles NULL: not chosen yet (--tiles auto), the projections' split/merge
 * buffers counted. Bytes; total is the sum of the four. */
typedef struct {
    double params, adam, grads, acts, total;
} tsr_gpt2_memory_t;
void tsr_gpt2_memory_estimate(const tsr_gpt2_config_t *cfg, int B, int T, int nsub, const tsr_gpt2_tiles_t *tiles,
                              int nranks, int state_on_rank0, tsr_dtype_t dtype, tsr_gpt2_memory_t *mem);
/* What this rank holds now besides the tiles it owns (a sample, callable
 * from another thread while the step runs): copies of other ranks'
 * parameter tiles (fetched a layer ahead of their use, dropped after it),
 * its own partial gradients (from their write in the backward to their
 * reduction), and the runtime's other buffers (other ranks' partial
 * gradients received for a sum, receive buffers). Bytes. */
typedef struct {
    double cached, grads, buffers;
} tsr_gpt2_live_t;
void tsr_gpt2_live_bytes(const tsr_gpt2_model_t *m, tsr_gpt2_live_t *live);

/* Flat parameter array in checkpoint order <-> descriptors. The array lives
 * on rank 0 (other ranks pass NULL). Collective. In bf16 the scatter sets
 * the master weights and their rounded copy, the gather reads the master
 * weights; gradients and logits are read from bf16 as floats. */
int tsr_gpt2_params_scatter(tsr_gpt2_model_t *m, const float *flat);
int tsr_gpt2_params_gather(tsr_gpt2_model_t *m, float *flat);
/* The same for the AdamW moments (for checkpoints with optimizer state). */
int tsr_gpt2_adam_scatter(tsr_gpt2_model_t *m, const float *flat_m, const float *flat_v);
int tsr_gpt2_adam_gather(tsr_gpt2_model_t *m, float *flat_m, float *flat_v);
/* Gradients in checkpoint order (for the oracle check). */
int tsr_gpt2_grads_gather(tsr_gpt2_model_t *m, float *flat);

/* Forward on inputs (B*T token ids); with targets also the loss: *loss is the
 * mean over B*T (every rank gets it). targets NULL: logits only. */
int tsr_gpt2_forward(tsr_gpt2_model_t *m, const int *inputs, const int *targets, float *loss);
/* The same in two halves: submit the forward (and loss tasks with targets)
 * without waiting; then wait for the loss tasks alone and read the mean
 * loss (TSR_ENAN when it is not finite). Backward and update may be
 * submitted in between, so the wait overlaps them. */
int tsr_gpt2_forward_submit(tsr_gpt2_model_t *m, const int *inputs, const int *targets);
int tsr_gpt2_loss(tsr_gpt2_model_t *m, float *loss);
/* Backward of the last forward with targets (gradients overwritten, no
 * zero-grad pass needed; with sub-batches their gradients are then added). */
int tsr_gpt2_backward(tsr_gpt2_model_t *m);
/* AdamW on every parameter, t = step + 1. */
int tsr_gpt2_update(tsr_gpt2_model_t *m, float lr, float beta1, float beta2, float eps, float weight_decay,
                    int step);
/* Logits column of token position bt (< B*T, first V entries) on rank 0
 * (out has V floats); collective. */
int tsr_gpt2_logits_column(tsr_gpt2_model_t *m, int bt, float *out);

#endif
