/*
 * cmd_session.c - help, load, save, source, set, quit.
 */
#include "shell.h"

#include <errno.h>

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Prints text wrapped at 76 columns with an indent. */
static void wrap(struct session *s, const char *text, int ind)
{
	const char *p = text;
	int col = 0;
	while (*p) {
		size_t w = strcspn(p, " ");
		if (col && col + 1 + (int)w > 76) {
			fputc('\n', s->out);
			col = 0;
		}
		if (!col) {
			fprintf(s->out, "%*s", ind, "");
			col = ind;
		} else {
			fputc(' ', s->out);
			col++;
		}
		fwrite(p, 1, w, s->out);
		col += (int)w;
		p += w;
		while (*p == ' ')
			p++;
	}
	if (col)
		fputc('\n', s->out);
}

static void help_one(struct session *s, const struct sh_cmd *c)
{
	sh_printf(s, "usage: %s %s\n\n", c->name, c->usage);
	wrap(s, c->summary, 2);
	sh_printf(s, "\n");
	wrap(s, c->help, 2);
	sh_printf(s, "\nexample: %s\n", c->example);
}

int cmd_help(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (a.npos > 1)
		return sh_usage(s, argv[0]);
	if (a.npos == 1) {
		const struct sh_cmd *c = sh_find_command(a.pos[0]);
		if (!c)
			return sh_unknown_command(s, a.pos[0]);
		help_one(s, c);
		return 0;
	}
	sh_printf(s, "ogsh %s, the ONNX graph shell\n", OGSH_VERSION);
	/* every command of the table under its group, the groups in the order
	 * the table first names them (tests/script/check_docs.py checks it) */
	for (int gi = 0; gi < sh_n_commands; gi++) {
		const char *group = sh_commands[gi].group;
		bool first = true;
		for (int j = 0; j < gi && first; j++)
			first = strcmp(sh_commands[j].group, group) != 0;
		if (!first)
			continue;
		sh_printf(s, "\n%s%s%s\n", sh_c(s, SH_BOLD), group, sh_c(s, SH_RESET));
		for (int i = gi; i < sh_n_commands; i++) {
			const struct sh_cmd *c = &sh_commands[i];
			if (strcmp(c->group, group) == 0)
				sh_printf(s, "  %-16s %s\n", c->name, c->summary);
		}
	}
	sh_printf(s, "\nhelp COMMAND shows one command in full. NODE is a node name, an id (n12) or #12.\n"
		     "Several commands can go on one line separated by ';'. # starts a comment (#12 is a node id).\n");
	return 0;
}

int cmd_load(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (a.npos != 1)
		return sh_usage(s, argv[0]);
	if (!*a.pos[0])
		return sh_error(s, "load: the file name is empty");
	if (s->dirty && !sh_confirm(s, "the model has unsaved changes: discard them?"))
		return sh_error(s, "load cancelled");
	struct ir_diag d;
	ir_diag_init(&d);
	d.max_warnings = 20;
	struct ir_model *m = ir_model_load(a.pos[0], NULL, &d);
	if (!m)
		return sh_diag(s, &d);
	sh_diag(s, &d);
	sh_set_model(s, m, a.pos[0]);
	struct ir_graph_totals t;
	ir_graph_totals(m->graph, &t);
	char b1[32], b2[32];
	if (s->interactive)
		sh_printf(s, "loaded %s: %d nodes, %s weight elements (%s)\n", sh_esc(s->name), t.n_nodes,
			  sh_count(t.n_params, b1, sizeof(b1)), sh_bytes(t.weight_bytes, b2, sizeof(b2)));
	return 0;
}

int cmd_save(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (!sh_need_model(s))
		return -1;
	struct ir_save_opts o = { .force = sh_flag(&a, "force") };
	const char *path;
	if (a.npos == 1) {
		path = a.pos[0];
		if (!*path)
			return sh_error(s, "save: the file name is empty");
	} else if (a.npos == 0 && o.force) {
		if (!s->model->path)
			return sh_error(s, "save: the model was not loaded from a file, so save --force needs a FILE");
		path = s->model->path;
	} else {
		return sh_usage(s, argv[0]);
	}
	if (sh_flag(&a, "external") && sh_flag(&a, "embed"))
		return sh_error(s, "save: --external and --embed contradict each other");
	o.external = sh_flag(&a, "external") ? IR_EXT_ALL : sh_flag(&a, "embed") ? IR_EXT_NONE : IR_EXT_AUTO;
	const char *th = sh_opt(&a, "threshold");
	if (th) {
		char *end;
		unsigned long long v = strtoull(th, &end, 10);
		if (!*th || *end || th[0] == '-' || v == 0)
			return sh_error(s, "save: --threshold needs a positive number of bytes, not '%s'", sh_esc(th));
		o.threshold = (size_t)v;
		if (o.external == IR_EXT_AUTO)
			o.external = IR_EXT_ALL;
	}
	o.data_name = sh_opt(&a, "data");
	if (o.data_name && o.external == IR_EXT_AUTO)
		o.external = IR_EXT_ALL;
	struct ir_diag d;
	ir_diag_init(&d);
	if (isatty(STDERR_FILENO)) {
		o.progress = sh_progress;
		o.progress_arg = (void *)"saving";
	}
	int rc = ir_model_save(s->model, path, &o, &d);
	sh_progress_done();
	if (rc)
		return sh_diag(s, &d);
	sh_diag(s, &d);
	s->dirty = false;
	s->saved_stage = s->stage;
	if (s->interactive) {
		struct stat st;
		char b[32];
		if (stat(path, &st) == 0)
			sh_printf(s, "saved %s (%s)\n", sh_esc(path), sh_bytes((uint64_t)st.st_size, b, sizeof(b)));
	}
	return 0;
}

