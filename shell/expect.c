/*
 * expect.c - the results commands keep and `expect`, which asserts on them.
 *
 * Every command that takes --json keeps its last result as the JSON it
 * prints (or would print: without --json it is written to s->keep, or the
 * command is run again with --json when it only reads the model; see
 * dispatch in script.c). `expect PATH OP VALUE` finds a number, string or
 * boolean in one of those documents and compares it.
 *
 * PATH is COMMAND then fields: `time.median_ms`, `stats.params`,
 * `run.outputs.probs.max` (an array element by its "name", "op" or "id"),
 * `run.outputs[0].max` or `run.outputs.0.max` (by index; -1 is the last),
 * `run.outputs["a.b"].max` (a name with dots).
 */
#include "shell.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- a small JSON reader (the documents come from sh_json, but are read
 * as if they could be anything) ---- */

enum jt { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
	enum jt t;
	bool b;
	double num;
	char *str;          /* J_STR */
	int n;              /* J_ARR, J_OBJ: items */
	char **keys;        /* J_OBJ */
	struct jv *items;
};

struct jp {
	const char *p, *end;
	int depth;
	const char *err;
};

static void jv_free(struct jv *v)
{
	if (!v)
		return;
	free(v->str);
	for (int i = 0; i < v->n; i++) {
		jv_free(&v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	memset(v, 0, sizeof(*v));
}

static void ws(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
		j->p++;
}

static int hex4(const char *p)
{
	int v = 0;
	for (int i = 0; i < 4; i++) {
		int c = p[i], d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return -1;
		v = v * 16 + d;
	}
	return v;
}

static char *parse_str(struct jp *j)
{
	/* at the opening quote */
	j->p++;
	size_t cap = 16, n = 0;
	char *s = malloc(cap);
	if (!s) {
		j->err = "out of memory";
		return NULL;
	}
	while (j->p < j->end && *j->p != '"') {
		if (n + 5 > cap) {
			cap *= 2;
			char *t = realloc(s, cap);
			if (!t) {
				free(s);
				j->err = "out of memory";
				return NULL;
			}
			s = t;
		}
		char c = *j->p++;
		if (c != '\\') {
			s[n++] = c;
			continue;
		}
		if (j->p >= j->end)
			break;
		c = *j->p++;
		switch (c) {
		case 'n': s[n++] = '\n'; break;
		case 't': s[n++] = '\t'; break;
		case 'r': s[n++] = '\r'; break;
		case 'b': s[n++] = '\b'; break;
		case 'f': s[n++] = '\f'; break;
		case 'u': {
			int u = j->end - j->p >= 4 ? hex4(j->p) : -1;
			if (u < 0) {
				free(s);
				j->err = "a bad \\u escape";
				return NULL;
			}
			j->p += 4;
			/* UTF-8 of the code unit (surrogates are kept as they are: names only) */
			if (u < 0x80) {
				s[n++] = (char)u;
			} else if (u < 0x800) {
				s[n++] = (char)(0xc0 | (u >> 6));
				s[n++] = (char)(0x80 | (u & 0x3f));
			} else {
				s[n++] = (char)(0xe0 | (u >> 12));
				s[n++] = (char)(0x80 | ((u >> 6) & 0x3f));
				s[n++] = (char)(0x80 | (u & 0x3f));
			}
			break;
		}
		default: s[n++] = c;
		}
	}
	if (j->p >= j->end) {
		free(s);
		j->err = "a string is not closed";
		return NULL;
	}
	j->p++;
	s[n] = 0;
	return s;
}

static int parse_value(struct jp *j, struct jv *v);

static int add_item(struct jp *j, struct jv *v, char *key)
{
	if (v->n == 0 || (v->n >= 4 && (v->n & (v->n - 1)) == 0)) {   /* capacity 4, 8, 16... */
		int cap = v->n ? v->n * 2 : 4;
		struct jv *it = realloc(v->items, (size_t)cap * sizeof(*it));
		if (!it) {
			j->err = "out of memory";
			return -1;
		}
		v->items = it;
		if (v->t == J_OBJ) {
			char **k = realloc(v->keys, (size_t)cap * sizeof(*k));
			if (!k) {
				j->err = "out of memory";
				return -1;
			}
			v->keys = k;
		}
	}
	memset(&v->items[v->n], 0, sizeof(v->items[0]));
	if (v->t == J_OBJ)
		v->keys[v->n] = key;
	v->n++;
	return parse_value(j, &v->items[v->n - 1]);
}

static int parse_value(struct jp *j, struct jv *v)
{
	ws(j);
	if (j->p >= j->end) {
		j->err = "the document ends early";
		return -1;
	}
	char c = *j->p;
	if (c == '{' || c == '[') {
		if (++j->depth > 200) {
			j->err = "nested too deep";
			return -1;
		}
		v->t = c == '{' ? J_OBJ : J_ARR;
		char close = c == '{' ? '}' : ']';
		j->p++;
		ws(j);
		if (j->p < j->end && *j->p == close) {
			j->p++;
			j->depth--;
			return 0;
		}
		for (;;) {
			char *key = NULL;
			if (v->t == J_OBJ) {
				ws(j);
				if (j->p >= j->end || *j->p != '"') {
					j->err = "a key is missing";
					return -1;
				}
				if (!(key = parse_str(j)))
					return -1;
				ws(j);
				if (j->p >= j->end || *j->p != ':') {
					free(key);
					j->err = "a ':' is missing";
					return -1;
				}
				j->p++;
			}
			if (add_item(j, v, key))
				return -1;
			ws(j);
			if (j->p < j->end && *j->p == ',') {
				j->p++;
				continue;
			}
			if (j->p < j->end && *j->p == close) {
				j->p++;
				j->depth--;
				return 0;
			}
			j->err = "a ',' or the end of a list is missing";
			return -1;
		}
	}
	if (c == '"') {
		v->t = J_STR;
		return (v->str = parse_str(j)) ? 0 : -1;
	}
	static const struct { const char *w; enum jt t; bool b; } words[] = {
		{ "true", J_BOOL, true }, { "false", J_BOOL, false }, { "null", J_NULL, false },
	};
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		size_t n = strlen(words[i].w);
		if ((size_t)(j->end - j->p) >= n && !memcmp(j->p, words[i].w, n)) {
			v->t = words[i].t;
			v->b = words[i].b;
			j->p += n;
			return 0;
		}
	}
	char buf[64];
	size_t n = 0;
	while (j->p + n < j->end && n + 1 < sizeof(buf) && strchr("+-0123456789.eE", j->p[n])) {
		buf[n] = j->p[n];
		n++;
	}
	buf[n] = 0;
	char *e;
	double d = n ? strtod(buf, &e) : 0;
	if (!n || *e) {
		j->err = "an unexpected character";
		return -1;
	}
	v->t = J_NUM;
	v->num = d;
	j->p += n;
	return 0;
}

/* The last document of the text (a command prints one; --check adds none
 * after it, but a future one might). 0, or -1 with *err. */
static int parse_doc(const char *text, size_t len, struct jv *out, const char **err)
{
	struct jp j = { text, text + len, 0, NULL };
	memset(out, 0, sizeof(*out));
	for (;;) {
		ws(&j);
		if (j.p >= j.end)
			break;
		jv_free(out);
		if (parse_value(&j, out)) {
			jv_free(out);
			*err = j.err ? j.err : "not JSON";
			return -1;
		}
	}
	if (out->t == J_NULL && !len) {
		*err = "empty";
		return -1;
	}
	return 0;
}

/* ---- the kept results ---- */

int sh_keep_result(struct session *s, const char *cmd, const char *json, size_t len, const char *why)
{
	int k = -1;
	for (int i = 0; i < s->n_results; i++)
		if (!strcmp(s->results[i].cmd, cmd))
			k = i;
	if (k < 0) {
		struct sh_result *r = realloc(s->results, (size_t)(s->n_results + 1) * sizeof(*r));
		if (!r)
			return -1;
		s->results = r;
		k = s->n_results++;
		r[k].cmd = strdup(cmd);
		r[k].json = NULL;
		if (!r[k].cmd) {
			s->n_results--;
			return -1;
		}
	}
	char *copy = NULL;
	if (json) {
		if (!(copy = malloc(len + 1)))
			return -1;
		memcpy(copy, json, len);
		copy[len] = 0;
	}
	free(s->results[k].json);
	s->results[k].json = copy;
	s->results[k].len = copy ? len : 0;
	s->results[k].why = why;
	return 0;
}

void sh_results_free(struct session *s)
{
	for (int i = 0; i < s->n_results; i++) {
		free(s->results[i].cmd);
		free(s->results[i].json);
	}
	free(s->results);
	s->results = NULL;
	s->n_results = 0;
}

/* ---- paths ---- */

/* "a, b, c" of an object's keys or an array's names, into buf */
static void list_fields(const struct jv *v, char *buf, size_t size)
{
	size_t o = 0;
	buf[0] = 0;
	for (int i = 0; i < v->n && o + 8 < size; i++) {
		const char *name = NULL;
		char num[32];
		if (v->t == J_OBJ) {
			name = v->keys[i];
		} else {
			const struct jv *it = &v->items[i];
			for (int k = 0; it->t == J_OBJ && k < it->n && !name; k++)
				if (!strcmp(it->keys[k], "name") && it->items[k].t == J_STR)
					name = it->items[k].str;
			if (!name) {
				snprintf(num, sizeof(num), "%d", i);
				name = num;
			}
		}
		int w = snprintf(buf + o, size - o, "%s%s", i ? ", " : "", sh_esc(name));
		if (w < 0 || (size_t)w >= size - o) {
			snprintf(buf + (o < size - 5 ? o : size - 5), 5, "...");
			return;
		}
		o += (size_t)w;
	}
}

/* An array element by name: an object item whose "name", "op" or "id"
 * (in that order of preference), or "dtype" or "precision" equals key. */
static const struct jv *by_name(const struct jv *a, const char *key)
{
	static const char *fields[] = { "name", "op", "id", "dtype", "precision" };
	for (int f = 0; f < 5; f++)
		for (int i = 0; i < a->n; i++) {
			const struct jv *it = &a->items[i];
			for (int k = 0; it->t == J_OBJ && k < it->n; k++) {
				if (strcmp(it->keys[k], fields[f]))
					continue;
				const struct jv *x = &it->items[k];
				char num[32];
				const char *sv = x->t == J_STR ? x->str : NULL;
				if (x->t == J_NUM) {
					snprintf(num, sizeof(num), "%.17g", x->num);
					sv = num;
				}
				if (sv && !strcmp(sv, key))
					return it;
			}
		}
	return NULL;
}

static bool whole_number(const char *k, long *out)
{
	if (!*k)
		return false;
	char *e;
	errno = 0;
	long v = strtol(k, &e, 10);
	if (*e || errno || !(isdigit((unsigned char)k[0]) || (k[0] == '-' && isdigit((unsigned char)k[1]))))
		return false;
	*out = v;
	return true;
}

/* One step down from v by key; NULL after an error (the path so far is in `at`). */
static const struct jv *step(struct session *s, const struct jv *v, const char *key, const char *at)
{
	char fields[512];
	if (v->t == J_OBJ) {
		for (int i = v->n - 1; i >= 0; i--)   /* a repeated key: the last, as jq and Python read it */
			if (!strcmp(v->keys[i], key))
				return &v->items[i];
		/* the totals of stats (and any result with "totals") by their own names */
		for (int i = 0; i < v->n; i++)
			if (!strcmp(v->keys[i], "totals") && v->items[i].t == J_OBJ)
				for (int k = 0; k < v->items[i].n; k++)
					if (!strcmp(v->items[i].keys[k], key))
						return &v->items[i].items[k];
		list_fields(v, fields, sizeof(fields));
		sh_error(s, "expect: %s has no field '%s' (%s: %s)", at, sh_esc(key), v->n ? "its fields" : "it has none",
			 v->n ? fields : "-");
		return NULL;
	}
	if (v->t == J_ARR) {
		long idx;
		if (whole_number(key, &idx)) {
			if (idx < 0)
				idx += v->n;
			if (idx < 0 || idx >= v->n) {
				sh_error(s, "expect: %s has %d element%s: index %s is out of range", at, v->n, v->n == 1 ? "" : "s",
					 sh_esc(key));
				return NULL;
			}
			return &v->items[idx];
		}
		const struct jv *it = by_name(v, key);
		if (it)
			return it;
		list_fields(v, fields, sizeof(fields));
		sh_error(s, "expect: %s has no element named '%s' (%s)", at, sh_esc(key), v->n ? fields : "it is empty");
		return NULL;
	}
	sh_error(s, "expect: %s is a %s, it has no field '%s'", at,
		 v->t == J_NUM ? "number" : v->t == J_STR ? "string" : v->t == J_BOOL ? "boolean" : "null", sh_esc(key));
	return NULL;
}

/* Splits the next key off *pp: ".key", "[key]", "[\"a.b\"]". NULL at the
 * end; "" and *bad set on a syntax error. */
static char *next_key(const char **pp, char *buf, size_t size, bool *bad)
{
	const char *p = *pp;
	*bad = false;
	if (!*p)
		return NULL;
	size_t n = 0;
	if (*p == '.') {
		p++;
		while (*p && *p != '.' && *p != '[' && n + 1 < size)
			buf[n++] = *p++;
	} else if (*p == '[') {
		p++;
		char q = (*p == '"' || *p == '\'') ? *p++ : 0;
		while (*p && (q ? *p != q : *p != ']') && n + 1 < size)
			buf[n++] = *p++;
		if (q) {
			if (*p != q) {
				*bad = true;
				return buf;
			}
			p++;
		}
		if (*p != ']') {
			*bad = true;
			return buf;
		}
		p++;
	} else {
		*bad = true;
		return buf;
	}
	buf[n] = 0;
	if (!n)
		*bad = true;
	*pp = p;
	return buf;
}

/* ---- comparing ---- */

enum op { OP_LT, OP_LE, OP_EQ, OP_NE, OP_GE, OP_GT, OP_NEAR };
static const char *const op_names[] = { "<", "<=", "==", "!=", ">=", ">", "~=" };

static bool number_of(const struct jv *v, double *out)
{
	if (v->t == J_NUM) {
		*out = v->num;
		return true;
	}
	if (v->t == J_STR) {   /* sh_json writes NaN and infinities as strings */
		if (!strcmp(v->str, "nan"))
			*out = NAN;
		else if (!strcmp(v->str, "inf"))
			*out = INFINITY;
		else if (!strcmp(v->str, "-inf"))
			*out = -INFINITY;
		else
			return false;
		return true;
	}
	return false;
}

static bool parse_number(const char *t, double *out)
{
	char *e;
	errno = 0;
	double d = strtod(t, &e);
	if (e == t || *e || errno == ERANGE)
		return false;
	*out = d;
	return true;
}

static const char *show_value(const struct jv *v, char *buf, size_t size)
{
	double d;
	if (number_of(v, &d) && d == floor(d) && fabs(d) < 1e15)
		snprintf(buf, size, "%.0f", d);
	else if (number_of(v, &d))
		snprintf(buf, size, "%.6g", d);
	else if (v->t == J_STR)
		snprintf(buf, size, "'%s'", sh_esc(v->str));
	else if (v->t == J_BOOL)
		snprintf(buf, size, "%s", v->b ? "true" : "false");
	else if (v->t == J_NULL)
		snprintf(buf, size, "null");
	else
		snprintf(buf, size, "%s of %d", v->t == J_ARR ? "a list" : "an object", v->n);
	return buf;
}

/* Fails an expectation: "FILE:LINE: expect failed: ..." (like an error, it stops a script). */
static int failed(struct session *s, const char *path, const struct jv *v, const char *opname, const char *want,
		  const char *tol)
{
	char got[256];
	sh_fail(s, "expect failed: %s is %s, wanted %s %s%s%s", path, show_value(v, got, sizeof(got)), opname,
		want, tol ? " within " : "", tol ? tol : "");
	return -1;
}

int cmd_expect(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command("expect"), argc, argv, &a))
		return -1;
	if (a.npos < 3 || a.npos > 4)
		return sh_usage(s, "expect");
	const char *path = a.pos[0], *opname = a.pos[1], *want = a.pos[2], *tol = a.npos == 4 ? a.pos[3] : NULL;
	int op = -1;
	for (int i = 0; i < 7; i++)
		if (!strcmp(opname, op_names[i]))
			op = i;
	if (op < 0)
		return sh_error(s, "expect: '%s' is not a comparison (use <, <=, ==, !=, >=, > or ~= with a tolerance)",
				sh_esc(opname));
	if (op == OP_NEAR && !tol)
		return sh_error(s, "expect: ~= needs a tolerance after the value: 1%% (relative) or 0.001 (absolute)");
	if (op != OP_NEAR && tol)
		return sh_error(s, "expect: only ~= takes a tolerance ('%s' is one word too many)", sh_esc(tol));

	/* the command */
	char cmd[64];
	size_t n = strcspn(path, ".[");
	if (!n || n >= sizeof(cmd))
		return sh_error(s, "expect: '%s' does not start with a command name (as in time.median_ms)", sh_esc(path));
	memcpy(cmd, path, n);
	cmd[n] = 0;
	const struct sh_cmd *c = sh_find_command(cmd);
	if (!c)
		return sh_error(s, "expect: '%s' is not a command (PATH is COMMAND.FIELD, as in time.median_ms)",
				sh_esc(cmd));
	if (!(c->flags & SH_F_JSON)) {
		char list[1024];
		size_t o = 0;
		for (int i = 0; i < sh_n_commands && o + 32 < sizeof(list); i++)
			if (sh_commands[i].flags & SH_F_JSON)
				o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", o ? ", " : "", sh_commands[i].name);
		return sh_error(s, "expect: %s keeps no result (the commands that do: %s)", c->name, list);
	}
	const struct sh_result *r = NULL;
	for (int i = 0; i < s->n_results; i++)
		if (!strcmp(s->results[i].cmd, c->name))
			r = &s->results[i];
	if (!r)
		return sh_error(s, "expect: there is no result of %s yet: run %s first%s", c->name, c->name,
				c->flags & (SH_F_KEEP | SH_F_PURE) ? "" : " with --json (it keeps its result only then)");
	if (!r->json)
		return sh_error(s, "expect: %s has no result: %s", c->name, r->why);
	struct jv doc;
	const char *err;
	if (parse_doc(r->json, r->len, &doc, &err))
		return sh_error(s, "expect: the result of %s cannot be read (%s)", c->name, err);

	/* walk the path */
	int rc = -1;
	const struct jv *v = &doc;
	const char *p = path + n;
	char at[1024], key[512];
	snprintf(at, sizeof(at), "%s", c->name);
	bool bad;
	char *k;
	while ((k = next_key(&p, key, sizeof(key), &bad))) {
		if (bad) {
			sh_error(s, "expect: '%s' is not a path: after %s write .FIELD, [INDEX] or [\"NAME\"]", sh_esc(path),
				 at);
			goto out;
		}
		if (!(v = step(s, v, k, at)))
			goto out;
		size_t o = strlen(at);
		snprintf(at + o, sizeof(at) - o, "%s%s", strchr(k, '.') ? "[\"" : ".", k);
		if (strchr(k, '.'))
			snprintf(at + strlen(at), sizeof(at) - strlen(at), "\"]");
	}
	if (v->t == J_OBJ || v->t == J_ARR) {
		char fields[512];
		list_fields(v, fields, sizeof(fields));
		sh_error(s, "expect: %s is %s, not a value: name one of its %s (%s)", at,
			 v->t == J_OBJ ? "an object" : "a list", v->t == J_OBJ ? "fields" : "elements", v->n ? fields : "none");
		goto out;
	}

	double x, w;
	bool ok;
	if (number_of(v, &x) && (parse_number(want, &w) || !strcmp(want, "nan") || !strcmp(want, "inf"))) {
		if (!parse_number(want, &w))
			w = !strcmp(want, "nan") ? NAN : INFINITY;
		switch (op) {
		case OP_LT: ok = x < w; break;
		case OP_LE: ok = x <= w; break;
		case OP_EQ: ok = x == w || (isnan(x) && isnan(w)); break;
		case OP_NE: ok = !(x == w || (isnan(x) && isnan(w))); break;
		case OP_GE: ok = x >= w; break;
		case OP_GT: ok = x > w; break;
		default: {
			size_t tl = strlen(tol);
			double t;
			char tb[64];
			bool rel = tl && tol[tl - 1] == '%';
			snprintf(tb, sizeof(tb), "%.*s", (int)(rel ? tl - 1 : tl), tol);
			if (tl >= sizeof(tb) || !parse_number(tb, &t) || !(t >= 0)) {
				sh_error(s, "expect: the tolerance '%s' is not a number >= 0 or a percentage (1%%)", sh_esc(tol));
				goto out;
			}
			double lim = rel ? t / 100 * fabs(w) : t;
			ok = fabs(x - w) <= lim;
		}
		}
	} else if (number_of(v, &x)) {
		sh_error(s, "expect: %s is a number (%.6g); '%s' is not one", at, x, sh_esc(want));
		goto out;
	} else if (op == OP_EQ || op == OP_NE) {
		bool eq;
		if (v->t == J_STR)
			eq = !strcmp(v->str, want);
		else if (v->t == J_BOOL && (!strcmp(want, "true") || !strcmp(want, "false")))
			eq = v->b == !strcmp(want, "true");
		else if (v->t == J_NULL)
			eq = !strcmp(want, "null");
		else {
			char got[256];
			sh_error(s, "expect: %s is %s: compare it with true or false, not '%s'", at,
				 show_value(v, got, sizeof(got)), sh_esc(want));
			goto out;
		}
		ok = op == OP_EQ ? eq : !eq;
	} else {
		char got[256];
		sh_error(s, "expect: %s is %s: only == and != compare it", at, show_value(v, got, sizeof(got)));
		goto out;
	}
	if (!ok) {
		failed(s, at, v, op_names[op], want, op == OP_NEAR ? tol : NULL);
		goto out;
	}
	char got[256];
	sh_printf(s, "ok: %s is %s (%s %s%s%s)\n", at, show_value(v, got, sizeof(got)), op_names[op], want,
		  op == OP_NEAR ? " within " : "", op == OP_NEAR ? tol : "");
	rc = 0;
out:
	jv_free(&doc);
	return rc;
}
