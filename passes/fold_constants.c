/*
 * fold_constants.c - the fold-constants pass: nodes whose inputs are all
 * constants are evaluated once, with the CPU reference kernels, and their
 * outputs become initializers; Constant nodes become initializers too.
 *
 * One walk over the main graph in topological order (linear in the graph
 * plus the work of the folded nodes): a folded output becomes an
 * initializer in place (same value, name and readers), so the next node of
 * a constant chain sees a constant input and folds in turn.
 */
#include "passes/pass.h"
#include "passes/qweight.h"
#include "exec/exec.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct pass_option options[] = {
	{ "max-bytes", "int", "1048576", "outputs larger than this many bytes are not folded (Tile, Expand, ConstantOfShape); negative: no limit" },
	{ "constants-to-initializers", "bool", "on", "turn Constant nodes into initializers" },
	{ "keep-quantized", "bool", "on", "keep quantized weights quantized (off: fold their DequantizeLinear into float weights)" },
	{ NULL, NULL, NULL, NULL },
};

static bool has_subgraph(const struct ir_node *n)
{
	for (int i = 0; i < n->n_attrs; i++)
		if (n->attrs[i].g || n->attrs[i].graphs)
			return true;
	return n->n_implicit > 0;
}

/* Bytes a tensor holds (strings: their lengths). */
static double tensor_bytes(const struct ir_tensor *t)
{
	if (t->dtype != IR_STRING)
		return (double)t->nbytes;
	double b = 0;
	for (uint64_t i = 0; i < t->numel; i++)
		b += (double)t->strings[i].len;
	return b;
}

/* Bytes the inferred type of v says it holds; false when not known. */
static bool inferred_bytes(const struct ir_value *v, uint64_t *out)
{
	const struct ir_type *t = ir_value_type(v);
	if (!t || t->kind != IR_TYPE_TENSOR || !t->elem || t->elem == IR_STRING || t->rank < 0)
		return false;
	uint64_t numel = 1;
	for (int k = 0; k < t->rank; k++) {
		if (t->dims[k].kind != IR_DIM_VALUE || t->dims[k].value < 0)
			return false;
		uint64_t d = (uint64_t)t->dims[k].value;
		if (d && numel > UINT64_MAX / d)
			return false;
		numel *= d;
	}
	return ir_dtype_nbytes(t->elem, numel, out);
}

/* A copy of t with 16-byte aligned data when its data is not (mapped files); a new reference either way. */
static struct ir_tensor *aligned(const struct ir_tensor *t, struct ir_diag *d)
{
	const void *p = ir_tensor_data(t);
	if (!p || ((uintptr_t)p % 16) == 0) {
		ir_tensor_ref((struct ir_tensor *)t);
		return (struct ir_tensor *)t;
	}
	struct ir_tensor *c = ir_tensor_new(t->dtype, t->rank, t->dims, d);
	if (!c)
		return NULL;
	memcpy(ir_tensor_mutable(c), p, t->nbytes);
	return c;
}

/*
 * Runs n's kernel on its constant inputs. Fills out[0..n_outputs-1]
 * (caller clears them). 0, or an error with the reason in why (IR_ENOMEM
 * is returned as is: the pass fails).
 */
static int evaluate(struct pass_ctx *c, struct ir_node *n, struct kern_value *out, char *why, size_t size)
{
	struct kern_value *in = calloc((size_t)(n->n_inputs ? n->n_inputs : 1), sizeof(*in));
	if (!in)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	struct ir_diag d;
	ir_diag_init(&d);
	int rc = 0;
	for (int i = 0; i < n->n_inputs; i++) {
		if (!n->inputs[i])
			continue;
		const struct ir_tensor *t = pass_const_input(n, i);
		if (!t || ir_tensor_check(t, &d)) {
			rc = IR_ERR;
			goto done;
		}
		if (!(in[i].t = aligned(t, &d))) {
			rc = IR_ENOMEM;
			goto done;
		}
		in[i].kind = KV_TENSOR;
	}
	struct cpu_kctx k = {
		.node = n,
		.opset = ir_model_opset(c->m, n->domain),
		.n_in = n->n_inputs,
		.n_out = n->n_outputs,
		.in = in,
		.out = out,
		.d = &d,
		.hooks = NULL,
	};
	rc = cpu_run_node(&k);
done:
	if (rc == IR_ENOMEM)
		ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	else if (rc)
		snprintf(why, size, "%s", d.error ? d.error : "the kernel failed");
	for (int i = 0; i < n->n_inputs; i++)
		kern_value_clear(&in[i]);
	free(in);
	ir_diag_clear(&d);
	return rc;
}

