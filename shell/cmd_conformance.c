/*
 * cmd_conformance.c - `conformance DIR`: runs ONNX backend test folders on
 * a backend, prints what did not pass, and writes a per-op report. With
 * `--device cuda` each model goes through the GPU planner (what the GPU
 * cannot run falls back to the CPU) and the tests that ran entirely on the
 * CPU are counted apart as "cpu-only".
 */
#include "shell.h"
#include "exec/exec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct op_row {
	char op[128];
	int tests, passed, failed, unsupported, errors;
};

struct suite_row {
	char name[128];
	int total, counts[EXEC_CONF_TIMEOUT + 1];
	int on_gpu, passed_on_gpu, cpu_only;   /* --device cuda */
};

struct conf_state {
	struct session *s;
	struct suite_row suites[16];
	int n_suites;
	bool verbose, json;
	bool gpu;               /* --device cuda */
	struct sh_json j;
	int counts[EXEC_CONF_TIMEOUT + 1];
	int total;
	int on_gpu, passed_on_gpu, cpu_only;
	struct op_row *ops;
	int n_ops, cap_ops;
	/* the results, for the report */
	struct exec_conf_result *res;
	int n_res, cap_res;
	bool keep;
};

static struct op_row *op_row(struct conf_state *c, const char *op)
{
	for (int i = 0; i < c->n_ops; i++)
		if (!strcmp(c->ops[i].op, op))
			return &c->ops[i];
	if (c->n_ops == c->cap_ops) {
		int cap = c->cap_ops ? 2 * c->cap_ops : 64;
		struct op_row *a = realloc(c->ops, sizeof(*a) * (size_t)cap);
		if (!a)
			return NULL;
		c->ops = a;
		c->cap_ops = cap;
	}
	struct op_row *r = &c->ops[c->n_ops++];
	memset(r, 0, sizeof(*r));
	snprintf(r->op, sizeof(r->op), "%s", op);
	return r;
}

