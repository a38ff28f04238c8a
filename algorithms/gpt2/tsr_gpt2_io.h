/* GPT-2 driver I/O (no StarPU): model config and llm.c checkpoints, llm.c's
 * from-scratch init, token files and the batch loader, the decode table, the
 * debug-state oracle, the training state files. Library target tsr_gpt2io. */
#ifndef TSR_GPT2_IO_H
#define TSR_GPT2_IO_H

#include "gpt2_data.h"
#include "gpt2_debug_state.h"
#include "gpt2_init.h"
#include "gpt2_model_io.h"
#include "gpt2_rand.h"
#include "gpt2_tokenizer.h"
#include "gpt2_train_state.h"

#endif
