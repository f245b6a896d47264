/*
 * script.c - words, options, and running commands from a line, a stream or
 * a file. The keyboard, `-c`, `-f`, stdin and `source` all go through
 * sh_run_line, so a script does exactly what typing it would.
 */
#include "shell.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define SH_MAX_LINE (1 << 20)

int sh_split(const char *line, char *buf, size_t bufsize, char **argv, int max, const char **rest,
	     const char **err)
{
	const char *p = line;
	size_t o = 0;
	int argc = 0;
	*rest = NULL;
	*err = NULL;
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
			p++;
		/* '#' starts a comment, except #12: a node id */
		if (!*p || (*p == '#' && !(p[1] >= '0' && p[1] <= '9')))
			return argc;
		if (*p == ';') {
			*rest = p + 1;
			return argc;
		}
		if (argc == max) {
			*err = "too many words";
			return -1;
		}
		argv[argc++] = buf + o;
		while (*p && *p != ' ' && *p != '\t' && *p != '\r' && *p != '\n' && *p != ';') {
			if (o + 2 >= bufsize) {
				*err = "line too long";
				return -1;
			}
			if (*p == '\'') {
				const char *q = strchr(p + 1, '\'');
				if (!q) {
					*err = "a ' quote is not closed";
					return -1;
				}
				size_t n = (size_t)(q - p - 1);
				if (o + n + 2 >= bufsize) {
					*err = "line too long";
					return -1;
				}
				memcpy(buf + o, p + 1, n);
				o += n;
				p = q + 1;
			} else if (*p == '"') {
				p++;
				while (*p && *p != '"') {
					if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
						p++;
					if (o + 2 >= bufsize) {
						*err = "line too long";
						return -1;
					}
					buf[o++] = *p++;
				}
				if (*p != '"') {
					*err = "a \" quote is not closed";
					return -1;
				}
				p++;
			} else if (*p == '\\' && p[1]) {
				buf[o++] = p[1];
				p += 2;
			} else {
				buf[o++] = *p++;
			}
		}
		buf[o++] = 0;
	}
}

/* ---- options ---- */

/* Finds `name` (without dashes) in the option list; *takes_value set. */
static bool find_option(const char *list, const char *name, size_t len, bool *takes_value)
{
	const char *p = list;
	while (p && *p) {
		while (*p == ' ')
			p++;
		if (p[0] != '-' || p[1] != '-')
			break;
		p += 2;
		size_t n = strcspn(p, " =");
		bool val = p[n] == '=';
		if (n == len && strncmp(p, name, len) == 0) {
			*takes_value = val;
			return true;
		}
		p += n + (val ? 1 : 0);
	}
	return false;
}

int sh_model_cmd_args(struct session *s, int argc, char **argv, struct sh_args *a)
{
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, a))
		return -1;
	if (a->npos)
		return sh_usage(s, argv[0]);
	if (!sh_need_model(s))
		return -1;
	return 0;
}

int sh_parse_args(struct session *s, const struct sh_cmd *c, int argc, char **argv, struct sh_args *a)
{
	memset(a, 0, sizeof(*a));
	bool opts_done = false;
	for (int i = 1; i < argc; i++) {
		char *arg = argv[i];
		if (!opts_done && strcmp(arg, "--") == 0) {
			opts_done = true;
			continue;
		}
		if (opts_done || arg[0] != '-' || arg[1] != '-' || !arg[2]) {
			if (a->npos == SH_MAX_ARGS)
				return sh_error(s, "%s: too many arguments", c->name);
			a->pos[a->npos++] = arg;
			continue;
		}
		const char *name = arg + 2;
		const char *eq = strchr(name, '=');
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		bool takes;
		if (!find_option(c->options, name, len, &takes)) {
			char on[128];
			snprintf(on, sizeof(on), "%.*s", (int)(len < 100 ? len : 100), name);
			return sh_error(s, "%s: unknown option '--%s' (see: help %s)", c->name, sh_esc(on), c->name);
		}
		const char *val = NULL;
		if (takes) {
			if (eq)
				val = eq + 1;
			else if (i + 1 < argc)
				val = argv[++i];
			else
				return sh_error(s, "%s: option '--%.*s' needs a value", c->name, (int)len, name);
		} else if (eq) {
			return sh_error(s, "%s: option '--%.*s' takes no value", c->name, (int)len, name);
		}
		if (a->nopt == 32)
			return sh_error(s, "%s: too many options", c->name);
		a->opt_name[a->nopt] = name;
		a->opt_val[a->nopt++] = val;
		/* the stored name ends at '=' or the end: cut it at '=' in place */
		if (eq)
			*(char *)eq = 0;
	}
	return 0;
}

