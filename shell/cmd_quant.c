/*
 * cmd_quant.c - quantization: calibrate (the statistics of a float stage's
 * activations over a dataset), calib (their ranges under each method, and
 * a histogram plot), quantize (the quantize pass with the session's
 * calibration; --auto keeps the most sensitive nodes in float until a
 * target holds), convert-fp16 and convert-bf16, sensitivity (each
 * quantized node's share of the error) and eval (a stage over a whole
 * dataset against another stage or labels).
 *
 * The calibration is session data (DESIGN.md): the session keeps one
 * struct ir_calib and the stage it belongs to; quantize and convert-fp16
 * get it with its value names mapped to the current stage through the
 * stage history. Activations are never kept by calibrate: on the CPU each
 * value is observed as it is computed (exec_opts.on_value); on the GPU a
 * batch runs with every value kept on the device, and each one's
 * statistics are computed there (exec_plan_calib_observe): only they come
 * back to the host.
 */
#include "shell.h"
#include "exec/exec_io.h"

#include <cairo.h>
#include <cairo-svg.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RANDOM_NOTE "ranges from random data: meaningless for accuracy"
#define RANDOM_EVAL_NOTE "random inputs: these figures say nothing about accuracy on real data"

static const struct ir_calib_how methods[] = {
	{ IR_CALIB_MAX, 0 }, { IR_CALIB_PERCENTILE, 99.99 }, { IR_CALIB_ENTROPY, 0 }, { IR_CALIB_MSE, 0 },
};
#define N_METHODS ((int)(sizeof(methods) / sizeof(methods[0])))

/* ------------------------------------------------------------------------ */
/* The session's state                                                       */
/* ------------------------------------------------------------------------ */

static void rec_clear(struct sh_quant_rec *r)
{
	for (int i = 0; i < r->n_args; i++) {
		free(r->names[i]);
		free(r->values[i]);
	}
	r->n_args = 0;
}

void sh_quant_forget(struct session *s)
{
	if (s->have_calib)
		ir_calib_clear(&s->calib);
	s->have_calib = false;
	free(s->calib_data);
	free(s->calib_pre);
	s->calib_data = s->calib_pre = NULL;
	for (int i = 0; i < s->n_qrec; i++)
		rec_clear(&s->qrec[i]);
	free(s->qrec);
	s->qrec = NULL;
	s->n_qrec = s->cap_qrec = 0;
}

/* The record of the stage quantize made as `stage`, or NULL (another
 * command made it, or it was dropped and its number reused). */
static const struct sh_quant_rec *rec_find(const struct session *s, int stage)
{
	for (int i = 0; i < s->n_qrec; i++) {
		const struct sh_quant_rec *r = &s->qrec[i];
		if (r->stage == stage && stage < s->hist.n && s->hist.st[stage].m == r->m && r->from < s->hist.n)
			return r;
	}
	return NULL;
}

/* Remembers how the current stage was made from stage `from`. */
static void rec_add(struct session *s, int from, const struct pass_arg *args, int n_args)
{
	struct sh_quant_rec *r = NULL;
	for (int i = 0; i < s->n_qrec && !r; i++)
		if (s->qrec[i].stage == s->stage)
			r = &s->qrec[i];
	if (!r) {
		if (s->n_qrec == s->cap_qrec) {
			int cap = s->cap_qrec ? 2 * s->cap_qrec : 8;
			struct sh_quant_rec *x = realloc(s->qrec, sizeof(*x) * (size_t)cap);
			if (!x)
				return;   /* sensitivity will say it has no record */
			s->qrec = x;
			s->cap_qrec = cap;
		}
		r = &s->qrec[s->n_qrec++];
		r->n_args = 0;
	}
	rec_clear(r);
	r->stage = s->stage;
	r->m = s->model;
	r->from = from;
	for (int i = 0; i < n_args && i < 16; i++) {
		r->names[r->n_args] = strdup(args[i].name);
		r->values[r->n_args] = strdup(args[i].value);
		if (!r->names[r->n_args] || !r->values[r->n_args]) {
			free(r->names[r->n_args]);
			free(r->values[r->n_args]);
			break;
		}
		r->n_args++;
	}
}

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

static bool ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);
	return n >= m && !strcmp(s + n - m, suf);
}

static const char *num(double v, char *buf, size_t size)
{
	if (isnan(v))
		snprintf(buf, size, "-");
	else if (isinf(v))
		snprintf(buf, size, v > 0 ? "inf" : "-inf");
	else
		snprintf(buf, size, "%.4g", v);
	return buf;
}

static int parse_seed(struct session *s, const char *cmd, const char *v, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (!*v || *end || errno || *v == '-')
		return sh_error(s, "%s: --seed must be a whole number, not '%s'", cmd, sh_esc(v));
	*out = x;
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
	if (v && strcmp(v, "cuda"))
		return sh_error(s, "%s: --device must be cpu or cuda, not '%s'", cmd, sh_esc(v));
	bool avail = exec_gpu_available(why, sizeof(why));
	if (v && !avail)
		return sh_error(s, "%s: --device cuda: %s", cmd, why);
	*gpu = avail;
	return 0;
}

/* Progress on stderr, per batch, when stderr is a terminal and the work
 * has taken a second (quick commands print nothing). */
struct prog {
	const char *verb;
	bool on, shown;
	double t0;
};

static void prog_init(struct prog *p, const char *verb)
{
	p->verb = verb;
	p->on = isatty(STDERR_FILENO);
	p->shown = false;
	p->t0 = exec_now_ms();
}

static void prog_show(struct prog *p, const char *what, int done, int total)
{
	if (!p->on || (!p->shown && exec_now_ms() - p->t0 < 1000))
		return;
	fflush(stdout);
	if (total > 0)
		fprintf(stderr, "\r%s: %s %d of %d\033[K", p->verb, what, done, total);
	else
		fprintf(stderr, "\r%s: %s %d\033[K", p->verb, what, done);
	p->shown = true;
}

static void prog_done(struct prog *p)
{
	if (p->shown)
		fputs("\r\033[K", stderr);
	p->shown = false;
}

/* Prints a diag's warnings as "cmd: ..." and empties it. */
static void warn_all(struct session *s, const char *cmd, struct ir_diag *d)
{
	for (size_t i = 0; i < d->n_warnings; i++)
		sh_warn(s, "%s: %s", cmd, sh_esc(d->warnings[i]));
	if (d->dropped)
		sh_warn(s, "%s: %zu more warnings", cmd, d->dropped);
	char *err = d->error;
	d->error = NULL;
	ir_diag_clear(d);
	ir_diag_init(d);
	d->error = err;
}

/* Prefixes the error with "cmd: " unless it already starts so (the pass
 * manager names the pass, which for quantize is the command's name). */
static void prefix_once(struct ir_diag *d, const char *cmd)
{
	size_t n = strlen(cmd);
	if (d->error && !(strncmp(d->error, cmd, n) == 0 && d->error[n] == ':'))
		ir_diag_prefix(d, "%s", cmd);
}

/* ------------------------------------------------------------------------ */
/* Datasets                                                                  */
/* ------------------------------------------------------------------------ */

struct data_args {
	const char *spec, *pre;
	int batch, batches;
	uint64_t seed;
};

/* --data, --preprocess, --batch, --batches, --seed. */
static int data_args_get(struct session *s, const char *cmd, const struct sh_args *a, struct data_args *o)
{
	memset(o, 0, sizeof(*o));
	o->spec = sh_opt(a, "data");
	o->pre = sh_opt(a, "preprocess");
	const char *v;
	if (o->spec && !*o->spec)
		return sh_error(s, "%s: --data is empty", cmd);
	if ((v = sh_opt(a, "batch")) && sh_int_opt(s, cmd, "batch", v, 1, &o->batch))
		return -1;
	if ((v = sh_opt(a, "batches")) && sh_int_opt(s, cmd, "batches", v, 1, &o->batches))
		return -1;
	if ((v = sh_opt(a, "seed")) && parse_seed(s, cmd, v, &o->seed))
		return -1;
	return 0;
}

static int data_open(struct session *s, const char *cmd, const struct ir_model *m, const struct data_args *o,
		     struct exec_data **ds)
{
	struct exec_data_opts eo = {
		.spec = o->spec, .preprocess = o->pre, .batch = o->batch, .max_batches = o->batches, .seed = o->seed,
		.skip_bad = s->on_error_continue,
	};
	struct ir_diag d;
	ir_diag_init(&d);
	d.max_warnings = 20;
	*ds = NULL;
	if (exec_data_open(m, &eo, ds, &d)) {
		ir_diag_prefix(&d, "%s", cmd);
		return sh_diag(s, &d);
	}
	warn_all(s, cmd, &d);
	ir_diag_clear(&d);
	return 0;
}

/* The number of batches when the sample count is known, else 0. */
static int data_batches(const struct exec_data *ds)
{
	uint64_t n = exec_data_samples(ds);
	int b = exec_data_batch(ds);
	if (!n || b <= 0)
		return 0;
	return (int)((n + (uint64_t)b - 1) / (uint64_t)b);
}

/* ------------------------------------------------------------------------ */
/* Running a stage on batches: the CPU reference, or a GPU plan              */
/* ------------------------------------------------------------------------ */

struct runner {
	const struct ir_model *m;
	bool gpu, keep_all, tf32;
	struct exec_plan *plan;    /* GPU: for the shapes of the last batch */
};

static void runner_free(struct runner *r)
{
	exec_plan_free(r->plan);
	r->plan = NULL;
}

/* The entries of `in` that are inputs of m's graph (a stage may have lost
 * an input that a pass removed). */
static int inputs_for(const struct ir_model *m, const struct exec_values *in, struct exec_values *out,
		      struct ir_diag *d)
{
	for (int i = 0; i < in->n; i++) {
		const struct ir_value *iv = ir_value_find(m->graph, in->a[i].name);
		struct kern_value c;
		if (!iv || !iv->is_input)
			continue;
		if (kern_value_copy(&c, &in->a[i].v))
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
		if (exec_values_add(out, in->a[i].name, &c)) {
			kern_value_clear(&c);
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
		}
	}
	return 0;
}

/* Runs r->m once on `in`; outputs into `out`, every value into `all` with
 * keep_all; on the CPU each computed value also goes to on_value. */
