# timing/cluster/tsr_gpt2.sbatch on a real one-node Slurm that the test starts
# and stops (docs/cluster.md): the time limit's USR1 saves the state, the job
# requeues itself and resumes with the same losses; with mpirun as the
# launcher too. Skipped (77) without slurm-wlm and munge or when not root.
# Serial: its step count is sized from a calibration run on an idle machine.
set(TSR_SLURM_MPIRUN "")
if(TSR_USE_MPI)
  set(TSR_SLURM_MPIRUN ${MPIEXEC_EXECUTABLE})
endif()
tsr_add_test(slurm_requeue bash ${CMAKE_CURRENT_SOURCE_DIR}/check_slurm.sh
             ${PROJECT_SOURCE_DIR}/timing/cluster/tsr_gpt2.sbatch $<TARGET_FILE:tsr_gpt2> ${TSR_SLURM_MPIRUN})
set_tests_properties(slurm_requeue PROPERTIES LABELS "slurm;slow" SKIP_RETURN_CODE 77 RUN_SERIAL TRUE TIMEOUT 480)
