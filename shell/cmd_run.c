/*
 * cmd_run.c - `run` (execute the model on inputs, summarise or check its
 * outputs) and `compare` (two saved sets of tensors).
 */
#include "shell.h"
#include "exec/exec.h"
#include "exec/exec_io.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Tensor sets on disk                                                       */
/* ------------------------------------------------------------------------ */

static bool ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);
	return n >= m && !strcmp(s + n - m, suf);
}

static bool is_dir(const char *p)
{
	struct stat st;
	return !stat(p, &st) && S_ISDIR(st.st_mode);
}

static bool exists(const char *p)
{
	struct stat st;
	return !stat(p, &st);
}

/* A value name as a file name: bytes other than [A-Za-z0-9._-] become '_'. */
static void file_name(const char *name, char *buf, size_t size)
{
	size_t k = 0;
	for (const char *p = name; *p && k + 1 < size; p++) {
		char c = *p;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
			  c == '_' || c == '-';
		buf[k++] = ok ? c : '_';
	}
	buf[k] = 0;
	if (!k || !strcmp(buf, ".") || !strcmp(buf, ".."))
		snprintf(buf, size, "_%s", k ? buf : "");
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every NAME.npy in a folder, as NAME -> tensor (sorted by name). */
static int read_npy_dir(const char *dir, struct exec_values *out, struct ir_diag *d)
{
	DIR *D = opendir(dir);
	if (!D)
		return ir_diag_err(d, IR_EIO, "cannot open '%s': %s", dir, sh_strerror(errno));
	char **names = NULL;
	int n = 0, cap = 0, rc = 0;
	struct dirent *e;
	while ((e = readdir(D))) {
		if (e->d_name[0] == '.' || !ends_with(e->d_name, ".npy"))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 32;
			char **x = realloc(names, sizeof(*x) * (size_t)cap);
			if (!x) {
				rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
				break;
			}
			names = x;
		}
		if (!(names[n] = strdup(e->d_name))) {
			rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
			break;
		}
		n++;
	}
	closedir(D);
	if (!rc && n)
		qsort(names, (size_t)n, sizeof(*names), cmp_names);
	for (int i = 0; !rc && i < n; i++) {
		char path[4096];
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, names[i]) >= sizeof(path)) {
			rc = ir_diag_err(d, IR_ERR, "path too long in '%s'", dir);
			break;
		}
		struct ir_tensor *t;
		if ((rc = exec_npy_read(path, &t, d)))
			break;
		names[i][strlen(names[i]) - 4] = 0;
		rc = exec_values_add_tensor(out, names[i], t);
		ir_tensor_unref(t);
		if (rc)
			rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	if (!rc && !n)
		rc = ir_diag_err(d, IR_ERR, "'%s' has no .npy files", dir);
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

/* Output_N.pb files of a test-data folder, named after the model's outputs (or output_N). */
static int read_pb_outputs(const struct ir_model *m, const char *dir, struct exec_values *out, struct ir_diag *d)
{
	for (int i = 0;; i++) {
		char path[4096], name[64];
		if ((size_t)snprintf(path, sizeof(path), "%s/output_%d.pb", dir, i) >= sizeof(path))
			return ir_diag_err(d, IR_ERR, "path too long: '%s'", dir);
		if (!exists(path)) {
			if (i == 0)
				return ir_diag_err(d, IR_ERR, "'%s' has no output_0.pb", dir);
			return 0;
		}
		const struct ir_value *v = m && i < m->graph->n_outputs ? m->graph->outputs[i] : NULL;
		struct kern_value kv;
		int rc = exec_read_pb_value(path, v ? &v->type : NULL, &kv, d);
		if (rc)
			return rc;
		snprintf(name, sizeof(name), "output_%d", i);
		if (exec_values_add(out, v ? v->name : name, &kv)) {
			kern_value_clear(&kv);
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
		}
	}
}

/*
 * Reads a set of tensors: an .npz file, an .npy or .pb file (one tensor), a
 * folder of NAME.npy files, an ONNX test-data folder (input_N.pb /
 * output_N.pb) or a test folder holding test_data_set_0. `outputs` picks
 * output_N.pb over input_N.pb in test-data folders. `m` (may be NULL) names
 * positional tensors.
 */
static int read_set(const struct ir_model *m, const char *path, bool outputs, struct exec_values *out,
		    struct ir_diag *d)
{
	char sub[4096];
	int rc;
	if (is_dir(path)) {
		snprintf(sub, sizeof(sub), "%s/test_data_set_0", path);
		if (is_dir(sub))
			path = sub;
		char probe[4200];
		snprintf(probe, sizeof(probe), "%s/%s_0.pb", path, outputs ? "output" : "input");
		if (exists(probe)) {
			if (outputs)
				return read_pb_outputs(m, path, out, d);
			if (!m)
				return ir_diag_err(d, IR_ERR, "reading input_N.pb needs a model");
			return exec_read_test_dir(m, path, out, NULL, d);
		}
		return read_npy_dir(path, out, d);
	}
	if (!exists(path))
		return ir_diag_err(d, IR_EIO, "cannot open '%s': %s", path, sh_strerror(errno));
	if (ends_with(path, ".npz")) {
		struct exec_named_tensor *a;
		int n;
		if ((rc = exec_npz_read(path, &a, &n, d)))
			return rc;
		for (int i = 0; !rc && i < n; i++)
			if (exec_values_add_tensor(out, a[i].name, a[i].t))
				rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
		exec_named_free(a, n);
		return rc;
	}
	struct ir_tensor *t = NULL;
	const char *name = NULL;
	const struct ir_value *v = NULL;
	if (m) {
		const struct ir_graph *g = m->graph;
		if (outputs && g->n_outputs)
			v = g->outputs[0];
		for (int i = 0; !outputs && !v && i < g->n_inputs; i++)
			if (!g->inputs[i]->init)
				v = g->inputs[i];
	}
	name = v ? v->name : outputs ? "output_0" : "input_0";
	if (ends_with(path, ".npy")) {
		if ((rc = exec_npy_read(path, &t, d)))
			return rc;
	} else if (ends_with(path, ".pb")) {
		struct kern_value kv;
		if ((rc = exec_read_pb_value(path, v ? &v->type : NULL, &kv, d)))
			return rc;
		if (exec_values_add(out, name, &kv)) {
			kern_value_clear(&kv);
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
		}
		return 0;
	} else {
		return ir_diag_err(d, IR_ERR, "'%s': expected an .npz, .npy or .pb file, or a folder", path);
	}
	rc = exec_values_add_tensor(out, name, t);
	ir_tensor_unref(t);
	return rc ? ir_diag_err(d, IR_ENOMEM, "out of memory") : 0;
}

