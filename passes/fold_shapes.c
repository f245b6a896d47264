/*
 * fold_shapes.c - the fold-shapes pass: integer tensors whose every element
 * shape inference knows (Shape, Size, and the Gather/Concat/Slice/Cast/
 * arithmetic chains built on them) become initializers.
 *
 * One walk over the main graph after ir_infer (linear time): a value that
 * is known becomes an initializer in place (same value, same name, same
 * readers), so nothing is rewired; its producer goes when nothing else
 * reads it, and with it the producers only it read.
 */
#include "passes/pass.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether v holds integers of `dtype` in range. */
static bool fits(int dtype, int64_t v)
{
	switch (dtype) {
	case IR_INT64: return true;
	case IR_INT32: return v >= INT32_MIN && v <= INT32_MAX;
	case IR_INT16: return v >= INT16_MIN && v <= INT16_MAX;
	case IR_INT8: return v >= INT8_MIN && v <= INT8_MAX;
	case IR_UINT64: return v >= 0;
	case IR_UINT32: return v >= 0 && v <= (int64_t)UINT32_MAX;
	case IR_UINT16: return v >= 0 && v <= UINT16_MAX;
	case IR_UINT8: return v >= 0 && v <= UINT8_MAX;
	default: return false;
	}
}

static void store(int dtype, void *p, uint64_t i, int64_t v)
{
	switch (dtype) {
	case IR_INT64: { int64_t x = v; memcpy((char *)p + 8 * i, &x, 8); break; }
	case IR_UINT64: { uint64_t x = (uint64_t)v; memcpy((char *)p + 8 * i, &x, 8); break; }
	case IR_INT32: { int32_t x = (int32_t)v; memcpy((char *)p + 4 * i, &x, 4); break; }
	case IR_UINT32: { uint32_t x = (uint32_t)v; memcpy((char *)p + 4 * i, &x, 4); break; }
	case IR_INT16: { int16_t x = (int16_t)v; memcpy((char *)p + 2 * i, &x, 2); break; }
	case IR_UINT16: { uint16_t x = (uint16_t)v; memcpy((char *)p + 2 * i, &x, 2); break; }
	case IR_INT8: { int8_t x = (int8_t)v; memcpy((char *)p + i, &x, 1); break; }
	case IR_UINT8: { uint8_t x = (uint8_t)v; memcpy((char *)p + i, &x, 1); break; }
	default: break;
	}
}

/*
 * Whether output value v can be folded: its elements are all plain
 * numbers and its type is known. 1: yes (tensor in *out), 0: nothing to
 * say (values not tracked), -1: no, with the reason in why. -2: no memory.
 */
static int known_tensor(const struct ir_value *v, struct ir_tensor **out, char *why, size_t size)
{
	*out = NULL;
	if (v->n_known < 0)
		return 0;
	for (int k = 0; k < v->n_known; k++) {
		const struct ir_dim *d = &v->known[k];
		if (d->kind == IR_DIM_PARAM) {
			snprintf(why, size, "element %d of '%s' is '%s', which is not fixed: use set-input-shape to fix it",
				 k, v->name, d->param ? d->param : "?");
			return -1;
		}
		if (d->kind != IR_DIM_VALUE) {
			snprintf(why, size, "element %d of '%s' is not known", k, v->name);
			return -1;
		}
	}
	const struct ir_type *t = ir_value_type(v);
	if (!t || t->kind != IR_TYPE_TENSOR || !t->elem || t->rank < 0) {
		snprintf(why, size, "the type of '%s' is not known", v->name);
		return -1;
	}
	if (!ir_dtype_is_int(t->elem) || ir_dtype_bits(t->elem) < 8) {
		snprintf(why, size, "'%s' is %s: only integer tensors are folded here (fold-constants does the rest)",
			 v->name, ir_dtype_name(t->elem));
		return -1;
	}
	int64_t dims[IR_MAX_RANK];
	uint64_t numel = 1;
	for (int k = 0; k < t->rank; k++) {
		if (t->dims[k].kind != IR_DIM_VALUE || t->dims[k].value < 0) {
			snprintf(why, size, "the shape of '%s' is not known", v->name);
			return -1;
		}
		dims[k] = t->dims[k].value;
		numel *= (uint64_t)dims[k];
	}
	if (numel != (uint64_t)v->n_known) {
		snprintf(why, size, "shape inference knows %d values of '%s' but it has %" PRIu64 " elements: left alone",
			 v->n_known, v->name, numel);
		return -1;
	}
	for (int k = 0; k < v->n_known; k++)
		if (!fits(t->elem, v->known[k].value)) {
			snprintf(why, size, "element %d of '%s' (%" PRId64 ") does not fit %s", k, v->name, v->known[k].value,
				 ir_dtype_name(t->elem));
			return -1;
		}
	struct ir_tensor *tt = ir_tensor_new(t->elem, t->rank, dims, NULL);
	if (!tt)
		return -2;
	void *p = numel ? ir_tensor_mutable(tt) : NULL;
	for (int k = 0; k < v->n_known; k++)
		store(t->elem, p, (uint64_t)k, v->known[k].value);
	*out = tt;
	return 1;
}