static int runner_run(struct runner *r, const struct exec_values *in,
		      int (*on_value)(void *, const struct ir_value *, const struct kern_value *), void *arg,
		      struct exec_values *out, struct exec_values *all, struct ir_diag *d)
{
	struct exec_values mine = { 0 };
	int rc = inputs_for(r->m, in, &mine, d);
	if (!rc && r->gpu) {
		if (!r->plan || !exec_plan_fits(r->plan, &mine)) {
			runner_free(r);
			struct exec_plan_opts po = { .tf32 = r->tf32, .keep_all = r->keep_all };
			rc = exec_plan_new(r->m, &mine, &po, &r->plan, d);
		}
		if (!rc)
			rc = exec_plan_run(r->plan, &mine, out, r->keep_all ? all : NULL, NULL, d);
	} else if (!rc) {
		struct exec_opts o = { .keep_all = r->keep_all, .on_value = on_value, .on_value_arg = arg };
		rc = exec_run(r->m, &mine, &o, out, r->keep_all ? all : NULL, NULL, d);
	}
	exec_values_clear(&mine);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Observing values for calibration                                          */
/* ------------------------------------------------------------------------ */

struct observer {
	struct ir_calib *c;
	const struct ir_graph *g;
	int *slot;          /* per value (v->idx): -2 not observed, -1 not seen yet, else its index in c->t */
	bool *chan;         /* per value: keep per-channel |x| sums (the A input of MatMul/Gemm) */
	float *buf;         /* float16/bfloat16 converted */
	uint64_t cap;
	struct ir_diag d;
};

/* Whether v is the activation input of a MatMul or Gemm whose weights are constant (AWQ's salient channels). */
static bool feeds_matmul(const struct ir_value *v)
{
	for (size_t i = 0; i < v->n_uses; i++) {
		const struct ir_node *n = v->uses[i].node;
		if (v->uses[i].slot != 0 || n->n_inputs < 2 || !n->inputs[1] || !n->inputs[1]->init)
			continue;
		if (n->op == IR_OP_MatMul)
			return true;
		if ((n->op == IR_OP_Gemm || n->op == IR_OP_ogsh_FusedGemm) && !ir_node_attr_int(n, "transA", 0))
			return true;
	}
	return false;
}

static int observer_init(struct observer *ob, struct ir_calib *c, const struct ir_graph *g)
{
	memset(ob, 0, sizeof(*ob));
	ir_diag_init(&ob->d);
	ob->c = c;
	ob->g = g;
	size_t n = g->n_values ? g->n_values : 1;
	ob->slot = malloc(n * sizeof(int));
	ob->chan = calloc(n, sizeof(bool));
	if (!ob->slot || !ob->chan)
		return IR_ENOMEM;
	for (size_t i = 0; i < g->n_values; i++) {
		const struct ir_value *v = g->values[i];
		/* activations a quantization could touch: graph inputs and node
		 * outputs that some node reads; never weights */
		bool want = v && !v->init && !v->sparse_init && (v->is_input || v->producer) && v->n_uses > 0;
		ob->slot[i] = want ? -1 : -2;
		ob->chan[i] = want && feeds_matmul(v);
	}
	return 0;
}

static void observer_free(struct observer *ob)
{
	free(ob->slot);
	free(ob->chan);
	free(ob->buf);
	ir_diag_clear(&ob->d);
}

/* The statistics a batch of value v (dtype, logical dims) goes to, in
 * *out (NULL: not observed), with its n_chan; 0 or IR_ENOMEM. */
static int observed(struct observer *ob, const struct ir_value *v, int dtype, int rank, const int64_t *dims,
		    uint64_t numel, struct ir_calib_tensor **out, int *n_chan)
{
	*out = NULL;
	*n_chan = 0;
	if (v->graph != ob->g || v->idx >= ob->g->n_values || ob->g->values[v->idx] != v)
		return 0;
	int *slot = &ob->slot[v->idx];
	if (*slot == -2)
		return 0;
	if (dtype != IR_FLOAT && dtype != IR_FLOAT16 && dtype != IR_BFLOAT16) {
		*slot = -2;   /* not a float activation (the model computes it as another type) */
		return 0;
	}
	if (!numel)
		return 0;
	if (*slot == -1) {
		struct ir_calib_tensor *ct = ir_calib_add_tensor(ob->c, v->name);
		if (!ct)
			return ir_diag_err(&ob->d, IR_ENOMEM, "out of memory");
		*slot = (int)(ct - ob->c->t);
	}
	struct ir_calib_tensor *ct = &ob->c->t[*slot];
	if (ob->chan[v->idx] && rank >= 1 && dims[rank - 1] > 0 && dims[rank - 1] <= INT32_MAX) {
		int64_t last = dims[rank - 1];
		if (!ct->n_chan || ct->n_chan == last)
			*n_chan = (int)last;
	}
	*out = ct;
	return 0;
}

/* Adds one batch of value v (tensor t) to the statistics. */
static int observe(struct observer *ob, const struct ir_value *v, const struct ir_tensor *t)
{
	const void *data = ir_tensor_data(t);
	if (!data)
		return 0;
	struct ir_calib_tensor *ct;
	int n_chan;
	int rc = observed(ob, v, t->dtype, t->rank, t->dims, t->numel, &ct, &n_chan);
	if (rc || !ct)
		return rc;
	const float *x = data;
	if (t->dtype != IR_FLOAT) {
		if (t->numel > ob->cap) {
			float *nb = realloc(ob->buf, t->numel * sizeof(float));
			if (!nb)
				return ir_diag_err(&ob->d, IR_ENOMEM, "out of memory observing '%s'", v->name);
			ob->buf = nb;
			ob->cap = t->numel;
		}
		const uint16_t *h = data;
		for (uint64_t i = 0; i < t->numel; i++)
			ob->buf[i] = t->dtype == IR_FLOAT16 ? ir_f16_to_f32(h[i]) : ir_bf16_to_f32(h[i]);
		x = ob->buf;
	}
	return ir_calib_observe(ct, x, t->numel, n_chan, &ob->d);
}

/* Adds one batch of every value a GPU plan computed (kept on the device by
 * keep_all): statistics computed on the GPU, values the plan holds on the
 * host (made by a CPU node, folded) observed there. Graph order, as the
 * CPU reference computes them. */
static int observe_plan(struct observer *ob, struct exec_plan *plan)
{
	for (const struct ir_node *n = ob->g->first; n; n = n->next)
		for (int i = 0; i < n->n_outputs; i++) {
			const struct ir_value *v = n->outputs[i];
			if (!v || v->idx >= ob->g->n_values || ob->slot[v->idx] == -2)
				continue;
			struct exec_dev_tensor x;
			int rc = exec_plan_value(plan, v->name, &x, &ob->d);
			if (rc < 0)
				return rc;
			if (rc > 0)
				continue;   /* not computed by the plan (folded away before planning) */
			if (x.host) {
				if ((rc = observe(ob, v, x.host)))
					return rc;
				continue;
			}
			struct ir_calib_tensor *ct;
			int n_chan;
			if ((rc = observed(ob, v, x.dtype, x.rank, x.dims, x.numel, &ct, &n_chan)))
				return rc;
			if (ct && (rc = exec_plan_calib_observe(plan, &x, ct, n_chan, &ob->d)))
				return rc;
		}
	return 0;
}

static int on_value(void *arg, const struct ir_value *v, const struct kern_value *kv)
{
	struct observer *ob = arg;
	if (kv->kind != KV_TENSOR || !kv->t)
		return 0;
	return observe(ob, v, kv->t);
}

/* ------------------------------------------------------------------------ */
/* The calibration under another stage's names                               */
/* ------------------------------------------------------------------------ */

/* Copies one tensor's statistics into c under `name`; 0 or IR_ENOMEM. */
static int tensor_copy(struct ir_calib *c, const char *name, const struct ir_calib_tensor *src)
{
	struct ir_calib_tensor *t = ir_calib_add_tensor(c, name);
	if (!t)
		return IR_ENOMEM;
	t->count = src->count;
	t->n_nonfinite = src->n_nonfinite;
	t->min = src->min;
	t->max = src->max;
	t->ema_min = src->ema_min;
	t->ema_max = src->ema_max;
	t->batches = src->batches;
	t->hist_max = src->hist_max;
	if (src->hist || t->hist) {
		if (!t->hist && !(t->hist = calloc(IR_CALIB_BINS, sizeof(uint64_t))))
			return IR_ENOMEM;
		if (src->hist)
			memcpy(t->hist, src->hist, IR_CALIB_BINS * sizeof(uint64_t));
		else
			memset(t->hist, 0, IR_CALIB_BINS * sizeof(uint64_t));
	}
	if (src->n_chan > 0 && src->chan_abssum) {
		double *cs = realloc(t->chan_abssum, (size_t)src->n_chan * sizeof(double));
		if (!cs)
			return IR_ENOMEM;
		memcpy(cs, src->chan_abssum, (size_t)src->n_chan * sizeof(double));
		t->chan_abssum = cs;
		t->n_chan = src->n_chan;
		t->chan_rows = src->chan_rows;
	}
	return 0;
}

static void calib_keys_copy(struct ir_calib *to, const struct ir_calib *from)
{
	memcpy(to->model_hash, from->model_hash, sizeof(to->model_hash));
	memcpy(to->data_hash, from->data_hash, sizeof(to->data_hash));
	memcpy(to->data_desc, from->data_desc, sizeof(to->data_desc));
	to->stage = from->stage;
	to->random = from->random;
	to->samples = from->samples;
	to->batch = from->batch;
}

/*
 * Maps calibration c, whose names are those of stage `from`, to stage `to`
 * (on one line of descent): each tensor follows the pass maps to the value
 * that stands for it in `to`; those with no such value are lost. out is
 * initialised here. 0 or IR_ENOMEM.
 */
static int calib_map_to(const struct pass_history *h, const struct ir_calib *c, int from, int to, struct ir_calib *out,
			int *mapped, int *lost)
{
	ir_calib_init(out);
	calib_keys_copy(out, c);
	*mapped = *lost = 0;
	const struct ir_graph *g = h->st[to].m->graph;
	for (int i = 0; i < c->n; i++) {
		const char *nm = pass_history_map(h, from, to, c->t[i].name);
		const struct ir_value *v = nm ? ir_value_find(g, nm) : NULL;
		if (!v || v->init || ir_calib_find(out, nm)) {
			(*lost)++;
			continue;
		}
		if (tensor_copy(out, nm, &c->t[i])) {
			ir_calib_clear(out);
			return IR_ENOMEM;
		}
		(*mapped)++;
	}
	return 0;
}

/* Checks that the calibrated stage is still the one calibrated and on one
 * line with stage `to`; -1 with the error printed. */
static int calib_usable(struct session *s, const char *cmd, int to)
{
	char h[17];
	int cs = s->calib_stage;
	if (cs < 0 || cs >= s->hist.n)
		return sh_error(s, "%s: stage %d, which was calibrated, is gone: calibrate again", cmd, cs);
	ir_model_hash(s->hist.st[cs].m, h);
	if (strcmp(h, s->calib.model_hash))
		return sh_error(s, "%s: stage %d changed since it was calibrated (a new stage took its number): "
				"calibrate again", cmd, cs);
	if (!pass_history_map(&s->hist, to, cs, ""))
		return sh_error(s, "%s: the calibration is of stage %d, which is not on the line of stage %d "
				"(one must come from the other): calibrate again", cmd, cs, to);
	return 0;
}

/*
 * The session's calibration for the current stage: *cal points at the
 * session's own (same stage) or at `tmp`, filled here (clear it after).
 * Says how many tensors were mapped when the stages differ (not with json).
 * 0, or -1 with the error printed.
 */
static int calib_for_current(struct session *s, const char *cmd, bool json, struct ir_calib *tmp,
			     const struct ir_calib **cal, int *mapped, int *lost)
{
	ir_calib_init(tmp);
	*mapped = s->calib.n;
	*lost = 0;
	if (calib_usable(s, cmd, s->stage))
		return -1;
	if (s->calib_stage == s->stage) {
		*cal = &s->calib;
		return 0;
	}
	if (calib_map_to(&s->hist, &s->calib, s->calib_stage, s->stage, tmp, mapped, lost))
		return sh_error(s, "%s: out of memory", cmd);
	*cal = tmp;
	if (!json)
		sh_printf(s, "calibration of stage %d mapped to stage %d: %d tensors found, %d not in stage %d\n",
			  s->calib_stage, s->stage, *mapped, *lost, s->stage);
	return 0;
}

const struct ir_calib *sh_session_calib(struct session *s, struct ir_calib *tmp)
{
	ir_calib_init(tmp);
	if (!s->have_calib)
		return NULL;
	char h[17];
	int cs = s->calib_stage, mapped, lost;
	if (cs < 0 || cs >= s->hist.n || !pass_history_map(&s->hist, s->stage, cs, ""))
		return NULL;
	ir_model_hash(s->hist.st[cs].m, h);
	if (strcmp(h, s->calib.model_hash))
		return NULL;
	if (cs == s->stage)
		return &s->calib;
	if (calib_map_to(&s->hist, &s->calib, cs, s->stage, tmp, &mapped, &lost))
		return NULL;
	return tmp;
}

/* ------------------------------------------------------------------------ */
/* calibrate                                                                 */
/* ------------------------------------------------------------------------ */

static void json_calib_keys(struct sh_json *j, const struct session *s, const struct ir_calib *c)
{
	sh_json_kint(j, "stage", s->calib_stage);
	sh_json_kstr(j, "model_hash", c->model_hash);
	sh_json_kstr(j, "data_hash", c->data_hash);
	sh_json_kstr(j, "data", c->data_desc);
	sh_json_kbool(j, "random", c->random);
	sh_json_kuint(j, "samples", c->samples);
	sh_json_kint(j, "batch", c->batch);
	sh_json_kint(j, "tensors", c->n);
	if (c->random)
		sh_json_kstr(j, "note", RANDOM_NOTE);
}

static int save_calib(struct session *s, const char *path, bool json)
{
	struct ir_diag d;
	ir_diag_init(&d);
	if (ir_calib_save(&s->calib, path, &d)) {
		ir_diag_prefix(&d, "calibrate: --save");
		return sh_diag(s, &d);
	}
	ir_diag_clear(&d);
	if (!json)
		sh_printf(s, "saved the calibration to '%s'\n", sh_esc(path));
	return 0;
}

/* calibrate --load FILE: the cache of this stage or of one it comes from. */
static int calib_load(struct session *s, const char *path, const char *save, bool json)
{
	struct ir_calib c;
	struct ir_diag d;
	ir_diag_init(&d);
	ir_calib_init(&c);
	if (ir_calib_load(path, &c, &d)) {
		ir_diag_prefix(&d, "calibrate");
		return sh_diag(s, &d);
	}
	ir_diag_clear(&d);
	char h[17], cur[17];
	ir_model_hash(s->model, cur);
	int st = -1;
	for (int i = s->hist.cur; i >= 0 && st < 0; i = s->hist.st[i].parent) {
		if (i == s->hist.cur)
			memcpy(h, cur, sizeof(h));
		else
			ir_model_hash(s->hist.st[i].m, h);
		if (!strcmp(h, c.model_hash))
			st = i;
	}
	if (st < 0) {
		int rc = sh_error(s, "calibrate: '%s': made for another model (hash %s, this stage is %s)", sh_esc(path),
				  c.model_hash, cur);
		ir_calib_clear(&c);
		return rc;
	}
	int mapped = c.n, lost = 0;
	if (st != s->stage) {
		struct ir_calib tmp;
		if (calib_map_to(&s->hist, &c, st, s->stage, &tmp, &mapped, &lost)) {
			ir_calib_clear(&c);
			return sh_error(s, "calibrate: out of memory");
		}
		ir_calib_clear(&tmp);
	}
	if (s->have_calib)
		ir_calib_clear(&s->calib);
	s->calib = c;
	s->have_calib = true;
	s->calib_stage = st;
	free(s->calib_data);
	free(s->calib_pre);
	s->calib_data = s->calib_pre = NULL;
	if (sh_json_file(s, json)) {
		struct sh_json j;
		sh_json_begin(&j, sh_json_file(s, json));
		sh_json_obj(&j);
		sh_json_kstr(&j, "loaded", path);
		json_calib_keys(&j, s, &s->calib);
		sh_json_kint(&j, "current_stage", s->stage);
		sh_json_kint(&j, "mapped", mapped);
		sh_json_kint(&j, "lost", lost);
		sh_json_obj_end(&j);
		sh_json_end(&j);
	}
	if (!json) {
		char b[32];
		sh_printf(s, "loaded '%s': %d tensors of stage %d over %s samples of %s\n", sh_esc(path), c.n, st,
			  sh_count(c.samples, b, sizeof(b)), sh_esc(c.data_desc));
		if (st != s->stage)
			sh_printf(s, "made for stage %d (stage %d is current): %d tensors map to stage %d, %d are not in it\n",
				  st, s->stage, mapped, s->stage, lost);
		if (c.random)
			sh_printf(s, "note: %s\n", RANDOM_NOTE);
	}
	return save ? save_calib(s, save, json) : 0;
}

int cmd_calibrate(struct session *s, int argc, char **argv)
{
	const char *cmd = "calibrate";
	struct sh_args a;
	if (sh_model_cmd_args(s, argc, argv, &a))
		return -1;
	bool json = sh_flag(&a, "json");
	const char *load = sh_opt(&a, "load"), *save = sh_opt(&a, "save");
	struct data_args da;
	if (data_args_get(s, cmd, &a, &da))
		return -1;
	if (load) {
		if (da.spec || da.pre || da.batch || da.batches || sh_opt(&a, "seed") || sh_opt(&a, "device"))
			return sh_error(s, "calibrate: --load reads statistics made before: --data and its options go "
				       "without it");
		return calib_load(s, load, save, json);
	}
	if (!da.spec) {
		if (save) {
			if (!s->have_calib)
				return sh_error(s, "calibrate: no calibration to save: run calibrate --data=... first");
			if (save_calib(s, save, json))
				return -1;
			if (sh_json_file(s, json)) {
				struct sh_json j;
				sh_json_begin(&j, sh_json_file(s, json));
				sh_json_obj(&j);
				json_calib_keys(&j, s, &s->calib);
				sh_json_kstr(&j, "saved", save);
				sh_json_obj_end(&j);
				sh_json_end(&j);
			}
			return 0;
		}
		return sh_error(s, "calibrate: --data=SPEC is needed (.npy/.npz files or a folder of them, ONNX "
			       "test data, a folder of images, or random)");
	}
	bool gpu;
	if (pick_device(s, cmd, &a, &gpu))
		return -1;
	struct exec_data *ds;
	if (data_open(s, cmd, s->model, &da, &ds))
		return -1;
	struct ir_calib c;
	ir_calib_init(&c);
	struct observer ob;
	struct runner r = { .m = s->model, .gpu = gpu, .keep_all = gpu, .tf32 = s->tf32 };
	struct exec_values in = { 0 }, out = { 0 };
	struct ir_diag d;
	ir_diag_init(&d);
	d.max_warnings = 20;
	int ret = -1, batches = 0, total = data_batches(ds);
	uint64_t samples = 0;
	bool stopped = false;
	struct prog pg;
	prog_init(&pg, cmd);
	if (observer_init(&ob, &c, s->model->graph)) {
		sh_error(s, "calibrate: out of memory");
		goto out;
	}
	const struct ir_graph *g = s->model->graph;
	for (;;) {
		if (ir_interrupted) {
			stopped = true;
			break;
		}
		int n = 0;
		exec_values_clear(&in);
		int rc = exec_data_next(ds, &in, &n, &d);
		warn_all(s, cmd, &d);
		if (rc < 0) {
			if (rc == IR_EINTR) {
				stopped = true;
				break;
			}
			prog_done(&pg);
			ir_diag_prefix(&d, "%s", cmd);
			sh_diag(s, &d);
			goto out;
		}
		if (rc == 0)
			break;
		prog_show(&pg, "batch", batches + 1, total);
		/* the graph inputs are observed as given */
		for (int i = 0; i < in.n; i++) {
			const struct ir_value *v = ir_value_find(g, in.a[i].name);
			if (v && in.a[i].v.kind == KV_TENSOR && (rc = observe(&ob, v, in.a[i].v.t)))
				break;
		}
		/* the GPU keeps every value of the batch on the device (keep_all,
		 * nothing downloaded): their statistics are computed there */
		if (!rc)
			rc = runner_run(&r, &in, on_value, &ob, &out, NULL, &d);
		if (!rc && gpu)
			rc = observe_plan(&ob, r.plan);
		exec_values_clear(&out);
		if (rc == IR_EINTR) {
			stopped = true;
			break;
		}
		if (rc) {
			prog_done(&pg);
			if (ob.d.error) {
				ir_diag_clear(&d);
				d = ob.d;
				ir_diag_init(&ob.d);
			}
			ir_diag_prefix(&d, "%s: batch %d", cmd, batches + 1);
			sh_diag(s, &d);
			goto out;
		}
		batches++;
		samples += (uint64_t)n;
	}
	prog_done(&pg);
	/* a stop in the middle of a batch leaves that batch's values computed
	 * before it in the statistics: what was seen is what is kept */
	if (stopped) {
		if (!batches) {
			sh_error(s, "calibrate: stopped before the first batch ended: nothing kept");
			goto out;
		}
		/* what was seen so far is a calibration over fewer samples: kept */
		char b[32];
		sh_warn(s, "calibrate: stopped by Ctrl-C after %d batch%s: keeping the statistics of %s samples", batches,
			batches == 1 ? "" : "es", sh_count(samples, b, sizeof(b)));
	}
	if (!batches) {
		sh_error(s, "calibrate: '%s' has no samples", sh_esc(da.spec));
		goto out;
	}
	ir_model_hash(s->model, c.model_hash);
	c.stage = s->stage;
	snprintf(c.data_hash, sizeof(c.data_hash), "%s", exec_data_hash(ds));
	snprintf(c.data_desc, sizeof(c.data_desc), "%s", exec_data_desc(ds));
	c.random = exec_data_random(ds);
	c.samples = samples;
	c.batch = exec_data_batch(ds);
	if (s->have_calib)
		ir_calib_clear(&s->calib);
	s->calib = c;
	ir_calib_init(&c);
	s->have_calib = true;
	s->calib_stage = s->stage;
	free(s->calib_data);
	free(s->calib_pre);
	s->calib_data = strdup(da.spec);
	s->calib_pre = da.pre ? strdup(da.pre) : NULL;
	const char *dev = gpu ? "cuda" : "cpu";
	if (sh_json_file(s, json)) {
		struct sh_json j;
		sh_json_begin(&j, sh_json_file(s, json));
		sh_json_obj(&j);
		json_calib_keys(&j, s, &s->calib);
		sh_json_kint(&j, "batches", batches);
		sh_json_kstr(&j, "device", dev);
		sh_json_kbool(&j, "stopped", stopped);
		sh_json_kstr(&j, "saved", save);
		sh_json_obj_end(&j);
		sh_json_end(&j);
	}
	if (!json) {
		char b[32];
		const struct ir_calib *k = &s->calib;
		sh_printf(s, "calibrated %d tensors of stage %d on %s over %s samples (%d batch%s of %d) of %s\n", k->n,
			  s->stage, dev, sh_count(samples, b, sizeof(b)), batches, batches == 1 ? "" : "es", k->batch,
			  sh_esc(k->data_desc));
		sh_printf(s, "keys: model %s, data %s (calib shows the ranges; quantize uses them)\n", k->model_hash,
			  k->data_hash);
		if (k->random)
			sh_printf(s, "note: %s\n", RANDOM_NOTE);
	}
	ret = save ? save_calib(s, save, json) : 0;
out:
	prog_done(&pg);
	observer_free(&ob);
	runner_free(&r);
	ir_calib_clear(&c);
	exec_values_clear(&in);
	exec_values_clear(&out);
	exec_data_free(ds);
	ir_diag_clear(&d);
	return ret;
}

/* ------------------------------------------------------------------------ */
/* calib                                                                     */
/* ------------------------------------------------------------------------ */

static int need_calib(struct session *s, const char *cmd)
{
	if (!s->have_calib)
		return sh_error(s, "%s: no calibration: run calibrate --data=... first", cmd);
	return 0;
}

/* The share of |x| above T, from the histogram (uniform within a bin). */
static double clipped(const struct ir_calib_tensor *t, double T)
{
	if (!t->hist || !t->count || t->hist_max <= 0 || T >= fmax(fabs(t->min), fabs(t->max)))
		return 0;
	double w = t->hist_max / IR_CALIB_BINS, above = 0;
	for (int i = 0; i < IR_CALIB_BINS; i++) {
		double lo = i * w, hi = lo + w;
		if (lo >= T)
			above += (double)t->hist[i];
		else if (hi > T)
			above += (double)t->hist[i] * (hi - T) / w;
	}
	return above / (double)t->count;
}

/* A calibrated tensor by its name in the calibrated stage, or by the name
 * of the value of the current stage that stands for it. */
static const struct ir_calib_tensor *calib_lookup(struct session *s, const char *name)
{
	const struct ir_calib_tensor *t = ir_calib_find(&s->calib, name);
	if (t)
		return t;
	const char *old = pass_history_map(&s->hist, s->stage, s->calib_stage, name);
	return old ? ir_calib_find(&s->calib, old) : NULL;
}

static void calib_header(struct session *s)
{
	const struct ir_calib *c = &s->calib;
	char b[32];
	sh_printf(s, "calibration of stage %d: %d tensors over %s samples of %s; model %s, data %s\n", s->calib_stage,
		  c->n, sh_count(c->samples, b, sizeof(b)), sh_esc(c->data_desc), c->model_hash, c->data_hash);
	if (s->calib_stage != s->stage)
		sh_printf(s, "names are those of stage %d (stage %d is current; quantize maps them)\n", s->calib_stage,
			  s->stage);
	if (c->random)
		sh_printf(s, "note: %s\n", RANDOM_NOTE);
}

static void json_tensor(struct sh_json *j, const struct ir_calib_tensor *t, const struct ir_calib_how *only,
			bool detail)
{
	char mb[64];
	sh_json_obj(j);
	sh_json_kstr(j, "name", t->name);
	sh_json_kuint(j, "count", t->count);
	sh_json_kuint(j, "nonfinite", t->n_nonfinite);
	sh_json_knum(j, "min", t->count ? t->min : NAN);
	sh_json_knum(j, "max", t->count ? t->max : NAN);
	if (detail) {
		sh_json_knum(j, "ema_min", t->count ? t->ema_min : NAN);
		sh_json_knum(j, "ema_max", t->count ? t->ema_max : NAN);
		sh_json_kuint(j, "batches", t->batches);
		sh_json_knum(j, "hist_max", t->hist_max);
		sh_json_kint(j, "bins", IR_CALIB_BINS);
		sh_json_kint(j, "channels", t->n_chan);
	}
	sh_json_key(j, "thresholds");
	sh_json_obj(j);
	for (int m = 0; m < N_METHODS; m++) {
		const struct ir_calib_how *h = only ? only : &methods[m];
		if (!detail) {
			sh_json_knum(j, ir_calib_method_name(h, mb, sizeof(mb)), ir_calib_amax(t, h));
		} else {
			double lo, hi, T = ir_calib_amax(t, h);
			ir_calib_range(t, h, &lo, &hi);
			sh_json_key(j, ir_calib_method_name(h, mb, sizeof(mb)));
			sh_json_obj(j);
			sh_json_knum(j, "threshold", T);
			sh_json_knum(j, "lo", lo);
			sh_json_knum(j, "hi", hi);
			sh_json_knum(j, "clipped", clipped(t, T));
			sh_json_obj_end(j);
		}
		if (only)
			break;
	}
	sh_json_obj_end(j);
	sh_json_obj_end(j);
}

static int calib_detail(struct session *s, const struct ir_calib_tensor *t, const struct ir_calib_how *only, bool json)
{
	if (sh_json_file(s, json)) {
		struct sh_json j;
		sh_json_begin(&j, sh_json_file(s, json));
		json_tensor(&j, t, only, true);
		sh_json_end(&j);
		if (json) {
			return 0;
		}
	}
	char b[6][32];
	sh_printf(s, "tensor '%s' (stage %d): %s values in %" PRIu64 " batch%s", sh_esc(t->name), s->calib_stage,
		  sh_count(t->count, b[0], 32), t->batches, t->batches == 1 ? "" : "es");
	if (t->n_nonfinite)
		sh_printf(s, ", %s NaN/Inf left out", sh_count(t->n_nonfinite, b[1], 32));
	sh_printf(s, "\n");
	if (!t->count) {
		sh_printf(s, "  nothing finite was seen: every method gives 0\n");
		return 0;
	}
	sh_printf(s, "  min %s, max %s; moving average of the batches' min and max: %s, %s\n", num(t->min, b[0], 32),
		  num(t->max, b[1], 32), num(t->ema_min, b[2], 32), num(t->ema_max, b[3], 32));
	sh_printf(s, "  histogram: %d bins of |x| over [0, %s]\n", IR_CALIB_BINS, num(t->hist_max, b[0], 32));
	if (t->n_chan > 0 && t->chan_abssum && t->chan_rows) {
		double lo = INFINITY, hi = -INFINITY;
		for (int c = 0; c < t->n_chan; c++) {
			double m = t->chan_abssum[c] / (double)t->chan_rows;
			lo = m < lo ? m : lo;
			hi = m > hi ? m : hi;
		}
		sh_printf(s, "  mean |x| per channel (last axis, for awq): %d channels, %s to %s\n", t->n_chan,
			  num(lo, b[0], 32), num(hi, b[1], 32));
	}
	struct sh_table tb;
	sh_table_init(&tb, 5, "method", ">threshold", ">asymmetric lo", ">hi", ">clipped");
	for (int m = 0; m < N_METHODS; m++) {
		const struct ir_calib_how *h = only ? only : &methods[m];
		char mb[64];
		double lo, hi, T = ir_calib_amax(t, h);
		ir_calib_range(t, h, &lo, &hi);
		snprintf(b[3], 32, "%.4f%%", 100 * clipped(t, T));
		sh_table_row(&tb, ir_calib_method_name(h, mb, sizeof(mb)), num(T, b[0], 32), num(lo, b[1], 32),
			     num(hi, b[2], 32), b[3]);
		if (only)
			break;
	}
	sh_printf(s, "\n");
	sh_table_print(s, &tb, true);
	sh_table_free(&tb);
	sh_printf(s, "values beyond the threshold saturate; int8 steps are threshold/127 (symmetric)\n");
	return 0;
}

static int calib_plot(struct session *s, const char *name, const char *path);

int cmd_calib(struct session *s, int argc, char **argv)
{
	const char *cmd = "calib";
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (!sh_need_model(s))
		return -1;
	bool json = sh_flag(&a, "json");
	if (a.npos >= 1 && !strcmp(a.pos[0], "plot") && a.npos != 1) {
		if (a.npos != 3)
			return sh_error(s, "calib: usage: calib plot TENSOR FILE.png|FILE.svg");
		if (json || sh_opt(&a, "method"))
			return sh_error(s, "calib: plot draws every method's threshold: --json and --method go without it");
		if (need_calib(s, cmd))
			return -1;
		return calib_plot(s, a.pos[1], a.pos[2]);
	}
	if (a.npos > 1)
		return sh_usage(s, argv[0]);
	struct ir_calib_how how, *only = NULL;
	const char *v = sh_opt(&a, "method");
	if (v) {
		struct ir_diag d;
		ir_diag_init(&d);
		if (ir_calib_method_parse(v, &how, &d)) {
			ir_diag_prefix(&d, "%s", cmd);
			return sh_diag(s, &d);
		}
		ir_diag_clear(&d);
		only = &how;
	}
	if (need_calib(s, cmd))
		return -1;
	if (a.npos == 1) {
		const struct ir_calib_tensor *t = calib_lookup(s, a.pos[0]);
		if (!t)
			return sh_error(s, "calib: '%s' was not calibrated (calib lists the tensors)", sh_esc(a.pos[0]));
		return calib_detail(s, t, only, json);
	}
	const struct ir_calib *c = &s->calib;
	if (sh_json_file(s, json)) {
		struct sh_json j;
		sh_json_begin(&j, sh_json_file(s, json));
		sh_json_obj(&j);
		json_calib_keys(&j, s, c);
		sh_json_key(&j, "calibrated");
		sh_json_arr(&j);
		for (int i = 0; i < c->n; i++)
			json_tensor(&j, &c->t[i], only, false);
		sh_json_arr_end(&j);
		sh_json_obj_end(&j);
		sh_json_end(&j);
		if (json) {
			return 0;
		}
	}
	calib_header(s);
	struct sh_table t;
	char mh[N_METHODS][64];
	if (only) {
		snprintf(mh[0], sizeof(mh[0]), ">");
		ir_calib_method_name(only, mh[0] + 1, sizeof(mh[0]) - 1);
		sh_table_init(&t, 5, "tensor", ">count", ">min", ">max", mh[0]);
	} else {
		for (int m = 0; m < N_METHODS; m++) {
			mh[m][0] = '>';
			ir_calib_method_name(&methods[m], mh[m] + 1, sizeof(mh[m]) - 1);
		}
		sh_table_init(&t, 8, "tensor", ">count", ">min", ">max", mh[0], mh[1], mh[2], mh[3]);
	}
	for (int i = 0; i < c->n; i++) {
		const struct ir_calib_tensor *x = &c->t[i];
		char b[8][32];
		sh_count(x->count, b[0], 32);
		num(x->count ? x->min : NAN, b[1], 32);
		num(x->count ? x->max : NAN, b[2], 32);
		if (only) {
			sh_table_row(&t, sh_esc(x->name), b[0], b[1], b[2], num(ir_calib_amax(x, only), b[3], 32));
			continue;
		}
		for (int m = 0; m < N_METHODS; m++)
			num(ir_calib_amax(x, &methods[m]), b[3 + m], 32);
		sh_table_row(&t, sh_esc(x->name), b[0], b[1], b[2], b[3], b[4], b[5], b[6]);
	}
	sh_printf(s, "\n");
	sh_table_print(s, &t, true);
	sh_table_free(&t);
	sh_printf(s, "thresholds T: |x| <= T maps onto the quantized range; calib TENSOR shows one in detail\n");
	return 0;
}

/* ---- calib plot: the |x| histogram with each method's threshold ---- */

struct sink {
	FILE *f;
	bool err;
};

static cairo_status_t sink_write(void *closure, const unsigned char *data, unsigned int length)
{
	struct sink *k = closure;
	if (fwrite(data, 1, length, k->f) != length) {
		k->err = true;
		return CAIRO_STATUS_WRITE_ERROR;
	}
	return CAIRO_STATUS_SUCCESS;
}

/* Text cairo can draw: printable ASCII, other bytes as '?'. */
static void plain(const char *in, char *out, size_t size)
{
	size_t k = 0;
	for (const unsigned char *p = (const unsigned char *)in; *p && k + 1 < size; p++)
		out[k++] = *p >= 0x20 && *p < 0x7f ? (char)*p : '?';
	out[k] = 0;
}

#define PW 800.0
#define PH 450.0

static void draw_hist(cairo_t *cr, const struct ir_calib_tensor *t, const char *title)
{
	const double L = 72, R = 24, T = 48, B = 56, w = PW - L - R, h = PH - T - B;
	double thr[N_METHODS], xmax = 0;
	int last = -1;
	for (int i = 0; t->hist && i < IR_CALIB_BINS; i++)
		if (t->hist[i])
			last = i;
	double bw = t->hist_max / IR_CALIB_BINS;
	xmax = last >= 0 ? (last + 1) * bw : 0;
	for (int m = 0; m < N_METHODS; m++) {
		thr[m] = ir_calib_amax(t, &methods[m]);
		if (thr[m] > xmax)
			xmax = thr[m];
	}
	if (!(xmax > 0))
		xmax = 1;
	xmax *= 1.04;
	/* the bins, gathered into at most one column per two points */
	int cols = (int)(w / 2);
	double *col = calloc((size_t)cols, sizeof(double)), ymax = 1;
	if (col && t->hist)
		for (int i = 0; i <= last; i++) {
			int c = (int)(((i + 0.5) * bw) / xmax * cols);
			if (c >= 0 && c < cols)
				col[c] += (double)t->hist[i];
		}
	for (int c = 0; col && c < cols; c++)
		if (col[c] > ymax)
			ymax = col[c];
	double ly = log10(1 + ymax);
	cairo_set_source_rgb(cr, 1, 1, 1);
	cairo_paint(cr);
	cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
	cairo_set_font_size(cr, 13);
	cairo_set_source_rgb(cr, 0, 0, 0);
	cairo_move_to(cr, L, 28);
	cairo_show_text(cr, title);
	/* bars */
	cairo_set_source_rgb(cr, 0.27, 0.51, 0.71);
	for (int c = 0; col && c < cols; c++) {
		if (col[c] <= 0)
			continue;
		double y = log10(1 + col[c]) / ly * h;
		cairo_rectangle(cr, L + c * (w / cols), T + h - y, w / cols, y);
	}
	cairo_fill(cr);
	free(col);
	/* axes and ticks */
	cairo_set_source_rgb(cr, 0, 0, 0);
	cairo_set_line_width(cr, 1);
	cairo_move_to(cr, L, T);
	cairo_line_to(cr, L, T + h);
	cairo_line_to(cr, L + w, T + h);
	cairo_stroke(cr);
	cairo_set_font_size(cr, 11);
	char b[64];
	for (int k = 0; k <= 5; k++) {
		double x = xmax * k / 5, px = L + w * k / 5;
		cairo_move_to(cr, px, T + h);
		cairo_line_to(cr, px, T + h + 4);
		cairo_stroke(cr);
		snprintf(b, sizeof(b), "%.3g", x);
		cairo_text_extents_t e;
		cairo_text_extents(cr, b, &e);
		cairo_move_to(cr, px - e.width / 2, T + h + 17);
		cairo_show_text(cr, b);
	}
	for (int k = 0; k <= (int)ceil(log10(1 + ymax)) && k < 20; k++) {
		double py = T + h - log10(1 + pow(10, k)) / ly * h;
		if (py < T - 1)
			break;
		cairo_move_to(cr, L - 4, py);
		cairo_line_to(cr, L, py);
		cairo_stroke(cr);
		snprintf(b, sizeof(b), k < 4 ? "%.0f" : "1e%.0f", k < 4 ? pow(10, k) : (double)k);
		cairo_text_extents_t e;
		cairo_text_extents(cr, b, &e);
		cairo_move_to(cr, L - 8 - e.width, py + 4);
		cairo_show_text(cr, b);
	}
	cairo_move_to(cr, L + w / 2 - 10, PH - 14);
	cairo_show_text(cr, "|x|");
	cairo_save(cr);
	cairo_move_to(cr, 18, T + h / 2 + 40);
	cairo_rotate(cr, -1.5707963267948966);   /* a quarter turn back */
	cairo_show_text(cr, "count (log scale)");
	cairo_restore(cr);
	/* the thresholds: a dashed line each, labelled */
	static const double rgb[N_METHODS][3] = { { 0.80, 0.10, 0.10 }, { 0.90, 0.50, 0.00 }, { 0.10, 0.60, 0.20 },
						  { 0.50, 0.20, 0.70 } };
	double dash[] = { 5, 3 };
	for (int m = 0; m < N_METHODS; m++) {
		double px = L + thr[m] / xmax * w;
		cairo_set_source_rgb(cr, rgb[m][0], rgb[m][1], rgb[m][2]);
		cairo_set_dash(cr, dash, 2, 0);
		cairo_set_line_width(cr, 1.5);
		cairo_move_to(cr, px, T);
		cairo_line_to(cr, px, T + h);
		cairo_stroke(cr);
		cairo_set_dash(cr, NULL, 0, 0);
		char mb[48];
		snprintf(b, sizeof(b), "%s %.4g", ir_calib_method_name(&methods[m], mb, sizeof(mb)), thr[m]);
		cairo_text_extents_t e;
		cairo_text_extents(cr, b, &e);
		double tx = px + 4 + e.width > L + w ? px - 4 - e.width : px + 4;
		cairo_move_to(cr, tx, T + 14 + 15 * m);
		cairo_show_text(cr, b);
	}
}

static int calib_plot(struct session *s, const char *name, const char *path)
{
	const struct ir_calib_tensor *t = calib_lookup(s, name);
	if (!t)
		return sh_error(s, "calib: '%s' was not calibrated (calib lists the tensors)", sh_esc(name));
	bool png = ends_with(path, ".png"), svg = ends_with(path, ".svg");
	if (!png && !svg)
		return sh_error(s, "calib: plot writes .png or .svg, not '%s'", sh_esc(path));
	struct stat st;
	if (!stat(path, &st) && S_ISDIR(st.st_mode))
		return sh_error(s, "calib: cannot write '%s': is a folder", sh_esc(path));
	/* a temporary file next to the target, renamed over it when whole */
	size_t n = strlen(path);
	char *tmp = malloc(n + 32);
	if (!tmp)
		return sh_error(s, "calib: out of memory");
	const char *slash = strrchr(path, '/');
	size_t dl = slash ? (size_t)(slash - path) + 1 : 0;
	snprintf(tmp, n + 32, "%.*s.%s.XXXXXX", (int)dl, path, path + dl);
	int fd = mkstemp(tmp);
	if (fd < 0) {
		int e = errno;
		free(tmp);
		return sh_error(s, "calib: cannot write '%s': %s", sh_esc(path), sh_strerror(e));
	}
	fchmod(fd, 0644);
	struct sink k = { .f = fdopen(fd, "wb") };
	if (!k.f) {
		int e = errno;
		close(fd);
		unlink(tmp);
		free(tmp);
		return sh_error(s, "calib: cannot write '%s': %s", sh_esc(path), sh_strerror(e));
	}
	char title[300], nm[200];
	plain(t->name, nm, sizeof(nm));
	snprintf(title, sizeof(title), "|x| of '%s' (stage %d): %" PRIu64 " values%s", nm, s->calib_stage, t->count,
		 s->calib.random ? " - random data" : "");
	cairo_surface_t *sf = svg ? cairo_svg_surface_create_for_stream(sink_write, &k, PW, PH)
				  : cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)PW, (int)PH);
	cairo_t *cr = cairo_create(sf);
	draw_hist(cr, t, title);
	cairo_status_t cst = cairo_status(cr);
	cairo_destroy(cr);
	if (png && cst == CAIRO_STATUS_SUCCESS) {
		cairo_surface_flush(sf);
		cst = cairo_surface_write_to_png_stream(sf, sink_write, &k);
	}
	cairo_surface_finish(sf);
	if (cst == CAIRO_STATUS_SUCCESS)
		cst = cairo_surface_status(sf);
	cairo_surface_destroy(sf);
	int e = 0;
	if (k.err || cst != CAIRO_STATUS_SUCCESS || fflush(k.f) || ferror(k.f) || fsync(fileno(k.f)))
		e = errno ? errno : EIO;
	if (fclose(k.f) && !e)
		e = errno ? errno : EIO;
	if (!e && rename(tmp, path))
		e = errno;
	if (e) {
		unlink(tmp);
		free(tmp);
		if (cst != CAIRO_STATUS_SUCCESS && !k.err)
			return sh_error(s, "calib: cannot draw '%s': %s", sh_esc(path), cairo_status_to_string(cst));
		return sh_error(s, "calib: cannot write '%s': %s", sh_esc(path), sh_strerror(e));
	}
	free(tmp);
	sh_printf(s, "wrote '%s': the |x| histogram of '%s' with the thresholds of max, percentile=99.99, entropy and "
		     "mse\n", sh_esc(path), sh_esc(t->name));
	if (s->calib.random)
		sh_printf(s, "note: %s\n", RANDOM_NOTE);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Measuring a stage's outputs against another's over a dataset              */
