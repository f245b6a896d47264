/*
 * conformance.c - runs ONNX backend tests (a folder per test with
 * model.onnx and test_data_set_N/{input,output}_N.pb) and compares the
 * outputs under ONNX's tolerances. Each test runs in a child process with a
 * time limit, so a crash or a hang is a result, not the end of the run.
 *
 * On the cuda device each test's model goes through the GPU planner
 * (exec_plan_new/exec_plan_run): nodes the GPU cannot run fall back to the
 * CPU, and each result says how many nodes ran where. CUDA is never
 * touched in the parent process (a CUDA context does not survive fork), so
 * even the check for a GPU runs in a child.
 */
#include "exec/exec.h"
#include "exec/exec_io.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* What a child sends back. */
struct conf_msg {
	struct exec_conf_result r;
	int n_gpu, n_cpu, n_folded;
};

const char *exec_conf_status_name(enum exec_conf_status s)
{
	switch (s) {
	case EXEC_CONF_PASS: return "passed";
	case EXEC_CONF_FAIL: return "failed";
	case EXEC_CONF_UNSUPPORTED: return "unsupported";
	case EXEC_CONF_ERROR: return "error";
	case EXEC_CONF_CRASH: return "crashed";
	case EXEC_CONF_TIMEOUT: return "timed out";
	}
	return "?";
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the entries of `dir` for which keep() is true. */
static char **list_dir(const char *dir, bool (*keep)(const char *dir, const char *name), int *n, struct ir_diag *d)
{
	DIR *D = opendir(dir);
	char eb[128];
	*n = 0;
	if (!D) {
		ir_diag_err(d, IR_EIO, "cannot open '%s': %s", dir, ir_errstr(errno, eb, sizeof(eb)));
		return NULL;
	}
	char **a = NULL;
	int cap = 0;
	struct dirent *e;
	while ((e = readdir(D))) {
		if (e->d_name[0] == '.' || !keep(dir, e->d_name))
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 64;
			char **b = realloc(a, sizeof(*a) * (size_t)cap);
			if (!b)
				goto nomem;
			a = b;
		}
		if (!(a[*n] = strdup(e->d_name)))
			goto nomem;
		(*n)++;
	}
	closedir(D);
	if (*n)
		qsort(a, (size_t)*n, sizeof(*a), cmp_str);
	if (!a)
		a = calloc(1, sizeof(*a));
	return a;
nomem:
	closedir(D);
	for (int i = 0; i < *n; i++)
		free(a[i]);
	free(a);
	*n = 0;
	ir_diag_err(d, IR_ENOMEM, "out of memory");
	return NULL;
}

static bool is_test_dir(const char *dir, const char *name)
{
	char p[4096];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s/model.onnx", dir, name);
	return !stat(p, &st) && S_ISREG(st.st_mode);
}

/* light_NAME.onnx (the onnx package's light models: expected outputs in
 * light_NAME_output_N.pb, inputs made as the onnx test runner makes them) */
static bool is_light_model(const char *dir, const char *name)
{
	(void)dir;
	size_t n = strlen(name);
	return !strncmp(name, "light_", 6) && n > 11 && !strcmp(name + n - 5, ".onnx");
}

static bool is_data_set(const char *dir, const char *name)
{
	char p[4096];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return !strncmp(name, "test_data_set_", 14) && !stat(p, &st) && S_ISDIR(st.st_mode);
}

static void free_list(char **a, int n)
{
	for (int i = 0; i < n; i++)
		free(a[i]);
	free(a);
}

