/*
 * out.c - messages, aligned tables, JSON and safe printing of names.
 */
#include "shell.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* "FILE:LINE: " in scripts, nothing at the keyboard, "ogsh: " before any
 * command runs (the model named on the command line, a missing -f file) */
static void where(struct session *s)
{
	fflush(s->out);
	if (!s->src)
		fputs("ogsh: ", stderr);
	else if (s->src->name)
		fprintf(stderr, "%s:%d: ", s->src->name, s->src->line);
}

int sh_usage(struct session *s, const char *cmd)
{
	const struct sh_cmd *c = sh_find_command(cmd);
	if (!c)
		return sh_error(s, "no command is named '%s'", sh_esc(cmd));
	return sh_error(s, "usage: %s %s", c->name, c->usage);
}

const char *sh_strerror(int err)
{
	switch (err) {
	case ENOENT: return "no such file";
	case EACCES: case EPERM: return "permission denied";
	case EISDIR: return "it is a folder";
	case ENOTDIR: return "a part of the path is not a folder";
	case ENOSPC: return "no space left on the device";
	case EROFS: return "the file system is read-only";
	case ENAMETOOLONG: return "the name is too long";
	case ELOOP: return "too many symbolic links";
	}
	static char buf[128];
	snprintf(buf, sizeof(buf), "%s", strerror(err));
	if (buf[0] >= 'A' && buf[0] <= 'Z' && !(buf[1] >= 'A' && buf[1] <= 'Z'))
		buf[0] = (char)(buf[0] - 'A' + 'a');
	return buf;
}

const char *sh_nouns(uint64_t n, const char *one, const char *many, char *buf, size_t size)
{
	char c[32];
	snprintf(buf, size, "%s %s", sh_count(n, c, sizeof(c)), n == 1 ? one : many);
	return buf;
}

int sh_error(struct session *s, const char *fmt, ...)
{
	if (s->mute)
		return -1;
	where(s);
	fprintf(stderr, "%serror:%s ", sh_c(s, SH_RED), sh_c(s, SH_RESET));
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -1;
}

void sh_fail(struct session *s, const char *fmt, ...)
{
	where(s);
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void sh_warn(struct session *s, const char *fmt, ...)
{
	if (s->mute)
		return;
	where(s);
	fprintf(stderr, "%swarning:%s ", sh_c(s, SH_YELLOW), sh_c(s, SH_RESET));
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int sh_diag(struct session *s, struct ir_diag *d)
{
	for (size_t i = 0; i < d->n_warnings; i++)
		sh_warn(s, "%s", sh_esc(d->warnings[i]));
	if (d->dropped)
		sh_warn(s, "%zu more warnings not shown", d->dropped);
	int rc = d->error ? sh_error(s, "%s", sh_esc(d->error)) : 0;
	ir_diag_clear(d);
	return rc;
}

void sh_printf(struct session *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(s->out, fmt, ap);
	va_end(ap);
}

const char *sh_c(struct session *s, const char *code)
{
	static char buf[4][16];
	static int k;
	if (!s || !s->color)
		return "";
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "\033[%sm", code);
	return buf[k];
}

/* Escapes control bytes (C0, DEL, and UTF-8-encoded C1) so names from a
 * file cannot drive the terminal. Keeps 8 results alive. */
const char *sh_esc(const char *name)
{
	static char bufs[8][1024];
	static int k;
	if (!name)
		return "";
	const unsigned char *p = (const unsigned char *)name;
	bool clean = true;
	for (const unsigned char *q = p; *q && clean; q++)
		clean = !(*q < 32 || *q == 127 || (*q == 0xc2 && q[1] >= 0x80 && q[1] <= 0x9f));
	if (clean)
		return name;
	k = (k + 1) % 8;
	char *o = bufs[k];
	size_t n = 0, cap = sizeof(bufs[k]);
	for (; *p && n + 8 < cap; p++) {
		if (*p < 32 || *p == 127) {
			n += (size_t)snprintf(o + n, cap - n, "\\x%02x", *p);
		} else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
			n += (size_t)snprintf(o + n, cap - n, "\\u%04x", p[1]);
			p++;
		} else {
			o[n++] = (char)*p;
		}
	}
	if (*p && n + 4 < cap) {
		memcpy(o + n, "...", 3);
		n += 3;
	}
	o[n] = 0;
	return o;
}

