/*
 * thread_ident - the CPU kernels give the same bits with any thread count.
 *
 *     thread_ident N [--small-ranges] [--shape=NAME=DIMS]... PATH...
 *
 * Runs every model under each PATH on the CPU reference with 1 thread and
 * with N threads and compares every value the main graph computes (the
 * outputs and every intermediate) bit for bit. A PATH is a model file
 * (random inputs, seed 1; the --shape options before it bind dims of that
 * model alone), a test folder holding a
 * model.onnx and test_data_set_N/ (the first data set's inputs), or a
 * folder of such folders and light_NAME.onnx files (the onnx package's
 * backend test data). Models the CPU reference cannot run with 1 thread
 * are skipped. --small-ranges runs the N-thread runs with every kernel's
 * grain capped at 1 (cpu_set_grain_cap), so small tensors are split too
 * and range edges fall everywhere. Prints a line per difference and a summary; exits 1 on any
 * difference, or when an error happens with N threads but not with 1.
 */
#include "exec/exec.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static int n_models, n_skipped, n_values, n_bad;
static struct exec_shape shapes[8];
static int n_shapes;
static bool small_ranges;

static bool same_tensor(const struct ir_tensor *a, const struct ir_tensor *b)
{
	if (!a || !b)
		return a == b;
	if (a->dtype != b->dtype || a->rank != b->rank || a->numel != b->numel)
		return false;
	for (int i = 0; i < a->rank; i++)
		if (a->dims[i] != b->dims[i])
			return false;
	if (a->dtype == IR_STRING) {
		for (uint64_t i = 0; i < a->numel; i++)
			if (a->strings[i].len != b->strings[i].len ||
			    (a->strings[i].len && memcmp(a->strings[i].data, b->strings[i].data, a->strings[i].len)))
				return false;
		return true;
	}
	if (a->nbytes != b->nbytes)
		return false;
	return !a->nbytes || !memcmp(ir_tensor_data(a), ir_tensor_data(b), a->nbytes);
}

static bool same_value(const struct kern_value *a, const struct kern_value *b)
{
	if (a->kind != b->kind)
		return false;
	if (a->kind == KV_TENSOR)
		return same_tensor(a->t, b->t);
	if (a->kind == KV_SEQ) {
		if (a->n_items != b->n_items)
			return false;
		for (int i = 0; i < a->n_items; i++)
			if (!same_tensor(a->items[i], b->items[i]))
				return false;
	}
	return true;
}

/* the second run: each value against the first run's */
struct check {
	const char *model;
	const struct exec_values *ref;
};

static int on_value(void *arg, const struct ir_value *v, const struct kern_value *kv)
{
	const struct check *c = arg;
	const struct kern_value *r = exec_values_find(c->ref, v->name);
	n_values++;
	if (!r || !same_value(r, kv)) {
		printf("DIFF %s: value '%s' differs between 1 and N threads\n", c->model, v->name);
		n_bad++;
	}
	return 0;
}

/* The inputs: the test folder's first data set, else random. */
static int inputs_for(const struct ir_model *m, const char *dir, struct exec_values *in, struct ir_diag *d)
{
	if (dir) {
		char set[4200];
		snprintf(set, sizeof(set), "%s/test_data_set_0", dir);
		struct stat st;
		if (!stat(set, &st))
			return exec_read_test_dir(m, set, in, NULL, d);
	}
	return exec_random_inputs(m, 1, shapes, n_shapes, NULL, in, d);
}

