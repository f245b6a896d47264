/*
 * k_string.c - CPU kernels: string ops and text features (StringConcat,
 * StringSplit, StringNormalizer, RegexFullMatch, TfIdfVectorizer).
 *
 * Strings are byte strings (UTF-8 by convention): concatenation, splitting
 * and matching work on bytes; case changes decode UTF-8 (see case_map).
 */
#include "cpu.h"

#include <inttypes.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>

static bool bytes_eq(const char *a, size_t na, const char *b, size_t nb)
{
	return na == nb && (na == 0 || memcmp(a, b, na) == 0);
}

static int need_string(struct cpu_kctx *k, const struct ir_tensor *t, const char *what)
{
	if (t->dtype != IR_STRING)
		return kerr(k, "%s must be a string tensor, not %s", what, ir_dtype_name(t->dtype));
	return 0;
}

/* ------------------------------------------------------------------------ */
/* StringConcat                                                              */
/* ------------------------------------------------------------------------ */

/* Y = X + Y elementwise, with numpy broadcasting. */
static int k_string_concat(struct cpu_kctx *k)
{
	const struct ir_tensor *a = kin_req(k, 0), *b = kin_req(k, 1);
	if (!a || !b)
		return IR_ERR;
	if (need_string(k, a, "X") || need_string(k, b, "Y"))
		return IR_ERR;
	const struct ir_tensor *ts[2] = { a, b };
	int rank;
	int64_t dims[IR_MAX_RANK];
	if (kbcast_shape(k, 2, ts, &rank, dims))
		return IR_ERR;
	struct ir_tensor *o = kout(k, 0, IR_STRING, rank, dims);
	if (!o)
		return IR_ERR;
	if (!o->numel)
		return 0;
	int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK];
	kbcast_strides(a, rank, dims, sa);
	kbcast_strides(b, rank, dims, sb);
	struct kiter it;
	kiter_init(&it, rank, dims);
	kiter_add(&it, sa);
	kiter_add(&it, sb);
	for (uint64_t i = 0; i < o->numel; i++, kiter_next(&it)) {
		const struct ir_bytes *x = &a->strings[it.off[0]], *y = &b->strings[it.off[1]];
		if (x->len > SIZE_MAX / 2 || y->len > SIZE_MAX / 2)
			return kenomem(k);
		char *p = malloc(x->len + y->len + 1);
		if (!p)
			return kenomem(k);
		if (x->len)
			memcpy(p, x->data, x->len);
		if (y->len)
			memcpy(p + x->len, y->data, y->len);
		p[x->len + y->len] = 0;
		free(o->strings[i].data);
		o->strings[i].data = p;
		o->strings[i].len = x->len + y->len;
		if ((i & 0xffff) == 0xffff) {
			int rc = kstop(k);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* StringSplit                                                               */
/* ------------------------------------------------------------------------ */

/* A piece of a string: [off, off+len). */
struct piece {
	size_t off, len;
};

/* Python's ASCII whitespace (str.split() with no separator). Other Unicode
 * spaces are not separators here. */
static bool is_ws(unsigned char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

/*
 * Splits s like Python's str.split(sep, maxsplit) (sep NULL: runs of
 * whitespace, no empty pieces; maxsplit < 0: no limit). Writes up to `cap`
 * pieces into out (when out is not NULL) and returns how many there are.
 */
static size_t split_str(const char *s, size_t n, const char *sep, size_t nsep, int64_t maxsplit,
			struct piece *out, size_t cap)
{
	size_t cnt = 0;
	int64_t splits = 0;
#define PUT(o, l) do { if (out && cnt < cap) { out[cnt].off = (o); out[cnt].len = (l); } cnt++; } while (0)
	if (sep) {
		size_t start = 0, i = 0;
		while (i + nsep <= n && (maxsplit < 0 || splits < maxsplit)) {
			if (memcmp(s + i, sep, nsep) == 0) {
				PUT(start, i - start);
				splits++;
				i += nsep;
				start = i;
			} else {
				i++;
			}
		}
		PUT(start, n - start);
		return cnt;
	}
	size_t i = 0;
	for (;;) {
		while (i < n && is_ws((unsigned char)s[i]))
			i++;
		if (i >= n)
			break;
		if (maxsplit >= 0 && splits >= maxsplit) {
			/* the rest, trailing whitespace kept (Python does the same) */
			PUT(i, n - i);
			break;
		}
		size_t start = i;
		while (i < n && !is_ws((unsigned char)s[i]))
			i++;
		PUT(start, i - start);
		splits++;
	}
#undef PUT
	return cnt;
}

static int k_string_split(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x || need_string(k, x, "X"))
		return IR_ERR;
	if (x->rank >= IR_MAX_RANK)
		return kerr(k, "input of rank %d leaves no room for the added axis", x->rank);
	const struct ir_attr *da = kattr(k, "delimiter");
	const char *sep = NULL;
	size_t nsep = 0;
	if (da && da->type == IR_ATTR_STRING && da->s.len) {
		sep = da->s.data;
		nsep = da->s.len;
	}
	int64_t maxsplit = kattr_has(k, "maxsplit") ? kattr_i(k, "maxsplit", -1) : -1;

	/* first pass: the counts and the widest row */
	struct ir_tensor *len = kout(k, 1, IR_INT64, x->rank, x->dims);
	if (!len)
		return IR_ERR;
	int64_t *lv = kwdata(len);
	size_t widest = 0;
	for (uint64_t i = 0; i < x->numel; i++) {
		size_t c = split_str(x->strings[i].data, x->strings[i].len, sep, nsep, maxsplit, NULL, 0);
		lv[i] = (int64_t)c;
		if (c > widest)
			widest = c;
	}
	int64_t dims[IR_MAX_RANK];
	for (int j = 0; j < x->rank; j++)
		dims[j] = x->dims[j];
	dims[x->rank] = (int64_t)widest;
	uint64_t total;
	if (!kmul_ok(x->numel, widest, &total) || total > ((uint64_t)1 << 40))
		return kerr(k, "the split output of %s by %zu pieces is too large", kshape(x), widest);
	struct ir_tensor *o = kout(k, 0, IR_STRING, x->rank + 1, dims);
	if (!o)
		return IR_ERR;
	if (!total)
		return 0;
	struct piece *pc = kalloc_arr(k, widest, sizeof(*pc));
	if (!pc)
		return IR_ENOMEM;
	int rc = 0;
	for (uint64_t i = 0; i < x->numel && !rc; i++) {
		const struct ir_bytes *s = &x->strings[i];
		size_t c = split_str(s->data, s->len, sep, nsep, maxsplit, pc, widest);
		/* the rest of the row stays "" (kout's strings start empty) */
		for (size_t j = 0; j < c; j++)
			if (!kstr_set(&o->strings[i * widest + j], s->data + pc[j].off, pc[j].len)) {
				rc = kenomem(k);
				break;
			}
		if (!rc && (i & 0xfff) == 0xfff)
			rc = kstop(k);
	}
	free(pc);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* StringNormalizer                                                          */
/* ------------------------------------------------------------------------ */

/*
 * Case mapping of one code point, without the C library's locale (which is
 * process-global): ASCII, Latin-1, Latin Extended-A, basic Greek and
 * Cyrillic. Other scripts, and the mappings that change length (German
 * sharp s to "SS"), keep their code points. The `locale` attribute is
 * accepted and ignored.
 */
static uint32_t case_map(uint32_t c, bool upper)
{
	if (c < 0x80) {
		if (upper && c >= 'a' && c <= 'z')
			return c - 32;
		if (!upper && c >= 'A' && c <= 'Z')
			return c + 32;
		return c;
	}
	if (upper) {
		if ((c >= 0xe0 && c <= 0xfe && c != 0xf7))
			return c - 32;
		if (c == 0xff)
			return 0x178;
		if (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2)
			return c - 32;
		if (c >= 0x430 && c <= 0x44f)
			return c - 32;
		if (c >= 0x450 && c <= 0x45f)
			return c - 80;
	} else {
		if (c >= 0xc0 && c <= 0xde && c != 0xd7)
			return c + 32;
		if (c == 0x178)
			return 0xff;
		if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2)
			return c + 32;
		if (c >= 0x410 && c <= 0x42f)
			return c + 32;
		if (c >= 0x400 && c <= 0x40f)
			return c + 80;
	}
	/* Latin Extended-A: pairs of upper and lower case letters, the upper
	 * one even in U+0100..U+0137 and U+014A..U+0177, odd in U+0139..U+0148
	 * and U+0179..U+017E */
	bool even_upper = (c >= 0x100 && c <= 0x137 && c != 0x130 && c != 0x131) || (c >= 0x14a && c <= 0x177);
	bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
	if (even_upper || odd_upper) {
		bool is_upper = ((c & 1) == 0) == even_upper;
		if (upper && !is_upper)
			return c - 1;
		if (!upper && is_upper)
			return c + 1;
	}
	return c;
}

/* Decodes one UTF-8 sequence at s[i] (n bytes in all): its code point and
 * length, or length 0 for an invalid byte (kept as it is). */
static size_t utf8_dec(const unsigned char *s, size_t n, size_t i, uint32_t *cp)
{
	unsigned char c = s[i];
	size_t len;
	uint32_t v;
	if (c < 0x80) {
		*cp = c;
		return 1;
	} else if ((c & 0xe0) == 0xc0) {
		len = 2;
		v = c & 0x1f;
	} else if ((c & 0xf0) == 0xe0) {
		len = 3;
		v = c & 0x0f;
	} else if ((c & 0xf8) == 0xf0) {
		len = 4;
		v = c & 0x07;
	} else {
		return 0;
	}
	if (i + len > n)
		return 0;
	for (size_t j = 1; j < len; j++) {
		if ((s[i + j] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (s[i + j] & 0x3f);
	}
	if ((len == 2 && v < 0x80) || (len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10ffff)))
		return 0;
	*cp = v;
	return len;
}

static size_t utf8_enc(uint32_t v, char *out)
{
	if (v < 0x80) {
		out[0] = (char)v;
		return 1;
	}
	if (v < 0x800) {
		out[0] = (char)(0xc0 | (v >> 6));
		out[1] = (char)(0x80 | (v & 0x3f));
		return 2;
	}
	if (v < 0x10000) {
		out[0] = (char)(0xe0 | (v >> 12));
		out[1] = (char)(0x80 | ((v >> 6) & 0x3f));
		out[2] = (char)(0x80 | (v & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (v >> 18));
	out[1] = (char)(0x80 | ((v >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((v >> 6) & 0x3f));
	out[3] = (char)(0x80 | (v & 0x3f));
	return 4;
}

/* s with its case changed into a new NUL-terminated string (*outlen bytes).
 * The mapped code points are all below U+0800 and map to the same UTF-8
 * length, so the result is never longer than s. NULL on no memory. */
static char *case_change(const char *s, size_t n, bool upper, size_t *outlen)
{
	char *o = malloc(n + 1);
	if (!o)
		return NULL;
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, w = 0;
	while (i < n) {
		uint32_t cp;
		size_t l = utf8_dec(u, n, i, &cp);
		if (!l) {
			o[w++] = s[i++];
			continue;
		}
		char buf[4];
		size_t m = utf8_enc(case_map(cp, upper), buf);
		if (m != l) {   /* cannot happen for our table; keep the bytes */
			memcpy(o + w, s + i, l);
			w += l;
		} else {
			memcpy(o + w, buf, m);
			w += m;
		}
		i += l;
	}
	o[w] = 0;
	*outlen = w;
	return o;
}

/*
 * Removes the elements of X equal to a stopword (compared after lowercasing
 * both when is_case_sensitive is 0), then changes the case of the rest.
 * X is [C] or [1, C]; when nothing is left the output is [""] ([1] or [1, 1]).
 */
static int k_string_normalizer(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x || need_string(k, x, "X"))
		return IR_ERR;
	if (!(x->rank == 1 || (x->rank == 2 && x->dims[0] == 1)))
		return kerr(k, "input must be [C] or [1, C], not %s", kshape(x));
	const char *act = kattr_s(k, "case_change_action", "NONE");
	int mode;   /* 0 none, 1 lower, 2 upper */
	if (!strcmp(act, "NONE"))
		mode = 0;
	else if (!strcmp(act, "LOWER"))
		mode = 1;
	else if (!strcmp(act, "UPPER"))
		mode = 2;
	else
		return kerr(k, "case_change_action '%s' is not one of NONE, LOWER, UPPER", act);
	bool sensitive = kattr_i(k, "is_case_sensitive", 0) != 0;
	const struct ir_attr *sw = kattr(k, "stopwords");
	size_t nstop = sw && sw->type == IR_ATTR_STRINGS ? sw->n : 0;

	/* the stopwords, lowercased for a case-insensitive comparison */
	struct ir_bytes *stops = NULL;
	bool *keep = NULL;
	int rc = 0;
	if (nstop && !(stops = kalloc_arr(k, nstop, sizeof(*stops))))
		return IR_ENOMEM;
	for (size_t j = 0; j < nstop; j++) {
		if (sensitive) {
			stops[j] = sw->strings[j];
			continue;
		}
		if (!(stops[j].data = case_change(sw->strings[j].data, sw->strings[j].len, false, &stops[j].len))) {
			rc = kenomem(k);
			goto out;
		}
	}
	uint64_t n = x->numel, kept = 0;
	if (!(keep = kalloc_arr(k, n, sizeof(*keep)))) {
		rc = IR_ENOMEM;
		goto out;
	}
	for (uint64_t i = 0; i < n; i++) {
		const struct ir_bytes *s = &x->strings[i];
		char *low = NULL;
		const char *cmp = s->data;
		size_t ncmp = s->len;
		if (!sensitive && nstop) {
			if (!(low = case_change(s->data, s->len, false, &ncmp))) {
				rc = kenomem(k);
				goto out;
			}
			cmp = low;
		}
		keep[i] = true;
		for (size_t j = 0; j < nstop; j++)
			if (bytes_eq(cmp, ncmp, stops[j].data, stops[j].len)) {
				keep[i] = false;
				break;
			}
		free(low);
		kept += keep[i];
	}
	int64_t dims[2] = { 1, 1 };
	int64_t c = kept ? (int64_t)kept : 1;
	if (x->rank == 1)
		dims[0] = c;
	else
		dims[1] = c;
	struct ir_tensor *o = kout(k, 0, IR_STRING, x->rank, dims);
	if (!o) {
		rc = IR_ERR;
		goto out;
	}
	uint64_t w = 0;
	for (uint64_t i = 0; i < n; i++) {
		if (!keep[i])
			continue;
		const struct ir_bytes *s = &x->strings[i];
		if (mode == 0) {
			if (!kstr_set(&o->strings[w], s->data, s->len)) {
				rc = kenomem(k);
				goto out;
			}
		} else {
			size_t l;
			char *p = case_change(s->data, s->len, mode == 2, &l);
			if (!p) {
				rc = kenomem(k);
				goto out;
			}
			free(o->strings[w].data);
			o->strings[w].data = p;
			o->strings[w].len = l;
		}
		w++;
	}
out:
	if (stops && !sensitive)
		for (size_t j = 0; j < nstop; j++)
			free(stops[j].data);
	free(stops);
	free(keep);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* RegexFullMatch                                                            */
/* ------------------------------------------------------------------------ */

/*
 * The pattern is RE2 syntax; we run it with POSIX regcomp (REG_EXTENDED)
 * after a translation:
 *   - \d \D \w \W \s \S become bracket expressions ([0-9], [^[:alnum:]_]...);
 *     inside a class, \d \w \s become [:digit:], [:alnum:]_, [:space:]
 *   - \b \B stay (a GNU extension that glibc's regcomp has)
 *   - \A \z become ^ $; \n \t \r \f \v \xHH (ASCII) become the character
 *   - escaped punctuation becomes the literal character
 *   - (?:...) and named groups (?P<n>...) (?<n>...) become plain groups;
 *     a leading (?i) becomes REG_ICASE, (?s) makes . match a newline
 *   - lazy quantifiers (*? +? ?? {n,m}?) become greedy ones: whether a
 *     full match exists does not depend on laziness
 *   - `.` does not match a newline (RE2's default); a `{` that does not
 *     start a repetition is a literal, as in RE2
 * Refused: backreferences, \p{...} classes, negated classes in classes
 * (\D \W \S inside [...]), other flags, \Q..\E, \C. Matching is by bytes in
 * the C library's current locale: \w does not match non-ASCII letters.
 * The whole string must match: the pattern becomes ^(...)$.
 */
struct rx_buf {
	char *p;
	size_t n, cap;
	bool oom;
};

static void rx_put(struct rx_buf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap < b->n + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

static void rx_puts(struct rx_buf *b, const char *s)
{
	rx_put(b, s, strlen(s));
}

static void rx_putc(struct rx_buf *b, char c)
{
	rx_put(b, &c, 1);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A single-character escape (\n, \t, \xHH, \. ...) at p[i] (p[i] is the
 * character after the backslash): its byte and the escape's length after
 * the backslash, or -1 when it is not one. */
static int rx_char_escape(const char *p, size_t n, size_t i, size_t *used)
{
	char c = p[i];
	*used = 1;
	switch (c) {
	case 'n': return '\n';
	case 't': return '\t';
	case 'r': return '\r';
	case 'f': return '\f';
	case 'v': return '\v';
	case 'a': return '\a';
	case 'x': {
		if (i + 2 < n && hexval(p[i + 1]) >= 0 && hexval(p[i + 2]) >= 0) {
			int v = hexval(p[i + 1]) * 16 + hexval(p[i + 2]);
			if (v == 0 || v >= 0x80)
				return -1;
			*used = 3;
			return v;
		}
		return -1;
	}
	default:
		break;
	}
	/* punctuation (and space) escapes are the character itself */
	if ((unsigned char)c < 0x80 && c >= ' ' && !(c >= '0' && c <= '9') && !(c >= 'a' && c <= 'z') &&
	    !(c >= 'A' && c <= 'Z') && c != 0x7f)
		return (unsigned char)c;
	return -1;
}

/* Translates a [...] class starting at p[*i] == '['; moves *i past it. */
static int rx_class(const char *p, size_t n, size_t *i, struct rx_buf *b, char *err, size_t errsz)
{
	size_t j = *i + 1;
	bool neg = false, lit_dash = false, lit_rb = false, lit_caret = false, lit_lb = false;
	struct rx_buf body = { 0 };
	if (j < n && p[j] == '^') {
		neg = true;
		j++;
	}
	bool first = true;
	for (;;) {
		if (j >= n) {
			snprintf(err, errsz, "missing ] in a character class");
			goto fail;
		}
		char c = p[j];
		if (c == ']' && !first)
			break;
		first = false;
		/* one item: a POSIX class, a class escape, or a character (maybe a range start) */
		if (c == '[' && j + 1 < n && p[j + 1] == ':') {
			const char *end = NULL;
			for (size_t q = j + 2; q + 1 < n; q++)
				if (p[q] == ':' && p[q + 1] == ']') {
					end = p + q;
					break;
				}
			if (!end || p[j + 2] == '^') {
				snprintf(err, errsz, "unsupported character class");
				goto fail;
			}
			rx_put(&body, p + j, (size_t)(end - (p + j)) + 2);
			j = (size_t)(end - p) + 2;
			continue;
		}
		int lo;
		if (c == '\\') {
			if (j + 1 >= n) {
				snprintf(err, errsz, "trailing backslash");
				goto fail;
			}
			char e = p[j + 1];
			if (e == 'd' || e == 'w' || e == 's') {
				rx_puts(&body, e == 'd' ? "[:digit:]" : e == 'w' ? "[:alnum:]_" : "[:space:]");
				j += 2;
				continue;
			}
			size_t used;
			lo = rx_char_escape(p, n, j + 1, &used);
			if (lo < 0) {
				snprintf(err, errsz, "unsupported escape \\%c in a character class", e);
				goto fail;
			}
			j += 1 + used;
		} else {
			lo = (unsigned char)c;
			j++;
		}
		/* a range lo-hi */
		if (j + 1 < n && p[j] == '-' && p[j + 1] != ']') {
			int hi;
			j++;
			if (p[j] == '\\') {
				size_t used;
				if (j + 1 >= n || (hi = rx_char_escape(p, n, j + 1, &used)) < 0) {
					snprintf(err, errsz, "unsupported range in a character class");
					goto fail;
				}
				j += 1 + used;
			} else {
				hi = (unsigned char)p[j++];
			}
			if (hi < lo) {
				snprintf(err, errsz, "invalid range in a character class");
				goto fail;
			}
			/* POSIX brackets cannot take these as range ends */
			if (lo == ']' || lo == '-' || lo == '^' || lo == '[' || hi == ']' || hi == '-' || hi == '[') {
				snprintf(err, errsz, "unsupported range in a character class");
				goto fail;
			}
			rx_putc(&body, (char)lo);
			rx_putc(&body, '-');
			rx_putc(&body, (char)hi);
			continue;
		}
		if (lo == '-')
			lit_dash = true;
		else if (lo == ']')
			lit_rb = true;
		else if (lo == '^')
			lit_caret = true;
		else if (lo == '[')
			lit_lb = true;   /* kept apart: "[" then ":" would start a POSIX class */
		else
			rx_putc(&body, (char)lo);
	}
	*i = j + 1;
	/* POSIX rules: ] only first, ^ not first (unless negating), - last */
	rx_putc(b, '[');
	if (neg)
		rx_putc(b, '^');
	if (lit_rb)
		rx_putc(b, ']');
	if (body.n)
		rx_put(b, body.p, body.n);
	if (lit_caret) {
		if (!neg && !lit_rb && !body.n) {
			if (lit_lb) {
				rx_putc(b, '[');
				lit_lb = false;
			} else if (lit_dash) {
				rx_putc(b, '-');
				lit_dash = false;
			} else {
				/* the class is just ^ */
				b->n--;
				rx_puts(b, "\\^");
				free(body.p);
				return 0;
			}
		}
		rx_putc(b, '^');
	}
	if (lit_lb)
		rx_putc(b, '[');
	if (lit_dash)
		rx_putc(b, '-');
	rx_putc(b, ']');
	free(body.p);
	return 0;
fail:
	free(body.p);
	return -1;
}

/* Whether p[i] starts a {n}, {n,} or {n,m} repetition. */
static bool rx_is_repeat(const char *p, size_t n, size_t i)
{
	size_t j = i + 1;
	size_t d = 0;
	while (j < n && p[j] >= '0' && p[j] <= '9')
		j++, d++;
	if (!d || j >= n)
		return false;
	if (p[j] == '}')
		return true;
	if (p[j] != ',')
		return false;
	j++;
	while (j < n && p[j] >= '0' && p[j] <= '9')
		j++;
	return j < n && p[j] == '}';
}

/* Translates the RE2 pattern p (n bytes) into b as ^(...)$; *cflags gets
 * extra regcomp flags. -1 with a reason in err when it cannot. */
static int rx_translate(const char *p, size_t n, struct rx_buf *b, int *cflags, char *err, size_t errsz)
{
	size_t i = 0;
	bool dotall = false;
	*cflags = 0;
	/* leading flag groups: (?i) (?s) (?is) */
	while (i + 2 < n && p[i] == '(' && p[i + 1] == '?' && (p[i + 2] == 'i' || p[i + 2] == 's')) {
		size_t j = i + 2;
		while (j < n && (p[j] == 'i' || p[j] == 's'))
			j++;
		if (j >= n || p[j] != ')')
			break;
		for (size_t q = i + 2; q < j; q++) {
			if (p[q] == 'i')
				*cflags |= REG_ICASE;
			else
				dotall = true;
		}
		i = j + 1;
	}
	rx_puts(b, "^(");
	bool after_quant = false;
	while (i < n) {
		char c = p[i];
		bool quant = false;
		if (c == '\\') {
			if (i + 1 >= n) {
				snprintf(err, errsz, "trailing backslash");
				return -1;
			}
			char e = p[i + 1];
			const char *rep = NULL;
			switch (e) {
			case 'd': rep = "[0-9]"; break;
			case 'D': rep = "[^0-9]"; break;
			case 'w': rep = "[[:alnum:]_]"; break;
			case 'W': rep = "[^[:alnum:]_]"; break;
			case 's': rep = "[[:space:]]"; break;
			case 'S': rep = "[^[:space:]]"; break;
			case 'b': rep = "\\b"; break;
			case 'B': rep = "\\B"; break;
			case 'A': rep = "^"; break;
			case 'z': rep = "$"; break;
			default: break;
			}
			if (rep) {
				rx_puts(b, rep);
				i += 2;
			} else {
				size_t used;
				int ch = rx_char_escape(p, n, i + 1, &used);
				if (ch < 0) {
					if (e >= '1' && e <= '9')
						snprintf(err, errsz, "backreferences are not supported (RE2 has none either)");
					else
						snprintf(err, errsz, "unsupported escape \\%c", e);
					return -1;
				}
				if (strchr(".[]()*+?{}|^$\\", ch)) {
					rx_putc(b, '\\');
					rx_putc(b, (char)ch);
				} else if (ch == '\n') {
					rx_puts(b, "[\n]");
				} else {
					rx_putc(b, (char)ch);
				}
				i += 1 + used;
			}
		} else if (c == '[') {
			if (rx_class(p, n, &i, b, err, errsz))
				return -1;
		} else if (c == '(') {
			if (i + 1 < n && p[i + 1] == '?') {
				if (i + 2 < n && p[i + 2] == ':') {
					i += 3;
				} else if (i + 3 < n && (p[i + 2] == 'P' || p[i + 2] == '<') &&
					   (p[i + 2] == '<' || p[i + 3] == '<')) {
					size_t j = i + (p[i + 2] == 'P' ? 4 : 3);
					while (j < n && p[j] != '>')
						j++;
					if (j >= n) {
						snprintf(err, errsz, "unterminated group name");
						return -1;
					}
					i = j + 1;
				} else {
					snprintf(err, errsz, "group flags and lookaround (?...) are not supported");
					return -1;
				}
			} else {
				i++;
			}
			rx_putc(b, '(');
		} else if (c == '.') {
			rx_puts(b, dotall ? "(.|\n)" : "[^\n]");
			i++;
		} else if (c == '*' || c == '+' || c == '?') {
			if (after_quant && c == '?') {
				i++;   /* lazy: same full-match result as greedy */
				after_quant = false;
				continue;
			}
			rx_putc(b, c);
			quant = true;
			i++;
		} else if (c == '{') {
			if (rx_is_repeat(p, n, i)) {
				while (p[i] != '}')
					rx_putc(b, p[i++]);
				rx_putc(b, '}');
				i++;
				quant = true;
			} else {
				rx_puts(b, "\\{");
				i++;
			}
		} else if (c == '}') {
			rx_puts(b, "\\}");
			i++;
		} else {
			rx_putc(b, c);
			i++;
		}
		after_quant = quant;
	}
	rx_puts(b, ")$");
	if (b->oom) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	return 0;
}

static int k_regex_full_match(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x || need_string(k, x, "X"))
		return IR_ERR;
	const struct ir_attr *pa = kattr(k, "pattern");
	if (!pa || pa->type != IR_ATTR_STRING)
		return kerr(k, "needs a pattern attribute");
	if (memchr(pa->s.data, 0, pa->s.len))
		return kerr(k, "pattern contains a NUL byte");
	struct ir_tensor *o = kout(k, 0, IR_BOOL, x->rank, x->dims);
	if (!o)
		return IR_ERR;
	struct rx_buf b = { 0 };
	char why[160];
	int cflags;
	if (rx_translate(pa->s.data, pa->s.len, &b, &cflags, why, sizeof(why))) {
		free(b.p);
		return kerr(k, "cannot use pattern '%s': %s", pa->s.data, why);
	}
	regex_t re;
	int e = regcomp(&re, b.p, REG_EXTENDED | REG_NOSUB | cflags);
	if (e) {
		char msg[160];
		regerror(e, &re, msg, sizeof(msg));
		free(b.p);
		return kerr(k, "cannot compile pattern '%s': %s", pa->s.data, msg);
	}
	free(b.p);
	uint8_t *y = kwdata(o);
	int rc = 0;
	for (uint64_t i = 0; i < x->numel; i++) {
		const struct ir_bytes *s = &x->strings[i];
		regmatch_t m[1];
		m[0].rm_so = 0;
		m[0].rm_eo = (regoff_t)s->len;
		/* REG_STARTEND: the string's length, not its first NUL */
		y[i] = regexec(&re, s->data ? s->data : "", 1, m, REG_STARTEND) == 0;
		if ((i & 0xfff) == 0xfff && (rc = kstop(k)))
			break;
	}
	regfree(&re);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* TfIdfVectorizer                                                           */
/* ------------------------------------------------------------------------ */

/*
 * The pool's distinct values get token numbers (their rank in sorted
 * order); input elements are turned into tokens (-1: not in the pool) and
 * n-grams become sequences of tokens, looked up in a sorted table per
 * n-gram length.
 */
struct tf_val {
	int64_t i;                  /* pool_int64s */
	const struct ir_bytes *s;   /* pool_strings */
};

static int tf_cmp_val(const void *pa, const void *pb)
{
	const struct tf_val *a = pa, *b = pb;
	if (a->s) {
		size_t n = a->s->len < b->s->len ? a->s->len : b->s->len;
		int c = n ? memcmp(a->s->data, b->s->data, n) : 0;
		if (c)
			return c;
		return (a->s->len > b->s->len) - (a->s->len < b->s->len);
	}
	return (a->i > b->i) - (a->i < b->i);
}

struct tf_gram {
	const int64_t *tok;   /* n tokens */
	int n;
	int64_t id;           /* the n-gram's number over the whole pool */
};

static int tf_cmp_gram(const void *pa, const void *pb)
{
	const struct tf_gram *a = pa, *b = pb;
	for (int j = 0; j < a->n; j++)
		if (a->tok[j] != b->tok[j])
			return (a->tok[j] > b->tok[j]) - (a->tok[j] < b->tok[j]);
	return 0;
}

/* sorts by tokens, then by id (so the last of equal n-grams is found) */
static int tf_cmp_gram_id(const void *pa, const void *pb)
{
	int c = tf_cmp_gram(pa, pb);
	if (c)
		return c;
	const struct tf_gram *a = pa, *b = pb;
	return (a->id > b->id) - (a->id < b->id);
}

/* The token of value v, or -1. */
static int64_t tf_token(const struct tf_val *vocab, size_t nv, const struct tf_val *v)
{
	const struct tf_val *hit = bsearch(v, vocab, nv, sizeof(*vocab), tf_cmp_val);
	return hit ? hit - vocab : -1;
}

/* The id of an n-gram (the last one in the pool when it repeats), or -1. */
static int64_t tf_lookup(const struct tf_gram *tab, size_t nt, const int64_t *tok, int n)
{
	struct tf_gram key = { tok, n, 0 };
	const struct tf_gram *hit = bsearch(&key, tab, nt, sizeof(*tab), tf_cmp_gram);
	if (!hit)
		return -1;
	while (hit + 1 < tab + nt && tf_cmp_gram(hit + 1, &key) == 0)
		hit++;
	return hit->id;
}

static int k_tfidf(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	bool xstr = x->dtype == IR_STRING;
	if (!xstr && x->dtype != IR_INT32 && x->dtype != IR_INT64)
		return kerr(k, "input must be string, int32 or int64, not %s", ir_dtype_name(x->dtype));
	if (x->rank > 2)
		return kerr(k, "input must be [C] or [B, C], not %s", kshape(x));
	int64_t rows = x->rank == 2 ? x->dims[0] : 1;
	int64_t C = x->rank == 2 ? x->dims[1] : x->rank == 1 ? x->dims[0] : 1;

	const char *mode_s = kattr_s(k, "mode", "");
	int mode;   /* 1 TF, 2 IDF, 3 TFIDF */
	if (!strcmp(mode_s, "TF"))
		mode = 1;
	else if (!strcmp(mode_s, "IDF"))
		mode = 2;
	else if (!strcmp(mode_s, "TFIDF"))
		mode = 3;
	else
		return kerr(k, "mode '%s' is not one of TF, IDF, TFIDF", mode_s);
	int64_t minn = kattr_i(k, "min_gram_length", 0), maxn = kattr_i(k, "max_gram_length", 0);
	int64_t maxskip = kattr_i(k, "max_skip_count", 0);
	if (minn < 1 || maxn < minn || maxn > 1024)
		return kerr(k, "min_gram_length %" PRId64 " and max_gram_length %" PRId64 " are not 1 <= min <= max <= 1024",
			    minn, maxn);
	if (maxskip < 0)
		return kerr(k, "max_skip_count %" PRId64 " is negative", maxskip);
	int ncnt, nidx;
	const int64_t *counts = kattr_ints(k, "ngram_counts", &ncnt);
	const int64_t *indexes = kattr_ints(k, "ngram_indexes", &nidx);
	const struct ir_attr *ps = kattr(k, "pool_strings");
	const struct ir_attr *pi = kattr(k, "pool_int64s");
	bool pstr = ps && ps->type == IR_ATTR_STRINGS && ps->n;
	size_t npool = pstr ? ps->n : pi && pi->type == IR_ATTR_INTS ? pi->n : 0;
	if (pstr && pi && pi->n)
		return kerr(k, "has both pool_strings and pool_int64s");
	if (npool && pstr != xstr)
		return kerr(k, "%s input needs %s", ir_dtype_name(x->dtype), xstr ? "pool_strings" : "pool_int64s");
	int64_t outsz = 0;
	for (int j = 0; j < nidx; j++) {
		if (indexes[j] < 0 || indexes[j] >= ((int64_t)1 << 31))
			return kerr(k, "ngram_indexes value %" PRId64 " is out of range", indexes[j]);
		if (indexes[j] + 1 > outsz)
			outsz = indexes[j] + 1;
	}
	int nw;
	const float *w = kattr_floats(k, "weights", &nw);
	if (nw && nw != nidx)
		return kerr(k, "weights has %d values, not one per n-gram (%d)", nw, nidx);

	int64_t odims[2] = { rows, outsz };
	struct ir_tensor *o = x->rank == 2 ? kout(k, 0, IR_FLOAT, 2, odims) : kout(k, 0, IR_FLOAT, 1, &odims[1]);
	if (!o)
		return IR_ERR;
	uint64_t total = o->numel;

	int rc = 0;
	struct tf_val *vocab = NULL;
	int64_t *ptok = NULL, *xtok = NULL, *freq = NULL;
	struct tf_gram *grams = NULL;
	float *colw = NULL;
	size_t ngrams = 0;
	if (!(freq = kalloc_arr(k, total, sizeof(*freq))))
		return IR_ENOMEM;
	memset(freq, 0, total ? total * sizeof(*freq) : 1);

	/* the vocabulary: distinct pool values, sorted */
	size_t nv = 0;
	if (npool) {
		if (!(vocab = kalloc_arr(k, npool, sizeof(*vocab))) || !(ptok = kalloc_arr(k, npool, sizeof(*ptok))) ||
		    !(grams = kalloc_arr(k, npool, sizeof(*grams)))) {
			rc = IR_ENOMEM;
			goto out;
		}
		for (size_t j = 0; j < npool; j++) {
			vocab[j].s = pstr ? &ps->strings[j] : NULL;
			vocab[j].i = pstr ? 0 : pi->ints[j];
		}
		qsort(vocab, npool, sizeof(*vocab), tf_cmp_val);
		for (size_t j = 0; j < npool; j++)
			if (!nv || tf_cmp_val(&vocab[nv - 1], &vocab[j]))
				vocab[nv++] = vocab[j];
		for (size_t j = 0; j < npool; j++) {
			struct tf_val v = { pstr ? 0 : pi->ints[j], pstr ? &ps->strings[j] : NULL };
			ptok[j] = tf_token(vocab, nv, &v);
		}
	}

	/* the n-grams of the wanted lengths: group g holds n-grams of length
	 * g+1 from pool[counts[g]] to pool[counts[g+1]] (or the end); ids run
	 * over all groups, wanted or not */
	int64_t id = 0;
	for (int g = 0; g < ncnt; g++) {
		int64_t start = counts[g], end = g + 1 < ncnt ? counts[g + 1] : (int64_t)npool;
		int64_t len = g + 1;
		if (start < 0 || end < start || end > (int64_t)npool) {
			rc = kerr(k, "ngram_counts value %" PRId64 " is out of range for a pool of %zu", start, npool);
			goto out;
		}
		int64_t cnt = (end - start) / len;
		for (int64_t q = 0; q < cnt; q++, id++) {
			if (len < minn || len > maxn)
				continue;
			if (id >= nidx) {
				rc = kerr(k, "ngram_indexes has %d values, fewer than the pool's n-grams", nidx);
				goto out;
			}
			grams[ngrams].tok = ptok + start + q * len;
			grams[ngrams].n = (int)len;
			grams[ngrams].id = id;
			ngrams++;
		}
	}
	/* sort each length's n-grams together: by length first */
	/* (grams of one length are contiguous already, as groups go by length) */
	{
		size_t a = 0;
		while (a < ngrams) {
			size_t e = a;
			while (e < ngrams && grams[e].n == grams[a].n)
				e++;
			qsort(grams + a, e - a, sizeof(*grams), tf_cmp_gram_id);
			a = e;
		}
	}

	if (ngrams && C > 0) {
		if (!(xtok = kalloc_arr(k, (uint64_t)C, sizeof(*xtok)))) {
			rc = IR_ENOMEM;
			goto out;
		}
		int64_t buf[1024];
		for (int64_t r = 0; r < rows; r++) {
			for (int64_t c = 0; c < C; c++) {
				uint64_t e = (uint64_t)(r * C + c);
				struct tf_val v = { 0, NULL };
				if (xstr)
					v.s = &x->strings[e];
				else
					v.i = x->dtype == IR_INT32 ? KI32(x)[e] : KI64(x)[e];
				xtok[c] = tf_token(vocab, nv, &v);
			}
			int64_t *fr = freq + r * outsz;
			for (int64_t n = minn; n <= maxn && n <= C; n++) {
				/* this length's table */
				size_t a = 0;
				while (a < ngrams && grams[a].n != n)
					a++;
				size_t e = a;
				while (e < ngrams && grams[e].n == n)
					e++;
				if (a == e)
					continue;
				/* unigrams once; longer n-grams for each skip distance */
				int64_t smax = n == 1 ? 1 : maxskip < C ? maxskip + 1 : C;
				for (int64_t s = 1; s <= smax; s++) {
					if ((n - 1) * s >= C)
						break;
					for (int64_t st = 0; st + (n - 1) * s < C; st++) {
						bool any_miss = false;
						for (int64_t q = 0; q < n; q++) {
							buf[q] = xtok[st + q * s];
							any_miss |= buf[q] < 0;
						}
						if (any_miss)
							continue;
						int64_t hit = tf_lookup(grams + a, e - a, buf, (int)n);
						if (hit >= 0)
							fr[indexes[hit]]++;
					}
				}
			}
			if ((rc = kstop(k)))
				goto out;
		}
	}

	/* weighting: weights[] holds one weight per pool n-gram; output column
	 * ngram_indexes[g] takes the weight of n-gram g */
	if (nw) {
		if (!(colw = kalloc_arr(k, (uint64_t)outsz, sizeof(*colw)))) {
			rc = IR_ENOMEM;
			goto out;
		}
		for (int64_t c = 0; c < outsz; c++)
			colw[c] = 0.0f;
		for (int g = 0; g < nidx; g++)
			colw[indexes[g]] = w[g];
	}
	float *y = kwdata(o);
	for (uint64_t i = 0; i < total; i++) {
		int64_t col = (int64_t)(i % (uint64_t)outsz);
		double f = (double)freq[i];
		double v;
		if (mode == 1)
			v = f;
		else if (mode == 2)
			v = f > 0 ? (nw ? colw[col] : 1.0) : 0.0;
		else
			v = nw ? colw[col] * f : f;
		y[i] = (float)v;
	}
out:
	free(vocab);
	free(ptok);
	free(xtok);
	free(freq);
	free(grams);
	free(colw);
	return rc;
}

const struct cpu_kernel cpu_kernels_string[] = {
	{ IR_OP_StringConcat, k_string_concat, NULL },
	{ IR_OP_StringSplit, k_string_split, NULL },
	{ IR_OP_StringNormalizer, k_string_normalizer, NULL },
	{ IR_OP_RegexFullMatch, k_regex_full_match, NULL },
	{ IR_OP_TfIdfVectorizer, k_tfidf, NULL },
	{ -1, NULL, NULL },
};
