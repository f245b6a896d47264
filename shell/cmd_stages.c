/*
 * cmd_stages.c - passes and stages: passes, explain, apply, optimize,
 * stages, undo, redo, checkout, diff, and the two-stage forms of stats and
 * compare.
 */
#include "shell.h"
#include "exec/exec_io.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

int sh_stage_arg(struct session *s, const char *cmd, const char *arg)
{
	const char *p = arg[0] == '@' ? arg + 1 : arg;
	char *end;
	long v = strtol(p, &end, 10);
	if (!*p || *end) {
		sh_error(s, "%s: '%s' is not a stage number (stages lists them)", cmd, sh_esc(arg));
		return -1;
	}
	if (p[0] == '-')
		v += s->hist.cur;
	if (v < 0 || v >= s->hist.n) {
		sh_error(s, "%s: there is no stage %s (stages 0 to %d)", cmd, sh_esc(arg), s->hist.n - 1);
		return -1;
	}
	return (int)v;
}

/* Totals of a model for stage lists: nodes, params, FLOPs, activation peak. */
struct totals {
	int nodes;
	double params, flops, peak;
	bool known;   /* the cost model could count everything */
};

static void model_totals(struct ir_model *m, struct totals *t)
{
	memset(t, 0, sizeof(*t));
	t->nodes = m->graph->n_nodes;
	struct ir_diag d;
	ir_diag_init(&d);
	d.max_warnings = 1;
	ir_infer(m, &d);
	struct ir_stats *st = ir_stats_new(m, &d);
	if (st) {
		t->params = st->params;
		t->flops = st->flops;
		t->peak = st->peak_bytes;
		t->known = !st->n_unknown;
		ir_stats_free(st);
	}
	ir_diag_clear(&d);
}

static const char *si(double v, char *buf, size_t size)
{
	const char *u[] = { "", " K", " M", " G", " T" };
	int k = 0;
	double a = fabs(v);
	while (a >= 1000 && k < 4) {
		a /= 1000;
		v /= 1000;
		k++;
	}
	if (k == 0)
		snprintf(buf, size, "%.0f", v);
	else
		snprintf(buf, size, "%.3g%s", v, u[k]);
	return buf;
}

static const char *delta(double v, char *buf, size_t size)
{
	if (v == 0)
		return snprintf(buf, size, "0"), buf;
	char t[32];
	si(fabs(v), t, sizeof(t));
	buf[0] = v < 0 ? '-' : '+';
	size_t n = strlen(t);
	if (n + 2 > size)
		n = size - 2;
	memcpy(buf + 1, t, n);
	buf[n + 1] = 0;
	return buf;
}

void sh_pass_report_print(struct session *s, const struct pass_report *r, bool all)
{
	sh_printf(s, "%s: %d matched, %d rewritten, %d rejected\n", r->pass ? r->pass : "?", r->matched,
		  r->rewritten, r->rejected);
	int shown = 0;
	for (int i = 0; i < r->n_msgs; i++) {
		const struct pass_msg *m = &r->msgs[i];
		if (!all && shown >= 40) {
			sh_printf(s, "  ... %d more (apply with --all to see them)\n", r->n_msgs - i);
			break;
		}
		const char *kind = m->kind == PASS_REWROTE ? "rewrote" : m->kind == PASS_REJECTED ? "rejected" : "note";
		if (m->node)
			sh_printf(s, "  %-8s %s: %s\n", kind, sh_esc(m->node), sh_esc(m->text));
		else
			sh_printf(s, "  %-8s %s\n", kind, sh_esc(m->text));
		shown++;
	}
}

void sh_pass_report_json(struct sh_json *j, const struct pass_report *r)
{
	sh_json_obj(j);
	sh_json_kstr(j, "pass", r->pass);
	sh_json_kint(j, "matched", r->matched);
	sh_json_kint(j, "rewritten", r->rewritten);
	sh_json_kint(j, "rejected", r->rejected);
	sh_json_kbool(j, "changed", r->changed);
	sh_json_key(j, "messages");
	sh_json_arr(j);
	for (int i = 0; i < r->n_msgs; i++) {
		sh_json_obj(j);
		sh_json_kstr(j, "kind", r->msgs[i].kind == PASS_REWROTE ? "rewrote"
				       : r->msgs[i].kind == PASS_REJECTED ? "rejected" : "note");
		sh_json_kstr(j, "node", r->msgs[i].node);
		sh_json_kstr(j, "text", r->msgs[i].text);
		sh_json_obj_end(j);
	}
	sh_json_arr_end(j);
	sh_json_obj_end(j);
}

/* ------------------------------------------------------------------------ */
/* passes, explain                                                           */
/* ------------------------------------------------------------------------ */

static const char *level_name(int l)
{
	return l == PASS_LEVEL_BASIC ? "basic" : l == PASS_LEVEL_EXTENDED ? "extended" : l == PASS_LEVEL_ALL ? "all" : "-";
}

