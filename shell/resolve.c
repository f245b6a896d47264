/*
 * resolve.c - finding nodes and values from what a user typed, and the
 * session's model.
 */
#include "shell.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool sh_need_model(struct session *s)
{
	if (s->model && s->model->graph)
		return true;
	sh_error(s, "no model is loaded (use load FILE)");
	return false;
}

static int parse_id(const char *ref)
{
	const char *p = ref;
	if (*p == '#' || *p == 'n')
		p++;
	else
		return -1;
	if (!*p || strlen(p) > 9)
		return -1;
	int id = 0;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		id = id * 10 + (*p - '0');
	}
	return id;
}

struct ir_node *sh_find_node(const struct ir_graph *g, const char *ref, int *count)
{
	*count = 0;
	if (ref[0] != '#') {
		struct ir_node *n = ir_node_by_name(g, ref, count);
		if (n)
			return n;
	}
	int id = parse_id(ref);
	struct ir_node *n = id >= 0 ? ir_node_by_id(g, id) : NULL;
	*count = n ? 1 : 0;
	return n;
}

int sh_ambiguous(struct session *s, const struct ir_graph *g, const char *name, int count)
{
	char ids[256];
	size_t o = 0;
	int listed = 0;
	ids[0] = 0;
	ir_for_each_node(g, m) {
		if (strcmp(m->name, name) != 0)
			continue;
		if (listed == 8) {
			snprintf(ids + o, sizeof(ids) - o, ", ...");
			break;
		}
		o += (size_t)snprintf(ids + o, sizeof(ids) - o, "%sn%d", listed ? ", " : "", m->id);
		listed++;
	}
	return sh_error(s, "%d nodes are named '%s': use an id (%s)", count, sh_esc(name), ids);
}

struct ir_node *sh_node(struct session *s, const char *ref)
{
	if (!sh_need_model(s))
		return NULL;
	struct ir_graph *g = s->model->graph;
	int count;
	struct ir_node *n = sh_find_node(g, ref, &count);
	if (n && count > 1) {
		sh_ambiguous(s, g, ref, count);
		return NULL;
	}
	if (n)
		return n;
	if (parse_id(ref) >= 0)
		sh_error(s, "no node has id %s", sh_esc(ref));
	else if (ir_value_find(g, ref))
		sh_error(s, "no node is named '%s' (a tensor is: try tensor %s)", sh_esc(ref), sh_esc(ref));
	else
		sh_error(s, "no node is named '%s'", sh_esc(ref));
	return NULL;
}

struct ir_value *sh_value(struct session *s, const char *name)
{
	if (!sh_need_model(s))
		return NULL;
	struct ir_value *v = ir_value_find(s->model->graph, name);
	if (v && !v->outer)
		return v;
	if (ir_node_by_name(s->model->graph, name, NULL))
		sh_error(s, "no tensor is named '%s' (a node is: try show %s)", sh_esc(name), sh_esc(name));
	else
		sh_error(s, "no tensor is named '%s'", sh_esc(name));
	return NULL;
}

const char *sh_node_desc(const struct ir_node *n, char *buf, size_t size)
{
	if (n->name && *n->name)
		snprintf(buf, size, "'%s' (n%d, %s)", sh_esc(n->name), n->id, sh_esc(n->op_type));
	else
		snprintf(buf, size, "n%d (%s)", n->id, sh_esc(n->op_type));
	return buf;
}

int sh_infer(struct session *s)
{
	if (!s->model || !s->model->graph)
		return -1;
	if (s->inferred)
		return 0;
	ir_diag_clear(&s->infer_diag);
	s->infer_diag.max_warnings = 200;
	struct ir_diag d;
	ir_diag_init(&d);
	if (ir_infer(s->model, &s->infer_diag)) {
		d.error = s->infer_diag.error;
		s->infer_diag.error = NULL;
		return sh_diag(s, &d);
	}
	s->inferred = true;
	s->infer_warned = false;
	return 0;
}

void sh_model_changed(struct session *s)
{
	s->dirty = true;
	s->inferred = false;
	s->edit_made = true;
	sh_run_forget(s);
}

void sh_stage_changed(struct session *s)
{
	s->model = pass_history_model(&s->hist);
	s->stage = s->hist.cur;
	s->dirty = s->stage != s->saved_stage;
	s->inferred = false;
	sh_run_forget(s);
}

void sh_set_model(struct session *s, struct ir_model *m, const char *name)
{
	pass_history_free(&s->hist);
	exec_cache_clear();
	sh_quant_forget(s);
	s->model = NULL;
	if (pass_history_init(&s->hist, m, "loaded")) {
		/* no memory for the history: keep the model alone as stage 0 */
		fprintf(stderr, "ogsh: warning: out of memory for the stage history\n");
	}
	s->model = m;
	s->saved_stage = 0;
	free(s->name);
	const char *base = strrchr(name, '/');
	s->name = strdup(base && base[1] ? base + 1 : name);
	s->dirty = false;
	s->stage = 0;
	s->inferred = false;
	sh_run_forget(s);
}

bool sh_confirm(struct session *s, const char *question)
{
	if (!s->interactive || !isatty(STDIN_FILENO))
		return true;
	fprintf(stderr, "%s [y/N] ", question);
	fflush(stderr);
	char buf[32];
	if (!fgets(buf, sizeof(buf), stdin))
		return false;
	return buf[0] == 'y' || buf[0] == 'Y';
}
