# GPT-2 driver I/O (library tsr_gpt2io in algorithms/gpt2): checkpoints,
# llm.c-exact init, token files + batch order, decode table, debug state.
# Data is read from the repository (algorithms/gpt2/data), never ../shared.
set(GPT2_DATA ${PROJECT_SOURCE_DIR}/algorithms/gpt2/data)
set(GPT2_TMP ${CMAKE_CURRENT_BINARY_DIR}/gpt2_tmp)

foreach(t test_gpt2_init test_gpt2_model_io test_gpt2_data test_gpt2_tokenizer test_gpt2_debug_state)
  add_executable(${t} ${t}.c)
  target_link_libraries(${t} PRIVATE tsr_gpt2io tsr_params m)
endforeach()

tsr_add_test(gpt2_init ${CMAKE_CURRENT_BINARY_DIR}/test_gpt2_init ${GPT2_DATA})
# bit-exactness oracle: llm.c's init of the L=2/C=128 model, seed 42 (llmc_baseline.md)
tsr_add_test(gpt2_init_d2_sha256 ${CMAKE_COMMAND}
  -DPROGRAM=$<TARGET_FILE:test_gpt2_init> "-DARGS=--write d2 42 ${GPT2_TMP}_d2_init.bin"
  -DFILE=${GPT2_TMP}_d2_init.bin -DSIZE=27376640
  -DSHA256=59d06f362040009a89d0975879dbab63048edc86cceb79f088434255fd67c389
  -P ${PROJECT_SOURCE_DIR}/algorithms/gpt2/check_sha256.cmake)
# the same for GPT-2 124M (llmc_baseline.md): writes and hashes 498 MB, ~10 s
tsr_add_test(gpt2_init_124M_sha256 ${CMAKE_COMMAND}
  -DPROGRAM=$<TARGET_FILE:test_gpt2_init> "-DARGS=--write 124M 42 ${GPT2_TMP}_124M_init.bin"
  -DFILE=${GPT2_TMP}_124M_init.bin -DSIZE=497904640
  -DSHA256=b0fc46f8be6749ebc8afe317be4e904497475ede13b8703dff800e22044c149b
  -P ${PROJECT_SOURCE_DIR}/algorithms/gpt2/check_sha256.cmake)
set_tests_properties(gpt2_init_124M_sha256 PROPERTIES LABELS "gpt2;slow")
tsr_add_test(gpt2_model_io ${CMAKE_CURRENT_BINARY_DIR}/test_gpt2_model_io ${GPT2_DATA} ${GPT2_TMP}_model_io)
tsr_add_test(gpt2_data ${CMAKE_CURRENT_BINARY_DIR}/test_gpt2_data ${GPT2_DATA} ${GPT2_TMP}_data)
tsr_add_test(gpt2_tokenizer ${CMAKE_CURRENT_BINARY_DIR}/test_gpt2_tokenizer ${GPT2_DATA} ${GPT2_TMP}_tokenizer)
tsr_add_test(gpt2_debug_state ${CMAKE_CURRENT_BINARY_DIR}/test_gpt2_debug_state ${GPT2_DATA} ${GPT2_TMP}_debug_state)
# a sharded training state as one single-file state of version 2 (the
# format before sharding), for check_gpt2_state_shards.sh
add_executable(gpt2_state_single gpt2_state_single.c)
target_link_libraries(gpt2_state_single PRIVATE tsr_gpt2io m)
# mutation fuzzing of the six file loaders, 5000 files each in CI (the long run:
# fuzz_gpt2_loaders DATA WORKDIR 1000000)
add_executable(fuzz_gpt2_loaders fuzz_gpt2_loaders.c)
target_link_libraries(fuzz_gpt2_loaders PRIVATE tsr_gpt2io m)
file(MAKE_DIRECTORY ${GPT2_TMP}_fuzz)
tsr_add_test(gpt2_loaders_fuzz ${CMAKE_CURRENT_BINARY_DIR}/fuzz_gpt2_loaders ${GPT2_DATA} ${GPT2_TMP}_fuzz 5000)
set_tests_properties(gpt2_init gpt2_init_d2_sha256 gpt2_model_io gpt2_data gpt2_tokenizer
  gpt2_debug_state PROPERTIES LABELS gpt2)
