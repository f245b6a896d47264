/*
 * pass.h - graph rewrites: the pass registry, the pass manager, the stage
 * history, and the hand edits. The only public header of passes/.
 *
 * A pass is data plus a function (`struct pass`), one file each in passes/,
 * listed in registry.c. It rewrites a model in place and says what it did in
 * a report: what it matched, what it rewrote, what it rejected and why. The
 * manager runs it on a clone of the current stage, checks the result with
 * ir_model_verify() and keeps it as a new stage, or throws it away (a pass
 * that breaks an invariant is rolled back with an error).
 */
#ifndef OGSH_PASS_H
#define OGSH_PASS_H

#include "ir/ir.h"

/* ------------------------------------------------------------------------ */
/* Reports                                                                   */
/* ------------------------------------------------------------------------ */

enum pass_msg_kind { PASS_REWROTE = 0, PASS_REJECTED, PASS_NOTE };

struct pass_msg {
	enum pass_msg_kind kind;
	char *node;          /* the node it is about ("bn3", or "n12" when unnamed), or NULL */
	char *text;          /* "folded into 'conv3'", "scale is not a constant" */
};

/* A value of the new stage that stands for a value of the old one (the names). */
struct pass_map {
	char *new_name, *old_name;
};

struct pass_report {
	char *pass;                  /* the pass's name */
	int matched;                 /* places where the pattern was found */
	int rewritten;               /* of which rewritten */
	int rejected;                /* of which left alone (each with a PASS_REJECTED message) */
	struct pass_msg *msgs;
	int n_msgs, cap_msgs;
	struct pass_map *map;        /* see pass_maps() */
	int n_map, cap_map;
	bool changed;                /* the model changed */
};
void pass_report_init(struct pass_report *r, const char *pass);
void pass_report_clear(struct pass_report *r);
/* Appends the messages, counts and maps of `from` (optimize's combined report). */
int pass_report_merge(struct pass_report *into, const struct pass_report *from);

/* ------------------------------------------------------------------------ */
/* Passes                                                                    */
/* ------------------------------------------------------------------------ */

/* An option a pass takes ("max-bytes=1048576"). */
struct pass_option {
	const char *name;
	const char *type;      /* "int", "float", "bool", "string" */
	const char *dflt;      /* the default, as text */
	const char *help;      /* one line */
};

/* An option as given. */
struct pass_arg {
	const char *name, *value;
};

/* What a pass's run function gets. */
struct pass_ctx {
	struct ir_model *m;          /* the model to rewrite in place (a clone: the stage it came from is untouched) */
	const struct pass *pass;
	struct pass_report *rep;
	const struct pass_arg *args; /* checked against pass->options before run is called */
	int n_args;
	struct ir_diag *d;           /* errors (the pass failed: nothing is kept) */
	/* the session's calibration, with its value names those of the stage
	 * the pass runs on (the shell maps them); NULL when none */
	const struct ir_calib *calib;
};

/* Levels, as in optimize --level (a pass runs at its level and above). */
enum { PASS_LEVEL_BASIC = 1, PASS_LEVEL_EXTENDED = 2, PASS_LEVEL_ALL = 3 };

struct pass {
	const char *name;            /* "fuse-conv-bn" */
	const char *summary;         /* one line for `passes` */
	const char *explain;         /* the teacher's text for `explain` (paragraphs separated by "\n\n") */
	const struct pass_option *options;   /* ended by { NULL }; NULL: none */
	int level;                   /* PASS_LEVEL_*: the optimize level that includes it; 0: never */
	/*
	 * Rewrites c->m. Records every match in c->rep (pass_rewrote,
	 * pass_rejected) and pass_maps() for values that stand for old ones
	 * under another name. Returns 0, or an error code with a message in
	 * c->d (the model is then thrown away).
	 */
	int (*run)(struct pass_ctx *c);
};

/* The registry (passes/registry.c), in the order optimize runs them; NULL-ended. */
extern const struct pass *const pass_registry[];
const struct pass *pass_find(const char *name);

