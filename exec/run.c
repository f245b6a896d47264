/*
 * run.c - the CPU reference interpreter: runs a graph node by node with
 * the kernels of kernels/cpu, binding values in frames (one per graph
 * being run: the main graph, and each run of a subgraph), freeing each
 * value after its last reader and reusing freed buffers of the same size
 * (the memory plan at run time).
 */
#include "exec/exec.h"
#include "exec/exec_private.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Named values                                                              */
/* ------------------------------------------------------------------------ */

int exec_values_add(struct exec_values *vs, const char *name, struct kern_value *v)
{
	if (vs->n == vs->cap) {
		int cap = vs->cap ? 2 * vs->cap : 8;
		struct exec_binding *a = realloc(vs->a, sizeof(*a) * (size_t)cap);
		if (!a)
			return IR_ENOMEM;
		vs->a = a;
		vs->cap = cap;
	}
	char *s = strdup(name ? name : "");
	if (!s)
		return IR_ENOMEM;
	vs->a[vs->n].name = s;
	vs->a[vs->n].v = *v;
	memset(v, 0, sizeof(*v));
	vs->n++;
	return 0;
}

int exec_values_add_tensor(struct exec_values *vs, const char *name, struct ir_tensor *t)
{
	struct kern_value v = { .kind = KV_TENSOR, .t = t };
	ir_tensor_ref(t);
	int rc = exec_values_add(vs, name, &v);
	if (rc)
		ir_tensor_unref(t);
	return rc;
}

const struct kern_value *exec_values_find(const struct exec_values *vs, const char *name)
{
	for (int i = 0; vs && i < vs->n; i++)
		if (!strcmp(vs->a[i].name, name))
			return &vs->a[i].v;
	return NULL;
}

void exec_values_clear(struct exec_values *vs)
{
	for (int i = 0; i < vs->n; i++) {
		free(vs->a[i].name);
		kern_value_clear(&vs->a[i].v);
	}
	free(vs->a);
	memset(vs, 0, sizeof(*vs));
}

void exec_report_clear(struct exec_report *r)
{
	free(r->node_ms);
	free(r->node_impl);
	memset(r, 0, sizeof(*r));
}

/* ------------------------------------------------------------------------ */
/* The run: buffer pool and accounting                                       */
/* ------------------------------------------------------------------------ */

#define POOL_MAX 256

struct run {
	const struct ir_model *m;
	const struct exec_opts *o;
	struct ir_diag *d;
	struct ir_buffer *pool[POOL_MAX];   /* activation buffers freed by this run */
	int n_pool;
	struct ir_buffer *kept[POOL_MAX];   /* left by earlier runs of the model (see keep_take) */
	int n_kept;
	/* buffers made by this run (a set: live bytes are counted for them only) */
	struct ir_buffer **own;
	size_t own_cap, own_n;
	uint64_t live, peak, total, n_allocs, n_reused, max_live;
	struct exec_values *all;
	double *node_ms;             /* opts->time_nodes: per main-graph node */
	const char **node_impl;      /* and the algorithm its CPU kernel picked, or NULL */
	const char *last_impl;       /* the last kernel's (cpu_kctx.impl) */
	uint64_t steps;              /* nodes and subgraph runs so far */
	int fn_depth;                /* model functions being called, nested */
};

/* Counts one step (a node, or a subgraph run); an error past opts->max_steps. */
static int step(struct run *R)
{
	if (R->o->max_steps && ++R->steps > R->o->max_steps)
		return ir_diag_err(R->d, IR_ERR, "stopped after %llu steps (the limit for this run)",
				   (unsigned long long)R->o->max_steps);
	return 0;
}

static size_t ptr_hash(const void *p, size_t cap)
{
	uintptr_t x = (uintptr_t)p;
	x ^= x >> 17;
	x *= 0x9e3779b97f4a7c15ull;
	return (size_t)(x >> 7) & (cap - 1);
}

static void own_rehash(struct run *R);

static bool own_add(struct run *R, struct ir_buffer *b)
{
	if ((R->own_n + 1) * 2 > R->own_cap)
		own_rehash(R);
	if (!R->own_cap)
		return false;
	size_t i = ptr_hash(b, R->own_cap);
	while (R->own[i]) {
		if (R->own[i] == b)
			return true;
		i = (i + 1) & (R->own_cap - 1);
	}
	R->own[i] = b;
	R->own_n++;
	return true;
}

static void own_rehash(struct run *R)
{
	size_t cap = R->own_cap ? R->own_cap * 2 : 256;
	struct ir_buffer **a = calloc(cap, sizeof(*a));
	if (!a)
		return;
	struct ir_buffer **old = R->own;
	size_t ocap = R->own_cap;
	R->own = a;
	R->own_cap = cap;
	R->own_n = 0;
	for (size_t i = 0; i < ocap; i++)
		if (old[i] && old[i] != (struct ir_buffer *)R)
			own_add(R, old[i]);
	free(old);
}

