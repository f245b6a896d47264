/*
 * test_convert_float.c - the calibrated rules of convert-fp16 and
 * convert-bf16 (passes/convert_float.c), which tests/passes cannot reach
 * without a calibration: a struct ir_calib built by hand (ranges and
 * histograms set directly) is given to pass_run_calib on the built-in demo
 * CNN, and the report must keep the right nodes float32 and name the value.
 * Also: the same model without calibration, data-max raised, bfloat16's
 * default, the calibrated long-sum rule, and max-reduction from the shapes.
 */
#include "passes/pass.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, checks;

#define CHECK(c) do { checks++; if (!(c)) { failures++; fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); } } while (0)

/* The message about node `node` of kind `kind` containing `sub`, or NULL. */
static const struct pass_msg *find_msg(const struct pass_report *r, enum pass_msg_kind kind, const char *node,
				       const char *sub)
{
	for (int i = 0; i < r->n_msgs; i++) {
		const struct pass_msg *m = &r->msgs[i];
		if (m->kind == kind && (!node || (m->node && !strcmp(m->node, node))) && strstr(m->text, sub))
			return m;
	}
	return NULL;
}

static bool kept(const struct pass_report *r, const char *node)
{
	return find_msg(r, PASS_REJECTED, node, "kept float32") != NULL;
}

static void dump(const struct pass_report *r)
{
	for (int i = 0; i < r->n_msgs; i++)
		fprintf(stderr, "  %d %s: %s\n", r->msgs[i].kind, r->msgs[i].node ? r->msgs[i].node : "-", r->msgs[i].text);
}

/* The name of node `name`'s first output in m. */
static const char *out_of(const struct ir_model *m, const char *name)
{
	int count = 0;
	const struct ir_node *n = ir_node_by_name(m->graph, name, &count);
	return n && n->n_outputs > 0 && n->outputs[0] ? n->outputs[0]->name : "?";
}

/* A calibrated tensor seen with range [lo, hi] (no histogram). */
static struct ir_calib_tensor *cal_range(struct ir_calib *c, const char *name, double lo, double hi)
{
	struct ir_calib_tensor *t = ir_calib_add_tensor(c, name);
	if (!t)
		return NULL;
	t->count = 1000;
	t->batches = 1;
	t->min = t->ema_min = lo;
	t->max = t->ema_max = hi;
	return t;
}

/* Runs pass `pass` with args on a fresh demo model; returns the model (the caller frees it). */
static struct ir_model *run(const char *pass, const struct pass_arg *args, int n_args, const struct ir_calib *cal,
			    struct pass_report *rep, int *rc)
{
	struct ir_model *m = ir_demo_model();
	struct ir_diag d;
	ir_diag_init(&d);
	*rc = -1;
	if (!m) {
		pass_report_init(rep, pass);
		return NULL;
	}
	*rc = pass_run_calib(m, pass_find(pass), args, n_args, cal, rep, &d);
	if (*rc)
		fprintf(stderr, "%s: %s\n", pass, d.error ? d.error : "?");
	ir_diag_clear(&d);
	return m;
}

static int count_op(const struct ir_model *m, const char *op)
{
	int k = 0;
	ir_for_each_node(m->graph, n)
		k += !strcmp(n->op_type, op);
	return k;
}

