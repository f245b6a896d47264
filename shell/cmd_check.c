/*
 * cmd_check.c - check: a lint for the model. Four groups of findings, each
 * with a severity, its subject (a node or a value), what is wrong and what
 * to do:
 *
 *   ops        nodes ogsh cannot run, unknown domains and ops, attributes
 *              of another opset than the model imports, and the nodes the
 *              CUDA planner would put on the CPU (exec_plan_place: the
 *              planner's own rules, no GPU needed)
 *   shapes     symbolic or unknown input dims that the graph fixes anyway,
 *              found by inferring shapes with the dim bound to 1, 2 and 3
 *   precision  weights outside float16's range, float16 ops that lose
 *              accuracy, calibrated activations beyond float16
 *   structure  unused initializers and inputs, dead nodes, duplicate names,
 *              inputs with initializers, functions with other opsets
 *
 * Nothing here changes the model: every experiment runs on a clone.
 */
#include "shell.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { G_OPS, G_SHAPES, G_PRECISION, G_STRUCTURE, G_COUNT };
static const char *const group_names[G_COUNT] = { "ops", "shapes", "precision", "structure" };

enum { SEV_ERROR, SEV_WARNING, SEV_INFO };
static const char *const sev_names[] = { "error", "warning", "info" };

struct finding {
	int group, sev;
	int node_id;           /* -1: not about a node */
	char *node_name, *op;  /* when about a node */
	char *value;           /* the value it is about, or NULL */
	char *what, *fix;      /* fix may be NULL */
};

struct check {
	struct session *s;
	struct ir_model *m;    /* the session's model: read only */
	struct finding *f;
	int n, cap;
	char note[300];        /* what was not checked, and why ("" when all was) */
	bool oom;
};

