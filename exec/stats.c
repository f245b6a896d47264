/*
 * stats.c - tensor statistics for inspection (and, later, comparisons).
 */
#include "exec/exec.h"

int exec_tensor_stats(const struct ir_tensor *t, struct kern_stats *st, struct ir_diag *d)
{
	if (t->dtype == IR_STRING)
		return ir_diag_err(d, IR_ERR, "string tensors have no numeric statistics");
	if (ir_tensor_check(t, d))   /* a truncated mapped file would kill the process */
		return IR_ERR;
	if (!cpu_stats(t->dtype, ir_tensor_data(t), t->numel, st))
		return ir_diag_err(d, IR_EINTR, "interrupted after %llu of %llu elements",
				   (unsigned long long)st->count, (unsigned long long)t->numel);
	return 0;
}
