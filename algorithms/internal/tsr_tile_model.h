/* Constants the tile models share (gemm_tiles.c, attention_tiles.c); not
 * installed: the public headers are the .h files directly in algorithms/. */
#ifndef TSR_TILE_MODEL_H
#define TSR_TILE_MODEL_H

/* Memory traffic one core sustains streaming tiles: a GEMM task that
 * accumulates into C (every k-tile after the first) reads and writes its C
 * tile; a REDUX addition reads two copies and writes one. */
#define TSR_TILE_BYTES_PER_S 8e9

#endif