static void each(void *arg, const struct exec_conf_result *r, int n_gpu, int n_cpu, int n_folded)
{
	struct conf_state *c = arg;
	struct session *s = c->s;
	c->total++;
	c->counts[r->status]++;
	struct suite_row *su = &c->suites[c->n_suites - 1];
	su->total++;
	su->counts[r->status]++;
	/* a test that got a plan: some nodes on the GPU, or none (cpu-only) */
	bool planned = n_gpu + n_cpu + n_folded > 0;
	if (c->gpu && planned) {
		if (n_gpu > 0) {
			c->on_gpu++;
			su->on_gpu++;
			if (r->status == EXEC_CONF_PASS) {
				c->passed_on_gpu++;
				su->passed_on_gpu++;
			}
		} else {
			c->cpu_only++;
			su->cpu_only++;
		}
	}
	char where[96] = "";
	if (c->gpu && planned)
		snprintf(where, sizeof(where), n_gpu ? "; %d of %d nodes on the GPU" : "; cpu-only (%d of %d nodes on the GPU)",
			 n_gpu, n_gpu + n_cpu);
	char ops[sizeof(r->ops)];
	snprintf(ops, sizeof(ops), "%s", r->ops);
	for (char *save = NULL, *tok = strtok_r(ops, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		struct op_row *o = op_row(c, tok);
		if (!o)
			continue;
		o->tests++;
		if (r->status == EXEC_CONF_PASS)
			o->passed++;
		else if (r->status == EXEC_CONF_FAIL)
			o->failed++;
		else if (r->status == EXEC_CONF_UNSUPPORTED)
			o->unsupported++;
		else
			o->errors++;
	}
	if (c->keep) {
		if (c->n_res == c->cap_res) {
			int cap = c->cap_res ? 2 * c->cap_res : 256;
			struct exec_conf_result *a = realloc(c->res, sizeof(*a) * (size_t)cap);
			if (a) {
				c->res = a;
				c->cap_res = cap;
			}
		}
		if (c->n_res < c->cap_res)
			c->res[c->n_res++] = *r;
	}
	if (c->json) {
		sh_json_obj(&c->j);
		sh_json_kstr(&c->j, "suite", su->name);
		sh_json_kstr(&c->j, "test", r->test);
		sh_json_kstr(&c->j, "status", exec_conf_status_name(r->status));
		sh_json_kstr(&c->j, "detail", r->status == EXEC_CONF_PASS ? NULL : r->detail);
		sh_json_kstr(&c->j, "ops", r->ops);
		sh_json_knum(&c->j, "max_abs_err", r->max_err);
		sh_json_knum(&c->j, "ms", r->ms);
		if (c->gpu) {
			sh_json_kint(&c->j, "gpu_nodes", n_gpu);
			sh_json_kint(&c->j, "cpu_nodes", n_cpu);
			sh_json_kint(&c->j, "folded_nodes", n_folded);
		}
		sh_json_obj_end(&c->j);
	} else if (r->status != EXEC_CONF_PASS || c->verbose) {
		if (s->interactive)
			sh_progress_done();
		const char *col = r->status == EXEC_CONF_PASS ? SH_GREEN : r->status == EXEC_CONF_UNSUPPORTED ? SH_YELLOW : SH_RED;
		if (r->status == EXEC_CONF_PASS)
			sh_printf(s, "%s: %s%s%s (max abs err %.3g, %.1f ms%s)\n", sh_esc(r->test), sh_c(s, col),
				  exec_conf_status_name(r->status), sh_c(s, SH_RESET), r->max_err, r->ms, where);
		else
			sh_printf(s, "%s: %s%s%s: %s%s%s%s\n", sh_esc(r->test), sh_c(s, col), exec_conf_status_name(r->status),
				  sh_c(s, SH_RESET), sh_esc(r->detail), *where ? " (" : "", *where ? where + 2 : "", *where ? ")" : "");
	}
	if (s->interactive) {
		fprintf(stderr, "\r%d tests, %d passed", c->total, c->counts[EXEC_CONF_PASS]);
		fflush(stderr);
	}
}

static int cmp_op(const void *a, const void *b)
{
	const struct op_row *x = a, *y = b;
	return strcmp(x->op, y->op);
}

static void report_counts(FILE *f, const char *name, int total, const int *counts)
{
	fprintf(f, "| %s | %d | %d | %d | %d | %d | %d | %d | %.1f%% |\n", name, total, counts[EXEC_CONF_PASS],
		counts[EXEC_CONF_FAIL], counts[EXEC_CONF_UNSUPPORTED], counts[EXEC_CONF_ERROR],
		counts[EXEC_CONF_CRASH], counts[EXEC_CONF_TIMEOUT], total ? 100.0 * counts[EXEC_CONF_PASS] / total : 0.0);
}

static int write_report(struct session *s, struct conf_state *c, const char *path, const char *filter)
{
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	FILE *f = fopen(tmp, "w");
	if (!f)
		return sh_error(s, "cannot write '%s': %s", sh_esc(path), sh_strerror(errno));
	fprintf(f, "# Conformance%s\n\n", c->gpu ? " on the GPU" : "");
	fprintf(f, "Written by `ogsh -c 'conformance DIR... --report FILE%s'` (tests/conformance/run.py --update; do not "
		   "edit by hand). Each test's model runs %s for every test_data_set_N; outputs are "
		   "compared with |a-b| <= atol + rtol*|b| at rtol 1e-3, atol 1e-7 (ONNX's defaults; densenet121 rtol "
		   "2e-3 as in ONNX's test list; integers exact). The data is the onnx package's backend test data.\n\n",
		c->gpu ? " --device cuda" : "",
		c->gpu ? "through the GPU planner (nodes the GPU cannot run fall back to the CPU; TF32 off)" : "on the cpu backend");
	if (filter)
		fprintf(f, "Filter: `%s`\n\n", filter);
	fprintf(f, "| suite | tests | passed | failed | unsupported | error | crashed | timed out | pass rate |\n");
	fprintf(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (int i = 0; i < c->n_suites; i++)
		report_counts(f, c->suites[i].name, c->suites[i].total, c->suites[i].counts);
	if (c->n_suites > 1)
		report_counts(f, "all", c->total, c->counts);
	fprintf(f, "\n");
	if (c->gpu) {
		fprintf(f, "Where the tests ran: \"on the GPU\" tests had at least one node on the GPU; \"cpu-only\" "
			   "tests were planned with every node on the CPU (or folded at plan time).\n\n");
		fprintf(f, "| suite | tests | on the GPU | passed on the GPU | cpu-only |\n|---|---:|---:|---:|---:|\n");
		for (int i = 0; i < c->n_suites; i++)
			fprintf(f, "| %s | %d | %d | %d | %d |\n", c->suites[i].name, c->suites[i].total, c->suites[i].on_gpu,
				c->suites[i].passed_on_gpu, c->suites[i].cpu_only);
		if (c->n_suites > 1)
			fprintf(f, "| all | %d | %d | %d | %d |\n", c->total, c->on_gpu, c->passed_on_gpu, c->cpu_only);
		fprintf(f, "\n");
	}
	fprintf(f, "## Per op type\n\nA test counts for every op type its model uses.\n\n");
	fprintf(f, "| op | tests | passed | failed | unsupported | error |\n|---|---:|---:|---:|---:|---:|\n");
	qsort(c->ops, (size_t)c->n_ops, sizeof(*c->ops), cmp_op);
	for (int i = 0; i < c->n_ops; i++)
		fprintf(f, "| %s | %d | %d | %d | %d | %d |\n", c->ops[i].op, c->ops[i].tests, c->ops[i].passed,
			c->ops[i].failed, c->ops[i].unsupported, c->ops[i].errors);
	fprintf(f, "\n## Tests that do not pass\n\n");
	int shown = 0;
	for (int i = 0; i < c->n_res; i++) {
		const struct exec_conf_result *r = &c->res[i];
		if (r->status == EXEC_CONF_PASS)
			continue;
		if (!shown++)
			fprintf(f, "| test | status | why |\n|---|---|---|\n");
		char why[sizeof(r->detail) * 2];
		size_t k = 0;
		for (const char *p = r->detail; *p && k + 2 < sizeof(why); p++) {
			if (*p == '|')
				why[k++] = '\\';
			why[k++] = (*p == '\n') ? ' ' : *p;
		}
		why[k] = 0;
		fprintf(f, "| %s | %s | %s |\n", r->test, exec_conf_status_name(r->status), why);
	}
	if (!shown)
		fprintf(f, "Every test passes.\n");
	bool ok = !ferror(f);
	ok = (fflush(f) == 0) && ok;
	ok = (fsync(fileno(f)) == 0) && ok;
	ok = (fclose(f) == 0) && ok;
	if (!ok || rename(tmp, path)) {
		int e = errno;
		unlink(tmp);
		return sh_error(s, "cannot write '%s': %s", sh_esc(path), sh_strerror(e));
	}
	return 0;
}

int cmd_conformance(struct session *s, int argc, char **argv)
{
	/* --device cpu|cuda is taken out here, so it works whether or not the
	 * command table lists it */
	const char *device = "cpu";
	char **av = calloc((size_t)argc + 1, sizeof(*av));
	if (!av)
		return sh_error(s, "conformance: out of memory");
	int ac = 0;
	bool opts_done = false;
	for (int i = 0; i < argc; i++) {
		if (i > 0 && !opts_done && !strcmp(argv[i], "--"))
			opts_done = true;
		if (i > 0 && !opts_done && !strcmp(argv[i], "--device")) {
			if (i + 1 >= argc) {
				free(av);
				return sh_error(s, "conformance: option '--device' needs a value");
			}
			device = argv[++i];
			continue;
		}
		if (i > 0 && !opts_done && !strncmp(argv[i], "--device=", 9)) {
			device = argv[i] + 9;
			continue;
		}
		av[ac++] = argv[i];
	}
	struct sh_args a;
	int prc = sh_parse_args(s, sh_find_command(argv[0]), ac, av, &a);
	free(av);   /* a.pos and the options point into argv's strings */
	if (prc)
		return -1;
	if (a.npos < 1 || a.npos > 16)
		return sh_usage(s, argv[0]);
	struct exec_conf_opts o = { .filter = sh_opt(&a, "filter"), .in_process = sh_flag(&a, "in-process") };
	const char *v;
	if ((v = sh_opt(&a, "timeout"))) {
		char *end;
		long t = strtol(v, &end, 10);
		if (*end || t <= 0 || t > 86400)
			return sh_error(s, "conformance: --timeout must be seconds between 1 and 86400, not '%s'", sh_esc(v));
		o.timeout_s = (int)t;
	}
	long floor_n = -1;
	if ((v = sh_opt(&a, "floor"))) {
		char *end;
		floor_n = strtol(v, &end, 10);
		if (*end || floor_n < 0)
			return sh_error(s, "conformance: --floor must be a count of tests, not '%s'", sh_esc(v));
	}
	if ((v = sh_opt(&a, "backend")) && !strcmp(v, "cuda"))
		device = "cuda";   /* the GPU is a device of the planner, not a backend of exec_run */
	else if (v && strcmp(v, "cpu"))   /* the CPU reference interpreter is the only other one */
		return sh_error(s, "conformance: no backend '%s' (there is: cpu)", sh_esc(v));
	if (strcmp(device, "cpu") && strcmp(device, "cuda"))
		return sh_error(s, "conformance: no device '%s' (there is: cpu, cuda)", sh_esc(device));
	struct conf_state c = { .s = s, .verbose = sh_flag(&a, "verbose"), .json = sh_flag(&a, "json"),
				.keep = sh_opt(&a, "report") != NULL, .gpu = !strcmp(device, "cuda") };
	if (c.json) {
		sh_json_begin(&c.j, s->out);
		sh_json_obj(&c.j);
		sh_json_key(&c.j, "tests");
		sh_json_arr(&c.j);
	}
	struct ir_diag d;
	ir_diag_init(&d);
	int rc = 0;
	for (int i = 0; i < a.npos && !rc; i++) {
		const char *base = strrchr(a.pos[i], '/');
		base = base && base[1] ? base + 1 : a.pos[i];
		snprintf(c.suites[i].name, sizeof(c.suites[i].name), "%s", base);
		c.n_suites = i + 1;
		rc = exec_conformance_on(a.pos[i], &o, device, each, &c, &d);
	}
	if (s->interactive)
		sh_progress_done();
	if (c.json) {
		sh_json_arr_end(&c.j);
		sh_json_key(&c.j, "suites");
		sh_json_obj(&c.j);
		for (int i = 0; i < c.n_suites; i++) {
			sh_json_key(&c.j, c.suites[i].name);
			sh_json_obj(&c.j);
			sh_json_kint(&c.j, "total", c.suites[i].total);
			for (int k = 0; k <= EXEC_CONF_TIMEOUT; k++)
				sh_json_kint(&c.j, exec_conf_status_name(k), c.suites[i].counts[k]);
			if (c.gpu) {
				sh_json_kint(&c.j, "on_gpu", c.suites[i].on_gpu);
				sh_json_kint(&c.j, "passed_on_gpu", c.suites[i].passed_on_gpu);
				sh_json_kint(&c.j, "cpu_only", c.suites[i].cpu_only);
			}
			sh_json_obj_end(&c.j);
		}
		sh_json_obj_end(&c.j);
		sh_json_kint(&c.j, "total", c.total);
		for (int i = 0; i <= EXEC_CONF_TIMEOUT; i++)
			sh_json_kint(&c.j, exec_conf_status_name(i), c.counts[i]);
		if (c.gpu) {
			sh_json_kstr(&c.j, "device", "cuda");
			sh_json_kint(&c.j, "on_gpu", c.on_gpu);
			sh_json_kint(&c.j, "passed_on_gpu", c.passed_on_gpu);
			sh_json_kint(&c.j, "cpu_only", c.cpu_only);
		}
		sh_json_obj_end(&c.j);
		sh_json_end(&c.j);
	}
	if (rc) {
		free(c.ops);
		free(c.res);
		ir_diag_prefix(&d, "conformance");
		return sh_diag(s, &d);
	}
	ir_diag_clear(&d);
	if (!c.json)
		sh_printf(s, "%d test%s: %d passed, %d failed, %d unsupported, %d errors, %d crashed, %d timed out (%.1f%% pass)\n",
			  c.total, c.total == 1 ? "" : "s", c.counts[EXEC_CONF_PASS], c.counts[EXEC_CONF_FAIL], c.counts[EXEC_CONF_UNSUPPORTED],
			  c.counts[EXEC_CONF_ERROR], c.counts[EXEC_CONF_CRASH], c.counts[EXEC_CONF_TIMEOUT],
			  c.total ? 100.0 * c.counts[EXEC_CONF_PASS] / c.total : 0.0);
	if (!c.json && c.gpu)
		sh_printf(s, "on the GPU: %d test%s had nodes on the GPU (%d passed), %d ran entirely on the CPU (cpu-only)\n",
			  c.on_gpu, c.on_gpu == 1 ? "" : "s", c.passed_on_gpu, c.cpu_only);
	int ret = 0;
	if (sh_opt(&a, "report") && write_report(s, &c, sh_opt(&a, "report"), o.filter))
		ret = -1;
	if (!ret && floor_n >= 0 && c.counts[EXEC_CONF_PASS] < floor_n)
		ret = sh_error(s, "conformance: %d test%s passed, fewer than the floor of %ld", c.counts[EXEC_CONF_PASS],
				   c.counts[EXEC_CONF_PASS] == 1 ? "" : "s", floor_n);
	free(c.ops);
	free(c.res);
	return ret;
}