/* ------------------------------------------------------------------------ */

enum metric { M_SNR = 0, M_COS, M_MAXABS, M_TOP1, M_TOP5 };
static const char *const metric_names[] = { "snr", "cos", "maxabs", "top1", "top5" };

static int metric_parse(const char *v, enum metric *m)
{
	for (int i = 0; i < 5; i++)
		if (!strcmp(v, metric_names[i])) {
			*m = (enum metric)i;
			return 0;
		}
	return -1;
}

/* Larger is better, except for maxabs. */
static bool better_or_equal(enum metric m, double v, double goal)
{
	return m == M_MAXABS ? v <= goal : v >= goal;
}

static const char *metric_text(enum metric m, double v, char *buf, size_t size)
{
	if (isnan(v))
		snprintf(buf, size, "-");
	else if (m == M_SNR)
		snprintf(buf, size, isinf(v) ? "snr inf dB" : "snr %.2f dB", v);
	else if (m == M_COS)
		snprintf(buf, size, "cos %.6f", v);
	else if (m == M_MAXABS)
		snprintf(buf, size, "max abs %.4g", v);
	else
		snprintf(buf, size, "%s %.2f%%", metric_names[m], v);
	return buf;
}

/* One output over every batch: sums for SNR and cosine, the largest |a-b|,
 * top-k agreement counts (exec_compare's, per batch). */
