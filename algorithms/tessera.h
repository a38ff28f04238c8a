/* Tessera: tiled tensor engine on StarPU. Umbrella header (here, in the top
 * library layer, because it includes every layer's public header). */
#ifndef TESSERA_H
#define TESSERA_H
#include "tsr_build_config.h"
#include "tsr_core.h"
#include "tsr_bf16.h"
#include "tsr_tile.h"
#include "tsr_algorithms.h"
#include "tsr_layernorm.h"
#include "tsr_linear.h"
#include "tsr_attention.h"
#include "tsr_encoder.h"
#include "tsr_crossentropy.h"
#include "tsr_adamw.h"
#endif
