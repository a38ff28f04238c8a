/* The row ops on a GPU: one thread per token runs the op's function (the
 * same code as on the CPU). */
#include "tsr_compute_rows.h"
#include "tsr_cuda_util.cuh"

namespace {
#define TSR_ROW_KERNEL(name, nin, nout, flops)                                                               \
    __global__ void row_##name##_kernel(tsr_rows_t r, int n)                                                 \
    {                                                                                                        \
        for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < n; t += gridDim.x * blockDim.x)             \
            tsr_row_##name(&r, t);                                                                           \
    }
TSR_ROW_OPS(TSR_ROW_KERNEL)
#undef TSR_ROW_KERNEL
} // namespace

extern "C" int tsr_cuda_rows(void *stream, tsr_row_op_t op, int n, const tsr_rows_t *r)
{
    if (n < 0 || r->m < 1)
        return TSR_EINVAL;
    if (n == 0)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    switch (op) {
#define TSR_ROW_LAUNCH(name, nin, nout, flops)                                                               \
    case TSR_ROW_##name:                                                                                     \
        row_##name##_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(*r, n);                             \
        return launched();
        TSR_ROW_OPS(TSR_ROW_LAUNCH)
#undef TSR_ROW_LAUNCH
    default:
        return TSR_EINVAL;
    }
}
