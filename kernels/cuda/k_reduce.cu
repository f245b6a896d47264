// k_reduce.cu - CUDA kernels and launchers of the reduce family (entries in k_reduce.c).
