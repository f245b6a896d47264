/*
 * fuse_pad.c - the fuse-pad pass: a zero, constant-mode Pad of the spatial
 * axes before a Conv (or an AveragePool that counts padding) becomes that
 * node's own pads.
 *
 * pass_drop_dead_consts() is a static copy of the one in fuse_conv_bn.c.
 */
#include "passes/pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The text of string attribute `name` of n; dflt when absent, "?" when not a string. */
static const char *attr_str(const struct ir_node *n, const char *name, const char *dflt)
{
	const struct ir_attr *a = ir_node_attr(n, name);
	if (!a)
		return dflt;
	if (a->type != IR_ATTR_STRING || !a->s.data)
		return "?";
	return a->s.data;
}

static void ints_str(const int64_t *v, int n, char *buf, size_t size)
{
	size_t k = 0;
	k += (size_t)snprintf(buf, size, "[");
	for (int i = 0; i < n && k < size; i++)
		k += (size_t)snprintf(buf + k, size - k, "%s%lld", i ? "," : "", (long long)v[i]);
	if (k < size)
		snprintf(buf + k, size - k, "]");
}

/* Reads an integer constant tensor into out[0..max); returns the count, or -1. */
static int read_ints(const struct ir_tensor *t, int64_t *out, int max)
{
	if (!ir_dtype_is_int(t->dtype) || t->rank > 1 || t->numel > (uint64_t)max)
		return -1;
	const void *p = ir_tensor_data(t);
	for (uint64_t i = 0; i < t->numel; i++)
		if (!ir_elem_to_i64(t->dtype, p, i, &out[i]))
			return -1;
	return (int)t->numel;
}

struct state {
	bool inferred;
};