static bool progress_shown;

void sh_progress(void *arg, uint64_t done, uint64_t total)
{
	char a[32], b[32];
	fflush(stdout);
	fprintf(stderr, "\r%s %3d%% (%s of %s)\033[K", (const char *)arg,
		total ? (int)(100.0 * (double)done / (double)total) : 0, sh_bytes(done, a, sizeof(a)),
		sh_bytes(total, b, sizeof(b)));
	progress_shown = true;
}

void sh_progress_done(void)
{
	if (progress_shown)
		fputs("\r\033[K", stderr);
	progress_shown = false;
}

const char *sh_bytes(uint64_t n, char *buf, size_t size)
{
	static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	int u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, size, "%" PRIu64 " B", n);
	else
		snprintf(buf, size, "%.1f %s", v, units[u]);
	return buf;
}

const char *sh_count(uint64_t n, char *buf, size_t size)
{
	char tmp[32];
	int len = snprintf(tmp, sizeof(tmp), "%" PRIu64, n);
	size_t o = 0;
	for (int i = 0; i < len && o + 2 < size; i++) {
		if (i && (len - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = tmp[i];
	}
	buf[o] = 0;
	return buf;
}

/* ---- tables ---- */

void sh_table_init(struct sh_table *t, int ncols, ...)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols < 16 ? ncols : 16;
	va_list ap;
	va_start(ap, ncols);
	for (int i = 0; i < t->ncols; i++) {
		const char *h = va_arg(ap, const char *);
		t->right[i] = h[0] == '>';
		t->head[i] = t->right[i] ? h + 1 : h;
	}
	va_end(ap);
}

void sh_table_row(struct sh_table *t, ...)
{
	if (t->rows == t->cap) {
		int cap = t->cap ? t->cap * 2 : 16;
		char **c = realloc(t->cells, (size_t)cap * (size_t)t->ncols * sizeof(char *));
		if (!c)
			return;
		t->cells = c;
		t->cap = cap;
	}
	va_list ap;
	va_start(ap, t);
	for (int i = 0; i < t->ncols; i++) {
		const char *v = va_arg(ap, const char *);
		t->cells[t->rows * t->ncols + i] = strdup(v ? v : "");
	}
	va_end(ap);
	t->rows++;
}

/* display width: UTF-8 continuation bytes take no column */
static int width(const char *s)
{
	int w = 0;
	for (; s && *s; s++)
		w += ((unsigned char)*s & 0xc0) != 0x80;
	return w;
}

void sh_table_print(struct session *s, const struct sh_table *t, bool header)
{
	int w[16] = { 0 };
	for (int c = 0; c < t->ncols; c++) {
		if (header)
			w[c] = width(t->head[c]);
		for (int r = 0; r < t->rows; r++) {
			int x = width(t->cells[r * t->ncols + c]);
			if (x > w[c])
				w[c] = x;
		}
		if (w[c] > 60 && c != t->ncols - 1)
			w[c] = 60;   /* long names push the rest out; cap them */
	}
	/* each line is built in a buffer so that trailing blanks can be cut */
	size_t cap = 256;
	char *line = malloc(cap);
	if (!line)
		return;
	for (int r = header ? -1 : 0; r < t->rows; r++) {
		size_t len = 0;
		for (int c = 0; c < t->ncols; c++) {
			const char *v = r < 0 ? t->head[c] : t->cells[r * t->ncols + c];
			v = v ? v : "";
			int pad = w[c] - width(v);
			size_t need = len + strlen(v) + (size_t)(pad > 0 ? pad : 0) + 4;
			if (need > cap) {
				while (cap < need)
					cap *= 2;
				char *nl = realloc(line, cap);
				if (!nl)
					break;
				line = nl;
			}
			bool last = c == t->ncols - 1;
			if (t->right[c])
				len += (size_t)snprintf(line + len, cap - len, "%*s%s", pad > 0 ? pad : 0, "", v);
			else
				len += (size_t)snprintf(line + len, cap - len, "%s%*s", v, last || pad < 0 ? 0 : pad, "");
			if (!last)
				len += (size_t)snprintf(line + len, cap - len, "  ");
		}
		while (len && line[len - 1] == ' ')
			line[--len] = 0;
		if (r < 0)
			fprintf(s->out, "%s%s%s\n", sh_c(s, SH_BOLD), line, sh_c(s, SH_RESET));
		else
			fprintf(s->out, "%s\n", line);
	}
	free(line);
}

void sh_table_free(struct sh_table *t)
{
	for (int i = 0; i < t->rows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	memset(t, 0, sizeof(*t));
}

/* ---- JSON ---- */

static void indent(struct sh_json *j)
{
	fputc('\n', j->f);
	for (int i = 0; i < j->depth; i++)
		fputs("  ", j->f);
}

static void before_value(struct sh_json *j)
{
	if (j->key_pending) {
		j->key_pending = false;
		return;
	}
	if (j->depth > 0) {
		if (!j->first[j->depth])
			fputc(',', j->f);
		j->first[j->depth] = false;
		indent(j);
	}
}

void sh_json_begin(struct sh_json *j, FILE *f)
{
	memset(j, 0, sizeof(*j));
	j->f = f;
}

void sh_json_end(struct sh_json *j)
{
	fputc('\n', j->f);
}

static void open_(struct sh_json *j, char c)
{
	before_value(j);
	fputc(c, j->f);
	if (j->depth < 63)
		j->depth++;
	j->first[j->depth] = true;
}

static void close_(struct sh_json *j, char c)
{
	bool empty = j->first[j->depth];
	if (j->depth > 0)
		j->depth--;
	if (!empty)
		indent(j);
	fputc(c, j->f);
}

void sh_json_obj(struct sh_json *j) { open_(j, '{'); }
void sh_json_obj_end(struct sh_json *j) { close_(j, '}'); }
void sh_json_arr(struct sh_json *j) { open_(j, '['); }
void sh_json_arr_end(struct sh_json *j) { close_(j, ']'); }

/* Length of a valid UTF-8 sequence at p (1..4), or 0. */
static int utf8_len(const unsigned char *p, size_t left)
{
	unsigned c = p[0];
	int n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
	if (!n || (size_t)n > left || (n == 2 && c < 0xc2) || (n == 4 && c > 0xf4))
		return 0;
	for (int i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if (n == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0)))
		return 0;
	if (n == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90)))
		return 0;
	return n;
}

