/*
 * libs_cudnn.c
 */
#include "kernels/cuda/cuda.h"