/* Renames positional entries (arr_N from np.savez, input_N/output_N) to the model's names. */
static void name_positional(const struct ir_model *m, struct exec_values *vs, bool outputs)
{
	if (!m)
		return;
	const struct ir_graph *g = m->graph;
	const struct ir_value *want[512];
	int n = 0;
	if (outputs)
		for (int i = 0; i < g->n_outputs && n < 512; i++)
			want[n++] = g->outputs[i];
	else
		for (int i = 0; i < g->n_inputs && n < 512; i++)
			if (!g->inputs[i]->init)
				want[n++] = g->inputs[i];
	for (int i = 0; i < vs->n; i++) {
		int k;
		const char *nm = vs->a[i].name;
		if (ir_value_find(g, nm))
			continue;
		if (sscanf(nm, "arr_%d", &k) == 1 || sscanf(nm, outputs ? "output_%d" : "input_%d", &k) == 1) {
			if (k >= 0 && k < n) {
				char *c = strdup(want[k]->name);
				if (c) {
					free(vs->a[i].name);
					vs->a[i].name = c;
				}
			}
			continue;
		}
		/* a file name made from a value name (odd characters became '_') */
		for (int j = 0; j < n; j++) {
			char fn[512];
			file_name(want[j]->name, fn, sizeof(fn));
			if (!strcmp(fn, nm)) {
				char *c = strdup(want[j]->name);
				if (c) {
					free(vs->a[i].name);
					vs->a[i].name = c;
				}
				break;
			}
		}
	}
}

