/* Encoder tile kernel: columns of source tiles added into columns of a
 * destination tile (token + position embeddings forward, scatter-add of
 * their gradients backward). */
#include <string.h>
#include "tsr_compute_encoder.h"

void tsr_cpu_gather_add_columns(int rows, int cols, float *dst, int ldd, tsr_write_t mode,
                                const float *const *src, const int *lds,
                                const tsr_colmap_t *map, int nmap)
{
    if (mode == TSR_OVERWRITE)
        for (int c = 0; c < cols; c++)
            memset(dst + (size_t)c * ldd, 0, (size_t)rows * sizeof *dst);
    /* entries are applied in order, so repeated destination columns
     * accumulate deterministically */
    for (int e = 0; e < nmap; e++) {
        float *d = dst + (size_t)map[e].dst_col * ldd;
        const float *s = src[map[e].src] + (size_t)map[e].src_col * lds[map[e].src];
        for (int r = 0; r < rows; r++)
            d[r] += s[r];
    }
}
