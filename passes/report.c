/*
 * report.c - pass reports and options.
 */
#include "passes/pass.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pass_report_init(struct pass_report *r, const char *pass)
{
	memset(r, 0, sizeof(*r));
	r->pass = pass ? strdup(pass) : NULL;
}

void pass_report_clear(struct pass_report *r)
{
	for (int i = 0; i < r->n_msgs; i++) {
		free(r->msgs[i].node);
		free(r->msgs[i].text);
	}
	for (int i = 0; i < r->n_map; i++) {
		free(r->map[i].new_name);
		free(r->map[i].old_name);
	}
	free(r->msgs);
	free(r->map);
	free(r->pass);
	memset(r, 0, sizeof(*r));
}

static int add_msg(struct pass_report *r, enum pass_msg_kind kind, const char *node, const char *text)
{
	if (r->n_msgs == r->cap_msgs) {
		int cap = r->cap_msgs ? 2 * r->cap_msgs : 16;
		struct pass_msg *m = realloc(r->msgs, sizeof(*m) * (size_t)cap);
		if (!m)
			return IR_ENOMEM;
		r->msgs = m;
		r->cap_msgs = cap;
	}
	struct pass_msg *m = &r->msgs[r->n_msgs];
	m->kind = kind;
	m->node = node ? strdup(node) : NULL;
	m->text = strdup(text ? text : "");
	if ((node && !m->node) || !m->text) {
		free(m->node);
		free(m->text);
		return IR_ENOMEM;
	}
	r->n_msgs++;
	return 0;
}

static int add_map(struct pass_report *r, const char *new_name, const char *old_name)
{
	for (int i = 0; i < r->n_map; i++)
		if (!strcmp(r->map[i].new_name, new_name)) {
			char *o = strdup(old_name);
			if (!o)
				return IR_ENOMEM;
			free(r->map[i].old_name);
			r->map[i].old_name = o;
			return 0;
		}
	if (r->n_map == r->cap_map) {
		int cap = r->cap_map ? 2 * r->cap_map : 16;
		struct pass_map *m = realloc(r->map, sizeof(*m) * (size_t)cap);
		if (!m)
			return IR_ENOMEM;
		r->map = m;
		r->cap_map = cap;
	}
	r->map[r->n_map].new_name = strdup(new_name);
	r->map[r->n_map].old_name = strdup(old_name);
	if (!r->map[r->n_map].new_name || !r->map[r->n_map].old_name) {
		free(r->map[r->n_map].new_name);
		free(r->map[r->n_map].old_name);
		return IR_ENOMEM;
	}
	r->n_map++;
	return 0;
}

int pass_report_merge(struct pass_report *into, const struct pass_report *from)
{
	into->matched += from->matched;
	into->rewritten += from->rewritten;
	into->rejected += from->rejected;
	into->changed = into->changed || from->changed;
	for (int i = 0; i < from->n_msgs; i++)
		if (add_msg(into, from->msgs[i].kind, from->msgs[i].node, from->msgs[i].text))
			return IR_ENOMEM;
	/* maps compose: a name the earlier pass mapped keeps its oldest origin */
	for (int i = 0; i < from->n_map; i++) {
		const char *old = from->map[i].old_name;
		for (int j = 0; j < into->n_map; j++)
			if (!strcmp(into->map[j].new_name, old)) {
				old = into->map[j].old_name;
				break;
			}
		if (add_map(into, from->map[i].new_name, old))
			return IR_ENOMEM;
	}
	return 0;
}

static void vmsg(struct pass_ctx *c, enum pass_msg_kind kind, const struct ir_node *n, const char *fmt, va_list ap)
{
	char text[1024], nb[256];
	vsnprintf(text, sizeof(text), fmt, ap);
	add_msg(c->rep, kind, n ? pass_node_name(n, nb, sizeof(nb)) : NULL, text);
}

