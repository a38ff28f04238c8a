/* Tessera: layernorm algorithms (float32 transformer layers; see README, "Transformer conventions"). */
#ifndef TSR_LAYERNORM_H
#define TSR_LAYERNORM_H
#include "tsr_tile.h"
#include "tsr_algorithms.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