bool sh_flag(const struct sh_args *a, const char *name)
{
	for (int i = 0; i < a->nopt; i++)
		if (strcmp(a->opt_name[i], name) == 0)
			return true;
	return false;
}

const char *sh_opt(const struct sh_args *a, const char *name)
{
	const char *v = NULL;
	for (int i = 0; i < a->nopt; i++)
		if (strcmp(a->opt_name[i], name) == 0)
			v = a->opt_val[i];   /* the last one wins */
	return v;
}

/* ---- dispatch ---- */

static int edit_distance(const char *a, const char *b)
{
	int la = (int)strlen(a), lb = (int)strlen(b);
	if (la > 40 || lb > 40)
		return 99;
	int d[41][41];
	for (int i = 0; i <= la; i++)
		d[i][0] = i;
	for (int j = 0; j <= lb; j++)
		d[0][j] = j;
	for (int i = 1; i <= la; i++)
		for (int j = 1; j <= lb; j++) {
			int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1 < c)
				c = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < c)
				c = d[i][j - 1] + 1;
			d[i][j] = c;
		}
	return d[la][lb];
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int sh_unknown_command(struct session *s, const char *name)
{
	const char *best = NULL;
	int bd = 3;
	for (int i = 0; i < sh_n_commands; i++) {
		int dd = edit_distance(name, sh_commands[i].name);
		if (dd < bd) {
			bd = dd;
			best = sh_commands[i].name;
		}
	}
	if (best)
		return sh_error(s, "unknown command '%s' (did you mean '%s'? type help for the list)", sh_esc(name), best);
	return sh_error(s, "unknown command '%s' (type help for the list)", sh_esc(name));
}

static int dispatch_one(struct session *s, int argc, char **argv);

/* ---- keeping results for expect ---- */

/* stdout and a copy in memory: what a command prints with --json is shown
 * and kept, in the order it is printed */
struct tee {
	FILE *real;
	char *buf;
	size_t len, cap;
	bool oom;
};

static ssize_t tee_write(void *cookie, const char *b, size_t n)
{
	struct tee *t = cookie;
	size_t w = fwrite(b, 1, n, t->real);
	fflush(t->real);   /* an error printed next (where() flushes s->out) comes after it */
	if (!t->oom && t->len + n + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : 4096;
		while (cap < t->len + n + 1)
			cap *= 2;
		char *nb = realloc(t->buf, cap);
		if (nb) {
			t->buf = nb;
			t->cap = cap;
		} else {
			t->oom = true;
		}
	}
	if (!t->oom) {
		memcpy(t->buf + t->len, b, n);
		t->len += n;
	}
	return w == n ? (ssize_t)n : -1;
}

static bool has_json_flag(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--json"))
			return true;
	return false;
}

