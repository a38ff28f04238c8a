# The simulated cluster (timing/simulation, docs/simulation.md): builds StarPU
# on SimGrid and a simulation build of Tessera (both cached), then checks one
# simulated node against the measured run its models came from and the
# sharded state on two simulated nodes. Skipped without SimGrid's tools.
if(TSR_USE_MPI)
  tsr_add_test(simulation bash ${PROJECT_SOURCE_DIR}/timing/simulation/check.sh ${PROJECT_BINARY_DIR}/simulation-build)
  set_tests_properties(simulation PROPERTIES LABELS "slow;simulation" TIMEOUT 1200 SKIP_RETURN_CODE 77
                       RESOURCE_LOCK simulation-build)
  # a node of two simulated H200s (copies of the measured one), GPT-2 124M
  # B8 T64 one sub-batch a GPU, against one GPU; same build (one at a time)
  tsr_add_test(simulation_2gpu bash ${PROJECT_SOURCE_DIR}/timing/simulation/check.sh
               ${PROJECT_BINARY_DIR}/simulation-build 2gpu)
  set_tests_properties(simulation_2gpu PROPERTIES LABELS "slow;simulation" TIMEOUT 1200 SKIP_RETURN_CODE 77
                       RESOURCE_LOCK simulation-build)
endif()
