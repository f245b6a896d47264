/*
 * cmd_gpu.c - gpu, plan, time, profile.
 */
#include "shell.h"
