/* The row ops on a GPU: one thread per token runs the op's function (the
 * same code as on the CPU), with the staged outputs (tsr_compute_rows.h) in
 * stream-ordered device scratch; then one thread per feature sums a summed
 * output, one per token adds an output added into. */
#include "tsr_compute_rows.h"
#include "tsr_cuda_util.cuh"

namespace {
#define TSR_ROW_KERNEL(name, nin, nout, nsum, flops)                                                         \
    __global__ void row_##name##_kernel(tsr_rows_t r, int n)                                                 \
    {                                                                                                        \
        for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < n; t += gridDim.x * blockDim.x)             \
            tsr_row_##name(&r, t);                                                                           \
    }
TSR_ROW_OPS(TSR_ROW_KERNEL)
#undef TSR_ROW_KERNEL

__global__ void sum_staged_kernel(tsr_rows_t r, int k, const float *s, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < r.mout[k]; i += gridDim.x * blockDim.x)
        tsr_row_sum_staged(&r, k, s, n, i);
}

__global__ void add_staged_kernel(tsr_rows_t r, int k, const float *s, int n)
{
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < n; t += gridDim.x * blockDim.x)
        tsr_row_add_staged(&r, k, s, t);
}

int run_tokens(cudaStream_t s, tsr_row_op_t op, int n, const tsr_rows_t &r)
{
    switch (op) {
#define TSR_ROW_LAUNCH(name, nin, nout, nsum, flops)                                                         \
    case TSR_ROW_##name:                                                                                     \
        row_##name##_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(r, n);                              \
        return launched();
        TSR_ROW_OPS(TSR_ROW_LAUNCH)
#undef TSR_ROW_LAUNCH
    default:
        return TSR_EINVAL;
    }
}

/* Output k's staged values (in s, n tokens) into its tile. */
int unstage(cudaStream_t st, tsr_row_op_t op, const tsr_rows_t &r, int k, const float *s, int n)
{
    tsr_row_info_t info = tsr_row_info(op);
    if (k >= info.nout - info.nsum)
        sum_staged_kernel<<<blocks_for(r.mout[k], kThreads), kThreads, 0, st>>>(r, k, s, n);
    else
        add_staged_kernel<<<blocks_for(n, kThreads), kThreads, 0, st>>>(r, k, s, n);
    return launched();
}
} // namespace

extern "C" int tsr_cuda_rows(void *stream, tsr_row_op_t op, int n, const tsr_rows_t *r)
{
    if ((int)op < 0 || op >= TSR_NROW_OPS || n < 0 || r->m < 1)
        return TSR_EINVAL;
    if (n == 0)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    int nout = tsr_row_info(op).nout;
    StreamBuffer buf(s); /* freed in stream order, after the kernels below */
    size_t off[TSR_ROW_MAX_OUT];
    for (int k = 0; k < nout; k++)
        if (tsr_row_staged(op, r, k))
            off[k] = buf.add_scratch((size_t)r->mout[k] * n * sizeof(float));
    if (int rc = buf.upload())
        return rc;
    tsr_rows_t staged = *r; /* what the function writes: the staged outputs' scratch */
    for (int k = 0; k < nout; k++)
        if (tsr_row_staged(op, r, k)) {
            staged.out[k] = buf.dev<float>(off[k]);
            staged.ldout[k] = r->mout[k];
        }
    int rc = run_tokens(s, op, n, staged);
    for (int k = 0; k < nout && !rc; k++)
        if (tsr_row_staged(op, r, k))
            rc = unstage(s, op, *r, k, staged.out[k], n);
    return rc;
}
