/*
 * symdim.c - arithmetic on symbolic dims. A dim param is read as a sum of
 * terms "coef*sym*sym" joined by " + " / " - " (the form this file writes,
 * e.g. "2*batch*seq + 1"); anything else is one opaque symbol. Enough for
 * the shapes models compute from their inputs (Reshape of batch*seq,
 * Concat along seq, Flatten), cheap, and never wrong: what does not fit
 * becomes an unknown dim.
 */
#include "ir_private.h"

#include <inttypes.h>
#include <stdio.h>

#define MAX_TERMS 16
#define MAX_SYMS 8

struct sym { const char *s; size_t len; };
struct term { int64_t coef; int n; struct sym sym[MAX_SYMS]; };
struct poly { int n; struct term t[MAX_TERMS]; };

static int sym_cmp(const struct sym *a, const struct sym *b)
{
	size_t n = a->len < b->len ? a->len : b->len;
	int c = memcmp(a->s, b->s, n);
	return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* same monomial? */
static bool mono_eq(const struct term *a, const struct term *b)
{
	if (a->n != b->n)
		return false;
	for (int i = 0; i < a->n; i++)
		if (sym_cmp(&a->sym[i], &b->sym[i]))
			return false;
	return true;
}

static void sort_syms(struct term *t)
{
	for (int i = 1; i < t->n; i++)
		for (int j = i; j > 0 && sym_cmp(&t->sym[j - 1], &t->sym[j]) > 0; j--) {
			struct sym x = t->sym[j];
			t->sym[j] = t->sym[j - 1];
			t->sym[j - 1] = x;
		}
}

/* Adds a term, combining like terms. false when too many terms or overflow. */
static bool add_term(struct poly *p, const struct term *t)
{
	if (t->coef == 0)
		return true;
	for (int i = 0; i < p->n; i++)
		if (mono_eq(&p->t[i], t)) {
			if (__builtin_add_overflow(p->t[i].coef, t->coef, &p->t[i].coef))
				return false;
			if (p->t[i].coef == 0)
				p->t[i] = p->t[--p->n];
			return true;
		}
	if (p->n == MAX_TERMS)
		return false;
	p->t[p->n++] = *t;
	return true;
}

static bool is_int(const char *s, size_t len, int64_t *v)
{
	if (!len || len > 18)
		return false;
	int64_t x = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		x = x * 10 + (s[i] - '0');
	}
	*v = x;
	return true;
}

/* one term "coef*a*b" (no sign) */
static bool parse_term(const char *s, size_t len, int64_t sign, struct term *t)
{
	t->coef = sign;
	t->n = 0;
	while (len) {
		const char *star = memchr(s, '*', len);
		size_t fl = star ? (size_t)(star - s) : len;
		while (fl && s[0] == ' ') {
			s++;
			fl--;
			len--;
		}
		size_t tl = fl;
		while (tl && s[tl - 1] == ' ')
			tl--;
		if (!tl)
			return false;
		int64_t v;
		if (is_int(s, tl, &v)) {
			if (__builtin_mul_overflow(t->coef, v, &t->coef))
				return false;
		} else {
			if (t->n == MAX_SYMS)
				return false;
			t->sym[t->n].s = s;
			t->sym[t->n++].len = tl;
		}
		if (!star)
			break;
		len -= fl + 1;
		s += fl + 1;
	}
	sort_syms(t);
	return true;
}

static bool to_poly(const struct ir_dim *d, struct poly *p)
{
	p->n = 0;
	if (d->kind == IR_DIM_VALUE) {
		struct term t = { d->value, 0, { { 0, 0 } } };
		return add_term(p, &t);
	}
	if (d->kind != IR_DIM_PARAM || !d->param || !*d->param)
		return false;
	const char *s = d->param;
	size_t len = strlen(s);
	int64_t sign = 1;
	if (len > 1 && s[0] == '-' && s[1] != ' ') {   /* a leading minus */
		sign = -1;
		s++;
		len--;
	}
	/* split at " + " and " - " */
	for (;;) {
		const char *plus = strstr(s, " + "), *minus = strstr(s, " - ");
		const char *sep = plus && (!minus || plus < minus) ? plus : minus;
		size_t tl = sep ? (size_t)(sep - s) : len;
		struct term t;
		if (!parse_term(s, tl, sign, &t) || !add_term(p, &t)) {
			/* not our form: the whole param is one symbol */
			p->n = 1;
			p->t[0] = (struct term){ 1, 1, { { d->param, strlen(d->param) } } };
			return true;
		}
		if (!sep)
			return true;
		sign = sep[1] == '+' ? 1 : -1;
		len -= tl + 3;
		s = sep + 3;
	}
}

static int term_cmp(const struct term *a, const struct term *b)
{
	if (a->n != b->n)
		return b->n - a->n;   /* higher degree first, constants last */
	for (int i = 0; i < a->n; i++) {
		int c = sym_cmp(&a->sym[i], &b->sym[i]);
		if (c)
			return c;
	}
	return 0;
}

