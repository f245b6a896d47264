/*
 * fused.c - reading ogsh's fused ops: activations and the Pointwise
 * expression language (kernels/fused.h).
 */
#include "kernels/fused.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- activations ---- */

static const struct {
	const char *name;
	int kind, n_params;
} acts[] = {
	{ "", KACT_NONE, 0 }, { "Relu", KACT_RELU, 0 }, { "Clip", KACT_CLIP, 2 }, { "LeakyRelu", KACT_LEAKY, 1 },
	{ "Sigmoid", KACT_SIGMOID, 0 }, { "HardSigmoid", KACT_HSIGMOID, 2 }, { "HardSwish", KACT_HSWISH, 0 },
	{ "Tanh", KACT_TANH, 0 }, { "Gelu", KACT_GELU, 1 },
};

bool kern_act_of(const struct ir_node *n, struct kern_act *a, char *why, size_t size)
{
	const struct ir_attr *s = ir_node_attr(n, "activation");
	const char *name = s && s->type == IR_ATTR_STRING && s->s.data ? s->s.data : "";
	const struct ir_attr *p = ir_node_attr(n, "activation_params");
	size_t np = p && p->type == IR_ATTR_FLOATS ? p->n : 0;
	if (s && s->type != IR_ATTR_STRING) {
		snprintf(why, size, "attribute 'activation' is not a string");
		return false;
	}
	if (p && p->type != IR_ATTR_FLOATS) {
		snprintf(why, size, "attribute 'activation_params' is not a list of floats");
		return false;
	}
	for (size_t i = 0; i < sizeof(acts) / sizeof(acts[0]); i++) {
		if (strcmp(acts[i].name, name))
			continue;
		if (np && np != (size_t)acts[i].n_params) {
			snprintf(why, size, "activation '%s' takes %d parameters, not %zu", name, acts[i].n_params, np);
			return false;
		}
		a->kind = acts[i].kind;
		/* ONNX's defaults when the parameters are not given */
		switch (a->kind) {
		case KACT_CLIP: a->p0 = -INFINITY; a->p1 = INFINITY; break;
		case KACT_LEAKY: a->p0 = 0.01f; a->p1 = 0; break;
		case KACT_HSIGMOID: a->p0 = 0.2f; a->p1 = 0.5f; break;
		default: a->p0 = a->p1 = 0; break;
		}
		if (np >= 1)
			a->p0 = p->floats[0];
		if (np >= 2)
			a->p1 = p->floats[1];
		if (a->kind == KACT_GELU && a->p0 != 0 && a->p0 != 1) {
			snprintf(why, size, "Gelu's parameter (approximate) must be 0 or 1, not %g", a->p0);
			return false;
		}
		return true;
	}
	snprintf(why, size, "activation '%s' is not supported", name);
	return false;
}

const char *kern_act_name(int kind)
{
	for (size_t i = 0; i < sizeof(acts) / sizeof(acts[0]); i++)
		if (acts[i].kind == kind)
			return acts[i].name;
	return "?";
}

/* ---- the Pointwise expression ---- */

static const struct {
	const char *name;
	int op, arity;
} pw_funcs[] = {
	{ "abs", PW_ABS, 1 }, { "neg", PW_NEG, 1 }, { "exp", PW_EXP, 1 }, { "log", PW_LOG, 1 },
	{ "sqrt", PW_SQRT, 1 }, { "sigmoid", PW_SIGMOID, 1 }, { "tanh", PW_TANH, 1 }, { "relu", PW_RELU, 1 },
	{ "erf", PW_ERF, 1 }, { "pow", PW_POW, 2 }, { "max", PW_MAX, 2 }, { "min", PW_MIN, 2 },
};

static void pw_skip(struct pw_prog *P)
{
	while (*P->p == ' ' || *P->p == '\t')
		P->p++;
}

static bool pw_fail(struct pw_prog *P, const char *what)
{
	if (!P->err[0])
		snprintf(P->err, sizeof(P->err), "%s at offset %d of the expression", what, (int)(P->p - P->s));
	return false;
}

static bool pw_emit(struct pw_prog *P, int op, int in, double lit)
{
	if (P->n >= PW_MAX_CODE)
		return pw_fail(P, "the expression is too long");
	/* a literal negated is a literal */
	if (op == PW_NEG && P->n && P->code[P->n - 1].op == PW_LIT) {
		P->code[P->n - 1].lit = -P->code[P->n - 1].lit;
		return true;
	}
	P->code[P->n++] = (struct pw_ins){ op, in, lit };
	if (op == PW_IN || op == PW_LIT) {
		if (++P->depth > P->max_depth)
			P->max_depth = P->depth;
	} else if (op >= PW_ADD) {
		P->depth--;
	}
	return true;
}

static bool pw_expr(struct pw_prog *P);

