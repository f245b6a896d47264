/*
 * cmd_gpu.c - gpu, plan, time, profile, and the GPU plan the session keeps
 * (made for the current stage, input shapes and settings, reused by run,
 * time and profile, dropped by sh_run_forget).
 */
#include "shell.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* The session's plan                                                        */
/* ------------------------------------------------------------------------ */

void sh_gpu_plan_free(struct session *s)
{
	exec_plan_free(s->plan);
	s->plan = NULL;
	s->plan_model = NULL;
}

struct tune_prog {
	bool shown;
	struct timespec t0;
};

static void tune_progress(void *arg, const char *what, int done, int total)
{
	struct tune_prog *p = arg;
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	double el = (double)(t.tv_sec - p->t0.tv_sec) + (t.tv_nsec - p->t0.tv_nsec) / 1e9;
	if (el < 1.0 && !p->shown)
		return;
	fflush(stdout);
	fprintf(stderr, "\r%s %d/%d kernels (%.0f s)\033[K", what, done, total, el);
	p->shown = true;
}

int sh_gpu_plan(struct session *s, const char *cmd, const struct exec_values *in, bool keep_all,
		struct exec_plan **out)
{
	*out = NULL;
	if (s->plan && s->plan_model == s->model && s->plan_stage == s->stage && s->plan_tf32 == s->tf32 &&
	    s->plan_keep_all == keep_all && exec_plan_fits(s->plan, in)) {
		*out = s->plan;
		return 0;
	}
	sh_gpu_plan_free(s);
	struct tune_prog tp = { .shown = false };
	clock_gettime(CLOCK_MONOTONIC, &tp.t0);
	struct exec_plan_opts o = {
		.tf32 = s->tf32, .keep_all = keep_all,
		.progress = s->interactive && isatty(STDERR_FILENO) ? tune_progress : NULL, .progress_arg = &tp,
	};
	struct ir_diag d;
	ir_diag_init(&d);
	struct exec_plan *p = NULL;
	int rc = exec_plan_new(s->model, in, &o, &p, &d);
	if (tp.shown)
		fputs("\r\033[K", stderr);
	if (rc) {
		ir_diag_prefix(&d, "%s", cmd);
		return sh_diag(s, &d);
	}
	for (size_t i = 0; i < d.n_warnings; i++)
		sh_warn(s, "%s: %s", cmd, sh_esc(d.warnings[i]));
	ir_diag_clear(&d);
	s->plan = p;
	s->plan_model = s->model;
	s->plan_stage = s->stage;
	s->plan_tf32 = s->tf32;
	s->plan_keep_all = keep_all;
	*out = p;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Shared: options, inputs                                                   */
/* ------------------------------------------------------------------------ */

struct gpu_in {
	struct exec_shape shapes[40];
	int n_shapes;
	struct exec_values in;
};

static void gpu_in_clear(struct gpu_in *g)
{
	for (int i = 0; i < g->n_shapes; i++)
		exec_shape_clear(&g->shapes[i]);
	g->n_shapes = 0;
	exec_values_clear(&g->in);
}

static bool has_shape(const struct gpu_in *g, const char *name)
{
	for (int i = 0; i < g->n_shapes; i++)
		if (!strcmp(g->shapes[i].name, name))
			return true;
	return false;
}

static const struct exec_shape *sym_shape(const struct gpu_in *g, const char *sym)
{
	for (int i = 0; i < g->n_shapes; i++)
		if (g->shapes[i].rank < 0 && !strcmp(g->shapes[i].name, sym))
			return &g->shapes[i];
	return NULL;
}

/*
 * Random inputs (seed 0) for the model, with --shape options and --batch B
 * (the first dim of every input: its symbol, or the input's own dims).
 */
static int make_inputs(struct session *s, const char *cmd, const struct sh_args *a, int batch, struct gpu_in *g)
{
	struct ir_diag d;
	ir_diag_init(&d);
	for (int i = 0; i < a->nopt; i++) {
		if (strcmp(a->opt_name[i], "shape"))
			continue;
		if (g->n_shapes == 32)
			return sh_error(s, "%s: at most 32 --shape options", cmd);
		if (exec_shape_parse(a->opt_val[i], &g->shapes[g->n_shapes], &d)) {
			ir_diag_prefix(&d, "%s: --shape", cmd);
			return sh_diag(s, &d);
		}
		g->n_shapes++;
	}
	const struct ir_graph *gr = s->model->graph;
	for (int i = 0; batch > 0 && i < gr->n_inputs && g->n_shapes < 40; i++) {
		const struct ir_value *v = gr->inputs[i];
		const struct ir_type *t = &v->type;
		if (v->init || t->kind != IR_TYPE_TENSOR || t->rank < 1 || has_shape(g, v->name))
			continue;
		struct exec_shape *sh = &g->shapes[g->n_shapes];
		memset(sh, 0, sizeof(*sh));
		if (t->dims[0].kind == IR_DIM_PARAM && t->dims[0].param) {
			if (has_shape(g, t->dims[0].param))
				continue;
			if (!(sh->name = strdup(t->dims[0].param)))
				return sh_error(s, "%s: out of memory", cmd);
			sh->rank = -1;
			sh->dims[0] = batch;
			g->n_shapes++;
			continue;
		}
		if (t->rank > IR_MAX_RANK || !(sh->name = strdup(v->name)))
			continue;
		sh->rank = t->rank;
		sh->dims[0] = batch;
		for (int k = 1; k < t->rank; k++) {
			const struct ir_dim *dm = &t->dims[k];
			const struct exec_shape *ss = dm->kind == IR_DIM_PARAM && dm->param ? sym_shape(g, dm->param) : NULL;
			sh->dims[k] = dm->kind == IR_DIM_VALUE ? dm->value : ss ? ss->dims[0] : 1;
		}
		g->n_shapes++;
	}
	if (exec_random_inputs(s->model, 0, g->shapes, g->n_shapes, NULL, &g->in, &d)) {
		ir_diag_prefix(&d, "%s", cmd);
		return sh_diag(s, &d);
	}
	for (size_t i = 0; i < d.n_warnings; i++)
		sh_warn(s, "%s: %s", cmd, sh_esc(d.warnings[i]));
	ir_diag_clear(&d);
	return 0;
}

/* Whether the GPU is used: --device cuda|cpu, default cuda when there is one. */
static int pick_device(struct session *s, const char *cmd, const struct sh_args *a, bool *gpu)
{
	const char *v = sh_opt(a, "device");
	char why[200];
	if (v && !strcmp(v, "cpu")) {
		*gpu = false;   /* without asking: asking starts CUDA on a machine with a GPU */
		return 0;
	}
	bool avail = exec_gpu_available(why, sizeof(why));
	if (!v) {
		*gpu = avail;
		return 0;
	}
	if (strcmp(v, "cuda"))
		return sh_error(s, "%s: --device must be cpu or cuda, not '%s'", cmd, sh_esc(v));
	if (!avail)
		return sh_error(s, "%s: --device cuda: %s", cmd, why);
	*gpu = true;
	return 0;
}

static const char *place_name(enum exec_place p)
{
	return p == EXEC_ON_GPU ? "gpu" : p == EXEC_ON_CPU ? "cpu" : "folded";
}

/* ------------------------------------------------------------------------ */
/* gpu                                                                       */
/* ------------------------------------------------------------------------ */

static void version3(long v, char *buf, size_t size)
{
	if (v <= 0)
		snprintf(buf, size, "not found");
	else if (v >= 10000)
		snprintf(buf, size, "%ld.%ld.%ld", v / 10000, v % 10000 / 100, v % 100);
	else
		snprintf(buf, size, "%ld.%ld.%ld", v / 1000, v % 1000 / 100, v % 100);
}

int cmd_gpu(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (a.npos)
		return sh_usage(s, argv[0]);
	struct exec_gpu_info gi;
	struct ir_diag d;
	ir_diag_init(&d);
	if (exec_gpu_info(&gi, &d)) {
		ir_diag_prefix(&d, "gpu");
		return sh_diag(s, &d);
	}
	char tpath[4096] = "";
	int entries = 0;
	bool have_cache = exec_gpu_tune_cache(NULL, tpath, sizeof(tpath), &entries, &d) == 0;
	ir_diag_clear(&d);
	char drv[32], rt[32], dnn[32], lt[32], b1[32], b2[32];
	snprintf(drv, sizeof(drv), "%d.%d", gi.driver_version / 1000, gi.driver_version % 1000 / 10);
	snprintf(rt, sizeof(rt), "%d.%d", gi.runtime_version / 1000, gi.runtime_version % 1000 / 10);
	version3(gi.cudnn_version, dnn, sizeof(dnn));
	version3(gi.cublaslt_version, lt, sizeof(lt));
	FILE *jf = sh_json_file(s, sh_flag(&a, "json"));
	if (jf) {
		struct sh_json j;
		sh_json_begin(&j, jf);
		sh_json_obj(&j);
		sh_json_kstr(&j, "name", gi.name);
		sh_json_kstr(&j, "compute_capability", (snprintf(b1, sizeof(b1), "%d.%d", gi.cc_major, gi.cc_minor), b1));
		sh_json_kint(&j, "sms", gi.sm_count);
		sh_json_kuint(&j, "memory_total", gi.mem_total);
		sh_json_kuint(&j, "memory_free", gi.mem_free);
		sh_json_kint(&j, "clock_mhz", gi.clock_mhz);
		sh_json_kint(&j, "memory_clock_mhz", gi.mem_clock_mhz);
		sh_json_kint(&j, "bus_bits", gi.bus_bits);
		sh_json_knum(&j, "peak_fp32_tflops", gi.peak_fp32_tflops);
		sh_json_knum(&j, "peak_fp16_tflops", gi.peak_fp16_tflops);
		sh_json_knum(&j, "peak_gbps", gi.peak_gbps);
		sh_json_kstr(&j, "driver", drv);
		sh_json_kstr(&j, "runtime", rt);
		sh_json_kstr(&j, "cudnn", gi.cudnn_version > 0 ? dnn : NULL);
		sh_json_kstr(&j, "cublaslt", gi.cublaslt_version > 0 ? lt : NULL);
		sh_json_kstr(&j, "tune_cache", tpath[0] ? tpath : NULL);
		sh_json_kint(&j, "tune_entries", entries);
		sh_json_obj_end(&j);
		sh_json_end(&j);
		if (jf == s->out)
			return 0;
	}
	sh_printf(s, "device        %s (compute capability %d.%d, %d SMs)\n", gi.name, gi.cc_major, gi.cc_minor,
		  gi.sm_count);
	sh_printf(s, "memory        %s, %s free\n", sh_bytes(gi.mem_total, b1, sizeof(b1)),
		  sh_bytes(gi.mem_free, b2, sizeof(b2)));
	sh_printf(s, "clocks        %d MHz, memory %d MHz, %d-bit bus\n", gi.clock_mhz, gi.mem_clock_mhz, gi.bus_bits);
	sh_printf(s, "peak          fp32 %.1f TFLOP/s, fp16 tensor cores %.0f TFLOP/s (dense), memory %.0f GB/s "
		  "(estimates from SMs and clocks)\n", gi.peak_fp32_tflops, gi.peak_fp16_tflops, gi.peak_gbps);
	sh_printf(s, "CUDA          driver %s, runtime %s\n", drv, rt);
	sh_printf(s, "libraries     cuDNN %s, cuBLASLt %s\n", dnn, lt);
	if (have_cache)
		sh_printf(s, "tuning cache  %s (%d entr%s for this GPU)\n", sh_esc(tpath), entries, entries == 1 ? "y" : "ies");
	else
		sh_printf(s, "tuning cache  %s (not readable)\n", tpath[0] ? sh_esc(tpath) : "none");
	return 0;
}

/* ------------------------------------------------------------------------ */
/* plan                                                                      */
/* ------------------------------------------------------------------------ */

int cmd_plan(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_model_cmd_args(s, argc, argv, &a))
		return -1;
	char why[200];
	if (!exec_gpu_available(why, sizeof(why)))
		return sh_error(s, "plan: %s", why);
	struct gpu_in g = { .n_shapes = 0 };
	struct exec_plan *p;
	int ret = -1;
	if (make_inputs(s, "plan", &a, 0, &g) || sh_gpu_plan(s, "plan", &g.in, false, &p))
		goto out;
	int n;
	const struct exec_plan_node *pn = exec_plan_nodes(p, &n);
	struct exec_plan_summary sm;
	exec_plan_summary(p, &sm);
	bool pending = !sm.graph && !strcmp(sm.graph_why, "captured after the first run");
	char b1[32], b2[32], b3[32], b4[32];
	FILE *jf = sh_json_file(s, sh_flag(&a, "json"));
	if (jf) {
		struct sh_json j;
		sh_json_begin(&j, jf);
		sh_json_obj(&j);
		sh_json_key(&j, "nodes");
		sh_json_arr(&j);
		for (int i = 0; i < n; i++) {
			sh_json_obj(&j);
			sh_json_kint(&j, "id", pn[i].node->id);
			sh_json_kstr(&j, "name", pn[i].node->name);
			sh_json_kstr(&j, "op", pn[i].node->op_type);
			sh_json_kstr(&j, "where", place_name(pn[i].place));
			sh_json_kstr(&j, "impl", pn[i].impl);
			sh_json_kstr(&j, "why", pn[i].why);
			sh_json_kint(&j, "copies", pn[i].copies_in);
			sh_json_kuint(&j, "copy_bytes", pn[i].copy_bytes);
			sh_json_kuint(&j, "out_bytes", pn[i].out_bytes);
			if (pn[i].absorbed) {
				sh_json_kstr(&j, "precision", pn[i].precision);
				sh_json_kstr(&j, "absorbed", pn[i].absorbed);
			}
			if (pn[i].unfused)
				sh_json_kstr(&j, "unfused", pn[i].unfused);
			sh_json_obj_end(&j);
		}
		sh_json_arr_end(&j);
		sh_json_kint(&j, "gpu", sm.n_gpu);
		sh_json_kint(&j, "cpu", sm.n_cpu);
		sh_json_kint(&j, "folded", sm.n_folded);
		sh_json_kint(&j, "copies", sm.n_copies);
		sh_json_kuint(&j, "copy_bytes", sm.copy_bytes);
		sh_json_kuint(&j, "arena_bytes", sm.arena_bytes);
		sh_json_kuint(&j, "naive_bytes", sm.naive_bytes);
		sh_json_kuint(&j, "weight_bytes", sm.weight_bytes);
		sh_json_kuint(&j, "workspace_bytes", sm.ws_bytes);
		sh_json_kbool(&j, "graph", sm.graph || pending);
		sh_json_kstr(&j, "graph_why", sm.graph || pending ? NULL : sm.graph_why);
		sh_json_kint(&j, "tuned", sm.tuned);
		sh_json_kint(&j, "tune_hits", sm.tune_hits);
		sh_json_kint(&j, "nhwc_values", sm.n_nhwc);
		sh_json_kint(&j, "views", sm.n_views);
		sh_json_kint(&j, "ifs_inlined", sm.n_if_inlined);
		sh_json_kint(&j, "islands_int8", sm.n_islands[0]);
		sh_json_kint(&j, "islands_fp8", sm.n_islands[1]);
		sh_json_kint(&j, "islands_int4", sm.n_islands[2]);
		sh_json_kint(&j, "unfused_qdq", sm.n_unfused);
		sh_json_kint(&j, "relu_moved", sm.n_relu_moved);
		sh_json_knum(&j, "plan_ms", sm.plan_ms);
		sh_json_obj_end(&j);
		sh_json_end(&j);
		if (jf == s->out) {
			ret = 0;
			goto out;
		}
	}
	struct sh_table t;
	sh_table_init(&t, 6, "node", "name", "op", "where", "impl", "why");
	for (int i = 0; i < n; i++) {
		char id[32];
		snprintf(id, sizeof(id), "n%d", pn[i].node->id);
		char op[96], why2[400];
		snprintf(op, sizeof(op), "%s", pn[i].node->op_type);
		snprintf(why2, sizeof(why2), "%s", pn[i].why);
		if (pn[i].absorbed) {
			snprintf(op, sizeof(op), "%s (%s island)", pn[i].node->op_type, pn[i].precision);
			snprintf(why2, sizeof(why2), "absorbed %s", pn[i].absorbed);
		} else if (pn[i].unfused) {
			snprintf(why2, sizeof(why2), "not fused: %s", pn[i].unfused);
		}
		sh_table_row(&t, id, sh_esc(pn[i].node->name), sh_esc(op), place_name(pn[i].place), pn[i].impl, why2);
	}
	sh_table_print(s, &t, true);
	sh_table_free(&t);
	sh_printf(s, "\nnodes         %d on the GPU, %d on the CPU, %d folded at plan time\n", sm.n_gpu, sm.n_cpu,
		  sm.n_folded);
	sh_printf(s, "copies        %d per run between the CPU and the GPU (%s)\n", sm.n_copies,
		  sh_bytes(sm.copy_bytes, b1, sizeof(b1)));
	sh_printf(s, "memory        activations %s in one arena (%s without reuse), weights %s, workspace %s\n",
		  sh_bytes(sm.arena_bytes, b1, sizeof(b1)), sh_bytes(sm.naive_bytes, b2, sizeof(b2)),
		  sh_bytes(sm.weight_bytes, b3, sizeof(b3)), sh_bytes(sm.ws_bytes, b4, sizeof(b4)));
	if (sm.graph)
		sh_printf(s, "CUDA graph    yes\n");
	else if (pending)
		sh_printf(s, "CUDA graph    yes (captured at the first run)\n");
	else
		sh_printf(s, "CUDA graph    no: %s\n", sm.graph_why);
	if (sm.n_nhwc)
		sh_printf(s, "layout        %d activation%s channels-last (NHWC)\n", sm.n_nhwc, sm.n_nhwc == 1 ? "" : "s");
	if (sm.n_views)
		sh_printf(s, "views         %d node%s (Reshape, Flatten, Squeeze, Unsqueeze, Identity) share their input's "
			  "memory: no copy\n", sm.n_views, sm.n_views == 1 ? "" : "s");
	if (sm.n_if_inlined)
		sh_printf(s, "branches      %d If%s with a constant condition: the branch taken runs in its place\n",
			  sm.n_if_inlined, sm.n_if_inlined == 1 ? "" : "s");
	if (sm.n_islands[0] || sm.n_islands[1] || sm.n_islands[2] || sm.n_unfused)
		sh_printf(s, "quantized     %d int8, %d fp8, %d int4 island%s (one kernel each); %d Q/DQ of activations "
			  "not fused (why: the last column)\n", sm.n_islands[0], sm.n_islands[1], sm.n_islands[2],
			  sm.n_islands[0] + sm.n_islands[1] + sm.n_islands[2] == 1 ? "" : "s", sm.n_unfused);
	if (sm.n_relu_moved)
		sh_printf(s, "              %d Q -> DQ -> Relu or Clip -> Q of one scale made Relu/Clip -> Q (exact: it "
			  "joins the island before it)\n", sm.n_relu_moved);
	sh_printf(s, "tuning        %d kernel choice%s timed, %d found in the cache\n", sm.tuned, sm.tuned == 1 ? "" : "s",
		  sm.tune_hits);
	sh_printf(s, "planned in    %.1f ms\n", sm.plan_ms);
	ret = 0;
out:
	gpu_in_clear(&g);
	return ret;
}

