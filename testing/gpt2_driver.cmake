# tsr_gpt2 end to end: llm.c's first 10 d2 losses and val loss, save/resume,
# error messages on bad inputs; the same under mpirun -np 2 (data parallel).
set(GPT2_DRIVER_CHECK bash ${CMAKE_CURRENT_SOURCE_DIR}/check_gpt2_driver.sh $<TARGET_FILE:tsr_gpt2>)
tsr_add_test(gpt2_driver ${GPT2_DRIVER_CHECK} ${CMAKE_CURRENT_BINARY_DIR}/gpt2_driver_work)
if(TSR_USE_MPI)
  tsr_add_test(gpt2_driver_mpi2 ${GPT2_DRIVER_CHECK} ${CMAKE_CURRENT_BINARY_DIR}/gpt2_driver_mpi2_work
               ${TSR_MPIRUN} 2)
  # about 40 checks of two-rank runs: 3-4 minutes on 2 idle cores
  set_tests_properties(gpt2_driver_mpi2 PROPERTIES PROCESSORS 2 LABELS "mpi;slow" TIMEOUT 600)
  # sharded states: saved on 2 ranks, resumed on 1 and 4, and as single
  # files of versions 2 and 1 (ranks); a rank killed between its shard and
  # the commit leaves the previous state (kill)
  foreach(what ranks kill)
    tsr_add_test(gpt2_state_shards_${what} bash ${CMAKE_CURRENT_SOURCE_DIR}/check_gpt2_state_shards.sh ${what}
                 $<TARGET_FILE:tsr_gpt2> $<TARGET_FILE:gpt2_state_single>
                 ${CMAKE_CURRENT_BINARY_DIR}/gpt2_state_shards_${what}_work ${TSR_MPIRUN})
    set_tests_properties(gpt2_state_shards_${what} PROPERTIES PROCESSORS 2 LABELS mpi)
  endforeach()
endif()
# the side-by-side timing script against a stand-in reference trainer
tsr_add_test(time_gpt2_vs_reference bash ${CMAKE_CURRENT_SOURCE_DIR}/check_time_vs_reference.sh
             ${PROJECT_SOURCE_DIR}/timing/time_gpt2_vs_reference.sh $<TARGET_FILE:tsr_gpt2>
             ${CMAKE_CURRENT_BINARY_DIR}/time_vs_reference_work)
# llm.c's CPU trainer on the same BLAS: the build script on a stand-in
# checkout (needs Debian's OpenMP BLIS, the script's default)
if(EXISTS /usr/include/x86_64-linux-gnu/blis-openmp/cblas.h)
  tsr_add_test(llmc_cpu_cblas bash ${CMAKE_CURRENT_SOURCE_DIR}/check_llmc_cpu_cblas.sh
               ${PROJECT_SOURCE_DIR}/timing/llmc_cpu_cblas.sh ${CMAKE_CURRENT_SOURCE_DIR}/llmc_standin)
endif()
# the step against its GEMMs alone (time_gpt2_gemms and the alternating script)
tsr_add_test(time_gpt2_gemm_limit bash ${CMAKE_CURRENT_SOURCE_DIR}/check_time_gpt2_gemm_limit.sh
             ${PROJECT_SOURCE_DIR}/timing/time_gpt2_gemm_limit.sh ${CMAKE_BINARY_DIR})
# the CPU default tiles follow the worker count (the workers share this
# machine's cores; --steps 0 builds the model and stops): d2 B 32 T 64 halves
# its 512-token tiles on 16 workers, 124M B 4 T 64 halves tokens and features
foreach(case "d2;32;2;tok 512 ch 64 hid 256 voc 6288 heads 2 " "d2;32;16;tok 256 ch 64 hid 256 voc 6288 heads 2 "
             "124M;4;16;tok 128 ch 192 hid 768 voc 3144 heads 3 ")
  list(GET case 0 model)
  list(GET case 1 batch)
  list(GET case 2 workers)
  list(GET case 3 tiles)
  set(name gpt2_driver_default_tiles_${model}_${workers}workers)
  tsr_add_test(${name} $<TARGET_FILE:tsr_gpt2> --model ${model} -B ${batch} -T 64 --threads ${workers} --steps 0
               --val-every 0 --sample-every 0)
  set_tests_properties(${name} PROPERTIES PASS_REGULAR_EXPRESSION "tiles ${tiles}" FAIL_REGULAR_EXPRESSION "error")
endforeach()
# the replay of the steady steps per tile set (timing/replay_gpt2_tiles.sh)
tsr_add_test(replay_gpt2_tiles bash ${CMAKE_CURRENT_SOURCE_DIR}/check_replay_gpt2_tiles.sh
             ${PROJECT_SOURCE_DIR}/timing/replay_gpt2_tiles.sh $<TARGET_FILE:tsr_gpt2>)
# timing/torch_gpt2.py (PyTorch) against tsr_gpt2 from one checkpoint, fp32 and
# bf16 on CPUs (skipped without a python3 that has torch)
tsr_add_test(torch_gpt2 bash ${CMAKE_CURRENT_SOURCE_DIR}/check_torch_gpt2.sh $<TARGET_FILE:tsr_gpt2>
             ${PROJECT_SOURCE_DIR}/timing/torch_gpt2.py ${CMAKE_CURRENT_BINARY_DIR}/torch_gpt2_work)
set_tests_properties(torch_gpt2 PROPERTIES SKIP_RETURN_CODE 77 PROCESSORS 2)
# --precision bf16 against float32 on CPU workers (losses within 2e-2)
tsr_add_test(gpt2_bf16 bash ${CMAKE_CURRENT_SOURCE_DIR}/check_gpt2_bf16.sh $<TARGET_FILE:tsr_gpt2>
             ${CMAKE_CURRENT_BINARY_DIR}/gpt2_bf16_work)
