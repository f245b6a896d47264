// k_conv.cu - CUDA kernels and launchers of the conv family (entries in k_conv.c).
