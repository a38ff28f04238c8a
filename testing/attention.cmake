# flash-style causal attention (float32): forward / backward against a
# plain-loop reference, causal exactness, finite differences, bad arguments
tsr_add_test_program(test_attention)
set(TSR_ATTN $<TARGET_FILE:test_attention>)
tsr_add_test(attention_tiles ${TSR_ATTN} tiles)
tsr_add_test(attention_large ${TSR_ATTN} large)
tsr_add_test(attention_causal ${TSR_ATTN} causal)
tsr_add_test(attention_fd ${TSR_ATTN} fd)
tsr_add_test(attention_errors ${TSR_ATTN} errors)
tsr_add_mpi_test(attention_mpi2_1x2 2 ${TSR_ATTN} mpi 1)
tsr_add_mpi_test(attention_mpi2_2x1 2 ${TSR_ATTN} mpi 2)
tsr_add_mpi_test(attention_errors_mpi2 2 ${TSR_ATTN} errors)
