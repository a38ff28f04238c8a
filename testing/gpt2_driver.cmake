# tsr_gpt2 end to end: llm.c's first 10 d2 losses and val loss, save/resume,
# error messages on bad inputs; the same under mpirun -np 2 (data parallel).
set(GPT2_DRIVER_CHECK bash ${CMAKE_CURRENT_SOURCE_DIR}/check_gpt2_driver.sh $<TARGET_FILE:tsr_gpt2>)
tsr_add_test(gpt2_driver ${GPT2_DRIVER_CHECK} ${CMAKE_CURRENT_BINARY_DIR}/gpt2_driver_work)
if(TSR_USE_MPI)
  tsr_add_test(gpt2_driver_mpi2 ${GPT2_DRIVER_CHECK} ${CMAKE_CURRENT_BINARY_DIR}/gpt2_driver_mpi2_work
               ${TSR_MPIRUN} 2)
  set_tests_properties(gpt2_driver_mpi2 PROPERTIES PROCESSORS 2 LABELS mpi)
endif()
# the side-by-side timing script against a stand-in reference trainer
tsr_add_test(time_gpt2_vs_reference bash ${CMAKE_CURRENT_SOURCE_DIR}/check_time_vs_reference.sh
             ${PROJECT_SOURCE_DIR}/timing/time_gpt2_vs_reference.sh $<TARGET_FILE:tsr_gpt2>
             ${CMAKE_CURRENT_BINARY_DIR}/time_vs_reference_work)
# the step against its GEMMs alone (time_gpt2_gemms and the alternating script)
tsr_add_test(time_gpt2_gemm_limit bash ${CMAKE_CURRENT_SOURCE_DIR}/check_time_gpt2_gemm_limit.sh
             ${PROJECT_SOURCE_DIR}/timing/time_gpt2_gemm_limit.sh ${CMAKE_BINARY_DIR})
