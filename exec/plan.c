/*
 * plan.c - plans, runs, timing and profiles on a device (exec.h), with no
 * knowledge of which device: it calls the device only through its table
 * (exec/device.h; exec/cuda.c fills the CUDA one).
 *
 * A plan is made once per stage and input shapes: the model is cloned, the
 * inputs' dims bound and shapes inferred, nodes whose inputs are constant
 * are run at plan time on the CPU (folded), every other node goes to the
 * device when the device supports it, else to the CPU with the copies
 * around it planned. Device activations live in one arena whose offsets
 * come from a liveness plan (best fit, 256-byte aligned); constants are
 * uploaded once. Runs launch the kernels on the device's stream (or replay
 * a graph captured after the first run when every node is on the device).
 */
#include "exec/device.h"
#include "exec/qfuse.h"
#include "exec/exec.h"
#include "exec/exec_private.h"
#include "exec/layout.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The device plans are made for: the one compiled in (NULL: none). */
static const struct exec_device *plan_device_kind(void)
{
#ifdef OGSH_HAVE_CUDA
	return &exec_device_cuda;
#else
	return NULL;
#endif
}

/* 0 when the device can be used here, else IR_ERR with why not (with no
 * device compiled in, exec_gpu_available says so). */
static int need_gpu(struct ir_diag *d)
{
	char why[160] = "ogsh was built without CUDA";
	const struct exec_device *dv = plan_device_kind();
	if (!dv) {
		exec_gpu_available(why, sizeof(why));   /* false, and why: built without CUDA, or turned off */
		return ir_diag_err(d, IR_ERR, "%s", why);
	}
	if (!dv->available(why, sizeof(why)))
		return ir_diag_err(d, IR_ERR, "%s", why);
	return 0;
}

/* The error of a call without a plan (exec_plan_new failed, or no device is compiled in). */
static int no_plan(struct ir_diag *d)
{
	if (!plan_device_kind())
		return ir_diag_err(d, IR_ERR, "ogsh was built without CUDA");
	return ir_diag_err(d, IR_ERR, "no plan");
}

/* ------------------------------------------------------------------------ */
/* The plan                                                                  */
/* ------------------------------------------------------------------------ */

#define ALIGN 256
#define END_POS INT32_MAX

enum vkind { VK_NONE = 0, VK_CONST, VK_INPUT, VK_ACT };

/* One value of the main graph (by v->idx). */
struct pval {
	enum vkind kind;
	bool typed;                  /* a tensor type with every dim known */
	int dtype, rank;
	int64_t dims[IR_MAX_RANK];
	uint64_t bytes;
	struct kern_value host;      /* VK_CONST: the value on the host (a reference) */
	bool cpu_made;               /* produced by a CPU node */
	bool on_dev;                 /* has device memory (weights, input buffer, arena) */
	bool gpu_reads;              /* some GPU node reads it */
	bool counted;                /* its download is counted (planning) */
	int first, last;             /* device liveness (node positions) */
	int last_host;               /* the last CPU node reading its host copy; END_POS: kept */
	bool nhwc;                   /* stored channels-last on the device (plan_layout) */
	int root1;                   /* a view's output sharing value root1 - 1's memory; 0: its own */
	uint64_t off;                /* VK_ACT on the device: arena offset; VK_CONST: weights offset */
	void *dev;
};

struct pnode {
	struct ir_node *node;        /* in the clone */
	struct exec_dev_io *in, *out;   /* on the device: its tensors (set while placing) */
	void *state;                 /* the device's, from prepare */
	size_t ws_bytes;             /* the workspace it needs */
	bool view;                   /* its output shares its input's memory: nothing to launch */
};

struct in_sig {
	char *name;
	int dtype, rank;
	int64_t dims[IR_MAX_RANK];
	int kind;
};

struct exec_plan {
	const struct ir_model *src;
	struct ir_model *m;          /* the clone, with dims bound and shapes inferred */
	struct exec_plan_opts o;
	char *tune_path;
	int n;                       /* nodes */
	int n_prefolded;             /* nodes folded away before placing (prefold) */
	struct exec_plan_node *pub;
	struct pnode *pn;
	size_t nv;
	struct pval *pv;
	struct in_sig *sig;
	int n_sig;
	struct exec_plan_summary sum;
	/* the device */
	const struct exec_device *dev;
	struct exec_dev_ctx *dc;     /* NULL until opened */
	void *weights, *arena, *ws;
	void **inbuf;                /* per graph input (g->n_inputs), NULL when not on the device */
	bool graph_tried;
	bool graph_ok;               /* a graph was captured: runs replay it */
	/* per run: host copies (by value index) */
	struct kern_value *hv;
	struct exec_qfuse_result qf;   /* the quantized islands made in the clone */
};


static uint64_t align_up(uint64_t x)
{
	return (x + ALIGN - 1) / ALIGN * ALIGN;
}

static bool has_subgraphs(const struct ir_node *n)
{
	for (int a = 0; a < n->n_attrs; a++)
		if (n->attrs[a].type == IR_ATTR_GRAPH || n->attrs[a].type == IR_ATTR_GRAPHS)
			return true;
	return false;
}

/* Fills the tensor type of v into pv (typed when every dim is known). */
static void value_type(struct pval *pv, const struct ir_value *v)
{
	const struct ir_type *t = ir_value_type(v);
	pv->typed = false;
	if (!t || t->kind != IR_TYPE_TENSOR || !t->elem || t->rank < 0 || t->rank > IR_MAX_RANK)
		return;
	uint64_t numel = 1;
	for (int i = 0; i < t->rank; i++) {
		if (t->dims[i].kind != IR_DIM_VALUE || t->dims[i].value < 0)
			return;
		pv->dims[i] = t->dims[i].value;
		if (pv->dims[i] && numel > UINT64_MAX / (uint64_t)pv->dims[i])
			return;
		numel *= (uint64_t)pv->dims[i];
	}
	if (t->elem == IR_STRING || !ir_dtype_nbytes(t->elem, numel, &pv->bytes))
		return;
	pv->dtype = t->elem;
	pv->rank = t->rank;
	pv->typed = true;
}

static void set_from_tensor(struct pval *pv, const struct ir_tensor *t)
{
	pv->typed = t->dtype != IR_STRING && t->rank <= IR_MAX_RANK;
	pv->dtype = t->dtype;
	pv->rank = t->rank;
	for (int i = 0; i < t->rank && i < IR_MAX_RANK; i++)
		pv->dims[i] = t->dims[i];
	pv->bytes = t->nbytes;
	if (t->dtype == IR_STRING || (t->numel && !t->buf))
		pv->typed = false;
}

