// k_gemm.cu - CUDA kernels and launchers of the gemm family (entries in k_gemm.c).
