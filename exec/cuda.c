/*
 * cuda.c - the cuda backend: plans, runs, timing and profiles (exec.h).
 */
#include "exec/exec.h"