static void write_string(FILE *f, const char *v, size_t n)
{
	const unsigned char *p = (const unsigned char *)v;
	fputc('"', f);
	for (size_t i = 0; i < n;) {
		unsigned c = p[i];
		if (c == '"' || c == '\\') {
			fputc('\\', f);
			fputc((int)c, f);
			i++;
		} else if (c == '\n') {
			fputs("\\n", f);
			i++;
		} else if (c == '\t') {
			fputs("\\t", f);
			i++;
		} else if (c < 32 || c == 127) {
			fprintf(f, "\\u%04x", c);
			i++;
		} else {
			int k = utf8_len(p + i, n - i);
			if (!k) {
				fputs("\\ufffd", f);
				i++;
			} else {
				fwrite(p + i, 1, (size_t)k, f);
				i += (size_t)k;
			}
		}
	}
	fputc('"', f);
}

void sh_json_key(struct sh_json *j, const char *k)
{
	before_value(j);
	write_string(j->f, k, strlen(k));
	fputs(": ", j->f);
	j->key_pending = true;
}

void sh_json_strn(struct sh_json *j, const char *v, size_t n)
{
	before_value(j);
	write_string(j->f, v, n);
}

void sh_json_str(struct sh_json *j, const char *v)
{
	if (!v) {
		sh_json_null(j);
		return;
	}
	sh_json_strn(j, v, strlen(v));
}