/* Removes b from the set (tombstone-free: re-inserts the cluster after it). */
static bool own_del(struct run *R, struct ir_buffer *b)
{
	if (!R->own_cap)
		return false;
	size_t i = ptr_hash(b, R->own_cap);
	while (R->own[i] && R->own[i] != b)
		i = (i + 1) & (R->own_cap - 1);
	if (!R->own[i])
		return false;
	R->own[i] = NULL;
	R->own_n--;
	for (size_t j = (i + 1) & (R->own_cap - 1); R->own[j]; j = (j + 1) & (R->own_cap - 1)) {
		struct ir_buffer *x = R->own[j];
		R->own[j] = NULL;
		R->own_n--;
		own_add(R, x);
	}
	return true;
}

static struct ir_tensor *run_alloc(struct run *R, int dtype, int rank, const int64_t *dims, struct ir_diag *d)
{
	uint64_t numel = 1, nbytes;
	for (int i = 0; i < rank; i++) {
		if (dims[i] < 0)
			return ir_diag_err(d, IR_ERR, "an output dim is negative (%" PRId64 ")", dims[i]), NULL;
		if (dims[i] && numel > UINT64_MAX / (uint64_t)dims[i])
			return ir_diag_err(d, IR_ERR, "an output's size overflows"), NULL;
		numel *= (uint64_t)dims[i];
	}
	if (dtype == IR_STRING || !ir_dtype_nbytes(dtype, numel, &nbytes) || nbytes == 0)
		return ir_tensor_new(dtype, rank, dims, d);
	if (nbytes > R->max_live || R->live + nbytes > R->max_live) {
		char buf[160];
		ir_diag_err(d, IR_ERR, "an output of %s %s needs %.1f MiB, past the memory limit (%.1f MiB live of %.1f MiB)",
			    ir_dtype_name(dtype), ir_dims_str(rank, dims, buf, sizeof(buf)), nbytes / 1048576.0,
			    R->live / 1048576.0, R->max_live / 1048576.0);
		return NULL;
	}
	struct ir_tensor *t = NULL;
	for (int i = R->n_pool - 1; i >= 0; i--) {
		if (R->pool[i]->size == nbytes) {
			struct ir_buffer *b = R->pool[i];
			R->pool[i] = R->pool[--R->n_pool];
			t = ir_tensor_wrap(dtype, rank, dims, b, d);
			ir_buffer_unref(b);
			if (!t)
				return NULL;
			R->n_reused++;
			break;
		}
	}
	/* a buffer an earlier run left: counted as made (the plan is the
	 * same), but its pages are already there (no faults, no zeroing) */
	for (int i = R->n_kept - 1; !t && i >= 0; i--) {
		if (R->kept[i]->size == nbytes) {
			struct ir_buffer *b = R->kept[i];
			R->kept[i] = R->kept[--R->n_kept];
			t = ir_tensor_wrap(dtype, rank, dims, b, d);
			ir_buffer_unref(b);
			if (!t)
				return NULL;
		}
	}
	if (!t) {
		t = ir_tensor_new(dtype, rank, dims, d);
		if (!t)
			return NULL;
	}
	R->n_allocs++;
	R->total += nbytes;
	if (t->buf && own_add(R, t->buf)) {
		R->live += t->buf->size;
		if (R->live > R->peak)
			R->peak = R->live;
	}
	return t;
}

/* Drops a tensor reference; a buffer this run made that nothing else holds goes back to the pool. */
static void run_drop_tensor(struct run *R, struct ir_tensor *t)
{
	if (!t)
		return;
	struct ir_buffer *b = t->buf;
	if (t->refcount == 1 && b && b->refcount == 1 && own_del(R, b)) {
		R->live -= b->size;
		if (R->n_pool < POOL_MAX) {
			ir_buffer_ref(b);
			R->pool[R->n_pool++] = b;
		}
	} else if (b && b->refcount == 1 && t->refcount == 1) {
		/* not ours (an input or initializer view): just let it go */
	}
	ir_tensor_unref(t);
}

static void run_drop(struct run *R, struct kern_value *v)
{
	if (v->kind == KV_TENSOR) {
		run_drop_tensor(R, v->t);
		v->t = NULL;
		v->kind = KV_NONE;
		return;
	}
	kern_value_clear(v);
}

/* ------------------------------------------------------------------------ */
/* Frames                                                                    */
/* ------------------------------------------------------------------------ */

struct frame {
	const struct ir_graph *g;
	struct kern_value *vals;     /* by value index in g */
	int *last;                   /* last reader's position, -1: none; INT32_MAX: kept */
	struct frame *parent;
	struct run *R;
};

