# Fused linear layers (testing/test_linear.c): forward, backward, QKV /
# attention-projection reshape fusion, finite differences, bad arguments; one
# CTest entry per group (each well under 30 s on 2 cores), and the GEMM-based
# ops on 2 MPI ranks over 1x2 and 2x1 block-cyclic grids (fewer tile
# configurations there: tiny tasks pay MPI latency).
tsr_add_test_program(test_linear)
set(LINEAR $<TARGET_FILE:test_linear>)
tsr_add_test(linear_forward ${LINEAR} fwd)
tsr_add_test(linear_backward ${LINEAR} bwd)
tsr_add_test(linear_heads ${LINEAR} heads)
# the same with one GEMM per head (the codelets' way without a workspace)
tsr_add_test(linear_heads_per_head ${LINEAR} heads)
set_property(TEST linear_heads_per_head APPEND PROPERTY ENVIRONMENT "TSR_LINEAR_PER_HEAD=1")
tsr_add_test(linear_fd ${LINEAR} fd)
tsr_add_test(linear_errors ${LINEAR} errors)
foreach(grid 1x2 2x1)
  string(SUBSTRING ${grid} 0 1 P)
  tsr_add_mpi_test(linear_mpi2_${grid}_forward 2 ${LINEAR} fwd errors --P ${P})
  tsr_add_mpi_test(linear_mpi2_${grid}_backward 2 ${LINEAR} bwd --P ${P})
  tsr_add_mpi_test(linear_mpi2_${grid}_heads 2 ${LINEAR} heads fd --P ${P})
endforeach()
# time_fusion --tiles auto: tiles from the GEMM model under the fused QKV's rules
tsr_add_test(time_fusion_auto bash ${CMAKE_CURRENT_SOURCE_DIR}/check_time_fusion_auto.sh $<TARGET_FILE:time_fusion>
             ${CMAKE_CURRENT_BINARY_DIR}/time_fusion_auto_cache)
