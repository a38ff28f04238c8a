# the command line and the output of the test and timing programs
set(TSR_DRIVERS $<TARGET_FILE:testing_gemm> $<TARGET_FILE:time_gemm> $<TARGET_FILE:time_attention>
    $<TARGET_FILE:time_fusion> $<TARGET_FILE:time_blas_cold> $<TARGET_FILE:time_gpt2_gemms>)
# integers that do not fit an int, trailing characters, reals that are not finite: exit 2
tsr_add_test(cli_options bash ${CMAKE_CURRENT_SOURCE_DIR}/check_options.sh ${TSR_DRIVERS})
# stdout that cannot be written (> /dev/full): a message and a non-zero exit
tsr_add_test(cli_output_errors bash ${CMAKE_CURRENT_SOURCE_DIR}/check_output_errors.sh ${TSR_DRIVERS})
# time_fusion whose options skip every case: exit 2, not 0 with no row
tsr_add_test(time_fusion_nothing_ran bash ${CMAKE_CURRENT_SOURCE_DIR}/check_time_fusion_skipped.sh
             $<TARGET_FILE:time_fusion>)
