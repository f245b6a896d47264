/*
 * roundtrip.c - load, clone, save and reload ONNX models, checking after
 * each step that the IR is consistent (ir_verify) and unchanged
 * (ir_model_equal: every name, attribute, type, tensor byte).
 *
 *   roundtrip OUTDIR MODEL...
 *
 * Each MODEL is saved in OUTDIR under a name made from its path (and once
 * more with external data, "-ext"). Prints "ok MODEL OUT" or "FAIL MODEL: why" per model;
 * exits 1 if any failed. tests/roundtrip.py runs it over the ONNX backend
 * test data and checks the saved files with the onnx package.
 */
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *model, const char *step, struct ir_diag *d, const char *why)
{
	printf("FAIL %s: %s: %s\n", model, step, why ? why : d && d->error ? d->error : "?");
	ir_diag_clear(d);
	return 1;
}

/* A file name made from the model's path, unique across calls. */
static void out_name(char *buf, size_t size, const char *outdir, const char *model, const char *suffix)
{
	size_t len = strlen(model);
	const char *p = len > 120 ? model + len - 120 : model;
	int n = snprintf(buf, size, "%s/", outdir);
	for (; *p && (size_t)n + 16 < size; p++)
		buf[n++] = (*p == '/' || *p == '.') ? '_' : *p;
	snprintf(buf + n, size - (size_t)n, "%s.onnx", suffix);
}

static int one(const char *model, const char *outdir)
{
	struct ir_diag d;
	ir_diag_init(&d);
	char why[1024] = "", out[4096], ext[4096];
	struct ir_model *a = ir_model_load(model, NULL, &d);
	if (!a)
		return fail(model, "load", &d, NULL);
	int rc = 0;
	struct ir_model *b = NULL, *c = NULL, *e = NULL;
	if (ir_model_verify(a, &d)) {
		rc = fail(model, "verify after load", &d, NULL);
		goto out;
	}
	b = ir_model_clone(a);
	if (!b || ir_model_verify(b, &d) || !ir_model_equal(a, b, why, sizeof(why))) {
		rc = fail(model, "clone", &d, b ? why : "out of memory");
		goto out;
	}
	out_name(out, sizeof(out), outdir, model, "");
	if (ir_model_save(b, out, NULL, &d)) {
		rc = fail(model, "save", &d, NULL);
		goto out;
	}
	c = ir_model_load(out, NULL, &d);
	if (!c || ir_model_verify(c, &d)) {
		rc = fail(model, "reload", &d, NULL);
		goto out;
	}
	if (!ir_model_equal(a, c, why, sizeof(why))) {
		rc = fail(model, "saved model differs", &d, why);
		goto out;
	}
	out_name(ext, sizeof(ext), outdir, model, "-ext");
	struct ir_save_opts o = { .external = IR_EXT_ALL, .threshold = 16 };
	if (ir_model_save(a, ext, &o, &d)) {
		rc = fail(model, "save with external data", &d, NULL);
		goto out;
	}
	e = ir_model_load(ext, NULL, &d);
	if (!e || ir_model_verify(e, &d)) {
		rc = fail(model, "reload with external data", &d, NULL);
		goto out;
	}
	if (!ir_model_equal(a, e, why, sizeof(why))) {
		rc = fail(model, "model saved with external data differs", &d, why);
		goto out;
	}
	printf("ok %s %s\n", model, out);
out:
	ir_diag_clear(&d);
	ir_model_free(a);
	ir_model_free(b);
	ir_model_free(c);
	ir_model_free(e);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: roundtrip OUTDIR MODEL...\n");
		return 2;
	}
	int failed = 0;
	for (int i = 2; i < argc; i++)
		failed += one(argv[i], argv[1]);
	fflush(stdout);
	return failed ? 1 : 0;
}