int cmd_passes(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (a.npos)
		return sh_usage(s, argv[0]);
	if (sh_flag(&a, "json")) {
		struct sh_json j;
		sh_json_begin(&j, s->out);
		sh_json_arr(&j);
		for (int i = 0; pass_registry[i]; i++) {
			const struct pass *p = pass_registry[i];
			sh_json_obj(&j);
			sh_json_kstr(&j, "name", p->name);
			sh_json_kstr(&j, "level", level_name(p->level));
			sh_json_kstr(&j, "summary", p->summary);
			sh_json_obj_end(&j);
		}
		sh_json_arr_end(&j);
		sh_json_end(&j);
		return 0;
	}
	struct sh_table t;
	sh_table_init(&t, 3, "pass", "level", "what it does");
	for (int i = 0; pass_registry[i]; i++)
		sh_table_row(&t, pass_registry[i]->name, level_name(pass_registry[i]->level), pass_registry[i]->summary);
	sh_table_print(s, &t, true);
	sh_table_free(&t);
	sh_printf(s, "optimize runs them in this order (basic < extended < all); explain PASS tells how one works\n");
	return 0;
}

static const struct pass *find_pass(struct session *s, const char *name)
{
	const struct pass *p = pass_find(name);
	if (!p)
		sh_error(s, "no pass '%s' (passes lists them)", sh_esc(name));
	return p;
}

/* Prints text wrapped at 78 columns, paragraphs kept. */
static void print_wrapped(struct session *s, const char *text)
{
	const char *p = text;
	int col = 0;
	while (*p) {
		if (p[0] == '\n') {
			sh_printf(s, "\n");
			col = 0;
			p++;
			continue;
		}
		const char *w = p;
		while (*p && *p != ' ' && *p != '\n')
			p++;
		int len = (int)(p - w);
		if (col && col + 1 + len > 78) {
			sh_printf(s, "\n");
			col = 0;
		} else if (col) {
			sh_printf(s, " ");
			col++;
		}
		sh_printf(s, "%.*s", len, w);
		col += len;
		while (*p == ' ')
			p++;
	}
	if (col)
		sh_printf(s, "\n");
}