/* Report helpers for passes. `n` may be NULL. Messages: lowercase, no final period. */
void pass_rewrote(struct pass_ctx *c, const struct ir_node *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void pass_rejected(struct pass_ctx *c, const struct ir_node *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void pass_note(struct pass_ctx *c, const struct ir_node *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Records that value `new_name` of the new stage stands for `old_name` of the
 * old one (values that keep their name need nothing). */
void pass_maps(struct pass_ctx *c, const char *new_name, const char *old_name);

/* Options (defaults from the pass's option table when not given). */
int64_t pass_opt_int(const struct pass_ctx *c, const char *name);
double pass_opt_float(const struct pass_ctx *c, const char *name);
bool pass_opt_bool(const struct pass_ctx *c, const char *name);
const char *pass_opt_str(const struct pass_ctx *c, const char *name);

/* ------------------------------------------------------------------------ */
/* Helpers for writing passes (passes/util.c)                                */
/* ------------------------------------------------------------------------ */

/* Shape inference for the pass (ir_infer), skipped when the results are
 * still those of the graph (an earlier pass of optimize changed nothing).
 * 0 or an error code. */
int pass_infer(struct pass_ctx *c);
/* Readers of a value: node inputs (each slot), captures, and being a graph output. */
int pass_n_readers(const struct ir_value *v);
/* The only node reading v (through exactly one input slot), or NULL. */
struct ir_node *pass_only_reader(const struct ir_value *v);
/* The constant tensor of input `i` of n, or NULL (omitted or not constant). */
const struct ir_tensor *pass_const_input(const struct ir_node *n, int i);
/* A new initializer holding `t` (a reference is taken), named after `base`
 * made unique; NULL on error. */
struct ir_value *pass_new_init(struct ir_graph *g, const char *base, struct ir_tensor *t, struct ir_diag *d);
/* A new value named after `base` made unique; NULL on error. */
struct ir_value *pass_new_value(struct ir_graph *g, const char *base, struct ir_diag *d);
/* A new node of `op` (default domain) before `before`, named after anchor's
 * scope, reading in[0..n_in) and writing one new value named after
 * out_base; NULL with the error in c->d. */
struct ir_node *pass_emit(struct pass_ctx *c, const char *op, const struct ir_node *anchor, struct ir_value **in,
			  int n_in, const char *out_base, struct ir_node *before);
/*
 * Calls fn on every node of the main graph that want() takes, in graph
 * order. The candidates are listed (by id) before the first call, since a
 * rewrite removes nodes; one gone by the time its turn comes is skipped.
 * Stops at fn's first error and returns it; 0 otherwise.
 */
int pass_each_node(struct pass_ctx *c, bool (*want)(const struct ir_node *n),
		   int (*fn)(struct pass_ctx *c, struct ir_node *n));
/* Sets n's attribute `name` to the int v, or to the ints v[0..k) (added or replaced); 0 or an error code. */
int pass_set_int_attr(struct ir_node *n, const char *name, int64_t v, struct ir_diag *d);
int pass_set_ints_attr(struct ir_node *n, const char *name, const int64_t *v, int k, struct ir_diag *d);
/* A value name made unique in g from `base` ("w" -> "w", "w_1"...); owned by the caller. */
char *pass_unique_name(const struct ir_graph *g, const char *base);
/* A node's name for messages: its name, or "n<id>". */
const char *pass_node_name(const struct ir_node *n, char *buf, size_t size);
/* Removes the constants in vs[] (initializers or Constant nodes) that
 * nothing reads any more; vs may hold NULLs and repeats. */
void pass_drop_dead_consts(struct ir_value **vs, int n);
/* A float tensor's elements as doubles (caller frees); NULL if not a
 * float/int tensor or no memory. */
double *pass_tensor_f64(const struct ir_tensor *t);
/* A new tensor of dtype `dtype` and dims from doubles (rounded to the dtype). */
struct ir_tensor *pass_tensor_from_f64(int dtype, int rank, const int64_t *dims, const double *v, struct ir_diag *d);

/* --- matching and rewriting patterns (passes/match.c) --- */

/* n is op `op` with exactly n_in inputs, all given, and a first output. */
bool pass_is_op(const struct ir_node *n, int op, int n_in);
/* The node computing v, or NULL (v NULL, an input, an initializer). */
struct ir_node *pass_producer(const struct ir_value *v);
/* The other input of a two-input node, or NULL when v is not one of them (or both). */
struct ir_value *pass_other_input(const struct ir_node *n, const struct ir_value *v);
/* The rank shape inference knows for v, or -1. */
int pass_rank_of(const struct ir_value *v);
/*
 * Whether v is a constant float scalar (one element) that cannot change the
 * shape of a value of rank `rank` it is combined with (rank -1: unknown, then
 * only a 0-d constant will do). Its value goes to *out.
 */
bool pass_const_scalar(const struct ir_value *v, int rank, double *out);
/* The only node reading v through an input slot, or NULL with why. */
struct ir_node *pass_sole_reader(const struct ir_value *v, char *why, size_t size);
/* A name for a new node: the anchor's scope ("/a/b/Erf" -> "/a/b/Gelu") or "<anchor>_<op>", unique. */
char *pass_new_node_name(const struct ir_graph *g, const struct ir_node *anchor, const char *op);
/* Records the names of the nodes a fused node was made from. */
void pass_set_from(struct ir_node *n, struct ir_node *const *nodes, int k);
/* Appends to n's provenance what m was made from (m's own list, or its name). */
void pass_add_from(struct ir_node *n, const struct ir_node *m);
/*
 * Removes the pattern's nodes (whose outputs nothing reads any more) and then
 * the Constant nodes that fed them and are read by nothing else.
 */
int pass_remove_nodes(struct pass_ctx *c, struct ir_node **nodes, int k);
/* Whether nothing reads any output of n. */
bool pass_node_dead(const struct ir_node *n);
/*
 * Removes n when nothing reads it, then the producers of its inputs that
 * this leaves unread, transitively. Returns how many nodes went (n
 * included). Node ids, not pointers, sit on the work list: a node may be
 * reached twice and be gone the second time.
 */
int pass_remove_dead_from(struct ir_graph *g, struct ir_node *n);
/* Whether a node reads v through a subgraph capture. */
bool pass_read_in_subgraph(const struct ir_value *v);
/* "400 bytes", "1.0 KiB" for reports. */
const char *pass_bytes_text(double b, char *buf, size_t size);

/* ------------------------------------------------------------------------ */
/* The manager                                                               */
/* ------------------------------------------------------------------------ */

/* Checks options against the pass's table (known names, values of the right type). */
int pass_check_args(const struct pass *p, const struct pass_arg *args, int n, struct ir_diag *d);

/*
 * Runs pass p on m in place: checks the options, runs it, lists new
 * initializers as graph inputs before IR version 4, and verifies the
 * result. On failure m is in an unknown state and must be thrown away (d
 * says why: "pass 'x' broke the graph, rolled back: ..."). 0 or an error code.
 */
int pass_run(struct ir_model *m, const struct pass *p, const struct pass_arg *args, int n_args,
	     struct pass_report *rep, struct ir_diag *d);

/*
 * Runs pass p with options args on a clone of m. Checks the options, runs
 * the pass, verifies the result. On success *out is the new model (the
 * caller owns it; NULL with dry_run) and rep holds the report; on failure
 * nothing is kept and d says why (a broken invariant: "pass 'x' broke the
 * graph, rolled back: ..."). Returns 0 or an error code.
 */
int pass_apply(const struct ir_model *m, const struct pass *p, const struct pass_arg *args, int n_args,
	       bool dry_run, struct ir_model **out, struct pass_report *rep, struct ir_diag *d);
/* pass_run and pass_apply with the session's calibration (pass_ctx.calib; may be NULL). */
int pass_run_calib(struct ir_model *m, const struct pass *p, const struct pass_arg *args, int n_args,
		   const struct ir_calib *calib, struct pass_report *rep, struct ir_diag *d);
int pass_apply_calib(const struct ir_model *m, const struct pass *p, const struct pass_arg *args, int n_args,
		     const struct ir_calib *calib, bool dry_run, struct ir_model **out, struct pass_report *rep,
		     struct ir_diag *d);

/* ------------------------------------------------------------------------ */
/* Stages (passes/stages.c)                                                  */
/* ------------------------------------------------------------------------ */

struct pass_stage {
	struct ir_model *m;          /* owned */
	char *label;                 /* what made it: "loaded", "fuse-conv-bn", "rm relu2" */
	struct pass_report rep;      /* the pass's report (empty for hand edits) */
	int parent;                  /* the stage it was made from (-1 for stage 0) */
};

/* The stages of a session: stage 0 is the model as loaded; every pass or
 * edit appends one. Stages share tensor data (clones). */
struct pass_history {
	struct pass_stage *st;
	int n, cap;
	int cur;                     /* the stage being looked at and edited */
};

/* Starts a history with `m` (taken) as stage 0. */
int pass_history_init(struct pass_history *h, struct ir_model *m, const char *label);
void pass_history_free(struct pass_history *h);
/* Appends a stage made from the current one (takes `m` and the report's
 * contents, which is left empty); it becomes current. Stages after the
 * current one (undone) are dropped first, as an editor's redo list is. */
int pass_history_push(struct pass_history *h, struct ir_model *m, const char *label, struct pass_report *rep);
/* The model of the current stage. */
struct ir_model *pass_history_model(const struct pass_history *h);
/*
 * The name in stage `from` that value `name` of stage `to` stands for,
 * following the pass maps between them (either direction along the
 * history's parent chain); `name` itself when no map mentions it. Returns
 * NULL when the two stages are not on one line of descent.
 */
const char *pass_history_map(const struct pass_history *h, int to, int from, const char *name);

/*
 * Matching nodes between two stages, as `diff` and `dot --diff` do: nodes
 * keep their ids across stages (clones) and new nodes get new ones, so node
 * n of one stage is the node of `other` with its id and op type, or NULL
 * (removed there). pass_node_same_io: the same input and output value names
 * (else it was rewired). pass_node_same_attrs: the same attributes; when
 * not, `which` gets the names of those that differ ("strides, pads").
 */
const struct ir_node *pass_stage_match(const struct ir_graph *other, const struct ir_node *n);
bool pass_node_same_io(const struct ir_node *x, const struct ir_node *y);
bool pass_node_same_attrs(const struct ir_node *x, const struct ir_node *y, char *which, size_t size);

/* ------------------------------------------------------------------------ */
/* Hand edits (passes/edit.c)                                                */
/* ------------------------------------------------------------------------ */

/*
 * Removes node `n` from `g`. A node whose outputs are unused just goes.
 * Otherwise it must have one data input (the others constant or omitted)
 * and one used output: its consumers then read the data input instead. If
 * that output was a graph output, the data input takes over its name and
 * declared type, so the model's interface does not change. Warnings (a
 * type change seen by the consumers) go to `d`. Returns 0 or IR_ERR with
 * the reason; on error nothing changed.
 */
int pass_remove_node(struct ir_graph *g, struct ir_node *n, struct ir_diag *d);

#endif