/* Runs a command that takes --json so that its result is kept for expect. */
static int run_keeping(struct session *s, const struct sh_cmd *c, int argc, char **argv)
{
	if (has_json_flag(argc, argv)) {
		struct tee t = { .real = s->out };
		cookie_io_functions_t io = { .write = tee_write };
		FILE *f = fopencookie(&t, "w", io);
		if (!f)
			return c->fn(s, argc, argv);
		FILE *real = s->out;
		s->out = f;
		int rc = c->fn(s, argc, argv);
		fclose(f);
		s->out = real;
		if (!t.oom && t.len)
			sh_keep_result(s, c->name, t.buf, t.len, NULL);
		else
			sh_keep_result(s, c->name, NULL, 0, rc ? "its last run failed" : "its last run printed none");
		free(t.buf);
		return rc;
	}
	char *buf = NULL;
	size_t len = 0;
	if (!(c->flags & (SH_F_KEEP | SH_F_PURE))) {
		int rc = c->fn(s, argc, argv);
		sh_keep_result(s, c->name, NULL, 0, rc ? "its last run failed" :
			       "it keeps its result only when run with --json, and its last run was without");
		return rc;
	}
	if (c->flags & SH_F_KEEP) {
		FILE *f = open_memstream(&buf, &len);
		s->keep = f;
		int rc = c->fn(s, argc, argv);
		s->keep = NULL;
		if (f && !fclose(f) && len)
			sh_keep_result(s, c->name, buf, len, NULL);
		else
			sh_keep_result(s, c->name, NULL, 0, rc ? "its last run failed" :
				       "its last run made none (as with compare --stages: run it with --json)");
		free(buf);
		return rc;
	}
	/* it only reads the model: run it again with --json, unseen (its words
	 * are copied first, as commands cut their options up) */
	char **copy = calloc((size_t)argc + 2, sizeof(char *));
	bool ok = copy != NULL;
	for (int i = 0; ok && i < argc; i++)
		ok = (copy[i] = strdup(argv[i])) != NULL;
	int rc = c->fn(s, argc, argv);
	if (!rc && ok) {
		FILE *f = open_memstream(&buf, &len);
		if (f) {
			FILE *real = s->out;
			copy[argc] = (char *)"--json";
			s->out = f;
			s->mute = true;
			int r2 = c->fn(s, argc + 1, copy);
			s->mute = false;
			s->out = real;
			copy[argc] = NULL;
			if (!fclose(f) && !r2 && len)
				sh_keep_result(s, c->name, buf, len, NULL);
			free(buf);
		}
	} else if (rc) {
		sh_keep_result(s, c->name, NULL, 0, "its last run failed");
	}
	for (int i = 0; copy && i < argc; i++)
		free(copy[i]);
	free(copy);
	return rc;
}

static int dispatch(struct session *s, int argc, char **argv)
{
	char *text = sh_command_text(argc, argv);
	sh_history_settings(s);
	int rc = dispatch_one(s, argc, argv);
	/* load: the model's absolute path, so a saved history loads it from anywhere */
	const struct sh_cmd *c = sh_find_command(argv[0]);
	if (!rc && c && c->fn == cmd_load && argc == 2) {
		char *abs = realpath(argv[1], NULL);
		if (abs) {
			char *w[2] = { argv[0], abs };
			char *t2 = sh_command_text(2, w);
			if (t2) {
				free(text);
				text = t2;
			}
			free(abs);
		}
	}
	sh_history_add(s, text, c ? c->name : argv[0], rc);
	return rc;
}

static int dispatch_one(struct session *s, int argc, char **argv)
{
	const struct sh_cmd *c = sh_find_command(argv[0]);
	if (!c)
		return sh_unknown_command(s, argv[0]);
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			char *hargv[2] = { (char *)"help", (char *)c->name };
			return cmd_help(s, 2, hargv);
		}
	/* timed when the timer is on before and after (not `set timer on` itself) */
	bool timed = s->timer;
	double t0 = timed ? now() : 0;
	int rc;
	if ((c->flags & SH_F_MODIFIES) && s->model) {
		/* a hand edit makes a stage: the current stage keeps a copy of the
		 * model as it was, the edited model becomes the next stage */
		struct ir_model *before = ir_model_clone(s->model);
		if (!before)
			return sh_error(s, "%s: out of memory for the stage history", c->name);
		/* the label is the command as typed (commands may cut their arguments up) */
		char label[256];
		size_t k = 0;
		for (int i = 0; i < argc && k + 2 < sizeof(label); i++)
			k += (size_t)snprintf(label + k, sizeof(label) - k, "%s%s", i ? " " : "", argv[i]);
		s->edit_made = false;
		rc = (c->flags & SH_F_JSON) ? run_keeping(s, c, argc, argv) : c->fn(s, argc, argv);
		if (s->edit_made && s->hist.n) {
			struct ir_model *edited = s->model;
			s->hist.st[s->hist.cur].m = before;
			if (pass_history_push(&s->hist, edited, label, NULL)) {
				/* keep going without the stage: the edit stays in the current stage */
				s->hist.st[s->hist.cur].m = edited;
				ir_model_free(before);
				sh_warn(s, "out of memory: the edit did not make a new stage");
			}
			s->stage = s->hist.cur;
			s->dirty = s->stage != s->saved_stage;
		} else {
			ir_model_free(before);
		}
	} else {
		rc = (c->flags & SH_F_JSON) ? run_keeping(s, c, argc, argv) : c->fn(s, argc, argv);
	}
	fflush(s->out);
	if (timed && s->timer)
		fprintf(stderr, "time: %.3f s\n", now() - t0);
	return rc;
}

