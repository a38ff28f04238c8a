# The simulated cluster (timing/simulation, docs/simulation.md): builds StarPU
# on SimGrid and a simulation build of Tessera (both cached), then checks one
# simulated node against the measured run its models came from and the
# sharded state on two simulated nodes. Skipped without SimGrid's tools.
if(TSR_USE_MPI)
  tsr_add_test(simulation bash ${PROJECT_SOURCE_DIR}/timing/simulation/check.sh ${PROJECT_BINARY_DIR}/simulation-build)
  set_tests_properties(simulation PROPERTIES LABELS "slow;simulation" TIMEOUT 1200 SKIP_RETURN_CODE 77)
endif()
