/*
 * fused.h - reading ogsh's fused ops (ai.ogsh FusedConv, FusedGemm,
 * Pointwise), shared by the CPU kernels (kernels/cpu/k_fused.c) and the GPU
 * ones (kernels/cuda/k_conv.c, k_gemm.c, k_elementwise.c), so both read a
 * node the same way. Private to kernels/.
 *
 * FusedConv and FusedGemm carry an activation (`activation`, a name, and
 * `activation_params`); kern_act_of reads it.
 *
 * Pointwise carries an expression (`expr`) in this language:
 *
 *   expr    := term (('+' | '-') term)*
 *   term    := unary (('*' | '/') unary)*
 *   unary   := '-' unary | primary
 *   primary := NUMBER | 'x' DIGITS | NAME '(' expr (',' expr)* ')' | '(' expr ')'
 *
 * NUMBER is a decimal literal (digits, a point, an exponent); x0, x1...
 * are the node's inputs; the functions are abs neg exp log sqrt sigmoid
 * tanh relu erf (one argument) and pow max min (two). The program is
 * postfix: PW_IN and PW_LIT push, unary ops replace the top, binary ops
 * pop two and push one.
 */
#ifndef OGSH_KERNELS_FUSED_H
#define OGSH_KERNELS_FUSED_H

#include "ir/ir.h"

#include <stdbool.h>

/* ---- activations ---- */

enum { KACT_NONE, KACT_RELU, KACT_CLIP, KACT_LEAKY, KACT_SIGMOID, KACT_HSIGMOID, KACT_HSWISH, KACT_TANH, KACT_GELU };

struct kern_act {
	int kind;
	double p0, p1;   /* Clip: min, max; LeakyRelu: alpha; HardSigmoid: alpha, beta; Gelu: tanh form (0/1) */
};

/* Reads the node's activation, with ONNX's defaults for parameters not
 * given; false with why when it is not one ogsh runs. */
bool kern_act_of(const struct ir_node *n, struct kern_act *a, char *why, size_t size);
/* The op name of an activation kind ("Relu"; "" for none). */
const char *kern_act_name(int kind);

/* ---- the Pointwise expression ---- */

enum {
	PW_IN, PW_LIT,
	/* unary */
	PW_NEG, PW_ABS, PW_EXP, PW_LOG, PW_SQRT, PW_SIGMOID, PW_TANH, PW_RELU, PW_ERF,
	/* binary */
	PW_ADD, PW_SUB, PW_MUL, PW_DIV, PW_POW, PW_MAX, PW_MIN,
};

#define PW_MAX_CODE 4096
#define PW_MAX_NEST 200

struct pw_ins {
	int op;
	int in;          /* PW_IN: the input */
	double lit;      /* PW_LIT */
};

struct pw_prog {
	struct pw_ins code[PW_MAX_CODE];
	int n;
	int depth, max_depth;   /* stack while compiling, and its maximum */
	int max_in;             /* the highest input used, -1: none */
	const char *s, *p;      /* the text and the parse position */
	int nest;
	char err[160];
};

/* Compiles the expression s into P (s is read during the call only); false
 * with the reason in P->err. */
bool pw_compile(struct pw_prog *P, const char *s);

#endif