static char *dupz(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* Adds a finding; `fix` is a format of its own after the `what` arguments:
 * pass fix NULL for none. */
static void add(struct check *c, int group, int sev, const struct ir_node *n, const char *value, const char *fix,
		const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static void add(struct check *c, int group, int sev, const struct ir_node *n, const char *value, const char *fix,
		const char *fmt, ...)
{
	if (c->oom)
		return;
	if (c->n == c->cap) {
		int cap = c->cap ? c->cap * 2 : 16;
		struct finding *nf = realloc(c->f, sizeof(*nf) * (size_t)cap);
		if (!nf) {
			c->oom = true;
			return;
		}
		c->f = nf;
		c->cap = cap;
	}
	struct finding *f = &c->f[c->n];
	memset(f, 0, sizeof(*f));
	f->group = group;
	f->sev = sev;
	f->node_id = n ? n->id : -1;
	va_list ap;
	va_start(ap, fmt);
	f->what = ir_vfmt(fmt, ap);
	va_end(ap);
	f->fix = dupz(fix);
	f->value = dupz(value);
	if (n) {
		f->node_name = dupz(n->name ? n->name : "");
		f->op = dupz(n->op_type);
	}
	if (!f->what || (fix && !f->fix) || (value && !f->value) || (n && (!f->node_name || !f->op))) {
		free(f->what);
		free(f->fix);
		free(f->value);
		free(f->node_name);
		free(f->op);
		c->oom = true;
		return;
	}
	c->n++;
}

/* "n59 'Reshape'" when the name is the op type or empty shows the op:
 * "n59 'conv1' (Conv)", "n59 (Reshape)". */
static const char *node_ref(const struct ir_node *n, char *buf, size_t size)
{
	if (n->name && *n->name && strcmp(n->name, n->op_type))
		snprintf(buf, size, "n%d '%s' (%s)", n->id, sh_esc(n->name), sh_esc(n->op_type));
	else if (n->name && *n->name)
		snprintf(buf, size, "n%d '%s'", n->id, sh_esc(n->name));
	else
		snprintf(buf, size, "n%d (%s)", n->id, sh_esc(n->op_type));
	return buf;
}

/* "[1,197,2304]" of a small integer tensor (at most 16 values shown). */
static const char *tensor_ints(const struct ir_tensor *t, char *buf, size_t size)
{
	size_t o = 0;
	const void *data = ir_tensor_data(t);
	o += (size_t)snprintf(buf + o, size - o, "[");
	for (uint64_t i = 0; data && i < t->numel && o < size; i++) {
		int64_t v;
		if (i == 16) {
			o += (size_t)snprintf(buf + o, size - o, ",...");
			break;
		}
		if (!ir_elem_to_i64(t->dtype, data, i, &v))
			v = 0;
		o += (size_t)snprintf(buf + o, size - o, "%s%" PRId64, i ? "," : "", v);
	}
	if (o < size)
		snprintf(buf + o, size - o, "]");
	return buf;
}

static const char *dims_str(const struct ir_type *t, char *buf, size_t size)
{
	return ir_type_str(t, buf, size);
}

/* ------------------------------------------------------------------------ */
/* ops                                                                       */
/* ------------------------------------------------------------------------ */

static bool known_domain(const char *d)
{
	static const char *const doms[] = { "", "ai.onnx", "ai.onnx.ml", "ai.ogsh", "ai.onnx.preview.training" };
	for (size_t i = 0; i < sizeof(doms) / sizeof(doms[0]); i++)
		if (!strcmp(d, doms[i]))
			return true;
	return false;
}

static bool imported(const struct ir_model *m, const char *dom)
{
	const char *d = dom ? dom : "";
	for (size_t i = 0; i < m->n_opsets; i++) {
		const char *od = m->opsets[i].domain ? m->opsets[i].domain : "";
		bool def = !*d || !strcmp(d, "ai.onnx"), odef = !*od || !strcmp(od, "ai.onnx");
		if ((def && odef) || !strcmp(d, od))
			return true;
	}
	return false;
}

static void check_node_op(struct check *c, const struct ir_node *n, const char *where)
{
	char nr[600], why[400];
	const char *dom = n->domain ? n->domain : "";
	node_ref(n, nr, sizeof(nr));
	const struct ir_function *fn = ir_model_find_function(c->m, n);
	if (!fn && !imported(c->m, dom) && !(*dom == 0 || !strcmp(dom, "ai.onnx")))
		add(c, G_OPS, SEV_ERROR, n, NULL, "add an opset import for the domain, or replace the node",
		    "%s%s is in domain '%s', which the model does not import", nr, where, sh_esc(dom));
	if (n->op == IR_OP_UNKNOWN && !fn) {
		if (!known_domain(dom))
			add(c, G_OPS, SEV_ERROR, n, NULL,
			    "replace it with standard ONNX ops (export without custom ops), or add a model function "
			    "that defines it",
			    "%s%s is in domain '%s', which ogsh does not know: it cannot run it", nr, where, sh_esc(dom));
		else
			add(c, G_OPS, SEV_ERROR, n, NULL, "check the op's spelling and domain against the ONNX operators",
			    "%s%s: no op '%s' in domain '%s'", nr, where, sh_esc(n->op_type),
			    *dom ? sh_esc(dom) : "ai.onnx");
		return;
	}
	if (!exec_node_runnable_at(c->m, n, 0, why, sizeof(why)))
		add(c, G_OPS, SEV_ERROR, n, NULL, "replace it with ops ogsh runs, or run the model elsewhere",
		    "%s%s cannot run on ogsh's CPU reference: %s", nr, where, why);
	if (n->op == IR_OP_UNKNOWN)
		return;
	int64_t opset = ir_model_opset(c->m, dom);
	if (opset > 0 && !fn && ir_ops[n->op].since > opset) {
		char fix[300];
		snprintf(fix, sizeof(fix), "import opset %d (or later) of '%s', or replace the node with older ops",
			 ir_ops[n->op].since, *dom ? sh_esc(dom) : "ai.onnx");
		add(c, G_OPS, SEV_ERROR, n, NULL, fix, "%s%s: %s came in opset %d of '%s', but the model imports opset %" PRId64,
		    nr, where, sh_esc(n->op_type), ir_ops[n->op].since, *dom ? sh_esc(dom) : "ai.onnx", opset);
	}
	for (int a = 0; opset > 0 && a < n->n_attrs; a++) {
		const struct ir_attr_schema *sc = ir_op_attr(n->op, n->attrs[a].name, 0);
		if (!sc || ir_attr_schema_at(sc, opset))
			continue;
		char fix[300];
		if (opset < sc->since) {
			snprintf(fix, sizeof(fix), "import opset %d of '%s' or drop the attribute", sc->since,
				 *dom ? sh_esc(dom) : "ai.onnx");
			add(c, G_OPS, SEV_ERROR, n, NULL, fix,
			    "%s%s: attribute '%s' of %s needs opset %d, but the model imports opset %" PRId64, nr, where,
			    sh_esc(n->attrs[a].name), sh_esc(n->op_type), sc->since, opset);
		} else {
			snprintf(fix, sizeof(fix), "drop it (or import an opset below %d)", sc->until);
			add(c, G_OPS, SEV_ERROR, n, NULL, fix,
			    "%s%s: attribute '%s' of %s was removed in opset %d, and the model imports opset %" PRId64, nr,
			    where, sh_esc(n->attrs[a].name), sh_esc(n->op_type), sc->until, opset);
		}
	}
}

static void check_graph_ops(struct check *c, const struct ir_graph *g, int depth)
{
	char where[300] = "";
	if (g->owner)
		snprintf(where, sizeof(where), " (in a subgraph of n%d)", g->owner->id);
	for (const struct ir_node *n = g->first; n; n = n->next) {
		check_node_op(c, n, where);
		for (int a = 0; depth < 8 && a < n->n_attrs; a++) {
			const struct ir_attr *at = &n->attrs[a];
			if (at->type == IR_ATTR_GRAPH && at->g)
				check_graph_ops(c, at->g, depth + 1);
			for (size_t k = 0; at->type == IR_ATTR_GRAPHS && k < at->n; k++)
				check_graph_ops(c, at->graphs[k], depth + 1);
		}
	}
}

/* The CUDA placement: the planner's rules for every node, no GPU needed. */
static void check_placement(struct check *c)
{
	const char *e = getenv("OGSH_DEVICE");
	char why[200];
	if (e && !strcmp(e, "cpu")) {
		snprintf(c->note, sizeof(c->note), "cuda placement not checked: the GPU is turned off (OGSH_DEVICE=cpu)");
		return;
	}
	if (!exec_plan_has_device(why, sizeof(why))) {
		snprintf(c->note, sizeof(c->note), "cuda placement not checked: %s", why);
		return;
	}
	struct exec_values in = { 0 };
	struct ir_diag d;
	ir_diag_init(&d);
	struct exec_plan *p = NULL;
	if (exec_random_inputs(c->m, 0, NULL, 0, NULL, &in, &d) || exec_plan_place(c->m, &in, &p, &d)) {
		add(c, G_OPS, SEV_WARNING, NULL, NULL, "run `plan` on a GPU machine for the details",
		    "cuda placement: %s", d.error ? d.error : "planning failed");
	} else {
		int nn;
		const struct exec_plan_node *pn = exec_plan_nodes(p, &nn);
		char nr[600];
		for (int i = 0; i < nn; i++)
			if (pn[i].place == EXEC_ON_CPU)
				add(c, G_OPS, SEV_WARNING, pn[i].node, NULL,
				    "the copies around it cost time; see `plan` for the whole placement",
				    "%s runs on the CPU under cuda: %s", node_ref(pn[i].node, nr, sizeof(nr)), pn[i].why);
	}
	exec_plan_free(p);
	exec_values_clear(&in);
	ir_diag_clear(&d);
}

static void check_ops(struct check *c)
{
	check_graph_ops(c, c->m->graph, 0);
	check_placement(c);
}

/* ------------------------------------------------------------------------ */
/* shapes                                                                    */
/* ------------------------------------------------------------------------ */

/* A clone with every input dim `sym` (or, with sym NULL, dim k of input
 * `in` only) set to v, shapes inferred; NULL when out of memory. */
static struct ir_model *bound_clone(const struct ir_model *m, const char *sym, int in, int k, int64_t v)
{
	struct ir_model *mc = ir_model_clone(m);
	if (!mc)
		return NULL;
	struct ir_graph *g = mc->graph;
	for (int i = 0; i < g->n_inputs; i++) {
		struct ir_type *t = &g->inputs[i]->type;
		if (t->kind != IR_TYPE_TENSOR)
			continue;
		for (int j = 0; j < t->rank; j++) {
			struct ir_dim *dm = &t->dims[j];
			bool hit = sym ? dm->kind == IR_DIM_PARAM && dm->param && !strcmp(dm->param, sym)
				       : (i == in && j == k);
			if (!hit || v < 0)
				continue;
			ir_dim_clear(dm);
			dm->kind = IR_DIM_VALUE;
			dm->value = v;
		}
	}
	/* what the ops imply, not what the exporter declared: the types of node
	 * outputs in value_info (and of graph outputs) were written for the
	 * dummy input, and would fill in a shape the op itself gives up on */
	for (size_t i = 0; i < g->n_values; i++) {
		struct ir_value *val = g->values[i];
		if (!val->producer)
			continue;
		ir_type_clear(&val->type);
		val->has_vinfo = val->has_type_proto = false;
	}
	struct ir_diag d;
	ir_diag_init(&d);
	ir_infer(mc, &d);
	ir_diag_clear(&d);
	return mc;
}

/* Whether inference gave up on node n: an output without a rank while
 * every input's rank is known (sx_fail). */
static bool node_failed(const struct ir_node *n)
{
	bool out_lost = false;
	for (int i = 0; i < n->n_outputs; i++) {
		const struct ir_value *v = n->outputs[i];
		if (v && v->inferred.kind == IR_TYPE_TENSOR && v->inferred.rank < 0)
			out_lost = true;
	}
	if (!out_lost)
		return false;
	for (int i = 0; i < n->n_inputs; i++) {
		const struct ir_value *v = n->inputs[i];
		if (v && ir_value_type(v)->kind == IR_TYPE_TENSOR && ir_value_type(v)->rank < 0)
			return false;
	}
	return true;
}

/* Why inference gave up on n, without the node's own name in front. */
static const char *fail_why(const struct ir_node *n)
{
	char pre[32];
	snprintf(pre, sizeof(pre), "n%d ", n->id);
	for (int i = 0; i < n->n_outputs; i++)
		if (n->outputs[i] && n->outputs[i]->why) {
			const char *w = n->outputs[i]->why, *colon = strstr(w, ": ");
			if (!strncmp(w, pre, strlen(pre)) && colon)
				return colon + 2;
			return w;
		}
	return "its shape cannot be inferred";
}

static bool types_same(const struct ir_value *a, const struct ir_value *b)
{
	const struct ir_type *ta = ir_value_type(a), *tb = ir_value_type(b);
	return ir_type_fully_known(ta) && ir_type_fully_known(tb) && ir_type_equal(ta, tb);
}

/* The input's dims as set-input-shape takes them, with dim sym (or dim k) as v. */
static void static_dims(const struct ir_value *x, const char *sym, int k, int64_t v, char *buf, size_t size)
{
	const struct ir_type *t = &x->type;
	bool all_num = true;
	for (int j = 0; j < t->rank; j++) {
		const struct ir_dim *dm = &t->dims[j];
		bool hit = sym ? dm->kind == IR_DIM_PARAM && dm->param && !strcmp(dm->param, sym) : j == k;
		if (!hit && dm->kind != IR_DIM_VALUE)
			all_num = false;
	}
	size_t o = 0;
	if (!all_num)
		o += (size_t)snprintf(buf, size, "[");
	for (int j = 0; j < t->rank && o < size; j++) {
		const struct ir_dim *dm = &t->dims[j];
		bool hit = sym ? dm->kind == IR_DIM_PARAM && dm->param && !strcmp(dm->param, sym) : j == k;
		const char *sep = j ? (all_num ? "x" : ",") : "";
		if (hit)
			o += (size_t)snprintf(buf + o, size - o, "%s%" PRId64, sep, v);
		else if (dm->kind == IR_DIM_VALUE)
			o += (size_t)snprintf(buf + o, size - o, "%s%" PRId64, sep, dm->value);
		else if (dm->kind == IR_DIM_PARAM && dm->param)
			o += (size_t)snprintf(buf + o, size - o, "%s%s", sep, dm->param);
		else
			o += (size_t)snprintf(buf + o, size - o, "%s?", sep);
	}
	if (!all_num && o < size)
		snprintf(buf + o, size - o, "]");
}

/* One symbol (or one anonymous dim): does the graph really let it vary? */
static void check_dim(struct check *c, const struct ir_value *x, int k, const char *sym)
{
	char subj[700], nr[600], tb[300], fix[900], dims[300];
	int in_idx = -1;
	for (int i = 0; i < c->m->graph->n_inputs; i++)
		if (c->m->graph->inputs[i] == x)
			in_idx = i;
	if (sym)
		snprintf(subj, sizeof(subj), "input '%s' dim %d '%s'", sh_esc(x->name), k, sh_esc(sym));
	else
		snprintf(subj, sizeof(subj), "input '%s' dim %d", sh_esc(x->name), k);
	/* 0: as declared; 1, 2, 3: bound */
	struct ir_model *mv[4] = { 0 };
	for (int i = 0; i < 4; i++)
		if (!(mv[i] = bound_clone(c->m, sym, in_idx, k, i ? i : -1))) {
			c->oom = true;
			goto out;
		}
	const char *what = sym ? sym : "the dim";
	/* the first node that breaks at 2 or 3 */
	const struct ir_node *n0 = mv[0]->graph->first;
	for (; n0; n0 = n0->next) {
		const struct ir_node *nb[4];
		for (int i = 1; i < 4; i++)
			nb[i] = ir_node_by_id(mv[i]->graph, n0->id);
		if (!nb[1] || !nb[2] || !nb[3])
			continue;
		int bad = node_failed(nb[2]) ? 2 : node_failed(nb[3]) ? 3 : 0;
		if (!bad)
			continue;
		bool ok1 = !node_failed(nb[1]);
		if (!ok1 && node_failed(n0))
			continue;   /* broken whatever the dim: not this check's business */
		const struct ir_node *orig = ir_node_by_id(c->m->graph, n0->id);
		if (!orig)
			continue;
		node_ref(orig, nr, sizeof(nr));
		char through[400] = "";
		for (int i = 1; i < orig->n_inputs; i++) {
			const struct ir_tensor *t = orig->inputs[i] ? ir_value_const(orig->inputs[i]) : NULL;
			if (t && ir_dtype_is_int(t->dtype) && t->rank == 1) {
				if (orig->op == IR_OP_Reshape && i == 1)
					snprintf(through, sizeof(through), " through its constant shape %s",
						 tensor_ints(t, tb, sizeof(tb)));
				else
					snprintf(through, sizeof(through), " through its constant input '%s' %s",
						 sh_esc(orig->inputs[i]->name), tensor_ints(t, tb, sizeof(tb)));
				break;
			}
		}
		static_dims(x, sym, k, ok1 ? 1 : 2, dims, sizeof(dims));
		if (ok1) {
			snprintf(fix, sizeof(fix),
				 "re-export with a dummy %s of 2 (the exporter then computes the shape), or "
				 "set-input-shape %s %s to make it static", sym ? sh_esc(sym) : "size", sh_esc(x->name), dims);
			add(c, G_SHAPES, SEV_ERROR, orig, x->name, fix,
			    "%s is declared dynamic but %s fixes it to 1%s (at %s = %d: %s)", subj, nr, through,
			    what, bad, fail_why(nb[bad]));
		} else {
			snprintf(fix, sizeof(fix), "re-export with the dim dynamic, or set-input-shape %s to the size "
				 "the model was exported with", sh_esc(x->name));
			add(c, G_SHAPES, SEV_ERROR, orig, x->name, fix,
			    "%s is declared dynamic but %s cannot take it at %d%s: %s", subj, nr, bad, through,
			    fail_why(nb[bad]));
		}
		goto out;
	}
	/* nothing breaks: does the dim reach any graph output? */
	{
		struct ir_graph *g2 = mv[2]->graph, *g3 = mv[3]->graph;
		bool any_out = g2->n_outputs > 0, all_same = true;
		for (int i = 0; i < g2->n_outputs && i < g3->n_outputs; i++)
			if (!ir_type_equal(ir_value_type(g2->outputs[i]), ir_value_type(g3->outputs[i])))
				all_same = false;
		bool in_out = false;   /* the graph's declared outputs use the symbol */
		for (int i = 0; sym && i < c->m->graph->n_outputs; i++) {
			const struct ir_type *t = &c->m->graph->outputs[i]->type;
			for (int j = 0; t->kind == IR_TYPE_TENSOR && j < t->rank; j++)
				if (t->dims[j].kind == IR_DIM_PARAM && t->dims[j].param && !strcmp(t->dims[j].param, sym))
					in_out = true;
		}
		if (!any_out || !all_same)
			goto out;
		/* the first float node whose inputs change with the dim and outputs do not */
		for (const struct ir_node *n2 = g2->first; n2; n2 = n2->next) {
			const struct ir_node *n3 = ir_node_by_id(g3, n2->id);
			if (!n3 || n2->n_outputs < 1 || !n2->outputs[0] ||
			    !ir_dtype_is_float(ir_value_type(n2->outputs[0])->elem))
				continue;
			bool in_diff = false, out_same = true;
			for (int i = 0; i < n2->n_inputs && i < n3->n_inputs; i++)
				if (n2->inputs[i] && n3->inputs[i] && !types_same(n2->inputs[i], n3->inputs[i]) &&
				    ir_dtype_is_float(ir_value_type(n2->inputs[i])->elem))
					in_diff = true;
			for (int i = 0; i < n2->n_outputs && i < n3->n_outputs; i++)
				if (n2->outputs[i] && n3->outputs[i] && !types_same(n2->outputs[i], n3->outputs[i]))
					out_same = false;
			if (!in_diff || !out_same)
				continue;
			const struct ir_node *orig = ir_node_by_id(c->m->graph, n2->id);
			if (!orig)
				continue;
			node_ref(orig, nr, sizeof(nr));
			add(c, G_SHAPES, SEV_WARNING, orig, x->name,
			    "check the node's constant inputs; re-export with a dummy size of 2 if the exporter baked it in",
			    "%s is declared dynamic but no output depends on it: %s gives %s at %s = 2 and at 3%s", subj, nr,
			    dims_str(ir_value_type(n2->outputs[0]), tb, sizeof(tb)), what,
			    in_out ? ", though the graph's outputs declare it" : "");
			break;
		}
	}
out:
	for (int i = 0; i < 4; i++)
		ir_model_free(mv[i]);
}

static void check_shapes(struct check *c)
{
	const struct ir_graph *g = c->m->graph;
	/* symbols already checked */
	const char *seen[256];
	int n_seen = 0;
	for (int i = 0; i < g->n_inputs; i++) {
		const struct ir_value *x = g->inputs[i];
		const struct ir_type *t = &x->type;
		if (x->init || t->kind != IR_TYPE_TENSOR)
			continue;
		if (t->rank < 0) {
			add(c, G_SHAPES, SEV_WARNING, NULL, x->name, "give it a shape with set-input-shape",
			    "input '%s' has no shape: its rank is not known, so no shape after it is", sh_esc(x->name));
			continue;
		}
		for (int k = 0; k < t->rank; k++) {
			const struct ir_dim *dm = &t->dims[k];
			if (dm->kind == IR_DIM_VALUE)
				continue;
			if (dm->kind == IR_DIM_PARAM && dm->param) {
				bool dup = false;
				for (int j = 0; j < n_seen; j++)
					dup |= !strcmp(seen[j], dm->param);
				if (dup)
					continue;
				if (n_seen < 256)
					seen[n_seen++] = dm->param;
				check_dim(c, x, k, dm->param);
			} else {
				char fix[300];
				snprintf(fix, sizeof(fix), "name it (set-input-shape %s with a symbol there, e.g. batch) or give "
					 "it a size", sh_esc(x->name));
				add(c, G_SHAPES, SEV_WARNING, NULL, x->name, fix,
				    "input '%s' dim %d is unknown and has no name: shapes after it cannot relate it to others",
				    sh_esc(x->name), k);
				check_dim(c, x, k, NULL);
			}
		}
	}
}

/* ------------------------------------------------------------------------ */
/* precision                                                                 */
/* ------------------------------------------------------------------------ */

#define FP16_MAX 65504.0

static void check_tensor_fp16(struct check *c, const struct ir_tensor *t, const char *name, const struct ir_node *n)
{
	if (!t || (t->dtype != IR_FLOAT && t->dtype != IR_DOUBLE) || !t->numel)
		return;
	const void *data = ir_tensor_data(t);
	if (!data)
		return;
	uint64_t over = 0, under = 0;
	double amax = 0, amin_nz = INFINITY;
	for (uint64_t i = 0; i < t->numel; i++) {
		double v = ir_elem_to_f64(t->dtype, data, i), a = fabs(v);
		if (!isfinite(v))
			continue;
		uint16_t h = ir_f32_to_f16((float)v);
		if ((h & 0x7c00) == 0x7c00)
			over++;
		else if (v != 0 && (h & 0x7fff) == 0)
			under++;
		if (a > amax)
			amax = a;
		if (a > 0 && a < amin_nz)
			amin_nz = a;
	}
	char b1[32], b2[32], subj[700];
	if (n) {
		char nr[600];
		snprintf(subj, sizeof(subj), "constant '%s' of %s", sh_esc(name), node_ref(n, nr, sizeof(nr)));
	} else {
		snprintf(subj, sizeof(subj), "weight '%s'", sh_esc(name));
	}
	if (over)
		add(c, G_PRECISION, SEV_WARNING, n, name,
		    "keep its reader in float32 when converting (convert-fp16 --block-nodes=...), or clamp (convert-fp16 "
		    "--clamp)",
		    "%s has %s of %s values beyond float16's range (|x| > 65504, largest %g): they become inf in float16",
		    subj, sh_count(over, b1, sizeof(b1)), sh_count(t->numel, b2, sizeof(b2)), amax);
	if (under)
		add(c, G_PRECISION, SEV_WARNING, n, name,
		    "keep its reader in float32 when converting, or rescale the weights",
		    "%s has %s of %s nonzero values that become 0 in float16 (|x| below 2^-25, half the smallest "
		    "subnormal 5.96e-8; smallest %g)",
		    subj, sh_count(under, b1, sizeof(b1)), sh_count(t->numel, b2, sizeof(b2)), amin_nz);
}

static bool in_f16(const struct ir_node *n, int i)
{
	if (i >= n->n_inputs || !n->inputs[i])
		return false;
	int e = ir_value_type(n->inputs[i])->elem;
	return e == IR_FLOAT16;
}

/* Elements reduced per output by a Reduce* node, or 0 when not known. */
static int64_t reduced_elems(const struct ir_node *n, int64_t opset)
{
	const struct ir_type *t = ir_value_type(n->inputs[0]);
	if (!ir_type_fully_known(t) || t->rank < 0)
		return 0;
	int64_t axes[IR_MAX_RANK];
	int na = 0;
	const struct ir_attr *a = ir_node_attr(n, "axes");
	bool from_input = (n->op == IR_OP_ReduceSum && opset >= 13) || opset >= 18;
	if (!from_input && a && a->type == IR_ATTR_INTS) {
		for (size_t k = 0; k < a->n && na < IR_MAX_RANK; k++)
			axes[na++] = a->ints[k];
	} else if (from_input && n->n_inputs > 1 && n->inputs[1]) {
		const struct ir_tensor *at = ir_value_const(n->inputs[1]);
		if (!at)
			return 0;
		const void *d = ir_tensor_data(at);
		for (uint64_t k = 0; d && k < at->numel && na < IR_MAX_RANK; k++)
			if (!ir_elem_to_i64(at->dtype, d, k, &axes[na++]))
				return 0;
	}
	int64_t r = 1;
	if (!na) {
		for (int k = 0; k < t->rank; k++)
			r *= t->dims[k].value;
		return r;
	}
	for (int k = 0; k < na; k++) {
		int64_t ax = axes[k] < 0 ? axes[k] + t->rank : axes[k];
		if (ax < 0 || ax >= t->rank)
			return 0;
		r *= t->dims[ax].value;
	}
	return r;
}

static void check_precision(struct check *c)
{
	const struct ir_graph *g = c->m->graph;
	for (int i = 0; i < g->n_inits; i++)
		if (g->inits[i]->n_uses || g->inits[i]->is_output)
			check_tensor_fp16(c, g->inits[i]->init, g->inits[i]->name, NULL);
	char nr[600], b1[32];
	for (const struct ir_node *n = g->first; n; n = n->next) {
		if (n->op == IR_OP_Constant && n->n_outputs == 1 && n->outputs[0]) {
			check_tensor_fp16(c, ir_value_const(n->outputs[0]), n->outputs[0]->name, n);
			continue;
		}
		if (n->op == IR_OP_UNKNOWN || !in_f16(n, 0))
			continue;
		node_ref(n, nr, sizeof(nr));
		int64_t opset = ir_model_opset(c->m, n->domain);
		switch (n->op) {
		case IR_OP_Pow:
			add(c, G_PRECISION, SEV_WARNING, n, NULL,
			    "keep it in float32 (convert-fp16 --block-nodes=NAME), or compute x*x for a square",
			    "%s computes Pow in float16: powers overflow (above 65504) and lose precision fast", nr);
			break;
		case IR_OP_Exp:
			add(c, G_PRECISION, SEV_WARNING, n, NULL, "keep it in float32 (convert-fp16 --block-nodes=NAME)",
			    "%s computes Exp in float16: it overflows for inputs above 11.09", nr);
			break;
		case IR_OP_Softmax:
		case IR_OP_LogSoftmax:
			add(c, G_PRECISION, SEV_INFO, n, NULL,
			    "keep it in float32 if the outputs differ from the float32 model's (run --check)",
			    "%s has a float16 input: its exponentials and sum lose accuracy over long rows", nr);
			break;
		case IR_OP_LayerNormalization:
		case IR_OP_ogsh_LayerNormalization:
			if (ir_node_attr_int(n, "stash_type", 1) != 1)
				add(c, G_PRECISION, SEV_WARNING, n, NULL, "set stash_type=1 (the default): the statistics in float32",
				    "%s computes its mean and variance in float16 (stash_type=%" PRId64
				    "): the variance loses accuracy", nr, ir_node_attr_int(n, "stash_type", 1));
			break;
		case IR_OP_ReduceSum:
		case IR_OP_ReduceMean:
		case IR_OP_ReduceSumSquare: {
			int64_t r = reduced_elems(n, opset);
			if (r > 4096)
				add(c, G_PRECISION, SEV_WARNING, n, NULL, "keep it in float32 (convert-fp16 --block-nodes=NAME)",
				    "%s sums %s elements per output in float16: the sum loses accuracy (11-bit mantissa) "
				    "and may overflow", nr, sh_count((uint64_t)r, b1, sizeof(b1)));
			break;
		}
		default:
			break;
		}
	}
	/* the session's calibration: activations beyond float16 */
	struct ir_calib tmp;
	const struct ir_calib *cal = sh_session_calib(c->s, &tmp);
	for (int i = 0; cal && i < cal->n; i++) {
		const struct ir_calib_tensor *t = &cal->t[i];
		double amax = fmax(fabs(t->min), fabs(t->max));
		if (!t->count || amax <= FP16_MAX)
			continue;
		const struct ir_value *v = ir_value_find(g, t->name);
		char fix[800] = "keep the node that makes it in float32 (convert-fp16 does that for activations above "
				"--data-max)";
		if (v && v->producer)
			snprintf(fix, sizeof(fix), "keep %s in float32 (convert-fp16 --block-nodes=%s)",
				 node_ref(v->producer, nr, sizeof(nr)),
				 v->producer->name && *v->producer->name ? sh_esc(v->producer->name) : "NAME");
		add(c, G_PRECISION, SEV_WARNING, v ? v->producer : NULL, t->name, fix,
		    "activation '%s' reaches %g in the calibration (%s): beyond float16's 65504, it becomes inf",
		    sh_esc(t->name), amax, cal->data_desc[0] ? cal->data_desc : "the session's data");
	}
	ir_calib_clear(&tmp);
}

/* ------------------------------------------------------------------------ */
/* structure                                                                 */
/* ------------------------------------------------------------------------ */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Marks (mark = 1) every node some graph output needs. */
static void mark_live(struct ir_graph *g)
{
	for (struct ir_node *n = g->first; n; n = n->next)
		n->mark = 0;
	for (int i = 0; i < g->n_outputs; i++)
		if (g->outputs[i]->producer)
			g->outputs[i]->producer->mark = 1;
	/* nodes are in topological order: one backward sweep suffices */
	for (struct ir_node *n = g->last; n; n = n->prev) {
		if (!n->mark)
			continue;
		for (int i = 0; i < n->n_inputs; i++)
			if (n->inputs[i] && n->inputs[i]->producer)
				n->inputs[i]->producer->mark = 1;
		for (int i = 0; i < n->n_implicit; i++)
			if (n->implicit[i] && n->implicit[i]->producer)
				n->implicit[i]->producer->mark = 1;
	}
}

static void check_structure(struct check *c)
{
	struct ir_graph *g = c->m->graph;
	char nr[600];
	for (int i = 0; i < g->n_inits; i++) {
		const struct ir_value *v = g->inits[i];
		if (!v->n_uses && !v->is_output)
			add(c, G_STRUCTURE, SEV_WARNING, NULL, v->name, "apply prune-initializers",
			    "initializer '%s' is not read by any node", sh_esc(v->name));
	}
	for (int i = 0; i < g->n_inputs; i++) {
		const struct ir_value *v = g->inputs[i];
		if (v->init)
			add(c, G_STRUCTURE, SEV_INFO, NULL, v->name,
			    "if it is a constant, drop it from the graph inputs (IR version 4 and later allow that) so passes "
			    "can fold it",
			    "graph input '%s' has an initializer: a default value a caller may replace", sh_esc(v->name));
		else if (!v->n_uses && !v->is_output)
			add(c, G_STRUCTURE, SEV_WARNING, NULL, v->name, "drop the input, or check that the graph reads it",
			    "graph input '%s' is not read by any node, yet callers must feed it", sh_esc(v->name));
	}
	mark_live(g);
	for (struct ir_node *n = g->first; n; n = n->next)
		if (!n->mark)
			add(c, G_STRUCTURE, SEV_WARNING, n, NULL, "apply dce to remove it",
			    "%s reaches no graph output", node_ref(n, nr, sizeof(nr)));
	for (struct ir_node *n = g->first; n; n = n->next)
		n->mark = 0;
	/* duplicate node names */
	const char **names = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof(*names));
	if (!names) {
		c->oom = true;
		return;
	}
	int nn = 0;
	for (struct ir_node *n = g->first; n; n = n->next)
		if (n->name && *n->name && nn < g->n_nodes)
			names[nn++] = n->name;
	qsort(names, (size_t)nn, sizeof(*names), cmp_str);
	for (int i = 0; i + 1 < nn;) {
		int j = i + 1;
		while (j < nn && !strcmp(names[i], names[j]))
			j++;
		if (j - i > 1) {
			char ids[200] = "";
			size_t o = 0;
			int shown = 0;
			for (struct ir_node *n = g->first; n && o < sizeof(ids); n = n->next)
				if (n->name && !strcmp(n->name, names[i])) {
					if (shown++ == 8) {
						o += (size_t)snprintf(ids + o, sizeof(ids) - o, ", ...");
						break;
					}
					o += (size_t)snprintf(ids + o, sizeof(ids) - o, "%sn%d", shown > 1 ? ", " : "", n->id);
				}
			add(c, G_STRUCTURE, SEV_WARNING, NULL, NULL, "rename them (rename --node OLD NEW names the first; use ids)",
			    "%d nodes are named '%s' (%s): commands that take a name cannot tell them apart", j - i,
			    sh_esc(names[i]), ids);
		}
		i = j;
	}
	free(names);
	/* functions importing other opsets than the model */
	for (size_t f = 0; f < c->m->n_functions; f++) {
		const struct ir_function *fn = &c->m->functions[f];
		for (size_t k = 0; k < fn->n_opsets; k++) {
			const char *dom = fn->opsets[k].domain ? fn->opsets[k].domain : "";
			int64_t mv = ir_model_opset(c->m, dom);
			if (mv && fn->opsets[k].version != mv) {
				char fix[300];
				snprintf(fix, sizeof(fix), "make the function import opset %" PRId64 " too (ONNX requires "
					 "one version per domain in a model)", mv);
				add(c, G_STRUCTURE, SEV_WARNING, NULL, NULL, fix,
				    "function '%s' imports opset %" PRId64 " of '%s' but the model imports %" PRId64,
				    sh_esc(fn->name), fn->opsets[k].version, *dom ? sh_esc(dom) : "ai.onnx", mv);
			}
		}
	}
}

/* ------------------------------------------------------------------------ */
/* the command                                                               */
/* ------------------------------------------------------------------------ */

static int parse_groups(struct session *s, const char *list, bool *want)
{
	const char *p = list;
	while (*p) {
		size_t len = strcspn(p, ",");
		int g = -1;
		for (int i = 0; i < G_COUNT; i++)
			if (len == strlen(group_names[i]) && !strncmp(p, group_names[i], len))
				g = i;
		if (g < 0)
			return sh_error(s, "check: unknown group '%.*s' (groups: ops, shapes, precision, structure)",
					(int)(len > 64 ? 64 : len), sh_esc(p));
		want[g] = true;
		p += len;
		if (*p == ',')
			p++;
	}
	return 0;
}

int cmd_check(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	bool want[G_COUNT] = { false }, any = false;
	for (int i = 0; i < a.npos; i++)
		if (parse_groups(s, a.pos[i], want))
			return -1;
	const char *only = sh_opt(&a, "only");
	if (only) {
		if (!*only)
			return sh_error(s, "check: --only needs a list of groups (ops, shapes, precision, structure)");
		if (parse_groups(s, only, want))
			return -1;
	}
	for (int i = 0; i < G_COUNT; i++)
		any |= want[i];
	if (!any)
		for (int i = 0; i < G_COUNT; i++)
			want[i] = true;
	if (!sh_need_model(s))
		return -1;
	if (sh_infer(s))
		return -1;
	struct check c = { .s = s, .m = s->model };
	if (want[G_OPS])
		check_ops(&c);
	if (want[G_SHAPES] && !ir_interrupted)
		check_shapes(&c);
	if (want[G_PRECISION] && !ir_interrupted)
		check_precision(&c);
	if (want[G_STRUCTURE] && !ir_interrupted)
		check_structure(&c);
	int ret = 0;
	if (ir_interrupted)
		ret = sh_error(s, "check: stopped");
	else if (c.oom)
		ret = sh_error(s, "check: out of memory");
	int count[3] = { 0 };
	for (int i = 0; i < c.n; i++)
		count[c.f[i].sev]++;
	bool json = sh_flag(&a, "json");
	if (!ret && sh_json_file(s, json)) {
		struct sh_json j;
		sh_json_begin(&j, sh_json_file(s, json));
		sh_json_obj(&j);
		sh_json_key(&j, "groups");
		sh_json_arr(&j);
		for (int g = 0; g < G_COUNT; g++)
			if (want[g])
				sh_json_str(&j, group_names[g]);
		sh_json_arr_end(&j);
		sh_json_key(&j, "findings");
		sh_json_arr(&j);
		for (int g = 0; g < G_COUNT; g++)
			for (int i = 0; i < c.n; i++) {
				const struct finding *f = &c.f[i];
				if (f->group != g)
					continue;
				sh_json_obj(&j);
				sh_json_kstr(&j, "group", group_names[g]);
				sh_json_kstr(&j, "severity", sev_names[f->sev]);
				if (f->node_id >= 0) {
					sh_json_kint(&j, "node_id", f->node_id);
					sh_json_kstr(&j, "node", f->node_name);
					sh_json_kstr(&j, "op", f->op);
				}
				if (f->value)
					sh_json_kstr(&j, "value", f->value);
				sh_json_kstr(&j, "what", f->what);
				sh_json_kstr(&j, "fix", f->fix);
				sh_json_obj_end(&j);
			}
		sh_json_arr_end(&j);
		sh_json_key(&j, "counts");
		sh_json_obj(&j);
		sh_json_kint(&j, "error", count[0]);
		sh_json_kint(&j, "warning", count[1]);
		sh_json_kint(&j, "info", count[2]);
		sh_json_kint(&j, "total", c.n);
		sh_json_obj_end(&j);
		sh_json_kstr(&j, "note", c.note[0] ? c.note : NULL);
		sh_json_obj_end(&j);
		sh_json_end(&j);
	}
	if (ret || json) {
		/* nothing more */
	} else if (!c.n) {
		sh_printf(s, "no findings\n");
	} else {
		for (int g = 0; g < G_COUNT; g++) {
			bool head = false;
			for (int i = 0; i < c.n; i++) {
				const struct finding *f = &c.f[i];
				if (f->group != g)
					continue;
				if (!head) {
					sh_printf(s, "%s%s:%s\n", sh_c(s, SH_BOLD), group_names[g], sh_c(s, SH_RESET));
					head = true;
				}
				const char *col = f->sev == SEV_ERROR ? SH_RED : f->sev == SEV_WARNING ? SH_YELLOW : SH_CYAN;
				sh_printf(s, "  %s%-7s%s  %s", sh_c(s, col), sev_names[f->sev], sh_c(s, SH_RESET), f->what);
				if (f->fix)
					sh_printf(s, ": %s", f->fix);
				sh_printf(s, "\n");
			}
		}
		char b[3][32];
		sh_printf(s, "%s: %s, %s, %d info\n", sh_nouns((uint64_t)c.n, "finding", "findings", b[0], sizeof(b[0])),
			  sh_nouns((uint64_t)count[0], "error", "errors", b[1], sizeof(b[1])),
			  sh_nouns((uint64_t)count[1], "warning", "warnings", b[2], sizeof(b[2])), count[2]);
	}
	if (!ret && !sh_flag(&a, "json") && c.note[0])
		sh_printf(s, "note: %s\n", c.note);
	for (int i = 0; i < c.n; i++) {
		free(c.f[i].what);
		free(c.f[i].fix);
		free(c.f[i].value);
		free(c.f[i].node_name);
		free(c.f[i].op);
	}
	free(c.f);
	return ret;
}
