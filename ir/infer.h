/*
 * infer.h - what shape functions see (private to ir/: infer.c and the
 * ir/shape_*.c files that hold the functions, one file per op family).
 *
 * A shape function reads its node's inputs (types, and for small integer
 * tensors their values when known), its attributes (schema defaults
 * applied), and writes the type of each output; what it cannot know it
 * says, with a reason a user can read. It never fails: a node the model
 * gets wrong makes its outputs unknown and a warning.
 *
 * To add shape inference for an op: write a function in the ir/shape_*.c
 * of its family (or a new file, added to ir/meson.build) and list it in
 * that file's table (struct sx_entry); tests/unit checks that every op of
 * the default domain has one.
 */
#ifndef OGSH_IR_INFER_H
#define OGSH_IR_INFER_H

#include "ir_private.h"

struct ir_infer;

typedef void (*sx_fn)(struct ir_infer *x, struct ir_node *n);

/* One row of a family's table: the op and its shape function. */
struct sx_entry {
	int op;
	sx_fn fn;
};

/* The tables of the families (each ir/shape_*.c exports one, ended by {-1, NULL}). */
extern const struct sx_entry sx_elementwise[];
extern const struct sx_entry sx_tensor_ops[];
extern const struct sx_entry sx_nn[];
extern const struct sx_entry sx_other[];

/* ---- inputs ---- */

/* Whether input i is there (not omitted, not past the end). */
bool sx_has(const struct ir_node *n, int i);
/* Its type (NULL when absent or not known at all). */
const struct ir_type *sx_type(struct ir_infer *x, const struct ir_node *n, int i);
/* Its element type, 0 when unknown or absent. */
int sx_elem(struct ir_infer *x, const struct ir_node *n, int i);
/* Its rank, -1 when unknown or absent. */
int sx_rank(struct ir_infer *x, const struct ir_node *n, int i);
/* Its dims (rank known), else NULL. */
const struct ir_dim *sx_dims(struct ir_infer *x, const struct ir_node *n, int i);
/*
 * The dims of input i, or NULL after making every output unknown because
 * the input's shape is unknown (the reason comes from the input). For
 * shape functions that cannot do anything without that shape.
 */
const struct ir_dim *sx_need(struct ir_infer *x, struct ir_node *n, int i, int *rank);
/* Dim k of input i (negative k counts from the end); UNKNOWN when the input's
 * shape is not known or has no such dim. */
struct ir_dim sx_in_dim(struct ir_infer *x, const struct ir_node *n, int i, int k);
/* false (after sx_fail) when input i has a known rank outside [lo, hi]; `what` names it. */
bool sx_rank_in(struct ir_infer *x, struct ir_node *n, int i, int lo, int hi, const char *what);
/* The input's tensor when it is a constant (initializer or Constant, also
 * seen through a subgraph's capture), else NULL. */
const struct ir_tensor *sx_const(struct ir_infer *x, const struct ir_node *n, int i);
/*
 * The elements of a small integer input when known (from a constant, or
 * computed from shapes: Shape, Gather, Concat...), as dims (a VALUE, a
 * symbol, or UNKNOWN for an element that is not known); *count gets how
 * many. NULL when not known. A 0-d tensor has count 1.
 */
const struct ir_dim *sx_vals(struct ir_infer *x, const struct ir_node *n, int i, int *count);
/* Like sx_vals, but every element must be a number: returns count or -1. */
int sx_ints(struct ir_infer *x, const struct ir_node *n, int i, int64_t *out, int max);
/* The reason input i's shape is unknown (never NULL). */
const char *sx_why(struct ir_infer *x, const struct ir_node *n, int i);
/* The opset version the node's domain has in the model (or function); a
 * model that imports none is read as the newest (INT64_MAX). */
int64_t sx_opset(struct ir_infer *x, const struct ir_node *n);

/* ---- attributes (references to a calling node's attributes resolved) ---- */

const struct ir_attr *sx_attr(struct ir_infer *x, const struct ir_node *n, const char *name);
int64_t sx_attr_int(struct ir_infer *x, const struct ir_node *n, const char *name, int64_t dflt);
float sx_attr_float(struct ir_infer *x, const struct ir_node *n, const char *name, float dflt);
/* The string value, or dflt. */
const char *sx_attr_str(struct ir_infer *x, const struct ir_node *n, const char *name, const char *dflt);
/* An ints attribute into out (at most max); its count, or -1 when absent. */
int sx_attr_ints(struct ir_infer *x, const struct ir_node *n, const char *name, int64_t *out, int max);

/* ---- outputs ---- */

/* Output i becomes a tensor of elem (0: unknown) and the given dims (rank -1: unknown). */
void sx_out(struct ir_infer *x, struct ir_node *n, int i, int elem, int rank, const struct ir_dim *dims);
/* Output i gets elem and dims (a negative VALUE is a failure); where some dim
 * stays unknown, `why` (may be NULL) says why. */