/* Compares one output; on a difference writes why into msg and returns false. */
static bool compare_value(const char *name, int idx, const struct kern_value *a, const struct kern_value *b,
			  double rtol, double *max_err, char *msg, size_t size)
{
	if (a->kind != b->kind) {
		static const char *kinds[] = { "nothing", "a tensor", "a sequence" };
		snprintf(msg, size, "output %d '%s' is %s, expected %s", idx, name, kinds[a->kind], kinds[b->kind]);
		return false;
	}
	int n = a->kind == KV_TENSOR ? 1 : a->kind == KV_SEQ ? a->n_items : 0;
	if (a->kind == KV_SEQ && a->n_items != b->n_items) {
		snprintf(msg, size, "output %d '%s' has %d items, expected %d", idx, name, a->n_items, b->n_items);
		return false;
	}
	for (int i = 0; i < n; i++) {
		const struct ir_tensor *ta = a->kind == KV_TENSOR ? a->t : a->items[i];
		const struct ir_tensor *tb = a->kind == KV_TENSOR ? b->t : b->items[i];
		char item[32] = "";
		if (a->kind == KV_SEQ)
			snprintf(item, sizeof(item), " item %d", i);
		struct exec_cmp_opts o = { .atol = 1e-7, .rtol = rtol, .topk = 0 };
		if (!ir_dtype_is_float(tb->dtype) && tb->dtype != IR_COMPLEX64 && tb->dtype != IR_COMPLEX128)
			o.atol = o.rtol = 0;
		struct exec_cmp r;
		struct ir_diag d;
		ir_diag_init(&d);
		int rc = exec_compare(ta, tb, &o, &r, &d);
		if (rc) {
			snprintf(msg, size, "output %d '%s'%s: %s", idx, name, item, d.error ? d.error : "cannot compare");
			ir_diag_clear(&d);
			return false;
		}
		ir_diag_clear(&d);
		if (!r.dtype_ok) {
			snprintf(msg, size, "output %d '%s'%s is %s, expected %s", idx, name, item,
				 ir_dtype_name(ta->dtype), ir_dtype_name(tb->dtype));
			return false;
		}
		if (!r.shape_ok) {
			char s1[128], s2[128];
			snprintf(msg, size, "output %d '%s'%s has shape %s, expected %s", idx, name, item,
				 ir_dims_str(ta->rank, ta->dims, s1, sizeof(s1)), ir_dims_str(tb->rank, tb->dims, s2, sizeof(s2)));
			return false;
		}
		if (r.max_abs > *max_err && !isnan(r.max_abs))
			*max_err = r.max_abs;
		if (!r.pass) {
			snprintf(msg, size, "output %d '%s'%s: %" PRIu64 " of %" PRIu64 " elements differ, max abs err %.3g, "
				 "worst at %" PRIu64 ": %.9g, expected %.9g", idx, name, item, r.n_bad, r.n, r.max_abs,
				 r.worst, r.worst_a, r.worst_b);
			return false;
		}
	}
	return true;
}

/* The inputs the onnx test runner gives a light model: arange(n)/n in
 * float32, unknown dims taken as 1. */
