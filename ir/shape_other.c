/*
 * shape_other.c - shape functions of control flow (If, Loop, Scan),
 * sequences and optionals, and the remaining ops of the default domain.
 */
#include "infer.h"

#include <inttypes.h>

const struct sx_entry sx_other[] = {
	{ -1, NULL },
};