/*
 * Why n cannot be folded, before running it, into why; true when it can
 * be tried. *quiet is set when it is no match at all (an input that is not
 * constant): nothing to report.
 */
static bool foldable(const struct ir_node *n, bool *quiet, char *why, size_t size)
{
	*quiet = false;
	const struct ir_value *over = NULL;
	for (int i = 0; i < n->n_inputs; i++) {
		const struct ir_value *v = n->inputs[i];
		if (!v)
			continue;
		if (v->is_input && (v->init || v->sparse_init)) {
			over = v;
			continue;
		}
		if (!pass_const_input(n, i)) {
			*quiet = true;
			return false;
		}
	}
	if (n->n_implicit > 0) {
		*quiet = true;   /* reads outer values through a subgraph */
		return false;
	}
	if (over) {
		snprintf(why, size, "its input '%s' is an initializer listed as a graph input: a default the user may "
			 "override at run time, so it is no constant", over->name);
		return false;
	}
	if (n->op == IR_OP_UNKNOWN) {
		snprintf(why, size, "'%s%s%s' is not an op ogsh evaluates", n->domain && *n->domain ? n->domain : "",
			 n->domain && *n->domain ? "." : "", n->op_type);
		return false;
	}
	unsigned f = ir_ops[n->op].flags;
	if (n->op == IR_OP_Dropout) {
		snprintf(why, size, "Dropout is left to eliminate-nops (at inference it passes its input through)");
		return false;
	}
	if (f & IR_OPF_RANDOM) {
		snprintf(why, size, "%s is random: every run draws other numbers", n->op_type);
		return false;
	}
	if ((f & IR_OPF_CONTROL) || has_subgraph(n)) {
		snprintf(why, size, "it has subgraphs: control flow is not folded");
		return false;
	}
	if (f & (IR_OPF_SEQUENCE | IR_OPF_TRAINING)) {
		snprintf(why, size, "%s makes %s, not a tensor", n->op_type, f & IR_OPF_SEQUENCE ? "sequences" : "training state");
		return false;
	}
	char w[256];
	if (!cpu_supports(n, w, sizeof(w))) {
		snprintf(why, size, "the cpu backend cannot run it: %s", w);
		return false;
	}
	return true;
}