if(TSR_USE_MPI)
  # under mpirun -np 2: a step sends half the float32 run's bytes
  tsr_add_test(gpt2_bf16_mpi2 bash ${CMAKE_CURRENT_SOURCE_DIR}/check_gpt2_bf16.sh $<TARGET_FILE:tsr_gpt2>
               ${CMAKE_CURRENT_BINARY_DIR}/gpt2_bf16_mpi2_work ${TSR_MPIRUN} 2)
  set_tests_properties(gpt2_bf16_mpi2 PROPERTIES PROCESSORS 2 LABELS mpi)
endif()
# the GPU node script (timing/gpu_node.sh): arguments and its loss comparison,
# on stand-in trainers
tsr_add_test(gpu_node_script bash ${CMAKE_CURRENT_SOURCE_DIR}/check_gpu_node.sh
             ${PROJECT_SOURCE_DIR}/timing/gpu_node.sh ${CMAKE_CURRENT_BINARY_DIR}/gpu_node_work)
# A hostile-input script (docs/files.md) on tsr_gpt2 and time_gemm, alone and
# (as MPI_NAME) under mpirun -np 2.
function(tsr_add_hostile_test name mpi_name script)
  set(args bash ${CMAKE_CURRENT_SOURCE_DIR}/${script} $<TARGET_FILE:tsr_gpt2> $<TARGET_FILE:time_gemm>)
  tsr_add_test(${name} ${args} ${CMAKE_CURRENT_BINARY_DIR}/${name}_work)
  if(TSR_USE_MPI)
    tsr_add_test(${mpi_name} ${args} ${CMAKE_CURRENT_BINARY_DIR}/${mpi_name}_work ${TSR_MPIRUN} 2)
    set_tests_properties(${mpi_name} PROPERTIES PROCESSORS 2 LABELS mpi)
  endif()
endfunction()
# planted links, a command in a chart's name, outputs onto inputs, stale
# temporaries, planted tile caches; under mpirun also SIGUSR1 to mpirun
# saving the state and every rank's chart names
tsr_add_hostile_test(hostile_files hostile_files_mpi2 check_hostile_files.sh)
# StarPU's variables, BLIS_ARCH_TYPE, a lost stdout; under mpirun ranks
# started with different options
tsr_add_hostile_test(hostile_env hostile_env_mpi check_hostile_env.sh)
# outputs that would block, a signal before the first step, the memory
# estimate, option ranges, workers above the cores, tile rules, a read-only
# or busy tile-model cache (tsr_gpt2, time_gemm, testing_gemm)
tsr_add_test(hostile_limits bash ${CMAKE_CURRENT_SOURCE_DIR}/check_hostile_limits.sh $<TARGET_FILE:tsr_gpt2>
             $<TARGET_FILE:time_gemm> $<TARGET_FILE:testing_gemm> ${CMAKE_CURRENT_BINARY_DIR}/hostile_limits_work)
# --train on a glob of shards: llm.c's losses on three shards, peak RSS that
# does not grow with 1 GB of data, a pattern matching nothing refused
set(GPT2_SHARDS_CHECK bash ${CMAKE_CURRENT_SOURCE_DIR}/check_gpt2_shards.sh $<TARGET_FILE:tsr_gpt2>
    ${PROJECT_SOURCE_DIR}/algorithms/gpt2/data ${CMAKE_CURRENT_SOURCE_DIR}/llmc_d2_3shards_losses.txt)
tsr_add_test(gpt2_shards ${GPT2_SHARDS_CHECK} ${CMAKE_CURRENT_BINARY_DIR}/gpt2_shards_work)
set_tests_properties(gpt2_shards PROPERTIES LABELS gpt2)
if(TSR_USE_MPI)
  tsr_add_test(gpt2_shards_mpi2 ${GPT2_SHARDS_CHECK} ${CMAKE_CURRENT_BINARY_DIR}/gpt2_shards_mpi2_work ${TSR_MPIRUN} 2)
  set_tests_properties(gpt2_shards_mpi2 PROPERTIES PROCESSORS 2 LABELS "gpt2;mpi;slow" TIMEOUT 600)
endif()
# inputs that disagree: a state resumed on another training file, --model
# against --load / --resume, a file too small for one batch, bad states found
# before the model is built; under mpirun ranks whose same-named files differ
# and a batch the ranks cannot split (the MPI variant runs those alone)
tsr_add_hostile_test(hostile_inputs hostile_inputs_mpi check_hostile_inputs.sh)
# GPT-2 medium, large and XL (350M, 774M, 1558M): the memory estimate each
# prints and its refusal under --max-memory; 350M's first step against its
# estimate (about 6 GB of memory, a minute on 2 cores: alone)
set(GPT2_PRESETS_CHECK bash ${CMAKE_CURRENT_SOURCE_DIR}/check_gpt2_presets.sh $<TARGET_FILE:tsr_gpt2>)
tsr_add_test(gpt2_presets_memory ${GPT2_PRESETS_CHECK} ${CMAKE_CURRENT_BINARY_DIR}/gpt2_presets_work refuse)
set_tests_properties(gpt2_presets_memory PROPERTIES LABELS gpt2)
tsr_add_test(gpt2_350M_step ${GPT2_PRESETS_CHECK} ${CMAKE_CURRENT_BINARY_DIR}/gpt2_350M_work step)
set_tests_properties(gpt2_350M_step PROPERTIES LABELS "gpt2;slow" RUN_SERIAL TRUE TIMEOUT 240)
