// k_tensor.cu - CUDA kernels and launchers of the tensor family (entries in k_tensor.c).