/* The known values as text: "[1,3,224,224]", shortened. */
static const char *values_text(const struct ir_value *v, char *buf, size_t size)
{
	size_t o = (size_t)snprintf(buf, size, "[");
	for (int k = 0; k < v->n_known && o < size; k++) {
		if (o > size - 24) {
			snprintf(buf + o, size - o, "...");
			return buf;
		}
		o += (size_t)snprintf(buf + o, size - o, "%s%" PRId64, k ? "," : "", v->known[k].value);
	}
	if (o < size)
		snprintf(buf + o, size - o, "]");
	return buf;
}

/* Whether the node's values say something about shapes (worth a message when they do not fold). */
static bool shape_op(int op)
{
	return op == IR_OP_Shape || op == IR_OP_Size;
}

static int run(struct pass_ctx *c)
{
	struct ir_graph *g = c->m->graph;
	int rc = pass_infer(c);
	if (rc)
		return ir_diag_err(c->d, rc, rc == IR_EINTR ? "stopped" : "out of memory");
	/* before IR version 4 every initializer must be listed as a graph input: use Constant nodes */
	bool old_ir = c->m->has_ir_version && c->m->ir_version < 4;
	for (struct ir_node *n = g->first, *next; n; n = next) {
		next = n->next;
		if (ir_interrupted)
			return ir_diag_err(c->d, IR_EINTR, "stopped");
		if (n->op == IR_OP_Constant || n->n_outputs < 1)
			continue;
		/* every used output must fold, or none is folded (the node stays for the others) */
		struct ir_tensor *ts[8] = { 0 };
		bool used = false, all = true, said = false;
		char why[400] = "";
		if (n->n_outputs > 8)
			continue;
		if (n->op != IR_OP_UNKNOWN && (ir_ops[n->op].flags & (IR_OPF_RANDOM | IR_OPF_CONTROL | IR_OPF_SEQUENCE)))
			continue;
		for (int i = 0; i < n->n_outputs && all; i++) {
			struct ir_value *v = n->outputs[i];
			if (!v || !pass_n_readers(v))
				continue;
			used = true;
			int k = known_tensor(v, &ts[i], why, sizeof(why));
			if (k == -2) {
				rc = ir_diag_err(c->d, IR_ENOMEM, "out of memory");
				goto fail;
			}
			if (k <= 0) {
				all = false;
				said = k < 0;
				if (!said && shape_op(n->op))
					snprintf(why, sizeof(why), "the shape of '%s' is not known%s%s", n->inputs[0] ? n->inputs[0]->name : "?",
						 n->inputs[0] && n->inputs[0]->why ? ": " : "",
						 n->inputs[0] && n->inputs[0]->why ? n->inputs[0]->why : "");
			}
		}
		if (!used || !all) {
			if (used && (said || shape_op(n->op)) && *why)
				pass_rejected(c, n, "%s", why);
			for (int i = 0; i < 8; i++)
				ir_tensor_unref(ts[i]);
			continue;
		}
		/* each folded value becomes an initializer in place; a graph output becomes a Constant node's output */
		/* the report names the node after it is gone: keep its name and id */
		char self[256];
		snprintf(self, sizeof(self), "%s", n->name ? n->name : "");
		struct ir_node who = { .id = n->id, .name = self };
		char op[64];
		snprintf(op, sizeof(op), "%s", n->op_type);
		char msg[400] = "";
		size_t o = 0;
		for (int i = 0; i < n->n_outputs; i++) {
			struct ir_value *v = n->outputs[i];
			if (!ts[i] || !v)
				continue;
			char vb[200];
			values_text(v, vb, sizeof(vb));
			if (ir_node_set_output(n, i, NULL, c->d)) {
				rc = IR_ERR;
				goto fail;
			}
			if (v->is_output || old_ir) {
				struct ir_node *k = ir_node_new(g, "Constant", "", self, 0, 1, n);
				struct ir_attr a = { 0 };
				a.name = strdup("value");
				a.type = IR_ATTR_TENSOR;
				a.has_type = true;
				a.t = ts[i];
				ir_tensor_ref(ts[i]);
				if (!k || !a.name || ir_node_set_attr(k, &a, c->d) || ir_node_set_output(k, 0, v, c->d)) {
					ir_attr_clear(&a);
					rc = ir_diag_err(c->d, IR_ENOMEM, "out of memory");
					goto fail;
				}
			} else if (ir_value_set_init(v, ts[i], c->d)) {
				rc = IR_ERR;
				goto fail;
			}
			if (o < sizeof(msg))
				o += (size_t)snprintf(msg + o, sizeof(msg) - o, "%s'%s' = %s%s", o ? ", " : "", v->name, vb,
						      v->is_output ? " (a Constant node: it is a graph output)" :
						      old_ir ? " (a Constant node)" : "");
		}
		int gone = pass_remove_dead_from(g, n);
		pass_rewrote(c, &who, "%s folded: %s%s", op, msg,
			     gone > 1 ? " (with the nodes only it read)" : "");
		for (int i = 0; i < 8; i++)
			ir_tensor_unref(ts[i]);
		continue;
fail:
		for (int i = 0; i < 8; i++)
			ir_tensor_unref(ts[i]);
		return rc;
	}
	return 0;
}