int cmd_explain(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (a.npos != 1)
		return sh_usage(s, argv[0]);
	const struct pass *p = find_pass(s, a.pos[0]);
	if (!p)
		return -1;
	sh_printf(s, "%s%s%s: %s (level %s)\n\n", sh_c(s, SH_BOLD), p->name, sh_c(s, SH_RESET), p->summary,
		  level_name(p->level));
	print_wrapped(s, p->explain);
	if (p->options && p->options->name) {
		sh_printf(s, "\noptions\n");
		for (const struct pass_option *o = p->options; o->name; o++)
			sh_printf(s, "  %s (%s, default %s): %s\n", o->name, o->type, o->dflt ? o->dflt : "-", o->help);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* apply, optimize                                                           */
/* ------------------------------------------------------------------------ */

/* Keeps a new model as the next stage and says what changed (`full`: with
 * parameter, FLOP and activation changes, which cost a shape inference). */
static int push_stage(struct session *s, struct ir_model *m, const char *label, struct pass_report *rep, bool full)
{
	struct totals a, b;
	int before = s->model->graph->n_nodes;
	if (full)
		model_totals(s->model, &a);
	if (pass_history_push(&s->hist, m, label, rep)) {
		ir_model_free(m);
		return sh_error(s, "out of memory for the stage history");
	}
	sh_stage_changed(s);
	if (!full) {
		sh_printf(s, "stage %d: %d -> %d nodes\n", s->stage, before, s->model->graph->n_nodes);
		return 0;
	}
	model_totals(s->model, &b);
	char d1[32], d2[32], d3[32];
	sh_printf(s, "stage %d: %d -> %d nodes, params %s, FLOPs %s, peak activations %s\n", s->stage, a.nodes, b.nodes,
		  delta(b.params - a.params, d1, sizeof(d1)), delta(b.flops - a.flops, d2, sizeof(d2)),
		  delta(b.peak - a.peak, d3, sizeof(d3)));
	return 0;
}

int cmd_apply(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (a.npos < 1)
		return sh_usage(s, argv[0]);
	if (!sh_need_model(s))
		return -1;
	const struct pass *p = find_pass(s, a.pos[0]);
	if (!p)
		return -1;
	struct pass_arg args[32];
	int n_args = 0;
	for (int i = 1; i < a.npos; i++) {
		char *eq = strchr(a.pos[i], '=');
		if (!eq || eq == a.pos[i])
			return sh_error(s, "apply: '%s' is not OPTION=VALUE (explain %s lists the options)", sh_esc(a.pos[i]),
					p->name);
		if (n_args == 32)
			return sh_error(s, "apply: too many options");
		*eq = 0;
		args[n_args].name = a.pos[i];
		args[n_args++].value = eq + 1;
	}
	bool dry = sh_flag(&a, "dry-run"), json = sh_flag(&a, "json");
	struct pass_report rep;
	struct ir_model *out = NULL;
	struct ir_diag d;
	ir_diag_init(&d);
	/* passes that read the session's calibration (quantize, convert-fp16) get it */
	struct ir_calib tmp;
	const struct ir_calib *cal = sh_session_calib(s, &tmp);
	int rc = pass_apply_calib(s->model, p, args, n_args, cal, dry, &out, &rep, &d);
	ir_calib_clear(&tmp);
	if (rc) {
		pass_report_clear(&rep);
		ir_diag_prefix(&d, "apply");
		return sh_diag(s, &d);
	}
	sh_diag(s, &d);
	if (sh_json_file(s, json)) {
		struct sh_json j;
		sh_json_begin(&j, sh_json_file(s, json));
		sh_pass_report_json(&j, &rep);
		sh_json_end(&j);
	}
	if (!json)
		sh_pass_report_print(s, &rep, sh_flag(&a, "all"));
	if (dry) {
		if (!json)
			sh_printf(s, "dry run: nothing changed\n");
		pass_report_clear(&rep);
		return 0;
	}
	return sh_pass_push(s, p, args, n_args, out, &rep, json);
}

int sh_pass_push(struct session *s, const struct pass *p, const struct pass_arg *args, int n_args,
		 struct ir_model *out, struct pass_report *rep, bool quiet)
{
	if (!out) {
		if (!quiet)
			sh_printf(s, "nothing changed (no new stage)\n");
		pass_report_clear(rep);
		return 0;
	}
	/* the label is what ran: "fuse-conv-bn" or "fold-constants max-bytes=4096" */
	char lab[256];
	size_t k = (size_t)snprintf(lab, sizeof(lab), "%s", p->name);
	for (int i = 0; i < n_args && k < sizeof(lab); i++)
		k += (size_t)snprintf(lab + k, sizeof(lab) - k, " %s=%s", args[i].name, args[i].value);
	FILE *keep = s->out;
	if (quiet)
		s->out = fopen("/dev/null", "w");
	int rc = push_stage(s, out, lab, rep, true);
	if (quiet && s->out)
		fclose(s->out);
	s->out = keep;
	pass_report_clear(rep);
	return rc;
}

int cmd_optimize(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_model_cmd_args(s, argc, argv, &a))
		return -1;
	int level = PASS_LEVEL_EXTENDED;
	const char *v = sh_opt(&a, "level");
	if (v) {
		if (!strcmp(v, "basic"))
			level = PASS_LEVEL_BASIC;
		else if (!strcmp(v, "extended"))
			level = PASS_LEVEL_EXTENDED;
		else if (!strcmp(v, "all"))
			level = PASS_LEVEL_ALL;
		else
			return sh_error(s, "optimize: --level must be basic, extended or all, not '%s'", sh_esc(v));
	}
	int max_rounds = 10;
	struct totals before;
	model_totals(s->model, &before);
	int first = s->hist.cur, passes = 0, rc = 0, rounds = 0;
	double pass_ms = 0;
	bool quiet = sh_flag(&a, "quiet");
	/* the passes run in place on a working copy of the current stage; a
	 * pass that changes it makes it a stage and the next one works on a
	 * fresh copy; a pass that fails leaves the stages as they were */
	struct ir_model *work = ir_model_clone(s->model);
	if (!work)
		return sh_error(s, "optimize: out of memory");
	for (int round = 0; round < max_rounds && !rc; round++) {
		bool changed = false;
		rounds++;
		for (int i = 0; pass_registry[i] && !rc; i++) {
			const struct pass *p = pass_registry[i];
			if (!p->level || p->level > level)
				continue;
			if (ir_interrupted) {
				rc = sh_error(s, "optimize: stopped");
				break;
			}
			struct pass_report rep;
			struct ir_diag d;
			ir_diag_init(&d);
			struct timespec t0, t1;
			clock_gettime(CLOCK_MONOTONIC, &t0);
			int prc = pass_run(work, p, NULL, 0, &rep, &d);
			clock_gettime(CLOCK_MONOTONIC, &t1);
			pass_ms += (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
			if (prc) {
				pass_report_clear(&rep);
				ir_diag_prefix(&d, "optimize");
				rc = sh_diag(s, &d);
				break;
			}
			ir_diag_clear(&d);
			if (rep.changed) {
				changed = true;
				passes++;
				if (!quiet)
					sh_pass_report_print(s, &rep, false);
				FILE *keep = s->out;
				if (quiet)
					s->out = fopen("/dev/null", "w");
				struct ir_model *stage = work;
				work = NULL;
				rc = push_stage(s, stage, p->name, &rep, false);
				if (quiet && s->out)
					fclose(s->out);
				s->out = keep;
				if (!rc && !(work = ir_model_clone(s->model)))
					rc = sh_error(s, "optimize: out of memory");
			}
			pass_report_clear(&rep);
		}
		if (!changed)
			break;
	}
	ir_model_free(work);
	struct totals after;
	model_totals(s->model, &after);
	char d1[32], d2[32];
	if (passes)
		sh_printf(s, "optimize --level=%s: %d pass%s changed the model in %d round%s (stages %d to %d): %d -> %d nodes, "
			  "params %s, FLOPs %s\n", level_name(level), passes, passes == 1 ? "" : "es", rounds, rounds == 1 ? "" : "s", first + 1, s->hist.cur, before.nodes,
			  after.nodes, delta(after.params - before.params, d1, sizeof(d1)),
			  delta(after.flops - before.flops, d2, sizeof(d2)));
	else
		sh_printf(s, "optimize --level=%s: nothing to change\n", level_name(level));
	if (s->timer)
		fprintf(stderr, "passes: %.1f ms (each pass on a copy of the stage, checked)\n", pass_ms);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* stages, undo, redo, checkout                                              */
/* ------------------------------------------------------------------------ */

int cmd_stages(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_model_cmd_args(s, argc, argv, &a))
		return -1;
	bool json = sh_flag(&a, "json");
	struct sh_json j;
	struct sh_table t;
	if (json) {
		sh_json_begin(&j, s->out);
		sh_json_arr(&j);
	} else {
		sh_table_init(&t, 9, "", ">stage", "made by", ">nodes", ">+/-", ">params", ">+/-", ">FLOPs", ">+/-");
	}
	for (int i = 0; i < s->hist.n; i++) {
		const struct pass_stage *st = &s->hist.st[i];
		struct totals me, par;
		model_totals(st->m, &me);
		if (st->parent >= 0)
			model_totals(s->hist.st[st->parent].m, &par);
		else
			par = me;
		if (json) {
			sh_json_obj(&j);
			sh_json_kint(&j, "stage", i);
			sh_json_kstr(&j, "made_by", st->label);
			sh_json_kint(&j, "parent", st->parent);
			sh_json_kbool(&j, "current", i == s->hist.cur);
			sh_json_kint(&j, "nodes", me.nodes);
			sh_json_knum(&j, "params", me.params);
			sh_json_knum(&j, "flops", me.flops);
			sh_json_obj_end(&j);
			continue;
		}
		char n[16], b[5][32], sn[16];
		snprintf(sn, sizeof(sn), "%d", i);
		snprintf(n, sizeof(n), "%d", me.nodes);
		char dn[16];
		snprintf(dn, sizeof(dn), "%+d", me.nodes - par.nodes);
		sh_table_row(&t, i == s->hist.cur ? "*" : "", sn, sh_esc(st->label), n, st->parent < 0 ? "" : dn,
			     si(me.params, b[0], 32), st->parent < 0 ? "" : delta(me.params - par.params, b[1], 32),
			     si(me.flops, b[2], 32), st->parent < 0 ? "" : delta(me.flops - par.flops, b[3], 32));
	}
	if (json) {
		sh_json_arr_end(&j);
		sh_json_end(&j);
	} else {
		sh_table_print(s, &t, true);
		sh_table_free(&t);
		if (s->hist.cur < s->hist.n - 1)
			sh_printf(s, "redo goes to stage %d; a new pass or edit drops the stages after %d\n", s->hist.cur + 1,
				  s->hist.cur);
	}
	return 0;
}

static int goto_stage(struct session *s, int n)
{
	s->hist.cur = n;
	sh_stage_changed(s);
	const struct pass_stage *st = &s->hist.st[n];
	sh_printf(s, "stage %d (%s): %d nodes\n", n, sh_esc(st->label), st->m->graph->n_nodes);
	return 0;
}

int cmd_undo(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_model_cmd_args(s, argc, argv, &a))
		return -1;
	int to = s->hist.st[s->hist.cur].parent;
	if (to < 0)
		return sh_error(s, "undo: stage %d is the model as loaded: nothing to undo", s->hist.cur);
	return goto_stage(s, to);
}

int cmd_redo(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_model_cmd_args(s, argc, argv, &a))
		return -1;
	for (int i = s->hist.cur + 1; i < s->hist.n; i++)
		if (s->hist.st[i].parent == s->hist.cur)
			return goto_stage(s, i);
	return sh_error(s, "redo: nothing to redo");
}