void sx_out_dims(struct ir_infer *x, struct ir_node *n, int i, int elem, int r, const struct ir_dim *d,
		 const char *why);
/* Output i: rank r known (r < 0: not), every dim unknown, and why. */
void sx_out_rank(struct ir_infer *x, struct ir_node *n, int i, int elem, int r, const char *why);
/* Output i gets input j's type. */
void sx_out_like(struct ir_infer *x, struct ir_node *n, int i, int j);
/* Output i gets a whole type (sequences, optionals, maps). */
void sx_out_type(struct ir_infer *x, struct ir_node *n, int i, const struct ir_type *t);
/* Output i: element type known or not, shape unknown, and why. */
void sx_out_unknown(struct ir_infer *x, struct ir_node *n, int i, int elem, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* Output i: unknown because input j is (its reason carries over). */
void sx_out_from(struct ir_infer *x, struct ir_node *n, int i, int elem, int j);
/* A reason for an output whose rank is known but some dims are not. */
void sx_out_why(struct ir_infer *x, struct ir_node *n, int i, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Records the known elements of integer output i (count values). */
void sx_out_vals(struct ir_infer *x, struct ir_node *n, int i, int count, const struct ir_dim *vals);
/*
 * The model is wrong at this node (inputs that do not fit the op): every
 * output without a type becomes unknown with this reason, and a warning
 * names the node.
 */
void sx_fail(struct ir_infer *x, struct ir_node *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- dims (results live until inference ends: no need to free) ---- */

struct ir_dim sx_v(int64_t v);            /* a VALUE dim */
struct ir_dim sx_unknown(void);
bool sx_known(const struct ir_dim *d);    /* a VALUE */
struct ir_dim sx_mul(struct ir_infer *x, const struct ir_dim *a, const struct ir_dim *b);
struct ir_dim sx_add(struct ir_infer *x, const struct ir_dim *a, const struct ir_dim *b);
struct ir_dim sx_sub(struct ir_infer *x, const struct ir_dim *a, const struct ir_dim *b);
struct ir_dim sx_div(struct ir_infer *x, const struct ir_dim *a, const struct ir_dim *b);  /* exact, else unknown */
/* floor(a / b) for a VALUE b > 0: exact on symbols when it divides, else unknown */
struct ir_dim sx_floordiv(struct ir_infer *x, const struct ir_dim *a, int64_t b);
/* ceil(a / b), the same way */
struct ir_dim sx_ceildiv(struct ir_infer *x, const struct ir_dim *a, int64_t b);
/* Same value, or the same symbolic expression. */
bool sx_eq(const struct ir_dim *a, const struct ir_dim *b);
/*
 * Two dims that must be equal: the better known one goes to *out (a number
 * over a symbol over unknown; the first symbol when both are symbols).
 * false when they are different numbers.
 */
bool sx_merge(const struct ir_dim *a, const struct ir_dim *b, struct ir_dim *out);
/* Merges d into *acc (see sx_merge); *acc is unchanged when they differ. */
bool sx_unify(struct ir_dim *acc, const struct ir_dim *d);
/* The product of dims [from, to), symbolic where they are. */
struct ir_dim sx_prod(struct ir_infer *x, const struct ir_dim *d, int from, int to);
/*
 * Multidirectional (numpy) broadcasting of two shapes into out (IR_MAX_RANK
 * dims); returns the rank, or -1 when they cannot broadcast (message in
 * *err, static).
 */
int sx_broadcast(const struct ir_dim *a, int ra, const struct ir_dim *b, int rb, struct ir_dim *out,
		 const char **err);
/* Normalizes an axis of a rank-r tensor (negative counts from the end); -1 if out of range. */
int sx_axis(int64_t axis, int r);
/* Copies dims (within the inference's arena). */
void sx_copy_dims(struct ir_dim *dst, const struct ir_dim *src, int rank);

/* ---- subgraphs and functions ---- */

/*
 * Infers a subgraph (If branches, Loop and Scan bodies) whose inputs get
 * the given types (NULL entries: leave the declared type); its outputs'
 * types are then sx_value_type(g->outputs[i]).
 */
void sx_infer_subgraph(struct ir_infer *x, struct ir_graph *g, int n_in, const struct ir_type *const *in_types);
/* The best known type of a value (inferred, else declared). */
const struct ir_type *sx_value_type(const struct ir_value *v);

/* ---- types ---- */
/* A tensor type in the arena: elem, rank, dims (copied). */
struct ir_type *sx_tensor_type(struct ir_infer *x, int elem, int rank, const struct ir_dim *dims);

#endif