void sh_json_int(struct sh_json *j, int64_t v)
{
	before_value(j);
	fprintf(j->f, "%" PRId64, v);
}

void sh_json_uint(struct sh_json *j, uint64_t v)
{
	before_value(j);
	fprintf(j->f, "%" PRIu64, v);
}

void sh_json_num(struct sh_json *j, double v)
{
	if (isnan(v)) {
		sh_json_str(j, "nan");
		return;
	}
	if (isinf(v)) {
		sh_json_str(j, v > 0 ? "inf" : "-inf");
		return;
	}
	before_value(j);
	fprintf(j->f, "%.9g", v);
}

void sh_json_bool(struct sh_json *j, bool v)
{
	before_value(j);
	fputs(v ? "true" : "false", j->f);
}

void sh_json_null(struct sh_json *j)
{
	before_value(j);
	fputs("null", j->f);
}

void sh_json_kstr(struct sh_json *j, const char *k, const char *v) { sh_json_key(j, k); sh_json_str(j, v); }
void sh_json_kint(struct sh_json *j, const char *k, int64_t v) { sh_json_key(j, k); sh_json_int(j, v); }
void sh_json_kuint(struct sh_json *j, const char *k, uint64_t v) { sh_json_key(j, k); sh_json_uint(j, v); }
void sh_json_knum(struct sh_json *j, const char *k, double v) { sh_json_key(j, k); sh_json_num(j, v); }
void sh_json_kbool(struct sh_json *j, const char *k, bool v) { sh_json_key(j, k); sh_json_bool(j, v); }

void sh_json_type(struct sh_json *j, const struct ir_type *t)
{
	sh_json_obj(j);
	static const char *kinds[] = { "none", "tensor", "sparse_tensor", "sequence", "map", "optional" };
	sh_json_kstr(j, "kind", kinds[t->kind]);
	if (t->kind == IR_TYPE_TENSOR || t->kind == IR_TYPE_SPARSE_TENSOR) {
		sh_json_kstr(j, "dtype", t->elem ? ir_dtype_name(t->elem) : NULL);
		sh_json_key(j, "shape");
		if (t->rank < 0) {
			sh_json_null(j);
		} else {
			sh_json_arr(j);
			for (int i = 0; i < t->rank; i++) {
				if (t->dims[i].kind == IR_DIM_VALUE)
					sh_json_int(j, t->dims[i].value);
				else if (t->dims[i].kind == IR_DIM_PARAM)
					sh_json_str(j, t->dims[i].param);
				else
					sh_json_null(j);
			}
			sh_json_arr_end(j);
		}
	} else if (t->inner) {
		if (t->kind == IR_TYPE_MAP)
			sh_json_kstr(j, "key", ir_dtype_name(t->key));
		sh_json_key(j, "elem");
		sh_json_type(j, t->inner);
	}
	sh_json_obj_end(j);
}

/* "4.09 G", "118 M", "512", "?" (1000-based, 3 significant digits) */
const char *sh_si(double v, char *buf, size_t size)
{
	static const char *units[] = { "", " K", " M", " G", " T", " P", " E" };
	if (!isfinite(v)) {
		snprintf(buf, size, "?");
		return buf;
	}
	int u = 0;
	double a = fabs(v);
	while (a >= 999.5 && u < 6) {
		a /= 1000;
		v /= 1000;
		u++;
	}
	if (u == 0 && v == floor(v))
		snprintf(buf, size, "%.0f", v);
	else if (a < 9.995)
		snprintf(buf, size, "%.2f%s", v, units[u]);
	else if (a < 99.95)
		snprintf(buf, size, "%.1f%s", v, units[u]);
	else
		snprintf(buf, size, "%.0f%s", v, units[u]);
	return buf;
}

int sh_int_opt(struct session *s, const char *cmd, const char *name, const char *v, int min, int *out)
{
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (!*v || *end || errno || x < min || x > 1000000000)
		return sh_error(s, "%s: --%s must be a whole number >= %d, not '%s'", cmd, name, min, sh_esc(v));
	*out = (int)x;
	return 0;
}
