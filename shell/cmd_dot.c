/*
 * cmd_dot.c - dot: drawings through Graphviz.
 */
#include "shell.h"