/* Binds the clone's graph inputs to the given inputs' dims. */
static int bind_inputs(struct ir_model *m, const struct exec_values *inputs, struct ir_diag *d)
{
	struct ir_graph *g = m->graph;
	for (int i = 0; i < g->n_inputs; i++) {
		struct ir_value *v = g->inputs[i];
		const struct kern_value *kv = exec_values_find(inputs, v->name);
		if (!kv || kv->kind != KV_TENSOR)
			continue;
		const struct ir_tensor *t = kv->t;
		struct ir_dim dims[IR_MAX_RANK];
		memset(dims, 0, sizeof(dims));
		if (t->rank > IR_MAX_RANK)
			return ir_diag_err(d, IR_ERR, "input '%s' has too many dims", v->name);
		for (int k = 0; k < t->rank; k++) {
			dims[k].kind = IR_DIM_VALUE;
			dims[k].value = t->dims[k];
		}
		if (ir_type_set_tensor(&v->type, t->dtype, t->rank, dims))
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	return 0;
}

/* ---- folding: running a node at plan time ---- */

static struct ir_tensor *fold_alloc(struct cpu_kctx *k, int slot, int dtype, int rank, const int64_t *dims)
{
	(void)slot;
	return ir_tensor_new(dtype, rank, dims, k->d);
}

/* Nodes with subgraphs do not come here (cpu_node gives them to exec_run_node). */
static int fold_run_graph(struct cpu_kctx *k, const struct ir_graph *g, int n_in, const struct kern_value *in,
			  struct kern_value *out)
{
	(void)g, (void)n_in, (void)in, (void)out;
	return ir_diag_err(k->d, IR_ERR, "a node without subgraphs asked to run one");
}

/*
 * Runs node n on the CPU with host values `in` (n->n_inputs) and, for a
 * node with subgraphs (If, Loop, Scan, SequenceMap), `implicit` (the outer
 * values its subgraphs read, n->n_implicit; the CPU reference executor
 * runs the subgraphs); fills out (n->n_outputs).
 */
static int cpu_node(struct exec_plan *p, struct ir_node *n, struct kern_value *in, const struct kern_value *implicit,
		    struct kern_value *out, struct ir_diag *d)
{
	struct cpu_exec_hooks hooks = { .alloc = fold_alloc, .run_graph = fold_run_graph, .arg = p };
	for (int i = 0; i < n->n_outputs; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		const struct ir_type *t = n->outputs[i] ? ir_value_type(n->outputs[i]) : NULL;
		out[i].optional = t && t->kind == IR_TYPE_OPTIONAL;
	}
	if (has_subgraphs(n)) {
		if (n->n_implicit && !implicit)
			return ir_diag_err(d, IR_ERR, "the values its subgraphs read were not given");
		/* the executor checks that every output that is not optional has a value */
		int rc = exec_run_node(p->m, n, in, implicit, out, d);
		if (rc)
			for (int i = 0; i < n->n_outputs; i++)
				kern_value_clear(&out[i]);
		return rc;
	}
	struct cpu_kctx k = {
		.node = n,
		.opset = ir_model_opset(p->m, n->domain),
		.n_in = n->n_inputs, .n_out = n->n_outputs,
		.in = in, .out = out,
		.d = d,
		.hooks = &hooks,
	};
	int rc = cpu_run_node(&k);
	for (int i = 0; !rc && i < n->n_outputs; i++) {
		const struct ir_value *v = n->outputs[i];
		if (v && out[i].kind == KV_NONE && !out[i].optional)
			rc = ir_diag_err(d, IR_ERR, "gave no value for output %d ('%s')", i, v->name);
	}
	if (rc)
		for (int i = 0; i < n->n_outputs; i++)
			kern_value_clear(&out[i]);
	return rc;
}

/* Aligned host data of a constant tensor for kernels (mapped initializers may sit at odd offsets). */
static int host_const(const struct ir_tensor *t, struct kern_value *out, struct ir_diag *d)
{
	memset(out, 0, sizeof(*out));
	const void *src = ir_tensor_data(t);
	if (src && ((uintptr_t)src % 16)) {
		if (ir_tensor_check(t, d))
			return IR_ERR;
		struct ir_tensor *c = ir_tensor_new(t->dtype, t->rank, t->dims, d);
		if (!c)
			return IR_ENOMEM;
		memcpy(ir_tensor_mutable(c), src, t->nbytes);
		out->kind = KV_TENSOR;
		out->t = c;
		return 0;
	}
	out->kind = KV_TENSOR;
	out->t = (struct ir_tensor *)t;
	ir_tensor_ref(out->t);
	return 0;
}

/* ---- the arena: best fit over free ranges ---- */

struct range { uint64_t off, size; };
struct arena_plan {
	struct range *free;
	int n, cap;
	uint64_t top;                /* the end of the used part now */
	uint64_t peak;               /* the largest top: the arena's size */
};

static int arena_alloc(struct arena_plan *a, uint64_t size, uint64_t *off)
{
	size = align_up(size ? size : 1);
	int best = -1;
	for (int i = 0; i < a->n; i++)
		if (a->free[i].size >= size && (best < 0 || a->free[i].size < a->free[best].size))
			best = i;
	if (best >= 0) {
		*off = a->free[best].off;
		a->free[best].off += size;
		a->free[best].size -= size;
		if (!a->free[best].size)
			a->free[best] = a->free[--a->n];
		return 0;
	}
	/* a free range ending at the top grows instead of leaving a hole */
	for (int i = 0; i < a->n; i++)
		if (a->free[i].off + a->free[i].size == a->top) {
			*off = a->free[i].off;
			a->top = a->free[i].off + size;
			a->free[i] = a->free[--a->n];
			if (a->peak < a->top)
				a->peak = a->top;
			return 0;
		}
	*off = a->top;
	a->top += size;
	if (a->peak < a->top)
		a->peak = a->top;
	return 0;
}

static int arena_release(struct arena_plan *a, uint64_t off, uint64_t size)
{
	size = align_up(size ? size : 1);
	/* merge with neighbours */
	for (int i = 0; i < a->n; i++) {
		if (a->free[i].off + a->free[i].size == off) {
			off = a->free[i].off;
			size += a->free[i].size;
			a->free[i--] = a->free[--a->n];
		} else if (off + size == a->free[i].off) {
			size += a->free[i].size;
			a->free[i--] = a->free[--a->n];
		}
	}
	if (off + size == a->top) {
		a->top = off;
		return 0;
	}
	if (a->n == a->cap) {
		int cap = a->cap ? 2 * a->cap : 64;
		struct range *r = realloc(a->free, sizeof(*r) * (size_t)cap);
		if (!r)
			return IR_ENOMEM;
		a->free = r;
		a->cap = cap;
	}
	a->free[a->n++] = (struct range){ off, size };
	return 0;
}

/* ---- plan life cycle ---- */

static void free_device(struct exec_plan *p)
{
	if (!p->dc)
		return;
	const struct exec_device *dv = p->dev;
	dv->sync_quiet(p->dc);
	for (int i = 0; p->pn && i < p->n; i++) {
		struct pnode *q = &p->pn[i];
		if (q->state)
			dv->release(p->dc, q->state);
		q->state = NULL;
	}
	for (int i = 0; p->inbuf && p->m && i < p->m->graph->n_inputs; i++)
		if (p->inbuf[i])
			dv->free(p->dc, p->inbuf[i]);
	free(p->inbuf);
	p->inbuf = NULL;
	if (p->weights)
		dv->free(p->dc, p->weights);
	if (p->arena)
		dv->free(p->dc, p->arena);
	if (p->ws)
		dv->free(p->dc, p->ws);
	p->weights = p->arena = p->ws = NULL;
	/* the capture, the handles, the tuning cache, the stream */
	dv->close(p->dc);
	p->dc = NULL;
	p->graph_ok = false;
}

static void clear_host(struct exec_plan *p)
{
	for (size_t i = 0; p->hv && i < p->nv; i++)
		kern_value_clear(&p->hv[i]);
}

/* After a keep_all run with no `all`: drops the downloads, keeps the values
 * that only a CPU node made (no device copy) for exec_plan_value. */
static void clear_downloads(struct exec_plan *p)
{
	for (size_t i = 0; p->hv && i < p->nv; i++)
		if (!(p->pv[i].kind == VK_ACT && p->pv[i].cpu_made && !p->pv[i].on_dev))
			kern_value_clear(&p->hv[i]);
}

void exec_plan_free(struct exec_plan *p)
{
	if (!p)
		return;
	free_device(p);
	clear_host(p);
	free(p->hv);
	for (size_t i = 0; p->pv && i < p->nv; i++)
		kern_value_clear(&p->pv[i].host);
	free(p->pv);
	for (int i = 0; p->pn && i < p->n; i++) {
		free(p->pn[i].in);
		free(p->pn[i].out);
	}
	free(p->pn);
	free(p->pub);
	for (int i = 0; i < p->n_sig; i++)
		free(p->sig[i].name);
	free(p->sig);
	free(p->tune_path);
	exec_qfuse_result_free(&p->qf);
	ir_model_free(p->m);
	free(p);
}

bool exec_plan_fits(const struct exec_plan *p, const struct exec_values *inputs)
{
	if (!p)
		return false;
	int given = 0;
	for (int i = 0; inputs && i < inputs->n; i++)
		if (inputs->a[i].v.kind != KV_NONE)
			given++;
	if (given != p->n_sig)
		return false;
	for (int i = 0; i < p->n_sig; i++) {
		const struct kern_value *kv = exec_values_find(inputs, p->sig[i].name);
		if (!kv || (int)kv->kind != p->sig[i].kind)
			return false;
		if (kv->kind != KV_TENSOR)
			continue;
		if (kv->t->dtype != p->sig[i].dtype || kv->t->rank != p->sig[i].rank ||
		    (kv->t->rank && memcmp(kv->t->dims, p->sig[i].dims, sizeof(int64_t) * (size_t)kv->t->rank)))
			return false;
	}
	return true;
}

const struct exec_plan_node *exec_plan_nodes(const struct exec_plan *p, int *n_nodes)
{
	*n_nodes = p ? p->n : 0;
	return p ? p->pub : NULL;
}

void exec_plan_summary(const struct exec_plan *p, struct exec_plan_summary *s)
{
	if (p)
		*s = p->sum;
	else
		memset(s, 0, sizeof(*s));
}

char *exec_default_tune_path(void)
{
	const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
	char buf[4096];
	if (x && *x)
		snprintf(buf, sizeof(buf), "%s/ogsh/tune", x);
	else if (h && *h)
		snprintf(buf, sizeof(buf), "%s/.cache/ogsh/tune", h);
	else
		return NULL;
	return strdup(buf);
}

/* The ops whose kernels time their choices (a cache hit is counted for them). */
static bool tunable_op(int op)
{
	return op == IR_OP_Conv || op == IR_OP_ConvTranspose || op == IR_OP_ogsh_FusedConv || op == IR_OP_Gemm ||
	       op == IR_OP_MatMul || op == IR_OP_ogsh_FusedGemm;
}

/* Shape (with start/end, opset 15) or Size of an input whose dims the plan
 * knows: the output becomes a constant without reading the input. */
static int fold_shape(struct exec_plan *p, struct ir_node *n, struct ir_diag *d)
{
	const struct pval *iv = &p->pv[n->inputs[0]->idx];
	struct pval *ov = &p->pv[n->outputs[0]->idx];
	int64_t vals[IR_MAX_RANK + 1];
	int count, rank = iv->rank;
	if (n->op == IR_OP_Size) {
		int64_t numel = 1;
		for (int i = 0; i < rank; i++)
			numel *= iv->dims[i];
		vals[0] = numel;
		count = 1;
	} else {
		int64_t start = ir_node_attr_int(n, "start", 0), end = ir_node_attr_int(n, "end", rank);
		if (start < 0)
			start += rank;
		if (end < 0)
			end += rank;
		start = start < 0 ? 0 : start > rank ? rank : start;
		end = end < 0 ? 0 : end > rank ? rank : end;
		count = 0;
		for (int64_t i = start; i < end; i++)
			vals[count++] = iv->dims[i];
	}
	int64_t dim = count;
	struct ir_tensor *t = ir_tensor_new(IR_INT64, n->op == IR_OP_Size ? 0 : 1, &dim, d);
	if (!t)
		return IR_ENOMEM;
	if (count)
		memcpy(ir_tensor_mutable(t), vals, sizeof(int64_t) * (size_t)count);
	ov->kind = VK_CONST;
	kern_value_clear(&ov->host);
	ov->host.kind = KV_TENSOR;
	ov->host.t = t;
	set_from_tensor(ov, t);
	return 0;
}

/* The dims of a value when inference knows all of them; its rank, or -1. */
static int known_dims(const struct ir_value *v, int64_t *dims)
{
	const struct ir_type *t = ir_value_type(v);
	if (!t || t->kind != IR_TYPE_TENSOR || t->rank < 0 || t->rank > IR_MAX_RANK)
		return -1;
	for (int i = 0; i < t->rank; i++) {
		if (t->dims[i].kind != IR_DIM_VALUE || t->dims[i].value < 0)
			return -1;
		dims[i] = t->dims[i].value;
	}
	return t->rank;
}

/*
 * Folds what is constant once the inputs' dims are bound, before placing:
 * Shape and Size of values whose dims are known, and nodes whose inputs
 * are all constant, run on the CPU; their readers then read initializers
 * and the folded nodes leave the plan's graph. Inference runs again after
 * each round, so shapes that came from those values (Expand, Reshape of
 * exported models' shape arithmetic) become known and the nodes after
 * them can go to the GPU. Stops after `FOLD_MAX_BYTES` of folded values.
 */
#define FOLD_MAX_BYTES ((uint64_t)256 << 20)
static int prefold(struct exec_plan *p, struct ir_diag *d)
{
	struct ir_graph *g = p->m->graph;
	uint64_t total = 0;
	char why[200];
	for (int round = 0; round < 16; round++) {
		int folded = 0;
		struct ir_node *next;
		for (struct ir_node *n = g->first; n; n = next) {
			next = n->next;
			if (ir_interrupted)
				return ir_diag_err(d, IR_EINTR, "stopped while planning");
			if (n->op == IR_OP_UNKNOWN || has_subgraphs(n) || !n->n_outputs)
				continue;
			bool graph_out = false, used = false;
			for (int i = 0; i < n->n_outputs; i++)
				if (n->outputs[i]) {
					graph_out |= n->outputs[i]->is_output;
					used |= n->outputs[i]->n_uses > 0;
				}
			if (graph_out || !used)
				continue;
			struct ir_tensor *res[8] = { 0 };
			if (n->n_outputs > 8)
				continue;
			int64_t dims[IR_MAX_RANK];
			int rank;
			if ((n->op == IR_OP_Shape || n->op == IR_OP_Size) && n->n_inputs == 1 && n->inputs[0] &&
			    (rank = known_dims(n->inputs[0], dims)) >= 0) {
				int64_t vals[IR_MAX_RANK + 1];
				int count = 0;
				if (n->op == IR_OP_Size) {
					vals[0] = 1;
					for (int i = 0; i < rank; i++)
						vals[0] *= dims[i];
					count = 1;
				} else {
					int64_t st = ir_node_attr_int(n, "start", 0), en = ir_node_attr_int(n, "end", rank);
					st = st < 0 ? st + rank : st;
					en = en < 0 ? en + rank : en;
					st = st < 0 ? 0 : st > rank ? rank : st;
					en = en < 0 ? 0 : en > rank ? rank : en;
					for (int64_t i = st; i < en; i++)
						vals[count++] = dims[i];
				}
				int64_t c = count;
				if (!(res[0] = ir_tensor_new(IR_INT64, n->op == IR_OP_Size ? 0 : 1, &c, d)))
					return IR_ENOMEM;
				if (count)
					memcpy(ir_tensor_mutable(res[0]), vals, sizeof(int64_t) * (size_t)count);
			} else {
				if (n->op == IR_OP_Constant || !cpu_supports(n, why, sizeof(why)))
					continue;
				bool all_const = true;
				for (int i = 0; all_const && i < n->n_inputs; i++)
					if (n->inputs[i] && !ir_value_const(n->inputs[i]))
						all_const = false;
				for (int i = 0; all_const && i < n->n_implicit; i++)
					all_const = false;
				if (!all_const)
					continue;
				/* not when the outputs would be large (a Expand of a constant to activation size) */
				uint64_t out_bytes = 0;
				for (int i = 0; i < n->n_outputs; i++) {
					int64_t od[IR_MAX_RANK];
					int r = n->outputs[i] ? known_dims(n->outputs[i], od) : 0;
					const struct ir_type *t = n->outputs[i] ? ir_value_type(n->outputs[i]) : NULL;
					uint64_t numel = 1, b = 0;
					for (int k = 0; r > 0 && k < r; k++)
						numel *= (uint64_t)od[k];
					if (r >= 0 && t && t->elem && ir_dtype_nbytes(t->elem, numel, &b))
						out_bytes += b;
				}
				if (total + out_bytes > FOLD_MAX_BYTES)
					continue;
				int nin = n->n_inputs;
				struct kern_value *in = calloc((size_t)(nin ? nin : 1), sizeof(*in));
				struct kern_value out[8];
				if (!in)
					return ir_diag_err(d, IR_ENOMEM, "out of memory");
				int rc = 0;
				for (int i = 0; !rc && i < nin; i++)
					if (n->inputs[i])
						rc = host_const(ir_value_const(n->inputs[i]), &in[i], d);
				if (!rc)
					rc = cpu_node(p, n, in, NULL, out, d);
				for (int i = 0; i < nin; i++)
					kern_value_clear(&in[i]);
				free(in);
				if (rc) {
					char label[300];
					exec_node_label(n, label, sizeof(label));
					ir_diag_prefix(d, "%s (folding at plan time)", label);
					return rc;
				}
				bool tensors = true;
				for (int i = 0; i < n->n_outputs; i++) {
					if (out[i].kind == KV_TENSOR)
						res[i] = out[i].t, out[i].t = NULL, out[i].kind = KV_NONE;
					else if (n->outputs[i])
						tensors = false;
					kern_value_clear(&out[i]);
				}
				if (!tensors) {
					for (int i = 0; i < n->n_outputs; i++)
						ir_tensor_unref(res[i]);
					continue;
				}
			}
			/* readers read initializers; the node goes */
			int rc = 0;
			for (int i = 0; !rc && i < n->n_outputs; i++) {
				if (!n->outputs[i] || !res[i])
					continue;
				total += res[i]->nbytes;
				struct ir_value *nv = ir_value_new(g, NULL, d);
				if (!nv)
					rc = IR_ENOMEM;
				else if (!(rc = ir_value_set_init(nv, res[i], d)))
					ir_value_replace_uses(n->outputs[i], nv);
			}
			for (int i = 0; i < n->n_outputs; i++)
				ir_tensor_unref(res[i]);
			if (rc || (rc = ir_node_remove(n, d)))
				return rc;
			p->n_prefolded++;
			folded++;
		}
		if (!folded)
			break;
		struct ir_diag idg;
		ir_diag_init(&idg);
		int rc = ir_infer(p->m, &idg);
		if (rc) {
			rc = ir_diag_err(d, rc, "%s", idg.error ? idg.error : "shape inference failed");
			ir_diag_clear(&idg);
			return rc;
		}
		ir_diag_clear(&idg);
	}
	return 0;
}

/* The tensors of node q as the device sees them, from the values' planned
 * types: dtype, dims, and the host value of constants (data not set). */
static int node_io(struct exec_plan *p, struct pnode *q, struct ir_diag *d)
{
	const struct ir_node *n = q->node;
	free(q->in);
	free(q->out);
	q->in = calloc((size_t)(n->n_inputs ? n->n_inputs : 1), sizeof(*q->in));
	q->out = calloc((size_t)(n->n_outputs ? n->n_outputs : 1), sizeof(*q->out));
	if (!q->in || !q->out)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	for (int i = 0; i < n->n_inputs; i++) {
		if (!n->inputs[i])
			continue;
		struct pval *iv = &p->pv[n->inputs[i]->idx];
		q->in[i].dtype = iv->dtype;
		q->in[i].rank = iv->rank;
		memcpy(q->in[i].dims, iv->dims, sizeof(int64_t) * (size_t)iv->rank);
		q->in[i].host = iv->kind == VK_CONST && iv->host.kind == KV_TENSOR ? iv->host.t : NULL;
	}
	for (int i = 0; i < n->n_outputs; i++) {
		if (!n->outputs[i])
			continue;
		struct pval *ov = &p->pv[n->outputs[i]->idx];
		q->out[i].dtype = ov->dtype;
		q->out[i].rank = ov->rank;
		memcpy(q->out[i].dims, ov->dims, sizeof(int64_t) * (size_t)ov->rank);
	}
	return 0;
}

/* The device's view of node q (its tensors from node_io). */
static void dev_node(const struct exec_plan *p, const struct pnode *q, struct exec_dev_node *dn)
{
	const struct ir_node *n = q->node;
	*dn = (struct exec_dev_node){
		.node = n, .opset = ir_model_opset(p->m, n->domain),
		.n_in = n->n_inputs, .n_out = n->n_outputs, .in = q->in, .out = q->out,
	};
}

int exec_dev_node_of(const struct ir_model *m, const struct ir_node *n, struct exec_dev_node *dn,
		     struct exec_dev_io *in, struct exec_dev_io *out)
{
	*dn = (struct exec_dev_node){
		.node = n, .opset = ir_model_opset(m, n->domain),
		.n_in = n->n_inputs, .n_out = n->n_outputs, .in = in, .out = out,
	};
	for (int i = 0; i < n->n_inputs + n->n_outputs; i++) {
		const struct ir_value *v = i < n->n_inputs ? n->inputs[i] : n->outputs[i - n->n_inputs];
		struct exec_dev_io *io = i < n->n_inputs ? &in[i] : &out[i - n->n_inputs];
		memset(io, 0, sizeof(*io));
		if (!v)
			continue;
		struct pval pv;
		memset(&pv, 0, sizeof(pv));
		value_type(&pv, v);
		if (!pv.typed)
			return 0;
		io->dtype = pv.dtype;
		io->rank = pv.rank;
		memcpy(io->dims, pv.dims, sizeof(int64_t) * (size_t)pv.rank);
		if (i < n->n_inputs)
			io->host = ir_value_const(v);
	}
	return 1;
}

/* Places every node: folded, GPU or CPU. */
static int place_nodes(struct exec_plan *p, const struct exec_values *inputs, struct ir_diag *d)
{
	struct ir_graph *g = p->m->graph;
	/* graph inputs, initializers */
	for (size_t i = 0; i < g->n_values; i++) {
		struct ir_value *v = g->values[i];
		struct pval *pv = &p->pv[i];
		pv->first = pv->last = -1;
		pv->last_host = -1;
		const struct kern_value *given = v->is_input ? exec_values_find(inputs, v->name) : NULL;
		if (given) {
			pv->kind = VK_INPUT;
			if (given->kind == KV_TENSOR)
				set_from_tensor(pv, given->t);
		} else if (v->init) {
			pv->kind = VK_CONST;
			int rc = host_const(v->init, &pv->host, d);
			if (rc)
				return rc;
			set_from_tensor(pv, v->init);
		} else if (v->sparse_init) {
			return ir_diag_err(d, IR_ERR, "'%s' is a sparse initializer: ogsh does not run sparse tensors",
					   v->name);
		}
	}
	int pos = 0;
	char why[256], label[300];
	p->sum.n_relu_moved = p->qf.n_commuted;
	for (struct ir_node *n = g->first; n; n = n->next, pos++) {
		struct exec_plan_node *pub = &p->pub[pos];
		struct pnode *q = &p->pn[pos];
		q->node = n;
		const struct exec_qfuse_item *isl = exec_qfuse_find(&p->qf, n->id);
		pub->node = ir_node_by_id(p->src->graph, isl ? isl->orig_id : n->id);
		if (!pub->node)
			pub->node = n;
		if (isl) {
			snprintf(pub->precision, sizeof(pub->precision), "%s", isl->precision);
			pub->absorbed = isl->absorbed;
		}
		for (int i = 0; i < p->qf.n_left; i++)
			if (p->qf.left[i].node_id == n->id) {
				pub->unfused = p->qf.left[i].why;
				p->sum.n_unfused++;
			}
		exec_node_label(n, label, sizeof(label));
		if (ir_interrupted)
			return ir_diag_err(d, IR_EINTR, "stopped while planning (%d of %d nodes)", pos, p->n);
		/* a node with subgraphs (If, Loop, Scan, SequenceMap) runs on the CPU
		 * reference, subgraphs and all, with its inputs and the outer values
		 * its subgraphs read (implicit inputs) brought to the host */
		bool sub = has_subgraphs(n);
		bool cpu_ok = n->op != IR_OP_UNKNOWN && cpu_supports(n, why, sizeof(why));
		if (sub && !cpu_ok)
			return ir_diag_err(d, IR_ERR, "%s %s", label, why);
		if (sub && !exec_node_runnable_at(p->m, n, 0, why, sizeof(why)))
			return ir_diag_err(d, IR_ERR, "%s cannot run: its subgraph node %s", label, why);
		/* cost figures */
		struct ir_node_cost c;
		if (!ir_node_cost(p->m, n, &c, NULL)) {
			if (c.known) {
				pub->flops = c.flops;
				pub->bytes = c.bytes_read + c.bytes_written;
			}
			ir_node_cost_clear(&c);
		}
		for (int i = 0; i < n->n_outputs; i++)
			if (n->outputs[i]) {
				struct pval *ov = &p->pv[n->outputs[i]->idx];
				value_type(ov, n->outputs[i]);
				ov->kind = VK_ACT;
				if (ov->typed)
					pub->out_bytes += ov->bytes;
			}
		/* Shape and Size of a value whose dims are known are constants */
		if ((n->op == IR_OP_Shape || n->op == IR_OP_Size) && n->n_inputs == 1 && n->inputs[0] &&
		    n->n_outputs == 1 && n->outputs[0] && p->pv[n->inputs[0]->idx].typed) {
			int rc = fold_shape(p, n, d);
			if (rc)
				return rc;
			pub->place = EXEC_FOLDED;
			snprintf(pub->why, sizeof(pub->why), "the input's shape is known");
			snprintf(pub->impl, sizeof(pub->impl), "cpu at plan time");
			p->sum.n_folded++;
			continue;
		}
		/* fold */
		bool all_const = cpu_ok;
		for (int i = 0; all_const && i < n->n_inputs; i++)
			if (n->inputs[i] && p->pv[n->inputs[i]->idx].kind != VK_CONST)
				all_const = false;
		for (int i = 0; all_const && i < n->n_implicit; i++)
			if (n->implicit[i] && (n->implicit[i]->graph != g || p->pv[n->implicit[i]->idx].kind != VK_CONST))
				all_const = false;
		if (all_const) {
			int nin = n->n_inputs, nout = n->n_outputs, nimp = n->n_implicit;
			struct kern_value *in = calloc((size_t)(nin + nimp ? nin + nimp : 1), sizeof(*in));
			struct kern_value *out = calloc((size_t)(nout ? nout : 1), sizeof(*out));
			int rc = in && out ? 0 : ir_diag_err(d, IR_ENOMEM, "out of memory");
			for (int i = 0; !rc && i < nin; i++)
				if (n->inputs[i])
					in[i] = p->pv[n->inputs[i]->idx].host;   /* borrowed */
			for (int i = 0; !rc && i < nimp; i++)
				if (n->implicit[i])
					in[nin + i] = p->pv[n->implicit[i]->idx].host;   /* borrowed */
			if (!rc)
				rc = cpu_node(p, n, in, in + nin, out, d);
			for (int i = 0; !rc && i < nout; i++) {
				if (!n->outputs[i]) {
					kern_value_clear(&out[i]);
					continue;
				}
				struct pval *ov = &p->pv[n->outputs[i]->idx];
				ov->kind = VK_CONST;
				ov->host = out[i];
				memset(&out[i], 0, sizeof(out[i]));
				if (ov->host.kind == KV_TENSOR)
					set_from_tensor(ov, ov->host.t);
				else
					ov->typed = false;
			}
			free(in);
			free(out);
			if (rc) {
				ir_diag_prefix(d, "%s (folding at plan time)", label);
				return rc;
			}
			pub->place = EXEC_FOLDED;
			snprintf(pub->why, sizeof(pub->why), "inputs are constant");
			snprintf(pub->impl, sizeof(pub->impl), "cpu at plan time");
			p->sum.n_folded++;
			continue;
		}
		/* the device */
		bool gpu = false;
		why[0] = 0;
		if (sub) {
			char names[100] = "";
			size_t len = 0;
			for (int a = 0; a < n->n_attrs && len < sizeof(names); a++)
				if (n->attrs[a].type == IR_ATTR_GRAPH || n->attrs[a].type == IR_ATTR_GRAPHS)
					len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s", len ? ", " : "",
								n->attrs[a].name);
			snprintf(why, sizeof(why), "it has subgraphs (%s): the CPU reference runs them", names);
		} else if (!p->dev) {
			snprintf(why, sizeof(why), "ogsh was built without CUDA");
		} else if (!p->dev->has_kernel(n, why, sizeof(why))) {
			if (!why[0])
				snprintf(why, sizeof(why), "no GPU kernel for '%s'", n->op_type);
		} else {
			for (int i = 0; i < n->n_inputs && !why[0]; i++)
				if (n->inputs[i] && !p->pv[n->inputs[i]->idx].typed)
					snprintf(why, sizeof(why), "the shape of input '%s' is not known before running",
						 n->inputs[i]->name);
			for (int i = 0; i < n->n_outputs && !why[0]; i++)
				if (n->outputs[i] && !p->pv[n->outputs[i]->idx].typed)
					snprintf(why, sizeof(why), "output shape is not known before running");
		}
		if (!why[0]) {
			int rc = node_io(p, q, d);
			if (rc)
				return rc;
			char kw[160] = "";
			struct exec_dev_node dn;
			dev_node(p, q, &dn);
			if ((rc = p->dev->supports(&dn, kw, sizeof(kw), d)) < 0)
				return rc;
			if (rc)
				gpu = true;
			else
				snprintf(why, sizeof(why), "%s", kw[0] ? kw : "the GPU kernel does not support this node");
		}
		if (gpu) {
			pub->place = EXEC_ON_GPU;
			p->sum.n_gpu++;
			if (isl) {
				p->sum.n_islands[!strcmp(isl->precision, "int8") ? 0 : !strcmp(isl->precision, "fp8") ? 1 : 2]++;
				if (isl->flops > 0)
					pub->flops = isl->flops;
			}
			for (int i = 0; i < n->n_inputs; i++)
				if (n->inputs[i])
					p->pv[n->inputs[i]->idx].gpu_reads = true;
			continue;
		}
		if (!cpu_ok) {
			if (ir_model_find_function(p->m, n))
				return ir_diag_err(d, IR_ERR, "%s cannot run with --device cuda yet: it calls the model "
						   "function '%s' and has no kernel; use --device cpu", label, n->op_type);
			char w2[256] = "has no cpu kernel";
			if (n->op != IR_OP_UNKNOWN)
				cpu_supports(n, w2, sizeof(w2));
			return ir_diag_err(d, IR_ERR, "%s %s, and %s", label, w2, why);
		}
		free(q->in);
		free(q->out);
		q->in = q->out = NULL;
		pub->place = EXEC_ON_CPU;
		snprintf(pub->why, sizeof(pub->why), "%s", why);
		snprintf(pub->impl, sizeof(pub->impl), "ogsh cpu reference");
		p->sum.n_cpu++;
		for (int i = 0; i < n->n_outputs; i++)
			if (n->outputs[i])
				p->pv[n->outputs[i]->idx].cpu_made = true;
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Layout                                                                    */
/* ------------------------------------------------------------------------ */

/*
 * Which float16/bfloat16 activations are stored channels-last: the rules
 * of exec/layout.c, then the kernels' word (supports() with the layouts
 * set); a node that refuses gets NCHW values and the rules run again.
 * OGSH_LAYOUT=nchw turns it off (for comparisons).
 */
static int plan_layout(struct exec_plan *p, struct ir_diag *d)
{
	const char *env = getenv("OGSH_LAYOUT");
	if (env && !strcmp(env, "nchw"))
		return 0;
	struct ir_graph *g = p->m->graph;
	struct layout_val *vals = calloc(p->nv ? p->nv : 1, sizeof(*vals));
	enum exec_place *place = calloc((size_t)(p->n ? p->n : 1), sizeof(*place));
	if (!vals || !place) {
		free(vals);
		free(place);
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < p->nv; i++) {
		const struct pval *pv = &p->pv[i];
		struct layout_val *v = &vals[i];
		v->act = pv->kind == VK_ACT;
		v->typed = pv->typed;
		v->dtype = pv->dtype;
		v->rank = pv->rank;
		memcpy(v->dims, pv->dims, sizeof(v->dims));
	}
	for (int i = 0; i < p->n; i++)
		place[i] = p->pub[i].place;
	int n_nhwc = exec_layout_plan(g, place, vals);
	while (n_nhwc) {   /* each round that refuses demotes a value */
		bool refused = false;
		int pos = 0;
		for (struct ir_node *n = g->first; n; n = n->next, pos++) {
			struct pnode *q = &p->pn[pos];
			if (place[pos] != EXEC_ON_GPU)
				continue;
			bool any = false;
			for (int i = 0; i < n->n_inputs; i++)
				if (n->inputs[i])
					any |= q->in[i].nhwc = vals[n->inputs[i]->idx].nhwc;
			for (int i = 0; i < n->n_outputs; i++)
				if (n->outputs[i])
					any |= q->out[i].nhwc = vals[n->outputs[i]->idx].nhwc;
			char why[160];
			struct exec_dev_node dn;
			dev_node(p, q, &dn);
			int rc = any ? p->dev->supports(&dn, why, sizeof(why), d) : 1;
			if (rc < 0) {
				free(vals);
				free(place);
				return rc;
			}
			if (!rc)
				refused |= exec_layout_refuse(n, vals);
		}
		if (!refused)
			break;
		exec_layout_settle(g, place, vals);
	}
	for (size_t i = 0; i < p->nv; i++) {
		p->pv[i].nhwc = vals[i].nhwc;
		p->sum.n_nhwc += vals[i].nhwc;
	}
	free(vals);
	free(place);
	return 0;
}

/* Ops whose output holds the input's bytes unchanged. */
static bool view_op(int op)
{
	return op == IR_OP_Identity || op == IR_OP_Reshape || op == IR_OP_Flatten || op == IR_OP_Squeeze ||
	       op == IR_OP_Unsqueeze;
}

/*
 * A view on the GPU (Reshape, Flatten, Squeeze, Unsqueeze, Identity) whose
 * input and output are plain tensors on the device, both in NCHW order,
 * gets no memory of its own: its output shares the input's (its root's,
 * following views of views), the root lives as long as the last reader of
 * any view of it, and the node launches nothing. Nothing writes a value in
 * place, so sharing is safe for weights and graph inputs too.
 */
static void plan_views(struct exec_plan *p)
{
	struct ir_graph *g = p->m->graph;
	int pos = 0;
	for (struct ir_node *n = g->first; n; n = n->next, pos++) {
		if (p->pub[pos].place != EXEC_ON_GPU || !view_op(n->op) || n->n_outputs < 1 || n->n_inputs < 1 ||
		    !n->inputs[0] || !n->outputs[0] || n->inputs[0]->graph != g)
			continue;
		struct pval *iv = &p->pv[n->inputs[0]->idx], *ov = &p->pv[n->outputs[0]->idx];
		if (ov->kind != VK_ACT || !ov->on_dev || !ov->typed || ov->nhwc || ov->cpu_made || !iv->on_dev ||
		    !iv->typed || iv->nhwc || iv->dtype != ov->dtype || iv->bytes != ov->bytes || iv->kind == VK_NONE)
			continue;
		int root = iv->root1 ? iv->root1 - 1 : (int)n->inputs[0]->idx;
		struct pval *rv = &p->pv[root];
		ov->root1 = root + 1;
		if (rv->last < ov->last)
			rv->last = ov->last;
		p->pn[pos].view = true;
		p->sum.n_views++;
	}
}

/* Liveness, copies and the arena. */
static int plan_memory(struct exec_plan *p, struct ir_diag *d)
{
	struct ir_graph *g = p->m->graph;
	int pos = 0;
	for (struct ir_node *n = g->first; n; n = n->next, pos++) {
		enum exec_place pl = p->pub[pos].place;
		if (pl == EXEC_FOLDED)
			continue;
		for (int i = 0; i < n->n_inputs + n->n_implicit; i++) {
			struct ir_value *v = i < n->n_inputs ? n->inputs[i] : n->implicit[i - n->n_inputs];
			if (!v || v->graph != g)
				continue;
			struct pval *pv = &p->pv[v->idx];
			if (pl == EXEC_ON_GPU) {
				if (pv->last < pos)
					pv->last = pos;
			} else {
				if (pv->last_host < pos)
					pv->last_host = pos;
				/* a GPU value read on the CPU: downloaded before this node */
				if (pv->kind == VK_ACT && !pv->cpu_made) {
					if (pv->last < pos)
						pv->last = pos;
				}
			}
		}
		for (int i = 0; i < n->n_outputs; i++) {
			struct ir_value *v = n->outputs[i];
			if (!v)
				continue;
			struct pval *pv = &p->pv[v->idx];
			pv->first = pos;
			if (pv->last < pos)
				pv->last = pos;
			if (pl == EXEC_ON_CPU && pv->last_host < pos)
				pv->last_host = pos;
		}
	}
	for (int i = 0; i < g->n_outputs; i++) {
		struct pval *pv = &p->pv[g->outputs[i]->idx];
		pv->last = END_POS;
		pv->last_host = END_POS;
	}
	if (p->o.keep_all)
		for (size_t i = 0; i < p->nv; i++)
			if (p->pv[i].kind == VK_ACT) {
				p->pv[i].last = END_POS;
				p->pv[i].last_host = END_POS;
			}
	/* which activations have device memory: GPU outputs, and CPU outputs a GPU node reads */
	for (size_t i = 0; i < p->nv; i++) {
		struct pval *pv = &p->pv[i];
		if (pv->kind == VK_ACT && pv->typed && pv->first >= 0)
			pv->on_dev = !pv->cpu_made || pv->gpu_reads;
		else if ((pv->kind == VK_CONST || pv->kind == VK_INPUT) && pv->gpu_reads && pv->typed)
			pv->on_dev = true;
	}
	plan_views(p);
	/* copies between CPU and GPU nodes (graph inputs and outputs are not counted) */
	pos = 0;
	p->sum.n_relu_moved = p->qf.n_commuted;
	for (struct ir_node *n = g->first; n; n = n->next, pos++) {
		struct exec_plan_node *pub = &p->pub[pos];
		if (pub->place != EXEC_ON_CPU)
			continue;
		for (int i = 0; i < n->n_inputs + n->n_implicit; i++) {
			struct ir_value *v = i < n->n_inputs ? n->inputs[i] : n->implicit[i - n->n_inputs];
			if (!v || v->graph != g)
				continue;
			struct pval *pv = &p->pv[v->idx];
			bool dup = false;
			for (int j = 0; j < i; j++)
				dup |= (j < n->n_inputs ? n->inputs[j] : n->implicit[j - n->n_inputs]) == v;
			if (!dup && pv->kind == VK_ACT && !pv->cpu_made && pv->on_dev && !pv->counted) {
				/* downloaded once per run, by its first CPU reader */
				pv->counted = true;
				pub->copies_in++;
				pub->copy_bytes += pv->bytes;
			}
		}
		for (int i = 0; i < n->n_outputs; i++) {
			struct ir_value *v = n->outputs[i];
			if (v && p->pv[v->idx].gpu_reads) {
				pub->copies_in++;
				pub->copy_bytes += p->pv[v->idx].bytes;
			}
		}
		p->sum.n_copies += pub->copies_in;
		p->sum.copy_bytes += pub->copy_bytes;
	}
	/* the arena: values by start position, best fit */
	struct arena_plan a = { 0 };
	int rc = 0;
	int *order = malloc(sizeof(int) * (p->nv ? p->nv : 1));
	if (!order)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	pos = 0;
	/* for each position: release what ended before it, then place its outputs */
	int n_live = 0;
	for (struct ir_node *n = g->first; n && !rc; n = n->next, pos++) {
		for (int k = 0; k < n_live; k++) {
			struct pval *pv = &p->pv[order[k]];
			if (pv->last < pos) {
				rc = arena_release(&a, pv->off, pv->bytes);
				order[k--] = order[--n_live];
			}
		}
		for (int i = 0; i < n->n_outputs && !rc; i++) {
			struct ir_value *v = n->outputs[i];
			if (!v)
				continue;
			struct pval *pv = &p->pv[v->idx];
			if (pv->kind != VK_ACT || !pv->on_dev || pv->root1)
				continue;
			rc = arena_alloc(&a, pv->bytes, &pv->off);
			p->sum.naive_bytes += align_up(pv->bytes ? pv->bytes : 1);
			order[n_live++] = (int)v->idx;
		}
	}
	free(order);
	free(a.free);
	if (rc)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	p->sum.arena_bytes = a.peak;
	/* the weights block */
	uint64_t w = 0;
	for (size_t i = 0; i < p->nv; i++) {
		struct pval *pv = &p->pv[i];
		if (pv->kind == VK_CONST && pv->on_dev) {
			pv->off = w;
			w += align_up(pv->bytes ? pv->bytes : 1);
		}
	}
	p->sum.weight_bytes = w;
	return 0;
}

static void progress(struct exec_plan *p, const char *what, int done, int total)
{
	if (p->o.progress)
		p->o.progress(p->o.progress_arg, what, done, total);
}

/* Opens the device, allocates, uploads constants, prepares kernels. */
static int plan_device(struct exec_plan *p, struct ir_diag *d)
{
	struct ir_graph *g = p->m->graph;
	const struct exec_device *dv = p->dev;
	int rc;
	if ((rc = dv->open(&p->o, &p->dc, d)))
		return rc;
	if (p->sum.weight_bytes && (rc = dv->alloc(p->dc, p->sum.weight_bytes, "the weights", &p->weights, d)))
		return rc;
	if ((rc = dv->alloc(p->dc, p->sum.arena_bytes, "the activation arena", &p->arena, d)))
		return rc;
	if (!(p->inbuf = calloc((size_t)(g->n_inputs ? g->n_inputs : 1), sizeof(void *))))
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	for (int i = 0; i < g->n_inputs; i++) {
		struct pval *pv = &p->pv[g->inputs[i]->idx];
		if (pv->kind != VK_INPUT || !pv->on_dev)
			continue;
		char what[300];
		snprintf(what, sizeof(what), "input '%s'", g->inputs[i]->name);
		if ((rc = dv->alloc(p->dc, pv->bytes, what, &p->inbuf[i], d)))
			return rc;
		pv->dev = p->inbuf[i];
	}
	for (size_t i = 0; i < p->nv; i++) {
		struct pval *pv = &p->pv[i];
		if (!pv->on_dev || pv->root1)
			continue;     /* a view's output: its root's pointer, below */
		if (pv->kind == VK_ACT) {
			pv->dev = (char *)p->arena + pv->off;
		} else if (pv->kind == VK_CONST) {
			pv->dev = (char *)p->weights + pv->off;
			const void *src = pv->host.kind == KV_TENSOR ? ir_tensor_data(pv->host.t) : NULL;
			if (src && pv->bytes && dv->upload(p->dc, pv->dev, src, pv->bytes, true, "uploading the weights", d))
				return IR_ERR;
		}
	}
	for (size_t i = 0; i < p->nv; i++)
		if (p->pv[i].on_dev && p->pv[i].root1)
			p->pv[i].dev = p->pv[p->pv[i].root1 - 1].dev;
	/* pointers of every GPU node's tensors */
	int n_gpu = 0, pos = 0;
	for (struct ir_node *n = g->first; n; n = n->next, pos++) {
		struct pnode *q = &p->pn[pos];
		if (p->pub[pos].place != EXEC_ON_GPU)
			continue;
		n_gpu++;
		for (int i = 0; i < n->n_inputs; i++)
			if (n->inputs[i])
				q->in[i].data = p->pv[n->inputs[i]->idx].dev;
		for (int i = 0; i < n->n_outputs; i++)
			if (n->outputs[i])
				q->out[i].data = p->pv[n->outputs[i]->idx].dev;
	}
	/* the tuning cache */
	char fp[512];
	dv->fingerprint(p->dc, fp, sizeof(fp));
	if (p->tune_path) {
		struct ir_diag td;
		ir_diag_init(&td);
		if (dv->tune_open(p->dc, p->tune_path, fp, &td) && td.error)
			ir_diag_warn(d, "the tuning cache is not used: %s", td.error);
		ir_diag_clear(&td);
	}
	bool tune = dv->tune_count(p->dc) >= 0;
	int before = tune ? dv->tune_count(p->dc) : 0;
	int done = 0;
	size_t ws = 0;
	pos = 0;
	for (struct ir_node *n = g->first; n; n = n->next, pos++) {
		struct pnode *q = &p->pn[pos];
		if (p->pub[pos].place != EXEC_ON_GPU)
			continue;
		if (ir_interrupted)
			return ir_diag_err(d, IR_EINTR, "stopped while preparing kernels (%d of %d)", done, n_gpu);
		int cnt0 = tune ? dv->tune_count(p->dc) : 0;
		if (q->view) {
			snprintf(p->pub[pos].impl, sizeof(p->pub[pos].impl), "view (shares its input's memory)");
			progress(p, "tuning", ++done, n_gpu);
			continue;
		}
		struct exec_dev_node dn;
		dev_node(p, q, &dn);
		if ((rc = dv->prepare(p->dc, &dn, &q->state, &q->ws_bytes, p->pub[pos].impl, sizeof(p->pub[pos].impl),
				      d))) {
			char label[300];
			exec_node_label(n, label, sizeof(label));
			ir_diag_prefix(d, "%s", label);
			return rc;
		}
		int cnt1 = tune ? dv->tune_count(p->dc) : 0;
		if (tune && cnt1 == cnt0 && tunable_op(n->op))
			p->sum.tune_hits++;
		if (q->ws_bytes > ws)
			ws = q->ws_bytes;
		progress(p, "tuning", ++done, n_gpu);
	}
	if (tune) {
		p->sum.tuned = dv->tune_count(p->dc) - before;
		if (p->sum.tuned > 0) {
			struct ir_diag td;
			ir_diag_init(&td);
			if (dv->tune_save(p->dc, &td))
				ir_diag_warn(d, "the tuning cache was not saved: %s", td.error ? td.error : "?");
			ir_diag_clear(&td);
		}
	}
	p->sum.ws_bytes = ws;
	if (ws && (rc = dv->alloc(p->dc, ws, "the kernel workspace", &p->ws, d)))
		return rc;
	/* the CUDA graph: captured after the first run */
	if (p->o.no_graph)
		snprintf(p->sum.graph_why, sizeof(p->sum.graph_why), "turned off (--no-graph)");
	else if (p->sum.n_cpu)
		snprintf(p->sum.graph_why, sizeof(p->sum.graph_why), "%d node%s on the CPU", p->sum.n_cpu,
			 p->sum.n_cpu == 1 ? " runs" : "s run");
	else if (!n_gpu)
		snprintf(p->sum.graph_why, sizeof(p->sum.graph_why), "no node runs on the GPU");
	else
		snprintf(p->sum.graph_why, sizeof(p->sum.graph_why), "captured after the first run");
	return dv->sync(p->dc, "cudaStreamSynchronize", d);
}

/*
 * The plan's graph: the clone with the inputs' dims bound, every shape
 * inferred, and what is constant folded away (prefold). Every step that
 * rewrites the clone before placement goes here, between inference and
 * prefold; a rewrite may ask the device whether it runs a node it made
 * (p->dev->supports of exec_dev_node_of the node).
 */
/* exec_qfuse's question to the device: does it run the island node n? */
static bool island_supports(void *arg, const struct ir_model *m, const struct ir_node *n, char *why, size_t size)
{
	struct exec_plan *p = arg;
	struct exec_dev_io in[16], out[4];
	struct exec_dev_node dn;
	if (!p->dev) {
		snprintf(why, size, "ogsh was built without CUDA");
		return false;
	}
	if (n->n_inputs > 16 || n->n_outputs > 4 || !exec_dev_node_of(m, n, &dn, in, out)) {
		snprintf(why, size, "the shapes are not known before running");
		return false;
	}
	struct ir_diag d2;
	ir_diag_init(&d2);
	int rc = p->dev->supports(&dn, why, size, &d2);
	if (rc < 0)
		snprintf(why, size, "%s", d2.error ? d2.error : "the device failed");
	ir_diag_clear(&d2);
	return rc == 1;
}

/* The branch an If takes when its condition is a constant at plan time, or
 * NULL (not constant, or a branch that itself has subgraphs: that If stays
 * one node and runs on the CPU). */
static const struct ir_graph *const_branch(const struct ir_node *n)
{
	/* not a graph input with a default: the run may give another value */
	if (n->op != IR_OP_If || n->n_inputs != 1 || !n->inputs[0] || n->inputs[0]->is_input)
		return NULL;
	const struct ir_tensor *c = ir_value_const(n->inputs[0]);
	const void *data = c ? ir_tensor_data(c) : NULL;
	if (!c || c->dtype != IR_BOOL || c->numel != 1 || !data)
		return NULL;
	const struct ir_attr *a = ir_node_attr(n, *(const uint8_t *)data ? "then_branch" : "else_branch");
	if (!a || a->type != IR_ATTR_GRAPH || !a->g || a->g->n_inputs || a->g->n_outputs != n->n_outputs)
		return NULL;
	const struct ir_graph *b = a->g;
	ir_for_each_node(b, bn) {
		if (has_subgraphs(bn))
			return NULL;
		for (int i = 0; i < bn->n_inputs; i++)
			if (bn->inputs[i] && bn->inputs[i]->graph != b)
				return NULL;
	}
	for (size_t i = 0; i < b->n_values; i++) {
		const struct ir_value *v = b->values[i];
		if (v->sparse_init || (v->outer && v->outer->graph != n->graph))
			return NULL;
	}
	for (int i = 0; i < b->n_outputs; i++)
		if (!b->outputs[i] || b->outputs[i]->graph != b)
			return NULL;
	return b;
}

/*
 * Puts the branch an If with a constant condition takes in its place: the
 * branch's nodes go into the main graph before it (their values renamed
 * fresh, the branch's captures read the outer values themselves, its
 * initializers become the main graph's), and an Identity per output gives
 * the If's output values their producer; the If goes. The branch's nodes
 * are then placed like any other (on the GPU when it runs them). Returns
 * how many Ifs went, or a negative error code.
 */
static int inline_const_ifs(struct exec_plan *p, struct ir_diag *d)
{
	struct ir_graph *g = p->m->graph;
	int count = 0;
	struct ir_node *next;
	for (struct ir_node *n = g->first; n; n = next) {
		next = n->next;
		const struct ir_graph *b = const_branch(n);
		if (!b)
			continue;
		struct ir_value **map = calloc(b->n_values ? b->n_values : 1, sizeof(*map));
		if (!map)
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
		int rc = 0;
		for (size_t i = 0; !rc && i < b->n_values; i++) {
			struct ir_value *v = b->values[i];
			if (v->outer) {
				map[i] = v->outer;
			} else if (v->init) {
				if (!(map[i] = ir_value_new(g, NULL, d)))
					rc = IR_ENOMEM;
				else
					rc = ir_value_set_init(map[i], v->init, d);
			}
		}
		ir_for_each_node(b, bn) {
			if (rc)
				break;
			char name[300];
			snprintf(name, sizeof(name), "%s/%s", n->name && *n->name ? n->name : "If",
				 bn->name && *bn->name ? bn->name : bn->op_type);
			struct ir_node *nn = ir_node_new(g, bn->op_type, bn->domain, name, bn->n_inputs, bn->n_outputs, n);
			if (!nn) {
				rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
				break;
			}
			for (int i = 0; !rc && i < bn->n_inputs; i++)
				if (bn->inputs[i] && !(map[bn->inputs[i]->idx]))
					rc = ir_diag_err(d, IR_ERR, "'%s' is read before it is made in the branch", bn->inputs[i]->name);
				else if (bn->inputs[i] && ir_node_set_input(nn, i, map[bn->inputs[i]->idx]))
					rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
			for (int i = 0; !rc && i < bn->n_outputs; i++) {
				if (!bn->outputs[i])
					continue;
				struct ir_value *ov = ir_value_new(g, NULL, d);
				if (!ov)
					rc = IR_ENOMEM;
				else if (!(rc = ir_node_set_output(nn, i, ov, d)))
					map[bn->outputs[i]->idx] = ov;
			}
			for (int a = 0; !rc && a < bn->n_attrs; a++) {
				struct ir_attr c;
				if (ir_attr_copy(&c, &bn->attrs[a], g))
					rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
				else
					rc = ir_node_set_attr(nn, &c, d);
			}
		}
		/* the If's outputs: made by an Identity of the branch's outputs */
		for (int k = 0; !rc && k < n->n_outputs; k++) {
			struct ir_value *ov = n->outputs[k], *src = map[b->outputs[k]->idx];
			if (!ov)
				continue;
			if (!src) {
				rc = ir_diag_err(d, IR_ERR, "branch output '%s' has no value", b->outputs[k]->name);
				break;
			}
			char name[300];
			snprintf(name, sizeof(name), "%s/output%d", n->name && *n->name ? n->name : "If", k);
			struct ir_node *id = ir_node_new(g, "Identity", NULL, name, 1, 1, n);
			if (!id)
				rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
			else if (ir_node_set_input(id, 0, src))
				rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
			else if (!(rc = ir_node_set_output(n, k, NULL, d)))
				rc = ir_node_set_output(id, 0, ov, d);
		}
		free(map);
		if (!rc)
			rc = ir_node_remove(n, d);
		if (rc) {
			char label[300];
			exec_node_label(n, label, sizeof(label));
			ir_diag_prefix(d, "%s (its branch, the condition being constant)", label);
			return rc;
		}
		count++;
	}
	return count;
}

int exec_node_costs(const struct ir_model *m, const struct exec_values *inputs, int n, double *flops, double *bytes,
		    struct ir_diag *d)
{
	for (int i = 0; i < n; i++)
		flops[i] = bytes[i] = 0;
	struct ir_model *c = ir_model_clone(m);
	if (!c)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	struct ir_diag idg;
	ir_diag_init(&idg);
	int rc = bind_inputs(c, inputs, d);
	if (!rc && (rc = ir_infer(c, &idg)))
		rc = ir_diag_err(d, rc, "%s", idg.error ? idg.error : "shape inference failed");
	ir_diag_clear(&idg);
	int i = 0;
	ir_for_each_node(c->graph, nd) {
		if (rc || i >= n)
			break;
		struct ir_node_cost k;
		if (!ir_node_cost(c, nd, &k, NULL)) {
			if (k.known) {
				flops[i] = k.flops;
				bytes[i] = k.bytes_read + k.bytes_written;
			}
			ir_node_cost_clear(&k);
		}
		i++;
	}
	ir_model_free(c);
	return rc;
}

/* Shape inference on the plan's model; its warnings are dropped */
static int infer_plan(struct exec_plan *p, struct ir_diag *d)
{
	struct ir_diag idg;
	ir_diag_init(&idg);
	int rc = ir_infer(p->m, &idg);
	if (rc)
		rc = ir_diag_err(d, rc, "%s", idg.error ? idg.error : "shape inference failed");
	ir_diag_clear(&idg);
	return rc;
}

static int plan_graph(struct exec_plan *p, const struct exec_values *inputs, struct ir_diag *d)
{
	int rc;
	if ((rc = bind_inputs(p->m, inputs, d)) || (rc = infer_plan(p, d)))
		return rc;
	/* quantized islands (exec/qfuse.h); OGSH_QFUSE=0 leaves every Q/DQ as it is */
	const char *qe = getenv("OGSH_QFUSE");
	if (!(qe && !strcmp(qe, "0")) && (rc = exec_qfuse(p->m, island_supports, p, &p->qf, d)))
		return rc;
	if ((rc = prefold(p, d)))
		return rc;
	/* an If whose condition is constant now: its branch joins the graph
	 * (then inference and folding again, for what the branch made known) */
	for (int round = 0; round < 8; round++) {
		int n = inline_const_ifs(p, d);
		if (n < 0)
			return n;
		if (!n)
			break;
		p->sum.n_if_inlined += n;
		if ((rc = infer_plan(p, d)) || (rc = prefold(p, d)))
			return rc;
	}
	return 0;
}

/* exec_plan_new, or with place_only exec_plan_place: the same steps up to
 * placement, with no device opened (and none needed). */
static int plan_new(const struct ir_model *m, const struct exec_values *inputs, const struct exec_plan_opts *o,
		    bool place_only, struct exec_plan **out, struct ir_diag *d)
{
	static const struct exec_plan_opts dflt;
	*out = NULL;
	int rc = place_only ? 0 : need_gpu(d);
	if (rc)
		return rc;
	if ((rc = exec_check_inputs(m, inputs, d)))
		return rc;
	double t0 = exec_now_ms();
	struct exec_plan *p = calloc(1, sizeof(*p));
	if (!p)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	p->src = m;
	p->dev = plan_device_kind();
	p->o = o ? *o : dflt;
	p->tune_path = p->o.tune_path ? strdup(p->o.tune_path) : exec_default_tune_path();
	p->o.tune_path = NULL;
	if (!(p->m = ir_model_clone(m))) {
		rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
		goto fail;
	}
	struct ir_graph *g = p->m->graph;
	/* the inputs' signature */
	if (inputs && inputs->n && !(p->sig = calloc((size_t)inputs->n, sizeof(*p->sig)))) {
		rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
		goto fail;
	}
	for (int i = 0; inputs && i < inputs->n; i++) {
		const struct kern_value *kv = &inputs->a[i].v;
		if (kv->kind == KV_NONE)
			continue;
		struct in_sig *s = &p->sig[p->n_sig];
		if (!(s->name = strdup(inputs->a[i].name))) {
			rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
			goto fail;
		}
		p->n_sig++;
		s->kind = kv->kind;
		if (kv->kind == KV_TENSOR) {
			s->dtype = kv->t->dtype;
			s->rank = kv->t->rank > IR_MAX_RANK ? IR_MAX_RANK : kv->t->rank;
			memcpy(s->dims, kv->t->dims, sizeof(int64_t) * (size_t)s->rank);
		}
	}
	if ((rc = plan_graph(p, inputs, d)))
		goto fail;
	p->n = g->n_nodes;
	p->nv = g->n_values;
	p->pub = calloc((size_t)(p->n ? p->n : 1), sizeof(*p->pub));
	p->pn = calloc((size_t)(p->n ? p->n : 1), sizeof(*p->pn));
	p->pv = calloc(p->nv ? p->nv : 1, sizeof(*p->pv));
	p->hv = calloc(p->nv ? p->nv : 1, sizeof(*p->hv));
	if (!p->pub || !p->pn || !p->pv || !p->hv) {
		rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
		goto fail;
	}
	if ((rc = place_nodes(p, inputs, d)))
		goto fail;
	if (place_only) {
		p->sum.n_folded += p->n_prefolded;
		*out = p;
		return 0;
	}
	if ((rc = plan_layout(p, d)))
		goto fail;
	p->sum.n_folded += p->n_prefolded;
	if ((rc = plan_memory(p, d)) || (rc = plan_device(p, d)))
		goto fail;
	p->sum.plan_ms = exec_now_ms() - t0;
	*out = p;
	return 0;
fail:
	exec_plan_free(p);
	return rc;
}

int exec_plan_new(const struct ir_model *m, const struct exec_values *inputs, const struct exec_plan_opts *o,
		  struct exec_plan **out, struct ir_diag *d)
{
	return plan_new(m, inputs, o, false, out, d);
}

int exec_plan_place(const struct ir_model *m, const struct exec_values *inputs, struct exec_plan **out,
		    struct ir_diag *d)
{
	return plan_new(m, inputs, NULL, true, out, d);
}

bool exec_plan_has_device(char *why, size_t size)
{
	if (plan_device_kind())
		return true;
	snprintf(why, size, "ogsh was built without CUDA");
	return false;
}

/* ------------------------------------------------------------------------ */
/* Running                                                                   */
/* ------------------------------------------------------------------------ */

static int upload_inputs(struct exec_plan *p, const struct exec_values *inputs, struct ir_diag *d)
{
	struct ir_graph *g = p->m->graph;
	for (int i = 0; i < g->n_inputs; i++) {
		if (!p->inbuf[i])
			continue;
		const struct kern_value *kv = exec_values_find(inputs, g->inputs[i]->name);
		struct pval *pv = &p->pv[g->inputs[i]->idx];
		if (!kv || kv->kind != KV_TENSOR || kv->t->nbytes != pv->bytes)
			return ir_diag_err(d, IR_ERR, "input '%s' does not fit the plan", g->inputs[i]->name);
		const void *src = ir_tensor_data(kv->t);
		if (src && pv->bytes && p->dev->upload(p->dc, p->inbuf[i], src, pv->bytes, false, "uploading an input", d))
			return IR_ERR;
	}
	return 0;
}

/* A new host tensor holding the device value of pv (synchronises the stream). */
/* A channels-last value as downloaded ([N, H, W, C]) into t's NCHW order, in place. */
static int to_nchw(struct ir_tensor *t, const struct pval *pv)
{
	int64_t N = pv->dims[0], C = pv->dims[1], H = pv->dims[2], W = pv->dims[3], n = N * C * H * W;
	if (n <= 1)
		return 0;
	size_t es = (size_t)(pv->bytes / (uint64_t)n);
	unsigned char *b = ir_tensor_mutable(t), *tmp = malloc(pv->bytes);
	if (!tmp)
		return IR_ENOMEM;
	memcpy(tmp, b, pv->bytes);
	for (int64_t i = 0; i < N; i++)
		for (int64_t h = 0; h < H; h++)
			for (int64_t w = 0; w < W; w++)
				for (int64_t c = 0; c < C; c++)
					memcpy(b + (size_t)(((i * C + c) * H + h) * W + w) * es,
					       tmp + (size_t)(((i * H + h) * W + w) * C + c) * es, es);
	free(tmp);
	return 0;
}

static int download(struct exec_plan *p, const struct pval *pv, struct kern_value *out, struct ir_diag *d)
{
	struct ir_tensor *t = ir_tensor_new(pv->dtype, pv->rank, pv->dims, d);
	if (!t)
		return IR_ENOMEM;
	if (pv->bytes && (p->dev->download(p->dc, ir_tensor_mutable(t), pv->dev, pv->bytes, "downloading a value", d) ||
			  p->dev->sync(p->dc, "cudaStreamSynchronize", d))) {
		ir_tensor_unref(t);
		return IR_ERR;
	}
	if (pv->nhwc && pv->rank == 4 && pv->bytes && to_nchw(t, pv)) {
		ir_tensor_unref(t);
		return ir_diag_err(d, IR_ENOMEM, "out of memory (a channels-last value back to NCHW)");
	}
	memset(out, 0, sizeof(*out));
	out->kind = KV_TENSOR;
	out->t = t;
	return 0;
}

/* The host value of v for a CPU node or the results (downloaded and kept in hv when on the GPU). */
static const struct kern_value *host_value(struct exec_plan *p, const struct exec_values *inputs,
					   const struct ir_value *v, struct ir_diag *d)
{
	struct pval *pv = &p->pv[v->idx];
	static const struct kern_value none;
	switch (pv->kind) {
	case VK_CONST:
		return &pv->host;
	case VK_INPUT: {
		const struct kern_value *kv = exec_values_find(inputs, v->name);
		return kv ? kv : &none;
	}
	case VK_ACT:
		if (p->hv[v->idx].kind != KV_NONE || pv->cpu_made)
			return &p->hv[v->idx];
		if (!pv->on_dev)
			return &none;
		if (download(p, pv, &p->hv[v->idx], d))
			return NULL;
		return &p->hv[v->idx];
	default:
		return &none;
	}
}

/* Runs a CPU node: downloads its inputs (and the outer values its
 * subgraphs read), runs it, uploads what GPU nodes read. */
static int run_cpu_node(struct exec_plan *p, int pos, const struct exec_values *inputs, struct ir_diag *d)
{
	struct ir_node *n = p->pn[pos].node;
	int nin = n->n_inputs, nout = n->n_outputs, nimp = n->n_implicit, rc = 0;
	struct kern_value *in = calloc((size_t)(nin + nimp ? nin + nimp : 1), sizeof(*in));
	struct kern_value *out = calloc((size_t)(nout ? nout : 1), sizeof(*out));
	if (!in || !out) {
		rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
		goto out;
	}
	for (int i = 0; i < nin + nimp; i++) {
		struct ir_value *v = i < nin ? n->inputs[i] : n->implicit[i - nin];
		if (!v || v->graph != p->m->graph)
			continue;
		const struct kern_value *kv = host_value(p, inputs, v, d);
		if (!kv) {
			rc = IR_ERR;
			goto out;
		}
		in[i] = *kv;   /* borrowed */
	}
	if ((rc = cpu_node(p, n, in, in + nin, out, d)))
		goto out;
	for (int i = 0; i < nout; i++) {
		struct ir_value *v = n->outputs[i];
		if (!v) {
			kern_value_clear(&out[i]);
			continue;
		}
		struct pval *pv = &p->pv[v->idx];
		kern_value_clear(&p->hv[v->idx]);
		p->hv[v->idx] = out[i];
		memset(&out[i], 0, sizeof(out[i]));
		if (!pv->on_dev)
			continue;
		const struct ir_tensor *t = p->hv[v->idx].kind == KV_TENSOR ? p->hv[v->idx].t : NULL;
		char b1[256], b2[256];
		if (!t || t->dtype != pv->dtype || t->rank != pv->rank ||
		    (t->rank && memcmp(t->dims, pv->dims, sizeof(int64_t) * (size_t)t->rank))) {
			rc = ir_diag_err(d, IR_ERR, "output '%s' is %s %s, the plan expected %s %s", v->name,
					 t ? ir_dtype_name(t->dtype) : "not a tensor", t ? ir_dims_str(t->rank, t->dims, b1, sizeof(b1)) : "",
					 ir_dtype_name(pv->dtype), ir_dims_str(pv->rank, pv->dims, b2, sizeof(b2)));
			goto out;
		}
		const void *src = ir_tensor_data(t);
		if (src && pv->bytes && p->dev->upload(p->dc, pv->dev, src, pv->bytes, false, "uploading a value", d)) {
			rc = IR_ERR;
			goto out;
		}
	}
	/* host copies no later CPU node reads */
	for (int i = 0; i < nin + nimp; i++) {
		struct ir_value *v = i < nin ? n->inputs[i] : n->implicit[i - nin];
		if (v && v->graph == p->m->graph && p->pv[v->idx].kind == VK_ACT && p->pv[v->idx].last_host == pos)
			kern_value_clear(&p->hv[v->idx]);
	}
out:
	if (out)
		for (int i = 0; i < nout; i++)
			kern_value_clear(&out[i]);
	free(in);
	free(out);
	return rc;
}

static int run_gpu_node(struct exec_plan *p, int pos, struct ir_diag *d)
{
	struct pnode *q = &p->pn[pos];
	if (q->view)
		return 0;
	int rc = p->dev->launch(p->dc, q->state, q->ws_bytes ? p->ws : NULL, d);
	/* kernels that choose their variant when they run (attention, softmax,
	 * the vector binary ops...) name it then: plan and profile show that */
	const char *impl = rc ? NULL : p->dev->impl(q->state);
	if (impl && impl[0] && strcmp(p->pub[pos].impl, impl))
		snprintf(p->pub[pos].impl, sizeof(p->pub[pos].impl), "%s", impl);
	return rc;
}

/* Runs node `pos` (GPU: launched only). Errors name the node. */
static int run_one(struct exec_plan *p, int pos, const struct exec_values *inputs, struct ir_diag *d)
{
	int rc = 0;
	switch (p->pub[pos].place) {
	case EXEC_FOLDED:
		return 0;
	case EXEC_ON_GPU:
		rc = run_gpu_node(p, pos, d);
		break;
	case EXEC_ON_CPU:
		rc = run_cpu_node(p, pos, inputs, d);
		break;
	}
	if (rc) {
		char label[300];
		exec_node_label(p->pn[pos].node, label, sizeof(label));
		ir_diag_prefix(d, "%s", label);
	}
	return rc;
}

/* Every node in order, node by node. */
static int run_nodes(struct exec_plan *p, const struct exec_values *inputs, struct ir_diag *d)
{
	for (int pos = 0; pos < p->n; pos++) {
		if (ir_interrupted) {
			p->dev->sync_quiet(p->dc);
			return ir_diag_err(d, IR_EINTR, "stopped after %d of %d nodes", pos, p->n);
		}
		int rc = run_one(p, pos, inputs, d);
		if (rc) {
			p->dev->sync_quiet(p->dc);
			p->dev->clear_error(p->dc);
			return rc;
		}
	}
	return 0;
}

/* Captures the GPU nodes' launches into a graph (every node on the GPU). */
static void try_capture(struct exec_plan *p)
{
	if (p->graph_tried || p->o.no_graph || p->sum.n_cpu || !p->sum.n_gpu)
		return;
	p->graph_tried = true;
	if (p->dev->capture_begin(p->dc, p->sum.graph_why, sizeof(p->sum.graph_why)))
		return;
	struct ir_diag d;
	ir_diag_init(&d);
	int rc = 0;
	for (int pos = 0; pos < p->n && !rc; pos++)
		if (p->pub[pos].place == EXEC_ON_GPU)
			rc = run_one(p, pos, NULL, &d);
	rc = p->dev->capture_end(p->dc, rc, d.error, p->sum.graph_why, sizeof(p->sum.graph_why));
	ir_diag_clear(&d);
	if (rc)
		return;
	p->graph_ok = true;
	p->sum.graph = true;
	p->sum.graph_why[0] = 0;
}

/* One run on the device: graph replay when there is one, else node by node. */
static int launch(struct exec_plan *p, const struct exec_values *inputs, bool use_graph, struct ir_diag *d)
{
	if (use_graph && p->graph_ok)
		return p->dev->replay(p->dc, d);
	return run_nodes(p, inputs, d);
}

static int fits_or_err(struct exec_plan *p, const struct exec_values *inputs, struct ir_diag *d)
{
	if (!p)
		return no_plan(d);
	if (!exec_plan_fits(p, inputs))
		return ir_diag_err(d, IR_ERR, "the inputs' shapes are not the ones the plan was made for");
	return 0;
}

static int add_value(struct exec_values *vs, const char *name, const struct kern_value *v, struct ir_diag *d)
{
	struct kern_value c;
	if (kern_value_copy(&c, v))
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	if (exec_values_add(vs, name, &c)) {
		kern_value_clear(&c);
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	return 0;
}

int exec_plan_run(struct exec_plan *p, const struct exec_values *inputs, struct exec_values *outputs,
		  struct exec_values *all, struct exec_report *rep, struct ir_diag *d)
{
	int rc = fits_or_err(p, inputs, d);
	if (rc)
		return rc;
	double t0 = exec_now_ms();
	clear_host(p);
	if ((rc = upload_inputs(p, inputs, d)) || (rc = launch(p, inputs, true, d)))
		goto out;
	if ((rc = p->dev->sync(p->dc, "running the plan", d)))
		goto out;
	double ms = exec_now_ms() - t0;
	struct ir_graph *g = p->m->graph;
	for (int i = 0; i < g->n_outputs && !rc; i++) {
		const struct kern_value *kv = host_value(p, inputs, g->outputs[i], d);
		rc = kv ? add_value(outputs, g->outputs[i]->name, kv, d) : IR_ERR;
	}
	if (p->o.keep_all && all) {
		for (struct ir_node *n = g->first; n && !rc; n = n->next)
			for (int i = 0; i < n->n_outputs && !rc; i++) {
				if (!n->outputs[i])
					continue;
				const struct kern_value *kv = host_value(p, inputs, n->outputs[i], d);
				rc = kv ? add_value(all, n->outputs[i]->name, kv, d) : IR_ERR;
			}
	}
	if (rep) {
		exec_report_clear(rep);
		rep->ms = ms;
		rep->n_nodes = p->n;
		rep->peak_bytes = p->sum.arena_bytes;
		rep->total_bytes = p->sum.naive_bytes;
	}
	if (!rc)
		try_capture(p);
out:
	if (!rc && p->o.keep_all && !all)
		clear_downloads(p);
	else
		clear_host(p);
	return rc;
}

int exec_plan_value(struct exec_plan *p, const char *name, struct exec_dev_tensor *out, struct ir_diag *d)
{
	memset(out, 0, sizeof(*out));
	if (!p)
		return no_plan(d);
	if (!p->o.keep_all)
		return ir_diag_err(d, IR_ERR, "the plan was not made to keep every value (keep_all)");
	const struct ir_value *v = ir_value_find(p->m->graph, name);
	if (!v || v->idx >= p->nv)
		return 1;
	const struct pval *pv = &p->pv[v->idx];
	const struct ir_tensor *ht = NULL;
	if (pv->kind == VK_ACT && pv->on_dev && pv->typed) {
		out->dev = pv->dev;
		out->dtype = pv->dtype;
		out->rank = pv->rank;
		out->numel = 1;
		for (int i = 0; i < pv->rank; i++) {
			out->dims[i] = pv->dims[i];
			out->numel *= (uint64_t)pv->dims[i];
		}
		out->nhwc = pv->nhwc && pv->rank == 4;
		if (!out->dev && out->numel)
			return 1;
		return 0;
	}
	if (pv->kind == VK_CONST && pv->host.kind == KV_TENSOR)
		ht = pv->host.t;
	else if (pv->kind == VK_ACT && pv->cpu_made && p->hv[v->idx].kind == KV_TENSOR)
		ht = p->hv[v->idx].t;
	if (!ht)
		return 1;
	out->host = ht;
	out->dtype = ht->dtype;
	out->rank = ht->rank;
	for (int i = 0; i < ht->rank; i++)
		out->dims[i] = ht->dims[i];
	out->numel = ht->numel;
	return 0;
}

int exec_plan_calib_observe(struct exec_plan *p, const struct exec_dev_tensor *x, struct ir_calib_tensor *t,
			    int n_chan, struct ir_diag *d)
{
	if (!p)
		return no_plan(d);
	if (!x->dev && x->numel)
		return ir_diag_err(d, IR_ERR, "calibration of '%s': the value is not on the device",
				   t->name ? t->name : "?");
	if (x->rank < 0 || x->rank > IR_MAX_RANK)
		return ir_diag_err(d, IR_ERR, "calibration of '%s': rank %d", t->name ? t->name : "?", x->rank);
	return p->dev->calib_observe(p->dc, x, t, n_chan, d);
}

/* ------------------------------------------------------------------------ */
/* Timing                                                                    */
/* ------------------------------------------------------------------------ */

/* Downloads the graph outputs that live on the device into host buffers (for --with-copies). */
static int download_outputs(struct exec_plan *p, void **bufs, struct ir_diag *d)
{
	struct ir_graph *g = p->m->graph;
	for (int i = 0; i < g->n_outputs; i++) {
		struct pval *pv = &p->pv[g->outputs[i]->idx];
		if (bufs[i] && pv->bytes && p->dev->download(p->dc, bufs[i], pv->dev, pv->bytes, "downloading an output", d))
			return IR_ERR;
	}
	return 0;
}

int exec_plan_time(struct exec_plan *p, const struct exec_values *inputs, const struct exec_time_opts *o,
		   struct exec_time_result *r, struct ir_diag *d)
{
	memset(r, 0, sizeof(*r));
	int rc = fits_or_err(p, inputs, d);
	if (rc)
		return rc;
	int iters = o && o->iters > 0 ? o->iters : 100, warmup = o && o->warmup > 0 ? o->warmup : 10;
	if (o && o->warmup < 0)
		warmup = 0;   /* negative: none */
	bool copies = o && o->with_copies, use_graph = !(o && o->no_graph);
	struct ir_graph *g = p->m->graph;
	double *ms = malloc(sizeof(double) * (size_t)iters);
	void **obuf = calloc((size_t)(g->n_outputs ? g->n_outputs : 1), sizeof(void *));
	void *e0 = NULL, *e1 = NULL;
	if (!ms || !obuf) {
		rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
		goto out;
	}
	for (int i = 0; copies && i < g->n_outputs; i++) {
		struct pval *pv = &p->pv[g->outputs[i]->idx];
		if (pv->on_dev && pv->kind == VK_ACT && !pv->cpu_made && pv->bytes &&
		    !(obuf[i] = malloc(pv->bytes))) {
			rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
			goto out;
		}
	}
	if ((rc = p->dev->event_new(p->dc, &e0, d)) || (rc = p->dev->event_new(p->dc, &e1, d)))
		goto out;
	/* one plain run first: it captures the graph */
	if (!p->graph_tried && use_graph) {
		struct exec_values tmp = { 0 };
		struct exec_plan_opts keep = p->o;
		p->o.keep_all = false;
		rc = exec_plan_run(p, inputs, &tmp, NULL, NULL, d);
		p->o.keep_all = keep.keep_all;
		exec_values_clear(&tmp);
		if (rc)
			goto out;
	}
	r->graph = use_graph && p->graph_ok;
	if (!copies && (rc = upload_inputs(p, inputs, d)))
		goto out;
	for (int it = 0; it < warmup + iters; it++) {
		if (ir_interrupted) {
			rc = ir_diag_err(d, IR_EINTR, "stopped after %d of %d runs", it, warmup + iters);
			goto out;
		}
		clear_host(p);
		if ((rc = p->dev->event_record(p->dc, e0, d)))
			goto out;
		if (copies && (rc = upload_inputs(p, inputs, d)))
			goto out;
		if ((rc = launch(p, inputs, use_graph, d)))
			goto out;
		if (copies && (rc = download_outputs(p, obuf, d)))
			goto out;
		if ((rc = p->dev->event_record(p->dc, e1, d)) || (rc = p->dev->event_wait(p->dc, e1, "running the plan", d)))
			goto out;
		double t = 0;
		if ((rc = p->dev->event_ms(p->dc, e0, e1, &t, d)))
			goto out;
		if (it >= warmup)
			ms[it - warmup] = t;
	}
	exec_time_summary(ms, iters, r);
out:
	p->dev->sync_quiet(p->dc);
	clear_host(p);
	if (e0)
		p->dev->event_free(p->dc, e0);
	if (e1)
		p->dev->event_free(p->dc, e1);
	for (int i = 0; obuf && i < g->n_outputs; i++)
		free(obuf[i]);
	free(obuf);
	free(ms);
	return rc;
}

int exec_plan_profile(struct exec_plan *p, const struct exec_values *inputs, int iters, double *node_ms,
		      struct ir_diag *d)
{
	int rc = fits_or_err(p, inputs, d);
	if (rc)
		return rc;
	if (iters <= 0)
		iters = 20;
	int n = p->n;
	double *t = calloc((size_t)(n ? n : 1) * (size_t)iters, sizeof(double));
	double *col = malloc(sizeof(double) * (size_t)iters);
	/* a start and a stop event per GPU node; one synchronisation per run */
	void **ev = calloc(2 * (size_t)n + 1, sizeof(void *));
	int n_ev = 0;
	if (!t || !col || !ev) {
		rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
		goto out;
	}
	for (n_ev = 0; n_ev < 2 * n; n_ev++)
		if ((rc = p->dev->event_new(p->dc, &ev[n_ev], d)))
			goto out;
	if ((rc = upload_inputs(p, inputs, d)))
		goto out;
	/* warm-up: two plain runs */
	for (int w = 0; w < 2; w++) {
		clear_host(p);
		if ((rc = run_nodes(p, inputs, d)) ||
		    (rc = p->dev->sync(p->dc, "running the plan", d)))
			goto out;
	}
	for (int it = 0; it < iters; it++) {
		if (ir_interrupted) {
			rc = ir_diag_err(d, IR_EINTR, "stopped after %d of %d runs", it, iters);
			goto out;
		}
		clear_host(p);
		for (int pos = 0; pos < n; pos++) {
			double *cell = &t[(size_t)pos * (size_t)iters + (size_t)it];
			if (p->pub[pos].place == EXEC_ON_CPU) {
				/* host clock, copies included; the GPU work before it is not counted */
				if ((rc = p->dev->sync(p->dc, "running the plan", d)))
					goto out;
				double h0 = exec_now_ms();
				if ((rc = run_one(p, pos, inputs, d)) ||
				    (rc = p->dev->sync(p->dc, "running the plan", d)))
					goto out;
				*cell = exec_now_ms() - h0;
				continue;
			}
			if (p->pub[pos].place != EXEC_ON_GPU)
				continue;
			if ((rc = p->dev->event_record(p->dc, ev[2 * pos], d)) || (rc = run_one(p, pos, inputs, d)) ||
			    (rc = p->dev->event_record(p->dc, ev[2 * pos + 1], d)))
				goto out;
		}
		if ((rc = p->dev->sync(p->dc, "running the plan", d)))
			goto out;
		for (int pos = 0; pos < n; pos++) {
			if (p->pub[pos].place != EXEC_ON_GPU)
				continue;
			double f = 0;
			if ((rc = p->dev->event_ms(p->dc, ev[2 * pos], ev[2 * pos + 1], &f, d)))
				goto out;
			t[(size_t)pos * (size_t)iters + (size_t)it] = f;
		}
	}
	for (int pos = 0; pos < n; pos++) {
		memcpy(col, &t[(size_t)pos * (size_t)iters], sizeof(double) * (size_t)iters);
		node_ms[pos] = exec_median(col, iters);
	}
out:
	p->dev->sync_quiet(p->dc);
	p->dev->clear_error(p->dc);
	clear_host(p);
	for (int i = 0; i < n_ev; i++)
		p->dev->event_free(p->dc, ev[i]);
	free(ev);
	free(col);
	free(t);
	return rc;
}