int cmd_checkout(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (a.npos != 1)
		return sh_usage(s, argv[0]);
	if (!sh_need_model(s))
		return -1;
	int n = sh_stage_arg(s, argv[0], a.pos[0]);
	if (n < 0)
		return -1;
	return goto_stage(s, n);
}

/* ------------------------------------------------------------------------ */
/* diff                                                                      */
/* ------------------------------------------------------------------------ */

static void io_list(const struct ir_node *n, bool inputs, char *buf, size_t size)
{
	size_t k = 0;
	int cnt = inputs ? n->n_inputs : n->n_outputs;
	buf[0] = 0;
	for (int i = 0; i < cnt; i++) {
		const struct ir_value *v = inputs ? n->inputs[i] : n->outputs[i];
		k += (size_t)snprintf(buf + k, k < size ? size - k : 0, "%s%s", i ? ", " : "", v ? v->name : "");
		if (k >= size)
			break;
	}
}

struct op_count {
	const char *op;
	int a, b;
};

int cmd_diff(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (a.npos != 0 && a.npos != 2)
		return sh_usage(s, argv[0]);
	if (!sh_need_model(s))
		return -1;
	int sa, sb;
	if (a.npos == 2) {
		if ((sa = sh_stage_arg(s, argv[0], a.pos[0])) < 0 || (sb = sh_stage_arg(s, argv[0], a.pos[1])) < 0)
			return -1;
	} else {
		sb = s->hist.cur;
		sa = s->hist.st[sb].parent;
		if (sa < 0)
			return sh_error(s, "diff: stage 0 has no earlier stage (diff A B compares two stages)");
	}
	struct ir_model *ma = s->hist.st[sa].m, *mb = s->hist.st[sb].m;
	const struct ir_graph *ga = ma->graph, *gb = mb->graph;
	bool json = sh_flag(&a, "json");
	struct sh_json j;
	char buf[512], buf2[512], nb[64];
	int removed = 0, added = 0, rewired = 0, attrs = 0, weights = 0;
	if (json) {
		sh_json_begin(&j, s->out);
		sh_json_obj(&j);
		sh_json_kint(&j, "from", sa);
		sh_json_kint(&j, "to", sb);
		sh_json_key(&j, "changes");
		sh_json_arr(&j);
	} else {
		sh_printf(s, "diff stage %d (%s) -> stage %d (%s)\n", sa, sh_esc(s->hist.st[sa].label), sb,
			  sh_esc(s->hist.st[sb].label));
	}
	bool all = sh_flag(&a, "all");
	int shown = 0, hidden = 0;
#define CHANGE(kind, node, what)                                                                                \
	do {                                                                                                    \
		if (!json && !all && shown >= 40) {                                                              \
			hidden++;                                                                               \
		} else if (json) {                                                                              \
			sh_json_obj(&j);                                                                        \
			sh_json_kstr(&j, "kind", kind);                                                         \
			sh_json_kstr(&j, "node", node);                                                         \
			sh_json_kstr(&j, "what", what);                                                         \
			sh_json_obj_end(&j);                                                                    \
		} else {                                                                                        \
			sh_printf(s, "  %-9s %s%s%s\n", kind, sh_esc(node), (what)[0] ? ": " : "", sh_esc(what)); \
			shown++;                                                                                \
		}                                                                                               \
	} while (0)
	/* nodes keep their ids across stages (clones); new nodes get new ones */
	ir_for_each_node(ga, n) {
		const struct ir_node *m = pass_stage_match(gb, n);
		snprintf(nb, sizeof(nb), "n%d", n->id);
		char who[160];
		snprintf(who, sizeof(who), "%s '%s' (%s)", nb, n->name ? n->name : "", n->op_type);
		if (!m) {
			removed++;
			io_list(n, true, buf, sizeof(buf));
			char what[600];
			snprintf(what, sizeof(what), "read %s", buf);
			CHANGE("removed", who, what);
			continue;
		}
		if (!pass_node_same_io(n, m)) {
			rewired++;
			io_list(n, true, buf, sizeof(buf));
			io_list(m, true, buf2, sizeof(buf2));
			char what[1100];
			snprintf(what, sizeof(what), "inputs %s -> %s", buf, buf2);
			CHANGE("rewired", who, what);
		}
		char which[256];
		if (!pass_node_same_attrs(n, m, which, sizeof(which))) {
			attrs++;
			char what[300];
			snprintf(what, sizeof(what), "attributes %s", which);
			CHANGE("attrs", who, what);
		}
	}
	ir_for_each_node(gb, m) {
		if (pass_stage_match(ga, m))
			continue;
		added++;
		char who[160];
		snprintf(who, sizeof(who), "n%d '%s' (%s)", m->id, m->name ? m->name : "", m->op_type);
		io_list(m, true, buf, sizeof(buf));
		char what[600];
		snprintf(what, sizeof(what), "reads %s", buf);
		CHANGE("added", who, what);
	}
	/* weights: initializers by name */
	for (int i = 0; i < ga->n_inits; i++) {
		const struct ir_value *v = ga->inits[i];
		const struct ir_value *w = ir_value_find(gb, v->name);
		char what[64];
		if (!w || !w->init) {
			weights++;
			snprintf(what, sizeof(what), "%" PRIu64 " elements", v->init ? v->init->numel : 0);
			CHANGE("-weight", v->name, what);
		} else if (w->init != v->init && !ir_tensor_equal(w->init, v->init)) {
			weights++;
			CHANGE("~weight", v->name, "values changed");
		}
	}
	for (int i = 0; i < gb->n_inits; i++) {
		const struct ir_value *w = gb->inits[i];
		const struct ir_value *v = ir_value_find(ga, w->name);
		if (!v || !v->init) {
			weights++;
			char what[64];
			snprintf(what, sizeof(what), "%" PRIu64 " elements", w->init ? w->init->numel : 0);
			CHANGE("+weight", w->name, what);
		}
	}
#undef CHANGE
	/* op counts */
	struct op_count ops[512];
	int n_ops = 0;
	for (int side = 0; side < 2; side++) {
		const struct ir_graph *g = side ? gb : ga;
		ir_for_each_node(g, n) {
			int k;
			for (k = 0; k < n_ops; k++)
				if (!strcmp(ops[k].op, n->op_type))
					break;
			if (k == n_ops) {
				if (n_ops == 512)
					continue;
				ops[n_ops++] = (struct op_count){ n->op_type, 0, 0 };
			}
			if (side)
				ops[k].b++;
			else
				ops[k].a++;
		}
	}
	struct totals ta, tb;
	model_totals(ma, &ta);
	model_totals(mb, &tb);
	if (json) {
		sh_json_arr_end(&j);
		sh_json_key(&j, "ops");
		sh_json_obj(&j);
		for (int k = 0; k < n_ops; k++)
			if (ops[k].a != ops[k].b)
				sh_json_kint(&j, ops[k].op, ops[k].b - ops[k].a);
		sh_json_obj_end(&j);
		sh_json_kint(&j, "nodes", tb.nodes - ta.nodes);
		sh_json_knum(&j, "params", tb.params - ta.params);
		sh_json_knum(&j, "flops", tb.flops - ta.flops);
		sh_json_knum(&j, "peak_activation_bytes", tb.peak - ta.peak);
		sh_json_obj_end(&j);
		sh_json_end(&j);
		return 0;
	}
	if (!removed && !added && !rewired && !attrs && !weights)
		sh_printf(s, "  no differences\n");
	if (hidden)
		sh_printf(s, "  ... %d more changes (diff --all lists every one)\n", hidden);
	char opsline[1024];
	size_t k = 0;
	opsline[0] = 0;
	for (int q = 0; q < n_ops; q++)
		if (ops[q].a != ops[q].b)
			k += (size_t)snprintf(opsline + k, k < sizeof(opsline) ? sizeof(opsline) - k : 0, "%s%s %+d",
					      k ? ", " : "", ops[q].op, ops[q].b - ops[q].a);
	char d1[32], d2[32], d3[32];
	sh_printf(s, "%d removed, %d added, %d rewired, %d with other attributes, %d weights changed\n", removed, added,
		  rewired, attrs, weights);
	if (opsline[0])
		sh_printf(s, "ops: %s\n", opsline);
	sh_printf(s, "nodes %+d, params %s, FLOPs %s, peak activations %s\n", tb.nodes - ta.nodes,
		  delta(tb.params - ta.params, d1, sizeof(d1)), delta(tb.flops - ta.flops, d2, sizeof(d2)),
		  delta(tb.peak - ta.peak, d3, sizeof(d3)));
	return 0;
}

