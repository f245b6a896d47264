/*
 * shape_tensor.c - shape functions of ops that create, move or reshape
 * data: Shape, Size, Constant, Reshape, Gather, Concat, Squeeze... They also
 * carry the known values of small integer tensors, which is how shapes
 * computed inside a graph (Shape -> Gather -> Concat -> Reshape) resolve.
 */
#include "infer.h"

#include <inttypes.h>

static void shape(struct ir_infer *x, struct ir_node *n)
{
	int r;
	const struct ir_dim *d = sx_dims(x, n, 0);
	r = sx_rank(x, n, 0);
	if (!d) {
		sx_out_unknown(x, n, 0, IR_INT64, "the rank of its input is not known");
		return;
	}
	/* opset 15: start and end slice the dims */
	int64_t start = sx_attr_int(x, n, "start", 0), end = sx_attr_int(x, n, "end", r);
	if (start < 0)
		start += r;
	if (end < 0)
		end += r;
	start = start < 0 ? 0 : start > r ? r : start;
	end = end < 0 ? 0 : end > r ? r : end;
	int count = end > start ? (int)(end - start) : 0;
	struct ir_dim len = sx_v(count);
	sx_out(x, n, 0, IR_INT64, 1, &len);
	sx_out_vals(x, n, 0, count, d + start);
}

const struct sx_entry sx_tensor_ops[] = {
	{ IR_OP_Shape, shape },
	{ -1, NULL },
};