const struct pass pass_fold_shapes = {
	.name = "fold-shapes",
	.summary = "replace shape computations whose values are known by constants",
	.explain =
		"Exported models often compute shapes at run time: Shape(x) -> Gather -> Unsqueeze -> Concat -> "
		"Reshape. When the shapes are fixed, every one of those values is the same on every run, and shape "
		"inference already knows it. This pass runs shape inference and turns each integer tensor whose "
		"every element is a plain number into an initializer holding those numbers; the nodes that computed "
		"it go (with the nodes only they fed).\n\n"
		"Symbolic dims stop it: Shape(x) of x: [batch,3,224,224] is [batch,3,224,224], and 'batch' is not a "
		"number, so it stays (the report names the symbol; set-input-shape fixes it). Parts of a chain "
		"can still fold: Gather(Shape(x), 1) is 3 whatever 'batch' is.\n\n"
		"The folded value keeps its name and its readers; a graph output becomes the output of a Constant "
		"node, so the interface does not change. Only integer tensors that inference tracks (small ones, "
		"from Shape, Size, Constant and the integer arithmetic on them) are folded here: fold-constants "
		"evaluates everything else whose inputs are constants. Only the main graph is rewritten.",
	.level = PASS_LEVEL_BASIC,
	.run = run,
};
