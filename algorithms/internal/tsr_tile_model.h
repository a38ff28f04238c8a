/* Constants the tile models share (gemm_tiles.c, attention_tiles.c); not
 * installed: algorithms/*.h are the public headers, this folder is not. */
#ifndef TSR_TILE_MODEL_H
#define TSR_TILE_MODEL_H

/* Memory traffic one core sustains streaming tiles: a GEMM task that
 * accumulates into C (every k-tile after the first) reads and writes its C
 * tile; a REDUX addition reads two copies and writes one. */
#define TSR_TILE_BYTES_PER_S 8e9

#endif
