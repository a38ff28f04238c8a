/* Tessera: crossentropy algorithms (float32 transformer layers; see README, "Transformer conventions"). */
#ifndef TSR_CROSSENTROPY_H
#define TSR_CROSSENTROPY_H
#include "tsr_tile.h"
#include "tsr_algorithms.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