static int light_inputs(const struct ir_model *m, struct exec_values *in, struct ir_diag *d)
{
	const struct ir_graph *g = m->graph;
	for (int i = 0; i < g->n_inputs; i++) {
		const struct ir_value *v = g->inputs[i];
		if (v->init)
			continue;
		const struct ir_type *t = &v->type;
		if (t->kind != IR_TYPE_TENSOR || t->elem != IR_FLOAT || t->rank < 0)
			return ir_diag_err(d, IR_ERR, "input '%s' is not a float tensor of known rank", v->name);
		int64_t dims[IR_MAX_RANK];
		for (int j = 0; j < t->rank; j++)
			dims[j] = t->dims[j].kind == IR_DIM_VALUE ? t->dims[j].value : 1;
		struct ir_tensor *x = ir_tensor_new(IR_FLOAT, t->rank, dims, d);
		if (!x)
			return IR_ERR;
		float *p = ir_tensor_mutable(x);
		for (uint64_t k = 0; k < x->numel; k++)
			p[k] = (float)((double)k / (double)x->numel);
		int rc = exec_values_add_tensor(in, v->name, x);
		ir_tensor_unref(x);
		if (rc)
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	return 0;
}

static int light_expected(const struct ir_model *m, const char *model_path, struct exec_values *want,
			  struct ir_diag *d)
{
	char path[4096];
	size_t n = strlen(model_path);
	for (int i = 0; i < m->graph->n_outputs; i++) {
		const struct ir_value *v = m->graph->outputs[i];
		snprintf(path, sizeof(path), "%.*s_output_%d.pb", (int)(n - 5), model_path, i);
		struct kern_value kv;
		int rc = exec_read_pb_value(path, &v->type, &kv, d);
		if (rc)
			return rc;
		if (exec_values_add(want, v->name, &kv)) {
			kern_value_clear(&kv);
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
		}
	}
	return 0;
}

/* The relative tolerance of a test: ONNX's default, or the looser one its
 * test list gives a light model. */
static double test_rtol(const char *test)
{
	return strstr(test, "densenet121") ? 2e-3 : 1e-3;
}

/* Runs one data set: on the CPU reference, or through the GPU planner (the plan
 * is made on the first set and again when a set's shapes differ). */
static int run_set(const struct ir_model *m, const struct exec_values *in, bool gpu,
		   struct exec_plan **plan, struct exec_values *got, struct conf_msg *cm, struct ir_diag *d)
{
	if (!gpu) {
		struct exec_opts o = { 0 };
		return exec_run(m, in, &o, got, NULL, NULL, d);
	}
	if (*plan && !exec_plan_fits(*plan, in)) {
		exec_plan_free(*plan);
		*plan = NULL;
	}
	if (!*plan) {
		struct exec_plan_opts po = { .tf32 = false };
		struct exec_plan *p = NULL;
		int rc = exec_plan_new(m, in, &po, &p, d);
		if (rc) {
			ir_diag_prefix(d, "plan");
			return rc;
		}
		*plan = p;
		struct exec_plan_summary s;
		memset(&s, 0, sizeof(s));
		exec_plan_summary(p, &s);
		cm->n_gpu = s.n_gpu;
		cm->n_cpu = s.n_cpu;
		cm->n_folded = s.n_folded;
	}
	return exec_plan_run(*plan, in, got, NULL, NULL, d);
}

/* Runs one test in this process. */
static void run_test(const char *dir, bool gpu, struct conf_msg *cm)
{
	struct exec_conf_result *res = &cm->r;
	struct exec_plan *plan = NULL;
	struct ir_diag d;
	ir_diag_init(&d);
	char path[4096];
	size_t dl = strlen(dir);
	bool light = dl > 5 && !strcmp(dir + dl - 5, ".onnx");
	if (light)
		snprintf(path, sizeof(path), "%s", dir);
	else
		snprintf(path, sizeof(path), "%s/model.onnx", dir);
	struct ir_model *m = ir_model_load(path, NULL, &d);
	if (!m) {
		res->status = EXEC_CONF_ERROR;
		snprintf(res->detail, sizeof(res->detail), "%s", d.error ? d.error : "cannot load");
		ir_diag_clear(&d);
		return;
	}
	/* the op types, for the per-op report */
	size_t len = 0;
	res->ops[0] = 0;
	ir_for_each_node(m->graph, n) {
		char tok[160];
		snprintf(tok, sizeof(tok), "%s%s%s", n->domain && *n->domain && strcmp(n->domain, "ai.onnx") ? n->domain : "",
			 n->domain && *n->domain && strcmp(n->domain, "ai.onnx") ? ":" : "", n->op_type);
		/* once each */
		bool seen = false;
		for (const char *p = res->ops; (p = strstr(p, tok)); p += strlen(tok))
			if ((p == res->ops || p[-1] == ' ') && (p[strlen(tok)] == ' ' || !p[strlen(tok)]))
				seen = true;
		if (!seen && len + strlen(tok) + 2 < sizeof(res->ops))
			len += (size_t)snprintf(res->ops + len, sizeof(res->ops) - len, "%s%s", len ? " " : "", tok);
	}
	/* on the GPU, what the GPU cannot run falls back to the CPU */
	if (!exec_graph_runnable(m, res->detail, sizeof(res->detail))) {
		res->status = EXEC_CONF_UNSUPPORTED;
		ir_model_free(m);
		ir_diag_clear(&d);
		return;
	}
	int n_sets = 1;
	char **sets = light ? NULL : list_dir(dir, is_data_set, &n_sets, &d);
	if (light) {
		sets = calloc(1, sizeof(*sets));
		if (sets && !(sets[0] = strdup("light")))
			n_sets = 0;
	}
	res->status = EXEC_CONF_PASS;
	if (!sets || !n_sets) {
		res->status = EXEC_CONF_ERROR;
		snprintf(res->detail, sizeof(res->detail), "%s", d.error ? d.error : "no test_data_set_N folder");
	}
	for (int s = 0; sets && s < n_sets && res->status == EXEC_CONF_PASS; s++) {
		struct exec_values in = { 0 }, want = { 0 }, got = { 0 };
		snprintf(path, sizeof(path), "%s/%s", dir, sets[s]);
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		int rrc = light ? (light_inputs(m, &in, &d) || light_expected(m, dir, &want, &d))
				: exec_read_test_dir(m, path, &in, &want, &d);
		if (rrc) {
			res->status = EXEC_CONF_ERROR;
			snprintf(res->detail, sizeof(res->detail), "%s: %s", sets[s], d.error);
		} else if (run_set(m, &in, gpu, &plan, &got, cm, &d)) {
			res->status = EXEC_CONF_ERROR;
			snprintf(res->detail, sizeof(res->detail), "%s", d.error);
		} else {
			clock_gettime(CLOCK_MONOTONIC, &t1);
			res->ms += (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
			for (int i = 0; i < want.n && i < got.n; i++) {
				if (!compare_value(got.a[i].name, i, &got.a[i].v, &want.a[i].v, test_rtol(res->test), &res->max_err,
						   res->detail, sizeof(res->detail))) {
					res->status = EXEC_CONF_FAIL;
					break;
				}
			}
			if (res->status == EXEC_CONF_PASS && want.n != got.n) {
				res->status = EXEC_CONF_FAIL;
				snprintf(res->detail, sizeof(res->detail), "%d outputs, expected %d", got.n, want.n);
			}
		}
		exec_values_clear(&in);
		exec_values_clear(&want);
		exec_values_clear(&got);
		ir_diag_clear(&d);
		ir_diag_init(&d);
	}
	free_list(sets, n_sets);
	if (plan)
		exec_plan_free(plan);
	ir_model_free(m);
	ir_diag_clear(&d);
}

static bool write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		c += w;
		n -= (size_t)w;
	}
	return true;
}

