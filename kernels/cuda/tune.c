/*
 * tune.c
 */
#include "kernels/cuda/cuda.h"
