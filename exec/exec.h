/*
 * exec.h - running graphs: backends, plans, timing and the comparison of
 * numbers. The only public header of exec/. (The backends arrive with the
 * CPU executor; what is here now serves inspection.)
 */
#ifndef OGSH_EXEC_H
#define OGSH_EXEC_H

#include "ir/ir.h"
#include "kernels/kernels.h"

/*
 * Statistics of a tensor's elements. String tensors have none (an error);
 * a tensor with no elements gives count 0 and NaN min/max. Returns 0,
 * IR_EINTR if stopped by Ctrl-C, or IR_ERR.
 */
int exec_tensor_stats(const struct ir_tensor *t, struct kern_stats *st, struct ir_diag *d);

#endif
