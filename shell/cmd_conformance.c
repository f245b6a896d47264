/*
 * cmd_conformance.c - `conformance DIR`: runs ONNX backend test folders on
 * a backend, prints what did not pass, and writes a per-op report.
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
};

struct conf_state {
	struct session *s;
	struct suite_row suites[16];
	int n_suites;
	bool verbose, json;
	struct sh_json j;
	int counts[EXEC_CONF_TIMEOUT + 1];
	int total;
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

static void each(void *arg, const struct exec_conf_result *r)
{
	struct conf_state *c = arg;
	struct session *s = c->s;
	c->total++;
	c->counts[r->status]++;
	struct suite_row *su = &c->suites[c->n_suites - 1];
	su->total++;
	su->counts[r->status]++;
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
		sh_json_obj_end(&c->j);
	} else if (r->status != EXEC_CONF_PASS || c->verbose) {
		if (s->interactive)
			sh_progress_done();
		const char *col = r->status == EXEC_CONF_PASS ? SH_GREEN : r->status == EXEC_CONF_UNSUPPORTED ? SH_YELLOW : SH_RED;
		if (r->status == EXEC_CONF_PASS)
			sh_printf(s, "%s: %s%s%s (max abs err %.3g, %.1f ms)\n", sh_esc(r->test), sh_c(s, col),
				  exec_conf_status_name(r->status), sh_c(s, SH_RESET), r->max_err, r->ms);
		else
			sh_printf(s, "%s: %s%s%s: %s\n", sh_esc(r->test), sh_c(s, col), exec_conf_status_name(r->status),
				  sh_c(s, SH_RESET), sh_esc(r->detail));
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
	fprintf(f, "# Conformance\n\n");
	fprintf(f, "Written by `ogsh -c 'conformance DIR... --report FILE'` (tests/conformance/run.py --update; do not "
		   "edit by hand). Each test's model runs on the cpu backend for every test_data_set_N; outputs are "
		   "compared with |a-b| <= atol + rtol*|b| at rtol 1e-3, atol 1e-7 (ONNX's defaults; densenet121 rtol "
		   "2e-3 as in ONNX's test list; integers exact). The data is the onnx package's backend test data.\n\n");
	if (filter)
		fprintf(f, "Filter: `%s`\n\n", filter);
	fprintf(f, "| suite | tests | passed | failed | unsupported | error | crashed | timed out | pass rate |\n");
	fprintf(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (int i = 0; i < c->n_suites; i++)
		report_counts(f, c->suites[i].name, c->suites[i].total, c->suites[i].counts);
	if (c->n_suites > 1)
		report_counts(f, "all", c->total, c->counts);
	fprintf(f, "\n");
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
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
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
	if ((v = sh_opt(&a, "backend")) && !(o.backend = exec_backend_find(v)))
		return sh_error(s, "conformance: no backend '%s' (there is: cpu)", sh_esc(v));
	struct conf_state c = { .s = s, .verbose = sh_flag(&a, "verbose"), .json = sh_flag(&a, "json"),
				.keep = sh_opt(&a, "report") != NULL };
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
		rc = exec_conformance(a.pos[i], &o, each, &c, &d);
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
			sh_json_obj_end(&c.j);
		}
		sh_json_obj_end(&c.j);
		sh_json_kint(&c.j, "total", c.total);
		for (int i = 0; i <= EXEC_CONF_TIMEOUT; i++)
			sh_json_kint(&c.j, exec_conf_status_name(i), c.counts[i]);
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
