/* Tessera compute layer, internal to compute/cuda: what every .cu file
 * shares. Argument checks, launch geometry and error mapping, block-wide
 * reductions, the cuBLAS transpose flag and strided-batched GEMM, and
 * StreamBuffer, the stream-ordered device copy of small host arrays (and
 * device scratch) that the kernels need. Everything is in an unnamed
 * namespace: each .cu gets its own copy and nothing is exported. */
#ifndef TSR_CUDA_UTIL_CUH
#define TSR_CUDA_UTIL_CUH
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "tsr_core.h"

namespace {

/* ---- launch geometry ------------------------------------------------------ */

/* Element-wise kernels: blocks of 32 rows (coalesced) x 8 columns. */
constexpr int kTileRows = 32, kTileCols = 8;
/* 1D kernels and block reductions. */
constexpr int kThreads = 256;
constexpr unsigned kMaxGridY = 65535u; /* also the limit of grid z */

inline dim3 block2d() { return dim3(kTileRows, kTileCols); }

/* A grid over (m rows, n columns) for block2d(); y is capped, so kernels
 * stride (TSR_CUDA_TILE_LOOP). m, n >= 1. */
inline dim3 grid2d(int m, int n)
{
    unsigned gx = (unsigned)((m + kTileRows - 1) / kTileRows);
    unsigned gy = (unsigned)((n + kTileCols - 1) / kTileCols);
    return dim3(gx, gy < kMaxGridY ? gy : kMaxGridY);
}

/* Blocks of `threads` covering n items (n >= 1), capped at 65535: kernels stride. */
inline unsigned blocks_for(long n, int threads)
{
    long b = (n + threads - 1) / threads;
    return b < (long)kMaxGridY ? (unsigned)b : kMaxGridY;
}

/* Element (r, c) of an m x n tile, striding over what the grid does not cover. */
#define TSR_CUDA_TILE_LOOP(r, c, m, n)                                                                 \
    for (int c = blockIdx.y * blockDim.y + threadIdx.y; c < (n); c += gridDim.y * blockDim.y)         \
        for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < (m); r += gridDim.x * blockDim.x)

/* ---- storage and arithmetic types -------------------------------------------
 * A kernel over storage type T computes in Compute<T>::type: bf16 tiles are
 * read into float, computed in float and stored rounded to nearest even
 * (__float2bfloat16, as tsr_float_to_bf16 on the host). */
template <typename T> struct Compute { using type = T; };
template <> struct Compute<__nv_bfloat16> { using type = float; };

