/*
 * qweight.c - recognising quantized weights (declared in qweight.h).
 */
#include "passes/qweight.h"

#include <stdio.h>

bool qw_quant_dtype(int dtype)
{
	switch (dtype) {
	case IR_INT8: case IR_UINT8: case IR_INT16: case IR_UINT16: case IR_INT32:
	case IR_INT4: case IR_UINT4: case IR_INT2: case IR_UINT2:
	case IR_F8E4M3FN: case IR_F8E4M3FNUZ: case IR_F8E5M2: case IR_F8E5M2FNUZ: case IR_F4E2M1:
		return true;
	default:
		return false;
	}
}

/* The constant behind v (initializer or Constant node), not one the user may override. */
static const struct ir_tensor *fixed_const(const struct ir_value *v)
{
	if (!v || v->is_input)
		return NULL;
	return ir_value_const(v);
}

/* The output type of a QuantizeLinear: its zero point's, else the output_dtype attribute, else uint8. */
static int q_out_dtype(const struct ir_node *q)
{
	const struct ir_value *z = q->n_inputs > 2 ? q->inputs[2] : NULL;
	const struct ir_tensor *zt = z ? ir_value_const(z) : NULL;
	if (zt)
		return zt->dtype;
	if (z && z->type.kind == IR_TYPE_TENSOR && z->type.elem)
		return z->type.elem;
	int64_t od = ir_node_attr_int(q, "output_dtype", 0);
	return od > 0 && od < IR_DTYPE_COUNT ? (int)od : IR_UINT8;
}

bool qw_node_keeps(const struct ir_node *n, int *dtype, char *why, size_t size)
{
	if (n->n_inputs < 1)
		return false;
	const struct ir_value *x = n->inputs[0];
	if (n->op == IR_OP_DequantizeLinear) {
		const struct ir_tensor *t = fixed_const(x);
		if (t && qw_quant_dtype(t->dtype)) {
			if (dtype)
				*dtype = t->dtype;
			snprintf(why, size, "weight is quantized (DequantizeLinear of %s '%s'): kept", ir_dtype_name(t->dtype),
				 x->name);
			return true;
		}
		/* DQ(Q(constant)): the pair is the weight's quantization */
		const struct ir_node *q = x ? x->producer : NULL;
		if (q && q->op == IR_OP_QuantizeLinear && q->n_inputs >= 1) {
			const struct ir_tensor *f = fixed_const(q->inputs[0]);
			if (f && ir_dtype_is_float(f->dtype)) {
				if (dtype)
					*dtype = q_out_dtype(q);
				snprintf(why, size, "weight is quantized (DequantizeLinear of QuantizeLinear of %s '%s'): kept",
					 ir_dtype_name(f->dtype), q->inputs[0]->name);
				return true;
			}
		}
		return false;
	}
	if (n->op == IR_OP_QuantizeLinear && n->n_outputs >= 1 && n->outputs[0]) {
		const struct ir_tensor *f = fixed_const(x);
		if (!f || !ir_dtype_is_float(f->dtype))
			return false;
		const struct ir_value *y = n->outputs[0];
		for (size_t u = 0; u < y->n_uses; u++) {
			const struct ir_node *r = y->uses[u].node;
			if (r->op == IR_OP_DequantizeLinear && y->uses[u].slot == 0) {
				if (dtype)
					*dtype = q_out_dtype(n);
				snprintf(why, size, "weight is quantized (QuantizeLinear of %s '%s' read by a DequantizeLinear): "
					 "kept", ir_dtype_name(f->dtype), x->name);
				return true;
			}
		}
	}
	return false;
}

static bool shape_only(int op)
{
	return op == IR_OP_Reshape || op == IR_OP_Transpose || op == IR_OP_Flatten || op == IR_OP_Squeeze ||
	       op == IR_OP_Unsqueeze || op == IR_OP_Identity;
}

bool qw_value_quantized(const struct ir_value *v, char *why, size_t size)
{
	/* a chain of shape-only ops is short in practice; the bound keeps a hostile graph cheap */
	for (int hops = 0; v && v->producer && hops < 16; hops++) {
		const struct ir_node *p = v->producer;
		if (p->op == IR_OP_DequantizeLinear)
			return qw_node_keeps(p, NULL, why, size);
		if (p->op < 0 || !shape_only(p->op) || p->n_inputs < 1)
			return false;
		v = p->inputs[0];
	}
	return false;
}