static bool pw_primary(struct pw_prog *P)
{
	pw_skip(P);
	const char *p = P->p;
	if ((*p >= '0' && *p <= '9') || *p == '.') {
		/* digits [. digits] [e [+-] digits] */
		const char *q = p;
		int digits = 0;
		while (*q >= '0' && *q <= '9')
			q++, digits++;
		if (*q == '.') {
			q++;
			while (*q >= '0' && *q <= '9')
				q++, digits++;
		}
		if (!digits)
			return pw_fail(P, "a number has no digits");
		if (*q == 'e' || *q == 'E') {
			const char *e = q + 1;
			if (*e == '+' || *e == '-')
				e++;
			if (!(*e >= '0' && *e <= '9'))
				return pw_fail(P, "a number's exponent has no digits");
			while (*e >= '0' && *e <= '9')
				e++;
			q = e;
		}
		char buf[64];
		if ((size_t)(q - p) >= sizeof(buf))
			return pw_fail(P, "a number is too long");
		memcpy(buf, p, (size_t)(q - p));
		buf[q - p] = 0;
		P->p = q;
		return pw_emit(P, PW_LIT, 0, strtod(buf, NULL));
	}
	if (*p == '(') {
		P->p++;
		if (!pw_expr(P))
			return false;
		pw_skip(P);
		if (*P->p != ')')
			return pw_fail(P, "')' expected");
		P->p++;
		return true;
	}
	if (*p == 'x' && p[1] >= '0' && p[1] <= '9') {
		const char *q = p + 1;
		long v = 0;
		while (*q >= '0' && *q <= '9' && v < 100000)
			v = v * 10 + (*q++ - '0');
		if ((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') || *q == '_')
			return pw_fail(P, "bad input name");
		P->p = q;
		if (v > P->max_in)
			P->max_in = (int)v;
		return pw_emit(P, PW_IN, (int)v, 0);
	}
	if (*p >= 'a' && *p <= 'z') {
		const char *q = p;
		while ((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9'))
			q++;
		size_t len = (size_t)(q - p);
		for (size_t f = 0; f < sizeof(pw_funcs) / sizeof(pw_funcs[0]); f++) {
			if (strlen(pw_funcs[f].name) != len || strncmp(pw_funcs[f].name, p, len))
				continue;
			P->p = q;
			pw_skip(P);
			if (*P->p != '(')
				return pw_fail(P, "'(' expected after a function name");
			P->p++;
			for (int a = 0; a < pw_funcs[f].arity; a++) {
				if (a) {
					pw_skip(P);
					if (*P->p != ',')
						return pw_fail(P, "',' expected (too few arguments)");
					P->p++;
				}
				if (!pw_expr(P))
					return false;
			}
			pw_skip(P);
			if (*P->p != ')')
				return pw_fail(P, "')' expected (too many arguments?)");
			P->p++;
			return pw_emit(P, pw_funcs[f].op, 0, 0);
		}
		return pw_fail(P, "unknown function");
	}
	return pw_fail(P, *p ? "unexpected character" : "unexpected end");
}

static bool pw_unary(struct pw_prog *P)
{
	pw_skip(P);
	if (*P->p == '-') {
		P->p++;
		if (++P->nest > PW_MAX_NEST)
			return pw_fail(P, "the expression nests too deeply");
		bool ok = pw_unary(P) && pw_emit(P, PW_NEG, 0, 0);
		P->nest--;
		return ok;
	}
	return pw_primary(P);
}

static bool pw_term(struct pw_prog *P)
{
	if (!pw_unary(P))
		return false;
	for (;;) {
		pw_skip(P);
		char c = *P->p;
		if (c != '*' && c != '/')
			return true;
		P->p++;
		if (!pw_unary(P) || !pw_emit(P, c == '*' ? PW_MUL : PW_DIV, 0, 0))
			return false;
	}
}

static bool pw_expr(struct pw_prog *P)
{
	if (++P->nest > PW_MAX_NEST)
		return pw_fail(P, "the expression nests too deeply");
	if (!pw_term(P))
		return false;
	for (;;) {
		pw_skip(P);
		char c = *P->p;
		if (c != '+' && c != '-')
			break;
		P->p++;
		if (!pw_term(P) || !pw_emit(P, c == '+' ? PW_ADD : PW_SUB, 0, 0))
			return false;
	}
	P->nest--;
	return true;
}

bool pw_compile(struct pw_prog *P, const char *s)
{
	memset(P, 0, offsetof(struct pw_prog, s));
	P->max_in = -1;
	P->s = P->p = s;
	P->nest = 0;
	P->err[0] = 0;
	if (!pw_expr(P))
		return false;
	pw_skip(P);
	if (*P->p)
		return pw_fail(P, "unexpected text after the expression");
	if (P->depth != 1)
		return pw_fail(P, "internal error: unbalanced program");
	return true;
}

