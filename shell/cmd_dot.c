/*
 * cmd_dot.c - dot: drawings through Graphviz.
 *
 * The drawing is built as a Graphviz graph with libcgraph (nodes, edges,
 * attributes, clusters), never by printing DOT text: agwrite prints it, and
 * libgvc lays it out and renders SVG, PNG or PDF in-process. What is drawn:
 * the nodes of the main graph of a stage (or a part of them: --around,
 * --from/--to), the graph inputs and outputs, and one edge per tensor and
 * reader labelled with the tensor's type. Initializers and Constant nodes
 * are folded into the label of the node that reads them unless --weights.
 * Overlays colour the nodes: by op family (the default, with a legend), by
 * a per-node figure (--color-by flops|memory|time|error, a 9-step scale), by
 * the precision a node computes in (--color-by precision), or by what
 * changed since another stage (--diff A). Quantization is drawn compactly
 * unless --qdq-nodes: a DequantizeLinear of a quantized weight folds into
 * its reader's label like a constant, and a QuantizeLinear ->
 * DequantizeLinear pair of activations becomes a mark on the edge it sits on.
 */
#include "shell.h"

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Layout cost. Graphviz's dot turns an edge label into an extra rank and a
 * long edge into a chain of virtual nodes, and places all of them with
 * network simplex: with every edge labelled, GPT-2's 1,286 drawn nodes
 * take 40 s. Above DOT_MEDIUM_NODES edges carry their tensor type as a
 * tooltip (the producer's label has it too) and network simplex is limited
 * (1 s); above DOT_CHEAP_NODES edges are straight lines, crossing
 * minimisation stops early and long edges are cut short (a 5,000-node
 * transformer in about 3.5 s).
 */
#define DOT_MEDIUM_NODES 300
#define DOT_CHEAP_NODES 1500
/* Without --max-nodes, drawings of more nodes are refused. */
#define DOT_MAX_NODES 20000
/* In large drawings an edge spanning more ranks is cut short: long
 * edges become chains of virtual nodes that the layout places one by one. */
#define DOT_LONG_EDGE 6
/* Label caps. */
#define DOT_NAME_MAX 48
#define DOT_LINE_MAX 60
#define DOT_LABEL_MAX 1024

/* ------------------------------------------------------------------------ */
/* Graphviz messages                                                         */
/* ------------------------------------------------------------------------ */

static char gv_msg[512];
static size_t gv_len;

/* Graphviz reports "Error", ": ", the text: in pieces. Keep them all (capped). */
static int gv_errf(char *msg)
{
	size_t n = strlen(msg);
	if (gv_len + n >= sizeof(gv_msg))
		n = sizeof(gv_msg) - 1 - gv_len;
	memcpy(gv_msg + gv_len, msg, n);
	gv_len += n;
	gv_msg[gv_len] = 0;
	return 0;
}

/* Starts keeping Graphviz's messages (gv_restore puts its handler back). */
static void gv_capture(void)
{
	gv_len = 0;
	gv_msg[0] = 0;
	agreseterrors();
}

static agusererrf gv_saved_f;
static agerrlevel_t gv_saved_level;

static void gv_install(void)
{
	gv_saved_f = agseterrf(gv_errf);
	gv_saved_level = agseterr(AGERR);
	gv_capture();
}

static void gv_restore(void)
{
	agseterrf(gv_saved_f);
	agseterr(gv_saved_level);
}

/* The first message captured, as one lowercase line without "Error: "; NULL if none. */
static const char *gv_error(void)
{
	if (!gv_len)
		return NULL;
	char *p = gv_msg;
	for (;;) {
		while (*p == ' ' || *p == '\n')
			p++;
		if (!strncmp(p, "Error: ", 7))
			p += 7;
		else if (!strncmp(p, "Warning: ", 9))
			p += 9;
		else
			break;
	}
	char *nl = strchr(p, '\n');
	if (nl)
		*nl = 0;
	size_t n = strlen(p);
	while (n && (p[n - 1] == ' ' || p[n - 1] == '.'))
		p[--n] = 0;
	if (p[0] >= 'A' && p[0] <= 'Z' && !(p[1] >= 'A' && p[1] <= 'Z'))
		p[0] = (char)(p[0] - 'A' + 'a');
	return p[0] ? p : NULL;
}

/*
 * Some Graphviz messages go straight to stderr (the cairo renderer's
 * "graph is too large... Scaling"): stderr is sent to a temporary file
 * while Graphviz lays out and renders, and what it got comes back as one
 * line.
 */
struct gv_stderr {
	int saved;
	FILE *tmp;
};

static void gv_stderr_begin(struct gv_stderr *c)
{
	c->saved = -1;
	fflush(stderr);
	c->tmp = tmpfile();
	if (!c->tmp)
		return;
	c->saved = dup(2);
	if (c->saved < 0 || dup2(fileno(c->tmp), 2) < 0) {
		if (c->saved >= 0)
			close(c->saved);
		c->saved = -1;
		fclose(c->tmp);
		c->tmp = NULL;
	}
}

/* Restores stderr; the first line Graphviz printed goes to buf ("" if none). */
static void gv_stderr_end(struct gv_stderr *c, char *buf, size_t size)
{
	buf[0] = 0;
	if (!c->tmp)
		return;
	fflush(stderr);
	dup2(c->saved, 2);
	close(c->saved);
	rewind(c->tmp);
	char line[512];
	while (fgets(line, sizeof(line), c->tmp)) {
		char *p = line;
		if (!strncmp(p, "(null): ", 8))
			p += 8;
		if (!strncmp(p, "Error: ", 7))
			p += 7;
		if (!strncmp(p, "Warning: ", 9))
			p += 9;
		size_t n = strcspn(p, "\n");
		p[n] = 0;
		while (n && (p[n - 1] == ' ' || p[n - 1] == '.'))
			p[--n] = 0;
		if (n) {
			snprintf(buf, size, "%s", p);
			break;
		}
	}
	fclose(c->tmp);
	c->tmp = NULL;
}

/*
 * Object ids in creation order. Graphviz's default id discipline makes a
 * named object's id the address of its name string, and agwrite prints
 * subgraphs (clusters) in id order: the DOT would change from run to run.
 * Here a name's id is 2 * (its index + 1) in a table of the names seen
 * (kept as the graph's own reference-counted strings, as Graphviz expects).
 */
struct idmap {
	Agraph_t *g;         /* the names are its reference-counted strings (agwrite looks at their flags) */
	char **names;
	size_t n, cap;
	uint32_t *slots;     /* open addressing: index + 1, 0 empty */
	size_t nslots;       /* a power of two */
	IDTYPE anon;         /* odd ids of anonymous objects */
};

static uint64_t id_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static void *id_open(Agraph_t *g, Agdisc_t *disc)
{
	(void)disc;
	struct idmap *m = calloc(1, sizeof(*m));
	if (m) {
		m->anon = 1;
		m->g = g;
	}
	return m;
}

static bool id_grow(struct idmap *m)
{
	size_t ns = m->nslots ? m->nslots * 2 : 1024;
	uint32_t *sl = calloc(ns, sizeof(*sl));
	if (!sl)
		return false;
	for (size_t i = 0; i < m->n; i++) {
		size_t h = (size_t)id_hash(m->names[i]) & (ns - 1);
		while (sl[h])
			h = (h + 1) & (ns - 1);
		sl[h] = (uint32_t)(i + 1);
	}
	free(m->slots);
	m->slots = sl;
	m->nslots = ns;
	return true;
}

static long id_map(void *state, int objtype, char *str, IDTYPE *id, int createflag)
{
	struct idmap *m = state;
	(void)objtype;
	if (!str) {
		*id = m->anon;
		m->anon += 2;
		return 1;
	}
	if (m->nslots) {
		size_t h = (size_t)id_hash(str) & (m->nslots - 1);
		while (m->slots[h]) {
			if (!strcmp(m->names[m->slots[h] - 1], str)) {
				*id = 2 * (IDTYPE)m->slots[h];
				return 1;
			}
			h = (h + 1) & (m->nslots - 1);
		}
	}
	if (!createflag)
		return 0;
	if ((m->n + 1) * 2 > m->nslots && !id_grow(m))
		return 0;
	if (m->n == m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 256;
		char **nn = realloc(m->names, nc * sizeof(*nn));
		if (!nn)
			return 0;
		m->names = nn;
		m->cap = nc;
	}
	char *copy = agstrdup(m->g, str);
	if (!copy)
		return 0;
	m->names[m->n++] = copy;
	size_t h = (size_t)id_hash(str) & (m->nslots - 1);
	while (m->slots[h])
		h = (h + 1) & (m->nslots - 1);
	m->slots[h] = (uint32_t)m->n;
	*id = 2 * (IDTYPE)m->n;
	return 1;
}

static long id_alloc(void *state, int objtype, IDTYPE request)
{
	(void)state;
	(void)objtype;
	(void)request;
	return 0;
}

static void id_free(void *state, int objtype, IDTYPE id)
{
	(void)state;
	(void)objtype;
	(void)id;
}

static char *id_print(void *state, int objtype, IDTYPE id)
{
	struct idmap *m = state;
	(void)objtype;
	if (id % 2 == 0 && id / 2 >= 1 && id / 2 <= m->n)
		return m->names[id / 2 - 1];
	return NULL;
}

static void id_close(void *state)
{
	struct idmap *m = state;
	if (!m)
		return;
	free(m->names);   /* the strings go with the graph */
	free(m->slots);
	free(m);
}

static void id_register(void *state, int objtype, void *obj)
{
	(void)state;
	(void)objtype;
	(void)obj;
}

static Agiddisc_t dot_iddisc = { id_open, id_map, id_alloc, id_free, id_print, id_close, id_register };

/* ------------------------------------------------------------------------ */
/* Labels                                                                    */
/* ------------------------------------------------------------------------ */

/* A label being built: lines joined with Graphviz's "\n" escape. */
struct lbl {
	char b[DOT_LABEL_MAX];
	size_t n;
	int lines;
};

/* Length of a valid UTF-8 sequence at p, or 0. */
static int utf8_len(const unsigned char *p)
{
	int k;
	if (p[0] < 0x80)
		return 1;
	if ((p[0] & 0xe0) == 0xc0 && p[0] >= 0xc2)
		k = 2;
	else if ((p[0] & 0xf0) == 0xe0)
		k = 3;
	else if ((p[0] & 0xf8) == 0xf0 && p[0] <= 0xf4)
		k = 4;
	else
		return 0;
	for (int i = 1; i < k; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	return k;
}

/* Appends text to the label: backslashes doubled (Graphviz escapes),
 * control bytes and bad UTF-8 as '?', at most `max` characters (the tail
 * kept, after "..."; 0: no cap). */
static void lbl_text(struct lbl *l, const char *text, int max)
{
	const unsigned char *p = (const unsigned char *)(text ? text : "");
	if (max > 0) {
		/* count characters; keep the last max-3 when too long */
		int chars = 0;
		for (const unsigned char *q = p; *q; q++)
			if ((*q & 0xc0) != 0x80)
				chars++;
		if (chars > max) {
			int skip = chars - (max - 3);
			while (*p && skip > 0) {
				p++;
				if ((*p & 0xc0) != 0x80)
					skip--;
			}
			lbl_text(l, "...", 0);
		}
	}
	while (*p && l->n + 8 < sizeof(l->b)) {
		int k = utf8_len(p);
		if (*p == '\\') {
			l->b[l->n++] = '\\';
			l->b[l->n++] = '\\';
			p++;
		} else if (k == 1 && *p >= 0x20 && *p != 0x7f) {
			l->b[l->n++] = (char)*p++;
		} else if (k > 1) {
			memcpy(l->b + l->n, p, (size_t)k);
			l->n += (size_t)k;
			p += k;
		} else {
			l->b[l->n++] = '?';
			p++;
		}
	}
	l->b[l->n] = 0;
}

static void lbl_line(struct lbl *l, const char *text, int max)
{
	if (l->lines && l->n + 3 < sizeof(l->b)) {
		l->b[l->n++] = '\\';
		l->b[l->n++] = 'n';
		l->b[l->n] = 0;
	}
	l->lines++;
	lbl_text(l, text, max);
}

static void lbl_linef(struct lbl *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void lbl_linef(struct lbl *l, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	lbl_line(l, buf, DOT_LINE_MAX);
}


/* ------------------------------------------------------------------------ */
/* Op families and colours                                                   */
/* ------------------------------------------------------------------------ */

enum fam {
	FAM_CONV, FAM_MATMUL, FAM_ATTENTION, FAM_NORM, FAM_ELEMWISE, FAM_FUSED, FAM_POOL,
	FAM_SHAPE, FAM_CONTROL, FAM_QUANT, FAM_CONST, FAM_OTHER, FAM_COUNT
};

static const struct {
	const char *name, *fill;
} families[FAM_COUNT] = {
	[FAM_CONV] = { "convolution", "#8ecae6" },
	[FAM_MATMUL] = { "matmul / gemm", "#b39ddb" },
	[FAM_ATTENTION] = { "attention", "#f48fb1" },
	[FAM_NORM] = { "normalization", "#a5d6a7" },
	[FAM_ELEMWISE] = { "elementwise / activation", "#fff59d" },
	[FAM_FUSED] = { "fused pointwise", "#ffd54f" },
	[FAM_POOL] = { "pooling / reduction", "#ffcc80" },
	[FAM_SHAPE] = { "shape / data movement", "#e0e0e0" },
	[FAM_CONTROL] = { "control flow", "#f8bbd0" },
	[FAM_QUANT] = { "quantization", "#80cbc4" },
	[FAM_CONST] = { "constant", "#ffffff" },
	[FAM_OTHER] = { "other", "#d7ccc8" },
};

#define FILL_INPUT "#c5e1a5"
#define FILL_OUTPUT "#ffccbc"
#define FILL_WEIGHT "#f5f5f5"
#define FILL_NOVALUE "#d9d9d9"
#define FILL_SAME "#f5f5f5"
#define FILL_ADDED "#c8f7c5"
#define LINE_ADDED "#2e7d32"
#define FILL_CHANGED "#ffe0b2"
#define LINE_CHANGED "#ef6c00"
#define FILL_REMOVED "#ffcdd2"
#define LINE_REMOVED "#c62828"
#define FILL_BLOCK "#e8eaf6"
/* a Q->DQ pair drawn as a mark on its edge */
#define LINE_QDQ "#6a1b9a"

/* --color-by precision: one fill per precision class */
enum prec { PR_FLOAT32, PR_FLOAT16, PR_BFLOAT16, PR_FP8, PR_INT8, PR_INT4, PR_OTHER, PR_COUNT };
static const struct {
	const char *name, *fill;
} precs[PR_COUNT] = {
	[PR_FLOAT32] = { "float32", "#bbdefb" },
	[PR_FLOAT16] = { "float16", "#c8e6c9" },
	[PR_BFLOAT16] = { "bfloat16", "#b2dfdb" },
	[PR_FP8] = { "fp8", "#f8bbd0" },
	[PR_INT8] = { "int8", "#ffcc80" },
	[PR_INT4] = { "int4", "#d1c4e9" },
	[PR_OTHER] = { "other", "#eeeeee" },
};

static enum prec prec_of(int p)
{
	switch (ir_precision_class(p)) {
	case IR_FLOAT: return PR_FLOAT32;
	case IR_FLOAT16: return PR_FLOAT16;
	case IR_BFLOAT16: return PR_BFLOAT16;
	case IR_F8E4M3FN: return PR_FP8;
	case IR_INT8: return PR_INT8;
	case IR_INT4: return PR_INT4;
	default: return PR_OTHER;
	}
}

/* 9 steps, white -> yellow -> red (ColorBrewer YlOrRd) */
static const char *const scale9[9] = { "#ffffcc", "#ffeda0", "#fed976", "#feb24c", "#fd8d3c",
				       "#fc4e2a", "#e31a1c", "#bd0026", "#800026" };

static bool op_is(const struct ir_node *n, const char *const *names)
{
	for (; *names; names++)
		if (!strcmp(n->op_type, *names))
			return true;
	return false;
}

static enum fam op_family(const struct ir_node *n)
{
	static const char *const conv[] = { "Conv", "ConvTranspose", "FusedConv", "ConvInteger", "QLinearConv",
					    "DeformConv", NULL };
	static const char *const mm[] = { "MatMul", "Gemm", "FusedGemm", "MatMulInteger", "QLinearMatMul",
					  "Einsum", "FusedMatMul", NULL };
	static const char *const att[] = { "Attention", "MultiHeadAttention", "FusedAttention", NULL };
	static const char *const pool[] = { "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
					    "LpPool", "GlobalLpPool", "MaxRoiPool", "RoiAlign", "ArgMax", "ArgMin",
					    "TopK", "CumSum", NULL };
	static const char *const act[] = { "Softmax", "LogSoftmax", "Hardmax", "Gelu", "FastGelu", NULL };
	static const char *const norm[] = { "LayerNormalization", "SimplifiedLayerNormalization",
					    "RMSNormalization", "SkipLayerNormalization", NULL };
	if (n->op == IR_OP_UNKNOWN && n->domain && !strcmp(n->domain, "ai.ogsh") && !strcmp(n->op_type, "Pointwise"))
		return FAM_FUSED;
	if (!strcmp(n->op_type, "Pointwise"))
		return FAM_FUSED;
	if (!strcmp(n->op_type, "Constant"))
		return FAM_CONST;
	if (op_is(n, conv))
		return FAM_CONV;
	if (op_is(n, mm))
		return FAM_MATMUL;
	if (op_is(n, att))
		return FAM_ATTENTION;
	if (op_is(n, norm))
		return FAM_NORM;
	if (op_is(n, act))
		return FAM_ELEMWISE;
	if (op_is(n, pool))
		return FAM_POOL;
	unsigned f = n->op >= 0 ? ir_ops[n->op].flags : 0;
	if (f & IR_OPF_CONTROL)
		return FAM_CONTROL;
	if (f & IR_OPF_NORM)
		return FAM_NORM;
	if (f & IR_OPF_QUANT)
		return FAM_QUANT;
	if (f & IR_OPF_REDUCE)
		return FAM_POOL;
	if (f & IR_OPF_ELEMENTWISE)
		return FAM_ELEMWISE;
	if (f & IR_OPF_SHAPE_ONLY)
		return FAM_SHAPE;
	static const char *const shape[] = { "Shape", "Size", "Gather", "GatherElements", "GatherND", "Slice",
					     "Concat", "Split", "Reshape", "Transpose", "Squeeze", "Unsqueeze",
					     "Flatten", "Expand", "Tile", "Pad", "Cast", "CastLike", "Identity",
					     "ConstantOfShape", "Range", "ScatterND", "ScatterElements", "Resize",
					     "DepthToSpace", "SpaceToDepth", "NonZero", "OneHot", NULL };
	if (op_is(n, shape))
		return FAM_SHAPE;
	return FAM_OTHER;
}

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

enum color_by { BY_OP = 0, BY_FLOPS, BY_MEMORY, BY_TIME, BY_ERROR, BY_PRECISION };

struct dot_opts {
	const char *file;
	const char *format;       /* "dot", "svg", "png", "pdf"; NULL: DOT on stdout */
	int stage;
	int diff;                 /* stage to compare with, -1: none */
	const char *around;
	int radius;
	const char *from_t, *to_t;
	bool collapse;
	int depth;                /* 0: chosen */
	bool expand_fused;
	bool weights;
	bool qdq_nodes;           /* Q/DQ drawn as nodes */
	enum color_by by;
	const char *rankdir;
	int max_nodes;
};

/* ------------------------------------------------------------------------ */
/* The drawing                                                               */
/* ------------------------------------------------------------------------ */

enum { ST_SAME = 0, ST_ADDED, ST_CHANGED };

struct dot {
	struct session *s;
	const struct dot_opts *o;
	struct ir_model *m;
	struct ir_graph *g;
	Agraph_t *G;
	Agsym_t *nlabel, *nshape, *nstyle, *nfill, *ncolor, *npen, *ntip, *nfont, *nfontcolor;
	Agsym_t *elabel, *estyle, *ecolor, *edir, *etip;
	int nid;                  /* g->next_id */
	bool *sel;                /* drawn (by id) */
	bool *folded;             /* Constant nodes folded into their readers (by id); weight DQs and Q/DQ pairs too */
	bool *pair;               /* a folded Q or DQ of a Q->DQ pair, drawn as a mark on the edge (by id) */
	Agnode_t **an;            /* the drawn node standing for node id (itself or its block) */
	int *block;               /* --collapse: block index by id (-1: none) */
	Agnode_t **in_nodes;      /* by graph input index */
	Agnode_t **out_nodes;     /* by graph output index */
	int *status;              /* --diff: ST_* by id */
	double *val;              /* --color-by: figure by id (NaN: none) */
	double *bval;             /* --color-by with --collapse: figure by block (sums) */
	double vmin, vmax;
	bool vlog;
	const char *unit;
	unsigned fams;            /* families drawn (legend) */
	unsigned precs;           /* precisions drawn (legend of --color-by precision) */
	int n_marks;              /* Q->DQ pairs drawn as edge marks */
	int n_nodes, n_edges, n_added, n_changed, n_removed;
	int n_sub;                /* subgraph clusters made */
	int center;               /* --around: the node's id */
	bool cheap;               /* a large drawing: cheaper layout settings */
	bool medium;              /* no edge labels, limited positioning */
	bool whole;               /* every node drawn (no --around, --from, --to) */
	int *depth;               /* cheap: longest path from the inputs, by id */
	int n_ends;               /* cheap: long edges cut short */
	char **block_names;
	int n_blocks;
};

static char *cs(const char *s)
{
	return (char *)s;
}

static Agnode_t *mknode(struct dot *d, Agraph_t *in, const char *name)
{
	Agnode_t *n = agnode(in, cs(name), 1);
	if (n)
		d->n_nodes++;
	return n;
}

static void set(void *obj, Agsym_t *sym, const char *v)
{
	if (obj && sym)
		agxset(obj, sym, cs(v));
}

/* The name a node goes by in labels: its name, or n<id> */
static const char *node_label_name(const struct ir_node *n, char *buf, size_t size)
{
	if (n->name && n->name[0])
		return n->name;
	snprintf(buf, size, "n%d", n->id);
	return buf;
}

static bool key_attr(const char *name)
{
	static const char *const keys[] = { "kernel_shape", "strides", "pads", "dilations", "group", "perm", "axis",
					    "axes", "activation", "expr", "to", "mode", "transA", "transB",
					    "num_heads", "keepdims", "epsilon", "alpha", "beta", "auto_pad", NULL };
	for (int i = 0; keys[i]; i++)
		if (!strcmp(keys[i], name))
			return true;
	return false;
}

static bool boring_attr(const struct ir_attr *a)
{
	/* defaults that say nothing: zero pads, unit dilations, group 1, transX 0 */
	if (!strcmp(a->name, "pads") || !strcmp(a->name, "dilations")) {
		int64_t want = strcmp(a->name, "pads") ? 1 : 0;
		if (a->type != IR_ATTR_INTS)
			return false;
		for (size_t i = 0; i < a->n; i++)
			if (a->ints[i] != want)
				return false;
		return true;
	}
	if (!strcmp(a->name, "group"))
		return a->type == IR_ATTR_INT && a->i == 1;
	if (!strcmp(a->name, "transA") || !strcmp(a->name, "transB"))
		return a->type == IR_ATTR_INT && a->i == 0;
	return false;
}

/* A Constant node with no inputs whose value is a tensor (folded unless --weights). */
static bool is_const_node(const struct ir_node *n)
{
	return !strcmp(n->op_type, "Constant") && n->n_inputs == 0 && n->n_outputs == 1 && n->outputs[0] &&
	       (!n->domain || !n->domain[0] || !strcmp(n->domain, "ai.onnx"));
}

/* Whether value v is drawn as part of its reader's label (an initializer, a folded Constant). */
static bool folded_value(const struct dot *d, const struct ir_value *v)
{
	if (d->o->weights)
		return false;
	if (v->init || v->sparse_init)
		return !v->producer;
	if (v->producer && v->producer->graph == d->g && d->folded[v->producer->id] && !d->pair[v->producer->id] &&
	    v->producer->op == IR_OP_DequantizeLinear)
		return true;   /* a quantized weight, in its reader's label */
	return v->producer && is_const_node(v->producer);
}

/* The scale of a quantization, short: "0.0123", "per channel", "block 32". */
static const char *qdq_short(const struct ir_qdq *q, char *buf, size_t size)
{
	if (q->kind == IR_QDQ_TENSOR)
		snprintf(buf, size, "%.3g", q->scale_min);
	else if (q->kind == IR_QDQ_CHANNEL)
		snprintf(buf, size, "per channel");
	else if (q->kind == IR_QDQ_BLOCKED)
		snprintf(buf, size, "block %lld", (long long)q->block_size);
	else
		snprintf(buf, size, "dynamic scale");
	return buf;
}

/* A quantized weight's line: "W int8[64,3,7,7] (9,408) per channel". */
static void dq_weight_line(struct lbl *l, int slot, const struct ir_node *dq)
{
	char tb[160], nb[40], qb[64];
	const struct ir_tensor *t = ir_value_const(dq->inputs[0]);
	struct ir_qdq q;
	ir_qdq_params(dq, &q);
	const char *role = slot == 1 ? "W" : slot == 2 ? "B" : "const";
	if (!t)
		return;
	ir_dims_str(t->rank, t->dims, tb, sizeof(tb));
	lbl_linef(l, "%s %s%s (%s) %s%s", role, ir_dtype_name(t->dtype), tb, sh_count(t->numel, nb, sizeof(nb)),
		  q.kind == IR_QDQ_TENSOR ? "scale " : "", qdq_short(&q, qb, sizeof(qb)));
}

/* A constant's line: "W float32[64,3,7,7] (9,408)" or "axes = [0]" */
static void const_line(struct lbl *l, int slot, const struct ir_value *v)
{
	char tb[160], nb[40];
	const struct ir_tensor *t = ir_value_const(v);
	const char *role = slot == 1 ? "W" : slot == 2 ? "B" : NULL;
	if (t && t->numel <= 8 && t->dtype != IR_STRING && (ir_dtype_is_int(t->dtype) || t->numel <= 4)) {
		/* small constants: the values */
		char vb[160];
		size_t k = 0;
		k += (size_t)snprintf(vb + k, sizeof(vb) - k, "%s", t->rank ? "[" : "");
		for (uint64_t i = 0; i < t->numel && k < sizeof(vb) - 24; i++)
			k += (size_t)snprintf(vb + k, sizeof(vb) - k, "%s%.6g", i ? "," : "", ir_tensor_get_f64(t, i));
		snprintf(vb + k, sizeof(vb) - k, "%s", t->rank ? "]" : "");
		lbl_linef(l, "in%d = %s", slot, vb);
		return;
	}
	if (t) {
		ir_dims_str(t->rank, t->dims, tb, sizeof(tb));
		lbl_linef(l, "%s %s%s (%s)", role ? role : "const", ir_dtype_name(t->dtype), tb,
			  sh_count(t->numel, nb, sizeof(nb)));
	} else {
		lbl_linef(l, "%s %s", role ? role : "const", ir_type_str(ir_value_type(v), tb, sizeof(tb)));
	}
}

/* The ops the nodes a fused node came from had: looked up by name in the
 * stages before this one. "" when not found. */
static const char *origin_op(struct dot *d, const char *name)
{
	const struct pass_history *h = &d->s->hist;
	int st = d->o->stage;
	while (st >= 0 && st < h->n) {
		int cnt = 0;
		const struct ir_node *n = ir_node_by_name(h->st[st].m->graph, name, &cnt);
		if (n && strcmp(n->op_type, "Constant"))
			return n->op_type;
		st = h->st[st].parent;
	}
	return "";
}

static void node_label(struct dot *d, const struct ir_node *n, struct lbl *l)
{
	char nb[40], ab[256], tb[200];
	l->n = 0;
	l->b[0] = 0;
	l->lines = 0;
	if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") && strcmp(n->domain, "ai.ogsh")) {
		char ob[200];
		snprintf(ob, sizeof(ob), "%s (%s)", n->op_type, n->domain);
		lbl_line(l, ob, DOT_LINE_MAX);
	} else {
		lbl_line(l, n->op_type, DOT_LINE_MAX);
	}
	lbl_line(l, node_label_name(n, nb, sizeof(nb)), DOT_NAME_MAX);
	int shown = 0;
	for (int i = 0; i < n->n_attrs; i++) {
		const struct ir_attr *a = &n->attrs[i];
		if (!key_attr(a->name) || boring_attr(a))
			continue;
		if (shown == 4)
			break;
		lbl_linef(l, "%s=%s", a->name, ir_attr_str(a, ab, sizeof(ab)));
		shown++;
	}
	int consts = 0, more = 0;
	for (int i = 0; i < n->n_inputs; i++) {
		const struct ir_value *v = n->inputs[i];
		if (!v || !folded_value(d, v))
			continue;
		if (consts++ >= 4)
			more++;
		else if (v->producer && v->producer->op == IR_OP_DequantizeLinear)
			dq_weight_line(l, i, v->producer);
		else
			const_line(l, i, v);
	}
	if (more)
		lbl_linef(l, "+%d more constants", more);
	if (n->n_from > 0 && !d->o->expand_fused) {
		char fb[400];
		size_t k = 0;
		fb[0] = 0;
		for (int i = 0; i < n->n_from && k < 200; i++)
			k += (size_t)snprintf(fb + k, sizeof(fb) - k, "%s%s", i ? ", " : "", n->from[i]);
		char lb[480];
		snprintf(lb, sizeof(lb), "from: %s", fb);
		lbl_line(l, lb, DOT_LINE_MAX);
	}
	int outs = 0;
	for (int i = 0; i < n->n_outputs; i++)
		outs += n->outputs[i] != NULL;
	if (outs && n->outputs[0]) {
		ir_type_str(ir_value_type(n->outputs[0]), tb, sizeof(tb));
		if (outs > 1)
			lbl_linef(l, "-> %s (+%d)", tb, outs - 1);
		else
			lbl_linef(l, "-> %s", tb);
	}
	if (d->o->by == BY_PRECISION)
		lbl_line(l, ir_precision_name(ir_node_precision(n)), 0);
	if (d->val && n->id < d->nid && !isnan(d->val[n->id])) {
		char vb[40];
		if (d->o->by == BY_MEMORY)
			lbl_linef(l, "%s moved", sh_bytes((uint64_t)d->val[n->id], vb, sizeof(vb)));
		else if (d->o->by == BY_FLOPS)
			lbl_linef(l, "%s FLOPs", sh_si(d->val[n->id], vb, sizeof(vb)));
		else
			lbl_linef(l, "%.4g %s", d->val[n->id], d->unit);
	}
}

static int scale_step(const struct dot *d, double v)
{
	double lo = d->vmin, hi = d->vmax, x = v;
	if (d->vlog) {
		lo = log10(lo > 0 ? lo : 1e-30);
		hi = log10(hi);
		x = log10(v > 0 ? v : 1e-30);
	}
	if (!(hi > lo))
		return 8;
	int k = (int)floor((x - lo) / (hi - lo) * 9);
	return k < 0 ? 0 : k > 8 ? 8 : k;
}

static double step_bound(const struct dot *d, int k)
{
	if (d->vlog) {
		double lo = log10(d->vmin), hi = log10(d->vmax);
		return pow(10, lo + (hi - lo) * k / 9);
	}
	return d->vmin + (d->vmax - d->vmin) * k / 9;
}

/* Styles an op node's agnode for the overlay in use. */
static void style_node(struct dot *d, Agnode_t *an, const struct ir_node *n)
{
	enum fam f = op_family(n);
	if (d->o->diff >= 0) {
		int st = d->status[n->id];
		set(an, d->nfill, st == ST_ADDED ? FILL_ADDED : st == ST_CHANGED ? FILL_CHANGED : FILL_SAME);
		if (st != ST_SAME) {
			set(an, d->ncolor, st == ST_ADDED ? LINE_ADDED : LINE_CHANGED);
			set(an, d->npen, "2");
		}
	} else if (d->o->by == BY_PRECISION) {
		enum prec p = prec_of(ir_node_precision(n));
		set(an, d->nfill, precs[p].fill);
		d->precs |= 1u << p;
	} else if (d->val) {
		double v = d->val[n->id];
		if (isnan(v)) {
			set(an, d->nfill, FILL_NOVALUE);
		} else {
			int k = scale_step(d, v);
			set(an, d->nfill, scale9[k]);
			if (k >= 6)
				set(an, d->nfontcolor, "white");
		}
	} else {
		set(an, d->nfill, families[f].fill);
		d->fams |= 1u << f;
	}
}

static Agnode_t *draw_op(struct dot *d, Agraph_t *in, const struct ir_node *n, const char *dotname)
{
	Agnode_t *an = mknode(d, in, dotname);
	if (!an)
		return NULL;
	struct lbl l;
	node_label(d, n, &l);
	set(an, d->nlabel, l.b);
	char tip[160], nb[40];
	snprintf(tip, sizeof(tip), "n%d %s (%s)", n->id, node_label_name(n, nb, sizeof(nb)), n->op_type);
	struct lbl t = { .n = 0 };
	lbl_text(&t, tip, 150);
	set(an, d->ntip, t.b);
	style_node(d, an, n);
	return an;
}

static Agedge_t *mkedge(struct dot *d, Agnode_t *a, Agnode_t *b, const struct ir_value *v, bool dedupe)
{
	if (!a || !b)
		return NULL;
	if (dedupe) {
		Agedge_t *e = agedge(d->G, a, b, NULL, 0);
		if (e)
			return NULL;
	}
	Agedge_t *e = agedge(d->G, a, b, NULL, 1);
	if (!e)
		return NULL;
	d->n_edges++;
	if (v) {
		/* large drawings: edge labels become extra nodes of the layout; the
		 * type is then a tooltip (it is in the producer's label too) */
		char tb[200];
		struct lbl l = { .n = 0 };
		lbl_text(&l, ir_type_str(ir_value_type(v), tb, sizeof(tb)), 40);
		set(e, d->medium ? d->etip : d->elabel, l.b);
	}
	return e;
}

/*
 * What v stands for in the drawing: when it is the output of a Q->DQ pair
 * drawn as an edge mark, the value the pair quantizes (*dq: the pair's
 * DequantizeLinear, NULL when none); else v.
 */
static const struct ir_value *through_pair(const struct dot *d, const struct ir_value *v, const struct ir_node **dq)
{
	if (dq)
		*dq = NULL;
	for (int hops = 0; v && v->producer && v->producer->graph == d->g && d->pair[v->producer->id] && hops < 8;
	     hops++) {
		const struct ir_node *p = v->producer;   /* the pair's DQ; its x is the Q's output */
		if (dq && !*dq)
			*dq = p;
		const struct ir_node *q = p->inputs[0]->producer;
		v = q->inputs[0];
	}
	return v;
}

/* Marks edge e, which carries v through the Q->DQ pair ending in dq: "int8 0.0123" over its type, a diamond at its tail. */
static void qdq_mark(struct dot *d, Agedge_t *e, const struct ir_node *dq, const struct ir_value *v)
{
	if (!e || !dq)
		return;
	struct ir_qdq q;
	char qb[64], tb[200];
	ir_qdq_params(dq, &q);
	struct lbl l = { .n = 0 };
	lbl_linef(&l, "%s %s", q.dtype ? ir_dtype_name(q.dtype) : "?", qdq_short(&q, qb, sizeof(qb)));
	lbl_line(&l, ir_type_str(ir_value_type(v), tb, sizeof(tb)), 40);
	set(e, d->medium ? d->etip : d->elabel, l.b);
	set(e, d->ecolor, LINE_QDQ);
	set(e, d->edir, "both");
	agsafeset(e, "arrowtail", "diamond", "normal");
	agsafeset(e, "fontcolor", LINE_QDQ, "#555555");
	d->n_marks++;
}

/* The drawn node a value comes from: its producer's (if drawn) or its graph input's. */
static Agnode_t *source_of(struct dot *d, const struct ir_value *v)
{
	v = through_pair(d, v, NULL);
	if (v->producer && v->producer->graph == d->g)
		return d->sel[v->producer->id] ? d->an[v->producer->id] : NULL;
	for (int i = 0; i < d->g->n_inputs; i++)
		if (d->g->inputs[i] == v)
			return d->in_nodes[i];
	if (d->o->weights && (v->init || v->sparse_init))
		return agnode(d->G, cs(v->name), 0);
	return NULL;
}

/* The depth of the node producing v (0 for inputs and constants). */
static int value_depth(const struct dot *d, const struct ir_value *v)
{
	if (v->producer && v->producer->graph == d->g)
		return d->depth[v->producer->id];
	return 0;
}

/* cheap: depth of every drawn node (longest path from the inputs), for cutting long edges */
static int compute_depth(struct dot *d)
{
	d->depth = calloc((size_t)d->nid + 1, sizeof(int));
	if (!d->depth)
		return -1;
	ir_for_each_node(d->g, n) {
		int k = 0;
		for (int i = 0; i < n->n_inputs + n->n_implicit; i++) {
			struct ir_value *v = i < n->n_inputs ? n->inputs[i] : n->implicit[i - n->n_inputs];
			if (v && !folded_value(d, v) && value_depth(d, v) > k)
				k = value_depth(d, v);
		}
		d->depth[n->id] = k + 1;
	}
	return 0;
}

/* A small text node: a tensor whose producer or readers are not drawn. */
static Agnode_t *edge_end(struct dot *d, const char *text)
{
	char sn[32];
	snprintf(sn, sizeof(sn), "x%d", d->n_ends++);
	Agnode_t *st = mknode(d, d->G, sn);
	struct lbl l = { .n = 0 };
	lbl_text(&l, text, 48);
	set(st, d->nlabel, l.b);
	set(st, d->nshape, "plaintext");
	set(st, d->nstyle, "");
	set(st, d->nfont, "8");
	set(st, d->ntip, l.b);
	return st;
}

/* ---- selection ---- */

static int select_around(struct dot *d, struct ir_node *c, int radius)
{
	int *q = malloc(sizeof(int) * (size_t)d->nid);
	int *dist = malloc(sizeof(int) * (size_t)d->nid);
	if (!q || !dist) {
		free(q);
		free(dist);
		return -1;
	}
	for (int i = 0; i < d->nid; i++)
		dist[i] = -1;
	int qh = 0, qt = 0;
	q[qt++] = c->id;
	dist[c->id] = 0;
	while (qh < qt) {
		struct ir_node *n = ir_node_by_id(d->g, q[qh++]);
		d->sel[n->id] = true;
		if (dist[n->id] >= radius)
			continue;
		for (int i = 0; i < n->n_inputs + n->n_implicit; i++) {
			struct ir_value *v = i < n->n_inputs ? n->inputs[i] : n->implicit[i - n->n_inputs];
			const struct ir_value *w = v ? through_pair(d, v, NULL) : NULL;
			struct ir_node *p = w ? w->producer : NULL;
			if (p && p->graph == d->g && dist[p->id] < 0 && !d->folded[p->id]) {
				dist[p->id] = dist[n->id] + 1;
				q[qt++] = p->id;
			}
		}
		for (int i = 0; i < n->n_outputs; i++) {
			struct ir_value *v = n->outputs[i];
			for (size_t u = 0; v && u < v->n_uses; u++) {
				struct ir_node *r = v->uses[u].node;
				if (r->graph != d->g || dist[r->id] >= 0)
					continue;
				if (d->pair[r->id]) {
					/* a Q drawn as an edge mark: its DQs' readers are the next step */
					const struct ir_value *qo = r->outputs[0];
					for (size_t k = 0; k < qo->n_uses; k++) {
						const struct ir_value *dqo = qo->uses[k].node->outputs[0];
						for (size_t m = 0; dqo && m < dqo->n_uses; m++) {
							struct ir_node *rr = dqo->uses[m].node;
							if (rr->graph == d->g && dist[rr->id] < 0 && !d->pair[rr->id]) {
								dist[rr->id] = dist[n->id] + 1;
								q[qt++] = rr->id;
							}
						}
					}
					continue;
				}
				dist[r->id] = dist[n->id] + 1;
				q[qt++] = r->id;
			}
		}
	}
	free(q);
	free(dist);
	return 0;
}

/* Nodes downstream of value `from` (readers on) and upstream of `to` (its producer back). */
static int select_between(struct dot *d, struct ir_value *from, struct ir_value *to)
{
	bool *down = calloc((size_t)d->nid, 1), *up = calloc((size_t)d->nid, 1);
	if (!down || !up) {
		free(down);
		free(up);
		return -1;
	}
	for (size_t i = 0; i < d->g->n_values; i++)
		d->g->values[i]->mark = 0;
	if (from) {
		from->mark = 1;
		ir_for_each_node(d->g, n) {
			bool hit = false;
			for (int i = 0; i < n->n_inputs + n->n_implicit && !hit; i++) {
				struct ir_value *v = i < n->n_inputs ? n->inputs[i] : n->implicit[i - n->n_inputs];
				hit = v && (v->mark & 1);
			}
			if (hit) {
				down[n->id] = true;
				for (int i = 0; i < n->n_outputs; i++)
					if (n->outputs[i])
						n->outputs[i]->mark |= 1;
			}
		}
	}
	if (to) {
		to->mark |= 2;
		for (struct ir_node *n = d->g->last; n; n = n->prev) {
			bool hit = false;
			for (int i = 0; i < n->n_outputs && !hit; i++)
				hit = n->outputs[i] && (n->outputs[i]->mark & 2);
			if (hit) {
				up[n->id] = true;
				for (int i = 0; i < n->n_inputs + n->n_implicit; i++) {
					struct ir_value *v = i < n->n_inputs ? n->inputs[i] : n->implicit[i - n->n_inputs];
					if (v)
						v->mark |= 2;
				}
			}
		}
	}
	int k = 0;
	ir_for_each_node(d->g, n) {
		bool in = (!from || down[n->id]) && (!to || up[n->id]);
		d->sel[n->id] = in;
		k += in;
	}
	for (size_t i = 0; i < d->g->n_values; i++)
		d->g->values[i]->mark = 0;
	free(down);
	free(up);
	return k;
}

/* ---- --collapse: blocks of a name scope ---- */

/* The first `depth` components of a node's scope ("/encoder/layer.3/attention/self/MatMul"
 * -> depth 2: "encoder/layer.3"); false when the name has no scope. A name with fewer
 * scope components than depth gives its whole scope. */
static bool scope_prefix(const struct ir_node *n, int depth, char *buf, size_t size)
{
	const char *s = n->name ? n->name : "";
	const char *last = strrchr(s, '/');
	if (!last)
		return false;
	while (*s == '/')
		s++;
	if (s >= last)
		return false;
	const char *p = s;
	int comps = 0;
	while (p < last) {
		const char *q = memchr(p, '/', (size_t)(last - p));
		if (!q)
			q = last;
		comps++;
		if (comps == depth || q == last) {
			size_t len = (size_t)(q - s);
			if (len >= size)
				len = size - 1;
			memcpy(buf, s, len);
			buf[len] = 0;
			return true;
		}
		p = q + 1;
	}
	return false;
}

/* Assigns blocks at `depth` to the selected nodes; returns the number of units
 * drawn (blocks of two or more nodes, plus the nodes left alone). */
static int assign_blocks(struct dot *d, int depth, bool keep, int *largest)
{
	char buf[512];
	int units = 0;
	/* names of blocks, in order of first appearance */
	char **names = NULL;
	int *count = NULL;
	int nb = 0, cap = 0;
	ir_for_each_node(d->g, n) {
		d->block[n->id] = -1;
		if (!d->sel[n->id] || d->folded[n->id])
			continue;
		if (!scope_prefix(n, depth, buf, sizeof(buf)))
			continue;
		int k;
		for (k = nb - 1; k >= 0; k--)   /* recent blocks first: runs of one scope */
			if (!strcmp(names[k], buf))
				break;
		if (k < 0) {
			if (nb == cap) {
				cap = cap ? cap * 2 : 64;
				char **nn = realloc(names, sizeof(char *) * (size_t)cap);
				int *nc = realloc(count, sizeof(int) * (size_t)cap);
				if (nn)
					names = nn;
				if (nc)
					count = nc;
				if (!nn || !nc)
					break;
			}
			names[nb] = strdup(buf);
			count[nb] = 0;
			k = nb++;
		}
		count[k]++;
		d->block[n->id] = k;
	}
	/* blocks of one node are drawn as the node */
	ir_for_each_node(d->g, n) {
		if (!d->sel[n->id] || d->folded[n->id])
			continue;
		int b = d->block[n->id];
		if (b >= 0 && count[b] < 2)
			d->block[n->id] = -1;
		if (d->block[n->id] < 0)
			units++;
	}
	*largest = 0;
	for (int k = 0; k < nb; k++) {
		units += count[k] >= 2;
		if (count[k] > *largest)
			*largest = count[k];
	}
	if (keep) {
		d->block_names = names;
		d->n_blocks = nb;
	} else {
		for (int k = 0; k < nb; k++)
			free(names[k]);
		free(names);
	}
	free(count);
	return units;
}

struct opc {
	const char *op;
	int n;
};

static int opc_cmp(const void *a, const void *b)
{
	const struct opc *x = a, *y = b;
	if (x->n != y->n)
		return y->n - x->n;
	return strcmp(x->op, y->op);
}

static void value_text(const struct dot *d, double v, char *buf, size_t size);

static void draw_blocks(struct dot *d)
{
	Agnode_t **bn = calloc((size_t)d->n_blocks + 1, sizeof(*bn));
	if (!bn)
		return;
	for (int k = 0; k < d->n_blocks; k++) {
		struct opc ops[64];
		int nops = 0, cnt = 0;
		ir_for_each_node(d->g, n) {
			if (d->block[n->id] != k)
				continue;
			cnt++;
			int j;
			for (j = 0; j < nops; j++)
				if (!strcmp(ops[j].op, n->op_type))
					break;
			if (j == nops && nops < 64)
				ops[nops++] = (struct opc){ n->op_type, 0 };
			if (j < nops)
				ops[j].n++;
		}
		if (!cnt)
			continue;
		qsort(ops, (size_t)nops, sizeof(ops[0]), opc_cmp);
		char dn[32], hist[256];
		snprintf(dn, sizeof(dn), "b%d", k);
		Agnode_t *an = mknode(d, d->G, dn);
		struct lbl l = { .n = 0 };
		char sc[560];
		snprintf(sc, sizeof(sc), "/%s", d->block_names[k]);
		lbl_line(&l, sc, DOT_NAME_MAX);
		lbl_linef(&l, "%d nodes", cnt);
		size_t h = 0;
		hist[0] = 0;
		for (int j = 0; j < nops && j < 3; j++)
			h += (size_t)snprintf(hist + h, sizeof(hist) - h, "%s%s %d", j ? ", " : "", ops[j].op, ops[j].n);
		if (nops > 3)
			snprintf(hist + h, sizeof(hist) - h, ", ...");
		lbl_line(&l, hist, DOT_LINE_MAX);
		const char *fill = FILL_BLOCK;
		if (d->bval) {
			char vb[40];
			double v = d->bval[k];
			if (isnan(v)) {
				fill = FILL_NOVALUE;
			} else {
				value_text(d, v, vb, sizeof(vb));
				lbl_linef(&l, "%s %s", vb, d->unit);
				int st = scale_step(d, v);
				fill = scale9[st];
				if (st >= 6)
					set(an, d->nfontcolor, "white");
			}
		} else if (d->o->diff >= 0) {
			/* a block with added or changed nodes is drawn as changed */
			int changed = 0;
			ir_for_each_node(d->g, n) changed += d->block[n->id] == k && d->status[n->id] != ST_SAME;
			if (changed) {
				fill = FILL_CHANGED;
				set(an, d->ncolor, LINE_CHANGED);
				set(an, d->npen, "2");
				lbl_linef(&l, "%d added or changed", changed);
			}
		}
		set(an, d->nlabel, l.b);
		set(an, d->nshape, "box3d");
		set(an, d->nfill, fill);
		set(an, d->ntip, l.b);
		bn[k] = an;
	}
	ir_for_each_node(d->g, n) if (d->sel[n->id] && d->block[n->id] >= 0)
		d->an[n->id] = bn[d->block[n->id]];
	free(bn);
}

/* ---- subgraphs and fused nodes as clusters ---- */

static void draw_subgraph(struct dot *d, Agraph_t *parent, struct ir_node *owner, const char *attr,
			  struct ir_graph *sg, int level)
{
	char cn[64];
	int me = d->n_sub++;
	snprintf(cn, sizeof(cn), "cluster_s%d", me);
	Agraph_t *c = agsubg(parent, cn, 1);
	if (!c)
		return;
	char lb[300];
	char nb[40];
	snprintf(lb, sizeof(lb), "%s.%s", node_label_name(owner, nb, sizeof(nb)), attr);
	struct lbl l = { .n = 0 };
	lbl_text(&l, lb, DOT_NAME_MAX);
	agsafeset(c, "label", l.b, "");
	agsafeset(c, "style", "rounded,dashed", "");
	/* the subgraph's nodes: s<cluster>_n<id>, edges between them */
	int nid = sg->next_id;
	Agnode_t **map = calloc((size_t)nid + 1, sizeof(*map));
	if (!map)
		return;
	ir_for_each_node(sg, n) {
		char dn[64];
		snprintf(dn, sizeof(dn), "s%d_n%d", me, n->id);
		Agnode_t *an = mknode(d, c, dn);
		struct lbl nl;
		nl.n = 0;
		nl.b[0] = 0;
		nl.lines = 0;
		lbl_line(&nl, n->op_type, DOT_LINE_MAX);
		lbl_line(&nl, node_label_name(n, nb, sizeof(nb)), DOT_NAME_MAX);
		if (n->n_outputs && n->outputs[0]) {
			char tb[200];
			lbl_linef(&nl, "-> %s", ir_type_str(ir_value_type(n->outputs[0]), tb, sizeof(tb)));
		}
		set(an, d->nlabel, nl.b);
		enum fam f = op_family(n);
		set(an, d->nfill, families[f].fill);
		d->fams |= 1u << f;
		map[n->id] = an;
		for (int i = 0; i < n->n_inputs; i++) {
			struct ir_value *v = n->inputs[i];
			if (v && v->producer && v->producer->graph == sg && map[v->producer->id])
				if (!agedge(d->G, map[v->producer->id], an, NULL, 0))
					mkedge(d, map[v->producer->id], an, v, false);
		}
		if (level < 4)
			for (int a = 0; a < n->n_attrs; a++) {
				if (n->attrs[a].type == IR_ATTR_GRAPH && n->attrs[a].g)
					draw_subgraph(d, c, n, n->attrs[a].name, n->attrs[a].g, level + 1);
			}
	}
	/* tie the cluster to its owner */
	if (sg->first && map[sg->first->id] && level == 0 && d->an[owner->id]) {
		Agedge_t *e = agedge(d->G, d->an[owner->id], map[sg->first->id], NULL, 1);
		if (e) {
			d->n_edges++;
			set(e, d->estyle, "dotted");
			set(e, d->edir, "none");
		}
	}
	free(map);
}

static void draw_fused_cluster(struct dot *d, const struct ir_node *n)
{
	char cn[64];
	snprintf(cn, sizeof(cn), "cluster_f%d", n->id);
	Agraph_t *c = agsubg(d->G, cn, 1);
	if (!c)
		return;
	char nb[40];
	struct lbl l = { .n = 0 };
	char lb[200];
	snprintf(lb, sizeof(lb), "%s made of %d nodes", node_label_name(n, nb, sizeof(nb)), n->n_from);
	lbl_text(&l, lb, DOT_LINE_MAX);
	agsafeset(c, "label", l.b, "");
	agsafeset(c, "style", "rounded,filled", "");
	agsafeset(c, "fillcolor", "#fffde7", "");
	/* move the fused node itself into the cluster */
	agsubnode(c, d->an[n->id], 1);
	Agnode_t *prev = NULL;
	for (int i = 0; i < n->n_from; i++) {
		char dn[64];
		snprintf(dn, sizeof(dn), "f%d_%d", n->id, i);
		Agnode_t *an = mknode(d, c, dn);
		struct lbl fl = { .n = 0 };
		const char *op = origin_op(d, n->from[i]);
		if (op[0])
			lbl_line(&fl, op, DOT_LINE_MAX);
		lbl_line(&fl, n->from[i], DOT_NAME_MAX);
		set(an, d->nlabel, fl.b);
		set(an, d->nfont, "9");
		set(an, d->nshape, "box");
		set(an, d->nstyle, "rounded,dashed");
		set(an, d->nfill, "#ffffff");
		if (prev) {
			Agedge_t *e = agedge(d->G, prev, an, NULL, 1);
			if (e) {
				d->n_edges++;
				set(e, d->estyle, "dotted");
			}
		}
		prev = an;
	}
}

/* ---- overlays ---- */

static int load_values(struct dot *d)
{
	struct session *s = d->s;
	enum color_by by = d->o->by;
	d->val = malloc(sizeof(double) * (size_t)(d->nid ? d->nid : 1));
	if (!d->val)
		return sh_error(s, "dot: out of memory");
	for (int i = 0; i < d->nid; i++)
		d->val[i] = NAN;
	if (by == BY_FLOPS || by == BY_MEMORY) {
		struct ir_diag dg;
		ir_diag_init(&dg);
		struct ir_stats *st = ir_stats_new(d->m, &dg);
		if (!st) {
			int rc = sh_diag(s, &dg);
			ir_diag_clear(&dg);
			return rc ? rc : -1;
		}
		ir_diag_clear(&dg);
		for (int i = 0; i < st->n_nodes; i++) {
			const struct ir_node_cost *c = &st->nodes[i];
			if (!c->known || c->id < 0 || c->id >= d->nid)
				continue;
			d->val[c->id] = by == BY_FLOPS ? c->flops : c->bytes_read + c->bytes_written;
		}
		ir_stats_free(st);
		d->unit = by == BY_FLOPS ? "FLOPs" : "bytes moved";
	} else {
		const struct sh_node_values *nv = by == BY_TIME ? &s->node_time : &s->node_err;
		if (!nv->v || nv->stage != d->o->stage)
			return by == BY_TIME
				       ? sh_error(s, "dot: no per-node times for stage %d: run `profile` first",
						  d->o->stage)
				       : sh_error(s, "dot: no per-node errors for stage %d: run `run --check` or, on a "
						  "quantized stage, `sensitivity` first", d->o->stage);
		for (int i = 0; i < d->nid && i < nv->n; i++)
			d->val[i] = nv->v[i];
		d->unit = nv->unit[0] ? nv->unit : (by == BY_TIME ? "ms" : "error");
	}
	/* --collapse: a block's figure is the sum of its nodes' */
	if (d->n_blocks) {
		d->bval = malloc(sizeof(double) * (size_t)d->n_blocks);
		if (!d->bval)
			return sh_error(s, "dot: out of memory");
		for (int k = 0; k < d->n_blocks; k++)
			d->bval[k] = NAN;
		ir_for_each_node(d->g, n) {
			int k = d->block[n->id];
			double v = d->val[n->id];
			if (k < 0 || isnan(v))
				continue;
			d->bval[k] = isnan(d->bval[k]) ? v : d->bval[k] + v;
		}
	}
	/* the range over what is drawn: nodes and blocks */
	d->vmin = INFINITY;
	d->vmax = -INFINITY;
	double lo = INFINITY;   /* the smallest positive figure */
	for (int pass = 0; pass < 2; pass++) {
		int cnt = pass ? d->n_blocks : d->nid;
		for (int i = 0; i < cnt; i++) {
			double v;
			if (pass) {
				v = d->bval ? d->bval[i] : NAN;
			} else {
				struct ir_node *n = ir_node_by_id(d->g, i);
				if (!n || !d->sel[i] || d->folded[i] || d->block[i] >= 0)
					continue;
				v = d->val[i];
			}
			if (isnan(v))
				continue;
			if (v < d->vmin)
				d->vmin = v;
			if (v > d->vmax)
				d->vmax = v;
			if (v > 0 && v < lo)
				lo = v;
		}
	}
	if (!(d->vmax >= d->vmin)) {
		d->vmin = d->vmax = 0;
		return 0;
	}
	/* wide positive ranges on a log scale */
	if (isfinite(lo) && d->vmax / lo > 1000) {
		d->vlog = true;
		d->vmin = lo;
	}
	return 0;
}

static void value_text(const struct dot *d, double v, char *buf, size_t size)
{
	if (d->o->by == BY_MEMORY)
		sh_bytes((uint64_t)(v < 0 ? 0 : v), buf, size);
	else if (d->o->by == BY_FLOPS)
		sh_si(v, buf, size);
	else
		snprintf(buf, size, "%.3g", v);
}

struct leg {
	struct dot *d;
	Agraph_t *c;         /* a rank=same row in the legend cluster: entries in order */
	Agnode_t *prev;
	int k;
};

static Agnode_t *leg(struct leg *L, const char *text, const char *fill, const char *line, const char *style)
{
	struct dot *d = L->d;
	char ln[32];
	snprintf(ln, sizeof(ln), "legend_%d", L->k++);
	Agnode_t *an = agnode(L->c, ln, 1);
	struct lbl l = { .n = 0 };
	lbl_text(&l, text, 0);
	set(an, d->nlabel, l.b);
	set(an, d->nfill, fill);
	set(an, d->nfont, "10");
	if (line)
		set(an, d->ncolor, line);
	if (style)
		set(an, d->nstyle, style);
	if (L->prev) {
		/* LR lays out top to bottom and turns the drawing: the row reads upwards */
		bool lr = !strcmp(d->o->rankdir, "LR") || !strcmp(d->o->rankdir, "RL");
		Agedge_t *e = lr ? agedge(L->c, an, L->prev, NULL, 1) : agedge(L->c, L->prev, an, NULL, 1);
		if (e)
			agsafeset(e, "style", "invis", "");
	}
	L->prev = an;
	return an;
}

static void legend(struct dot *d)
{
	Agraph_t *c = agsubg(d->G, "cluster_legend", 1);
	if (!c)
		return;
	agsafeset(c, "style", "rounded", "");
	agsafeset(c, "fontsize", "10", "");
	Agraph_t *row = agsubg(c, "legend_row", 1);
	if (!row)
		return;
	agsafeset(row, "rank", "same", "");
	struct leg L = { .d = d, .c = row };
	if (d->o->diff >= 0) {
		char lb[64];
		snprintf(lb, sizeof(lb), "changes since stage %d", d->o->diff);
		agsafeset(c, "label", lb, "");
		snprintf(lb, sizeof(lb), "added (%d)", d->n_added);
		leg(&L, lb, FILL_ADDED, LINE_ADDED, NULL);
		snprintf(lb, sizeof(lb), "changed (%d)", d->n_changed);
		leg(&L, lb, FILL_CHANGED, LINE_CHANGED, NULL);
		snprintf(lb, sizeof(lb), "removed (%d)", d->n_removed);
		leg(&L, lb, FILL_REMOVED, LINE_REMOVED, "rounded,filled,dashed");
		leg(&L, "unchanged", FILL_SAME, NULL, NULL);
	} else if (d->o->by == BY_PRECISION) {
		agsafeset(c, "label", "precision", "");
		for (int p = 0; p < PR_COUNT; p++)
			if (d->precs & (1u << p))
				leg(&L, precs[p].name, precs[p].fill, NULL, NULL);
	} else if (d->val) {
		char lb[128], b1[32], b2[32];
		snprintf(lb, sizeof(lb), "%s%s", d->unit, d->vlog ? " (log scale)" : "");
		agsafeset(c, "label", lb, "");
		if (d->vmax > d->vmin || d->vmax != 0)
			for (int i = 0; i < 9; i++) {
				value_text(d, step_bound(d, i), b1, sizeof(b1));
				value_text(d, step_bound(d, i + 1), b2, sizeof(b2));
				snprintf(lb, sizeof(lb), "%s - %s", b1, b2);
				Agnode_t *an = leg(&L, lb, scale9[i], NULL, NULL);
				if (i >= 6)
					set(an, d->nfontcolor, "white");
			}
		leg(&L, "no value", FILL_NOVALUE, NULL, NULL);
	} else {
		agsafeset(c, "label", "op families", "");
		for (int f = 0; f < FAM_COUNT; f++)
			if (d->fams & (1u << f))
				leg(&L, families[f].name, families[f].fill, NULL, NULL);
	}
	if (d->n_blocks && !d->val)
		leg(&L, "scope block", FILL_BLOCK, NULL, NULL);
	if (d->n_marks) {
		Agnode_t *an = leg(&L, "Q/DQ on the edge", "#ffffff", LINE_QDQ, NULL);
		set(an, d->nfontcolor, LINE_QDQ);
	}
}

/* ---- --diff: removed nodes from the other stage ---- */

/* Whether a node of the other stage reads a tensor of, or feeds, a node drawn (partial drawings). */
static bool touches_selection(const struct dot *d, const struct ir_node *n)
{
	for (int i = 0; i < n->n_inputs; i++) {
		const struct ir_value *w = n->inputs[i] ? ir_value_find(d->g, n->inputs[i]->name) : NULL;
		if (w && w->producer && w->producer->graph == d->g && d->sel[w->producer->id] &&
		    !d->folded[w->producer->id])
			return true;
	}
	for (int i = 0; i < n->n_outputs; i++) {
		const struct ir_value *v = n->outputs[i];
		for (size_t u = 0; v && u < v->n_uses; u++) {
			const struct ir_node *rb = pass_stage_match(d->g, v->uses[u].node);
			if (rb && d->sel[rb->id])
				return true;
		}
	}
	return false;
}

static void draw_removed(struct dot *d, const struct ir_graph *ga)
{
	ir_for_each_node(ga, n) {
		if (pass_stage_match(d->g, n))
			continue;
		if (is_const_node(n) && !d->o->weights)
			continue;
		if (!d->whole && !touches_selection(d, n))
			continue;
		char dn[32];
		snprintf(dn, sizeof(dn), "r%d", n->id);
		Agnode_t *an = mknode(d, d->G, dn);
		if (!an)
			continue;
		d->n_removed++;
		struct lbl l;
		/* label as in its own stage: constants there */
		double *saved_val = d->val;
		d->val = NULL;
		node_label(d, n, &l);
		d->val = saved_val;
		set(an, d->nlabel, l.b);
		set(an, d->nfill, FILL_REMOVED);
		set(an, d->ncolor, LINE_REMOVED);
		set(an, d->nstyle, "rounded,filled,dashed");
		set(an, d->npen, "2");
		char tip[160], nb[40];
		snprintf(tip, sizeof(tip), "removed: n%d %s (%s)", n->id, node_label_name(n, nb, sizeof(nb)), n->op_type);
		struct lbl t = { .n = 0 };
		lbl_text(&t, tip, 150);
		set(an, d->ntip, t.b);
		/* edges to the tensors that survive */
		for (int i = 0; i < n->n_inputs; i++) {
			const struct ir_value *v = n->inputs[i];
			if (!v)
				continue;
			const struct ir_value *w = ir_value_find(d->g, v->name);
			Agnode_t *src = NULL;
			if (w && !folded_value(d, w))
				src = source_of(d, w);
			if (!src && v->producer && !pass_stage_match(d->g, v->producer)) {
				char rn[32];
				snprintf(rn, sizeof(rn), "r%d", v->producer->id);
				src = agnode(d->G, rn, 0);
			}
			Agedge_t *e = mkedge(d, src, an, v, true);
			if (e) {
				set(e, d->estyle, "dashed");
				set(e, d->ecolor, LINE_REMOVED);
			}
		}
		for (int i = 0; i < n->n_outputs; i++) {
			const struct ir_value *v = n->outputs[i];
			for (size_t u = 0; v && u < v->n_uses; u++) {
				const struct ir_node *r = v->uses[u].node;
				if (r->graph != ga)
					continue;
				const struct ir_node *rb = pass_stage_match(d->g, r);
				if (!rb || !d->sel[rb->id])
					continue;
				Agedge_t *e = mkedge(d, an, d->an[rb->id], v, true);
				if (e) {
					set(e, d->estyle, "dashed");
					set(e, d->ecolor, LINE_REMOVED);
				}
			}
			for (int k = 0; v && k < d->g->n_outputs; k++)
				if (v->is_output && !strcmp(d->g->outputs[k]->name, v->name) && d->out_nodes[k]) {
					Agedge_t *e = mkedge(d, an, d->out_nodes[k], v, true);
					if (e) {
						set(e, d->estyle, "dashed");
						set(e, d->ecolor, LINE_REMOVED);
					}
				}
		}
	}
}

/* ---- writing ---- */

static const char *format_of(const char *path)
{
	const char *dot = strrchr(path, '.');
	const char *slash = strrchr(path, '/');
	if (!dot || (slash && dot < slash))
		return NULL;
	static const char *const fmts[][2] = { { ".dot", "dot" }, { ".gv", "dot" }, { ".svg", "svg" },
					       { ".png", "png" }, { ".pdf", "pdf" } };
	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++)
		if (!strcasecmp(dot, fmts[i][0]))
			return fmts[i][1];
	return "";
}

/* The output file: written as a temporary file in its folder, renamed over it at the end. */
struct outfile {
	char *tmp;
	FILE *f;
};

/* Creates the temporary file (so that a path that cannot be written fails
 * before any layout work); 0 or an error (printed). */
static int out_open(struct session *s, const char *path, struct outfile *of)
{
	size_t n = strlen(path);
	of->f = NULL;
	of->tmp = malloc(n + 32);
	if (!of->tmp)
		return sh_error(s, "dot: out of memory");
	const char *slash = strrchr(path, '/');
	size_t dl = slash ? (size_t)(slash - path) + 1 : 0;
	snprintf(of->tmp, n + 32, "%.*s.%s.XXXXXX", (int)dl, path, path + dl);
	int fd = mkstemp(of->tmp);
	if (fd < 0) {
		int e = errno;
		free(of->tmp);
		of->tmp = NULL;
		return sh_error(s, "dot: cannot write '%s': %s", sh_esc(path), sh_strerror(e));
	}
	fchmod(fd, 0644);
	of->f = fdopen(fd, "w");
	if (!of->f) {
		int e = errno;
		close(fd);
		unlink(of->tmp);
		free(of->tmp);
		of->tmp = NULL;
		return sh_error(s, "dot: cannot write '%s': %s", sh_esc(path), sh_strerror(e));
	}
	return 0;
}

/* Drops the temporary file. */
static void out_abort(struct outfile *of)
{
	if (of->f)
		fclose(of->f);
	if (of->tmp) {
		unlink(of->tmp);
		free(of->tmp);
	}
	of->f = NULL;
	of->tmp = NULL;
}

/* Syncs and renames the file into place; 0 or an error (printed). */
static int out_commit(struct session *s, const char *path, struct outfile *of, bool failed)
{
	int e = 0;
	if (failed || fflush(of->f) || ferror(of->f) || fsync(fileno(of->f)))
		e = errno ? errno : EIO;
	if (fclose(of->f) && !e)
		e = errno ? errno : EIO;
	of->f = NULL;
	if (!e && rename(of->tmp, path))
		e = errno;
	if (e) {
		out_abort(of);
		return sh_error(s, "dot: cannot write '%s': %s", sh_esc(path), sh_strerror(e));
	}
	free(of->tmp);
	of->tmp = NULL;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The command                                                               */
/* ------------------------------------------------------------------------ */

static void dot_free(struct dot *d)
{
	free(d->sel);
	free(d->folded);
	free(d->pair);
	free(d->an);
	free(d->block);
	free(d->in_nodes);
	free(d->out_nodes);
	free(d->status);
	free(d->val);
	free(d->bval);
	free(d->depth);
	for (int k = 0; k < d->n_blocks; k++)
		free(d->block_names[k]);
	free(d->block_names);
}

/* Whether every reader of v is a node of g reading it through an input slot, and v is no graph output. */
static bool plain_readers(const struct ir_graph *g, const struct ir_value *v)
{
	if (!v || v->is_output || !v->n_uses)
		return false;
	for (size_t u = 0; u < v->n_uses; u++)
		if (v->uses[u].slot < 0 || v->uses[u].node->graph != g)
			return false;
	return true;
}

/*
 * Without --qdq-nodes: a DequantizeLinear of a quantized weight folds into
 * its readers' labels (unless --weights draws weights as nodes), and a
 * QuantizeLinear of an activation whose readers are all DequantizeLinear
 * becomes, with them, a mark on the edges from the value it quantizes to
 * the readers of the dequantized one.
 */
static void fold_qdq(struct dot *d)
{
	ir_for_each_node(d->g, n) {
		if (n->op == IR_OP_DequantizeLinear && !d->o->weights && ir_node_is_weight_dq(n, NULL) &&
		    n->n_outputs == 1 && plain_readers(d->g, n->outputs[0])) {
			d->folded[n->id] = true;
			continue;
		}
		if (n->op != IR_OP_QuantizeLinear || n->n_inputs < 1 || !n->inputs[0] || ir_value_is_const(n->inputs[0]) ||
		    n->n_outputs != 1 || !plain_readers(d->g, n->outputs[0]))
			continue;
		const struct ir_value *y = n->outputs[0];
		bool all = true;
		for (size_t u = 0; u < y->n_uses && all; u++) {
			const struct ir_node *r = y->uses[u].node;
			all = r->op == IR_OP_DequantizeLinear && y->uses[u].slot == 0 && r->n_outputs == 1 && r->outputs[0] &&
			      !pass_read_in_subgraph(r->outputs[0]);
		}
		if (!all)
			continue;
		d->folded[n->id] = d->pair[n->id] = true;
		for (size_t u = 0; u < y->n_uses; u++)
			d->folded[y->uses[u].node->id] = d->pair[y->uses[u].node->id] = true;
	}
}

static int build(struct dot *d, struct ir_graph *ga)
{
	struct session *s = d->s;
	const struct dot_opts *o = d->o;
	struct ir_graph *g = d->g;
	d->nid = g->next_id;
	size_t nid = (size_t)d->nid + 1;
	d->sel = calloc(nid, 1);
	d->folded = calloc(nid, 1);
	d->pair = calloc(nid, 1);
	d->an = calloc(nid, sizeof(*d->an));
	d->block = malloc(nid * sizeof(int));
	d->in_nodes = calloc((size_t)g->n_inputs + 1, sizeof(*d->in_nodes));
	d->out_nodes = calloc((size_t)g->n_outputs + 1, sizeof(*d->out_nodes));
	d->status = calloc(nid, sizeof(int));
	if (!d->sel || !d->folded || !d->pair || !d->an || !d->block || !d->in_nodes || !d->out_nodes || !d->status)
		return sh_error(s, "dot: out of memory");
	/* Constant nodes fold into their readers */
	ir_for_each_node(g, n) {
		d->sel[n->id] = true;
		d->block[n->id] = -1;
		if (!o->weights && is_const_node(n))
			d->folded[n->id] = true;
	}
	if (!o->qdq_nodes)
		fold_qdq(d);
	/* the part drawn */
	if (o->around) {
		int cnt = 0;
		struct ir_node *c = sh_find_node(g, o->around, &cnt);
		if (cnt > 1)
			return sh_ambiguous(s, g, o->around, cnt);
		if (!c)
			return sh_error(s, "dot: no node '%s' in stage %d", sh_esc(o->around), o->stage);
		memset(d->sel, 0, nid);
		d->center = c->id;
		if (select_around(d, c, o->radius))
			return sh_error(s, "dot: out of memory");
	} else if (o->from_t || o->to_t) {
		struct ir_value *from = NULL, *to = NULL;
		if (o->from_t && !(from = ir_value_find(g, o->from_t)))
			return sh_error(s, "dot: no tensor '%s' in stage %d", sh_esc(o->from_t), o->stage);
		if (o->to_t && !(to = ir_value_find(g, o->to_t)))
			return sh_error(s, "dot: no tensor '%s' in stage %d", sh_esc(o->to_t), o->stage);
		int k = select_between(d, from, to);
		if (k < 0)
			return sh_error(s, "dot: out of memory");
		if (k == 0)
			return sh_error(s, "dot: no nodes between '%s' and '%s'", o->from_t ? sh_esc(o->from_t) : "the inputs",
					o->to_t ? sh_esc(o->to_t) : "the outputs");
	}
	/* folded Constants are not drawn: they are in their readers' labels */
	int drawn = 0;
	ir_for_each_node(g, n) drawn += d->sel[n->id] && !d->folded[n->id];
	/* --collapse: choose the depth */
	if (o->collapse) {
		/* by default the first scope level whose largest block holds at most a
		 * third of the nodes (layers, not the whole encoder) */
		int depth = o->depth, largest = 0;
		if (!depth) {
			for (depth = 1; depth < 8; depth++) {
				assign_blocks(d, depth, false, &largest);
				if (largest * 3 <= drawn)
					break;
			}
		}
		drawn = assign_blocks(d, depth, true, &largest);
		if (!d->n_blocks)
			sh_warn(s, "dot: no node names with scopes ('/block/op'): --collapse draws every node");
	}
	char cb1[32], cb2[32];
	if (drawn > o->max_nodes)
		return sh_error(s,
				"dot: %s nodes to draw, over the limit of %s: draw a part with --around NODE or "
				"--from/--to, or blocks with --collapse (--max-nodes=N raises the limit)",
				sh_count((uint64_t)drawn, cb1, sizeof(cb1)), sh_count((uint64_t)o->max_nodes, cb2, sizeof(cb2)));
	/* the overlay values */
	if (o->by != BY_OP && o->by != BY_PRECISION && load_values(d))
		return -1;
	/* --diff: status of every node of this stage */
	if (ga) {
		ir_for_each_node(g, n) {
			const struct ir_node *a = pass_stage_match(ga, n);
			char which[8];
			if (!a)
				d->status[n->id] = ST_ADDED;
			else if (!pass_node_same_io(a, n) || !pass_node_same_attrs(a, n, which, sizeof(which)))
				d->status[n->id] = ST_CHANGED;
			if (d->sel[n->id] && !d->folded[n->id]) {
				d->n_added += d->status[n->id] == ST_ADDED;
				d->n_changed += d->status[n->id] == ST_CHANGED;
			}
		}
	}
	/* the graph */
	char gname[64];
	snprintf(gname, sizeof(gname), "stage%d", o->stage);
	static Agdisc_t disc;
	disc = (Agdisc_t){ &AgMemDisc, &dot_iddisc, &AgIoDisc };
	d->G = agopen(gname, Agdirected, &disc);
	if (!d->G)
		return sh_error(s, "dot: out of memory");
	agattr(d->G, AGRAPH, "rankdir", cs(o->rankdir));
	agattr(d->G, AGRAPH, "fontname", "Helvetica");
	agattr(d->G, AGRAPH, "nodesep", "0.25");
	agattr(d->G, AGRAPH, "ranksep", "0.35");
	bool cheap = d->cheap = drawn > DOT_CHEAP_NODES;
	d->medium = drawn > DOT_MEDIUM_NODES;
	if (d->medium && !cheap)
		agattr(d->G, AGRAPH, "nslimit", "2");
	if (cheap) {
		agattr(d->G, AGRAPH, "splines", "line");
		agattr(d->G, AGRAPH, "mclimit", "0.05");
		agattr(d->G, AGRAPH, "nslimit", "0.2");
		agattr(d->G, AGRAPH, "nslimit1", "2");
		agattr(d->G, AGRAPH, "searchsize", "10");
		agattr(d->G, AGRAPH, "remincross", "false");
	}
	if (cheap && compute_depth(d))
		return sh_error(s, "dot: out of memory");
	agattr(d->G, AGRAPH, "label", "");
	d->nlabel = agattr(d->G, AGNODE, "label", "\\N");
	d->nshape = agattr(d->G, AGNODE, "shape", "box");
	d->nstyle = agattr(d->G, AGNODE, "style", "rounded,filled");
	d->nfill = agattr(d->G, AGNODE, "fillcolor", "white");
	d->ncolor = agattr(d->G, AGNODE, "color", "#555555");
	d->npen = agattr(d->G, AGNODE, "penwidth", "1");
	d->ntip = agattr(d->G, AGNODE, "tooltip", "");
	d->nfont = agattr(d->G, AGNODE, "fontsize", "11");
	d->nfontcolor = agattr(d->G, AGNODE, "fontcolor", "black");
	agattr(d->G, AGNODE, "fontname", "Helvetica");
	agattr(d->G, AGNODE, "margin", "0.08,0.03");
	d->elabel = agattr(d->G, AGEDGE, "label", "");
	d->estyle = agattr(d->G, AGEDGE, "style", "solid");
	d->ecolor = agattr(d->G, AGEDGE, "color", "#555555");
	d->edir = agattr(d->G, AGEDGE, "dir", "forward");
	d->etip = agattr(d->G, AGEDGE, "tooltip", "");
	agattr(d->G, AGEDGE, "fontsize", "9");
	agattr(d->G, AGEDGE, "fontname", "Helvetica");
	agattr(d->G, AGEDGE, "fontcolor", "#555555");
	agattr(d->G, AGEDGE, "arrowsize", "0.6");
	{
		char lb[400];
		char nm[200];
		snprintf(nm, sizeof(nm), "%s", s->name ? s->name : "model");
		if (ga)
			snprintf(lb, sizeof(lb), "%s: stage %d (%s) against stage %d", nm, o->stage,
				 s->hist.st[o->stage].label, o->diff);
		else
			snprintf(lb, sizeof(lb), "%s: stage %d (%s)", nm, o->stage, s->hist.st[o->stage].label);
		struct lbl l = { .n = 0 };
		lbl_text(&l, lb, 120);
		agsafeset(d->G, "label", l.b, "");
		agsafeset(d->G, "labelloc", "t", "");
	}
	/* graph inputs that something drawn reads (all of them when drawing everything) */
	bool whole = d->whole = !o->around && !o->from_t && !o->to_t;
	for (int i = 0; i < g->n_inputs; i++) {
		struct ir_value *v = g->inputs[i];
		if (v->init || v->sparse_init)
			continue;
		bool used = whole;
		for (size_t u = 0; !used && u < v->n_uses; u++)
			used = v->uses[u].node->graph == g && d->sel[v->uses[u].node->id];
		if (!used)
			continue;
		char dn[32], tb[200];
		snprintf(dn, sizeof(dn), "in%d", i);
		Agnode_t *an = mknode(d, d->G, dn);
		struct lbl l = { .n = 0 };
		lbl_line(&l, "input", 0);
		lbl_line(&l, v->name, DOT_NAME_MAX);
		lbl_line(&l, ir_type_str(ir_value_type(v), tb, sizeof(tb)), DOT_LINE_MAX);
		set(an, d->nlabel, l.b);
		set(an, d->nshape, "invhouse");
		set(an, d->nstyle, "filled");
		set(an, d->nfill, FILL_INPUT);
		d->in_nodes[i] = an;
	}
	/* --weights: initializers as nodes */
	if (o->weights) {
		for (int i = 0; i < g->n_inits; i++) {
			struct ir_value *v = g->inits[i];
			bool used = false;
			for (size_t u = 0; !used && u < v->n_uses; u++)
				used = v->uses[u].node->graph == g && d->sel[v->uses[u].node->id];
			if (!used)
				continue;
			Agnode_t *an = mknode(d, d->G, v->name);
			char tb[200], nb[40];
			struct lbl l = { .n = 0 };
			lbl_line(&l, v->name, DOT_NAME_MAX);
			ir_dims_str(v->init ? v->init->rank : 0, v->init ? v->init->dims : NULL, tb, sizeof(tb));
			lbl_linef(&l, "%s%s (%s)", v->init ? ir_dtype_name(v->init->dtype) : "sparse", tb,
				  sh_count(v->init ? v->init->numel : 0, nb, sizeof(nb)));
			set(an, d->nlabel, l.b);
			set(an, d->nshape, "note");
			set(an, d->nstyle, "filled");
			set(an, d->nfill, FILL_WEIGHT);
			set(an, d->nfont, "9");
		}
	}
	/* the nodes (or their blocks) */
	if (d->n_blocks)
		draw_blocks(d);
	ir_for_each_node(g, n) {
		if (!d->sel[n->id] || d->folded[n->id] || d->an[n->id])
			continue;
		char dn[32];
		snprintf(dn, sizeof(dn), "n%d", n->id);
		d->an[n->id] = draw_op(d, d->G, n, dn);
		if (!d->an[n->id])
			return sh_error(s, "dot: out of memory");
		if (o->around && n->id == d->center)
			set(d->an[n->id], d->npen, "3");
	}
	/* edges: one per tensor and drawn reader */
	ir_for_each_node(g, n) {
		if (!d->sel[n->id] || d->folded[n->id])
			continue;
		Agnode_t *dst = d->an[n->id];
		for (int i = 0; i < n->n_inputs + n->n_implicit; i++) {
			struct ir_value *v = i < n->n_inputs ? n->inputs[i] : n->implicit[i - n->n_inputs];
			if (!v || folded_value(d, v))
				continue;
			bool dup = false;
			for (int j = 0; j < i && !dup; j++)
				dup = (j < n->n_inputs ? n->inputs[j] : n->implicit[j - n->n_inputs]) == v;
			if (dup)
				continue;
			Agnode_t *src = source_of(d, v);
			const struct ir_value *w = through_pair(d, v, NULL);
			if (!src && !whole && ((w->producer && w->producer->graph == g) || w != v)) {
				/* a part: where the tensor comes from, as a small label */
				char from[200], nb[40];
				snprintf(from, sizeof(from), "%s (from %s)", w->name,
					 w->producer ? node_label_name(w->producer, nb, sizeof(nb)) : "the inputs");
				src = edge_end(d, from);
			}
			if (!src || src == dst)
				continue;
			if (d->depth && d->depth[n->id] - value_depth(d, v) > DOT_LONG_EDGE)
				src = edge_end(d, v->name);   /* a long edge: cut short, naming the tensor */
			Agedge_t *e = mkedge(d, src, dst, v, d->n_blocks > 0);
			if (e && i >= n->n_inputs)
				set(e, d->estyle, "dotted");
			const struct ir_node *mdq;
			through_pair(d, v, &mdq);
			qdq_mark(d, e, mdq, v);
		}
	}
	/* a part: tensors read outside it, as small labels */
	if (!whole)
		ir_for_each_node(g, n) {
			if (!d->sel[n->id] || d->folded[n->id] || !d->an[n->id])
				continue;
			for (int i = 0; i < n->n_outputs; i++) {
				struct ir_value *v = n->outputs[i];
				int out = 0;
				for (size_t u = 0; v && u < v->n_uses; u++) {
					struct ir_node *r = v->uses[u].node;
					if (r->graph == g && d->pair[r->id]) {
						/* a Q drawn as an edge mark: its DQs' readers are the readers */
						const struct ir_value *qo = r->outputs[0];
						for (size_t k = 0; k < qo->n_uses; k++) {
							const struct ir_value *dqo = qo->uses[k].node->outputs[0];
							for (size_t m = 0; m < dqo->n_uses; m++)
								out += dqo->uses[m].node->graph != g || !d->sel[dqo->uses[m].node->id];
							out += dqo->is_output;
						}
						continue;
					}
					out += r->graph != g || !d->sel[r->id];
				}
				if (!out)
					continue;
				char to[200];
				snprintf(to, sizeof(to), "%s (%d more reader%s)", v->name, out, out == 1 ? "" : "s");
				mkedge(d, d->an[n->id], edge_end(d, to), v, false);
			}
		}
	/* graph outputs */
	for (int i = 0; i < g->n_outputs; i++) {
		struct ir_value *v = g->outputs[i];
		Agnode_t *src = source_of(d, v);
		if (!src && !whole)
			continue;
		char dn[32], tb[200];
		snprintf(dn, sizeof(dn), "out%d", i);
		Agnode_t *an = mknode(d, d->G, dn);
		struct lbl l = { .n = 0 };
		lbl_line(&l, "output", 0);
		lbl_line(&l, v->name, DOT_NAME_MAX);
		lbl_line(&l, ir_type_str(ir_value_type(v), tb, sizeof(tb)), DOT_LINE_MAX);
		set(an, d->nlabel, l.b);
		set(an, d->nshape, "house");
		set(an, d->nstyle, "filled");
		set(an, d->nfill, FILL_OUTPUT);
		d->out_nodes[i] = an;
		const struct ir_node *mdq;
		through_pair(d, v, &mdq);
		qdq_mark(d, mkedge(d, src, an, v, false), mdq, v);
	}
	/* subgraphs as clusters (--collapse), fused nodes as clusters (--expand-fused) */
	ir_for_each_node(g, n) {
		if (!d->sel[n->id] || d->folded[n->id] || !d->an[n->id])
			continue;
		if (o->collapse && d->block[n->id] < 0)
			for (int a = 0; a < n->n_attrs; a++)
				if (n->attrs[a].type == IR_ATTR_GRAPH && n->attrs[a].g)
					draw_subgraph(d, d->G, n, n->attrs[a].name, n->attrs[a].g, 0);
		if (o->expand_fused && n->n_from > 0 && d->block[n->id] < 0)
			draw_fused_cluster(d, n);
	}
	if (ga)
		draw_removed(d, ga);
	legend(d);
	if (d->medium && !cheap) {
		char b[32];
		fprintf(o->file ? s->out : stderr,
			"note: %s nodes: tensor types as edge tooltips instead of labels, and limited "
			"positioning (nslimit=2), to lay out in seconds\n",
			sh_count((uint64_t)drawn, b, sizeof(b)));
	}
	if (cheap) {
		char b[32];
		fprintf(o->file ? s->out : stderr,
			"note: %s nodes: drawn with straight edges, less crossing minimisation and "
			"positioning (splines=line, mclimit=0.05, nslimit=0.2), tensor types as tooltips, and "
			"%d edges spanning over %d ranks cut short, to lay out in seconds\n",
			sh_count((uint64_t)drawn, b, sizeof(b)), d->n_ends, DOT_LONG_EDGE);
	}
	return 0;
}

int cmd_dot(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (a.npos > 1)
		return sh_usage(s, argv[0]);
	if (!sh_need_model(s))
		return -1;
	struct dot_opts o = { .diff = -1, .radius = 2, .rankdir = "TB", .max_nodes = DOT_MAX_NODES };
	o.stage = s->hist.cur;
	const char *v;
	if ((v = sh_opt(&a, "stage")) && (o.stage = sh_stage_arg(s, argv[0], v)) < 0)
		return -1;
	if ((v = sh_opt(&a, "diff")) && (o.diff = sh_stage_arg(s, argv[0], v)) < 0)
		return -1;
	o.around = sh_opt(&a, "around");
	if ((v = sh_opt(&a, "radius"))) {
		if (!o.around)
			return sh_error(s, "dot: --radius goes with --around NODE");
		if (sh_int_opt(s, "dot", "radius", v, 0, &o.radius))
			return -1;
	}
	o.from_t = sh_opt(&a, "from");
	o.to_t = sh_opt(&a, "to");
	if (o.around && (o.from_t || o.to_t))
		return sh_error(s, "dot: --around and --from/--to draw different parts: give one of them");
	o.collapse = sh_flag(&a, "collapse");
	if ((v = sh_opt(&a, "depth"))) {
		if (!o.collapse)
			return sh_error(s, "dot: --depth goes with --collapse");
		if (sh_int_opt(s, "dot", "depth", v, 1, &o.depth))
			return -1;
	}
	o.expand_fused = sh_flag(&a, "expand-fused");
	o.weights = sh_flag(&a, "weights");
	o.qdq_nodes = sh_flag(&a, "qdq-nodes");
	if ((v = sh_opt(&a, "color-by"))) {
		static const char *const names[] = { "op", "flops", "memory", "time", "error", "precision" };
		int k;
		for (k = 0; k < 6; k++)
			if (!strcmp(v, names[k]))
				break;
		if (k == 6)
			return sh_error(s, "dot: unknown --color-by '%s' (op, flops, memory, time, error, precision)",
					sh_esc(v));
		o.by = (enum color_by)k;
	}
	if (o.by != BY_OP && o.diff >= 0)
		return sh_error(s, "dot: --diff and --color-by are two colourings: give one of them");
	if ((v = sh_opt(&a, "rankdir"))) {
		if (strcmp(v, "TB") && strcmp(v, "LR") && strcmp(v, "BT") && strcmp(v, "RL"))
			return sh_error(s, "dot: unknown --rankdir '%s' (TB, LR, BT, RL)", sh_esc(v));
		o.rankdir = v;
	}
	if ((v = sh_opt(&a, "max-nodes")) && sh_int_opt(s, "dot", "max-nodes", v, 1, &o.max_nodes))
		return -1;
	if (a.npos == 1) {
		o.file = a.pos[0];
		struct stat st;
		if (!stat(o.file, &st) && S_ISDIR(st.st_mode))
			return sh_error(s, "dot: cannot write '%s': is a folder", sh_esc(o.file));
		o.format = format_of(o.file);
		if (!o.format)
			return sh_error(s, "dot: '%s' has no file extension: give .dot, .gv, .svg, .png or .pdf",
					sh_esc(o.file));
		if (!o.format[0])
			return sh_error(s, "dot: unknown format '%s' of '%s' (.dot, .gv, .svg, .png or .pdf)",
					sh_esc(strrchr(o.file, '.') + 1), sh_esc(o.file));
	}

	/* the stage drawn: shapes known */
	struct ir_model *m = s->hist.st[o.stage].m;
	if (m == s->model) {
		if (sh_infer(s))
			return -1;
	} else {
		struct ir_diag dg;
		ir_diag_init(&dg);
		int rc = ir_infer(m, &dg);
		ir_diag_clear(&dg);
		if (rc == IR_EINTR)
			return sh_error(s, "dot: interrupted");
	}
	struct ir_graph *ga = NULL;
	if (o.diff >= 0) {
		struct ir_model *ma = s->hist.st[o.diff].m;
		if (ma != s->model) {
			struct ir_diag dg;
			ir_diag_init(&dg);
			ir_infer(ma, &dg);
			ir_diag_clear(&dg);
		}
		ga = ma->graph;
	}

	struct dot d = { .s = s, .o = &o, .m = m, .g = m->graph };
	gv_install();
	int rc = build(&d, ga);
	const char *ge = gv_error();
	if (!rc && ge)
		rc = sh_error(s, "dot: graphviz: %s", sh_esc(ge));
	if (rc) {
		if (d.G)
			agclose(d.G);
		dot_free(&d);
		gv_restore();
		return rc;
	}
	char b1[32], b2[32];
	struct outfile of = { 0 };
	if (!o.file) {
		if (agwrite(d.G, s->out) == EOF)
			rc = sh_error(s, "dot: cannot write the drawing: %s", sh_strerror(errno));
	} else if (out_open(s, o.file, &of)) {
		rc = -1;
	} else if (!strcmp(o.format, "dot")) {
		errno = 0;
		bool bad = agwrite(d.G, of.f) == EOF;
		rc = out_commit(s, o.file, &of, bad);
	} else {
		/* one Graphviz context for the whole session: with 2.43, freeing one
		 * leaves the pango plugin's font cache pointing at freed memory */
		static GVC_t *gvc;
		if (!gvc)
			gvc = gvContext();
		if (!gvc) {
			out_abort(&of);
			rc = sh_error(s, "dot: graphviz: cannot start (no layout plugins?)");
		} else {
			/* lay out and render into memory, Graphviz's messages captured */
			struct gv_stderr cap;
			char said[512];
			char *data = NULL;
			unsigned int len = 0;
			gv_capture();
			gv_stderr_begin(&cap);
			int lr = gvLayout(gvc, d.G, "dot");
			const char *le = lr ? gv_error() : NULL;
			int rr = -1;
			if (!lr)
				rr = gvRenderData(gvc, d.G, o.format, &data, &len);
			ge = gv_error();
			gv_stderr_end(&cap, said, sizeof(said));
			if (lr) {
				out_abort(&of);
				rc = sh_error(s, "dot: cannot lay out the drawing: graphviz: %s",
					      le ? sh_esc(le) : said[0] ? sh_esc(said) : "layout failed");
			} else if (rr || !data) {
				out_abort(&of);
				rc = sh_error(s, "dot: cannot render '%s': graphviz: %s", sh_esc(o.file),
					      ge ? sh_esc(ge) : said[0] ? sh_esc(said) : "rendering failed");
			} else {
				errno = 0;
				bool bad = fwrite(data, 1, len, of.f) != len;
				rc = out_commit(s, o.file, &of, bad);
				if (!rc && (said[0] || ge))
					sh_printf(s, "note: graphviz: %s\n", said[0] ? sh_esc(said) : sh_esc(ge));
			}
			if (data)
				gvFreeRenderData(data);
			if (!lr)
				gvFreeLayout(gvc, d.G);
		}
	}
	if (!rc && o.file)
		sh_printf(s, "wrote '%s': %s, %s\n", sh_esc(o.file),
			  sh_nouns((uint64_t)d.n_nodes, "node", "nodes", b1, sizeof(b1)),
			  sh_nouns((uint64_t)d.n_edges, "edge", "edges", b2, sizeof(b2)));
	agclose(d.G);
	dot_free(&d);
	gv_restore();
	return rc;
}