/* ------------------------------------------------------------------------ */
/* stats A B                                                                 */
/* ------------------------------------------------------------------------ */

/* A change of bytes: "-29.6 K", and "(3.7x less)" when it is a factor of 1.5 or more. */
static const char *bytes_change(double a, double b, char *buf, size_t size)
{
	char d[32];
	delta(b - a, d, sizeof(d));
	if (a > 0 && b > 0 && (a >= 1.5 * b || b >= 1.5 * a))
		snprintf(buf, size, (a > b ? a / b : b / a) < 10 ? "%s (%.1fx %s)" : "%s (%.0fx %s)", d,
			 a > b ? a / b : b / a, a > b ? "less" : "more");
	else
		snprintf(buf, size, "%s", d);
	return buf;
}

/* stats A B: weight bytes of each dtype, when the two stages hold more than one between them. */
static void stages_weight_rows(struct sh_table *t, struct ir_stats *const *st)
{
	int types[IR_DTYPE_COUNT], n = 0;
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < st[i]->n_dtypes; k++) {
			int dt = st[i]->dtypes[k].dtype, q;
			for (q = 0; q < n && types[q] != dt; q++)
				;
			if (q == n && st[i]->dtypes[k].params > 0 && n < IR_DTYPE_COUNT)
				types[n++] = dt;
		}
	if (n < 2)
		return;
	for (int q = 0; q < n; q++) {
		double by[2] = { 0, 0 };
		for (int i = 0; i < 2; i++)
			for (int k = 0; k < st[i]->n_dtypes; k++)
				if (st[i]->dtypes[k].dtype == types[q])
					by[i] = st[i]->dtypes[k].param_bytes;
		char l[48], b1[32], b2[32], b3[64];
		snprintf(l, sizeof(l), "  %s", ir_dtype_name(types[q]));
		sh_table_row(t, l, sh_bytes((uint64_t)by[0], b1, sizeof(b1)), sh_bytes((uint64_t)by[1], b2, sizeof(b2)),
			     bytes_change(by[0], by[1], b3, sizeof(b3)));
	}
}