void pass_rewrote(struct pass_ctx *c, const struct ir_node *n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(c, PASS_REWROTE, n, fmt, ap);
	va_end(ap);
	c->rep->matched++;
	c->rep->rewritten++;
	c->rep->changed = true;
}

void pass_rejected(struct pass_ctx *c, const struct ir_node *n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(c, PASS_REJECTED, n, fmt, ap);
	va_end(ap);
	c->rep->matched++;
	c->rep->rejected++;
}

void pass_note(struct pass_ctx *c, const struct ir_node *n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(c, PASS_NOTE, n, fmt, ap);
	va_end(ap);
}

void pass_maps(struct pass_ctx *c, const char *new_name, const char *old_name)
{
	if (new_name && old_name && strcmp(new_name, old_name))
		add_map(c->rep, new_name, old_name);
}

/* --- options --- */

static const struct pass_option *opt_of(const struct pass *p, const char *name)
{
	for (const struct pass_option *o = p->options; o && o->name; o++)
		if (!strcmp(o->name, name))
			return o;
	return NULL;
}

static const char *opt_text(const struct pass_ctx *c, const char *name)
{
	for (int i = 0; i < c->n_args; i++)
		if (!strcmp(c->args[i].name, name))
			return c->args[i].value;
	const struct pass_option *o = opt_of(c->pass, name);
	return o ? o->dflt : NULL;
}

int64_t pass_opt_int(const struct pass_ctx *c, const char *name)
{
	const char *t = opt_text(c, name);
	return t ? strtoll(t, NULL, 10) : 0;
}

double pass_opt_float(const struct pass_ctx *c, const char *name)
{
	const char *t = opt_text(c, name);
	return t ? strtod(t, NULL) : 0;
}

bool pass_opt_bool(const struct pass_ctx *c, const char *name)
{
	const char *t = opt_text(c, name);
	return t && (!strcmp(t, "1") || !strcmp(t, "true") || !strcmp(t, "on") || !strcmp(t, "yes"));
}

const char *pass_opt_str(const struct pass_ctx *c, const char *name)
{
	return opt_text(c, name);
}

/* Checks options against the pass's table: known names, values of the right type. */
int pass_check_args(const struct pass *p, const struct pass_arg *args, int n, struct ir_diag *d)
{
	for (int i = 0; i < n; i++) {
		const struct pass_option *o = opt_of(p, args[i].name);
		if (!o) {
			char known[256] = "";
			size_t k = 0;
			for (const struct pass_option *q = p->options; q && q->name; q++)
				k += (size_t)snprintf(known + k, k < sizeof(known) ? sizeof(known) - k : 0, "%s%s",
						      k ? ", " : "", q->name);
			return ir_diag_err(d, IR_ERR, "pass '%s' has no option '%s' (%s)", p->name, args[i].name,
					   *known ? known : "it takes none");
		}
		const char *v = args[i].value;
		char *end;
		errno = 0;
		if (!strcmp(o->type, "int")) {
			long long x = strtoll(v, &end, 10);
			(void)x;
			if (!*v || *end || errno)
				return ir_diag_err(d, IR_ERR, "option '%s' of '%s' must be a whole number, not '%s'",
						   o->name, p->name, v);
		} else if (!strcmp(o->type, "float")) {
			double x = strtod(v, &end);
			if (!*v || *end || errno || !isfinite(x))
				return ir_diag_err(d, IR_ERR, "option '%s' of '%s' must be a number, not '%s'", o->name,
						   p->name, v);
		} else if (!strcmp(o->type, "bool")) {
			static const char *ok[] = { "1", "0", "true", "false", "on", "off", "yes", "no" };
			bool good = false;
			for (size_t j = 0; j < sizeof(ok) / sizeof(ok[0]); j++)
				good = good || !strcmp(v, ok[j]);
			if (!good)
				return ir_diag_err(d, IR_ERR, "option '%s' of '%s' must be on or off, not '%s'", o->name,
						   p->name, v);
		}
	}
	return 0;
}
