# LayerNorm forward/backward and residual add (test_layernorm.c): references,
# finite differences, bad arguments; on 1 rank and on 2 ranks (1x2 and 2x1
# block-cyclic grids, parameters also on a single rank).
tsr_add_test_program(test_layernorm)
tsr_add_test(layernorm ${CMAKE_CURRENT_BINARY_DIR}/test_layernorm)
tsr_add_mpi_test(layernorm_mpi2_1x2 2 $<TARGET_FILE:test_layernorm> 1)
tsr_add_mpi_test(layernorm_mpi2_2x1 2 $<TARGET_FILE:test_layernorm> 2)