static int frame_init(struct frame *f, struct run *R, const struct ir_graph *g, struct frame *parent, bool keep)
{
	memset(f, 0, sizeof(*f));
	f->g = g;
	f->R = R;
	f->parent = parent;
	size_t nv = g->n_values ? g->n_values : 1;
	f->vals = calloc(nv, sizeof(*f->vals));
	f->last = malloc(nv * sizeof(*f->last));
	if (!f->vals || !f->last) {
		free(f->vals);
		free(f->last);
		return ir_diag_err(R->d, IR_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < g->n_values; i++)
		f->last[i] = keep ? INT32_MAX : -1;
	int pos = 0;
	for (struct ir_node *n = g->first; n; n = n->next, pos++) {
		for (int i = 0; i < n->n_inputs; i++)
			if (n->inputs[i] && n->inputs[i]->graph == g)
				f->last[n->inputs[i]->idx] = f->last[n->inputs[i]->idx] == INT32_MAX ? INT32_MAX : pos;
		for (int i = 0; i < n->n_implicit; i++)
			if (n->implicit[i] && n->implicit[i]->graph == g && f->last[n->implicit[i]->idx] != INT32_MAX)
				f->last[n->implicit[i]->idx] = pos;
	}
	for (int i = 0; i < g->n_outputs; i++)
		if (g->outputs[i] && g->outputs[i]->graph == g)
			f->last[g->outputs[i]->idx] = INT32_MAX;
	return 0;
}

static void frame_done(struct frame *f)
{
	if (!f->vals)
		return;
	for (size_t i = 0; i < f->g->n_values; i++)
		run_drop(f->R, &f->vals[i]);
	free(f->vals);
	free(f->last);
	f->vals = NULL;
}

/*
 * Aligned copies of initializers whose bytes sit at an odd offset of a
 * mapped file (kernels read typed, aligned data). They are kept across runs,
 * keyed by the original tensor (one reference held, so the key stays
 * valid); an entry whose original nothing else holds any more (its model
 * was freed) is dropped at the start of the next run.
 */
struct acache_entry {
	struct ir_tensor *key, *copy;
};
static struct acache_entry *acache;
static size_t acache_n, acache_cap;

static void acache_sweep(void)
{
	size_t k = 0;
	for (size_t i = 0; i < acache_n; i++) {
		if (acache[i].key->refcount == 1) {
			ir_tensor_unref(acache[i].key);
			ir_tensor_unref(acache[i].copy);
		} else {
			acache[k++] = acache[i];
		}
	}
	acache_n = k;
}

/*
 * The activation buffers of the last run, kept for the next run of the
 * same model: a run takes them all at its start (keep_take) and puts back
 * what it freed at its end (keep_put), so the second and later runs of a
 * model find every buffer they need of the right size, with its pages
 * already mapped (fresh pages cost a fault and a zeroing each: a third of
 * MobileNetV2's time on one core). A run of another model, or
 * exec_cache_clear, lets them go; at most KEEP_MAX_FRACTION of the run's
 * memory limit is kept. A nested run finds the set empty (its caller holds
 * it) and makes its own.
 */
#define KEEP_MAX_FRACTION 4
static struct ir_buffer *keep[POOL_MAX];
static int keep_n;
static const struct ir_model *keep_model;

static void keep_release(void)
{
	for (int i = 0; i < keep_n; i++)
		ir_buffer_unref(keep[i]);
	keep_n = 0;
	keep_model = NULL;
}

static void keep_take(struct run *R)
{
	if (keep_model != R->m)
		keep_release();
	memcpy(R->kept, keep, sizeof(keep[0]) * (size_t)keep_n);
	R->n_kept = keep_n;
	keep_n = 0;
}

/* Puts the run's free buffers (and the kept ones it did not use) back; frees the rest. */
static void keep_put(struct run *R)
{
	uint64_t bytes = 0, cap = R->max_live / KEEP_MAX_FRACTION;
	if (keep_n || (keep_model && keep_model != R->m))
		keep_release();   /* a nested run put its own back: ours replace them */
	keep_model = R->m;
	for (int i = 0; i < R->n_pool + R->n_kept; i++) {
		struct ir_buffer *b = i < R->n_pool ? R->pool[i] : R->kept[i - R->n_pool];
		if (keep_n < POOL_MAX && bytes + b->size <= cap) {
			keep[keep_n++] = b;
			bytes += b->size;
		} else {
			ir_buffer_unref(b);
		}
	}
	R->n_pool = R->n_kept = 0;
}

void exec_cache_clear(void)
{
	keep_release();
	cpu_wcache_clear();
	for (size_t i = 0; i < acache_n; i++) {
		ir_tensor_unref(acache[i].key);
		ir_tensor_unref(acache[i].copy);
	}
	free(acache);
	acache = NULL;
	acache_n = acache_cap = 0;
}

/* An aligned tensor for initializer data (a new reference). */
static struct ir_tensor *aligned_init(struct run *R, struct ir_tensor *t)
{
	const void *p = ir_tensor_data(t);
	if (!p || ((uintptr_t)p % 16) == 0) {
		ir_tensor_ref(t);
		return t;
	}
	for (size_t i = 0; i < acache_n; i++)
		if (acache[i].key == t) {
			ir_tensor_ref(acache[i].copy);
			return acache[i].copy;
		}
	if (ir_tensor_check(t, R->d))
		return NULL;
	struct ir_tensor *c = ir_tensor_new(t->dtype, t->rank, t->dims, R->d);
	if (!c)
		return NULL;
	memcpy(ir_tensor_mutable(c), p, t->nbytes);
	if (acache_n == acache_cap) {
		size_t cap = acache_cap ? 2 * acache_cap : 64;
		struct acache_entry *a = realloc(acache, sizeof(*a) * cap);
		if (!a)
			return c;   /* not kept: still correct */
		acache = a;
		acache_cap = cap;
	}
	ir_tensor_ref(t);
	ir_tensor_ref(c);
	acache[acache_n++] = (struct acache_entry){ t, c };
	return c;
}

/* The slot holding v's value in f or an enclosing frame (captures read the outer value). */
static struct kern_value *lookup(struct frame *f, const struct ir_value *v, struct ir_diag *d)
{
	while (v->outer) {
		v = v->outer;
		f = f->parent;
		if (!f) {
			ir_diag_err(d, IR_ERR, "'%s' is read from an enclosing graph that is not running", v->name);
			return NULL;
		}
	}
	while (f && f->g != v->graph)
		f = f->parent;
	if (!f) {
		ir_diag_err(d, IR_ERR, "'%s' belongs to no running graph", v->name);
		return NULL;
	}
	struct kern_value *slot = &f->vals[v->idx];
	if (slot->kind == KV_NONE && !slot->optional && v->init) {
		struct ir_tensor *t = aligned_init(f->R, v->init);
		if (!t)
			return NULL;
		slot->kind = KV_TENSOR;
		slot->t = t;
	} else if (slot->kind == KV_NONE && v->sparse_init) {
		ir_diag_err(d, IR_ERR, "'%s' is a sparse initializer: ogsh does not run sparse tensors", v->name);
		return NULL;
	}
	return slot;
}

static bool optional_type(const struct ir_value *v)
{
	const struct ir_type *t = ir_value_type(v);
	return t && t->kind == IR_TYPE_OPTIONAL;
}

static int run_graph(struct frame *f, int pos_base);

/* ------------------------------------------------------------------------ */
/* Hooks for kernels                                                         */
/* ------------------------------------------------------------------------ */

struct hook_arg {
	struct frame *f;
};

static struct ir_tensor *hook_alloc(struct cpu_kctx *k, int slot, int dtype, int rank, const int64_t *dims)
{
	(void)slot;
	struct hook_arg *h = k->hooks->arg;
	return run_alloc(h->f->R, dtype, rank, dims, k->d);
}

static int hook_run_graph(struct cpu_kctx *k, const struct ir_graph *g, int n_in, const struct kern_value *in,
			  struct kern_value *out)
{
	struct hook_arg *h = k->hooks->arg;
	struct run *R = h->f->R;
	if (n_in != g->n_inputs)
		return ir_diag_err(k->d, IR_ERR, "subgraph '%s' takes %d inputs, %d given", g->name ? g->name : "",
				   g->n_inputs, n_in);
	struct frame sub;
	int rc = step(R);
	if (rc)
		return rc;
	rc = frame_init(&sub, R, g, h->f, false);
	if (rc)
		return rc;
	for (int i = 0; i < n_in; i++) {
		struct ir_value *v = g->inputs[i];
		if ((rc = kern_value_copy(&sub.vals[v->idx], &in[i]))) {
			rc = ir_diag_err(k->d, IR_ENOMEM, "out of memory");
			goto out;
		}
		if (in[i].kind == KV_NONE)
			sub.vals[v->idx].optional = true;
	}
	if ((rc = run_graph(&sub, -1)))
		goto out;
	for (int i = 0; i < g->n_outputs; i++) {
		struct kern_value *s = lookup(&sub, g->outputs[i], k->d);
		if (!s) {
			rc = IR_ERR;
			goto out;
		}
		if ((rc = kern_value_copy(&out[i], s))) {
			rc = ir_diag_err(k->d, IR_ENOMEM, "out of memory");
			goto out;
		}
	}
out:
	if (rc)
		for (int i = 0; i < g->n_outputs; i++)
			kern_value_clear(&out[i]);
	frame_done(&sub);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Running nodes                                                             */
/* ------------------------------------------------------------------------ */

void exec_node_label(const struct ir_node *n, char *buf, size_t size)
{
	if (n->name && *n->name)
		snprintf(buf, size, "n%d '%s' (%s)", n->id, n->op_type, n->name);
	else
		snprintf(buf, size, "n%d '%s'", n->id, n->op_type);
}

#define MAX_FUNCTION_DEPTH 32

/* Puts the caller's attribute values where a function body refers to them
 * (ref_attr_name), or the function's defaults; drops references to
 * attributes that neither gives. */
static int bind_attrs(struct ir_graph *g, const struct ir_node *call, const struct ir_function *fn,
		      struct ir_diag *d)
{
	ir_for_each_node(g, nd) {
		for (int i = nd->n_attrs - 1; i >= 0; i--) {
			struct ir_attr *a = &nd->attrs[i];
			if (a->type == IR_ATTR_GRAPH && a->g && bind_attrs(a->g, call, fn, d))
				return IR_ERR;
			for (size_t k = 0; a->type == IR_ATTR_GRAPHS && k < a->n; k++)
				if (bind_attrs(a->graphs[k], call, fn, d))
					return IR_ERR;
			if (!a->ref_attr_name)
				continue;
			const struct ir_attr *src = ir_node_attr(call, a->ref_attr_name);
			for (size_t k = 0; !src && k < fn->n_attr_defaults; k++)
				if (fn->attr_defaults[k].name && !strcmp(fn->attr_defaults[k].name, a->ref_attr_name))
					src = &fn->attr_defaults[k];
			if (!src) {
				char *name = strdup(a->name);
				if (!name)
					return ir_diag_err(d, IR_ENOMEM, "out of memory");
				ir_node_remove_attr(nd, name);
				free(name);
				continue;
			}
			struct ir_attr c;
			if (ir_attr_copy(&c, src, g))
				return ir_diag_err(d, IR_ENOMEM, "out of memory");
			free(c.name);
			free(c.ref_attr_name);
			c.ref_attr_name = NULL;
			if (!(c.name = strdup(a->name))) {
				ir_attr_clear(&c);
				return ir_diag_err(d, IR_ENOMEM, "out of memory");
			}
			if (ir_node_set_attr(nd, &c, d))
				return IR_ERR;
		}
	}
	return 0;
}

/* Runs a node that calls a model-local function: its body, with the
 * caller's inputs and attributes bound, in a frame of its own. */
static int call_function(struct frame *f, struct ir_node *n, const struct ir_function *fn)
{
	struct run *R = f->R;
	struct ir_diag *d = R->d;
	if (R->fn_depth >= MAX_FUNCTION_DEPTH)
		return ir_diag_err(d, IR_ERR, "function '%s' calls itself (or nests) more than %d deep", fn->name,
				   MAX_FUNCTION_DEPTH);
	if (n->n_inputs > fn->body->n_inputs || n->n_outputs > fn->body->n_outputs)
		return ir_diag_err(d, IR_ERR, "calls function '%s' with %d inputs and %d outputs, it has %d and %d",
				   fn->name, n->n_inputs, n->n_outputs, fn->body->n_inputs, fn->body->n_outputs);
	struct ir_graph *body = ir_graph_clone(fn->body, NULL);
	if (!body)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	struct frame sub = { 0 };
	int rc = bind_attrs(body, n, fn, d);
	if (!rc)
		rc = frame_init(&sub, R, body, NULL, false);
	for (int i = 0; !rc && i < body->n_inputs; i++) {
		struct ir_value *v = body->inputs[i];
		if (i >= n->n_inputs || !n->inputs[i]) {
			sub.vals[v->idx].optional = true;
			continue;
		}
		struct kern_value *s = lookup(f, n->inputs[i], d);
		if (!s)
			rc = IR_ERR;
		else if (kern_value_copy(&sub.vals[v->idx], s))
			rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	if (!rc) {
		R->fn_depth++;
		rc = run_graph(&sub, -1);
		R->fn_depth--;
	}
	for (int i = 0; !rc && i < n->n_outputs; i++) {
		struct ir_value *v = n->outputs[i];
		if (!v)
			continue;
		struct kern_value *s = lookup(&sub, body->outputs[i], d);
		if (!s) {
			rc = IR_ERR;
			break;
		}
		run_drop(R, &f->vals[v->idx]);
		if (kern_value_copy(&f->vals[v->idx], s))
			rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	frame_done(&sub);
	ir_graph_free(body);
	return rc;
}

/* Runs n in frame f; label: errors name the node (the main run), else the caller does. */
static int run_node_in(struct frame *f, struct ir_node *n, bool label_errors)
{
	struct run *R = f->R;
	struct ir_diag *d = R->d;
	char label[300];
	char why[256];
	if (step(R))
		return IR_ERR;
	/* an op the model defines as a function runs its body when the CPU
	 * has no kernel for it (unknown ops, and ogsh's fused ops without one) */
	const struct ir_function *fn = NULL;
	if (n->op == IR_OP_UNKNOWN || !cpu_supports(n, why, sizeof(why)))
		fn = ir_model_find_function(R->m, n);
	if (fn) {
		int rc = call_function(f, n, fn);
		if (rc && label_errors) {
			exec_node_label(n, label, sizeof(label));
			ir_diag_prefix(d, "%s", label);
		}
		return rc;
	}
	if (!cpu_supports(n, why, sizeof(why))) {
		if (!label_errors)
			return ir_diag_err(d, IR_ERR, "%s", why);
		exec_node_label(n, label, sizeof(label));
		return ir_diag_err(d, IR_ERR, "%s %s", label, why);
	}
	int nin = n->n_inputs, nout = n->n_outputs;
	struct kern_value *in = calloc((size_t)(nin ? nin : 1), sizeof(*in));
	struct kern_value *out = calloc((size_t)(nout ? nout : 1), sizeof(*out));
	int rc = 0;
	if (!in || !out) {
		rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
		goto out;
	}
	for (int i = 0; i < nin; i++) {
		if (!n->inputs[i])
			continue;
		struct kern_value *s = lookup(f, n->inputs[i], d);
		if (!s) {
			rc = IR_ERR;
			goto fail;
		}
		if (s->kind == KV_NONE && !s->optional && !optional_type(n->inputs[i])) {
			rc = ir_diag_err(d, IR_ERR, "input '%s' has no value", n->inputs[i]->name);
			goto fail;
		}
		in[i] = *s;   /* borrowed for the call */
	}
	for (int i = 0; i < nout; i++)
		out[i].optional = n->outputs[i] && optional_type(n->outputs[i]);
	struct hook_arg ha = { .f = f };
	struct cpu_exec_hooks hooks = { .alloc = hook_alloc, .run_graph = hook_run_graph, .arg = &ha };
	struct cpu_kctx k = {
		.node = n,
		.opset = ir_model_opset(R->m, n->domain),
		.n_in = nin, .n_out = nout,
		.in = in, .out = out,
		.d = d,
		.hooks = &hooks,
	};
	rc = cpu_run_node(&k);
	R->last_impl = k.impl;
	if (rc)
		goto fail;
	for (int i = 0; i < nout; i++) {
		struct ir_value *v = n->outputs[i];
		if (!v) {
			run_drop(R, &out[i]);
			continue;
		}
		if (out[i].kind == KV_NONE && !out[i].optional && !optional_type(v)) {
			rc = ir_diag_err(d, IR_ERR, "gave no value for output %d ('%s')", i, v->name);
			goto fail;
		}
		struct kern_value *slot = &f->vals[v->idx];
		run_drop(R, slot);
		*slot = out[i];
		memset(&out[i], 0, sizeof(out[i]));
		if (slot->kind == KV_NONE)
			slot->optional = true;
	}
	goto out;
fail:
	if (label_errors) {
		exec_node_label(n, label, sizeof(label));
		ir_diag_prefix(d, "%s", label);
	}
out:
	if (out)
		for (int i = 0; i < nout; i++)
			run_drop(R, &out[i]);
	free(in);
	free(out);
	return rc;
}

static int run_node(struct frame *f, struct ir_node *n)
{
	return run_node_in(f, n, true);
}

/* Frees the values whose last reader is the node at `pos`. */
static void release_after(struct frame *f, struct ir_node *n, int pos)
{
	for (int i = 0; i < n->n_inputs + n->n_implicit; i++) {
		struct ir_value *v = i < n->n_inputs ? n->inputs[i] : n->implicit[i - n->n_inputs];
		if (v && v->graph == f->g && f->last[v->idx] == pos)
			run_drop(f->R, &f->vals[v->idx]);
	}
	for (int i = 0; i < n->n_outputs; i++) {
		struct ir_value *v = n->outputs[i];
		if (v && f->last[v->idx] == -1)   /* nobody reads it */
			run_drop(f->R, &f->vals[v->idx]);
	}
}

/* pos_base >= 0: the main graph (progress, keep_all, timing). */
static int run_graph(struct frame *f, int pos_base)
{
	struct run *R = f->R;
	int pos = 0, total = f->g->n_nodes;
	for (struct ir_node *n = f->g->first; n; n = n->next, pos++) {
		if (ir_interrupted)
			return ir_diag_err(R->d, IR_EINTR, "stopped after %d of %d nodes", pos, total);
		double t0 = pos_base >= 0 && R->o->time_nodes ? exec_now_ms() : 0;
		R->last_impl = NULL;
		int rc = run_node(f, n);
		if (rc)
			return rc;
		if (pos_base >= 0) {
			if (R->node_ms)
				R->node_ms[pos] = exec_now_ms() - t0;
			if (R->node_impl)
				R->node_impl[pos] = R->last_impl;
			if (R->o->on_value)
				for (int i = 0; i < n->n_outputs; i++) {
					struct ir_value *v = n->outputs[i];
					if (v && (rc = R->o->on_value(R->o->on_value_arg, v, &f->vals[v->idx])))
						return rc;
				}
			if (R->all)
				for (int i = 0; i < n->n_outputs; i++) {
					struct ir_value *v = n->outputs[i];
					struct kern_value c;
					if (!v || kern_value_copy(&c, &f->vals[v->idx]))
						continue;
					if (exec_values_add(R->all, v->name, &c))
						kern_value_clear(&c);
				}
			if (R->o->progress)
				R->o->progress(R->o->progress_arg, pos + 1, total);
		}
		release_after(f, n, pos);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Inputs and the run                                                        */
/* ------------------------------------------------------------------------ */

struct sym { const char *name; int64_t value; const char *input; int dim; };

int exec_check_inputs(const struct ir_model *m, const struct exec_values *inputs, struct ir_diag *d)
{
	const struct ir_graph *g = m->graph;
	struct sym syms[64];
	int n_syms = 0;
	char b1[256], b2[256];
	for (int i = 0; inputs && i < inputs->n; i++) {
		const struct ir_value *v = ir_value_find(g, inputs->a[i].name);
		if (!v || !v->is_input)
			return ir_diag_err(d, IR_ERR, "'%s' is not an input of the graph", inputs->a[i].name);
		for (int j = 0; j < i; j++)
			if (!strcmp(inputs->a[j].name, inputs->a[i].name))
				return ir_diag_err(d, IR_ERR, "input '%s' is given twice", inputs->a[i].name);
	}
	for (int i = 0; i < g->n_inputs; i++) {
		const struct ir_value *v = g->inputs[i];
		const struct kern_value *kv = exec_values_find(inputs, v->name);
		const struct ir_type *ty = &v->type;
		if (!kv) {
			if (v->init || v->sparse_init || ty->kind == IR_TYPE_OPTIONAL)
				continue;
			return ir_diag_err(d, IR_ERR, "input '%s' (%s) is not given", v->name, ir_type_str(ty, b1, sizeof(b1)));
		}
		if (ty->kind == IR_TYPE_OPTIONAL) {
			if (kv->kind == KV_NONE)
				continue;
			ty = ty->inner;
		}
		if (!ty || ty->kind == IR_TYPE_NONE)
			continue;
		if (ty->kind == IR_TYPE_SEQUENCE) {
			if (kv->kind != KV_SEQ)
				return ir_diag_err(d, IR_ERR, "input '%s' must be a sequence", v->name);
			continue;
		}
		if (ty->kind != IR_TYPE_TENSOR)
			continue;
		if (kv->kind != KV_TENSOR)
			return ir_diag_err(d, IR_ERR, "input '%s' must be a tensor (%s)", v->name, ir_type_str(ty, b1, sizeof(b1)));
		const struct ir_tensor *t = kv->t;
		if (ty->elem && t->dtype != ty->elem)
			return ir_diag_err(d, IR_ERR, "input '%s' is %s, the model wants %s", v->name,
					   ir_dtype_name(t->dtype), ir_dtype_name(ty->elem));
		if (ty->rank < 0)
			continue;
		if (t->rank != ty->rank)
			return ir_diag_err(d, IR_ERR, "input '%s' has shape %s (rank %d), the model wants %s (rank %d)",
					   v->name, ir_dims_str(t->rank, t->dims, b1, sizeof(b1)), t->rank,
					   ir_type_str(ty, b2, sizeof(b2)), ty->rank);
		for (int j = 0; j < ty->rank; j++) {
			const struct ir_dim *dm = &ty->dims[j];
			if (dm->kind == IR_DIM_VALUE && dm->value != t->dims[j])
				return ir_diag_err(d, IR_ERR, "input '%s' has shape %s, the model wants %s (dim %d is %" PRId64
						   ", not %" PRId64 ")", v->name, ir_dims_str(t->rank, t->dims, b1, sizeof(b1)),
						   ir_type_str(ty, b2, sizeof(b2)), j, t->dims[j], dm->value);
			if (dm->kind != IR_DIM_PARAM || !dm->param)
				continue;
			int s;
			for (s = 0; s < n_syms; s++)
				if (!strcmp(syms[s].name, dm->param))
					break;
			if (s == n_syms) {
				if (n_syms < 64)
					syms[n_syms++] = (struct sym){ dm->param, t->dims[j], v->name, j };
			} else if (syms[s].value != t->dims[j]) {
				return ir_diag_err(d, IR_ERR, "dim '%s' is %" PRId64 " in input '%s' (dim %d) but %" PRId64
						   " in input '%s' (dim %d)", dm->param, t->dims[j], v->name, j,
						   syms[s].value, syms[s].input, syms[s].dim);
			}
		}
	}
	return 0;
}

static uint64_t machine_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	if (pages <= 0 || psize <= 0)
		return (uint64_t)8 << 30;
	return (uint64_t)pages * (uint64_t)psize;
}

int exec_run(const struct ir_model *m, const struct exec_values *inputs, const struct exec_opts *opts,
	     struct exec_values *outputs, struct exec_values *all, struct exec_report *rep, struct ir_diag *d)
{
	static const struct exec_opts dflt;
	if (!opts)
		opts = &dflt;
	int rc = exec_check_inputs(m, inputs, d);
	if (rc)
		return rc;
	acache_sweep();
	struct run R = {
		.m = m, .o = opts, .d = d,
		.max_live = opts->max_live ? opts->max_live : machine_memory() / 2,
		.all = opts->keep_all ? all : NULL,
	};
	const struct ir_graph *g = m->graph;
	if (opts->time_nodes && g->n_nodes &&
	    (!(R.node_ms = calloc((size_t)g->n_nodes, sizeof(double))) ||
	     !(R.node_impl = calloc((size_t)g->n_nodes, sizeof(*R.node_impl))))) {
		free(R.node_ms);
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	keep_take(&R);
	double t0 = exec_now_ms();
	struct frame f;
	if ((rc = frame_init(&f, &R, g, NULL, false)))
		goto done;
	for (int i = 0; i < g->n_inputs; i++) {
		struct ir_value *v = g->inputs[i];
		const struct kern_value *kv = exec_values_find(inputs, v->name);
		if (kv && (rc = kern_value_copy(&f.vals[v->idx], kv))) {
			rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
			goto done_frame;
		}
		if (kv && kv->kind == KV_TENSOR && ((uintptr_t)ir_tensor_data(kv->t) % 16)) {
			struct ir_tensor *t = aligned_init(&R, kv->t);
			if (!t) {
				rc = IR_ERR;
				goto done_frame;
			}
			ir_tensor_unref(f.vals[v->idx].t);
			f.vals[v->idx].t = t;
		}
		if (!kv && v->type.kind == IR_TYPE_OPTIONAL && !v->init)
			f.vals[v->idx].optional = true;
	}
	if ((rc = run_graph(&f, 0)))
		goto done_frame;
	for (int i = 0; i < g->n_outputs; i++) {
		struct ir_value *v = g->outputs[i];
		struct kern_value *s = lookup(&f, v, d), c;
		if (!s) {
			rc = IR_ERR;
			goto done_frame;
		}
		if (kern_value_copy(&c, s) || exec_values_add(outputs, v->name, &c)) {
			kern_value_clear(&c);
			rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
			goto done_frame;
		}
	}
done_frame:
	frame_done(&f);
done:
	keep_put(&R);
	free(R.own);
	if (rep) {
		exec_report_clear(rep);
		rep->ms = exec_now_ms() - t0;
		rep->n_nodes = g->n_nodes;
		rep->peak_bytes = R.peak;
		rep->total_bytes = R.total;
		rep->n_allocs = R.n_allocs;
		rep->n_reused = R.n_reused;
		rep->node_ms = R.node_ms;
		rep->node_impl = R.node_impl;
		rep->n_node_ms = R.node_ms ? g->n_nodes : 0;
		R.node_ms = NULL;
		R.node_impl = NULL;
	}
	free(R.node_ms);
	free(R.node_impl);
	return rc;
}

/* Binds v in frame f to a copy of kv (aligned: kernels read typed data);
 * KV_NONE binds an absent optional value. */
static int bind_value(struct frame *f, const struct ir_value *v, const struct kern_value *kv, struct ir_diag *d)
{
	struct kern_value *slot = &f->vals[v->idx];
	run_drop(f->R, slot);
	if (!kv || kv->kind == KV_NONE) {
		slot->optional = true;
		return 0;
	}
	if (kern_value_copy(slot, kv))
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	const void *data = slot->kind == KV_TENSOR ? ir_tensor_data(slot->t) : NULL;
	if (data && ((uintptr_t)data % 16)) {
		struct ir_tensor *t = slot->t, *c;
		if (ir_tensor_check(t, d))
			return IR_ERR;
		if (!(c = ir_tensor_new(t->dtype, t->rank, t->dims, d)))
			return IR_ENOMEM;
		memcpy(ir_tensor_mutable(c), data, t->nbytes);
		ir_tensor_unref(t);
		slot->t = c;
	}
	return 0;
}

int exec_run_node(const struct ir_model *m, struct ir_node *n, const struct kern_value *in,
		  const struct kern_value *implicit, struct kern_value *out, struct ir_diag *d)
{
	static const struct exec_opts dflt;
	struct run R = { .m = m, .o = &dflt, .d = d, .max_live = machine_memory() / 2 };
	struct frame f;
	for (int i = 0; i < n->n_outputs; i++)
		memset(&out[i], 0, sizeof(out[i]));
	/* the node's own graph as the frame: its subgraphs' captures find the
	 * implicit inputs there (by the captures' outer links) */
	int rc = frame_init(&f, &R, n->graph, NULL, true);
	if (rc)
		return rc;
	for (int i = 0; !rc && i < n->n_inputs; i++)
		if (n->inputs[i])
			rc = bind_value(&f, n->inputs[i], &in[i], d);
	for (int i = 0; !rc && i < n->n_implicit; i++) {
		const struct ir_value *v = n->implicit[i];
		if (!v)
			continue;
		if (implicit[i].kind != KV_NONE || implicit[i].optional || optional_type(v))
			rc = bind_value(&f, v, &implicit[i], d);
		else if (!v->init)   /* an initializer not given is read from the graph */
			rc = ir_diag_err(d, IR_ERR, "'%s', which its subgraphs read, has no value", v->name);
	}
	if (!rc)
		rc = run_node_in(&f, n, false);
	for (int i = 0; !rc && i < n->n_outputs; i++) {
		struct ir_value *v = n->outputs[i];
		if (!v)
			continue;
		out[i] = f.vals[v->idx];   /* moved: the frame lets go of it */
		memset(&f.vals[v->idx], 0, sizeof(f.vals[v->idx]));
		if (out[i].kind == KV_NONE)
			out[i].optional = true;
	}
	frame_done(&f);
	for (int i = 0; i < R.n_pool; i++)
		ir_buffer_unref(R.pool[i]);
	free(R.own);
	return rc;
}

static bool graph_runnable(const struct ir_model *m, const struct ir_graph *g, int depth, char *why, size_t size)
{
	ir_for_each_node(g, n)
		if (!exec_node_runnable_at(m, n, depth, why, size))
			return false;
	return true;
}

bool exec_node_runnable_at(const struct ir_model *m, const struct ir_node *n, int depth, char *why, size_t size)
{
	char w[256];
	const struct ir_function *fn = NULL;
	if (n->op == IR_OP_UNKNOWN || !cpu_supports(n, w, sizeof(w)))
		fn = ir_model_find_function(m, n);
	if (fn) {
		if (depth >= MAX_FUNCTION_DEPTH || !fn->body) {
			snprintf(why, size, "n%d '%s' calls function '%s' too deep", n->id, n->op_type, fn->name);
			return false;
		}
		return graph_runnable(m, fn->body, depth + 1, why, size);
	}
	if (!cpu_supports(n, w, sizeof(w))) {
		snprintf(why, size, "n%d '%s' %s", n->id, n->op_type, w);
		return false;
	}
	for (int a = 0; a < n->n_attrs; a++) {
		const struct ir_attr *at = &n->attrs[a];
		if (at->type == IR_ATTR_GRAPH && at->g && !graph_runnable(m, at->g, depth, why, size))
			return false;
		for (size_t k = 0; at->type == IR_ATTR_GRAPHS && k < at->n; k++)
			if (!graph_runnable(m, at->graphs[k], depth, why, size))
				return false;
	}
	return true;
}

bool exec_graph_runnable(const struct ir_model *m, char *why, size_t size)
{
	return graph_runnable(m, m->graph, 0, why, size);
}
