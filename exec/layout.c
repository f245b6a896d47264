/*
 * layout.c - the rules that choose which activations of a GPU plan are
 * stored channels-last (see layout.h); exec/plan.c asks the device's
 * kernels afterwards and calls exec_layout_refuse for a node that declines.
 */
#include "exec/layout.h"

#include <limits.h>
#include <string.h>

enum lclass { LC_OTHER, LC_CONV, LC_QCONV, LC_POOL, LC_GPOOL, LC_ELTWISE };

static enum lclass layout_class(const struct ir_node *n)
{
	switch (n->op) {
	case IR_OP_Conv:
	case IR_OP_ogsh_FusedConv:
		return LC_CONV;
	case IR_OP_ogsh_QConv:
		return LC_QCONV;
	case IR_OP_MaxPool:
	case IR_OP_AveragePool:
		return LC_POOL;
	case IR_OP_GlobalAveragePool:
	case IR_OP_GlobalMaxPool:
		return LC_GPOOL;
	case IR_OP_Relu: case IR_OP_LeakyRelu: case IR_OP_Sigmoid: case IR_OP_HardSigmoid: case IR_OP_HardSwish:
	case IR_OP_Tanh: case IR_OP_Clip: case IR_OP_Gelu: case IR_OP_ogsh_Gelu: case IR_OP_Erf: case IR_OP_Add: case IR_OP_Sub:
	case IR_OP_Mul: case IR_OP_Div: case IR_OP_ogsh_Pointwise:
	case IR_OP_QuantizeLinear: case IR_OP_DequantizeLinear:
		return LC_ELTWISE;
	default:
		return LC_OTHER;
	}
}

static bool demote(struct layout_val *vals, const struct ir_value *v)
{
	if (!v || !vals[v->idx].nhwc)
		return false;
	vals[v->idx].nhwc = false;
	return true;
}

/* Demotes n's inputs in_from..in_to-1 (in_to clipped to n_inputs) and its outputs out_from... */
static bool demote_rest(struct layout_val *vals, const struct ir_node *n, int in_from, int in_to, int out_from)
{
	bool changed = false;
	for (int i = in_from; i < n->n_inputs && i < in_to; i++)
		changed |= demote(vals, n->inputs[i]);
	for (int i = out_from; i < n->n_outputs; i++)
		changed |= demote(vals, n->outputs[i]);
	return changed;
}

static int64_t numel_of(const struct layout_val *v)
{
	int64_t n = 1;
	for (int i = 0; i < v->rank; i++)
		n *= v->dims[i];
	return n;
}

static bool same_dims(const struct layout_val *a, const struct layout_val *b)
{
	return a->typed && b->typed && a->rank == b->rank &&
	       !memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank);
}

/* Values that must share one layout: all channels-last or none. */
static bool tie(struct layout_val *vals, const struct ir_value *const *vs, int n)
{
	bool all = true;
	for (int i = 0; i < n; i++)
		if (vs[i] && !vals[vs[i]->idx].nhwc)
			all = false;
	bool changed = false;
	if (!all)
		for (int i = 0; i < n; i++)
			changed |= demote(vals, vs[i]);
	return changed;
}

bool exec_layout_refuse(const struct ir_node *n, struct layout_val *vals)
{
	bool changed = false;
	for (int i = 0; i < n->n_inputs + n->n_implicit; i++)
		changed |= demote(vals, i < n->n_inputs ? n->inputs[i] : n->implicit[i - n->n_inputs]);
	for (int i = 0; i < n->n_outputs; i++)
		changed |= demote(vals, n->outputs[i]);
	return changed;
}

