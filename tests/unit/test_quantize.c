/*
 * test_quantize.c - unit tests of the quantize pass: models built here, a
 * calibration made by running them on the CPU reference with random inputs
 * (exec_opts.on_value streams every float output into ir_calib_observe),
 * then pass_run_calib and checks of the structure (int8 initializers read
 * by DequantizeLinear with the channel axis, Q/DQ on inputs only, the
 * residual Add, one shared scale around a Concat, MaxPool propagation,
 * exclude=, the channel rule, the fp8 and int4 opset raises, int4 blocks
 * and packing, int4 on a Conv refused, AWQ) and of the numbers (the
 * quantized stage run by exec_run against the float one).
 */
#include "exec/exec.h"
#include "ir/ir.h"
#include "passes/pass.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, checks;
#define CHECK(c) do { checks++; if (!(c)) { failures++; fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); } } while (0)
#define CHECKF(c, ...) do { checks++; if (!(c)) { failures++; fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #c); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static const char *save_dir;   /* argv[1]: where the models and their quantized stages are saved */

/* Saves m as save_dir/name (when a folder was given) for tests/passes/test_quantize.py. */
static void save(struct ir_model *m, const char *name)
{
	if (!save_dir || !m)
		return;
	/* declared types for the graph outputs (onnx.checker wants them) */
	CHECK(ir_infer(m, NULL) == 0);
	for (int i = 0; i < m->graph->n_outputs; i++) {
		struct ir_value *v = m->graph->outputs[i];
		if (v->type.kind == IR_TYPE_NONE && v->inferred.kind == IR_TYPE_TENSOR) {
			CHECK(ir_type_copy(&v->type, &v->inferred) == 0);
			v->has_type_proto = true;
		}
	}
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", save_dir, name);
	struct ir_save_opts so = { .force = true, .external = IR_EXT_NONE };
	struct ir_diag d;
	ir_diag_init(&d);
	CHECKF(ir_model_save(m, path, &so, &d) == 0, "%s", d.error);
	ir_diag_clear(&d);
}

/* ------------------------------------------------------------------------ */
/* Building models                                                           */
/* ------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static double urand(void)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)(rng_state >> 11) / 9007199254740992.0;
}

static double nrand(void)
{
	double u = urand(), v = urand();
	if (u < 1e-300)
		u = 1e-300;
	return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

static struct ir_model *new_model(int64_t opset)
{
	struct ir_model *m = ir_model_new();
	m->graph = ir_graph_new("g");
	m->ir_version = 8;
	m->has_ir_version = true;
	m->opsets = calloc(1, sizeof(*m->opsets));
	m->opsets[0].domain = strdup("");
	m->opsets[0].version = opset;
	m->opsets[0].has_version = true;
	m->n_opsets = 1;
	return m;
}

static struct ir_value *input(struct ir_model *m, const char *name, int rank, const int64_t *dims)
{
	struct ir_value *v = ir_value_new(m->graph, name, NULL);
	struct ir_dim d[IR_MAX_RANK];
	for (int i = 0; i < rank; i++)
		d[i] = (struct ir_dim){ .kind = IR_DIM_VALUE, .value = dims[i] };
	CHECK(ir_type_set_tensor(&v->type, IR_FLOAT, rank, d) == 0);
	v->has_type_proto = true;
	CHECK(ir_graph_add_input(m->graph, v) == 0);
	return v;
}

/* A float initializer with normal values times `scale` (per-row scales when rows != NULL: row r of axis 0). */
static struct ir_value *weight(struct ir_model *m, const char *name, int rank, const int64_t *dims, double scale)
{
	struct ir_tensor *t = ir_tensor_new(IR_FLOAT, rank, dims, NULL);
	float *p = ir_tensor_mutable(t);
	uint64_t per = t->numel / (uint64_t)dims[0];
	for (uint64_t i = 0; i < t->numel; i++) {
		/* channels of different sizes: per-channel scales matter */
		double ch = 1.0 + (double)((i / per) % 5);
		p[i] = (float)(nrand() * scale * ch);
	}
	struct ir_value *v = ir_value_new(m->graph, name, NULL);
	CHECK(ir_value_set_init(v, t, NULL) == 0);
	ir_tensor_unref(t);
	return v;
}

static struct ir_value *ints_init(struct ir_model *m, const char *name, int n, const int64_t *vals)
{
	int64_t dims[1] = { n };
	struct ir_tensor *t = ir_tensor_new(IR_INT64, 1, dims, NULL);
	memcpy(ir_tensor_mutable(t), vals, sizeof(int64_t) * (size_t)n);
	struct ir_value *v = ir_value_new(m->graph, name, NULL);
	CHECK(ir_value_set_init(v, t, NULL) == 0);
	ir_tensor_unref(t);
	return v;
}

/* A node `name` of op with inputs; its output is named `out`. */
static struct ir_node *op(struct ir_model *m, const char *opname, const char *name, const char *out,
			  struct ir_value *a, struct ir_value *b, struct ir_value *c)
{
	struct ir_value *in[3] = { a, b, c };
	int n = c ? 3 : b ? 2 : a ? 1 : 0;
	struct ir_node *nd = ir_node_new(m->graph, opname, NULL, name, n, 1, NULL);
	CHECK(nd != NULL);
	for (int i = 0; i < n; i++)
		CHECK(ir_node_set_input(nd, i, in[i]) == 0);
	struct ir_value *o = ir_value_new(m->graph, out, NULL);
	CHECK(ir_node_set_output(nd, 0, o, NULL) == 0);
	return nd;
}

static void attr_ints(struct ir_node *n, const char *name, int k, const int64_t *v)
{
	struct ir_attr a = { 0 };
	a.name = strdup(name);
	a.type = IR_ATTR_INTS;
	a.has_type = true;
	a.n = (size_t)k;
	a.ints = malloc(sizeof(int64_t) * (size_t)k);
	memcpy(a.ints, v, sizeof(int64_t) * (size_t)k);
	CHECK(ir_node_set_attr(n, &a, NULL) == 0);
}

static void attr_int(struct ir_node *n, const char *name, int64_t v)
{
	struct ir_attr a = { 0 };
	a.name = strdup(name);
	a.type = IR_ATTR_INT;
	a.has_type = true;
	a.i = v;
	CHECK(ir_node_set_attr(n, &a, NULL) == 0);
}

static struct ir_value *out0(struct ir_node *n)
{
	return n->outputs[0];
}