static int run(struct pass_ctx *c)
{
	struct ir_graph *g = c->m->graph;
	int rc = pass_infer(c);
	if (rc)
		return ir_diag_err(c->d, rc, rc == IR_EINTR ? "stopped" : "out of memory");
	int64_t max_bytes = pass_opt_int(c, "max-bytes");
	bool c2i = pass_opt_bool(c, "constants-to-initializers");
	bool keep_q = pass_opt_bool(c, "keep-quantized");
	/* before IR version 4 every initializer must be listed as a graph input (an overridable default):
	 * results then stay Constant nodes */
	bool old_ir = c->m->has_ir_version && c->m->ir_version < 4;
	if (old_ir) {
		c2i = false;
		pass_note(c, NULL, "IR version %" PRId64 " lists every initializer as a graph input: folded values become "
			  "Constant nodes", c->m->ir_version);
	}
	/* quantized weights kept, by stored type (a DequantizeLinear's x), and Q->DQ pairs of float weights */
	int kept_dq[IR_DTYPE_COUNT] = { 0 }, kept = 0, kept_q = 0;
	for (struct ir_node *n = g->first, *next; n; n = next) {
		next = n->next;
		if (ir_interrupted)
			return ir_diag_err(c->d, IR_EINTR, "stopped");
		if (pass_node_dead(n))
			continue;   /* dce's business */
		bool is_const = n->op == IR_OP_Constant;
		if (is_const && !c2i)
			continue;
		if (!is_const && n->n_inputs == 0 && !(n->op >= 0 && (ir_ops[n->op].flags & IR_OPF_RANDOM)))
			continue;   /* no inputs and not a Constant: nothing known about it */
		if (is_const && n->n_outputs == 1 && n->outputs[0] && n->outputs[0]->is_output) {
			pass_rejected(c, n, "its output '%s' is a graph output: it stays a Constant node, "
				      "so that a node still computes it", n->outputs[0]->name);
			continue;
		}
		char why[600];
		bool quiet;
		if (!foldable(n, &quiet, why, sizeof(why))) {
			if (!quiet)
				pass_rejected(c, n, "%s", why);
			continue;
		}
		/* a quantized weight stays quantized: folding its DequantizeLinear (or its Q->DQ pair) would
		 * store it as float */
		int qt = 0;
		if (keep_q && qw_node_keeps(n, &qt, why, sizeof(why))) {
			pass_rejected(c, n, "%s", why);
			if (n->op == IR_OP_QuantizeLinear) {
				kept_q++;
			} else {
				kept++;
				if (qt > 0 && qt < IR_DTYPE_COUNT)
					kept_dq[qt]++;
			}
			continue;
		}
		/* too big, as far as shape inference can tell before running it? */
		bool big = false;
		for (int i = 0; i < n->n_outputs && !big; i++) {
			uint64_t b;
			struct ir_value *v = n->outputs[i];
			if (!is_const && v && pass_n_readers(v) && inferred_bytes(v, &b) && max_bytes >= 0 &&
			    b > (uint64_t)max_bytes) {
				char bb[64];
				pass_rejected(c, n, "its output '%s' would take %s, more than max-bytes=%" PRId64
					      " (folding it would make the file that much bigger)", v->name,
					      pass_bytes_text((double)b, bb, sizeof(bb)), max_bytes);
				big = true;
			}
		}
		if (big)
			continue;
		struct kern_value *out = calloc((size_t)(n->n_outputs ? n->n_outputs : 1), sizeof(*out));
		if (!out)
			return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
		rc = evaluate(c, n, out, why, sizeof(why));
		bool ok = !rc;
		if (rc == IR_ENOMEM)
			goto fail;
		if (rc) {
			pass_rejected(c, n, "evaluating it failed: %s", why);
			rc = 0;
		}
		for (int i = 0; i < n->n_outputs && ok; i++) {
			struct ir_value *v = n->outputs[i];
			if (!v || !pass_n_readers(v))
				continue;
			if (out[i].kind != KV_TENSOR || !out[i].t) {
				pass_rejected(c, n, "it gave no tensor for its output '%s'", v->name);
				ok = false;
			} else if (!is_const && max_bytes >= 0 && tensor_bytes(out[i].t) > (double)max_bytes) {
				char bb[64];
				pass_rejected(c, n, "its output '%s' takes %s, more than max-bytes=%" PRId64
					      " (folding it would make the file that much bigger)", v->name,
					      pass_bytes_text(tensor_bytes(out[i].t), bb, sizeof(bb)), max_bytes);
				ok = false;
			}
		}
		if (!ok) {
			for (int i = 0; i < n->n_outputs; i++)
				kern_value_clear(&out[i]);
			free(out);
			continue;
		}
		/* the used outputs become initializers in place (graph outputs: a Constant node's output) */
		/* the report names the node after it is gone: keep its name and id */
		char self[256], op[64], msg[400] = "";
		snprintf(self, sizeof(self), "%s", n->name ? n->name : "");
		struct ir_node who = { .id = n->id, .name = self };
		snprintf(op, sizeof(op), "%s", n->op_type);
		size_t o = 0;
		for (int i = 0; i < n->n_outputs; i++) {
			struct ir_value *v = n->outputs[i];
			if (!v || !pass_n_readers(v))
				continue;
			struct ir_tensor *t = out[i].t;
			char tb[160], db[96], bb[64];
			snprintf(tb, sizeof(tb), "%s%s", ir_dtype_name(t->dtype), ir_dims_str(t->rank, t->dims, db, sizeof(db)));
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
				a.t = t;
				ir_tensor_ref(t);
				if (!k || !a.name || ir_node_set_attr(k, &a, c->d) || ir_node_set_output(k, 0, v, c->d)) {
					ir_attr_clear(&a);
					rc = ir_diag_err(c->d, IR_ENOMEM, "out of memory");
					goto fail;
				}
			} else if (ir_value_set_init(v, t, c->d)) {
				rc = IR_ERR;
				goto fail;
			}
			if (o < sizeof(msg))
				o += (size_t)snprintf(msg + o, sizeof(msg) - o, "%s'%s' %s (%s)%s", o ? ", " : "", v->name, tb,
						      pass_bytes_text(tensor_bytes(t), bb, sizeof(bb)),
						      v->is_output ? " as a Constant node (a graph output)" :
						      old_ir ? " as a Constant node" : "");
		}
		for (int i = 0; i < n->n_outputs; i++)
			kern_value_clear(&out[i]);
		free(out);
		int gone = pass_remove_dead_from(g, n);
		if (is_const)
			pass_rewrote(c, &who, "Constant now the initializer %s", msg);
		else
			pass_rewrote(c, &who, "%s folded into %s%s", op, msg,
				     gone > 1 ? " (with the Constant nodes only it read)" : "");
		continue;
fail:
		for (int i = 0; i < n->n_outputs; i++)
			kern_value_clear(&out[i]);
		free(out);
		return rc;
	}
	if (kept) {
		char by[256] = "";
		size_t o = 0;
		int kinds = 0;
		for (int t = 0; t < IR_DTYPE_COUNT; t++)
			kinds += kept_dq[t] > 0;
		for (int t = 0; t < IR_DTYPE_COUNT && kinds > 1; t++)
			if (kept_dq[t] && o < sizeof(by))
				o += (size_t)snprintf(by + o, sizeof(by) - o, "%s%d %s", o ? ", " : " (", kept_dq[t],
						      ir_dtype_name(t));
		if (o && o < sizeof(by))
			snprintf(by + o, sizeof(by) - o, ")");
		pass_note(c, NULL, "kept %d DequantizeLinear of quantized weights%s", kept, by);
	}
	if (kept_q)
		pass_note(c, NULL, "kept %d QuantizeLinear->DequantizeLinear pair%s of float weights", kept_q,
			  kept_q > 1 ? "s" : "");
	return 0;
}