int sh_run_line(struct session *s, const char *line)
{
	size_t len = strlen(line);
	if (len > SH_MAX_LINE)
		return sh_error(s, "line too long (%zu bytes)", len);
	char *buf = malloc(len + 2);
	char **argv = malloc(SH_MAX_ARGS * sizeof(char *));
	if (!buf || !argv) {
		free(buf);
		free(argv);
		return sh_error(s, "out of memory");
	}
	int rc = 0;
	/* a line with a syntax error runs none of its commands */
	for (const char *q = line; q;) {
		const char *rest, *err;
		if (sh_split(q, buf, len + 2, argv, SH_MAX_ARGS, &rest, &err) < 0) {
			rc = sh_error(s, "%s", err);
			s->errors++;
			free(buf);
			free(argv);
			return rc;
		}
		q = rest;
	}
	const char *p = line;
	while (p && !s->quit) {
		const char *rest, *err;
		int argc = sh_split(p, buf, len + 2, argv, SH_MAX_ARGS, &rest, &err);
		if (argc < 0) {
			rc = sh_error(s, "%s", err);
			s->errors++;
			break;
		}
		if (argc > 0 && ir_interrupted) {
			/* Ctrl-C: the rest of the line does not run (the REPL clears the
			 * flag before each prompt; scripts stop) */
			if (!rc)
				rc = sh_error(s, "interrupted");
			s->errors++;
			break;
		}
		if (argc > 0) {
			int r = dispatch(s, argc, argv);
			if (r) {
				rc = r;
				s->errors++;
				if (!s->on_error_continue || s->interactive)
					break;
			}
		}
		p = rest;
	}
	free(buf);
	free(argv);
	return rc;
}

int sh_run_stream(struct session *s, FILE *f, const char *name)
{
	struct sh_source src = { name, 0, s->src };
	s->src = &src;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;
	while (!s->quit && (n = getline(&line, &cap, f)) >= 0) {
		src.line++;
		if (memchr(line, 0, (size_t)n)) {
			rc = sh_error(s, "the line has a NUL byte (is this a binary file?)");
			s->errors++;
			if (!s->on_error_continue)
				break;
			continue;
		}
		int r = sh_run_line(s, line);
		if (r) {
			rc = r;
			if (!s->on_error_continue)
				break;
		}
		if (ir_interrupted) {
			if (!r) {
				rc = sh_error(s, "interrupted");
				s->errors++;
			}
			break;
		}
	}
	free(line);
	s->src = src.up;
	return rc;
}

int sh_run_file(struct session *s, const char *path)
{
	if (s->depth >= SH_MAX_SOURCE_DEPTH)
		return sh_error(s, "cannot source '%s': scripts nested more than %d deep", sh_esc(path),
				SH_MAX_SOURCE_DEPTH);
	FILE *f = fopen(path, "r");
	if (!f)
		return sh_error(s, "cannot open '%s': %s", sh_esc(path), sh_strerror(errno));
	struct stat st;
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(f);
		return sh_error(s, "cannot source '%s': it is a folder", sh_esc(path));
	}
	s->depth++;
	int rc = sh_run_stream(s, f, path);
	s->depth--;
	fclose(f);
	return rc;
}