static struct ir_node *conv(struct ir_model *m, const char *name, struct ir_value *x, int cout, int cin, int k)
{
	char wn[64], on[64];
	snprintf(wn, sizeof(wn), "%s_W", name);
	snprintf(on, sizeof(on), "%s_out", name);
	int64_t wd[4] = { cout, cin, k, k };
	struct ir_node *n = op(m, "Conv", name, on, x, weight(m, wn, 4, wd, 1.0 / sqrt((double)(cin * k * k))), NULL);
	int64_t p = k / 2, pads[4] = { p, p, p, p };
	attr_ints(n, "pads", 4, pads);
	return n;
}

/*
 * The test CNN:
 *   x[1,3,16,16] -> conv1 (3 -> 16) -> relu1 -> pool (MaxPool 2) -> p1
 *   p1 -> conv2 (16 -> 32) -> relu2 -> r2 -> conv3 (32 -> 32) -> add3 (+ r2) -> relu3 -> r3
 *   p1 -> conv4 (16 -> 16, 1x1) -> relu4 -> r4
 *   concat(r3, r4) -> conv5 (48 -> 32, 1x1) -> relu5 -> gap -> flatten -> gemm (32 -> 16) -> y
 */
static struct ir_model *cnn(void)
{
	struct ir_model *m = new_model(17);
	int64_t xd[4] = { 1, 3, 16, 16 };
	struct ir_value *x = input(m, "x", 4, xd);
	struct ir_value *r1 = out0(op(m, "Relu", "relu1", "r1", out0(conv(m, "conv1", x, 16, 3, 3)), NULL, NULL));
	struct ir_node *pool = op(m, "MaxPool", "pool", "p1", r1, NULL, NULL);
	int64_t k2[2] = { 2, 2 };
	attr_ints(pool, "kernel_shape", 2, k2);
	attr_ints(pool, "strides", 2, k2);
	struct ir_value *p1 = out0(pool);
	struct ir_value *r2 = out0(op(m, "Relu", "relu2", "r2", out0(conv(m, "conv2", p1, 32, 16, 3)), NULL, NULL));
	struct ir_value *s3 = out0(op(m, "Add", "add3", "s3", out0(conv(m, "conv3", r2, 32, 32, 3)), r2, NULL));
	struct ir_value *r3 = out0(op(m, "Relu", "relu3", "r3", s3, NULL, NULL));
	struct ir_value *r4 = out0(op(m, "Relu", "relu4", "r4", out0(conv(m, "conv4", p1, 16, 16, 1)), NULL, NULL));
	struct ir_node *cat = op(m, "Concat", "cat", "cat_out", r3, r4, NULL);
	attr_int(cat, "axis", 1);
	struct ir_value *r5 = out0(op(m, "Relu", "relu5", "r5", out0(conv(m, "conv5", out0(cat), 32, 48, 1)), NULL, NULL));
	struct ir_value *gp = out0(op(m, "GlobalAveragePool", "gap", "gp", r5, NULL, NULL));
	struct ir_value *f = out0(op(m, "Flatten", "flatten", "f", gp, NULL, NULL));
	int64_t gd[2] = { 16, 32 }, bd[1] = { 16 };
	struct ir_node *gm = op(m, "Gemm", "gemm", "y", f, weight(m, "fc_W", 2, gd, 0.3), weight(m, "fc_b", 1, bd, 0.1));
	attr_int(gm, "transB", 1);
	CHECK(ir_graph_add_output(m->graph, out0(gm)) == 0);
	struct ir_diag d;
	ir_diag_init(&d);
	CHECKF(ir_model_verify(m, &d) == 0, "%s", d.error);
	ir_diag_clear(&d);
	return m;
}

/* ------------------------------------------------------------------------ */
/* Running and calibrating                                                   */
/* ------------------------------------------------------------------------ */

/* Random inputs for every graph input (normal, times `scale`; channel c of the last axis times chan[c] when given). */
static void random_inputs(const struct ir_model *m, struct exec_values *in, const double *chan, int n_chan)
{
	struct ir_graph *g = m->graph;
	for (int i = 0; i < g->n_inputs; i++) {
		struct ir_value *v = g->inputs[i];
		if (v->init)
			continue;
		int64_t dims[IR_MAX_RANK];
		for (int k = 0; k < v->type.rank; k++)   /* a symbolic dim (batch) is 1 */
			dims[k] = v->type.dims[k].kind == IR_DIM_VALUE ? v->type.dims[k].value : 1;
		int dt = v->type.elem == IR_FLOAT16 ? IR_FLOAT16 : IR_FLOAT;
		struct ir_tensor *t = ir_tensor_new(dt, v->type.rank, dims, NULL);
		void *p = ir_tensor_mutable(t);
		for (uint64_t e = 0; e < t->numel; e++) {
			float x = (float)(nrand() * (chan ? chan[e % (uint64_t)n_chan] : 1.0));
			if (dt == IR_FLOAT16)
				((uint16_t *)p)[e] = ir_f32_to_f16(x);
			else
				((float *)p)[e] = x;
		}
		CHECK(exec_values_add_tensor(in, v->name, t) == 0);
		ir_tensor_unref(t);
	}
}

struct calib_arg {
	struct ir_calib *cal;
	int chan_for_matmul;    /* keep per-channel sums for MatMul inputs */
	const struct ir_model *m;
};

static bool read_by_matmul(const struct ir_value *v)
{
	for (size_t u = 0; u < v->n_uses; u++)
		if (v->uses[u].node->op == IR_OP_MatMul && v->uses[u].slot == 0)
			return true;
	return false;
}

static int observe(struct calib_arg *A, const char *name, const struct ir_value *v, const struct ir_tensor *t)
{
	if (!t || (t->dtype != IR_FLOAT && t->dtype != IR_FLOAT16))
		return 0;
	struct ir_calib_tensor *ct = ir_calib_add_tensor(A->cal, name);
	int nc = 0;
	if (A->chan_for_matmul && v && read_by_matmul(v) && t->rank >= 1)
		nc = (int)t->dims[t->rank - 1];
	if (t->dtype == IR_FLOAT)
		return ir_calib_observe(ct, ir_tensor_data(t), t->numel, nc, NULL);
	float *f = malloc(sizeof(float) * (t->numel ? t->numel : 1));
	for (uint64_t i = 0; i < t->numel; i++)
		f[i] = (float)ir_tensor_get_f64(t, i);
	int rc = ir_calib_observe(ct, f, t->numel, nc, NULL);
	free(f);
	return rc;
}