/* data-max: relu2's output reaches 10000 on the calibration data, above 4096 */
static void test_data_max(void)
{
	struct ir_model *m0 = ir_demo_model();
	CHECK(m0 != NULL);
	if (!m0)
		return;
	char r2[256], r2reader[256] = "";
	snprintf(r2, sizeof(r2), "%s", out_of(m0, "relu2"));
	const struct ir_value *v = ir_value_find(m0->graph, r2);
	for (size_t u = 0; v && u < v->n_uses; u++)
		if (v->uses[u].node->name && *v->uses[u].node->name)
			snprintf(r2reader, sizeof(r2reader), "%s", v->uses[u].node->name);
	CHECK(*r2reader);
	ir_model_free(m0);

	struct ir_calib cal;
	ir_calib_init(&cal);
	CHECK(cal_range(&cal, r2, 0, 10000) != NULL);
	CHECK(cal_range(&cal, "image", -2.5, 2.5) != NULL);
	CHECK(ir_calib_find(&cal, r2) != NULL);

	struct pass_report rep;
	int rc;
	struct ir_model *m = run("convert-fp16", NULL, 0, &cal, &rep, &rc);
	CHECK(rc == 0);
	/* relu2 writes it, its reader reads it: both float32, each naming the tensor and the value */
	char want[400];
	snprintf(want, sizeof(want), "its output '%s' reaches |x| = 10000 (calibration), above data-max 4096: kept float32", r2);
	CHECK(find_msg(&rep, PASS_REJECTED, "relu2", want) != NULL);
	snprintf(want, sizeof(want), "its input '%s' reaches |x| = 10000 (calibration), above data-max 4096", r2);
	CHECK(find_msg(&rep, PASS_REJECTED, r2reader, want) != NULL);
	CHECK(find_msg(&rep, PASS_NOTE, NULL, "with calibration") != NULL);
	/* the rest is converted; the image (|x| 2.5) is fine */
	CHECK(!kept(&rep, "relu1") && !kept(&rep, "fc") && !kept(&rep, "relu4"));
	CHECK(find_msg(&rep, PASS_REWROTE, "relu1", "in float16") != NULL);
	CHECK(m && count_op(m, "Cast") >= 3);   /* image, into and out of the float32 island, probs */
	if (failures || getenv("DUMP"))
		dump(&rep);
	pass_report_clear(&rep);
	ir_model_free(m);

	/* without calibration the rule does not run */
	m = run("convert-fp16", NULL, 0, NULL, &rep, &rc);
	CHECK(rc == 0 && !kept(&rep, "relu2") && !kept(&rep, r2reader));
	CHECK(find_msg(&rep, PASS_NOTE, NULL, "with calibration") == NULL);
	CHECK(m && count_op(m, "Cast") == 2);   /* a chain: one Cast in, one out */
	pass_report_clear(&rep);
	ir_model_free(m);

	/* data-max raised above the value */
	struct pass_arg a = { "data-max", "20000" };
	m = run("convert-fp16", &a, 1, &cal, &rep, &rc);
	CHECK(rc == 0 && !kept(&rep, "relu2"));
	pass_report_clear(&rep);
	ir_model_free(m);

	/* bfloat16 has float32's range: its default data-max (1e30) keeps nothing */
	m = run("convert-bf16", NULL, 0, &cal, &rep, &rc);
	CHECK(rc == 0 && !kept(&rep, "relu2"));
	pass_report_clear(&rep);
	ir_model_free(m);

	/* a lower data-max catches the image too */
	struct pass_arg low = { "data-max", "2" };
	m = run("convert-fp16", &low, 1, &cal, &rep, &rc);
	CHECK(rc == 0);
	CHECK(find_msg(&rep, PASS_REJECTED, NULL, "its input 'image' reaches |x| = 2.5 (calibration), above data-max 2") != NULL);
	pass_report_clear(&rep);
	ir_model_free(m);
	ir_calib_clear(&cal);
}

/* The calibrated long-sum rule and max-reduction: the GlobalAveragePool sums 16x16 = 256 values */
static void test_sums(void)
{
	struct ir_model *m0 = ir_demo_model();
	if (!m0)
		return;
	char r4[256];
	snprintf(r4, sizeof(r4), "%s", out_of(m0, "relu4"));
	ir_model_free(m0);

	/* every |x| near 300 (below data-max): 256 of them sum to about 76,800, past 65,504 */
	struct ir_calib cal;
	ir_calib_init(&cal);
	struct ir_calib_tensor *t = cal_range(&cal, r4, 0, 400);
	CHECK(t != NULL);
	if (!t)
		return;
	t->hist_max = 409.6;
	t->hist[1500] = 1000;   /* bin 1500 of 2048 over [0, 409.6]: |x| about 300.1 */
	struct pass_report rep;
	int rc;
	struct ir_model *m = run("convert-fp16", NULL, 0, &cal, &rep, &rc);
	CHECK(rc == 0);
	CHECK(find_msg(&rep, PASS_REJECTED, "gap", "GlobalAveragePool over 256 elements: its sum of |x| reaches about "
		       "7.68e+04 (mean |x| 300 by calibration), above float16's largest 65504: kept float32") != NULL);
	CHECK(!kept(&rep, "relu4"));
	if (failures || getenv("DUMP"))
		dump(&rep);
	pass_report_clear(&rep);
	ir_model_free(m);

	/* values near 200 sum to 51,200: converted */
	t->hist[1500] = 0;
	t->hist[1000] = 1000;
	m = run("convert-fp16", NULL, 0, &cal, &rep, &rc);
	CHECK(rc == 0 && !kept(&rep, "gap"));
	pass_report_clear(&rep);
	ir_model_free(m);
	ir_calib_clear(&cal);

	/* max-reduction from the shapes alone (no calibration) */
	struct pass_arg a = { "max-reduction", "100" };
	m = run("convert-fp16", &a, 1, NULL, &rep, &rc);
	CHECK(rc == 0);
	CHECK(find_msg(&rep, PASS_REJECTED, "gap", "GlobalAveragePool over 256 elements, deeper than max-reduction 100: "
		       "kept float32") != NULL);
	/* the Softmax over 10 classes is not deep */
	CHECK(!kept(&rep, "softmax"));
	pass_report_clear(&rep);
	ir_model_free(m);
}

/* A calibration from random data says so in the report */
static void test_random_note(void)
{
	struct ir_calib cal;
	ir_calib_init(&cal);
	cal.random = true;
	CHECK(cal_range(&cal, "image", -1, 1) != NULL);
	struct pass_report rep;
	int rc;
	struct ir_model *m = run("convert-fp16", NULL, 0, &cal, &rep, &rc);
	CHECK(rc == 0 && find_msg(&rep, PASS_NOTE, NULL, "from random data") != NULL);
	pass_report_clear(&rep);
	ir_model_free(m);
	ir_calib_clear(&cal);
}

int main(void)
{
	test_data_max();
	test_sums();
	test_random_note();
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
