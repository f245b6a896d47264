/*
 * fused.h - private to passes/: model-local ONNX functions for ogsh's fused
 * ops (ai.ogsh FusedConv, FusedGemm, Pointwise, FusedAttention, LayerNormalization, Gelu), built by
 * fused.c for fuse-activation, fuse-elementwise, fuse-attention, fuse-layernorm and fuse-gelu, so saved
 * models run elsewhere.
 */
#ifndef OGSH_PASSES_FUSED_H
#define OGSH_PASSES_FUSED_H

#include "passes/pass.h"

#define FUSED_DOMAIN "ai.ogsh"
#define FUSED_MIN_OPSET 9    /* Erf, Max/Min with broadcasting, Constant tensors */

/* A function body being built. */
struct pass_fbody {
	struct ir_graph *g;
	int dtype;          /* of the constants it makes */
	int64_t opset;      /* the ONNX opset the body is written for */
	int rc;             /* the first error (the builders then do nothing) */
	unsigned fresh;
	struct ir_diag *d;
};

int64_t pass_fused_opset(const struct ir_model *m, char *why, size_t size);
struct ir_value *pass_fb_input(struct pass_fbody *b, const char *name);
struct ir_value *pass_fb_node(struct pass_fbody *b, const char *op, struct ir_value *const *in, int n_in,
			      struct ir_node **node);
struct ir_value *pass_fb_const(struct pass_fbody *b, double v);
/* op(x, y): a node of two inputs. */
struct ir_value *pass_fb_bin(struct pass_fbody *b, const char *op, struct ir_value *x, struct ir_value *y);
struct ir_value *pass_fb_gelu(struct pass_fbody *b, struct ir_value *t, bool tanh_form);
/* softmax(q kt * scale + mask) v, the last axis the keys (mask NULL: none);
 * with nan_zero, softmax rows that are NaN count as zeros (IsNaN, Where). */
struct ir_value *pass_fb_sdpa(struct pass_fbody *b, struct ir_value *q, struct ir_value *kt, struct ir_value *v,
			      struct ir_value *mask, double scale, bool nan_zero);
void pass_fb_attr_ref(struct pass_fbody *b, struct ir_node *n, const char *name, enum ir_attr_type type);
void pass_fb_attr_float(struct pass_fbody *b, struct ir_node *n, const char *name, double v);
void pass_fb_output(struct pass_fbody *b, struct ir_value *v);
int pass_fused_fn_use(struct pass_ctx *c, struct ir_node *n, const char *base, const char *key, const char *doc,
		      const char *const *attrs, int n_attrs, int dtype,
		      void (*build)(struct pass_fbody *b, void *arg), void *arg);
/* A FusedAttention variant: its layouts, the packed input's rank and heads
 * (0: not packed), a mask, nan_to_zero and the scale. */
struct pass_attn_fn {
	struct ir_attn_layout l;
	int in_rank;
	int64_t heads;
	bool mask, nan_zero;
	double scale;
};
int pass_fused_attention_fn(struct pass_ctx *c, struct ir_node *n, const struct pass_attn_fn *a, int elem);
/* ai.ogsh LayerNormalization (over the last k axes, with or without a bias)
 * and Gelu, ONNX's ops for models that import an older opset: their functions. */
int pass_fused_layernorm_fn(struct pass_ctx *c, struct ir_node *n, int k, double eps, bool bias, int elem);
int pass_fused_gelu_fn(struct pass_ctx *c, struct ir_node *n, bool tanh_form, int elem);
int pass_fused_set_str(struct ir_node *n, const char *name, const char *value, struct ir_diag *d);

/* Marks in used[0..m->n_functions) the functions that nodes of m's graphs
 * (subgraphs included) call. */
void pass_fns_called(const struct ir_model *m, bool *used);
/* Drops the functions marked in was[0..n_was) (called before a pass) that
 * no node calls now; only those of `domain` when it is not NULL. */
int pass_drop_uncalled_fns(struct ir_model *m, const bool *was, size_t n_was, const char *domain,
			   struct ir_diag *d);

#endif