/* Runs a test in a child; crash and time-out become results. */
static void run_isolated(const char *dir, const struct exec_conf_opts *o, bool gpu, struct conf_msg *cm)
{
	struct exec_conf_result *res = &cm->r;
	int p[2];
	if (pipe(p)) {
		run_test(dir, gpu, cm);
		return;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		run_test(dir, gpu, cm);
		return;
	}
	if (pid == 0) {
		close(p[0]);
		signal(SIGINT, SIG_DFL);
		run_test(dir, gpu, cm);
		_exit(write_all(p[1], cm, sizeof(*cm)) ? 0 : 1);
	}
	close(p[1]);
	struct conf_msg got;
	size_t have = 0;
	int timeout_ms = o->timeout_s > 0 ? o->timeout_s * 1000 : 60000;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	bool timed_out = false;
	while (have < sizeof(got)) {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		long el = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
		if (el >= timeout_ms || ir_interrupted) {
			timed_out = !ir_interrupted;
			break;
		}
		struct pollfd pf = { .fd = p[0], .events = POLLIN };
		int pr = poll(&pf, 1, (int)(timeout_ms - el < 200 ? timeout_ms - el : 200));
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			continue;
		ssize_t r = read(p[0], (char *)&got + have, sizeof(got) - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		have += (size_t)r;
	}
	close(p[0]);
	if (have < sizeof(got))
		kill(pid, SIGKILL);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (have == sizeof(got)) {
		*cm = got;
		return;
	}
	if (timed_out) {
		res->status = EXEC_CONF_TIMEOUT;
		snprintf(res->detail, sizeof(res->detail), "no result after %d s", timeout_ms / 1000);
	} else if (ir_interrupted) {
		res->status = EXEC_CONF_ERROR;
		snprintf(res->detail, sizeof(res->detail), "stopped");
	} else if (WIFSIGNALED(st)) {
		res->status = EXEC_CONF_CRASH;
		snprintf(res->detail, sizeof(res->detail), "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
	} else {
		res->status = EXEC_CONF_CRASH;
		snprintf(res->detail, sizeof(res->detail), "exited with status %d without a result", WEXITSTATUS(st));
	}
}

/* Whether there is a GPU to run on; asked in a child unless in_process, so
 * that this process never starts CUDA before forking the tests. */
static bool gpu_check(bool in_process, char *why, size_t size)
{
	if (in_process)
		return exec_gpu_available(why, size);
	int p[2];
	if (pipe(p)) {
		snprintf(why, size, "cannot make a pipe");
		return false;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		snprintf(why, size, "cannot fork");
		return false;
	}
	if (pid == 0) {
		close(p[0]);
		char w[256] = "";
		bool ok = exec_gpu_available(w, sizeof(w));
		_exit(write_all(p[1], w, sizeof(w)) && ok ? 0 : 1);
	}
	close(p[1]);
	char w[256];
	size_t have = 0;
	while (have < sizeof(w)) {
		ssize_t r = read(p[0], w + have, sizeof(w) - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		have += (size_t)r;
	}
	close(p[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return true;
	if (have == sizeof(w) && w[0]) {
		w[sizeof(w) - 1] = 0;
		snprintf(why, size, "%s", w);
	} else {
		snprintf(why, size, "the GPU check failed (%s)", WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "no answer");
	}
	return false;
}

struct plain_each {
	void (*each)(void *arg, const struct exec_conf_result *r);
	void *arg;
};

static void plain_each(void *arg, const struct exec_conf_result *r, int n_gpu, int n_cpu, int n_folded)
{
	(void)n_gpu, (void)n_cpu, (void)n_folded;
	struct plain_each *p = arg;
	p->each(p->arg, r);
}

int exec_conformance(const char *dir, const struct exec_conf_opts *o,
		     void (*each)(void *arg, const struct exec_conf_result *r), void *arg, struct ir_diag *d)
{
	struct plain_each p = { each, arg };
	return exec_conformance_on(dir, o, "cpu", plain_each, &p, d);
}

int exec_conformance_on(const char *dir, const struct exec_conf_opts *o, const char *device,
			void (*each)(void *arg, const struct exec_conf_result *r, int n_gpu, int n_cpu, int n_folded),
			void *arg, struct ir_diag *d)
{
	bool gpu = false;
	if (device && !strcmp(device, "cuda")) {
		char why[256] = "";
		if (!gpu_check(o->in_process, why, sizeof(why)))
			return ir_diag_err(d, IR_ERR, "cannot run on the GPU: %s", *why ? why : "no GPU");
		gpu = true;
	} else if (device && strcmp(device, "cpu")) {
		return ir_diag_err(d, IR_ERR, "no device '%s' (there is: cpu, cuda)", device);
	}
	regex_t re;
	bool have_re = false;
	if (o->filter && *o->filter) {
		int rc = regcomp(&re, o->filter, REG_EXTENDED | REG_NOSUB);
		if (rc) {
			char msg[200];
			regerror(rc, &re, msg, sizeof(msg));
			return ir_diag_err(d, IR_ERR, "bad --filter '%s': %s", o->filter, msg);
		}
		have_re = true;
	}
	struct exec_conf_opts oo = *o;
	int n = 0;
	char **tests = NULL;
	char parent[4096], single[1024];
	struct stat st;
	snprintf(parent, sizeof(parent), "%s/model.onnx", dir);
	if (!stat(parent, &st)) {
		/* DIR is one test */
		const char *slash = strrchr(dir, '/');
		snprintf(single, sizeof(single), "%s", slash && slash[1] ? slash + 1 : dir);
		tests = calloc(1, sizeof(*tests));
		if (tests && (tests[0] = strdup(dir)))
			n = 1;
	} else {
		tests = list_dir(dir, is_test_dir, &n, d);
		if (tests && !n) {
			free(tests);
			tests = list_dir(dir, is_light_model, &n, d);
		}
		if (!tests) {
			if (have_re)
				regfree(&re);
			return IR_ERR;
		}
		if (!n) {
			free(tests);
			if (have_re)
				regfree(&re);
			return ir_diag_err(d, IR_ERR, "'%s' has no tests (folders with a model.onnx, or light_*.onnx files)", dir);
		}
	}
	int rc = 0;
	for (int i = 0; i < n; i++) {
		const char *name = (n == 1 && tests[0][0] && !stat(parent, &st)) ? single : tests[i];
		char lname[256];
		if (is_light_model(dir, name)) {
			/* light_resnet50.onnx runs as test_resnet50, as in the onnx test list */
			snprintf(lname, sizeof(lname), "test_%.*s", (int)(strlen(name) - 11), name + 6);
		}
		if (have_re && regexec(&re, is_light_model(dir, name) ? lname : name, 0, NULL, 0))
			continue;
		if (ir_interrupted) {
			rc = ir_diag_err(d, IR_EINTR, "stopped");
			break;
		}
		struct conf_msg cm;
		memset(&cm, 0, sizeof(cm));
		struct exec_conf_result *r = &cm.r;
		snprintf(r->test, sizeof(r->test), "%.255s", is_light_model(dir, name) ? lname : name);
		char tdir[4096];
		if (name == single)
			snprintf(tdir, sizeof(tdir), "%s", dir);
		else
			snprintf(tdir, sizeof(tdir), "%s/%s", dir, name);
		if (oo.in_process)
			run_test(tdir, gpu, &cm);
		else
			run_isolated(tdir, &oo, gpu, &cm);
		each(arg, r, cm.n_gpu, cm.n_cpu, cm.n_folded);
	}
	free_list(tests, n);
	if (have_re)
		regfree(&re);
	return rc;
}