/* ------------------------------------------------------------------------ */
/* time                                                                      */
/* ------------------------------------------------------------------------ */

/* Times exec_run on the CPU with the host clock. */
static int time_cpu(struct session *s, const struct exec_values *in, int iters, int warmup,
		    struct exec_time_result *r)
{
	double *ms = malloc(sizeof(double) * (size_t)iters);
	if (!ms)
		return sh_error(s, "time: out of memory");
	struct ir_diag d;
	ir_diag_init(&d);
	int rc = 0;
	for (int it = 0; it < warmup + iters && !rc; it++) {
		if (ir_interrupted) {
			rc = ir_diag_err(&d, IR_EINTR, "stopped after %d of %d runs", it, warmup + iters);
			break;
		}
		struct exec_values out = { 0 };
		struct exec_opts o = { 0 };
		double t0 = exec_now_ms();
		rc = exec_run(s->model, in, &o, &out, NULL, NULL, &d);
		double t = exec_now_ms() - t0;
		exec_values_clear(&out);
		if (!rc && it >= warmup)
			ms[it - warmup] = t;
	}
	if (rc) {
		free(ms);
		ir_diag_prefix(&d, "time");
		return sh_diag(s, &d);
	}
	exec_time_summary(ms, iters, r);
	r->graph = false;
	free(ms);
	return 0;
}