__host__ __device__ inline float load(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
__host__ __device__ inline float load(const float *p) { return *p; }
__host__ __device__ inline double load(const double *p) { return *p; }
__host__ __device__ inline void store(__nv_bfloat16 *p, float v) { *p = __float2bfloat16(v); }
__host__ __device__ inline void store(float *p, float v) { *p = v; }
__host__ __device__ inline void store(double *p, double v) { *p = v; }

/* ---- argument checks and errors ------------------------------------------ */

/* t is not a storage type of the _typed entry points (float32 or bf16). */
inline bool bad_type(tsr_dtype_t t) { return t != TSR_FLOAT32 && t != TSR_BFLOAT16; }

/* An m x n column-major tile with leading dimension ld is malformed. */
inline bool bad_tile(int m, int n, int ld) { return m < 0 || n < 0 || ld < (m > 1 ? m : 1); }

/* Leading dimensions of C = op(A) op(B) (C m x n, op(A) m x k) that a GEMM
 * with m, n, k >= 1 would reject. */
inline bool bad_gemm_lds(tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k, int lda, int ldb, int ldc)
{
    int ra = ta == TSR_TRANS ? k : m, rb = tb == TSR_TRANS ? n : k;
    return lda < (ra > 1 ? ra : 1) || ldb < (rb > 1 ? rb : 1) || ldc < (m > 1 ? m : 1);
}

/* 0 or TSR_ERUNTIME for a CUDA status; a failure is also taken off the
 * thread's last-error slot, so that it does not fail the next call. */
inline int cuda_rc(cudaError_t e)
{
    if (e == cudaSuccess)
        return 0;
    (void)cudaGetLastError();
    return TSR_ERUNTIME;
}

/* After a kernel launch. */
inline int launched() { return cuda_rc(cudaGetLastError()); }

inline int cublas_rc(cublasStatus_t st) { return st == CUBLAS_STATUS_SUCCESS ? 0 : TSR_ERUNTIME; }

/* The stream of a cuBLAS handle (the void * the API takes). */
inline int handle_stream(void *cublas, cudaStream_t *s)
{
    return cublas_rc(cublasGetStream((cublasHandle_t)cublas, s));
}

/* ---- reductions ------------------------------------------------------------ */

struct MaxOp {
    template <typename T>
    __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};
struct SumOp {
    template <typename T>
    __device__ T operator()(T a, T b) const { return a + b; }
};

/* Over the 32 lanes of a warp; every lane gets the result. */
template <typename T, typename Op>
__device__ inline T warp_reduce(T v, Op op)
{
    for (int off = 16; off > 0; off >>= 1)
        v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

/* Over the kBlock threads of a 1D block (a multiple of 32, every thread
 * calling it); every thread gets the same result, the warps combined in
 * order. shared: kBlock / 32 elements, reusable right after the call. */
template <int kBlock, typename T, typename Op>
__device__ inline T block_reduce(T v, Op op, T *shared)
{
    v = warp_reduce(v, op);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads(); /* shared may still be read by a previous reduction */
    if (lane == 0)
        shared[warp] = v;
    __syncthreads();
    v = shared[0];
    for (int w = 1; w < kBlock / 32; w++)
        v = op(v, shared[w]);
    return v;
}

/* ---- cuBLAS GEMMs ----------------------------------------------------------- */

inline cublasOperation_t op(tsr_trans_t t) { return t == TSR_TRANS ? CUBLAS_OP_T : CUBLAS_OP_N; }

/* C_z = alpha op(A_z) op(B_z) + beta C_z for z < count, X_z = X + z * sx
 * elements, as one strided-batched call (m, n, k >= 1); ab: the type of A
 * and B, c: that of C. All float32: cublasSgemmStridedBatched (TF32 where the
 * handle's math mode allows it); else bf16 A and B with float32 accumulation
 * (CUBLAS_COMPUTE_32F) into C of type c. */
inline int gemm_strided_batched(cublasHandle_t h, tsr_dtype_t ab, tsr_dtype_t c, tsr_trans_t ta, tsr_trans_t tb,
                                int m, int n, int k, float alpha, const void *A, int lda, long long sa,
                                const void *B, int ldb, long long sb, float beta, void *C, int ldc, long long sc,
                                int count)
{
    if (ab == TSR_FLOAT32 && c == TSR_FLOAT32)
        return cublas_rc(cublasSgemmStridedBatched(h, op(ta), op(tb), m, n, k, &alpha, (const float *)A, lda, sa,
                                                   (const float *)B, ldb, sb, &beta, (float *)C, ldc, sc, count));
    cudaDataType_t ab_type = ab == TSR_FLOAT32 ? CUDA_R_32F : CUDA_R_16BF;
    cudaDataType_t c_type = c == TSR_FLOAT32 ? CUDA_R_32F : CUDA_R_16BF;
    return cublas_rc(cublasGemmStridedBatchedEx(h, op(ta), op(tb), m, n, k, &alpha, A, ab_type, lda, sa, B, ab_type,
                                                ldb, sb, &beta, C, c_type, ldc, sc, count, CUBLAS_COMPUTE_32F,
                                                CUBLAS_GEMM_DEFAULT));
}

/* ---- stream-ordered device memory ------------------------------------------ */

/* Let the device's default memory pool keep up to 256 MiB of freed blocks
 * across synchronisations (its default threshold, 0, hands them back to the
 * driver at every stream synchronisation, so that every task's
 * cudaMallocAsync would map memory anew). Once per device and .cu file. */
inline void keep_pool_memory()
{
    static unsigned long long done; /* one bit per device < 64 */
    int dev;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    if (dev < 0 || dev >= 64 || (__atomic_load_n(&done, __ATOMIC_RELAXED) >> dev) & 1ull)
        return;
    cudaMemPool_t pool;
    uint64_t keep = 256ull << 20;
    if (cudaDeviceGetDefaultMemPool(&pool, dev) != cudaSuccess ||
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess)
        (void)cudaGetLastError();
    __atomic_fetch_or(&done, 1ull << dev, __ATOMIC_RELAXED);
}

/* One stream-ordered device allocation holding copies of small host arrays
 * and/or uninitialised device scratch:
 *   StreamBuffer buf(stream);
 *   size_t a = buf.add_host(map, nmap * sizeof *map), w = buf.add_scratch(bytes);
 *   if (int rc = buf.upload()) return rc;
 *   kernel<<<..., stream>>>(buf.dev<tsr_colmap_t>(a), buf.dev<float>(w));
 * upload() packs the host arrays into one pageable host buffer and queues
 * cudaMallocAsync and one cudaMemcpyAsync on the stream; from pageable
 * memory cudaMemcpyAsync returns once the data is staged, so the caller's
 * arrays may be freed (and the host buffer is) as soon as upload() returns.
 * The destructor queues cudaFreeAsync on the same stream: the memory lives
 * until every kernel queued before it on the stream has run. */
class StreamBuffer {
  public:
    explicit StreamBuffer(cudaStream_t s) : s_(s) {}
    ~StreamBuffer()
    {
        if (dev_)
            (void)cuda_rc(cudaFreeAsync(dev_, s_));
    }
    StreamBuffer(const StreamBuffer &) = delete;
    StreamBuffer &operator=(const StreamBuffer &) = delete;

    /* A copy of bytes bytes at host; returns its offset. Host pieces must
     * all be added before the scratch pieces. */
    size_t add_host(const void *host, size_t bytes) { return add(host, bytes); }
    /* bytes bytes of device scratch; returns its offset. */
    size_t add_scratch(size_t bytes) { return add(nullptr, bytes); }

    /* Allocates and copies (see above): 0 or TSR_ERUNTIME. */
    int upload()
    {
        if (failed_)
            return TSR_ERUNTIME;
        if (size_ == 0)
            return 0;
        keep_pool_memory();
        int rc = cuda_rc(cudaMallocAsync(&dev_, size_, s_));
        if (rc) {
            dev_ = nullptr;
            return rc;
        }
        if (host_size_ == 0)
            return 0;
        char *h = (char *)calloc(1, host_size_); /* padding zeroed */
        if (!h)
            return TSR_ERUNTIME;
        for (int i = 0; i < npieces_; i++)
            if (pieces_[i].host)
                memcpy(h + pieces_[i].off, pieces_[i].host, pieces_[i].bytes);
        rc = cuda_rc(cudaMemcpyAsync(dev_, h, host_size_, cudaMemcpyHostToDevice, s_));
        free(h);
        return rc;
    }

    template <typename T>
    T *dev(size_t off) const { return (T *)((char *)dev_ + off); }

  private:
    static constexpr int kMaxPieces = 8;
    static constexpr size_t kAlign = 256; /* like cudaMalloc's */
    struct Piece { const void *host; size_t bytes, off; };

    size_t add(const void *host, size_t bytes)
    {
        size_t off = size_;
        if (npieces_ == kMaxPieces || (host && host_size_ != size_)) {
            failed_ = true; /* a bug of the caller: upload() fails */
            return 0;
        }
        pieces_[npieces_++] = Piece{ host, bytes, off };
        size_ = off + (bytes + kAlign - 1) / kAlign * kAlign;
        if (host)
            host_size_ = size_;
        return off;
    }

    cudaStream_t s_;
    void *dev_ = nullptr;
    size_t size_ = 0, host_size_ = 0;
    Piece pieces_[kMaxPieces];
    int npieces_ = 0;
    bool failed_ = false;
};

} /* namespace */

#endif