/* Writes a set: NAME.npy files in a folder, or one .npz. */
static int write_set(const char *path, const struct exec_values *vs, struct ir_diag *d)
{
	int rc = 0;
	if (ends_with(path, ".npz")) {
		struct exec_named_tensor *a = calloc((size_t)(vs->n ? vs->n : 1), sizeof(*a));
		int n = 0;
		if (!a)
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
		for (int i = 0; i < vs->n; i++)
			if (vs->a[i].v.kind == KV_TENSOR) {
				a[n].name = vs->a[i].name;
				a[n++].t = vs->a[i].v.t;
			}
		rc = exec_npz_write(path, a, n, d);
		free(a);
		return rc;
	}
	if (!is_dir(path) && mkdir(path, 0777) && errno != EEXIST)
		return ir_diag_err(d, IR_EIO, "cannot make folder '%s': %s", path, sh_strerror(errno));
	for (int i = 0; !rc && i < vs->n; i++) {
		if (vs->a[i].v.kind != KV_TENSOR)
			continue;
		char fn[512], p[4700];
		file_name(vs->a[i].name, fn, sizeof(fn));
		snprintf(p, sizeof(p), "%s/%s.npy", path, fn);
		rc = exec_npy_write(p, vs->a[i].v.t, d);
	}
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Printing                                                                  */
/* ------------------------------------------------------------------------ */

static const char *num(double v, char *buf, size_t size)
{
	if (isnan(v))
		snprintf(buf, size, "nan");
	else if (isinf(v))
		snprintf(buf, size, v > 0 ? "inf" : "-inf");
	else
		snprintf(buf, size, "%.6g", v);
	return buf;
}

static void print_value_row(struct sh_table *t, const char *name, const struct kern_value *v)
{
	char shape[256], b[5][32], extra[64];
	if (v->kind == KV_NONE) {
		sh_table_row(t, sh_esc(name), "-", "(empty optional)", "", "", "", "", "");
		return;
	}
	if (v->kind == KV_SEQ) {
		snprintf(shape, sizeof(shape), "sequence of %d", v->n_items);
		sh_table_row(t, sh_esc(name), v->elem ? ir_dtype_name(v->elem) : "?", shape, "", "", "", "", "");
		return;
	}
	const struct ir_tensor *x = v->t;
	ir_dims_str(x->rank, x->dims, shape, sizeof(shape));
	struct kern_stats st;
	memset(&st, 0, sizeof(st));
	if (x->dtype == IR_STRING || exec_tensor_stats(x, &st, NULL)) {
		sh_table_row(t, sh_esc(name), ir_dtype_name(x->dtype), shape, "", "", "", "", "");
		return;
	}
	extra[0] = 0;
	if (st.nan || st.inf)
		snprintf(extra, sizeof(extra), "%" PRIu64 " nan, %" PRIu64 " inf", st.nan, st.inf);
	sh_table_row(t, sh_esc(name), ir_dtype_name(x->dtype), shape, num(st.min, b[0], 32), num(st.max, b[1], 32),
		     num(st.mean, b[2], 32), num(st.std, b[3], 32), extra);
}

static void json_value(struct sh_json *j, const char *name, const struct kern_value *v)
{
	sh_json_obj(j);
	sh_json_kstr(j, "name", name);
	if (v->kind == KV_TENSOR) {
		const struct ir_tensor *x = v->t;
		sh_json_kstr(j, "dtype", ir_dtype_name(x->dtype));
		sh_json_key(j, "shape");
		sh_json_arr(j);
		for (int i = 0; i < x->rank; i++)
			sh_json_int(j, x->dims[i]);
		sh_json_arr_end(j);
		struct kern_stats st;
		if (x->dtype != IR_STRING && !exec_tensor_stats(x, &st, NULL)) {
			sh_json_knum(j, "min", st.min);
			sh_json_knum(j, "max", st.max);
			sh_json_knum(j, "mean", st.mean);
			sh_json_knum(j, "std", st.std);
			sh_json_kuint(j, "nan", st.nan);
			sh_json_kuint(j, "inf", st.inf);
		}
	} else if (v->kind == KV_SEQ) {
		sh_json_kstr(j, "kind", "sequence");
		sh_json_kint(j, "items", v->n_items);
	} else {
		sh_json_kstr(j, "kind", "empty");
	}
	sh_json_obj_end(j);
}

/* Flat index -> "[0,3,1]" */
static const char *index_str(const struct ir_tensor *t, uint64_t flat, char *buf, size_t size)
{
	int64_t idx[IR_MAX_RANK];
	for (int i = t->rank - 1; i >= 0; i--) {
		idx[i] = t->dims[i] ? (int64_t)(flat % (uint64_t)t->dims[i]) : 0;
		flat = t->dims[i] ? flat / (uint64_t)t->dims[i] : 0;
	}
	return ir_dims_str(t->rank, idx, buf, size);
}

/*
 * Tolerances for GPU results against the CPU reference: other summation
 * orders (and TF32) make float32 differ by more than ONNX's 1e-7 absolute
 * near zero, so atol follows the tensor's scale.
 */
/* gpu_tol: 1 float, 2 float with TF32, 3 with int8 islands, 4 with fp8 islands */
static void gpu_tolerance(const struct ir_tensor *b, int gpu_tol, struct exec_cmp_opts *o)
{
	struct kern_stats st;
	double amax = 0;
	bool tf32 = gpu_tol == 2;
	if (b->dtype != IR_STRING && !exec_tensor_stats(b, &st, NULL) && isfinite(st.abs_max))
		amax = st.abs_max;
	if (gpu_tol >= 3 && (b->dtype == IR_FLOAT || b->dtype == IR_FLOAT16 || b->dtype == IR_BFLOAT16)) {
		/* integer islands round each activation once, the CPU's float
		 * simulation rounds every product: values one step apart at a
		 * rounding tie move the layers after them. int8: 3% of the
		 * largest value (about four steps of a per-tensor scale); fp8
		 * (3 mantissa bits, steps of up to 12.5%): 8% */
		double f = gpu_tol == 4 ? 0.08 : 0.03;
		o->rtol = gpu_tol == 4 ? 0.125 : 0.02;
		if (o->atol < f * amax)
			o->atol = f * amax;
		return;
	}
	if (b->dtype == IR_FLOAT) {
		o->rtol = tf32 ? 1e-2 : 1e-3;
		if (o->atol < 1e-4 * amax)
			o->atol = (tf32 ? 1e-3 : 1e-4) * amax;
	} else if (b->dtype == IR_FLOAT16) {
		/* the CPU rounds every node's output to float16 where a fused GPU
		 * kernel keeps float32 between the ops it joins (and an int4 weight
		 * (q - z) * s exact where DequantizeLinear rounds it): a deep
		 * network's outputs collect a few float16 steps of their largest
		 * value (a Llama decoder of 8 layers: 1.3e-3 of it) */
		o->rtol = 1e-2;
		if (o->atol < 2.5e-3 * amax)
			o->atol = 2.5e-3 * amax;
	}
}

struct cmp_out {
	struct sh_table t;
	struct sh_json j;
	FILE *jf;              /* the JSON result: stdout with --json, or kept for expect, or NULL */
	bool json;             /* --json: no table */
	int compared, passed, missing;
	struct sh_table why;   /* the worst element of each failing tensor */
};

/* Compares one actual value with an expected one and adds the row. */
static int compare_one(struct session *s, struct cmp_out *c, const char *name, const struct kern_value *a,
		       const struct kern_value *b, const struct exec_cmp_opts *user, int gpu_tol,
		       const struct kern_value *unrounded)
{
	if (a->kind != KV_TENSOR || b->kind != KV_TENSOR) {
		if (c->jf) {
			sh_json_obj(&c->j);
			sh_json_kstr(&c->j, "name", name);
			sh_json_kstr(&c->j, "error", "only tensors are compared");
			sh_json_obj_end(&c->j);
		}
		if (!c->json) {
			sh_table_row(&c->t, sh_esc(name), "-", "", "", "", "", "", "", "not a tensor");
		}
		c->compared++;
		return 0;
	}
	struct exec_cmp_opts o;
	exec_cmp_defaults(b->t->dtype, &o);
	if (gpu_tol)
		gpu_tolerance(b->t, gpu_tol, &o);
	if (user->atol >= 0)
		o.atol = user->atol;
	if (user->rtol >= 0)
		o.rtol = user->rtol;
	o.topk = 5;
	struct exec_cmp r;
	struct ir_diag d;
	ir_diag_init(&d);
	int rc = exec_compare(a->t, b->t, &o, &r, &d);
	if (rc)
		return sh_diag(s, &d);
	ir_diag_clear(&d);
	/* a quantized plan: the GPU and the CPU round activations at ties
	 * differently (and their float parts differ in the last bits), and the
	 * layers after move with them. Both are roundings of the same model:
	 * the result still passes when it is about as close to the CPU's run
	 * with the activations left unrounded as the CPU's own quantized run is
	 * (its SNR against that at most 3 dB lower: twice the noise power); a
	 * wrong kernel lands much further away */
	double q_snr = NAN, d_snr = NAN;
	bool by_qerr = false;
	if (!r.pass && r.shape_ok && r.dtype_ok && !r.nan_mismatch && unrounded && unrounded->kind == KV_TENSOR) {
		struct exec_cmp u, v;
		ir_diag_init(&d);
		if (!exec_compare(b->t, unrounded->t, &o, &u, &d) && u.shape_ok && u.dtype_ok &&
		    !exec_compare(a->t, unrounded->t, &o, &v, &d) && v.shape_ok && v.dtype_ok) {
			q_snr = u.snr_db;
			d_snr = v.snr_db;
			if (isfinite(q_snr) && !isnan(d_snr) && d_snr >= q_snr - 3)
				r.pass = by_qerr = true;
		}
		ir_diag_clear(&d);
	}
	c->compared++;
	if (r.pass)
		c->passed++;
	char b1[32], b2[32], b3[32], b4[32], top[64], bad[64], ix[256], wa[32], wb[32];
	if (c->jf) {
		sh_json_obj(&c->j);
		sh_json_kstr(&c->j, "name", name);
		sh_json_kbool(&c->j, "pass", r.pass);
		if (!r.shape_ok || !r.dtype_ok)
			sh_json_kstr(&c->j, "why", r.why);
		sh_json_knum(&c->j, "atol", o.atol);
		sh_json_knum(&c->j, "rtol", o.rtol);
		sh_json_kuint(&c->j, "elements", r.n);
		sh_json_kuint(&c->j, "bad", r.n_bad);
		sh_json_knum(&c->j, "max_abs", r.max_abs);
		sh_json_knum(&c->j, "max_rel", r.max_rel);
		sh_json_knum(&c->j, "cosine", r.cosine);
		sh_json_knum(&c->j, "snr_db", r.snr_db);
		if (!isnan(q_snr)) {
			sh_json_knum(&c->j, "quant_snr_db", q_snr);
			sh_json_knum(&c->j, "device_quant_snr_db", d_snr);
			sh_json_kbool(&c->j, "within_quant_error", by_qerr);
		}
		if (r.has_topk) {
			sh_json_knum(&c->j, "top1", r.top1_agree);
			sh_json_knum(&c->j, "top5", r.topk_agree);
		}
		sh_json_kuint(&c->j, "nan_actual", r.nan_a);
		sh_json_kuint(&c->j, "nan_expected", r.nan_b);
		sh_json_kuint(&c->j, "inf_actual", r.inf_a);
		sh_json_kuint(&c->j, "inf_expected", r.inf_b);
		if (r.n_bad && r.shape_ok) {
			sh_json_kuint(&c->j, "worst_index", r.worst);
			sh_json_knum(&c->j, "worst_actual", r.worst_a);
			sh_json_knum(&c->j, "worst_expected", r.worst_b);
		}
		sh_json_obj_end(&c->j);
		if (c->json)
			return 0;
	}
	if (!r.shape_ok || !r.dtype_ok) {
		sh_table_row(&c->t, sh_esc(name), "FAIL", "", "", "", "", "", "", r.why);
		return 0;
	}
	top[0] = 0;
	if (r.has_topk)
		snprintf(top, sizeof(top), "%.0f%%/%.0f%%", 100 * r.top1_agree, 100 * r.topk_agree);
	snprintf(bad, sizeof(bad), "%" PRIu64 "/%" PRIu64, r.n_bad, r.n);
	sh_table_row(&c->t, sh_esc(name), r.pass ? "ok" : "FAIL", num(r.max_abs, b1, 32), num(r.max_rel, b2, 32),
		     num(r.cosine, b3, 32), num(r.snr_db, b4, 32), top, bad, by_qerr ? "as close to unrounded as the cpu" : "");
	if (r.n_bad) {
		char rule[160];
		if (!isnan(q_snr))
			snprintf(rule, sizeof(rule),
				 "|a-b| <= %g + %g*|b|, or against the unrounded run snr %.1f >= %.1f dB (the cpu's) - 3",
				 o.atol, o.rtol, d_snr, q_snr);
		else
			snprintf(rule, sizeof(rule), "|a-b| <= %g + %g*|b|", o.atol, o.rtol);
		sh_table_row(&c->why, sh_esc(name), index_str(b->t, r.worst, ix, sizeof(ix)), num(r.worst_a, wa, 32),
			     num(r.worst_b, wb, 32), rule);
	}
	if (r.nan_mismatch) {
		char nb[64];
		snprintf(nb, sizeof(nb), "%" PRIu64 " NaN only on one side", r.nan_mismatch);
		sh_table_row(&c->why, sh_esc(name), "", "", "", nb);
	}
	return 0;
}

/*
 * Compares every value of `actual` that `expected` names (by name; by
 * position when no name matches and the counts agree). Prints the table.
 * Returns 0 when everything compared passes, 1 when something fails, -1 on error.
 */
static int compare_sets(struct session *s, const struct exec_values *actual, const struct exec_values *expected,
			const struct exec_cmp_opts *user, bool json, int gpu_tol, const struct exec_values *unrounded)
{
	struct cmp_out c = { .json = json, .jf = sh_json_file(s, json) };
	bool by_pos = true;
	for (int i = 0; i < expected->n; i++)
		if (exec_values_find(actual, expected->a[i].name))
			by_pos = false;
	by_pos = by_pos && actual->n == expected->n;
	if (c.jf) {
		sh_json_begin(&c.j, c.jf);
		sh_json_obj(&c.j);
		sh_json_key(&c.j, "compared");
		sh_json_arr(&c.j);
	}
	if (!json) {
		sh_table_init(&c.t, 9, "tensor", "result", ">max abs", ">max rel", ">cosine", ">snr dB", "top1/top5",
			      ">bad", "note");
		sh_table_init(&c.why, 5, "tensor", "worst at", ">actual", ">expected", "rule");
	}
	int rc = 0;
	for (int i = 0; i < expected->n && !rc; i++) {
		const struct kern_value *a = by_pos ? &actual->a[i].v : exec_values_find(actual, expected->a[i].name);
		if (!a) {
			c.missing++;
			if (!json)
				sh_table_row(&c.t, sh_esc(expected->a[i].name), "-", "", "", "", "", "", "", "no such value here");
			continue;
		}
		rc = compare_one(s, &c, expected->a[i].name, a, &expected->a[i].v, user, gpu_tol,
				 unrounded ? exec_values_find(unrounded, expected->a[i].name) : NULL);
	}
	if (c.jf) {
		sh_json_arr_end(&c.j);
		sh_json_kint(&c.j, "passed", c.passed);
		sh_json_kint(&c.j, "failed", c.compared - c.passed);
		sh_json_kint(&c.j, "missing", c.missing);
		sh_json_obj_end(&c.j);
		sh_json_end(&c.j);
	}
	if (!json) {
		sh_table_print(s, &c.t, true);
		if (c.why.rows) {
			sh_printf(s, "\n");
			sh_table_print(s, &c.why, true);
		}
		sh_table_free(&c.t);
		sh_table_free(&c.why);
		sh_printf(s, "%d compared: %d passed, %d failed%s\n", c.compared, c.passed, c.compared - c.passed,
			  c.missing ? " (some expected values are missing)" : "");
	}
	if (rc)
		return -1;
	return c.passed == c.compared && !c.missing ? 0 : 1;
}

/*
 * The quantization's own error, for --check on a quantized plan: `rm` run on
 * the CPU with every activation's QuantizeLinear -> DequantizeLinear pair
 * left out (the DequantizeLinear's readers read the float the Q rounded;
 * weights stay quantized). 0, or -1 with the reason in d.
 */
static int run_unrounded(const struct ir_model *rm, const struct exec_values *in, struct exec_values *out,
			 struct ir_diag *d)
{
	struct ir_model *u = ir_model_clone(rm);
	if (!u)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	struct ir_graph *g = u->graph;
	int bypassed = 0;
	struct ir_diag id;
	ir_diag_init(&id);
	ir_infer(u, &id);   /* the element types below; what it cannot tell is skipped */
	ir_diag_clear(&id);
	ir_for_each_node(g, n) {
		if (n->op != IR_OP_DequantizeLinear || n->n_inputs < 1 || n->n_outputs < 1 || !n->inputs[0] ||
		    !n->outputs[0])
			continue;
		const struct ir_node *q = n->inputs[0]->producer;
		if (!q || q->op != IR_OP_QuantizeLinear || q->n_inputs < 1 || !q->inputs[0] ||
		    ir_value_is_const(q->inputs[0]))
			continue;
		struct ir_value *x = q->inputs[0], *y = n->outputs[0];
		int xt = x->inferred.kind == IR_TYPE_TENSOR ? x->inferred.elem
			 : x->type.kind == IR_TYPE_TENSOR ? x->type.elem : -1;
		int yt = y->inferred.kind == IR_TYPE_TENSOR ? y->inferred.elem
			 : y->type.kind == IR_TYPE_TENSOR ? y->type.elem : -2;
		if (xt != yt)
			continue;   /* e.g. a float16 activation read back as float32: kept */
		if (y->is_output)
			continue;   /* an output keeps its name (and its rounding, the same on both sides) */
		ir_value_replace_uses(y, x);
		bypassed++;
	}
	struct exec_values ins = { 0 };
	for (int i = 0; i < in->n; i++) {
		const struct ir_value *iv = ir_value_find(g, in->a[i].name);
		struct kern_value c;
		if (!iv || !iv->is_input || kern_value_copy(&c, &in->a[i].v))
			continue;
		if (exec_values_add(&ins, in->a[i].name, &c))
			kern_value_clear(&c);
	}
	struct exec_opts o = { 0 };
	int rc = bypassed ? exec_run(u, &ins, &o, out, NULL, NULL, d)
			  : ir_diag_err(d, IR_ERR, "no activation QuantizeLinear/DequantizeLinear pair to leave out");
	exec_values_clear(&ins);
	ir_model_free(u);
	return rc;
}

/* true when some output of `want` fails the GPU tolerance for `gpu_tol` */
static bool some_output_fails(const struct exec_values *out, const struct exec_values *want, int gpu_tol)
{
	for (int i = 0; i < want->n; i++) {
		const struct kern_value *a = exec_values_find(out, want->a[i].name), *b = &want->a[i].v;
		if (!a && out->n == want->n)
			a = &out->a[i].v;
		if (!a || a->kind != KV_TENSOR || b->kind != KV_TENSOR)
			continue;
		struct exec_cmp_opts o;
		exec_cmp_defaults(b->t->dtype, &o);
		gpu_tolerance(b->t, gpu_tol, &o);
		o.topk = 0;
		struct exec_cmp r;
		struct ir_diag d;
		ir_diag_init(&d);
		int rc = exec_compare(a->t, b->t, &o, &r, &d);
		ir_diag_clear(&d);
		if (!rc && !r.pass)
			return true;
	}
	return false;
}

/* ------------------------------------------------------------------------ */
/* run                                                                       */
/* ------------------------------------------------------------------------ */

struct prog {
	struct timespec t0;
	bool shown;
};

static void run_progress(void *arg, int done, int total)
{
	struct prog *p = arg;
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	double el = (double)(t.tv_sec - p->t0.tv_sec) + (t.tv_nsec - p->t0.tv_nsec) / 1e9;
	if (el < 1.0 || (done != total && done % 8))
		return;
	fflush(stdout);
	fprintf(stderr, "\rrunning %d/%d nodes (%.0f s)\033[K", done, total, el);
	p->shown = true;
}

static int parse_double_opt(struct session *s, const char *cmd, const char *name, const char *v, double *out)
{
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	if (!*v || *end || errno || !(x >= 0) || isinf(x))
		return sh_error(s, "%s: --%s must be a number >= 0, not '%s'", cmd, name, sh_esc(v));
	*out = x;
	return 0;
}

/* Forgets the last run's values, keeping the GPU plan (a new run of the same stage). */
static void forget_values(struct session *s)
{
	exec_values_clear(&s->last_run);
	s->last_run_all = false;
	sh_node_values_clear(&s->node_time);
	sh_node_values_clear(&s->node_err);
}

void sh_run_forget(struct session *s)
{
	forget_values(s);
	sh_gpu_plan_free(s);
}

/*
 * Per-node errors of a checked run: for each node of the current stage, the
 * largest |a-b| over its outputs found in both sets (by name).
 */
static void node_errors(struct session *s, const struct exec_values *mine, const struct exec_values *ref)
{
	const struct ir_graph *g = s->model->graph;
	if (!sh_node_values_reset(&s->node_err, s->stage, g->next_id, "max abs"))
		return;
	ir_for_each_node(g, n) {
		double worst = NAN;
		for (int i = 0; i < n->n_outputs; i++) {
			if (!n->outputs[i])
				continue;
			const struct kern_value *x = exec_values_find(mine, n->outputs[i]->name);
			const struct kern_value *y = exec_values_find(ref, n->outputs[i]->name);
			if (!x || !y || x->kind != KV_TENSOR || y->kind != KV_TENSOR || x->t->dtype == IR_STRING)
				continue;
			struct exec_cmp r;
			struct exec_cmp_opts o;
			exec_cmp_defaults(y->t->dtype, &o);
			o.topk = 0;
			if (exec_compare(x->t, y->t, &o, &r, NULL) || !r.shape_ok)
				continue;
			if (isnan(worst) || r.max_abs > worst)
				worst = r.max_abs;
		}
		if (n->id >= 0 && n->id < s->node_err.n)
			s->node_err.v[n->id] = worst;
	}
}

bool sh_node_values_reset(struct sh_node_values *vals, int stage, int n, const char *unit)
{
	sh_node_values_clear(vals);
	if (n < 0)
		n = 0;
	vals->v = malloc(((size_t)n + 1) * sizeof(double));
	if (!vals->v)
		return false;
	for (int i = 0; i < n; i++)
		vals->v[i] = NAN;
	vals->n = n;
	vals->stage = stage;
	snprintf(vals->unit, sizeof(vals->unit), "%s", unit);
	return true;
}

void sh_node_values_clear(struct sh_node_values *vals)
{
	free(vals->v);
	memset(vals, 0, sizeof(*vals));
}

struct prof_row {
	const char *op;
	int count;
	double ms;
};

static int cmp_prof(const void *a, const void *b)
{
	const struct prof_row *x = a, *y = b;
	return x->ms < y->ms ? 1 : x->ms > y->ms ? -1 : strcmp(x->op, y->op);
}

static int cmp_prof_name(const void *a, const void *b)
{
	return strcmp(((const struct prof_row *)a)->op, ((const struct prof_row *)b)->op);
}

/* Time per op type over the main graph's nodes (rep->node_ms is in node order). */
static void print_profile(struct session *s, const struct ir_model *m, const struct exec_report *rep,
			  struct sh_json *j, bool gpu)
{
	struct prof_row *rows = calloc((size_t)(rep->n_node_ms ? rep->n_node_ms : 1), sizeof(*rows));
	int n = 0, pos = 0;
	double total = 0;
	if (!rows)
		return;
	ir_for_each_node(m->graph, nd) {
		if (pos >= rep->n_node_ms)
			break;
		int r;
		for (r = 0; r < n; r++)
			if (!strcmp(rows[r].op, nd->op_type))
				break;
		if (r == n)
			rows[n++].op = nd->op_type;
		rows[r].count++;
		rows[r].ms += rep->node_ms[pos];
		total += rep->node_ms[pos++];
	}
	/* the table: most time first; JSON: by op name (stable for scripts) */
	qsort(rows, (size_t)n, sizeof(*rows), j ? cmp_prof_name : cmp_prof);
	if (j) {
		if (!gpu)
			sh_json_kint(j, "threads", cpu_threads());
		sh_json_key(j, "profile");
		sh_json_arr(j);
		for (int r = 0; r < n; r++) {
			sh_json_obj(j);
			sh_json_kstr(j, "op", rows[r].op);
			sh_json_kint(j, "nodes", rows[r].count);
			sh_json_knum(j, "ms", rows[r].ms);
			sh_json_obj_end(j);
		}
		sh_json_arr_end(j);
	} else {
		struct sh_table t;
		char c[32], ms[32], pc[32];
		sh_table_init(&t, 4, "op", ">nodes", ">ms", ">time %");
		for (int r = 0; r < n; r++) {
			snprintf(c, sizeof(c), "%d", rows[r].count);
			snprintf(ms, sizeof(ms), "%.2f", rows[r].ms);
			snprintf(pc, sizeof(pc), "%.1f%%", total > 0 ? 100 * rows[r].ms / total : 0.0);
			sh_table_row(&t, sh_esc(rows[r].op), c, ms, pc);
		}
		sh_printf(s, "\n");
		sh_table_print(s, &t, true);
		sh_table_free(&t);
		if (!gpu)
			sh_printf(s, "(the CPU kernels ran on %d thread%s)\n", cpu_threads(), cpu_threads() == 1 ? "" : "s");
	}
	free(rows);
}

int cmd_run(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	/* --check stage N: N is the word after it */
	const char *check = sh_opt(&a, "check");
	int check_stage = -1;
	if (check && strcmp(check, "cpu") && strcmp(check, "stage"))
		return sh_error(s, "run: --check must be cpu or stage N, not '%s'", sh_esc(check));
	if (check && !strcmp(check, "stage")) {
		if (a.npos != 1)
			return sh_error(s, "run: --check stage needs a stage number (--check stage N)");
		if (!sh_need_model(s))
			return -1;
		if ((check_stage = sh_stage_arg(s, "run", a.pos[0])) < 0)
			return -1;
	} else if (a.npos) {
		return sh_usage(s, argv[0]);
	}
	if (!sh_need_model(s))
		return -1;
	struct ir_model *m = s->model;
	struct exec_cmp_opts user = { .atol = -1, .rtol = -1 };
	uint64_t seed = 0;
	const char *v;
	if ((v = sh_opt(&a, "seed"))) {
		char *end;
		errno = 0;
		unsigned long long x = strtoull(v, &end, 10);
		if (!*v || *end || errno || *v == '-')
			return sh_error(s, "run: --seed must be a whole number, not '%s'", sh_esc(v));
		seed = x;
	}
	if ((v = sh_opt(&a, "atol")) && parse_double_opt(s, "run", "atol", v, &user.atol))
		return -1;
	if ((v = sh_opt(&a, "rtol")) && parse_double_opt(s, "run", "rtol", v, &user.rtol))
		return -1;
	/* --backend: the CPU reference interpreter is the only one */
	if ((v = sh_opt(&a, "backend")) && strcmp(v, "cpu"))
		return sh_error(s, "run: no backend '%s' (there is: cpu)", sh_esc(v));
	/* the device: cuda when there is a GPU, unless --device or --backend says otherwise */
	char gwhy[200] = "";
	/* asked only when it matters: asking starts CUDA on a machine with a GPU */
	bool cpu_asked = sh_opt(&a, "backend") || ((v = sh_opt(&a, "device")) && !strcmp(v, "cpu"));
	bool gpu_ok = !cpu_asked && exec_gpu_available(gwhy, sizeof(gwhy)), gpu = gpu_ok;
	if ((v = sh_opt(&a, "device"))) {
		if (!strcmp(v, "cpu")) {
			gpu = false;
		} else if (!strcmp(v, "cuda")) {
			if (sh_opt(&a, "backend"))
				return sh_error(s, "run: --backend is for --device cpu");
			if (!gpu_ok)
				return sh_error(s, "run: --device cuda: %s", gwhy);
			gpu = true;
		} else {
			return sh_error(s, "run: --device must be cpu or cuda, not '%s'", sh_esc(v));
		}
	}
	if (check && sh_opt(&a, "expect"))
		return sh_error(s, "run: --check and --expect do not go together");
	bool json = sh_flag(&a, "json"), all = sh_flag(&a, "all-tensors");
	struct exec_shape shapes[32];
	int n_shapes = 0, ret = -1;
	struct ir_diag d;
	ir_diag_init(&d);
	struct exec_values in = { 0 }, out = { 0 }, keep = { 0 }, want = { 0 }, ref_all = { 0 };
	struct exec_report rep = { 0 };
	for (int i = 0; i < a.nopt; i++) {
		if (strcmp(a.opt_name[i], "shape"))
			continue;
		if (n_shapes == 32) {
			sh_error(s, "run: at most 32 --shape options");
			goto out;
		}
		if (exec_shape_parse(a.opt_val[i], &shapes[n_shapes], &d)) {
			ir_diag_prefix(&d, "run: --shape");
			sh_diag(s, &d);
			goto out;
		}
		n_shapes++;
	}
	if ((v = sh_opt(&a, "inputs"))) {
		if (read_set(m, v, false, &in, &d)) {
			ir_diag_prefix(&d, "run: --inputs");
			sh_diag(s, &d);
			goto out;
		}
		name_positional(m, &in, false);
	}
	if ((v = sh_opt(&a, "expect"))) {
		if (read_set(m, v, true, &want, &d)) {
			ir_diag_prefix(&d, "run: --expect");
			sh_diag(s, &d);
			goto out;
		}
		name_positional(m, &want, true);
	}
	if (exec_random_inputs(m, seed, shapes, n_shapes, &in, &in, &d)) {
		ir_diag_prefix(&d, "run");
		sh_diag(s, &d);
		goto out;
	}
	for (size_t i = 0; i < d.n_warnings; i++)
		sh_warn(s, "run: %s", sh_esc(d.warnings[i]));
	ir_diag_clear(&d);
	ir_diag_init(&d);
	struct prog pg = { .shown = false };
	clock_gettime(CLOCK_MONOTONIC, &pg.t0);
	bool profile = sh_flag(&a, "profile");
	bool keep_all = all || check;
	int rc;
	struct exec_plan_summary psum;
	memset(&psum, 0, sizeof(psum));
	if (gpu) {
		struct exec_plan *p;
		if (sh_gpu_plan(s, "run", &in, keep_all, &p))
			goto out;
		rc = exec_plan_run(p, &in, &out, &keep, &rep, &d);
		if (!rc && profile) {
			int np;
			exec_plan_nodes(p, &np);
			double *ms = calloc((size_t)(np ? np : 1), sizeof(double));
			rc = ms ? exec_plan_profile(p, &in, 5, ms, &d) : ir_diag_err(&d, IR_ENOMEM, "out of memory");
			rep.node_ms = ms;
			rep.n_node_ms = ms ? np : 0;
		}
		exec_plan_summary(p, &psum);
	} else {
		struct exec_opts o = { .keep_all = keep_all, .progress = s->interactive ? run_progress : NULL,
				       .progress_arg = &pg, .time_nodes = profile };
		rc = exec_run(m, &in, &o, &out, &keep, &rep, &d);
	}
	if (pg.shown)
		fputs("\r\033[K", stderr);
	if (rc) {
		ir_diag_prefix(&d, "run");
		sh_diag(s, &d);
		goto out;
	}
	/* the reference of --check: the CPU, on this stage or stage N */
	if (check) {
		const struct ir_model *rm = check_stage >= 0 ? s->hist.st[check_stage].m : m;
		struct exec_opts o = { .keep_all = true,
				       .progress = s->interactive ? run_progress : NULL, .progress_arg = &pg };
		struct exec_values ins = { 0 };
		/* stage N may not take every input this stage takes (an input a pass removed) */
		for (int i = 0; i < in.n; i++) {
			const struct ir_value *iv = ir_value_find(rm->graph, in.a[i].name);
			struct kern_value c;
			if (!iv || !iv->is_input || kern_value_copy(&c, &in.a[i].v))
				continue;
			if (exec_values_add(&ins, in.a[i].name, &c))
				kern_value_clear(&c);
		}
		pg.shown = false;
		clock_gettime(CLOCK_MONOTONIC, &pg.t0);
		rc = exec_run(rm, &ins, &o, &want, &ref_all, NULL, &d);
		exec_values_clear(&ins);
		if (pg.shown)
			fputs("\r\033[K", stderr);
		if (rc) {
			if (check_stage >= 0)
				ir_diag_prefix(&d, "run: --check stage %d", check_stage);
			else
				ir_diag_prefix(&d, "run: --check cpu");
			sh_diag(s, &d);
			goto out;
		}
	}
	/* what the session keeps for later commands: outputs, or every value */
	forget_values(s);
	for (int i = 0; i < in.n; i++) {
		struct kern_value c;
		if (!kern_value_copy(&c, &in.a[i].v) && exec_values_add(&s->last_run, in.a[i].name, &c))
			kern_value_clear(&c);
	}
	const struct exec_values *mine = all ? &keep : &out;
	for (int i = 0; i < mine->n; i++) {
		struct kern_value c;
		if (!kern_value_copy(&c, &mine->a[i].v) && exec_values_add(&s->last_run, mine->a[i].name, &c))
			kern_value_clear(&c);
	}
	s->last_run_all = all;
	if (check)
		node_errors(s, &keep, &ref_all);
	if ((v = sh_opt(&a, "save-outputs"))) {
		if (write_set(v, all ? &keep : &out, &d)) {
			ir_diag_prefix(&d, "run: --save-outputs");
			sh_diag(s, &d);
			goto out;
		}
	}
	const char *dev = gpu ? "cuda" : "cpu";
	char b1[32], b2[32];
	if (sh_json_file(s, json) && !want.n) {
		struct sh_json j;
		sh_json_begin(&j, sh_json_file(s, json));
		sh_json_obj(&j);
		sh_json_kstr(&j, "backend", dev);
		sh_json_knum(&j, "ms", rep.ms);
		if (gpu) {
			sh_json_kint(&j, "nodes_gpu", psum.n_gpu);
			sh_json_kint(&j, "nodes_cpu", psum.n_cpu);
			sh_json_kint(&j, "nodes_folded", psum.n_folded);
			sh_json_kuint(&j, "arena_bytes", psum.arena_bytes);
			sh_json_kuint(&j, "naive_bytes", psum.naive_bytes);
			sh_json_kbool(&j, "graph", psum.graph);
		} else {
			sh_json_kuint(&j, "peak_activation_bytes", rep.peak_bytes);
			sh_json_kuint(&j, "buffers", rep.n_allocs);
			sh_json_kuint(&j, "buffers_reused", rep.n_reused);
		}
		sh_json_key(&j, "inputs");
		sh_json_arr(&j);
		for (int i = 0; i < in.n; i++)
			json_value(&j, in.a[i].name, &in.a[i].v);
		sh_json_arr_end(&j);
		sh_json_key(&j, "outputs");
		sh_json_arr(&j);
		for (int i = 0; i < out.n; i++)
			json_value(&j, out.a[i].name, &out.a[i].v);
		sh_json_arr_end(&j);
		if (profile)
			print_profile(s, m, &rep, &j, gpu);
		sh_json_obj_end(&j);
		sh_json_end(&j);
		if (json) {
			ret = 0;
			goto out;
		}
	}
	if (!json) {
		struct sh_table t;
		sh_table_init(&t, 8, "output", "dtype", "shape", ">min", ">max", ">mean", ">std", "note");
		for (int i = 0; i < out.n; i++)
			print_value_row(&t, out.a[i].name, &out.a[i].v);
		sh_table_print(s, &t, true);
		sh_table_free(&t);
		if (gpu)
			sh_printf(s, "ran %d nodes on cuda in %.1f ms (%d on the GPU, %d on the CPU, %d folded); activations: "
				  "%s arena, %s without reuse%s\n", rep.n_nodes, rep.ms, psum.n_gpu, psum.n_cpu, psum.n_folded,
				  sh_bytes(psum.arena_bytes, b1, sizeof(b1)), sh_bytes(psum.naive_bytes, b2, sizeof(b2)),
				  all ? "; every value kept for compare" : "");
		else
			sh_printf(s, "ran %d nodes on cpu in %.1f ms; activations: peak %s live, %s made in %" PRIu64
				  " buffers (%" PRIu64 " reused)%s\n", rep.n_nodes, rep.ms,
				  sh_bytes(rep.peak_bytes, b1, sizeof(b1)), sh_bytes(rep.total_bytes, b2, sizeof(b2)),
				  rep.n_allocs, rep.n_reused, all ? "; every value kept for compare" : "");
		if (profile)
			print_profile(s, m, &rep, NULL, gpu);
	}
	if (want.n) {
		if (!json)
			sh_printf(s, "\n");
		int gtol = psum.n_islands[1] ? 4 : psum.n_islands[0] ? 3 : s->tf32 ? 2 : 1;
		/* a quantized plan failing the per-element rule: the quantization's own error */
		struct exec_values unr = { 0 };
		bool have_unr = false;
		if (check && gpu && gtol >= 3 && user.atol < 0 && user.rtol < 0 && some_output_fails(&out, &want, gtol)) {
			const struct ir_model *rm = check_stage >= 0 ? s->hist.st[check_stage].m : m;
			struct ir_diag ud;
			ir_diag_init(&ud);
			if (run_unrounded(rm, &in, &unr, &ud)) {
				/* a note; the per-element rule decides */
				sh_warn(s, "run: --check: no run without activation rounding: %s",
					sh_esc(ud.error ? ud.error : "failed"));
			} else {
				have_unr = true;
			}
			ir_diag_clear(&ud);
		}
		int c = compare_sets(s, &out, &want, &user, json, check && gpu ? gtol : 0, have_unr ? &unr : NULL);
		exec_values_clear(&unr);
		if (c < 0)
			goto out;
		if (c > 0) {
			if (check_stage >= 0)
				ret = sh_error(s, "run: the outputs differ from stage %d's", check_stage);
			else if (check)
				ret = sh_error(s, "run: the outputs on %s differ from the CPU reference's", dev);
			else
				ret = sh_error(s, "run: the outputs do not match '%s'", sh_esc(sh_opt(&a, "expect")));
			goto out;
		}
	}
	ret = 0;
out:
	for (int i = 0; i < n_shapes; i++)
		exec_shape_clear(&shapes[i]);
	exec_values_clear(&in);
	exec_values_clear(&out);
	exec_values_clear(&keep);
	exec_values_clear(&want);
	exec_values_clear(&ref_all);
	exec_report_clear(&rep);
	ir_diag_clear(&d);
	return ret;
}

/* ------------------------------------------------------------------------ */
/* compare                                                                   */
/* ------------------------------------------------------------------------ */

/* "last" is the session's last run; anything else is read from disk. */
static int get_set(struct session *s, const char *what, struct exec_values *out, struct ir_diag *d)
{
	if (!strcmp(what, "last")) {
		if (!s->last_run.n)
			return ir_diag_err(d, IR_ERR, "there is no last run: use run first");
		for (int i = 0; i < s->last_run.n; i++) {
			struct kern_value c;
			if (kern_value_copy(&c, &s->last_run.a[i].v) || exec_values_add(out, s->last_run.a[i].name, &c))
				return ir_diag_err(d, IR_ENOMEM, "out of memory");
		}
		return 0;
	}
	int rc = read_set(s->model, what, true, out, d);
	if (!rc)
		name_positional(s->model, out, true);
	return rc;
}

int cmd_compare(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (a.npos != 2)
		return sh_usage(s, argv[0]);
	if (sh_flag(&a, "stages")) {
		if (!sh_need_model(s))
			return -1;
		return sh_compare_stages(s, a.pos[0], a.pos[1], argc, argv);
	}
	struct exec_cmp_opts user = { .atol = -1, .rtol = -1 };
	const char *v;
	if ((v = sh_opt(&a, "atol")) && parse_double_opt(s, "compare", "atol", v, &user.atol))
		return -1;
	if ((v = sh_opt(&a, "rtol")) && parse_double_opt(s, "compare", "rtol", v, &user.rtol))
		return -1;
	struct exec_values x = { 0 }, y = { 0 };
	struct ir_diag d;
	ir_diag_init(&d);
	int ret = -1;
	if (get_set(s, a.pos[0], &x, &d) || get_set(s, a.pos[1], &y, &d)) {
		ir_diag_prefix(&d, "compare");
		sh_diag(s, &d);
		goto out;
	}
	int c = compare_sets(s, &x, &y, &user, sh_flag(&a, "json"), 0, NULL);
	if (c < 0)
		goto out;
	if (c > 0) {
		ret = sh_error(s, "compare: '%s' and '%s' differ", sh_esc(a.pos[0]), sh_esc(a.pos[1]));
		goto out;
	}
	ret = 0;
out:
	exec_values_clear(&x);
	exec_values_clear(&y);
	ir_diag_clear(&d);
	return ret;
}
