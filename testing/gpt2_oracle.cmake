# GPT-2 against llm.c's micro reference (shared/reference, bundled in
# algorithms/gpt2/data): logits, loss, every gradient, 10-step trajectory.
tsr_add_test_program(test_gpt2_oracle)
target_link_libraries(test_gpt2_oracle PRIVATE tsr_gpt2model)
set(GPT2_ORACLE $<TARGET_FILE:test_gpt2_oracle> ${PROJECT_SOURCE_DIR}/algorithms/gpt2/data/micro_init.bin
    ${PROJECT_SOURCE_DIR}/algorithms/gpt2/data/micro_debug_state.bin
    ${PROJECT_SOURCE_DIR}/algorithms/gpt2/data/micro_losses.txt)
# micro: C 64, NH 4 (hd 16), 4C 256, Vp 512, B 4, T 32
# (query and key tiles default to min(tok, T); the projections are fused with
# the head reshape when both equal a tok dividing T, split/merge otherwise)
#                                      tok ch hid voc heads redux sub-batches [q k]
tsr_add_test(gpt2_oracle_default   ${GPT2_ORACLE})
tsr_add_test(gpt2_oracle_tiled     ${GPT2_ORACLE} 16 32 96 200 2 0)
tsr_add_test(gpt2_oracle_redux     ${GPT2_ORACLE} 8 24 100 128 1 1)
tsr_add_test(gpt2_oracle_one_tile  ${GPT2_ORACLE} 32 64 256 512 4 0)
tsr_add_test(gpt2_oracle_subbatch  ${GPT2_ORACLE} 16 32 96 200 2 0 2)
tsr_add_test(gpt2_oracle_subbatch4 ${GPT2_ORACLE} 32 64 256 128 4 1 4)
# each sub-batch's tasks pinned to its own CPU worker, as to its own GPU on a
# node of several (worker groups: TSR_CPU_WORKER_GROUPS)
tsr_add_test(gpt2_oracle_subbatch_groups ${GPT2_ORACLE} 16 32 96 200 2 0 2)
set_property(TEST gpt2_oracle_subbatch_groups APPEND PROPERTY ENVIRONMENT TSR_CPU_WORKER_GROUPS=1 STARPU_NCPU=2)
# four groups: the LM head's parts of the token embedding's gradient summed
# by a tree over the groups, the embedding's tasks on its home group
# (tsr_gpt2_wte_summed_early)
tsr_add_test(gpt2_oracle_subbatch4_groups ${GPT2_ORACLE} 32 64 256 128 4 1 4)
set_property(TEST gpt2_oracle_subbatch4_groups APPEND PROPERTY ENVIRONMENT TSR_CPU_WORKER_GROUPS=1 STARPU_NCPU=4)
# the same, the layers of the 4 sub-batches submitted by 4 threads (the
# default: 2), and by one in turn
tsr_add_test(gpt2_oracle_subbatch4_threads ${GPT2_ORACLE} 32 64 256 128 4 1 4)
set_property(TEST gpt2_oracle_subbatch4_threads APPEND PROPERTY ENVIRONMENT TSR_CPU_WORKER_GROUPS=1 STARPU_NCPU=4
             TSR_SUBMIT_THREADS=4)
tsr_add_test(gpt2_oracle_subbatch4_one_thread ${GPT2_ORACLE} 32 64 256 128 4 1 4)
set_property(TEST gpt2_oracle_subbatch4_one_thread APPEND PROPERTY ENVIRONMENT TSR_CPU_WORKER_GROUPS=1 STARPU_NCPU=4
             TSR_SUBMIT_THREADS=1)
# token tiles of two whole sequences, attention tiles of their own
tsr_add_test(gpt2_oracle_split     ${GPT2_ORACLE} 64 32 96 200 2 0 1 8 16)
tsr_add_test(gpt2_oracle_split_qk  ${GPT2_ORACLE} 16 64 256 512 1 1 2 32 8)
# all heads in a tile and token tiles of several sequences (the GPU's
# defaults): an attention tile holds the heads of all those sequences
tsr_add_test(gpt2_oracle_seq_heads ${GPT2_ORACLE} 128 64 256 512 4 0)
tsr_add_test(gpt2_oracle_seq_heads_qk ${GPT2_ORACLE} 64 32 96 200 4 1 1 16 8)
tsr_add_mpi_test(gpt2_oracle_mpi2 2 ${GPT2_ORACLE} 16 32 64 256 2 0)
tsr_add_mpi_test(gpt2_oracle_split_mpi2 2 ${GPT2_ORACLE} 64 32 64 256 2 0 1 16 8)
tsr_add_mpi_test(gpt2_oracle_seq_heads_mpi2 2 ${GPT2_ORACLE} 64 64 256 512 4 0)
# one sequence per rank (the default tiles never span two ranks' samples);
# with a sub-batch per rank each rank computes its own weight gradients
tsr_add_mpi_test(gpt2_oracle_mpi4 4 ${GPT2_ORACLE})
tsr_add_mpi_test(gpt2_oracle_rank_grads_mpi2 2 ${GPT2_ORACLE} 32 32 96 200 2 0 2)
# a sub-batch per rank on 4 ranks: the gradients summed by a tree, each tile's
# rooted on its owner (tsr_sum_tree)
tsr_add_mpi_test(gpt2_oracle_rank_grads_mpi4 4 ${GPT2_ORACLE} 32 32 96 200 2 0 4)
# 2 ranks of 2 CPU worker groups (as 2 nodes of 2 GPUs): each rank's 2
# sub-batches pinned to its own groups, the gradients summed over all 4
tsr_add_mpi_test(gpt2_oracle_groups_mpi2 2 ${GPT2_ORACLE} 32 32 96 200 2 0 4)
if(TSR_USE_MPI)
  set_property(TEST gpt2_oracle_groups_mpi2 APPEND PROPERTY ENVIRONMENT TSR_CPU_WORKER_GROUPS=1 STARPU_NCPU=2)
endif()
# (each rank's 2 sub-batches submitted by 2 threads, the default, the
# layer's parameters received first: tsr_desc_receive_read); the same by
# one thread in turn
tsr_add_mpi_test(gpt2_oracle_groups_mpi2_one_thread 2 ${GPT2_ORACLE} 32 32 96 200 2 0 4)
if(TSR_USE_MPI)
  set_property(TEST gpt2_oracle_groups_mpi2_one_thread APPEND PROPERTY ENVIRONMENT TSR_CPU_WORKER_GROUPS=1
               STARPU_NCPU=2 TSR_SUBMIT_THREADS=1)
endif()
# 8 token tiles a rank, 16 vocabulary columns: the token embedding's columns
# made after the backward take their LM-head part in two halves of the token
# tiles (WTE_SPLIT_TOKEN_TILES)
tsr_add_mpi_test(gpt2_oracle_wte_halves_mpi2 2 ${GPT2_ORACLE} 8 32 96 32 2 0 2)
# the tile chooser's model (gpt2_tiles_auto.c): the step's task count, the
# submitting thread's measured cost a task and the floor it puts on a step
tsr_add_test_program(test_gpt2_tiles_model)
target_link_libraries(test_gpt2_tiles_model PRIVATE tsr_gpt2model)
tsr_add_test(gpt2_tiles_model ${CMAKE_CURRENT_BINARY_DIR}/test_gpt2_tiles_model
             ${CMAKE_CURRENT_BINARY_DIR}/gpt2_tiles_model_cache)
