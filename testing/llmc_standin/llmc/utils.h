/* stand-in for llm.c's llmc/ headers (llmc_cpu_cblas.sh copies llmc/*.h) */
