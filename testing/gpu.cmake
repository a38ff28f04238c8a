# Every op test and the GPT-2 oracle on the GPU (label gpu): with no CPU
# worker (every task needs its CUDA implementation) and with CPUs + GPU.
# check_gpu.sh fails a test whose CUDA workers executed no task, and skips
# (exit 77) on a machine without an NVIDIA GPU.
if(TSR_USE_CUDA AND STARPU_HAS_CUDA)
  function(tsr_add_gpu_test name) # tsr_add_gpu_test(name command args...)
    foreach(mode gpu-only mixed)
      tsr_add_test(gpu_${mode}_${name} bash ${CMAKE_CURRENT_SOURCE_DIR}/check_gpu.sh ${mode} ${ARGN})
      set_tests_properties(gpu_${mode}_${name} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
    endforeach()
  endfunction()
  tsr_add_gpu_test(gemm $<TARGET_FILE:testing_gemm> --check --dtype s,d --m 67,200 --n 53 --k 45,130
                   --mb 16,64 --nb 64 --kb 32 --transA N,T --transB N,T --accum ordered,redux)
  tsr_add_gpu_test(layernorm $<TARGET_FILE:test_layernorm>)
  tsr_add_gpu_test(linear_forward $<TARGET_FILE:test_linear> fwd)
  tsr_add_gpu_test(linear_backward $<TARGET_FILE:test_linear> bwd)
  tsr_add_gpu_test(linear_heads $<TARGET_FILE:test_linear> heads)
  tsr_add_gpu_test(attention_tiles $<TARGET_FILE:test_attention> tiles)
  tsr_add_gpu_test(attention_causal $<TARGET_FILE:test_attention> causal)
  tsr_add_gpu_test(encoder $<TARGET_FILE:test_encoder>)
  tsr_add_gpu_test(crossentropy $<TARGET_FILE:test_crossentropy>)
  tsr_add_gpu_test(adamw $<TARGET_FILE:test_adamw>)
  tsr_add_gpu_test(bf16 $<TARGET_FILE:test_bf16> gpu)
  tsr_add_gpu_test(gpt2_oracle ${GPT2_ORACLE})
  tsr_add_gpu_test(gpt2_oracle_redux ${GPT2_ORACLE} 8 24 100 128 1 1)
  # several GPUs' data parallelism, on one GPU: two CUDA workers with a
  # sub-batch each, and two MPI ranks sharing the GPU
  set(TSR_GPU_CHECK bash ${CMAKE_CURRENT_SOURCE_DIR}/check_gpu.sh)
  tsr_add_test(gpu_two-workers_gpt2_oracle_subbatch ${TSR_GPU_CHECK} two-workers ${GPT2_ORACLE} 16 32 96 200 2 0 2)
  set_tests_properties(gpu_two-workers_gpt2_oracle_subbatch PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
  if(TSR_USE_MPI)
    tsr_add_test(gpu_mpi2_gpt2_oracle ${TSR_GPU_CHECK} gpu-only ${TSR_MPIRUN} 2 ${GPT2_ORACLE})
    set_tests_properties(gpu_mpi2_gpt2_oracle PROPERTIES LABELS "gpu;mpi" SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
  endif()
endif()