static void run_model(const char *path, const char *dir, int threads)
{
	struct ir_diag d;
	struct exec_values in = { 0 }, out1 = { 0 }, all1 = { 0 }, out2 = { 0 };
	ir_diag_init(&d);
	struct ir_model *m = ir_model_load(path, NULL, &d);
	struct exec_opts o1 = { .keep_all = true };
	if (!m || inputs_for(m, dir, &in, &d) || (cpu_set_threads(1), exec_run(m, &in, &o1, &out1, &all1, NULL, &d))) {
		/* the backend test data has models the reference cannot run;
		 * a model named on the command line must run */
		if (dir) {
			n_skipped++;
		} else {
			printf("FAIL %s: %s\n", path, d.error ? d.error : "cannot run");
			n_bad++;
		}
		goto done;
	}
	ir_diag_clear(&d);
	ir_diag_init(&d);
	struct check c = { path, &all1 };
	struct exec_opts o2 = { .on_value = on_value, .on_value_arg = &c };
	cpu_set_threads(threads);
	cpu_set_grain_cap(small_ranges ? 1 : 0);
	n_models++;
	int rc2 = exec_run(m, &in, &o2, &out2, NULL, NULL, &d);
	cpu_set_grain_cap(0);
	if (rc2) {
		printf("DIFF %s: fails with %d threads: %s\n", path, threads, d.error ? d.error : "error");
		n_bad++;
		goto done;
	}
	for (int i = 0; i < out1.n && i < out2.n; i++) {
		n_values++;
		if (!same_value(&out1.a[i].v, &out2.a[i].v)) {
			printf("DIFF %s: output '%s' differs between 1 and %d threads\n", path, out1.a[i].name, threads);
			n_bad++;
		}
	}
done:
	exec_values_clear(&in);
	exec_values_clear(&out1);
	exec_values_clear(&all1);
	exec_values_clear(&out2);
	ir_diag_clear(&d);
	if (m)
		ir_model_free(m);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_dir(const char *p)
{
	struct stat st;
	return !stat(p, &st) && S_ISDIR(st.st_mode);
}

static int run_path(const char *path, int threads)
{
	char sub[4200];
	if (!is_dir(path)) {
		run_model(path, NULL, threads);
		return 0;
	}
	snprintf(sub, sizeof(sub), "%s/model.onnx", path);
	struct stat st;
	if (!stat(sub, &st)) {
		run_model(sub, path, threads);
		return 0;
	}
	DIR *dp = opendir(path);
	if (!dp) {
		fprintf(stderr, "thread_ident: cannot open '%s'\n", path);
		return 1;
	}
	char **names = NULL;
	int n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(dp))) {
		size_t l = strlen(e->d_name);
		snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
		bool light = !strncmp(e->d_name, "light_", 6) && l > 5 && !strcmp(e->d_name + l - 5, ".onnx");
		if (e->d_name[0] == '.' || !(light || is_dir(sub)))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 256;
			char **nn = realloc(names, sizeof(*names) * (size_t)cap);
			if (!nn)
				break;
			names = nn;
		}
		names[n++] = strdup(e->d_name);
	}
	closedir(dp);
	if (n)
		qsort(names, (size_t)n, sizeof(*names), cmp_str);
	for (int i = 0; i < n; i++) {
		if (names[i]) {
			snprintf(sub, sizeof(sub), "%s/%s", path, names[i]);
			run_path(sub, threads);
		}
		free(names[i]);
	}
	free(names);
	return 0;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 0, rc = 0;
	if (threads < 2) {
		fprintf(stderr, "usage: thread_ident N [--shape=NAME=DIMS]... PATH...   (N >= 2)\n");
		return 2;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--small-ranges")) {
			small_ranges = true;
			continue;
		}
		if (!strncmp(argv[i], "--shape=", 8)) {
			struct ir_diag d;
			ir_diag_init(&d);
			if (n_shapes == 8 || exec_shape_parse(argv[i] + 8, &shapes[n_shapes], &d)) {
				fprintf(stderr, "thread_ident: bad shape '%s'\n", argv[i] + 8);
				ir_diag_clear(&d);
				return 2;
			}
			n_shapes++;
			continue;
		}
		rc |= run_path(argv[i], threads);
		exec_cache_clear();
		for (int j = 0; j < n_shapes; j++)
			exec_shape_clear(&shapes[j]);
		n_shapes = 0;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%d models compared with 1 and %d threads (%d skipped: not runnable), %d values, %d differ; %.1f s\n",
	       n_models, threads, n_skipped, n_values, n_bad,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	cpu_pool_stop();
	return rc || n_bad ? 1 : 0;
}
