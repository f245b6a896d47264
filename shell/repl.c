/*
 * repl.c - the interactive loop: line editing and history through libedit
 * (or GNU readline when built with -Dreadline=enabled), Tab completion
 * driven by the command table, and Ctrl-C that stops a command, not ogsh.
 */
#include "shell.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef OGSH_USE_READLINE
#include <readline/history.h>
#include <readline/readline.h>
#else
#include <editline/readline.h>
#endif

static struct session *cur;   /* the session completion reads */

static void on_sigint(int sig)
{
	(void)sig;
	ir_interrupted = 1;
}

void sh_install_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigint;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

bool sh_color_auto(void)
{
	const char *nc = getenv("NO_COLOR");
	return isatty(STDOUT_FILENO) && !(nc && *nc);
}

/* ---- completion ---- */

struct cands {
	char **v;
	int n, cap, next;
};
static struct cands cands;

static void cands_clear(void)
{
	for (int i = 0; i < cands.n; i++)
		free(cands.v[i]);
	free(cands.v);
	memset(&cands, 0, sizeof(cands));
}

static void cand(const char *text, const char *s)
{
	if (strncmp(s, text, strlen(text)) != 0)
		return;
	if (cands.n == cands.cap) {
		int cap = cands.cap ? cands.cap * 2 : 64;
		char **v = realloc(cands.v, (size_t)cap * sizeof(char *));
		if (!v)
			return;
		cands.v = v;
		cands.cap = cap;
	}
	char *d = strdup(s);
	if (d)
		cands.v[cands.n++] = d;
}

static char *next_cand(const char *text, int state)
{
	(void)text;
	if (state == 0)
		cands.next = 0;
	if (cands.next < cands.n)
		return strdup(cands.v[cands.next++]);
	return NULL;
}

static void add_nodes(const char *text)
{
	if (!cur->model || !cur->model->graph)
		return;
	ir_for_each_node(cur->model->graph, n) {
		if (n->name && *n->name)
			cand(text, n->name);
		char id[24];
		snprintf(id, sizeof(id), "n%d", n->id);
		cand(text, id);
	}
}

static void add_values(const char *text)
{
	if (!cur->model || !cur->model->graph)
		return;
	const struct ir_graph *g = cur->model->graph;
	for (size_t i = 0; i < g->n_values; i++)
		if (!g->values[i]->outer)
			cand(text, g->values[i]->name);
}

static void add_options(const char *text, const char *list)
{
	const char *p = list;
	while (p && *p) {
		while (*p == ' ')
			p++;
		size_t n = strcspn(p, " ");
		if (!n)
			break;
		char opt[64];
		snprintf(opt, sizeof(opt), "%.*s", (int)(n < 63 ? n : 63), p);
		cand(text, opt);
		p += n;
	}
}

static char **complete(const char *text, int start, int end)
{
	(void)end;
	cands_clear();
	rl_attempted_completion_over = 1;
	/* the words before the one being completed */
	char *line = strndup(rl_line_buffer, (size_t)start);
	if (!line)
		return NULL;
	char *seg = strrchr(line, ';');
	seg = seg ? seg + 1 : line;
	char *words[8];
	int nw = 0;
	for (char *tok = strtok(seg, " \t"); tok && nw < 8; tok = strtok(NULL, " \t"))
		words[nw++] = tok;
	if (nw == 0) {
		for (int i = 0; i < sh_n_commands; i++)
			cand(text, sh_commands[i].name);
	} else {
		const struct sh_cmd *c = sh_find_command(words[0]);
		if (c && text[0] == '-') {
			add_options(text, c->options);
		} else if (c) {
			switch (c->complete) {
			case SH_C_FILE:
				rl_attempted_completion_over = 0;   /* the library's file names */
				break;
			case SH_C_NODE: add_nodes(text); break;
			case SH_C_VALUE: add_values(text); break;
			case SH_C_ANY: add_nodes(text); add_values(text); break;
			case SH_C_COMMAND:
				for (int i = 0; i < sh_n_commands; i++)
					cand(text, sh_commands[i].name);
				break;
			case SH_C_SETTING:
				if (nw == 1) {
					cand(text, "on-error");
					cand(text, "timer");
					cand(text, "color");
				} else if (strcmp(words[1], "on-error") == 0) {
					cand(text, "stop");
					cand(text, "continue");
				} else {
					cand(text, "on");
					cand(text, "off");
					if (strcmp(words[1], "color") == 0)
						cand(text, "auto");
				}
				break;
			case SH_C_NONE:
				break;
			}
		}
	}
	free(line);
	if (!cands.n)
		return NULL;
	return rl_completion_matches(text, next_cand);
}

/* ---- history ---- */

static char *history_path(void)
{
	const char *env = getenv("OGSH_HISTORY");
	if (env)
		return *env ? strdup(env) : NULL;
	const char *home = getenv("HOME");
	if (!home || !*home)
		return NULL;
	size_t n = strlen(home) + 32;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s/.ogsh_history", home);
	return p;
}

static void prompt(const struct session *s, char *buf, size_t size)
{
	snprintf(buf, size, "%s%s [%d]> ", s->name ? sh_esc(s->name) : "ogsh", s->dirty ? "*" : "", s->stage);
}

int sh_repl(struct session *s)
{
	cur = s;
	rl_readline_name = "ogsh";
	rl_attempted_completion_function = complete;
	char *hist = history_path();
	using_history();
	stifle_history(2000);
	if (hist)
		read_history(hist);
	struct sh_source src = { NULL, 0, NULL };
	s->src = &src;
	char pbuf[512];
	while (!s->quit) {
		prompt(s, pbuf, sizeof(pbuf));
		ir_interrupted = 0;
		char *line = readline(pbuf);
		if (!line) {
			if (ir_interrupted) {   /* Ctrl-C at the prompt: a fresh line */
				fputc('\n', stdout);
				continue;
			}
			fputc('\n', stdout);
			char *qargv[1] = { (char *)"quit" };
			cmd_quit(s, 1, qargv);
			if (!s->quit)
				continue;
			break;
		}
		src.line++;
		const char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p) {
			add_history(line);
			sh_run_line(s, line);
		}
		free(line);
	}
	if (hist) {
		write_history(hist);
		free(hist);
	}
	cands_clear();
	s->src = NULL;
	return 0;
}
