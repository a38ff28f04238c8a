# flash-style causal attention (float32): forward / backward against a
# plain-loop reference, causal exactness, finite differences, bad arguments
tsr_add_test_program(test_attention)
set(TSR_ATTN $<TARGET_FILE:test_attention>)
foreach(group tiles large causal fd errors)
  tsr_add_test(attention_${group} ${TSR_ATTN} ${group})
endforeach()
tsr_add_mpi_test(attention_mpi2_1x2 2 ${TSR_ATTN} mpi 1)
tsr_add_mpi_test(attention_mpi2_2x1 2 ${TSR_ATTN} mpi 2)
tsr_add_mpi_test(attention_errors_mpi2 2 ${TSR_ATTN} errors)