int cmd_time(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_model_cmd_args(s, argc, argv, &a))
		return -1;
	int iters = 0, warmup = -1, batch = 0;
	const char *v;
	bool gpu;
	if (((v = sh_opt(&a, "iters")) && sh_int_opt(s, "time", "iters", v, 1, &iters)) ||
	    ((v = sh_opt(&a, "warmup")) && sh_int_opt(s, "time", "warmup", v, 0, &warmup)) ||
	    ((v = sh_opt(&a, "batch")) && sh_int_opt(s, "time", "batch", v, 1, &batch)) ||
	    pick_device(s, "time", &a, &gpu))
		return -1;
	if (!gpu && (sh_flag(&a, "no-graph") || sh_flag(&a, "with-copies")))
		return sh_error(s, "time: --%s is for the GPU (--device cuda)", sh_flag(&a, "no-graph") ? "no-graph" :
				"with-copies");
	if (!iters)
		iters = gpu ? 100 : 10;
	if (warmup < 0)
		warmup = gpu ? 10 : 1;
	struct gpu_in g = { .n_shapes = 0 };
	struct exec_time_result r;
	memset(&r, 0, sizeof(r));
	int ret = -1;
	if (make_inputs(s, "time", &a, batch, &g))
		goto out;
	if (gpu) {
		struct exec_plan *p;
		if (sh_gpu_plan(s, "time", &g.in, false, &p))
			goto out;
		struct exec_time_opts o = { .iters = iters, .warmup = warmup ? warmup : -1,
					    .no_graph = sh_flag(&a, "no-graph"), .with_copies = sh_flag(&a, "with-copies") };
		struct ir_diag d;
		ir_diag_init(&d);
		if (exec_plan_time(p, &g.in, &o, &r, &d)) {
			ir_diag_prefix(&d, "time");
			sh_diag(s, &d);
			goto out;
		}
		ir_diag_clear(&d);
	} else if (time_cpu(s, &g.in, iters, warmup, &r)) {
		goto out;
	}
	/* the batch: the first dim of the first input */
	int64_t b = batch;
	for (int i = 0; !b && i < g.in.n; i++)
		if (g.in.a[i].v.kind == KV_TENSOR && g.in.a[i].v.t->rank > 0)
			b = g.in.a[i].v.t->dims[0];
	if (!b)
		b = 1;
	double thr = r.median_ms > 0 ? (double)b / (r.median_ms / 1e3) : 0;
	FILE *jf = sh_json_file(s, sh_flag(&a, "json"));
	if (jf) {
		struct sh_json j;
		sh_json_begin(&j, jf);
		sh_json_obj(&j);
		sh_json_kstr(&j, "device", gpu ? "cuda" : "cpu");
		sh_json_kint(&j, "iters", r.iters);
		sh_json_kint(&j, "warmup", warmup);
		sh_json_kint(&j, "batch", b);
		sh_json_kbool(&j, "graph", r.graph);
		sh_json_kbool(&j, "with_copies", gpu && sh_flag(&a, "with-copies"));
		sh_json_kbool(&j, "tf32", gpu && s->tf32);
		sh_json_kint(&j, "threads", cpu_threads());
		sh_json_knum(&j, "median_ms", r.median_ms);
		sh_json_knum(&j, "p90_ms", r.p90_ms);
		sh_json_knum(&j, "min_ms", r.min_ms);
		sh_json_knum(&j, "max_ms", r.max_ms);
		sh_json_knum(&j, "mean_ms", r.mean_ms);
		sh_json_knum(&j, "throughput", thr);
		sh_json_obj_end(&j);
		sh_json_end(&j);
	}
	if (jf != s->out) {
		char nthr[48] = "";
		if (!gpu)
			snprintf(nthr, sizeof(nthr), " (%d thread%s)", cpu_threads(), cpu_threads() == 1 ? "" : "s");
		sh_printf(s, "%d runs on %s%s after %d warm-up, batch %" PRId64 "%s%s\n", r.iters, gpu ? "cuda" : "cpu",
			  gpu ? (r.graph ? " (CUDA graph)" : " (node by node)") : nthr, warmup, b,
			  gpu && sh_flag(&a, "with-copies") ? ", copies included" : "",
			  !gpu ? "" : s->tf32 ? "; float32 matrix math in TF32 (set tf32 on)" :
						"; float32 matrix math in full float32 (set tf32 off)");
		sh_printf(s, "median %.3f ms, p90 %.3f ms, min %.3f ms, max %.3f ms, mean %.3f ms\n", r.median_ms, r.p90_ms,
			  r.min_ms, r.max_ms, r.mean_ms);
		sh_printf(s, "throughput %.1f inferences/s\n", thr);
	}
	ret = 0;
