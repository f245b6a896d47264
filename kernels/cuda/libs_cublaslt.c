/*
 * libs_cublaslt.c
 */
#include "kernels/cuda/cuda.h"