/* stats A B: MACs by precision (int8, fp8, float16...). */
static void stages_prec_rows(struct sh_table *t, struct ir_stats *const *st)
{
	int precs[64], n = 0;
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < st[i]->n_precs; k++) {
			int p = st[i]->precs[k].prec, q;
			for (q = 0; q < n && precs[q] != p; q++)
				;
			if (q == n && st[i]->precs[k].macs > 0 && n < 64)
				precs[n++] = p;
		}
	for (int q = 0; q < n; q++) {
		double by[2] = { 0, 0 };
		for (int i = 0; i < 2; i++)
			for (int k = 0; k < st[i]->n_precs; k++)
				if (st[i]->precs[k].prec == precs[q])
					by[i] = st[i]->precs[k].macs;
		char l[48], b1[32], b2[32], b3[32];
		snprintf(l, sizeof(l), "  %s", ir_precision_name(precs[q]));
		sh_table_row(t, l, si(by[0], b1, sizeof(b1)), si(by[1], b2, sizeof(b2)), delta(by[1] - by[0], b3, sizeof(b3)));
	}
}

int sh_stats_stages(struct session *s, const char *a, const char *b, bool json)
{
	int sa = sh_stage_arg(s, "stats", a), sb;
	if (sa < 0 || (sb = sh_stage_arg(s, "stats", b)) < 0)
		return -1;
	struct ir_model *m[2] = { s->hist.st[sa].m, s->hist.st[sb].m };
	struct ir_stats *st[2] = { NULL, NULL };
	struct ir_diag d;
	ir_diag_init(&d);
	d.max_warnings = 1;
	for (int i = 0; i < 2; i++) {
		ir_infer(m[i], &d);
		if (!(st[i] = ir_stats_new(m[i], &d))) {
			ir_stats_free(st[0]);
			return sh_diag(s, &d);
		}
	}
	ir_diag_clear(&d);
	if (json) {
		struct sh_json j;
		sh_json_begin(&j, s->out);
		sh_json_arr(&j);
		for (int i = 0; i < 2; i++) {
			sh_json_obj(&j);
			sh_json_kint(&j, "stage", i ? sb : sa);
			sh_json_kint(&j, "nodes", st[i]->n_nodes);
			sh_json_knum(&j, "params", st[i]->params);
			sh_json_knum(&j, "param_bytes", st[i]->param_bytes);
			sh_json_knum(&j, "macs", st[i]->macs);
			sh_json_knum(&j, "flops", st[i]->flops);
			sh_json_knum(&j, "bytes_read", st[i]->bytes_read);
			sh_json_knum(&j, "bytes_written", st[i]->bytes_written);
			sh_json_knum(&j, "activation_bytes", st[i]->activation_bytes);
			sh_json_knum(&j, "peak_activation_bytes", st[i]->peak_bytes);
			sh_json_key(&j, "ops");
			sh_json_obj(&j);
			for (int k = 0; k < st[i]->n_ops; k++)
				sh_json_kint(&j, st[i]->ops[k].op_type, st[i]->ops[k].count);
			sh_json_obj_end(&j);
			sh_json_key(&j, "weight_bytes_by_dtype");
			sh_json_obj(&j);
			for (int k = 0; k < st[i]->n_dtypes; k++)
				if (st[i]->dtypes[k].params > 0)
					sh_json_knum(&j, ir_dtype_name(st[i]->dtypes[k].dtype), st[i]->dtypes[k].param_bytes);
			sh_json_obj_end(&j);
			sh_json_key(&j, "macs_by_precision");
			sh_json_obj(&j);
			for (int k = 0; k < st[i]->n_precs; k++)
				if (st[i]->precs[k].macs > 0)
					sh_json_knum(&j, ir_precision_name(st[i]->precs[k].prec), st[i]->precs[k].macs);
			sh_json_obj_end(&j);
			sh_json_obj_end(&j);
		}
		sh_json_arr_end(&j);
		sh_json_end(&j);
		ir_stats_free(st[0]);
		ir_stats_free(st[1]);
		return 0;
	}
	char h1[32], h2[32];
	snprintf(h1, sizeof(h1), ">stage %d", sa);
	snprintf(h2, sizeof(h2), ">stage %d", sb);
	struct sh_table t;
	sh_table_init(&t, 4, "", h1, h2, ">change");
	char b1[32], b2[32], b3[32];
	char n1[32], n2[32], n3[32];
	snprintf(n1, sizeof(n1), "%d", st[0]->n_nodes);
	snprintf(n2, sizeof(n2), "%d", st[1]->n_nodes);
	snprintf(n3, sizeof(n3), "%+d", st[1]->n_nodes - st[0]->n_nodes);
	sh_table_row(&t, "nodes", n1, n2, n3);
#define ROW(label, field, bytes)                                                                         \
	sh_table_row(&t, label, bytes ? sh_bytes((uint64_t)st[0]->field, b1, 32) : si(st[0]->field, b1, 32), \
		     bytes ? sh_bytes((uint64_t)st[1]->field, b2, 32) : si(st[1]->field, b2, 32),           \
		     delta(st[1]->field - st[0]->field, b3, 32))
	ROW("params", params, false);
	{
		char wc[64];
		sh_table_row(&t, "weight bytes", sh_bytes((uint64_t)st[0]->param_bytes, b1, 32),
			     sh_bytes((uint64_t)st[1]->param_bytes, b2, 32),
			     bytes_change(st[0]->param_bytes, st[1]->param_bytes, wc, sizeof(wc)));
	}
	stages_weight_rows(&t, st);
	ROW("MACs", macs, false);
	if (sh_stats_reduced(st[0]) || sh_stats_reduced(st[1]))
		stages_prec_rows(&t, st);
	ROW("FLOPs", flops, false);
	ROW("bytes read", bytes_read, true);
	ROW("bytes written", bytes_written, true);
	ROW("activations", activation_bytes, true);
	ROW("peak activations", peak_bytes, true);
#undef ROW
	sh_table_print(s, &t, true);
	sh_table_free(&t);
	/* op counts side by side */
	struct sh_table o;
	sh_table_init(&o, 4, "op", h1, h2, ">change");
	for (int side = 0; side < 2; side++)
		for (int k = 0; k < st[side]->n_ops; k++) {
			const char *op = st[side]->ops[k].op_type;
			int c[2] = { 0, 0 };
			bool seen = false;
			for (int q = 0; side == 1 && q < st[0]->n_ops; q++)
				if (!strcmp(st[0]->ops[q].op_type, op))
					seen = true;
			if (seen)
				continue;
			for (int x = 0; x < 2; x++)
				for (int q = 0; q < st[x]->n_ops; q++)
					if (!strcmp(st[x]->ops[q].op_type, op))
						c[x] = st[x]->ops[q].count;
			snprintf(n1, sizeof(n1), "%d", c[0]);
			snprintf(n2, sizeof(n2), "%d", c[1]);
			snprintf(n3, sizeof(n3), c[1] == c[0] ? "" : "%+d", c[1] - c[0]);
			sh_table_row(&o, op, n1, n2, n3);
		}
	sh_printf(s, "\n");
	sh_table_print(s, &o, true);
	sh_table_free(&o);
	ir_stats_free(st[0]);
	ir_stats_free(st[1]);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* compare --stages A B                                                      */
/* ------------------------------------------------------------------------ */

int sh_compare_stages(struct session *s, const char *a, const char *b, int argc, char **argv)
{
	(void)argc;
	(void)argv;
	int sa = sh_stage_arg(s, "compare", a), sb;
	if (sa < 0 || (sb = sh_stage_arg(s, "compare", b)) < 0)
		return -1;
	const char *pa = pass_history_map(&s->hist, sb, sa, "");
	if (!pa)
		return sh_error(s, "compare: stages %d and %d are not on one line of passes (one must come from the other)",
				sa, sb);
	struct ir_model *ma = s->hist.st[sa].m, *mb = s->hist.st[sb].m;
	struct exec_values in = { 0 }, outa = { 0 }, outb = { 0 }, alla = { 0 }, allb = { 0 };
	struct ir_diag d;
	ir_diag_init(&d);
	int ret = -1;
	if (exec_random_inputs(ma, 0, NULL, 0, NULL, &in, &d)) {
		ir_diag_prefix(&d, "compare");
		sh_diag(s, &d);
		goto out;
	}
	ir_diag_clear(&d);
	ir_diag_init(&d);
	struct exec_opts o = { .keep_all = true };
	if (exec_run(ma, &in, &o, &outa, &alla, NULL, &d)) {
		ir_diag_prefix(&d, "compare: stage %d", sa);
		sh_diag(s, &d);
		goto out;
	}
	if (exec_run(mb, &in, &o, &outb, &allb, NULL, &d)) {
		ir_diag_prefix(&d, "compare: stage %d", sb);
		sh_diag(s, &d);
		goto out;
	}
	/* graph outputs count too (they may be inputs or initializers) */
	for (int i = 0; i < outa.n; i++) {
		struct kern_value c;
		if (!exec_values_find(&alla, outa.a[i].name) && !kern_value_copy(&c, &outa.a[i].v) &&
		    exec_values_add(&alla, outa.a[i].name, &c))
			kern_value_clear(&c);
	}
	for (int i = 0; i < outb.n; i++) {
		struct kern_value c;
		if (!exec_values_find(&allb, outb.a[i].name) && !kern_value_copy(&c, &outb.a[i].v) &&
		    exec_values_add(&allb, outb.a[i].name, &c))
			kern_value_clear(&c);
	}
	struct sh_table t;
	sh_table_init(&t, 6, "stage-B tensor", "stage-A tensor", "result", ">max abs", ">max rel", ">cosine");
	int compared = 0, bad = 0;
	const char *first = NULL;
	for (int i = 0; i < allb.n; i++) {
		const struct kern_value *vb = &allb.a[i].v;
		const char *name_a = pass_history_map(&s->hist, sb, sa, allb.a[i].name);
		const struct kern_value *va = name_a ? exec_values_find(&alla, name_a) : NULL;
		if (!va || va->kind != KV_TENSOR || vb->kind != KV_TENSOR)
			continue;
		struct exec_cmp_opts co;
		exec_cmp_defaults(va->t->dtype, &co);
		co.topk = 0;
		if (ir_dtype_is_float(va->t->dtype)) {
			/* float32 rounding in a deep net: elements near zero move by
			 * ulps of the tensor's largest values, compounded over layers */
			struct kern_stats ks;
			co.rtol = 1e-4;
			co.atol = 1e-5;
			if (!exec_tensor_stats(va->t, &ks, NULL) && ks.abs_max * 1e-4 > co.atol)
				co.atol = ks.abs_max * 1e-4;
		}
		struct exec_cmp r;
		if (exec_compare(vb->t, va->t, &co, &r, &d))
			continue;
		compared++;
		char b1[32], b2[32], b3[32];
		if (!r.pass) {
			bad++;
			if (!first)
				first = allb.a[i].name;
		}
		snprintf(b1, sizeof(b1), "%.3g", r.max_abs);
		snprintf(b2, sizeof(b2), "%.3g", r.max_rel);
		snprintf(b3, sizeof(b3), "%.6f", r.cosine);
		sh_table_row(&t, sh_esc(allb.a[i].name), sh_esc(name_a), !r.shape_ok ? "shape differs" : r.pass ? "ok" : "FAIL",
			     r.shape_ok ? b1 : "", r.shape_ok ? b2 : "", r.shape_ok ? b3 : "");
	}
	sh_table_print(s, &t, true);
	sh_table_free(&t);
	sh_printf(s, "%d tensors of stage %d compared with stage %d (same random inputs, rtol 1e-4, atol 1e-5 or 1e-4 of "
		  "the tensor's largest value): %d differ",
		  compared, sb, sa, bad);
	if (first)
		sh_printf(s, "; the first is '%s'", sh_esc(first));
	sh_printf(s, "\n");
	ret = bad ? sh_error(s, "compare: stages %d and %d differ, first at '%s'", sa, sb, sh_esc(first)) : 0;
out:
	exec_values_clear(&in);
	exec_values_clear(&outa);
	exec_values_clear(&outb);
	exec_values_clear(&alla);
	exec_values_clear(&allb);
	ir_diag_clear(&d);
	return ret;
}