static int on_value(void *arg, const struct ir_value *v, const struct kern_value *kv)
{
	struct calib_arg *A = arg;
	if (kv->kind != KV_TENSOR)
		return 0;
	return observe(A, v->name, v, kv->t);
}

/* Calibrates m over `batches` random batches. */
static void calibrate(const struct ir_model *m, struct ir_calib *cal, int batches, bool chan, const double *scale,
		      int n_scale)
{
	ir_calib_init(cal);
	struct calib_arg A = { .cal = cal, .chan_for_matmul = chan, .m = m };
	struct exec_opts o = { 0 };
	o.on_value = on_value;
	o.on_value_arg = &A;
	for (int b = 0; b < batches; b++) {
		struct exec_values in = { 0 }, out = { 0 };
		random_inputs(m, &in, scale, n_scale);
		for (int i = 0; i < in.n; i++)
			CHECK(observe(&A, in.a[i].name, ir_value_find(m->graph, in.a[i].name), in.a[i].v.t) == 0);
		struct ir_diag d;
		ir_diag_init(&d);
		CHECKF(exec_run(m, &in, &o, &out, NULL, NULL, &d) == 0, "%s", d.error);
		ir_diag_clear(&d);
		exec_values_clear(&in);
		exec_values_clear(&out);
	}
	cal->samples = (uint64_t)batches;
	cal->batch = 1;
}

/* SNR in dB of output 0 of q against the float model f over `n` random batches. */
static double snr_db(const struct ir_model *f, const struct ir_model *q, int n, const double *scale, int n_scale)
{
	double sig = 0, err = 0;
	for (int b = 0; b < n; b++) {
		struct exec_values in = { 0 }, o1 = { 0 }, o2 = { 0 };
		random_inputs(f, &in, scale, n_scale);
		struct ir_diag d;
		ir_diag_init(&d);
		CHECKF(exec_run(f, &in, NULL, &o1, NULL, NULL, &d) == 0, "%s", d.error);
		CHECKF(exec_run(q, &in, NULL, &o2, NULL, NULL, &d) == 0, "%s", d.error);
		ir_diag_clear(&d);
		if (o1.n >= 1 && o2.n >= 1 && o1.a[0].v.t && o2.a[0].v.t && o1.a[0].v.t->numel == o2.a[0].v.t->numel) {
			const struct ir_tensor *a = o1.a[0].v.t, *c = o2.a[0].v.t;
			for (uint64_t i = 0; i < a->numel; i++) {
				double x = ir_tensor_get_f64(a, i), y = ir_tensor_get_f64(c, i);
				sig += x * x;
				err += (x - y) * (x - y);
			}
		}
		exec_values_clear(&in);
		exec_values_clear(&o1);
		exec_values_clear(&o2);
	}
	return err > 0 ? 10 * log10(sig / err) : 999;
}

/* Runs quantize with options "k=v" on a clone of m; NULL on failure (the error in *err when given). */
static struct ir_model *quantize(const struct ir_model *m, const struct ir_calib *cal, const char *const *opts,
				 struct pass_report *rep, char *err, size_t size)
{
	const struct pass *p = pass_find("quantize");
	CHECK(p != NULL);
	struct pass_arg args[16];
	char buf[16][256];
	int n = 0;
	for (; opts && opts[n]; n++) {
		snprintf(buf[n], sizeof(buf[n]), "%s", opts[n]);
		char *eq = strchr(buf[n], '=');
		*eq = 0;
		args[n].name = buf[n];
		args[n].value = eq + 1;
	}
	struct ir_model *c = ir_model_clone(m);
	struct ir_diag d;
	ir_diag_init(&d);
	int rc = pass_run_calib(c, p, args, n, cal, rep, &d);
	if (err)
		snprintf(err, size, "%s", d.error ? d.error : "");
	if (rc && !err)
		fprintf(stderr, "quantize failed: %s\n", d.error);
	ir_diag_clear(&d);
	if (rc) {
		ir_model_free(c);
		return NULL;
	}
	ir_diag_init(&d);
	CHECKF(ir_model_verify(c, &d) == 0, "%s", d.error);
	ir_diag_clear(&d);
	return c;
}

/* Whether some report message of `kind` about node `node` (NULL: any) holds `text`. */
static bool has_msg(const struct pass_report *r, int kind, const char *node, const char *text)
{
	for (int i = 0; i < r->n_msgs; i++)
		if ((int)r->msgs[i].kind == kind && (!node || (r->msgs[i].node && !strcmp(r->msgs[i].node, node))) &&
		    strstr(r->msgs[i].text, text))
			return true;
	return false;
}

static void dump_report(const struct pass_report *r)
{
	for (int i = 0; i < r->n_msgs; i++)
		fprintf(stderr, "  [%d] %s: %s\n", r->msgs[i].kind, r->msgs[i].node ? r->msgs[i].node : "-", r->msgs[i].text);
}

static struct ir_node *node_named(const struct ir_model *m, const char *name)
{
	int count = 0;
	return ir_node_by_name(m->graph, name, &count);
}

/* The DequantizeLinear feeding input `slot` of n, or NULL. */
static struct ir_node *dq_of(const struct ir_node *n, int slot)
{
	if (!n || slot >= n->n_inputs || !n->inputs[slot])
		return NULL;
	struct ir_node *p = n->inputs[slot]->producer;
	return p && p->op == IR_OP_DequantizeLinear ? p : NULL;
}

/* The QuantizeLinear before a DequantizeLinear, or NULL. */
static struct ir_node *q_of(const struct ir_node *dq)
{
	struct ir_node *p = dq && dq->inputs[0] ? dq->inputs[0]->producer : NULL;
	return p && p->op == IR_OP_QuantizeLinear ? p : NULL;
}

static double scale_of(const struct ir_node *qdq)
{
	const struct ir_tensor *t = ir_value_const(qdq->inputs[1]);
	return t ? ir_tensor_get_f64(t, 0) : -1;
}

