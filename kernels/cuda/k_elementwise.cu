// k_elementwise.cu - CUDA kernels and launchers of the elementwise family (entries in k_elementwise.c).