out:
	gpu_in_clear(&g);
	return ret;
}

/* ------------------------------------------------------------------------ */
/* profile                                                                   */
/* ------------------------------------------------------------------------ */

struct prow {
	const struct ir_node *node;
	const char *where, *impl;
	double ms, flops, bytes;
	bool half;      /* float16/bfloat16 output: the tensor-core peak applies */
	bool quant;     /* an int8/fp8 island: the int8 tensor-core peak applies */
	const char *absorbed, *precision;   /* an island: what it took in */
};

static int cmp_prow(const void *a, const void *b)
{
	const struct prow *x = a, *y = b;
	if (x->ms != y->ms)
		return x->ms < y->ms ? 1 : -1;
	return x->node->id - y->node->id;
}

/* "12.3" plus a unit, or "" for NaN */
static void fmt1(char *buf, size_t size, double v, const char *unit)
{
	if (isnan(v))
		buf[0] = 0;
	else
		snprintf(buf, size, "%.1f%s", v, unit);
}

int cmd_profile(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_model_cmd_args(s, argc, argv, &a))
		return -1;
	int iters = 0, top = 0;
	const char *v;
	bool gpu;
	if (((v = sh_opt(&a, "iters")) && sh_int_opt(s, "profile", "iters", v, 1, &iters)) ||
	    ((v = sh_opt(&a, "top")) && sh_int_opt(s, "profile", "top", v, 1, &top)) ||
	    pick_device(s, "profile", &a, &gpu))
		return -1;
	if (!iters)
		iters = gpu ? 20 : 3;
	if (sh_infer(s))
		return -1;
	struct gpu_in g = { .n_shapes = 0 };
	struct ir_diag d;
	ir_diag_init(&d);
	const struct ir_graph *gr = s->model->graph;
	int n = gr->n_nodes, ret = -1;
	struct prow *rows = calloc((size_t)(n ? n : 1), sizeof(*rows));
	double *ms = calloc((size_t)(n ? n : 1), sizeof(double));
	struct exec_gpu_info gi;
	memset(&gi, 0, sizeof(gi));
	if (!rows || !ms) {
		sh_error(s, "profile: out of memory");
		goto out;
	}
	if (make_inputs(s, "profile", &a, 0, &g))
		goto out;
	if (gpu) {
		struct exec_plan *p;
		if (sh_gpu_plan(s, "profile", &g.in, false, &p))
			goto out;
		if (exec_plan_profile(p, &g.in, iters, ms, &d) || exec_gpu_info(&gi, &d)) {
			ir_diag_prefix(&d, "profile");
			sh_diag(s, &d);
			goto out;
		}
		int np;
		const struct exec_plan_node *pn = exec_plan_nodes(p, &np);
		for (int i = 0; i < np && i < n; i++) {
			rows[i] = (struct prow){ .node = pn[i].node, .where = place_name(pn[i].place), .impl = pn[i].impl,
						 .ms = ms[i], .flops = pn[i].flops, .bytes = pn[i].bytes,
						 .absorbed = pn[i].absorbed, .precision = pn[i].precision,
						 .quant = pn[i].absorbed && strcmp(pn[i].precision, "int4") };
		}
		n = np < n ? np : n;
	} else {
		/* the CPU reference: exec_run's per-node times, median over the runs */
		double *all = calloc((size_t)(n ? n : 1) * (size_t)iters, sizeof(double));
		/* what computed each node, where its kernel picks (static strings) */
		const char **impl = calloc((size_t)(n ? n : 1), sizeof(*impl));
		if (!all || !impl) {
			free(all);
			free(impl);
			sh_error(s, "profile: out of memory");
			goto out;
		}
		int rc = 0;
		for (int it = 0; it < iters && !rc; it++) {
			struct exec_values out = { 0 };
			struct exec_report rep = { 0 };
			struct exec_opts o = { .time_nodes = true };
			rc = exec_run(s->model, &g.in, &o, &out, NULL, &rep, &d);
			for (int i = 0; !rc && i < rep.n_node_ms && i < n; i++) {
				all[(size_t)i * (size_t)iters + (size_t)it] = rep.node_ms[i];
				impl[i] = rep.node_impl ? rep.node_impl[i] : NULL;
			}
			exec_values_clear(&out);
			exec_report_clear(&rep);
		}
		if (rc) {
			free(all);
			free(impl);
			ir_diag_prefix(&d, "profile");
			sh_diag(s, &d);
			goto out;
		}
		for (int i = 0; i < n; i++) {
			ms[i] = exec_median(&all[(size_t)i * (size_t)iters], iters);
		}
		free(all);
		/* the costs at the dims the runs had (a symbolic batch or
		 * sequence as bound, not 1) */
		double *fl = calloc((size_t)(n ? n : 1), sizeof(double)), *by = calloc((size_t)(n ? n : 1), sizeof(double));
		if (!fl || !by || exec_node_costs(s->model, &g.in, n, fl, by, &d)) {
			free(fl);
			free(by);
			free(impl);
			if (d.error) {
				ir_diag_prefix(&d, "profile");
				sh_diag(s, &d);
			} else {
				sh_error(s, "profile: out of memory");
			}
			goto out;
		}
		int i = 0;
		ir_for_each_node(gr, nd) {
			if (i >= n)
				break;
			rows[i] = (struct prow){ .node = nd, .where = "cpu", .impl = impl[i] ? impl[i] : "ogsh cpu reference",
						 .ms = ms[i], .flops = fl[i], .bytes = by[i] };
			i++;
		}
		free(fl);
		free(by);
		free(impl);
	}
	double total = 0;
	for (int i = 0; i < n; i++) {
		total += rows[i].ms;
		const struct ir_node *nd = rows[i].node;
		const struct ir_type *t = nd->n_outputs && nd->outputs[0] ? ir_value_type(nd->outputs[0]) : NULL;
		rows[i].half = t && t->kind == IR_TYPE_TENSOR && (t->elem == IR_FLOAT16 || t->elem == IR_BFLOAT16);
	}
	/* for dot --color-by time */
	if (sh_node_values_reset(&s->node_time, s->stage, gr->next_id, "ms"))
		for (int i = 0; i < n; i++)
			if (rows[i].node->id >= 0 && rows[i].node->id < s->node_time.n)
				s->node_time.v[rows[i].node->id] = rows[i].ms;
	qsort(rows, (size_t)n, sizeof(*rows), cmp_prow);
	int shown = top && top < n ? top : n;
	bool json = sh_flag(&a, "json");
	FILE *jf = sh_json_file(s, json);
	struct sh_json j;
	struct sh_table t;
	if (jf) {
		sh_json_begin(&j, jf);
		sh_json_obj(&j);
		sh_json_kstr(&j, "device", gpu ? "cuda" : "cpu");
		sh_json_kint(&j, "iters", iters);
		sh_json_kbool(&j, "tf32", gpu && s->tf32);
		sh_json_kint(&j, "threads", cpu_threads());
		sh_json_knum(&j, "total_ms", total);
		sh_json_key(&j, "nodes");
		sh_json_arr(&j);
	}
	if (!json) {
		sh_table_init(&t, 10, "node", "name", "op", "where", "impl", ">ms", ">share", ">GFLOP/s", ">GB/s", ">% peak");
	}
	for (int i = 0; i < shown; i++) {
		const struct prow *r = &rows[i];
		double sec = r->ms / 1e3;
		double gfs = sec > 0 && r->flops > 0 ? r->flops / sec / 1e9 : NAN;
		double gbs = sec > 0 && r->bytes > 0 ? r->bytes / sec / 1e9 : NAN;
		double peak = NAN;
		if (gpu && sec > 0) {
			double pf = (r->quant ? gi.peak_int8_tops : r->half ? gi.peak_fp16_tflops : gi.peak_fp32_tflops) * 1e12;
			double fpart = pf > 0 && r->flops > 0 ? r->flops / sec / pf : 0;
			double bpart = gi.peak_gbps > 0 && r->bytes > 0 ? r->bytes / sec / (gi.peak_gbps * 1e9) : 0;
			peak = 100 * (fpart > bpart ? fpart : bpart);
		}
		double share = total > 0 ? 100 * r->ms / total : 0;
		if (jf) {
			sh_json_obj(&j);
			sh_json_kint(&j, "id", r->node->id);
			sh_json_kstr(&j, "name", r->node->name);
			sh_json_kstr(&j, "op", r->node->op_type);
			sh_json_kstr(&j, "where", r->where);
			sh_json_kstr(&j, "impl", r->impl);
			if (r->absorbed) {
				sh_json_kstr(&j, "precision", r->precision);
				sh_json_kstr(&j, "absorbed", r->absorbed);
			}
			sh_json_knum(&j, "ms", r->ms);
			sh_json_knum(&j, "share", share);
			sh_json_knum(&j, "gflops", isnan(gfs) ? 0 : gfs);
			sh_json_knum(&j, "gbps", isnan(gbs) ? 0 : gbs);
			if (!isnan(peak))
				sh_json_knum(&j, "peak_pct", peak);
			sh_json_obj_end(&j);
			if (json)
				continue;
		}
		char id[32], c1[32], c2[32], c3[32], c4[32], c5[32];
		snprintf(id, sizeof(id), "n%d", r->node->id);
		snprintf(c1, sizeof(c1), "%.3f", r->ms);
		snprintf(c2, sizeof(c2), "%.1f%%", share);
		fmt1(c3, sizeof(c3), gfs, "");
		fmt1(c4, sizeof(c4), gbs, "");
		fmt1(c5, sizeof(c5), peak, "%");
		char op[96], impl[600];
		snprintf(op, sizeof(op), "%s", r->node->op_type);
		snprintf(impl, sizeof(impl), "%s", r->impl ? r->impl : "");
		if (r->absorbed) {
			/* the island's row: the stage's Conv/Gemm/MatMul with the Q/DQ it took in */
			snprintf(op, sizeof(op), "%s (%s)", r->node->op_type, r->precision);
			snprintf(impl, sizeof(impl), "%s; absorbed %s", r->impl ? r->impl : "", r->absorbed);
		}
		sh_table_row(&t, id, sh_esc(r->node->name), sh_esc(op), r->where, impl, c1, c2, c3, c4, c5);
	}
	if (jf) {
		sh_json_arr_end(&j);
		sh_json_obj_end(&j);
		sh_json_end(&j);
	}
	if (!json) {
		char thr[48] = "";
		if (!gpu)
			snprintf(thr, sizeof(thr), "; %d thread%s", cpu_threads(), cpu_threads() == 1 ? "" : "s");
		sh_table_print(s, &t, true);
		sh_table_free(&t);
		sh_printf(s, "%d node%s, %.3f ms in all (median of %d run%s per node, on %s%s)%s\n", n, n == 1 ? "" : "s",
			  total, iters, iters == 1 ? "" : "s", gpu ? "cuda" : "cpu",
			  !gpu ? thr : s->tf32 ? "; float32 matrix math in TF32" : "; float32 matrix math in full float32",
			  shown < n ? "; --top shows the slowest" : "");
	}
	ret = 0;
out:
	ir_diag_clear(&d);
	free(rows);
	free(ms);
	gpu_in_clear(&g);
	return ret;
}