const struct pass pass_fold_constants = {
	.name = "fold-constants",
	.summary = "evaluate nodes whose inputs are all constants and store the results as initializers",
	.explain =
		"A node whose inputs are all constants (initializers or Constant nodes) gives the same output on "
		"every run: the pass computes it once, with the CPU reference kernels, and stores the result as an "
		"initializer under the output's own name, so its readers do not change. The nodes of a constant "
		"chain (a weight transposed, then cast, then reshaped) fold one after the other, since each result "
		"is a constant input of the next. Constant nodes become initializers as well "
		"(constants-to-initializers=off keeps them).\n\n"
		"What is not folded, and why: an initializer that is also a graph input is a default the user may "
		"override, so it is no constant; random ops (RandomNormal, Bernoulli, Dropout in training) draw new "
		"numbers each run; control flow (If, Loop, Scan) and sequence ops are left as they are; an op the "
		"CPU backend cannot run stays. An output larger than max-bytes (default 1 MiB) stays computed: Tile, "
		"Expand and ConstantOfShape turn a few bytes into many, and folding them would make the model file "
		"that much bigger.\n\n"
		"Quantized weights stay quantized. A DequantizeLinear whose input is an integer, float8 or float4 "
		"constant (an int8 weight w_q with its scale S and zero point Z, standing for S * (w_q - Z)) has "
		"constant inputs, but folding it would store the weight as float32: four times the bytes of int8, "
		"eight of int4, and an engine builder such as TensorRT would no longer see that the layer is "
		"quantized. Such a node is kept, and so is a QuantizeLinear of a float constant that a "
		"DequantizeLinear reads (the pair is how some tools write a quantized weight); the report counts "
		"them. keep-quantized=off folds them into float weights, to compare a quantized model with the "
		"float one its weights stand for (`stats 0 1` shows the bytes it costs).\n\n"
		"The results are the CPU kernels' own numbers, in the output's element type, so the model gives the "
		"same outputs as before. A folded graph output becomes the output of a Constant node, keeping the "
		"interface. The initializers the folded nodes read may now be unused: prune-initializers removes "
		"them. Only the main graph is rewritten.",
	.options = options,
	.level = PASS_LEVEL_BASIC,
	.run = run,
};