/* Looks at one Pad. Returns 0 (the report says what happened) or an error code. */
static int try_pad(struct pass_ctx *c, struct state *st, struct ir_node *pad)
{
	char pn[256], a_s[256], b_s[256];
	int64_t pads[2 * IR_MAX_RANK], axes[IR_MAX_RANK];
	int64_t begin[IR_MAX_RANK] = { 0 }, end[IR_MAX_RANK] = { 0 };

	if (pad->n_outputs != 1 || !pad->outputs[0] || pad->n_inputs < 1 || !pad->inputs[0])
		return 0;
	struct ir_value *x = pad->inputs[0], *p = pad->outputs[0];

	/* the consumer */
	if (p->is_output) {
		pass_rejected(c, pad, "its output '%s' is a graph output: it must stay", p->name);
		return 0;
	}
	struct ir_node *n = pass_only_reader(p);
	if (!n) {
		if (pass_n_readers(p) > 1)
			pass_rejected(c, pad, "its output has %d consumers: each would need the padding", pass_n_readers(p));
		else if (pass_n_readers(p) == 1)
			pass_rejected(c, pad, "its output is read inside a subgraph");
		return 0;
	}
	pass_node_name(n, pn, sizeof(pn));
	bool pool = n->op == IR_OP_AveragePool;
	if (n->op != IR_OP_Conv && !pool) {
		pass_rejected(c, pad, "its output feeds %s (%s): only Conv and AveragePool take the padding in", pn,
			      n->op_type);
		return 0;
	}
	if (n->inputs[0] != p) {
		pass_rejected(c, pad, "it pads %s's weights, not its data input", pn);
		return 0;
	}

	/* what the Pad does */
	const char *mode = attr_str(pad, "mode", "constant");
	if (strcmp(mode, "constant")) {
		pass_rejected(c, pad, "mode is '%s': only constant padding with zeros is what %s's pads do", mode, pn);
		return 0;
	}
	int n_pads, n_axes = -1;
	double value = 0;
	struct ir_value *consts[3] = { NULL };
	if (pad->n_inputs >= 2 && pad->inputs[1]) {   /* opset 11 and later: pads, constant_value, axes are inputs */
		const struct ir_tensor *t = pass_const_input(pad, 1);
		if (!t) {
			pass_rejected(c, pad, "its pads are not a constant");
			return 0;
		}
		if ((n_pads = read_ints(t, pads, 2 * IR_MAX_RANK)) < 0) {
			pass_rejected(c, pad, "its pads are not a 1-D integer tensor");
			return 0;
		}
		consts[0] = pad->inputs[1];
		if (pad->n_inputs >= 3 && pad->inputs[2]) {
			const struct ir_tensor *v = pass_const_input(pad, 2);
			if (!v) {
				pass_rejected(c, pad, "its constant_value is not a constant");
				return 0;
			}
			if (v->numel != 1 || v->dtype == IR_STRING) {
				pass_rejected(c, pad, "its constant_value has %llu elements, not 1",
					      (unsigned long long)v->numel);
				return 0;
			}
			value = ir_tensor_get_f64(v, 0);
			consts[1] = pad->inputs[2];
		}
		if (pad->n_inputs >= 4 && pad->inputs[3]) {
			const struct ir_tensor *a = pass_const_input(pad, 3);
			if (!a) {
				pass_rejected(c, pad, "its axes are not a constant");
				return 0;
			}
			if ((n_axes = read_ints(a, axes, IR_MAX_RANK)) < 0) {
				pass_rejected(c, pad, "its axes are not a 1-D integer tensor");
				return 0;
			}
			consts[2] = pad->inputs[3];
		}
	} else {   /* before opset 11: attributes */
		const struct ir_attr *a = ir_node_attr(pad, "pads");
		if (!a || a->type != IR_ATTR_INTS || a->n > 2 * IR_MAX_RANK) {
			pass_rejected(c, pad, "it has no pads (neither an input nor an attribute)");
			return 0;
		}
		n_pads = (int)a->n;
		memcpy(pads, a->ints, sizeof(int64_t) * a->n);
		value = ir_node_attr_float(pad, "value", 0.0f);
	}
	if (value != 0) {
		pass_rejected(c, pad, "it pads with %g, not 0: %s's own padding is zeros", value, pn);
		return 0;
	}

	/* the rank, and pads per axis */
	int rank;
	if (n_axes < 0) {
		if (n_pads % 2 || n_pads == 0) {
			pass_rejected(c, pad, "it has %d pads: not two per axis", n_pads);
			return 0;
		}
		rank = n_pads / 2;
		for (int i = 0; i < rank; i++)
			axes[i] = i;
		n_axes = rank;
	} else {
		if (!st->inferred) {
			pass_infer(c);
			st->inferred = true;
		}
		rank = ir_value_type(x)->rank;
		if (rank < 0) {
			pass_rejected(c, pad, "the rank of its input '%s' is unknown, so its axes cannot be read", x->name);
			return 0;
		}
		if (n_pads != 2 * n_axes) {
			pass_rejected(c, pad, "it has %d pads for %d axes", n_pads, n_axes);
			return 0;
		}
		for (int i = 0; i < n_axes; i++) {
			if (axes[i] < 0)
				axes[i] += rank;
			if (axes[i] < 0 || axes[i] >= rank) {
				pass_rejected(c, pad, "axis %d is out of range for rank %d", i, rank);
				return 0;
			}
			for (int j = 0; j < i; j++)
				if (axes[j] == axes[i]) {
					pass_rejected(c, pad, "axis %lld is listed twice", (long long)axes[i]);
					return 0;
				}
		}
	}
	if (rank < 3) {
		pass_rejected(c, pad, "its input has rank %d: %s needs a batch, a channel and a spatial axis", rank, pn);
		return 0;
	}
	for (int i = 0; i < n_axes; i++) {
		begin[axes[i]] = pads[i];
		end[axes[i]] = pads[n_axes + i];
	}
	for (int a = 0; a < rank; a++) {
		if (begin[a] < 0 || end[a] < 0) {
			pass_rejected(c, pad, "it crops axis %d (negative pads): %s's pads cannot be negative", a, pn);
			return 0;
		}
		if (a < 2 && (begin[a] || end[a])) {
			pass_rejected(c, pad, "it pads the %s axis: %s pads only spatial axes", a ? "channel" : "batch", pn);
			return 0;
		}
	}

	/* the consumer's padding */
	int sp = rank - 2;
	const char *ap = attr_str(n, "auto_pad", "NOTSET");
	bool valid = !strcmp(ap, "VALID");
	if (strcmp(ap, "NOTSET") && !valid) {
		pass_rejected(c, pad, "%s has auto_pad=%s: its padding is computed at run time, not listed", pn, ap);
		return 0;
	}
	if (pool) {
		if (ir_node_attr_int(n, "count_include_pad", 0) != 1) {
			pass_rejected(c, pad, "%s has count_include_pad=0: it would leave the padded zeros out of its averages",
				      pn);
			return 0;
		}
		if (ir_node_attr_int(n, "ceil_mode", 0) != 0) {
			pass_rejected(c, pad, "%s has ceil_mode=1: its last windows may run past the padding", pn);
			return 0;
		}
	}
	const struct ir_attr *ks = ir_node_attr(n, "kernel_shape");
	if (ks && (ks->type != IR_ATTR_INTS || (int)ks->n != sp)) {
		pass_rejected(c, pad, "%s's kernel_shape does not have %d entries for a rank %d input", pn, sp, rank);
		return 0;
	}
	if (n->op == IR_OP_Conv) {
		const struct ir_tensor *w = n->n_inputs > 1 ? ir_value_const(n->inputs[1]) : NULL;
		if (w && w->rank != rank) {
			pass_rejected(c, pad, "%s's weights have rank %d but its input has rank %d", pn, w->rank, rank);
			return 0;
		}
	}
	int64_t old[2 * IR_MAX_RANK] = { 0 }, pads_new[2 * IR_MAX_RANK];
	const struct ir_attr *op = ir_node_attr(n, "pads");
	if (op && !valid) {
		if (op->type != IR_ATTR_INTS || (int)op->n != 2 * sp) {
			pass_rejected(c, pad, "%s's pads do not have %d entries", pn, 2 * sp);
			return 0;
		}
		memcpy(old, op->ints, sizeof(int64_t) * (size_t)(2 * sp));
	}
	for (int i = 0; i < sp; i++) {
		pads_new[i] = old[i] + begin[2 + i];
		pads_new[sp + i] = old[sp + i] + end[2 + i];
	}

	/* rewrite */
	ints_str(old, 2 * sp, a_s, sizeof(a_s));
	ints_str(pads_new, 2 * sp, b_s, sizeof(b_s));
	pass_rewrote(c, pad, "folded into '%s' (%s): pads %s -> %s%s", pn, n->op_type, a_s, b_s,
		     valid ? " (auto_pad VALID became NOTSET)" : "");
	int rc;
	if ((rc = pass_set_ints_attr(n, "pads", pads_new, 2 * sp, c->d)))
		return rc;
	if (valid)
		ir_node_remove_attr(n, "auto_pad");
	if ((rc = ir_node_set_input(n, 0, x)))
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	if ((rc = ir_node_remove(pad, c->d)))
		return rc;
	pass_drop_dead_consts(consts, 3);
	return 0;
}