int cmd_source(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (a.npos != 1)
		return sh_usage(s, argv[0]);
	bool was = s->interactive;
	s->interactive = false;   /* scripts never ask questions */
	int rc = sh_run_file(s, a.pos[0]);
	s->interactive = was;
	return rc;
}

static const char *on_off(bool v)
{
	return v ? "on" : "off";
}

static int parse_bool(struct session *s, const char *name, const char *v, bool *out)
{
	if (strcmp(v, "on") == 0 || strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
		*out = true;
	else if (strcmp(v, "off") == 0 || strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
		*out = false;
	else
		return sh_error(s, "set %s: expected on or off, not '%s'", name, sh_esc(v));
	return 0;
}

int sh_threads_set(const struct session *s)
{
	if (s->threads)
		return s->threads;
	return cpu_threads_env_ok() && getenv("OGSH_THREADS") && *getenv("OGSH_THREADS") ? cpu_threads() : 0;
}

/* "threads   N" and where N comes from */
static void print_threads(struct session *s)
{
	const char *env = getenv("OGSH_THREADS");
	sh_printf(s, "threads   %d%s\n", cpu_threads(),
		  s->threads ? "" : env && *env && cpu_threads_env_ok() ? " (OGSH_THREADS)" : " (auto: the cores ogsh may use)");
}

static int set_threads(struct session *s, const char *v)
{
	long n = 0;
	char *end = NULL;
	if (strcmp(v, "auto") != 0) {
		errno = 0;
		n = strtol(v, &end, 10);
		if (end == v || *end || errno || n < 0 || n > 1024)
			return sh_error(s, "set threads: expected a number from 1 to 1024, 0 or auto, not '%s'", sh_esc(v));
	}
	if (n == 0) {
		/* the machine's cores, not OGSH_THREADS */
		n = cpu_machine_cores();
	}
	if (cpu_set_threads((int)n))
		return sh_error(s, "set threads: cannot change the thread count now");
	s->threads = (int)n;
	return 0;
}

int cmd_set(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (a.npos == 0) {
		sh_printf(s, "on-error  %s\ntimer     %s\ncolor     %s\ntf32      %s\n",
			  s->on_error_continue ? "continue" : "stop", on_off(s->timer), on_off(s->color), on_off(s->tf32));
		print_threads(s);
		return 0;
	}
	const char *name = a.pos[0], *v = a.npos > 1 ? a.pos[1] : NULL;
	if (a.npos > 2)
		return sh_usage(s, argv[0]);
	if (strcmp(name, "on-error") == 0) {
		if (!v)
			sh_printf(s, "on-error  %s\n", s->on_error_continue ? "continue" : "stop");
		else if (strcmp(v, "continue") == 0)
			s->on_error_continue = true;
		else if (strcmp(v, "stop") == 0)
			s->on_error_continue = false;
		else
			return sh_error(s, "set on-error: expected stop or continue, not '%s'", sh_esc(v));
		return 0;
	}
	if (strcmp(name, "timer") == 0) {
		if (!v) {
			sh_printf(s, "timer     %s\n", on_off(s->timer));
			return 0;
		}
		return parse_bool(s, name, v, &s->timer);
	}
	if (strcmp(name, "color") == 0) {
		if (!v) {
			sh_printf(s, "color     %s\n", on_off(s->color));
			return 0;
		}
		if (strcmp(v, "auto") == 0) {
			s->color = sh_color_auto();
			return 0;
		}
		return parse_bool(s, name, v, &s->color);
	}
	if (strcmp(name, "tf32") == 0) {
		if (!v) {
			sh_printf(s, "tf32      %s\n", on_off(s->tf32));
			return 0;
		}
		return parse_bool(s, name, v, &s->tf32);
	}
	if (strcmp(name, "threads") == 0) {
		if (!v) {
			print_threads(s);
			return 0;
		}
		return set_threads(s, v);
	}
	return sh_error(s, "unknown setting '%s' (settings: on-error, timer, color, tf32, threads)", sh_esc(name));
}

int cmd_quit(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (a.npos)
		return sh_usage(s, argv[0]);
	if (s->dirty && !sh_flag(&a, "force") && !sh_confirm(s, "the model has unsaved changes: quit anyway?"))
		return 0;
	s->quit = true;
	return 0;
}