/* Writes p into out (a VALUE when it has no symbols). */
static int from_poly(struct poly *p, struct ir_dim *out)
{
	memset(out, 0, sizeof(*out));
	for (int i = 1; i < p->n; i++)
		for (int j = i; j > 0 && term_cmp(&p->t[j - 1], &p->t[j]) > 0; j--) {
			struct term x = p->t[j];
			p->t[j] = p->t[j - 1];
			p->t[j - 1] = x;
		}
	if (p->n == 0 || (p->n == 1 && p->t[0].n == 0)) {
		out->kind = IR_DIM_VALUE;
		out->value = p->n ? p->t[0].coef : 0;
		return 0;
	}
	size_t cap = 64;
	for (int i = 0; i < p->n; i++)
		for (int k = 0; k < p->t[i].n; k++)
			cap += p->t[i].sym[k].len + 2;
	cap += (size_t)p->n * 28;
	char *s = malloc(cap);
	if (!s)
		return IR_ENOMEM;
	size_t o = 0;
	for (int i = 0; i < p->n; i++) {
		const struct term *t = &p->t[i];
		int64_t c = t->coef;
		if (i)
			o += (size_t)snprintf(s + o, cap - o, c < 0 ? " - " : " + ");
		else if (c < 0)
			o += (size_t)snprintf(s + o, cap - o, "-");
		uint64_t ac = c < 0 ? (uint64_t)0 - (uint64_t)c : (uint64_t)c;
		if (ac != 1 || t->n == 0)
			o += (size_t)snprintf(s + o, cap - o, "%" PRIu64 "%s", ac, t->n ? "*" : "");
		for (int k = 0; k < t->n; k++)
			o += (size_t)snprintf(s + o, cap - o, "%s%.*s", k ? "*" : "", (int)t->sym[k].len, t->sym[k].s);
	}
	out->kind = IR_DIM_PARAM;
	out->param = s;
	return 0;
}

static void unknown(struct ir_dim *out)
{
	memset(out, 0, sizeof(*out));
}

int ir_dim_add(const struct ir_dim *a, const struct ir_dim *b, struct ir_dim *out)
{
	struct poly p, q;
	if (!to_poly(a, &p) || !to_poly(b, &q)) {
		unknown(out);
		return 0;
	}
	for (int i = 0; i < q.n; i++)
		if (!add_term(&p, &q.t[i])) {
			unknown(out);
			return 0;
		}
	return from_poly(&p, out);
}

int ir_dim_sub(const struct ir_dim *a, const struct ir_dim *b, struct ir_dim *out)
{
	struct poly p, q;
	if (!to_poly(a, &p) || !to_poly(b, &q)) {
		unknown(out);
		return 0;
	}
	for (int i = 0; i < q.n; i++) {
		struct term t = q.t[i];
		if (t.coef == INT64_MIN) {
			unknown(out);
			return 0;
		}
		t.coef = -t.coef;
		if (!add_term(&p, &t)) {
			unknown(out);
			return 0;
		}
	}
	return from_poly(&p, out);
}

int ir_dim_mul(const struct ir_dim *a, const struct ir_dim *b, struct ir_dim *out)
{
	struct poly p, q, r = { 0 };
	if (!to_poly(a, &p) || !to_poly(b, &q)) {
		/* 0 times anything is 0 */
		if ((a->kind == IR_DIM_VALUE && a->value == 0) || (b->kind == IR_DIM_VALUE && b->value == 0)) {
			memset(out, 0, sizeof(*out));
			out->kind = IR_DIM_VALUE;
			return 0;
		}
		unknown(out);
		return 0;
	}
	for (int i = 0; i < p.n; i++)
		for (int j = 0; j < q.n; j++) {
			struct term t;
			if (p.t[i].n + q.t[j].n > MAX_SYMS ||
			    __builtin_mul_overflow(p.t[i].coef, q.t[j].coef, &t.coef)) {
				unknown(out);
				return 0;
			}
			t.n = 0;
			for (int k = 0; k < p.t[i].n; k++)
				t.sym[t.n++] = p.t[i].sym[k];
			for (int k = 0; k < q.t[j].n; k++)
				t.sym[t.n++] = q.t[j].sym[k];
			sort_syms(&t);
			if (!add_term(&r, &t)) {
				unknown(out);
				return 0;
			}
		}
	return from_poly(&r, out);
}

int ir_dim_div(const struct ir_dim *a, const struct ir_dim *b, struct ir_dim *out)
{
	struct poly p, q;
	if (!to_poly(a, &p) || !to_poly(b, &q) || q.n != 1) {
		unknown(out);
		return 0;
	}
	const struct term *dv = &q.t[0];
	if (dv->coef == 0) {
		unknown(out);
		return 0;
	}
	/* every term must hold the divisor's coefficient and symbols */
	for (int i = 0; i < p.n; i++) {
		struct term *t = &p.t[i];
		if (t->coef % dv->coef) {
			unknown(out);
			return 0;
		}
		t->coef /= dv->coef;
		for (int k = 0; k < dv->n; k++) {
			int f = -1;
			for (int m = 0; m < t->n && f < 0; m++)
				if (!sym_cmp(&t->sym[m], &dv->sym[k]))
					f = m;
			if (f < 0) {
				unknown(out);
				return 0;
			}
			for (int m = f; m + 1 < t->n; m++)
				t->sym[m] = t->sym[m + 1];
			t->n--;
		}
	}
	return from_poly(&p, out);
}

bool ir_dim_equal(const struct ir_dim *a, const struct ir_dim *b)
{
	if (a->kind == IR_DIM_VALUE && b->kind == IR_DIM_VALUE)
		return a->value == b->value;
	if (a->kind != IR_DIM_PARAM || b->kind != IR_DIM_PARAM)
		return false;
	if (strcmp(a->param, b->param) == 0)
		return true;
	/* "2*seq" and "seq*2" are the same */
	struct ir_dim d;
	if (ir_dim_sub(a, b, &d) || d.kind != IR_DIM_VALUE) {
		ir_dim_clear(&d);
		return false;
	}
	return d.value == 0;
}

const char *ir_dim_str(const struct ir_dim *d, char *buf, size_t size)
{
	if (d->kind == IR_DIM_VALUE)
		snprintf(buf, size, "%" PRId64, d->value);
	else if (d->kind == IR_DIM_PARAM)
		snprintf(buf, size, "%s", d->param);
	else
		snprintf(buf, size, "?");
	return buf;
}