static int run(struct pass_ctx *c)
{
	struct ir_graph *g = c->m->graph;
	struct state st = { false };
	/* the candidates first: a rewrite removes nodes, so walk ids, not links */
	int *ids = malloc(sizeof(int) * (size_t)(g->n_nodes ? g->n_nodes : 1)), n_ids = 0;
	if (!ids)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	ir_for_each_node(g, n)
		if (n->op == IR_OP_Pad)
			ids[n_ids++] = n->id;
	int rc = 0;
	for (int i = 0; i < n_ids && !rc; i++) {
		struct ir_node *n = ir_node_by_id(g, ids[i]);
		if (n)
			rc = try_pad(c, &st, n);
	}
	free(ids);
	return rc;
}

const struct pass pass_fuse_pad = {
	.name = "fuse-pad",
	.summary = "fold a zero Pad of the spatial axes into the pads of the Conv or AveragePool after it",
	.explain =
		"Conv and AveragePool pad their input themselves: their pads attribute adds zeros around the "
		"spatial axes before the windows slide. An explicit Pad node in front of them that does the same "
		"(constant mode, value 0) can therefore go: its amounts are added to the consumer's pads, and the "
		"consumer reads the unpadded input. That saves writing a padded copy of the tensor.\n\n"
		"The Pad's pads list the begins of every axis, then the ends: [x1_begin, x2_begin, ..., "
		"x1_end, x2_end, ...] (over the listed axes only when it has an axes input, opset 18). The "
		"consumer's pads list only the S spatial axes: [h_begin, w_begin, h_end, w_end] for S = 2. For "
		"spatial axis i (data axis 2 + i): new_pads[i] = pads[i] + pad_begin[2 + i] and new_pads[S + i] = "
		"pads[S + i] + pad_end[2 + i]. auto_pad VALID means zero pads, so it becomes NOTSET with the "
		"Pad's amounts.\n\n"
		"It does not apply when: the Pad is not in constant mode or pads with something other than 0 "
		"(Conv pads with zeros only); it pads the batch or channel axis, or crops (negative pads); its "
		"pads, value or axes are not constants; its output is read by anything else or is a graph output; "
		"the consumer is not a Conv or an AveragePool, or the Pad feeds a Conv's weights; the consumer "
		"uses auto_pad SAME_UPPER or SAME_LOWER (the padding is computed, not listed); an AveragePool has "
		"count_include_pad=0 (its averages would leave the zeros out, while the Pad's zeros are counted) "
		"or ceil_mode=1. MaxPool is left alone: its padding is minus infinity, not zero.",
	.level = PASS_LEVEL_EXTENDED,
	.run = run,
};