struct acc {
	double bb, ee, ab, aa, max_abs;
	uint64_t n, rows, top1, top5;
	bool topk;
};

/* Adds actual `a` against expected `b`; 0 or IR_ERR (shapes differ) with a message. */
static int acc_add(struct acc *A, const char *name, const struct ir_tensor *a, const struct ir_tensor *b,
		   struct ir_diag *d)
{
	struct exec_cmp_opts o;
	exec_cmp_defaults(b->dtype, &o);
	o.topk = 5;
	struct exec_cmp r;
	int rc = exec_compare(a, b, &o, &r, d);
	if (rc)
		return rc;
	if (!r.shape_ok) {
		char s1[128], s2[128];
		return ir_diag_err(d, IR_ERR, "output '%s' is %s here and %s in the other stage", name,
				   ir_dims_str(a->rank, a->dims, s1, sizeof(s1)), ir_dims_str(b->rank, b->dims, s2, sizeof(s2)));
	}
	if (r.max_abs > A->max_abs || A->n == 0)
		A->max_abs = r.max_abs;
	if (r.has_topk && b->rank >= 1 && b->dims[b->rank - 1] > 0) {
		uint64_t rows = b->numel / (uint64_t)b->dims[b->rank - 1];
		A->topk = true;
		A->rows += rows;
		A->top1 += (uint64_t)llround(r.top1_agree * (double)rows);
		A->top5 += (uint64_t)llround(r.topk_agree * (double)rows);
	}
	double *x = pass_tensor_f64(a), *y = pass_tensor_f64(b);
	if (!x || !y) {
		free(x);
		free(y);
		if (!ir_dtype_is_float(b->dtype) && !ir_dtype_is_int(b->dtype))
			return 0;   /* not numbers: only what exec_compare says */
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	for (uint64_t i = 0; i < b->numel; i++) {
		if (!isfinite(x[i]) || !isfinite(y[i]))
			continue;
		double e = x[i] - y[i];
		A->bb += y[i] * y[i];
		A->aa += x[i] * x[i];
		A->ab += x[i] * y[i];
		A->ee += e * e;
	}
	A->n += b->numel;
	free(x);
	free(y);
	return 0;
}

static double acc_snr(const struct acc *A)
{
	if (A->ee == 0)
		return INFINITY;
	if (A->bb == 0)
		return -INFINITY;
	return 10 * log10(A->bb / A->ee);
}

static double acc_cos(const struct acc *A)
{
	if (A->aa == 0 && A->bb == 0)
		return 1;
	if (A->aa == 0 || A->bb == 0)
		return 0;
	return A->ab / sqrt(A->aa * A->bb);
}

static double acc_value(const struct acc *A, enum metric m)
{
	switch (m) {
	case M_SNR:
		return acc_snr(A);
	case M_COS:
		return acc_cos(A);
	case M_MAXABS:
		return A->max_abs;
	case M_TOP1:
		return A->topk && A->rows ? 100.0 * (double)A->top1 / (double)A->rows : NAN;
	case M_TOP5:
		return A->topk && A->rows ? 100.0 * (double)A->top5 / (double)A->rows : NAN;
	}
	return NAN;
}

/* The worst over the outputs (NaN where the metric does not apply to any). */
static double accs_value(const struct acc *A, int n, enum metric m)
{
	double w = NAN;
	for (int i = 0; i < n; i++) {
		double v = acc_value(&A[i], m);
		if (isnan(v))
			continue;
		if (isnan(w) || !better_or_equal(m, v, w))
			w = v;
	}
	return w;
}

/*
 * A dataset run once through a float stage: the inputs of every batch and
 * the stage's outputs, kept so that many candidate stages (sensitivity,
 * quantize --auto) are measured against them without running it again.
 * Memory: the dataset and the float outputs.
 */
struct evalset {
	int n, cap;
	struct exec_values *in, *ref;
	uint64_t samples;
	char desc[256];
	bool random;
	int n_out;
};

static void evalset_free(struct evalset *es)
{
	for (int i = 0; i < es->n; i++) {
		exec_values_clear(&es->in[i]);
		exec_values_clear(&es->ref[i]);
	}
	free(es->in);
	free(es->ref);
	memset(es, 0, sizeof(*es));
}

static int evalset_build(struct session *s, const char *cmd, const struct ir_model *fm, const struct data_args *da,
			 bool gpu, struct evalset *es)
{
	memset(es, 0, sizeof(*es));
	struct exec_data *ds;
	if (data_open(s, cmd, fm, da, &ds))
		return -1;
	struct runner r = { .m = fm, .gpu = gpu, .tf32 = s->tf32 };
	struct ir_diag d;
	ir_diag_init(&d);
	struct prog pg;
	prog_init(&pg, cmd);
	int ret = -1, total = data_batches(ds);
	snprintf(es->desc, sizeof(es->desc), "%s", exec_data_desc(ds));
	es->random = exec_data_random(ds);
	es->n_out = fm->graph->n_outputs;
	for (;;) {
		if (ir_interrupted) {
			prog_done(&pg);
			sh_error(s, "%s: stopped", cmd);
			goto out;
		}
		if (es->n == es->cap) {
			int cap = es->cap ? 2 * es->cap : 8;
			struct exec_values *x = realloc(es->in, sizeof(*x) * (size_t)cap);
			if (x)
				es->in = x;
			struct exec_values *y = x ? realloc(es->ref, sizeof(*y) * (size_t)cap) : NULL;
			if (!x || !y) {
				prog_done(&pg);
				sh_error(s, "%s: out of memory", cmd);
				goto out;
			}
			es->ref = y;
			es->cap = cap;
		}
		memset(&es->in[es->n], 0, sizeof(es->in[0]));
		memset(&es->ref[es->n], 0, sizeof(es->ref[0]));
		int n = 0;
		int rc = exec_data_next(ds, &es->in[es->n], &n, &d);
		warn_all(s, cmd, &d);
		if (rc == 0) {
			exec_values_clear(&es->in[es->n]);
			break;
		}
		if (rc > 0) {
			es->n++;
			prog_show(&pg, "float stage, batch", es->n, total);
			rc = runner_run(&r, &es->in[es->n - 1], NULL, NULL, &es->ref[es->n - 1], NULL, &d);
			es->samples += (uint64_t)n;
		}
		if (rc < 0) {
			prog_done(&pg);
			ir_diag_prefix(&d, "%s", cmd);
			if (rc == IR_EINTR)
				sh_error(s, "%s: stopped", cmd);
			else
				sh_diag(s, &d);
			goto out;
		}
	}
	prog_done(&pg);
	if (!es->n) {
		sh_error(s, "%s: the data has no samples", cmd);
		goto out;
	}
	ret = 0;
out:
	if (ret)
		evalset_free(es);
	runner_free(&r);
	exec_data_free(ds);
	ir_diag_clear(&d);
	return ret;
}

/* Runs m over every batch of es and accumulates its outputs (by position)
 * against the float stage's into acc[es->n_out] (zeroed here). 0 or -1 (printed). */
static int measure(struct session *s, const char *cmd, const struct ir_model *m, bool gpu, const struct evalset *es,
		   struct acc *acc)
{
	memset(acc, 0, sizeof(*acc) * (size_t)(es->n_out ? es->n_out : 1));
	if (m->graph->n_outputs != es->n_out)
		return sh_error(s, "%s: the stage has %d outputs and the float stage %d", cmd, m->graph->n_outputs,
				es->n_out);
	struct runner r = { .m = m, .gpu = gpu, .tf32 = s->tf32 };
	struct ir_diag d;
	ir_diag_init(&d);
	int rc = 0;
	for (int b = 0; b < es->n && !rc; b++) {
		if (ir_interrupted) {
			rc = ir_diag_err(&d, IR_EINTR, "stopped");
			break;
		}
		struct exec_values out = { 0 };
		rc = runner_run(&r, &es->in[b], NULL, NULL, &out, NULL, &d);
		for (int i = 0; !rc && i < out.n && i < es->ref[b].n; i++) {
			const struct kern_value *x = &out.a[i].v, *y = &es->ref[b].a[i].v;
			if (x->kind == KV_TENSOR && y->kind == KV_TENSOR)
				rc = acc_add(&acc[i], out.a[i].name, x->t, y->t, &d);
		}
		exec_values_clear(&out);
	}
	runner_free(&r);
	if (rc) {
		ir_diag_prefix(&d, "%s", cmd);
		return sh_diag(s, &d);
	}
	ir_diag_clear(&d);
	return 0;
}

/* The metric of m against the float outputs of es (the worst output). */
static int measure_value(struct session *s, const char *cmd, const struct ir_model *m, bool gpu,
			 const struct evalset *es, enum metric mt, double *v)
{
	struct acc *acc = calloc((size_t)(es->n_out ? es->n_out : 1), sizeof(*acc));
	if (!acc)
		return sh_error(s, "%s: out of memory", cmd);
	int rc = measure(s, cmd, m, gpu, es, acc);
	*v = rc ? NAN : accs_value(acc, es->n_out, mt);
	free(acc);
	if (!rc && isnan(*v))
		return sh_error(s, "%s: %s needs an output whose last dim is larger than 1", cmd, metric_names[mt]);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* quantize                                                                  */
/* ------------------------------------------------------------------------ */

/* The pass arguments of a quantize command (strings live in the args or in `own`). */
struct qargs {
	struct pass_arg a[20];
	int n;
	char method[64];
	const char *exclude;   /* the user's --exclude (quantize --auto adds to it) */
};

static void qargs_add(struct qargs *q, const char *name, const char *value)
{
	if (q->n < 20)
		q->a[q->n++] = (struct pass_arg){ name, value };
}

/* The quantized nodes of a report: nodes it rewrote, each once. */
static int rewritten_nodes(const struct pass_report *rep, const struct ir_graph *g, char ***out)
{
	char **v = calloc((size_t)(rep->n_msgs ? rep->n_msgs : 1), sizeof(char *));
	int n = 0;
	if (!v)
		return -1;
	for (int i = 0; i < rep->n_msgs; i++) {
		const struct pass_msg *m = &rep->msgs[i];
		if (m->kind != PASS_REWROTE || !m->node)
			continue;
		int cnt = 0;
		if (g && !sh_find_node(g, m->node, &cnt))
			continue;
		bool seen = false;
		for (int k = 0; k < n && !seen; k++)
			seen = !strcmp(v[k], m->node);
		if (!seen && !(v[n++] = strdup(m->node))) {
			for (int k = 0; k < n - 1; k++)
				free(v[k]);
			free(v);
			return -1;
		}
	}
	*out = v;
	return n;
}

static void free_names(char **v, int n)
{
	for (int i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

/* "a,b,c" of the user's exclude list and names[idx[0..k)] (malloc'd). */
static char *join_exclude(const char *user, char **names, const int *idx, int k, int skip)
{
	size_t len = user ? strlen(user) + 1 : 1;
	for (int i = 0; i < k; i++)
		len += strlen(names[idx[i]]) + 1;
	char *s = malloc(len + 1), *p;
	if (!s)
		return NULL;
	p = s;
	*p = 0;
	if (user && *user)
		p += sprintf(p, "%s", user);
	for (int i = 0; i < k; i++) {
		if (i == skip)
			continue;
		p += sprintf(p, "%s%s", p == s ? "" : ",", names[idx[i]]);
	}
	return s;
}

/* Quantizes stage `fm` with q's options and exclude list `exclude` (NULL: none). */
static int quant_apply(const struct ir_model *fm, const struct pass *p, const struct qargs *q, const char *exclude,
		       const char *only, const struct ir_calib *cal, struct ir_model **out, struct pass_report *rep,
		       struct ir_diag *d)
{
	struct pass_arg args[24];
	int n = 0;
	for (int i = 0; i < q->n; i++)
		if (strcmp(q->a[i].name, "exclude") && strcmp(q->a[i].name, "only"))
			args[n++] = q->a[i];
	if (exclude && *exclude)
		args[n++] = (struct pass_arg){ "exclude", exclude };
	if (only)
		args[n++] = (struct pass_arg){ "only", only };
	return pass_apply_calib(fm, p, args, n, cal, false, out, rep, d);
}

/*
 * One candidate of quantize --auto: everything quantized but the nodes
 * kept[0..k) (less kept[skip] when skip >= 0) and the user's own
 * --exclude, measured on the evalset. On success the caller owns *ex (the
 * exclude list), *m (NULL: nothing was left to quantize) and *rep, and *v is
 * the metric (NaN when *m is NULL). 0, or -1 after printing the error
 * (nothing is left to free).
 */
static int auto_try(struct session *s, const char *cmd, const struct ir_model *fm, const struct pass *p,
		    const struct qargs *q, const struct ir_calib *cal, char **nodes, const int *kept, int k, int skip,
		    bool gpu, const struct evalset *es, enum metric mt, struct ir_diag *d, char **ex,
		    struct ir_model **m, struct pass_report *rep, double *v)
{
	*m = NULL;
	*v = NAN;
	if (!(*ex = join_exclude(q->exclude, nodes, kept, k, skip)))
		return sh_error(s, "quantize: out of memory");
	if (quant_apply(fm, p, q, *ex, NULL, cal, m, rep, d)) {
		free(*ex);
		pass_report_clear(rep);
		prefix_once(d, cmd);
		return sh_diag(s, d);
	}
	warn_all(s, cmd, d);
	if (*m && measure_value(s, cmd, *m, gpu, es, mt, v)) {
		free(*ex);
		ir_model_free(*m);
		pass_report_clear(rep);
		return -1;
	}
	return 0;
}

/* Each node quantized alone (only=NODE): its metric against the float stage. */
static int sens_alone(struct session *s, const char *cmd, const struct ir_model *fm, const struct pass *p,
		      const struct qargs *q, const struct ir_calib *cal, char **nodes, int n, bool gpu,
		      const struct evalset *es, enum metric mt, double *vals)
{
	struct prog pg;
	prog_init(&pg, cmd);
	for (int i = 0; i < n; i++) {
		vals[i] = NAN;
		if (ir_interrupted) {
			prog_done(&pg);
			return sh_error(s, "%s: stopped", cmd);
		}
		prog_show(&pg, "node", i + 1, n);
		struct pass_report rep;
		struct ir_model *m = NULL;
		struct ir_diag d;
		ir_diag_init(&d);
		int rc = quant_apply(fm, p, q, NULL, nodes[i], cal, &m, &rep, &d);
		pass_report_clear(&rep);
		if (rc) {
			prog_done(&pg);
			ir_diag_prefix(&d, "%s: quantizing '%s' alone", cmd, sh_esc(nodes[i]));
			return sh_diag(s, &d);
		}
		ir_diag_clear(&d);
		if (!m)
			continue;   /* nothing to quantize in that node alone */
		rc = measure_value(s, cmd, m, gpu, es, mt, &vals[i]);
		ir_model_free(m);
		if (rc) {
			prog_done(&pg);
			return -1;
		}
	}
	prog_done(&pg);
	return 0;
}

/* Sort order for sensitivity: the worst metric first (NaN: last). */
struct ranked {
	int i;
	double v;
	enum metric m;
};

static int cmp_ranked(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	bool xn = isnan(x->v), yn = isnan(y->v);
	if (xn || yn)
		return xn != yn ? (xn ? 1 : -1) : x->i - y->i;
	if (x->v == y->v)
		return x->i - y->i;
	bool xw = x->m == M_MAXABS ? x->v > y->v : x->v < y->v;
	return xw ? -1 : 1;
}

/* "snr=35", "top1=99%", "cos=0.999"; or a bare number with --metric. */
static int parse_target(struct session *s, const char *v, const char *metric, enum metric *mt, double *goal)
{
	const char *eq = strchr(v, '=');
	char name[16];
	const char *val = v;
	if (eq) {
		snprintf(name, sizeof(name), "%.*s", (int)(eq - v < 15 ? eq - v : 15), v);
		val = eq + 1;
		if (metric && strcmp(metric, name))
			return sh_error(s, "quantize: --auto=%s and --metric=%s name two metrics", sh_esc(v), sh_esc(metric));
	} else {
		snprintf(name, sizeof(name), "%s", metric ? metric : "snr");
	}
	if (metric_parse(name, mt) || *mt == M_TOP5)
		return sh_error(s, "quantize: --auto takes snr=DB, cos=C, top1=P%% or maxabs=X, not '%s'", sh_esc(v));
	char *end;
	errno = 0;
	*goal = strtod(val, &end);
	if (*mt == M_TOP1 && *end == '%')
		end++;
	if (!*val || *end || errno || !isfinite(*goal))
		return sh_error(s, "quantize: --auto=%s: '%s' is not a number", sh_esc(v), sh_esc(val));
	return 0;
}

/* quantize --auto: everything quantized, then the most sensitive nodes kept
 * in float, fewest first, until the target holds; then made minimal. */
static int quant_auto(struct session *s, const struct sh_args *a, const struct pass *p, struct qargs *q,
		      const struct ir_calib *cal, bool json, bool all)
{
	const char *cmd = "quantize";
	enum metric mt = M_SNR;
	double goal = 0;
	if (parse_target(s, sh_opt(a, "auto"), sh_opt(a, "metric"), &mt, &goal))
		return -1;
	struct data_args da;
	if (data_args_get(s, cmd, a, &da))
		return -1;
	if (!da.spec)
		return sh_error(s, "quantize: --auto measures on data: give --data=SPEC too");
	bool gpu;
	if (pick_device(s, cmd, a, &gpu))
		return -1;
	const struct ir_model *fm = s->model;
	int from = s->stage, ret = -1;
	struct evalset es;
	if (evalset_build(s, cmd, fm, &da, gpu, &es))
		return -1;
	struct sh_json j;
	char **nodes = NULL, tb[64];
	int n_nodes = 0, k = 0;
	int *order = NULL, *kept = NULL;
	double *vals = NULL, v = NAN;
	struct ranked *rk = NULL;
	struct ir_model *best = NULL;
	struct pass_report best_rep;
	memset(&best_rep, 0, sizeof(best_rep));   /* pass_apply_calib fills it */
	char *best_excl = NULL;
	if (json) {
		sh_json_begin(&j, s->out);
		sh_json_obj(&j);
		sh_json_kint(&j, "from", from);
		sh_json_kstr(&j, "data", es.desc);
		sh_json_kuint(&j, "samples", es.samples);
		if (es.random)
			sh_json_kstr(&j, "note", RANDOM_EVAL_NOTE);
		sh_json_key(&j, "auto");
		sh_json_obj(&j);
		sh_json_kstr(&j, "metric", metric_names[mt]);
		sh_json_knum(&j, "target", goal);
		sh_json_key(&j, "steps");
		sh_json_arr(&j);
	} else {
		char gb[64];
		sh_printf(s, "quantize --auto: target %s against stage %d over %s samples of %s\n",
			  metric_text(mt, goal, gb, 64), from, sh_count(es.samples, tb, sizeof(tb)), sh_esc(es.desc));
		if (es.random)
			sh_printf(s, "note: %s\n", RANDOM_EVAL_NOTE);
	}
	/* step 0: everything */
	struct ir_diag d;
	ir_diag_init(&d);
	if (quant_apply(fm, p, q, q->exclude, NULL, cal, &best, &best_rep, &d)) {
		prefix_once(&d, cmd);
		sh_diag(s, &d);
		goto out;
	}
	warn_all(s, cmd, &d);
	if (!best) {
		sh_error(s, "quantize: --auto: nothing to quantize in stage %d", from);
		goto out;
	}
	if ((n_nodes = rewritten_nodes(&best_rep, fm->graph, &nodes)) < 0) {
		sh_error(s, "quantize: out of memory");
		goto out;
	}
	best_excl = join_exclude(q->exclude, NULL, NULL, 0, -1);
	if (!best_excl || measure_value(s, cmd, best, gpu, &es, mt, &v))
		goto out;
	bool met = better_or_equal(mt, v, goal);
	if (json) {
		sh_json_obj(&j);
		sh_json_kstr(&j, "step", "all");
		sh_json_key(&j, "kept");
		sh_json_arr(&j);
		sh_json_arr_end(&j);
		sh_json_knum(&j, "value", v);
		sh_json_kbool(&j, "met", met);
		sh_json_obj_end(&j);
	} else {
		sh_printf(s, "  step 0: %d node%s quantized: %s%s\n", n_nodes, n_nodes == 1 ? "" : "s", metric_text(mt, v, tb, 64),
			  met ? " (target met)" : "");
	}
	kept = calloc((size_t)(n_nodes ? n_nodes : 1), sizeof(int));
	if (!kept) {
		sh_error(s, "quantize: out of memory");
		goto out;
	}
	if (!met) {
		/* rank: each node quantized alone, the worst first */
		vals = calloc((size_t)(n_nodes ? n_nodes : 1), sizeof(double));
		rk = calloc((size_t)(n_nodes ? n_nodes : 1), sizeof(*rk));
		order = calloc((size_t)(n_nodes ? n_nodes : 1), sizeof(int));
		if (!vals || !rk || !order) {
			sh_error(s, "quantize: out of memory");
			goto out;
		}
		if (sens_alone(s, cmd, fm, p, q, cal, nodes, n_nodes, gpu, &es, mt, vals))
			goto out;
		for (int i = 0; i < n_nodes; i++)
			rk[i] = (struct ranked){ i, vals[i], mt };
		qsort(rk, (size_t)n_nodes, sizeof(*rk), cmp_ranked);
		for (int i = 0; i < n_nodes; i++)
			order[i] = rk[i].i;
		if (!json) {
			sh_printf(s, "  sensitivity (each node quantized alone):");
			for (int i = 0; i < n_nodes; i++)
				sh_printf(s, "%s %s %s", i ? "," : "", sh_esc(nodes[order[i]]),
					  metric_text(mt, vals[order[i]], tb, 64));
			sh_printf(s, "\n");
		}
		/* keep nodes in float in rank order until the target holds */
		for (int i = 0; i < n_nodes && !met; i++) {
			kept[k++] = order[i];
			char *ex;
			struct ir_model *m;
			struct pass_report rep;
			if (auto_try(s, cmd, fm, p, q, cal, nodes, kept, k, -1, gpu, &es, mt, &d, &ex, &m, &rep, &v))
				goto out;
			if (!m)   /* nothing left to quantize: the float stage itself */
				v = mt == M_SNR ? INFINITY : mt == M_COS ? 1 : mt == M_MAXABS ? 0 : 100;
			met = better_or_equal(mt, v, goal);
			if (json) {
				sh_json_obj(&j);
				sh_json_kstr(&j, "step", "keep");
				sh_json_kstr(&j, "node", nodes[order[i]]);
				sh_json_knum(&j, "value", v);
				sh_json_kbool(&j, "met", met);
				sh_json_obj_end(&j);
			} else {
				sh_printf(s, "  step %d: keep %s in float (%d kept): %s%s\n", i + 1, sh_esc(nodes[order[i]]), k,
					  metric_text(mt, v, tb, 64), met ? " (target met)" : "");
			}
			if (met && m) {
				ir_model_free(best);
				pass_report_clear(&best_rep);
				best = m;
				best_rep = rep;
				free(best_excl);
				best_excl = ex;
			} else {
				ir_model_free(m);
				pass_report_clear(&rep);
				free(ex);
			}
			if (met && !m) {
				sh_error(s, "quantize: --auto: the target needs every quantized node in float: nothing to "
					    "quantize");
				goto out;
			}
		}
		if (!met) {
			sh_error(s, "quantize: --auto: %s not reached", metric_text(mt, goal, tb, 64));
			goto out;
		}
		/* minimal: drop each kept node again, the least sensitive first */
		for (int i = k - 1; i >= 0 && k > 1; i--) {
			char *ex;
			struct ir_model *m;
			struct pass_report rep;
			double w;
			if (auto_try(s, cmd, fm, p, q, cal, nodes, kept, k, i, gpu, &es, mt, &d, &ex, &m, &rep, &w))
				goto out;
			bool ok = m && better_or_equal(mt, w, goal);
			const char *nm = nodes[kept[i]];
			if (json) {
				sh_json_obj(&j);
				sh_json_kstr(&j, "step", "drop");
				sh_json_kstr(&j, "node", nm);
				sh_json_knum(&j, "value", w);
				sh_json_kbool(&j, "met", ok);
				sh_json_obj_end(&j);
			} else {
				sh_printf(s, "  try quantizing %s again: %s: %s\n", sh_esc(nm), metric_text(mt, w, tb, 64),
					  ok ? "dropped from the kept set" : "kept");
			}
			if (ok) {
				for (int t = i; t + 1 < k; t++)
					kept[t] = kept[t + 1];
				k--;
				ir_model_free(best);
				pass_report_clear(&best_rep);
				best = m;
				best_rep = rep;
				free(best_excl);
				best_excl = ex;
				v = w;
			} else {
				ir_model_free(m);
				pass_report_clear(&rep);
				free(ex);
			}
		}
	}
	if (json) {
		sh_json_arr_end(&j);
		sh_json_key(&j, "kept");
		sh_json_arr(&j);
		for (int i = 0; i < k; i++)
			sh_json_str(&j, nodes[kept[i]]);
		sh_json_arr_end(&j);
		sh_json_knum(&j, "value", v);
		sh_json_obj_end(&j);
		sh_json_key(&j, "report");
		sh_pass_report_json(&j, &best_rep);
	} else {
		sh_printf(s, "kept in float: ");
		for (int i = 0; i < k; i++)
			sh_printf(s, "%s%s", i ? ", " : "", sh_esc(nodes[kept[i]]));
		char gb[64];
		sh_printf(s, "%s (%d of %d nodes): %s, target %s\n", k ? "" : "nothing", k, n_nodes,
			  metric_text(mt, v, tb, 64), metric_text(mt, goal, gb, 64));
		sh_pass_report_print(s, &best_rep, all);
	}
	/* the stage: labelled with the options that make it again */
	struct qargs fin = *q;
	fin.n = 0;
	for (int i = 0; i < q->n; i++)
		if (strcmp(q->a[i].name, "exclude"))
			qargs_add(&fin, q->a[i].name, q->a[i].value);
	if (*best_excl)
		qargs_add(&fin, "exclude", best_excl);
	struct ir_model *m = best;
	best = NULL;
	int rc = sh_pass_push(s, p, fin.a, fin.n, m, &best_rep, json);
	if (!rc)
		rec_add(s, from, fin.a, fin.n);
	if (json) {
		sh_json_kint(&j, "stage", s->stage);
		sh_json_obj_end(&j);
		sh_json_end(&j);
		json = false;
	}
	ret = rc;
out:
	if (json) {   /* an error in the middle: the document still ends */
		sh_json_arr_end(&j);
		sh_json_obj_end(&j);
		sh_json_kbool(&j, "failed", true);
		sh_json_obj_end(&j);
		sh_json_end(&j);
	}
	ir_diag_clear(&d);
	ir_model_free(best);
	pass_report_clear(&best_rep);
	free(best_excl);
	free_names(nodes, n_nodes);
	free(order);
	free(kept);
	free(vals);
	free(rk);
	evalset_free(&es);
	return ret;
}

int cmd_quantize(struct session *s, int argc, char **argv)
{
	const char *cmd = "quantize";
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (a.npos > 1)
		return sh_usage(s, argv[0]);
	if (!sh_need_model(s))
		return -1;
	const char *prec = a.npos ? a.pos[0] : "int8";
	if (strcmp(prec, "int8") && strcmp(prec, "fp8") && strcmp(prec, "int4"))
		return sh_error(s, "quantize: unknown precision '%s' (int8, fp8, int4)", sh_esc(prec));
	const struct pass *p = pass_find("quantize");
	if (!p)
		return sh_error(s, "quantize: this ogsh has no quantize pass");
	struct qargs q;
	memset(&q, 0, sizeof(q));
	qargs_add(&q, "precision", prec);
	const char *v;
	if ((v = sh_opt(&a, "method"))) {
		struct ir_calib_how how;
		struct ir_diag d;
		ir_diag_init(&d);
		if (ir_calib_method_parse(v, &how, &d)) {
			ir_diag_prefix(&d, "%s", cmd);
			return sh_diag(s, &d);
		}
		ir_diag_clear(&d);
		ir_calib_method_name(&how, q.method, sizeof(q.method));
		qargs_add(&q, "method", q.method);
	}
	if ((v = sh_opt(&a, "exclude"))) {
		q.exclude = v;
		qargs_add(&q, "exclude", v);
	}
	if ((v = sh_opt(&a, "only")))
		qargs_add(&q, "only", v);
	if (sh_flag(&a, "per-tensor-weights"))
		qargs_add(&q, "per-tensor-weights", "on");
	if (sh_flag(&a, "asymmetric"))
		qargs_add(&q, "asymmetric", "on");
	if ((v = sh_opt(&a, "keep-float"))) {
		if (strcmp(v, "float16") && strcmp(v, "float32"))
			return sh_error(s, "quantize: --keep-float must be float16 or float32, not '%s'", sh_esc(v));
		qargs_add(&q, "keep-float", v);
	}
	int blk;
	if ((v = sh_opt(&a, "min-channels"))) {
		if (sh_int_opt(s, cmd, "min-channels", v, 0, &blk))
			return -1;
		qargs_add(&q, "min-channels", v);
	}
	if ((v = sh_opt(&a, "block"))) {
		if (sh_int_opt(s, cmd, "block", v, 1, &blk))
			return -1;
		qargs_add(&q, "block", v);
	}
	if (sh_flag(&a, "awq"))
		qargs_add(&q, "awq", "on");
	const char *autov = sh_opt(&a, "auto");
	if (!autov && (sh_opt(&a, "data") || sh_opt(&a, "metric") || sh_opt(&a, "preprocess") || sh_opt(&a, "batch") ||
		       sh_opt(&a, "batches") || sh_opt(&a, "device") || sh_opt(&a, "seed")))
		return sh_error(s, "quantize: --data, --metric and the data options go with --auto=TARGET");
	if (autov && sh_opt(&a, "only"))
		return sh_error(s, "quantize: --auto chooses what stays in float: --only goes without it");
	bool needs = strcmp(prec, "int4") || sh_flag(&a, "awq");
	if (needs && !s->have_calib)
		return sh_error(s, "quantize: no calibration: run calibrate --data=... first");
	bool json = sh_flag(&a, "json"), all = sh_flag(&a, "all");
	struct ir_calib tmp;
	const struct ir_calib *cal = NULL;
	int mapped = 0, lost = 0, ret;
	ir_calib_init(&tmp);
	if (s->have_calib && calib_for_current(s, cmd, json, &tmp, &cal, &mapped, &lost))
		return -1;
	if (cal && cal->random && !json)
		sh_printf(s, "note: %s\n", RANDOM_NOTE);
	if (autov) {
		ret = quant_auto(s, &a, p, &q, cal, json, all);
		ir_calib_clear(&tmp);
		return ret;
	}
	int from = s->stage;
	struct pass_report rep;
	struct ir_model *out = NULL;
	struct ir_diag d;
	ir_diag_init(&d);
	int rc = pass_apply_calib(s->model, p, q.a, q.n, cal, false, &out, &rep, &d);
	if (rc) {
		pass_report_clear(&rep);
		ir_calib_clear(&tmp);
		prefix_once(&d, cmd);
		return sh_diag(s, &d);
	}
	sh_diag(s, &d);
	struct sh_json j;
	if (json) {
		sh_json_begin(&j, s->out);
		sh_json_obj(&j);
		sh_json_kint(&j, "from", from);
		sh_json_kstr(&j, "precision", prec);
		if (cal) {
			sh_json_key(&j, "calibration");
			sh_json_obj(&j);
			sh_json_kint(&j, "stage", s->calib_stage);
			sh_json_kint(&j, "mapped", mapped);
			sh_json_kint(&j, "lost", lost);
			sh_json_kbool(&j, "random", cal->random);
			if (cal->random)
				sh_json_kstr(&j, "note", RANDOM_NOTE);
			sh_json_obj_end(&j);
		}
		sh_json_key(&j, "report");
		sh_pass_report_json(&j, &rep);
	} else {
		sh_pass_report_print(s, &rep, all);
	}
	bool changed = out != NULL;
	ret = sh_pass_push(s, p, q.a, q.n, out, &rep, json);
	if (!ret && changed)
		rec_add(s, from, q.a, q.n);
	if (json) {
		if (changed && !ret) {
			sh_json_kint(&j, "stage", s->stage);
		} else {
			sh_json_key(&j, "stage");
			sh_json_null(&j);
		}
		sh_json_obj_end(&j);
		sh_json_end(&j);
	}
	ir_calib_clear(&tmp);
	return ret;
}

/* ------------------------------------------------------------------------ */
/* convert-fp16, convert-bf16                                                */
/* ------------------------------------------------------------------------ */

int cmd_convert_fp16(struct session *s, int argc, char **argv)
{
	const char *cmd = argv[0];
	struct sh_args a;
	if (sh_model_cmd_args(s, argc, argv, &a))
		return -1;
	const struct pass *p = pass_find(cmd);
	if (!p)
		return sh_error(s, "%s: this ogsh has no %s pass", cmd, cmd);
	struct pass_arg args[8];
	int n = 0;
	const char *v;
	if (sh_flag(&a, "no-keep-io"))
		args[n++] = (struct pass_arg){ "keep-io", "off" };
	if ((v = sh_opt(&a, "block-ops")))
		args[n++] = (struct pass_arg){ "block-ops", v };
	if ((v = sh_opt(&a, "block-nodes")))
		args[n++] = (struct pass_arg){ "block-nodes", v };
	if (sh_flag(&a, "clamp"))
		args[n++] = (struct pass_arg){ "clamp", "on" };
	if ((v = sh_opt(&a, "data-max"))) {
		char *end;
		errno = 0;
		double x = strtod(v, &end);
		if (!*v || *end || errno || !(x > 0) || isinf(x))
			return sh_error(s, "%s: --data-max must be a number > 0, not '%s'", cmd, sh_esc(v));
		args[n++] = (struct pass_arg){ "data-max", v };
	}
	int mr;
	if ((v = sh_opt(&a, "max-reduction"))) {
		if (sh_int_opt(s, cmd, "max-reduction", v, 1, &mr))
			return -1;
		args[n++] = (struct pass_arg){ "max-reduction", v };
	}
	bool json = sh_flag(&a, "json"), all = sh_flag(&a, "all");
	struct ir_calib tmp;
	const struct ir_calib *cal = NULL;
	int mapped = 0, lost = 0;
	ir_calib_init(&tmp);
	if (s->have_calib && calib_for_current(s, cmd, json, &tmp, &cal, &mapped, &lost))
		return -1;
	if (!cal && (sh_opt(&a, "data-max") || sh_opt(&a, "max-reduction")) && !json)
		sh_printf(s, "note: no calibration: --data-max and --max-reduction need one (calibrate --data=... first)\n");
	if (cal && cal->random && !json)
		sh_printf(s, "note: %s\n", RANDOM_NOTE);
	int from = s->stage;
	struct pass_report rep;
	struct ir_model *out = NULL;
	struct ir_diag d;
	ir_diag_init(&d);
	int rc = pass_apply_calib(s->model, p, args, n, cal, false, &out, &rep, &d);
	ir_calib_clear(&tmp);
	if (rc) {
		pass_report_clear(&rep);
		prefix_once(&d, cmd);
		return sh_diag(s, &d);
	}
	sh_diag(s, &d);
	struct sh_json j;
	if (json) {
		sh_json_begin(&j, s->out);
		sh_json_obj(&j);
		sh_json_kint(&j, "from", from);
		sh_json_kbool(&j, "calibrated", cal != NULL);
		if (cal && cal->random)
			sh_json_kstr(&j, "note", RANDOM_NOTE);
		sh_json_key(&j, "report");
		sh_pass_report_json(&j, &rep);
	} else {
		sh_pass_report_print(s, &rep, all);
	}
	bool changed = out != NULL;
	int ret = sh_pass_push(s, p, args, n, out, &rep, json);
	if (json) {
		if (changed && !ret) {
			sh_json_kint(&j, "stage", s->stage);
		} else {
			sh_json_key(&j, "stage");
			sh_json_null(&j);
		}
		sh_json_obj_end(&j);
		sh_json_end(&j);
	}
	return ret;
}

/* ------------------------------------------------------------------------ */
/* sensitivity                                                               */
/* ------------------------------------------------------------------------ */

/* Local error of one node: its output in the quantized stage against the
 * float stage's tensor that it stands for. */
struct local {
	const struct ir_node *n;   /* in the quantized stage */
	char *ref_name;            /* the float stage's value */
	double bb, ee;
};

int cmd_sensitivity(struct session *s, int argc, char **argv)
{
	const char *cmd = "sensitivity";
	struct sh_args a;
	if (sh_model_cmd_args(s, argc, argv, &a))
		return -1;
	bool json = sh_flag(&a, "json");
	enum metric mt = M_SNR;
	const char *v;
	if ((v = sh_opt(&a, "metric")) && (metric_parse(v, &mt) || mt == M_TOP5 || mt == M_MAXABS))
		return sh_error(s, "sensitivity: --metric must be snr, cos or top1, not '%s'", sh_esc(v));
	int top = 0;
	if ((v = sh_opt(&a, "top")) && sh_int_opt(s, cmd, "top", v, 1, &top))
		return -1;
	/* how the stage was made: quantize's record, or the label of `apply quantize OPTION=VALUE...` */
	const struct sh_quant_rec *rec = rec_find(s, s->stage);
	const struct pass_stage *qst = &s->hist.st[s->stage];
	char lab[256];
	struct qargs q;
	memset(&q, 0, sizeof(q));
	if (rec) {
		for (int i = 0; i < rec->n_args; i++)
			qargs_add(&q, rec->names[i], rec->values[i]);
	} else if (qst->parent >= 0 && qst->label && !strncmp(qst->label, "quantize", 8) &&
		   (!qst->label[8] || qst->label[8] == ' ') && strlen(qst->label) < sizeof(lab)) {
		snprintf(lab, sizeof(lab), "%s", qst->label + 8);
		char *save = NULL;
		for (char *w = strtok_r(lab, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
			char *eq = strchr(w, '=');
			if (eq) {
				*eq = 0;
				qargs_add(&q, w, eq + 1);
			}
		}
	} else {
		return sh_error(s, "sensitivity: stage %d was not made by quantize (quantize, or checkout a stage "
			       "quantize made)", s->stage);
	}
	const struct pass *p = pass_find("quantize");
	if (!p)
		return sh_error(s, "sensitivity: this ogsh has no quantize pass");
	struct data_args da;
	if (data_args_get(s, cmd, &a, &da))
		return -1;
	if (!da.spec) {
		if (!s->calib_data)
			return sh_error(s, "sensitivity: --data=SPEC is needed (the calibration was loaded from a file)");
		da.spec = s->calib_data;
		if (!da.pre)
			da.pre = s->calib_pre;
	}
	bool gpu;
	if (pick_device(s, cmd, &a, &gpu))
		return -1;
	int fs = qst->parent, qs = s->stage;
	const struct ir_model *fm = s->hist.st[fs].m, *qm = s->model;
	/* the calibration, named as in the float stage */
	struct ir_calib tmp;
	const struct ir_calib *cal = NULL;
	ir_calib_init(&tmp);
	int mapped, lost;
	if (s->have_calib) {
		if (calib_usable(s, cmd, fs))
			return -1;
		if (s->calib_stage == fs) {
			cal = &s->calib;
		} else {
			if (calib_map_to(&s->hist, &s->calib, s->calib_stage, fs, &tmp, &mapped, &lost))
				return sh_error(s, "sensitivity: out of memory");
			cal = &tmp;
		}
	}
	char **nodes = NULL;
	int n_nodes = rewritten_nodes(&s->hist.st[qs].rep, fm->graph, &nodes);
	struct evalset es;
	memset(&es, 0, sizeof(es));
	double *vals = NULL;
	struct local *loc = NULL;
	struct ranked *rk = NULL;
	int ret = -1;
	struct ir_diag d;
	ir_diag_init(&d);
	if (n_nodes < 0) {
		sh_error(s, "sensitivity: out of memory");
		goto out;
	}
	if (!n_nodes) {
		sh_error(s, "sensitivity: the report of stage %d names no quantized node", qs);
		goto out;
	}
	vals = calloc((size_t)n_nodes, sizeof(double));
	loc = calloc((size_t)n_nodes, sizeof(*loc));
	rk = calloc((size_t)n_nodes, sizeof(*rk));
	if (!vals || !loc || !rk) {
		sh_error(s, "sensitivity: out of memory");
		goto out;
	}
	if (evalset_build(s, cmd, fm, &da, gpu, &es))
		goto out;
	if (sens_alone(s, cmd, fm, p, &q, cal, nodes, n_nodes, gpu, &es, mt, vals))
		goto out;
	/* local errors: both stages with every value, batch by batch */
	for (int i = 0; i < n_nodes; i++) {
		int cnt = 0;
		const struct ir_node *n = sh_find_node(qm->graph, nodes[i], &cnt);
		loc[i].n = n;
		if (n && n->n_outputs && n->outputs[0]) {
			const char *rn = pass_history_map(&s->hist, qs, fs, n->outputs[0]->name);
			loc[i].ref_name = rn ? strdup(rn) : NULL;
		}
	}
	struct runner rq = { .m = qm, .gpu = gpu, .keep_all = true, .tf32 = s->tf32 };
	struct runner rf = { .m = fm, .gpu = gpu, .keep_all = true, .tf32 = s->tf32 };
	int rc = 0;
	for (int b = 0; b < es.n && !rc; b++) {
		struct exec_values oq = { 0 }, aq = { 0 }, of = { 0 }, af = { 0 };
		if (ir_interrupted)
			rc = ir_diag_err(&d, IR_EINTR, "stopped");
		if (!rc)
			rc = runner_run(&rq, &es.in[b], NULL, NULL, &oq, &aq, &d);
		if (!rc)
			rc = runner_run(&rf, &es.in[b], NULL, NULL, &of, &af, &d);
		for (int i = 0; !rc && i < n_nodes; i++) {
			if (!loc[i].n || !loc[i].ref_name || !loc[i].n->outputs[0])
				continue;
			const struct kern_value *x = exec_values_find(&aq, loc[i].n->outputs[0]->name);
			const struct kern_value *y = exec_values_find(&af, loc[i].ref_name);
			if (!x || !y || x->kind != KV_TENSOR || y->kind != KV_TENSOR || x->t->numel != y->t->numel)
				continue;
			double *xa = pass_tensor_f64(x->t), *ya = pass_tensor_f64(y->t);
			for (uint64_t e = 0; xa && ya && e < y->t->numel; e++) {
				if (!isfinite(xa[e]) || !isfinite(ya[e]))
					continue;
				loc[i].bb += ya[e] * ya[e];
				loc[i].ee += (xa[e] - ya[e]) * (xa[e] - ya[e]);
			}
			free(xa);
			free(ya);
		}
		exec_values_clear(&oq);
		exec_values_clear(&aq);
		exec_values_clear(&of);
		exec_values_clear(&af);
	}
	runner_free(&rq);
	runner_free(&rf);
	if (rc) {
		ir_diag_prefix(&d, "%s", cmd);
		sh_diag(s, &d);
		goto out;
	}
	/* dot --color-by error: each node's relative RMS error (larger is worse) */
	if (sh_node_values_reset(&s->node_err, qs, qm->graph->next_id, "rel error")) {
		for (int i = 0; i < n_nodes; i++)
			if (loc[i].n && loc[i].bb > 0 && loc[i].n->id >= 0 && loc[i].n->id < s->node_err.n)
				s->node_err.v[loc[i].n->id] = sqrt(loc[i].ee / loc[i].bb);
	}
	for (int i = 0; i < n_nodes; i++)
		rk[i] = (struct ranked){ i, vals[i], mt };
	qsort(rk, (size_t)n_nodes, sizeof(*rk), cmp_ranked);
	int shown = top && top < n_nodes ? top : n_nodes;
	char tb[64];
	if (sh_json_file(s, json)) {
		struct sh_json j;
		sh_json_begin(&j, sh_json_file(s, json));
		sh_json_obj(&j);
		sh_json_kint(&j, "stage", qs);
		sh_json_kint(&j, "float_stage", fs);
		sh_json_kstr(&j, "metric", metric_names[mt]);
		sh_json_kstr(&j, "data", es.desc);
		sh_json_kuint(&j, "samples", es.samples);
		if (es.random)
			sh_json_kstr(&j, "note", RANDOM_EVAL_NOTE);
		sh_json_key(&j, "nodes");
		sh_json_arr(&j);
		for (int r = 0; r < shown; r++) {
			int i = rk[r].i;
			sh_json_obj(&j);
			sh_json_kint(&j, "rank", r + 1);
			sh_json_kstr(&j, "node", nodes[i]);
			sh_json_kstr(&j, "op", loc[i].n ? loc[i].n->op_type : NULL);
			sh_json_knum(&j, "alone", vals[i]);
			double sq = loc[i].n && loc[i].bb > 0 ? (loc[i].ee > 0 ? 10 * log10(loc[i].bb / loc[i].ee) : INFINITY) : NAN;
			sh_json_knum(&j, "local_sqnr_db", sq);
			sh_json_obj_end(&j);
		}
		sh_json_arr_end(&j);
		sh_json_obj_end(&j);
		sh_json_end(&j);
	}
	if (!json) {
		sh_printf(s, "sensitivity of stage %d (quantized from stage %d) over %s samples of %s: each node "
			     "quantized alone, against stage %d\n", qs, fs, sh_count(es.samples, tb, sizeof(tb)), sh_esc(es.desc),
			  fs);
		if (es.random)
			sh_printf(s, "note: %s\n", RANDOM_EVAL_NOTE);
		char h1[48];
		snprintf(h1, sizeof(h1), ">alone: %s", mt == M_SNR ? "snr dB" : mt == M_COS ? "cos" : "top1 %");
		struct sh_table t;
		sh_table_init(&t, 5, ">rank", "node", "op", h1, ">local SQNR dB");
		for (int r = 0; r < shown; r++) {
			int i = rk[r].i;
			char b[3][32];
			snprintf(b[0], 32, "%d", r + 1);
			if (isnan(vals[i]))
				snprintf(b[1], 32, "-");
			else if (mt == M_COS)
				snprintf(b[1], 32, "%.6f", vals[i]);
			else
				snprintf(b[1], 32, "%.2f", vals[i]);
			if (!loc[i].n || !(loc[i].bb > 0))
				snprintf(b[2], 32, "-");
			else if (loc[i].ee == 0)
				snprintf(b[2], 32, "inf");
			else
				snprintf(b[2], 32, "%.2f", 10 * log10(loc[i].bb / loc[i].ee));
			sh_table_row(&t, b[0], sh_esc(nodes[i]), loc[i].n ? sh_esc(loc[i].n->op_type) : "?", b[1], b[2]);
		}
		sh_table_print(s, &t, true);
		sh_table_free(&t);
		if (shown < n_nodes)
			sh_printf(s, "... %d more (--top=%d)\n", n_nodes - shown, n_nodes);
		sh_printf(s, "most sensitive first; local SQNR: the node's output against stage %d's (dot --color-by "
			     "error draws it)\n", fs);
	}
	ret = 0;
out:
	for (int i = 0; loc && i < n_nodes; i++)
		free(loc[i].ref_name);
	free(loc);
	free(vals);
	free(rk);
	free_names(nodes, n_nodes > 0 ? n_nodes : 0);
	evalset_free(&es);
	ir_calib_clear(&tmp);
	ir_diag_clear(&d);
	return ret;
}

/* ------------------------------------------------------------------------ */
/* eval                                                                      */
/* ------------------------------------------------------------------------ */

/* Top-1 and top-5 of one output against labels: rows are samples. */
static int label_batch(const struct ir_tensor *t, const int64_t *lab, uint64_t n, uint64_t *c1, uint64_t *c5,
		       struct ir_diag *d)
{
	if (t->rank < 1 || t->dims[t->rank - 1] < 1)
		return ir_diag_err(d, IR_ERR, "the first output has no class axis");
	uint64_t k = (uint64_t)t->dims[t->rank - 1], rows = t->numel / k;
	if (rows != n)
		return ir_diag_err(d, IR_ERR, "the first output has %" PRIu64 " rows for %" PRIu64
				   " samples: --labels needs one row per sample", rows, n);
	double *x = pass_tensor_f64(t);
	if (!x)
		return ir_diag_err(d, IR_ERR, "the first output is not numbers");
	for (uint64_t r = 0; r < rows; r++) {
		const double *row = x + r * k;
		int64_t want = lab[r];
		if (want < 0 || (uint64_t)want >= k)
			continue;   /* a label out of range is never right */
		uint64_t better = 0;
		for (uint64_t i = 0; i < k; i++)
			if (row[i] > row[want] || (row[i] == row[want] && i < (uint64_t)want))
				better++;
		if (better == 0)
			(*c1)++;
		if (better < 5)
			(*c5)++;
	}
	free(x);
	return 0;
}

int cmd_eval(struct session *s, int argc, char **argv)
{
	const char *cmd = "eval";
	struct sh_args a;
	if (sh_model_cmd_args(s, argc, argv, &a))
		return -1;
	bool json = sh_flag(&a, "json");
	struct data_args da;
	if (data_args_get(s, cmd, &a, &da))
		return -1;
	if (!da.spec)
		return sh_error(s, "eval: --data=SPEC is needed");
	const char *labels = sh_opt(&a, "labels"), *against = sh_opt(&a, "against"), *v;
	if (labels && against)
		return sh_error(s, "eval: --against and --labels are two references: give one of them");
	enum metric mt = labels ? M_TOP1 : M_SNR;
	if ((v = sh_opt(&a, "metric")) && metric_parse(v, &mt))
		return sh_error(s, "eval: --metric must be top1, top5, snr, cos or maxabs, not '%s'", sh_esc(v));
	if (labels && mt != M_TOP1 && mt != M_TOP5)
		return sh_error(s, "eval: against --labels the metric is top1 or top5, not %s", metric_names[mt]);
	int ref = 0;
	if (against && (ref = sh_stage_arg(s, cmd, against)) < 0)
		return -1;
	if (!labels && !against && s->stage == 0)
		return sh_error(s, "eval: stage 0 is current: give --against=STAGE or --labels=FILE");
	bool gpu;
	if (pick_device(s, cmd, &a, &gpu))
		return -1;
	int64_t *lab = NULL;
	uint64_t n_lab = 0;
	struct ir_diag d;
	ir_diag_init(&d);
	if (labels && exec_read_labels(labels, &lab, &n_lab, &d)) {
		ir_diag_prefix(&d, "%s: --labels", cmd);
		return sh_diag(s, &d);
	}
	const struct ir_model *rm = s->hist.st[ref].m;
	if (!labels && rm->graph->n_outputs != s->model->graph->n_outputs) {
		free(lab);
		return sh_error(s, "eval: stage %d has %d outputs and stage %d has %d", s->stage, s->model->graph->n_outputs,
				ref, rm->graph->n_outputs);
	}
	struct exec_data *ds;
	if (data_open(s, cmd, s->model, &da, &ds)) {
		free(lab);
		return -1;
	}
	int n_out = s->model->graph->n_outputs, ret = -1, batches = 0, total = data_batches(ds);
	struct acc *acc = calloc((size_t)(n_out ? n_out : 1), sizeof(*acc));
	struct runner rcur = { .m = s->model, .gpu = gpu, .tf32 = s->tf32 };
	struct runner rr = { .m = rm, .gpu = gpu, .tf32 = s->tf32 };
	struct exec_values in = { 0 };
	uint64_t samples = 0, c1 = 0, c5 = 0;
	struct prog pg;
	prog_init(&pg, cmd);
	if (!acc) {
		sh_error(s, "eval: out of memory");
		goto out;
	}
	for (;;) {
		if (ir_interrupted) {
			prog_done(&pg);
			sh_error(s, "eval: stopped by Ctrl-C after %d batch%s", batches, batches == 1 ? "" : "es");
			goto out;
		}
		int n = 0;
		exec_values_clear(&in);
		int rc = exec_data_next(ds, &in, &n, &d);
		warn_all(s, cmd, &d);
		if (rc == 0)
			break;
		struct exec_values o1 = { 0 }, o2 = { 0 };
		if (rc > 0) {
			prog_show(&pg, "batch", batches + 1, total);
			rc = runner_run(&rcur, &in, NULL, NULL, &o1, NULL, &d);
		}
		if (rc >= 0 && labels) {
			if (samples + (uint64_t)n > n_lab)
				rc = ir_diag_err(&d, IR_ERR, "'%s' has %" PRIu64 " labels and the data has more samples",
						 labels, n_lab);
			else if (!o1.n || o1.a[0].v.kind != KV_TENSOR)
				rc = ir_diag_err(&d, IR_ERR, "the first output is not a tensor");
			else
				rc = label_batch(o1.a[0].v.t, lab + samples, (uint64_t)n, &c1, &c5, &d);
		} else if (rc >= 0) {
			rc = runner_run(&rr, &in, NULL, NULL, &o2, NULL, &d);
			for (int i = 0; rc >= 0 && i < o1.n && i < o2.n; i++)
				if (o1.a[i].v.kind == KV_TENSOR && o2.a[i].v.kind == KV_TENSOR)
					rc = acc_add(&acc[i], o1.a[i].name, o1.a[i].v.t, o2.a[i].v.t, &d);
		}
		exec_values_clear(&o1);
		exec_values_clear(&o2);
		if (rc < 0) {
			prog_done(&pg);
			if (rc == IR_EINTR) {
				sh_error(s, "eval: stopped by Ctrl-C after %d batch%s", batches, batches == 1 ? "" : "es");
			} else {
				ir_diag_prefix(&d, "%s: batch %d", cmd, batches + 1);
				sh_diag(s, &d);
			}
			goto out;
		}
		batches++;
		samples += (uint64_t)n;
	}
	prog_done(&pg);
	if (!samples) {
		sh_error(s, "eval: the data has no samples");
		goto out;
	}
	const char *dev = gpu ? "cuda" : "cpu";
	bool rnd = exec_data_random(ds);
	char b[8][32];
	if (labels) {
		double t1 = 100.0 * (double)c1 / (double)samples, t5 = 100.0 * (double)c5 / (double)samples;
		if (samples < n_lab)
			sh_warn(s, "eval: '%s' has %" PRIu64 " labels for %" PRIu64 " samples: the rest were not used",
				sh_esc(labels), n_lab, samples);
		if (sh_json_file(s, json)) {
			struct sh_json j;
			sh_json_begin(&j, sh_json_file(s, json));
			sh_json_obj(&j);
			sh_json_kint(&j, "stage", s->stage);
			sh_json_kstr(&j, "labels", labels);
			sh_json_kstr(&j, "data", exec_data_desc(ds));
			sh_json_kuint(&j, "samples", samples);
			sh_json_kint(&j, "batches", batches);
			sh_json_kstr(&j, "device", dev);
			sh_json_kstr(&j, "metric", metric_names[mt]);
			sh_json_knum(&j, "value", mt == M_TOP1 ? t1 : t5);
			sh_json_knum(&j, "top1", t1);
			sh_json_knum(&j, "top5", t5);
			sh_json_kuint(&j, "correct", mt == M_TOP1 ? c1 : c5);
			if (rnd)
				sh_json_kstr(&j, "note", RANDOM_EVAL_NOTE);
			sh_json_obj_end(&j);
			sh_json_end(&j);
		}
		if (!json) {
			sh_printf(s, "eval: stage %d on %s, %d batch%s on %s, against '%s'\n", s->stage,
				  sh_esc(exec_data_desc(ds)), batches, batches == 1 ? "" : "es", dev, sh_esc(labels));
			sh_printf(s, "top1 %.2f%% (%s of %s), top5 %.2f%% (%s)\n", t1, sh_count(c1, b[0], 32),
				  sh_count(samples, b[1], 32), t5, sh_count(c5, b[2], 32));
			if (rnd)
				sh_printf(s, "note: %s\n", RANDOM_EVAL_NOTE);
		}
		ret = 0;
		goto out;
	}
	double value = accs_value(acc, n_out, mt);
	if (isnan(value)) {
		sh_error(s, "eval: %s needs an output whose last dim is larger than 1", metric_names[mt]);
		goto out;
	}
	if (sh_json_file(s, json)) {
		struct sh_json j;
		sh_json_begin(&j, sh_json_file(s, json));
		sh_json_obj(&j);
		sh_json_kint(&j, "stage", s->stage);
		sh_json_kint(&j, "against", ref);
		sh_json_kstr(&j, "data", exec_data_desc(ds));
		sh_json_kuint(&j, "samples", samples);
		sh_json_kint(&j, "batches", batches);
		sh_json_kstr(&j, "device", dev);
		sh_json_kstr(&j, "metric", metric_names[mt]);
		sh_json_knum(&j, "value", value);
		sh_json_key(&j, "outputs");
		sh_json_arr(&j);
		for (int i = 0; i < n_out; i++) {
			sh_json_obj(&j);
			sh_json_kstr(&j, "name", s->model->graph->outputs[i]->name);
			sh_json_knum(&j, "snr_db", acc_snr(&acc[i]));
			sh_json_knum(&j, "cosine", acc_cos(&acc[i]));
			sh_json_knum(&j, "max_abs", acc[i].max_abs);
			if (acc[i].topk) {
				sh_json_knum(&j, "top1", acc_value(&acc[i], M_TOP1));
				sh_json_knum(&j, "top5", acc_value(&acc[i], M_TOP5));
			}
			sh_json_obj_end(&j);
		}
		sh_json_arr_end(&j);
		if (rnd)
			sh_json_kstr(&j, "note", RANDOM_EVAL_NOTE);
		sh_json_obj_end(&j);
		sh_json_end(&j);
	}
	if (!json) {
		sh_printf(s, "eval: stage %d against stage %d on %s, %d batch%s on %s\n", s->stage, ref,
			  sh_esc(exec_data_desc(ds)), batches, batches == 1 ? "" : "es", dev);
		struct sh_table t;
		sh_table_init(&t, 6, "output", ">snr dB", ">cosine", ">max abs", ">top1", ">top5");
		for (int i = 0; i < n_out; i++) {
			double sn = acc_snr(&acc[i]);
			if (isinf(sn))
				snprintf(b[0], 32, sn > 0 ? "inf" : "-inf");
			else
				snprintf(b[0], 32, "%.2f", sn);
			snprintf(b[1], 32, "%.6f", acc_cos(&acc[i]));
			snprintf(b[2], 32, "%.4g", acc[i].max_abs);
			if (acc[i].topk) {
				snprintf(b[3], 32, "%.2f%%", acc_value(&acc[i], M_TOP1));
				snprintf(b[4], 32, "%.2f%%", acc_value(&acc[i], M_TOP5));
			} else {
				snprintf(b[3], 32, "-");
				snprintf(b[4], 32, "-");
			}
			sh_table_row(&t, sh_esc(s->model->graph->outputs[i]->name), b[0], b[1], b[2], b[3], b[4]);
		}
		sh_table_print(s, &t, true);
		sh_table_free(&t);
		sh_printf(s, "%s%s\n", metric_text(mt, value, b[5], 32), n_out > 1 ? " (the worst output)" : "");
		if (rnd)
			sh_printf(s, "note: %s\n", RANDOM_EVAL_NOTE);
	}
	ret = 0;
out:
	prog_done(&pg);
	free(acc);
	free(lab);
	exec_values_clear(&in);
	runner_free(&rcur);
	runner_free(&rr);
	exec_data_free(ds);
	ir_diag_clear(&d);
	return ret;
}