/* One pass of the rules over every node; whether anything changed. */
static bool layout_rules(const struct ir_graph *g, const enum exec_place *place, struct layout_val *vals)
{
	bool changed = false;
	int pos = 0;
	for (const struct ir_node *n = g->first; n; n = n->next, pos++) {
		if (place[pos] == EXEC_FOLDED)
			continue;
		enum lclass lc = place[pos] == EXEC_ON_GPU ? layout_class(n) : LC_OTHER;
		const struct ir_value *out0 = n->n_outputs > 0 ? n->outputs[0] : NULL;
		const struct ir_value *set[IR_MAX_RANK + 8];
		int ns = 0;
		switch (lc) {
		case LC_CONV:
			/* X free; W and B NCHW; Z (FusedConv's input 3) in Y's layout and Y's shape */
			changed |= demote_rest(vals, n, 1, 3, 1);
			set[ns++] = out0;
			if (n->n_inputs > 3 && n->inputs[3]) {
				if (!out0 || !same_dims(&vals[n->inputs[3]->idx], &vals[out0->idx])) {
					changed |= demote(vals, n->inputs[3]);
					changed |= demote(vals, out0);
				}
				set[ns++] = n->inputs[3];
			}
			changed |= tie(vals, set, ns);
			break;
		case LC_QCONV:
			/* X free; constants NCHW; Z (input 5) in Y's layout */
			changed |= demote_rest(vals, n, 1, 5, 1);
			changed |= demote_rest(vals, n, 6, INT_MAX, 1);
			set[ns++] = out0;
			if (n->n_inputs > 5 && n->inputs[5])
				set[ns++] = n->inputs[5];
			changed |= tie(vals, set, ns);
			break;
		case LC_POOL:
			changed |= demote_rest(vals, n, 1, INT_MAX, 1);
			set[ns++] = n->n_inputs > 0 ? n->inputs[0] : NULL;
			set[ns++] = out0;
			changed |= tie(vals, set, ns);
			break;
		case LC_GPOOL:
			changed |= demote_rest(vals, n, 1, INT_MAX, 0);
			break;
		case LC_ELTWISE: {
			bool ok = out0 && n->n_outputs == 1 && n->n_inputs <= (int)(sizeof(set) / sizeof(set[0])) - 1;
			for (int i = 0; ok && i < n->n_inputs; i++) {
				const struct ir_value *v = n->inputs[i];
				if (!v)
					continue;
				const struct layout_val *iv = &vals[v->idx];
				if (same_dims(iv, &vals[out0->idx]))
					set[ns++] = v;
				else if (!(iv->typed && numel_of(iv) == 1))
					ok = false;
			}
			if (ok) {
				set[ns++] = out0;
				changed |= tie(vals, set, ns);
				break;
			}
		}
			/* an operand of another shape: as any other op */
			__attribute__((fallthrough));
		default:
			changed |= exec_layout_refuse(n, vals);
			break;
		}
	}
	return changed;
}

void exec_layout_settle(const struct ir_graph *g, const enum exec_place *place, struct layout_val *vals)
{
	while (layout_rules(g, place, vals))
		;
}

int exec_layout_plan(const struct ir_graph *g, const enum exec_place *place, struct layout_val *vals)
{
	int pos = 0, n = 0;
	for (const struct ir_node *nd = g->first; nd; nd = nd->next, pos++) {
		if (place[pos] != EXEC_ON_GPU || nd->n_outputs < 1 || !nd->outputs[0])
			continue;
		enum lclass lc = layout_class(nd);
		struct layout_val *v = &vals[nd->outputs[0]->idx];
		/* float16/bfloat16, and the int8/float8 values between quantized islands */
		bool lowp = v->dtype == IR_FLOAT16 || v->dtype == IR_BFLOAT16 || v->dtype == IR_INT8 ||
			    v->dtype == IR_F8E4M3FN;
		if ((lc == LC_CONV || lc == LC_QCONV || lc == LC_POOL || lc == LC_ELTWISE) && v->act && v->typed &&
		    v->rank == 4 && lowp && !nd->outputs[0]->is_output)
			v->nhwc = true;
		/* a QConv reads channels-last: the Q (or op) making its input writes it so */
		if (lc == LC_QCONV && nd->inputs[0]) {
			struct layout_val *x = &vals[nd->inputs[0]->idx];
			if (x->act && x->typed && x->rank == 4)
				x->nhwc = true;
		}
	}
	exec_layout_settle(g, place, vals);
	for (size_t i = 0; i < g->n_values; i++)
		n += vals[i].nhwc;
	return n;
}