static int64_t opset_of(const struct ir_model *m)
{
	return ir_model_opset(m, "");
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */
/* ------------------------------------------------------------------------ */

static void test_int8_cnn(void)
{
	struct ir_model *m = cnn();
	struct ir_calib cal;
	calibrate(m, &cal, 16, false, NULL, 0);
	struct pass_report rep;
	const char *opts[] = { "method=max", NULL };
	struct ir_model *q = quantize(m, &cal, opts, &rep, NULL, 0);
	CHECK(q != NULL);
	if (!q)
		goto out;
	if (getenv("QDUMP"))
		dump_report(&rep);
	save(m, "cnn.onnx");
	save(q, "cnn_int8.onnx");
	/* the channel rule */
	CHECK(has_msg(&rep, PASS_REJECTED, "conv1", "3 input channels, below 16: kept float32"));
	CHECK(!dq_of(node_named(q, "conv1"), 0) && !dq_of(node_named(q, "conv1"), 1));
	CHECK(opset_of(q) == 17);   /* 13 or later already */
	CHECK(!has_msg(&rep, PASS_NOTE, NULL, "raised the model's ONNX opset"));
	/* weights: int8 initializers, per channel, read by a DequantizeLinear */
	const char *qn[] = { "conv2", "conv3", "conv4", "conv5", "gemm" };
	for (int i = 0; i < 5; i++) {
		struct ir_node *n = node_named(q, qn[i]);
		struct ir_node *wdq = dq_of(n, 1);
		CHECKF(wdq != NULL, "%s", qn[i]);
		if (!wdq)
			continue;
		const struct ir_tensor *wt = ir_value_const(wdq->inputs[0]);
		CHECKF(wt && wt->dtype == IR_INT8 && wdq->inputs[0]->init, "%s", qn[i]);
		CHECK(!q_of(wdq));   /* never float weights with Q+DQ */
		CHECKF(ir_node_attr_int(wdq, "axis", -9) == 0, "%s", qn[i]);   /* Conv: 0; Gemm transB=1: 0 */
		const struct ir_tensor *st = ir_value_const(wdq->inputs[1]);
		CHECK(st && st->rank == 1 && st->dims[0] == wt->dims[0] && st->dtype == IR_FLOAT);
		CHECKF(has_msg(&rep, PASS_REWROTE, qn[i], "per channel"), "%s", qn[i]);
		/* every activation input read through a Q/DQ pair */
		struct ir_node *adq = dq_of(n, 0);
		CHECKF(adq && q_of(adq), "%s", qn[i]);
		if (adq) {
			const struct ir_tensor *z = ir_value_const(adq->inputs[2]);
			CHECK(z && z->dtype == IR_INT8 && ir_tensor_get_f64(z, 0) == 0);
		}
	}
	/* biases stay float */
	CHECK(!dq_of(node_named(q, "gemm"), 2) && ir_value_const(node_named(q, "gemm")->inputs[2])->dtype == IR_FLOAT);
	/* the old float weights are gone */
	CHECK(!ir_value_find(q->graph, "conv2_W"));
	/* pairs on inputs only: no QuantizeLinear reads a Conv or Gemm output */
	int n_q = 0;
	ir_for_each_node(q->graph, n) {
		if (n->op != IR_OP_QuantizeLinear)
			continue;
		n_q++;
		struct ir_node *p = n->inputs[0]->producer;
		CHECKF(!p || (p->op != IR_OP_Conv && p->op != IR_OP_Gemm), "%s quantizes the output of %s", n->name,
		       p ? p->name : "?");
	}
	/* MaxPool: its output is quantized (one pair shared by conv2 and conv4), not its input */
	struct ir_node *d2 = dq_of(node_named(q, "conv2"), 0), *d4 = dq_of(node_named(q, "conv4"), 0);
	CHECK(d2 && d2 == d4);
	CHECK(d2 && q_of(d2) && !strcmp(q_of(d2)->inputs[0]->name, "p1"));
	CHECK(!dq_of(node_named(q, "pool"), 0));
	/* the DQ output stands for the tensor (compare --stages) */
	bool mapped = false;
	for (int i = 0; i < rep.n_map; i++)
		if (d2 && !strcmp(rep.map[i].new_name, d2->outputs[0]->name) && !strcmp(rep.map[i].old_name, "p1"))
			mapped = true;
	CHECK(mapped);
	CHECK(d2 && !strcmp(d2->outputs[0]->name, "p1_dq"));
	/* the residual Add reads r2 through the pair conv3 reads it through */
	struct ir_node *add = node_named(q, "add3");
	CHECK(dq_of(add, 1) && dq_of(add, 1) == dq_of(node_named(q, "conv3"), 0));
	CHECK(!dq_of(add, 0));   /* conv3's output: not quantized */
	CHECK(has_msg(&rep, PASS_REWROTE, "add3", "residual input 'r2'"));
	/* Concat: both inputs quantized with the scale of its quantized output */
	struct ir_node *cat = node_named(q, "cat");
	struct ir_node *c0 = dq_of(cat, 0), *c1 = dq_of(cat, 1), *c5 = dq_of(node_named(q, "conv5"), 0);
	CHECK(c0 && c1 && c5);
	if (c0 && c1 && c5) {
		CHECK(scale_of(c0) == scale_of(c5) && scale_of(c1) == scale_of(c5));
		/* the shared scale is the largest of the group */
		const struct ir_calib_tensor *t3 = ir_calib_find(&cal, "r3"), *t4 = ir_calib_find(&cal, "r4"),
					     *tc = ir_calib_find(&cal, "cat_out");
		struct ir_calib_how h = { IR_CALIB_MAX, 99.99 };
		double mx = fmax(fmax(ir_calib_amax(t3, &h), ir_calib_amax(t4, &h)), ir_calib_amax(tc, &h));
		CHECKF(fabs(scale_of(c5) - mx / 127) <= 1e-6 * mx, "%g vs %g", scale_of(c5), mx / 127);
	}
	/* Flatten commutes: gemm's input pair sits after it, on f */
	struct ir_node *dg = dq_of(node_named(q, "gemm"), 0);
	CHECK(dg && q_of(dg) && !strcmp(q_of(dg)->inputs[0]->name, "f"));
	/* one pair per tensor: p1, r2, cat_out, r3, r4, f */
	CHECKF(n_q == 6, "%d pairs", n_q);
	/* numbers: the int8 stage against the float one */
	double snr = snr_db(m, q, 8, NULL, 0);
	CHECKF(snr > 25, "int8 SNR %.1f dB", snr);
	if (getenv("QDUMP"))
		fprintf(stderr, "int8 cnn: SNR %.1f dB\n", snr);
	/* quantizing twice: the second run finds the nodes quantized and leaves them */
	struct pass_report rep2;
	struct ir_model *qq = quantize(q, &cal, opts, &rep2, NULL, 0);
	CHECK(qq && has_msg(&rep2, PASS_REJECTED, "conv2", "already quantized") && !rep2.changed);
	CHECK(qq && has_msg(&rep2, PASS_NOTE, NULL, "nothing to quantize"));
	ir_model_free(qq);
	pass_report_clear(&rep2);
	ir_model_free(q);
	pass_report_clear(&rep);

	/* exclude by name, by op type and by pattern; only= */
	const char *o2[] = { "exclude=conv4,Gemm", NULL };
	q = quantize(m, &cal, o2, &rep, NULL, 0);
	CHECK(q && has_msg(&rep, PASS_REJECTED, "conv4", "excluded by exclude=conv4: kept float32"));
	CHECK(q && has_msg(&rep, PASS_REJECTED, "gemm", "excluded by exclude=Gemm"));
	CHECK(q && !dq_of(node_named(q, "conv4"), 1) && !dq_of(node_named(q, "conv4"), 0));
	CHECK(q && !dq_of(node_named(q, "gemm"), 0));
	CHECK(q && dq_of(node_named(q, "conv2"), 1));
	ir_model_free(q);
	pass_report_clear(&rep);
	const char *o2b[] = { "exclude=Concat", NULL };
	q = quantize(m, &cal, o2b, &rep, NULL, 0);
	CHECK(q && !dq_of(node_named(q, "cat"), 0) && !dq_of(node_named(q, "cat"), 1) && dq_of(node_named(q, "conv5"), 0));
	CHECK(q && has_msg(&rep, PASS_NOTE, "cat", "Concat excluded by exclude=Concat"));
	ir_model_free(q);
	pass_report_clear(&rep);
	const char *o3[] = { "exclude=conv[23]", "min-channels=0", NULL };
	q = quantize(m, &cal, o3, &rep, NULL, 0);
	CHECK(q && !dq_of(node_named(q, "conv2"), 1) && !dq_of(node_named(q, "conv3"), 1));
	CHECK(q && dq_of(node_named(q, "conv1"), 1));   /* min-channels=0: conv1 too */
	ir_model_free(q);
	pass_report_clear(&rep);
	const char *o4[] = { "only=conv5,nosuch", NULL };
	q = quantize(m, &cal, o4, &rep, NULL, 0);
	CHECK(q && dq_of(node_named(q, "conv5"), 1) && !dq_of(node_named(q, "conv2"), 1));
	CHECK(q && has_msg(&rep, PASS_REJECTED, "conv2", "not named by only="));
	CHECK(q && has_msg(&rep, PASS_NOTE, NULL, "'nosuch' names no node"));
	ir_model_free(q);
	pass_report_clear(&rep);

	/* per-tensor weights; asymmetric activations */
	const char *o5[] = { "per-tensor-weights=on", "asymmetric=on", "method=percentile=99.9", NULL };
	q = quantize(m, &cal, o5, &rep, NULL, 0);
	CHECK(q != NULL);
	if (q) {
		struct ir_node *w = dq_of(node_named(q, "conv2"), 1), *a = dq_of(node_named(q, "conv2"), 0);
		CHECK(w && !ir_node_attr(w, "axis") && ir_value_const(w->inputs[1])->numel == 1);
		CHECK(a && ir_value_const(a->inputs[2])->dtype == IR_UINT8);
		save(q, "cnn_int8_asym.onnx");
		double snr2 = snr_db(m, q, 4, NULL, 0);
		CHECKF(snr2 > 20, "asymmetric per-tensor SNR %.1f dB", snr2);
		ir_model_free(q);
	}
	pass_report_clear(&rep);

	/* MaxPool propagation: p1 without statistics takes r1's range */
	struct ir_calib cal2;
	CHECK(ir_calib_copy(&cal2, &cal) == 0);
	struct ir_calib_tensor *tp1 = ir_calib_find(&cal2, "p1");
	CHECK(tp1 != NULL);
	if (tp1)
		tp1->name[0] = '#';   /* no statistics for p1 any more */
	const char *o6[] = { NULL };
	q = quantize(m, &cal2, o6, &rep, NULL, 0);
	CHECK(q && has_msg(&rep, PASS_REWROTE, "conv2", "range of 'r1' before MaxPool"));
	ir_model_free(q);
	pass_report_clear(&rep);
	/* a tensor without statistics: its reader stays float, the message names it */
	struct ir_calib_tensor *tr2 = ir_calib_find(&cal2, "r2");
	if (tr2)
		tr2->name[0] = '#';
	q = quantize(m, &cal2, o6, &rep, NULL, 0);
	CHECK(q && has_msg(&rep, PASS_REJECTED, "conv3", "no calibration for its input 'r2': kept float32"));
	CHECK(q && !dq_of(node_named(q, "add3"), 1));   /* conv3 stays float: add3 is no int8 epilogue */
	CHECK(q && !dq_of(node_named(q, "conv3"), 1));
	ir_model_free(q);
	pass_report_clear(&rep);
	ir_calib_clear(&cal2);

	/* no calibration: int8 and fp8 fail */
	char err[512];
	q = quantize(m, NULL, o6, &rep, err, sizeof(err));
	CHECK(!q && strstr(err, "no calibration: run calibrate first"));
	pass_report_clear(&rep);
	const char *o7[] = { "precision=fp8", NULL };
	q = quantize(m, NULL, o7, &rep, err, sizeof(err));
	CHECK(!q && strstr(err, "no calibration: run calibrate first"));
	pass_report_clear(&rep);
	const char *o8[] = { "method=nonsense", NULL };
	q = quantize(m, &cal, o8, &rep, err, sizeof(err));
	CHECK(!q && strstr(err, "unknown calibration method 'nonsense'"));
	pass_report_clear(&rep);
	const char *o9[] = { "keep-float=int8", NULL };
	q = quantize(m, &cal, o9, &rep, err, sizeof(err));
	CHECK(!q && strstr(err, "keep-float must be float32 or float16, not 'int8'"));
	pass_report_clear(&rep);
	/* keep-float=float16: convert-fp16 runs on what stays float (its notes join the report) */
	const char *o9b[] = { "keep-float=float16", NULL };
	q = quantize(m, &cal, o9b, &rep, err, sizeof(err));
	CHECK(q != NULL);
	if (q) {
		bool f16 = false, note = false;
		for (int i = 0; i < q->graph->n_inits; i++)
			f16 |= q->graph->inits[i]->init && q->graph->inits[i]->init->dtype == IR_FLOAT16;
		for (int i = 0; i < rep.n_msgs; i++)
			note |= rep.msgs[i].text && strstr(rep.msgs[i].text, "keep-float=float16: convert-fp16 on the rest") != NULL;
		CHECK(f16 && note);
		ir_model_free(q);
	}
	pass_report_clear(&rep);
	const char *o10[] = { "precision=int2", NULL };
	q = quantize(m, &cal, o10, &rep, err, sizeof(err));
	CHECK(!q && strstr(err, "unknown precision 'int2'"));
	pass_report_clear(&rep);

	/* fp8: E4M3FN weights and activations, opset 19 */
	q = quantize(m, &cal, o7, &rep, NULL, 0);
	CHECK(q != NULL);
	if (q) {
		CHECK(opset_of(q) == 19 && q->ir_version >= 9);
		save(q, "cnn_fp8.onnx");
		CHECK(has_msg(&rep, PASS_NOTE, NULL, "from 17 to 19"));
		struct ir_node *w = dq_of(node_named(q, "conv2"), 1), *a = dq_of(node_named(q, "conv2"), 0);
		CHECK(w && ir_value_const(w->inputs[0])->dtype == IR_F8E4M3FN && !q_of(w));
		CHECK(a && q_of(a) && ir_value_const(a->inputs[2])->dtype == IR_F8E4M3FN);
		/* scale = amax / 448 */
		const struct ir_calib_tensor *tp = ir_calib_find(&cal, "p1");
		struct ir_calib_how h = { IR_CALIB_MAX, 99.99 };
		CHECK(a && fabs(scale_of(a) - ir_calib_amax(tp, &h) / 448) < 1e-6 * ir_calib_amax(tp, &h));
		double snr3 = snr_db(m, q, 4, NULL, 0);
		CHECKF(snr3 > 20, "fp8 SNR %.1f dB", snr3);
		if (getenv("QDUMP"))
			fprintf(stderr, "fp8 cnn: SNR %.1f dB\n", snr3);
		ir_model_free(q);
	}
	pass_report_clear(&rep);

	/* int4 on a CNN: every Conv refused with the reason, the Gemm quantized (no calibration needed) */
	const char *o11[] = { "precision=int4", "block=32", NULL };
	q = quantize(m, NULL, o11, &rep, NULL, 0);
	CHECK(q != NULL);
	CHECK(has_msg(&rep, PASS_REJECTED, "conv2", "int4 is weight-only quantization of MatMul and Gemm"));
	CHECK(q && dq_of(node_named(q, "gemm"), 1) && !dq_of(node_named(q, "gemm"), 0) && opset_of(q) == 21);
	ir_model_free(q);
	pass_report_clear(&rep);
out:
	ir_calib_clear(&cal);
	ir_model_free(m);
}

/* x[4,64] -> MatMul W[64,48] -> y, and a MatMul of two activations */
static struct ir_model *mlp(int64_t opset, bool two_act)
{
	struct ir_model *m = new_model(opset);
	int64_t xd[2] = { 8, 64 }, wd[2] = { 64, 48 };
	struct ir_value *x = input(m, "x", 2, xd);
	struct ir_value *w = weight(m, "W", 2, wd, 0.2);
	struct ir_node *mm = op(m, "MatMul", "mm", "h", x, w, NULL);
	struct ir_value *y = out0(mm);
	if (two_act) {
		int64_t pd[2] = { 1, 0 };
		struct ir_node *t = op(m, "Transpose", "tr", "ht", y, NULL, NULL);
		attr_ints(t, "perm", 2, pd);
		y = out0(op(m, "MatMul", "scores", "s", y, out0(t), NULL));
	}
	CHECK(ir_graph_add_output(m->graph, y) == 0);
	return m;
}

static void test_matmul(void)
{
	/* two activations: both inputs quantized, per tensor */
	struct ir_model *m = mlp(17, true);
	struct ir_calib cal;
	calibrate(m, &cal, 8, false, NULL, 0);
	struct pass_report rep;
	const char *o[] = { "method=entropy", NULL };
	struct ir_model *q = quantize(m, &cal, o, &rep, NULL, 0);
	CHECK(q != NULL);
	if (q) {
		struct ir_node *s = node_named(q, "scores");
		save(m, "mm2.onnx");
		save(q, "mm2_int8.onnx");
		CHECK(dq_of(s, 0) && q_of(dq_of(s, 0)) && dq_of(s, 1) && q_of(dq_of(s, 1)));
		struct ir_node *w = dq_of(node_named(q, "mm"), 1);
		CHECK(w && ir_node_attr_int(w, "axis", -1) == 1);   /* MatMul's B: the last axis */
		double snr = snr_db(m, q, 4, NULL, 0);
		CHECKF(snr > 25, "int8 matmul SNR %.1f dB", snr);
		ir_model_free(q);
	}
	pass_report_clear(&rep);
	ir_calib_clear(&cal);
	ir_model_free(m);

	/* int4: blocks along K, packing, opset 21 */
	m = mlp(17, false);
	const char *o4[] = { "precision=int4", "block=32", NULL };
	q = quantize(m, NULL, o4, &rep, NULL, 0);
	CHECK(q != NULL);
	if (q) {
		struct ir_node *w = dq_of(node_named(q, "mm"), 1);
		CHECK(w && ir_node_attr_int(w, "axis", -1) == 0 && ir_node_attr_int(w, "block_size", -1) == 32);
		const struct ir_tensor *qt = w ? ir_value_const(w->inputs[0]) : NULL, *st = w ? ir_value_const(w->inputs[1]) : NULL;
		CHECK(qt && qt->dtype == IR_INT4 && qt->nbytes == 64 * 48 / 2);
		CHECK(st && st->rank == 2 && st->dims[0] == 2 && st->dims[1] == 48);
		CHECK(opset_of(q) == 21 && q->ir_version >= 10);
		CHECK(!dq_of(node_named(q, "mm"), 0));   /* activations stay float */
		if (qt && st) {
			/* element (k, n) is the nibble k*48+n, low first; dequantized it is near the weight */
			const struct ir_tensor *wf = ir_value_const(ir_value_find(m->graph, "W"));
			const uint8_t *p = ir_tensor_data(qt);
			double maxerr = 0;
			bool in_range = true;
			for (int k = 0; k < 64; k++)
				for (int n = 0; n < 48; n++) {
					int e = k * 48 + n;
					int v = (p[e / 2] >> (4 * (e % 2))) & 0xf;
					if (v >= 8)
						v -= 16;
					in_range = in_range && v >= -8 && v <= 7;
					double s = ir_tensor_get_f64(st, (uint64_t)((k / 32) * 48 + n));
					double d = fabs(v * s - ir_tensor_get_f64(wf, (uint64_t)e));
					if (d / s > maxerr)
						maxerr = d / s;
				}
			CHECK(in_range);
			CHECKF(maxerr <= 0.5 + 1e-6, "max error %.3f of a scale", maxerr);
		}
		double snr = snr_db(m, q, 4, NULL, 0);
		CHECKF(snr > 12 && snr < 40, "int4 SNR %.1f dB", snr);
		ir_model_free(q);
	}
	pass_report_clear(&rep);

	/* two MatMuls reading one weight share its int4 copy */
	{
		struct ir_model *m2 = mlp(17, false);
		int64_t xd[2] = { 8, 64 };
		struct ir_value *x2 = input(m2, "x2", 2, xd);
		struct ir_node *mm2 = op(m2, "MatMul", "mm2", "h2", x2, ir_value_find(m2->graph, "W"), NULL);
		CHECK(ir_graph_add_output(m2->graph, out0(mm2)) == 0);
		struct ir_model *qs = quantize(m2, NULL, o4, &rep, NULL, 0);
		CHECK(qs && dq_of(node_named(qs, "mm"), 1) && dq_of(node_named(qs, "mm"), 1) == dq_of(node_named(qs, "mm2"), 1));
		CHECK(qs && has_msg(&rep, PASS_REWROTE, "mm2", "already quantized for another node"));
		CHECK(qs && !ir_value_find(qs->graph, "W"));
		ir_model_free(qs);
		pass_report_clear(&rep);
		/* int8 too */
		struct ir_calib c2;
		calibrate(m2, &c2, 2, false, NULL, 0);
		const char *o8[] = { NULL };
		qs = quantize(m2, &c2, o8, &rep, NULL, 0);
		CHECK(qs && dq_of(node_named(qs, "mm"), 1) && dq_of(node_named(qs, "mm"), 1) == dq_of(node_named(qs, "mm2"), 1));
		CHECK(qs && !ir_value_find(qs->graph, "W"));
		ir_model_free(qs);
		pass_report_clear(&rep);
		ir_calib_clear(&c2);
		ir_model_free(m2);
	}

	/* AWQ: a few input channels carry large activations */
	double chan[64];
	for (int k = 0; k < 64; k++)
		chan[k] = k % 16 == 3 ? 20.0 : 0.5;
	calibrate(m, &cal, 8, true, chan, 64);
	const char *oa[] = { "precision=int4", "block=32", "awq=on", NULL };
	q = quantize(m, &cal, oa, &rep, NULL, 0);
	const char *or[] = { "precision=int4", "block=32", NULL };
	struct pass_report rep2;
	struct ir_model *q2 = quantize(m, NULL, or, &rep2, NULL, 0);
	CHECK(q && q2);
	if (q && q2) {
		if (getenv("QDUMP"))
			dump_report(&rep);
		struct ir_node *mmn = node_named(q, "mm");
		struct ir_node *mul = mmn->inputs[0]->producer;
		CHECK(mul && mul->op == IR_OP_Mul && mul->inputs[0] == ir_value_find(q->graph, "x"));
		CHECK(has_msg(&rep, PASS_REWROTE, "mm", "awq alpha"));
		save(m, "mlp.onnx");
		save(q, "mlp_int4_awq.onnx");
		double s_awq = snr_db(m, q, 8, chan, 64), s_rtn = snr_db(m, q2, 8, chan, 64);
		CHECKF(s_awq > s_rtn + 1, "awq %.1f dB vs round to nearest %.1f dB", s_awq, s_rtn);
		if (getenv("QDUMP"))
			fprintf(stderr, "int4: awq %.1f dB, rtn %.1f dB\n", s_awq, s_rtn);
	}
	ir_model_free(q);
	ir_model_free(q2);
	pass_report_clear(&rep);
	pass_report_clear(&rep2);
	/* awq without calibration fails */
	char err[512];
	q = quantize(m, NULL, oa, &rep, err, sizeof(err));
	CHECK(!q && strstr(err, "no calibration"));
	pass_report_clear(&rep);
	ir_calib_clear(&cal);
	ir_model_free(m);
}

/* An opset-11 model with Unsqueeze/Squeeze axes attributes: raised to 13, converted, same numbers. */
static void test_opset_raise(void)
{
	struct ir_model *m = new_model(11);
	int64_t xd[2] = { 8, 64 }, wd[2] = { 64, 32 }, ax[1] = { 0 };
	struct ir_value *x = input(m, "x", 2, xd);
	struct ir_node *u = op(m, "Unsqueeze", "unsq", "xu", x, NULL, NULL);
	attr_ints(u, "axes", 1, ax);
	struct ir_node *s = op(m, "Squeeze", "sq", "xs", out0(u), NULL, NULL);
	attr_ints(s, "axes", 1, ax);
	struct ir_node *mm = op(m, "MatMul", "mm", "y", out0(s), weight(m, "W", 2, wd, 0.2), NULL);
	CHECK(ir_graph_add_output(m->graph, out0(mm)) == 0);
	struct ir_calib cal;
	calibrate(m, &cal, 4, false, NULL, 0);
	struct pass_report rep;
	const char *o[] = { NULL };
	struct ir_model *q = quantize(m, &cal, o, &rep, NULL, 0);
	CHECK(q != NULL);
	if (q) {
		CHECK(opset_of(q) == 13 && q->ir_version >= 7);
		struct ir_node *sq = node_named(q, "sq"), *un = node_named(q, "unsq");
		CHECK(sq && sq->n_inputs == 2 && !ir_node_attr(sq, "axes"));
		CHECK(un && un->n_inputs == 2 && !ir_node_attr(un, "axes"));
		CHECK(has_msg(&rep, PASS_NOTE, NULL, "from 11 to 13"));
		save(m, "opset11.onnx");
		save(q, "opset11_int8.onnx");
		/* the Squeeze commutes: the pair is after it, the range found through it when missing */
		double snr = snr_db(m, q, 4, NULL, 0);
		CHECKF(snr > 25, "SNR %.1f dB", snr);
		ir_model_free(q);
	}
	pass_report_clear(&rep);
	/* an opset-11 Softmax over an inner axis cannot be raised: the pass fails and names it */
	int64_t sd[3] = { 2, 4, 8 };
	struct ir_value *z = input(m, "z", 3, sd);
	struct ir_node *sm = op(m, "Softmax", "sm", "zs", z, NULL, NULL);
	attr_int(sm, "axis", 1);
	CHECK(ir_graph_add_output(m->graph, out0(sm)) == 0);
	char err[600];
	q = quantize(m, &cal, o, &rep, err, sizeof(err));
	CHECKF(!q && strstr(err, "node 'sm' (Softmax)") && strstr(err, "cannot be raised"), "%s", err);
	pass_report_clear(&rep);
	ir_calib_clear(&cal);
	ir_model_free(m);
	(void)ints_init;
}

/* After fuse-activation: FusedConv (with the residual Z) and FusedGemm are quantized like Conv and Gemm. */
static void test_fused(void)
{
	struct ir_model *m = cnn();
	struct pass_report rep;
	struct ir_diag d;
	ir_diag_init(&d);
	CHECKF(pass_run(m, pass_find("fuse-activation"), NULL, 0, &rep, &d) == 0, "%s", d.error);
	ir_diag_clear(&d);
	pass_report_clear(&rep);
	int n_fused = 0;
	struct ir_node *fz = NULL;
	ir_for_each_node(m->graph, n)
		if (n->op == IR_OP_ogsh_FusedConv) {
			n_fused++;
			if (n->n_inputs > 3 && n->inputs[3])
				fz = n;
		}
	CHECK(n_fused == 5 && fz);
	struct ir_calib cal;
	calibrate(m, &cal, 8, false, NULL, 0);
	const char *o[] = { "method=percentile", NULL };
	struct ir_model *q = quantize(m, &cal, o, &rep, NULL, 0);
	CHECK(q != NULL);
	if (q && fz) {
		struct ir_node *f = ir_node_by_id(q->graph, fz->id);
		CHECK(f && dq_of(f, 0) && dq_of(f, 1) && !dq_of(f, 2) && dq_of(f, 3) && q_of(dq_of(f, 3)));
		CHECK(f && dq_of(f, 1) && ir_value_const(dq_of(f, 1)->inputs[0])->dtype == IR_INT8);
		double snr = snr_db(m, q, 4, NULL, 0);
		CHECKF(snr > 25, "fused int8 SNR %.1f dB", snr);
		save(m, "cnn_fused.onnx");
		save(q, "cnn_fused_int8.onnx");
	}
	ir_model_free(q);
	pass_report_clear(&rep);
	/* fp8 raises the opset of the model and of the fused ops' functions */
	const char *o8[] = { "precision=fp8", NULL };
	q = quantize(m, &cal, o8, &rep, NULL, 0);
	CHECK(q != NULL);
	if (q) {
		CHECK(opset_of(q) == 19);
		for (size_t i = 0; i < q->n_functions; i++)
			for (size_t j = 0; j < q->functions[i].n_opsets; j++)
				if (!q->functions[i].opsets[j].domain || !*q->functions[i].opsets[j].domain)
					CHECK(q->functions[i].opsets[j].version == 19);
		double snr = snr_db(m, q, 4, NULL, 0);
		CHECKF(snr > 18, "fused fp8 SNR %.1f dB", snr);
		save(q, "cnn_fused_fp8.onnx");
	}
	ir_model_free(q);
	pass_report_clear(&rep);
	ir_calib_clear(&cal);
	ir_model_free(m);
}

/*
 * test_quantize --quantize IN.onnx OUT.onnx [OPTION=VALUE...]: calibrates
 * IN on 8 batches of random inputs (its input shapes must be fixed), runs
 * quantize with the options, prints the report and saves OUT. A driver for
 * tests/passes/test_quantize.py until the shell can load a calibration.
 */
static int quantize_file(int argc, char **argv)
{
	struct ir_diag d;
	ir_diag_init(&d);
	struct ir_model *m = ir_model_load(argv[2], NULL, &d);
	if (!m) {
		fprintf(stderr, "%s\n", d.error);
		ir_diag_clear(&d);
		return 1;
	}
	struct ir_calib cal;
	calibrate(m, &cal, 8, true, NULL, 0);
	const char *opts[16] = { NULL };
	for (int i = 4; i < argc && i - 4 < 15; i++)
		opts[i - 4] = argv[i];
	struct pass_report rep;
	char err[600];
	struct ir_model *q = quantize(m, &cal, opts, &rep, err, sizeof(err));
	for (int i = 0; i < rep.n_msgs; i++)
		printf("%s %s: %s\n", rep.msgs[i].kind == PASS_REWROTE ? "rewrote" : rep.msgs[i].kind == PASS_REJECTED
			? "rejected" : "note", rep.msgs[i].node ? rep.msgs[i].node : "-", rep.msgs[i].text);
	int rc = q ? 0 : 1;
	if (!q)
		fprintf(stderr, "%s\n", err);
	if (q) {
		save_dir = NULL;
		struct ir_save_opts so = { .force = true, .external = IR_EXT_NONE };
		if (ir_model_save(q, argv[3], &so, &d)) {
			fprintf(stderr, "%s\n", d.error);
			rc = 1;
		}
	}
	ir_diag_clear(&d);
	pass_report_clear(&rep);
	ir_model_free(q);
	ir_model_free(m);
	ir_calib_clear(&cal);
	return rc || failures;
}

/* The demo CNN: conv3 -> bn3 -> add3 (+ relu1_out): the residual through an unfolded BatchNormalization. */
static void test_demo_bn_residual(void)
{
	struct ir_model *m = ir_demo_model();
	struct ir_calib cal;
	calibrate(m, &cal, 4, false, NULL, 0);
	struct pass_report rep;
	const char *o[] = { "min-channels=4", NULL };
	struct ir_model *q = quantize(m, &cal, o, &rep, NULL, 0);
	CHECK(q != NULL);
	if (q) {
		struct ir_node *add = node_named(q, "add3");
		CHECK(add && !dq_of(add, 0) && dq_of(add, 1) && dq_of(add, 1) == dq_of(node_named(q, "conv2"), 0));
		CHECK(has_msg(&rep, PASS_REWROTE, "add3", "residual input 'relu1_out'"));
		double snr = snr_db(m, q, 2, NULL, 0);
		CHECKF(snr > 25, "demo int8 SNR %.1f dB", snr);
	}
	ir_model_free(q);
	pass_report_clear(&rep);
	ir_calib_clear(&cal);
	ir_model_free(m);
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "--quantize"))
		return quantize_file(argc, argv);
	save_dir = argc > 1 ? argv[1] : NULL;
	test_int8_cnn();
	test_matmul();
	test_opset_raise();
	test_fused();
	test_demo_bn_residual();
	printf("%d checks, %d failures\n", checks, failures);
	return failures ? 1 : 0;
}
