/*
 * convert_float.c - the convert-fp16 and convert-bf16 passes: a float32
 * graph becomes a float16 (bfloat16) graph, with float32 kept where float16
 * would overflow, lose a long sum, or where ONNX has no float16 version of
 * an op, and the fewest Casts between the two.
 *
 * How it works: every node that reads or writes a float32 tensor is either
 * converted (its float32 inputs and outputs become float16) or kept float32,
 * with the reason in the report. Each float32 tensor then has one precision
 * at its source (the node that writes it, or float32/float16 for inputs and
 * weights) and its readers want one precision each; the readers on the
 * other side share one Cast. Graph outputs (keep-io) and tensors read inside
 * subgraphs keep their name in float32: when their writer is converted, it
 * writes a new tensor that a Cast turns back into the old name.
 */
#include "passes/fused.h"

#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Which ops take float16 and bfloat16                                        */
/* ------------------------------------------------------------------------ */

/*
 * From the ONNX operator schemas (every version, as onnx 1.22 has them):
 * h16/bf16 is the first opset version from which the op's float slots take
 * float16/bfloat16 (0: no version does); keep_* are the input and output
 * slots (bit i: slot i) whose type constraint has float32 but not the target
 * type and is their own (Resize's scales, LayerNormalization's Mean and
 * InvStdDev in float16): they stay float32 in a converted node. An op that
 * is not listed has no float slot: it is left alone unless it touches a
 * float32 tensor, and then it is kept.
 */
struct ftype {
	unsigned char h16, bf16;
	unsigned char keep_in16, keep_out16, keep_inbf, keep_outbf;
};

static const struct ftype ftypes[IR_OP_COUNT] = {
	[IR_OP_Abs] = { 1, 13 }, [IR_OP_Acos] = { 7, 22 }, [IR_OP_Acosh] = { 9, 22 }, [IR_OP_Add] = { 1, 13 },
	[IR_OP_AffineGrid] = { 20, 20 }, [IR_OP_ArgMax] = { 1, 13 }, [IR_OP_ArgMin] = { 1, 13 }, [IR_OP_Asin] = { 7, 22 },
	[IR_OP_Asinh] = { 9, 22 }, [IR_OP_Atan] = { 7, 22 }, [IR_OP_Atanh] = { 9, 22 }, [IR_OP_Attention] = { 23, 23 },
	[IR_OP_AveragePool] = { 1, 22 }, [IR_OP_BatchNormalization] = { 1, 14 }, [IR_OP_Bernoulli] = { 15, 15, 0, 0, 1, 0 },
	[IR_OP_BitCast] = { 26, 26 }, [IR_OP_BlackmanWindow] = { 17, 17 }, [IR_OP_Cast] = { 1, 13 },
	[IR_OP_CastLike] = { 15, 15 }, [IR_OP_CausalConvWithState] = { 27, 27 }, [IR_OP_Ceil] = { 1, 13 },
	[IR_OP_Celu] = { 0, 0 }, [IR_OP_CenterCropPad] = { 18, 18 }, [IR_OP_Clip] = { 1, 13 }, [IR_OP_Col2Im] = { 18, 18 },
	[IR_OP_Compress] = { 9, 0 }, [IR_OP_Concat] = { 1, 13 }, [IR_OP_ConcatFromSequence] = { 11, 0 },
	[IR_OP_Constant] = { 1, 13 }, [IR_OP_ConstantOfShape] = { 9, 20 }, [IR_OP_Conv] = { 1, 22 },
	[IR_OP_ConvTranspose] = { 1, 22 }, [IR_OP_Cos] = { 7, 22 }, [IR_OP_Cosh] = { 9, 22 }, [IR_OP_CumProd] = { 26, 26 },
	[IR_OP_CumSum] = { 14, 14 }, [IR_OP_DFT] = { 17, 17 }, [IR_OP_DeformConv] = { 19, 22 },
	[IR_OP_DepthToSpace] = { 1, 13 }, [IR_OP_DequantizeLinear] = { 19, 19 }, [IR_OP_Det] = { 11, 22 },
	[IR_OP_Div] = { 1, 13 }, [IR_OP_Dropout] = { 1, 13, 0, 0, 2, 0 }, [IR_OP_DynamicQuantizeLinear] = { 0, 0 },
	[IR_OP_Einsum] = { 12, 0 }, [IR_OP_Elu] = { 1, 22 }, [IR_OP_Equal] = { 11, 13 }, [IR_OP_Erf] = { 9, 13 },
	[IR_OP_Exp] = { 1, 13 }, [IR_OP_Expand] = { 8, 13 }, [IR_OP_EyeLike] = { 9, 22 }, [IR_OP_Flatten] = { 1, 13 },
	[IR_OP_Floor] = { 1, 13 }, [IR_OP_GRU] = { 1, 22 }, [IR_OP_Gather] = { 1, 13 }, [IR_OP_GatherElements] = { 11, 13 },
	[IR_OP_GatherND] = { 11, 13 }, [IR_OP_Gelu] = { 20, 20 }, [IR_OP_Gemm] = { 1, 13 },
	[IR_OP_GlobalAveragePool] = { 1, 22 }, [IR_OP_GlobalLpPool] = { 1, 22 }, [IR_OP_GlobalMaxPool] = { 1, 22 },
	[IR_OP_Greater] = { 1, 13 }, [IR_OP_GreaterOrEqual] = { 12, 16 }, [IR_OP_GridSample] = { 16, 22 },
	[IR_OP_GroupNormalization] = { 18, 18 }, [IR_OP_HammingWindow] = { 17, 17 }, [IR_OP_HannWindow] = { 17, 17 },
	[IR_OP_HardSigmoid] = { 1, 22 }, [IR_OP_HardSwish] = { 14, 22 }, [IR_OP_Hardmax] = { 1, 13 },
	[IR_OP_Identity] = { 1, 13 }, [IR_OP_If] = { 1, 16 }, [IR_OP_InstanceNormalization] = { 1, 22 },
	[IR_OP_IsInf] = { 20, 20 }, [IR_OP_IsNaN] = { 9, 13 }, [IR_OP_LRN] = { 1, 13 }, [IR_OP_LSTM] = { 1, 22 },
	[IR_OP_LayerNormalization] = { 17, 17, 0, 6, 0, 0 }, [IR_OP_LeakyRelu] = { 1, 16 }, [IR_OP_Less] = { 1, 13 },
	[IR_OP_LessOrEqual] = { 12, 16 }, [IR_OP_LinearAttention] = { 27, 27 }, [IR_OP_Log] = { 1, 13 },
	[IR_OP_LogSoftmax] = { 1, 13 }, [IR_OP_Loop] = { 1, 16 }, [IR_OP_LpNormalization] = { 1, 22 },
	[IR_OP_LpPool] = { 1, 22 }, [IR_OP_MatMul] = { 1, 13 }, [IR_OP_Max] = { 1, 13 }, [IR_OP_MaxPool] = { 1, 22 },
	[IR_OP_MaxRoiPool] = { 1, 22 }, [IR_OP_MaxUnpool] = { 9, 22 }, [IR_OP_Mean] = { 1, 13 },
	[IR_OP_MeanVarianceNormalization] = { 9, 13 }, [IR_OP_MelWeightMatrix] = { 17, 17 }, [IR_OP_Min] = { 1, 13 },
	[IR_OP_Mish] = { 18, 22 }, [IR_OP_Mod] = { 10, 13 }, [IR_OP_Mul] = { 1, 13 }, [IR_OP_Multinomial] = { 7, 22 },
	[IR_OP_Neg] = { 1, 13 }, [IR_OP_NegativeLogLikelihoodLoss] = { 12, 22 }, [IR_OP_NonMaxSuppression] = { 0, 0 },
	[IR_OP_NonZero] = { 9, 13 }, [IR_OP_OneHot] = { 9, 0 }, [IR_OP_Optional] = { 15, 0 },
	[IR_OP_OptionalGetElement] = { 15, 0 }, [IR_OP_OptionalHasElement] = { 18, 0 }, [IR_OP_PRelu] = { 1, 16 },
	[IR_OP_Pad] = { 1, 13 }, [IR_OP_Pow] = { 1, 13, 0, 0, 2, 0 }, [IR_OP_QLinearConv] = { 0, 0 },
	[IR_OP_QLinearMatMul] = { 21, 21 }, [IR_OP_QuantizeLinear] = { 19, 19 }, [IR_OP_RMSNormalization] = { 23, 23 },
	[IR_OP_RNN] = { 1, 22 }, [IR_OP_RandomNormal] = { 1, 22 }, [IR_OP_RandomNormalLike] = { 1, 22 },
	[IR_OP_RandomUniform] = { 1, 22 }, [IR_OP_RandomUniformLike] = { 1, 22 }, [IR_OP_Range] = { 27, 27 },
	[IR_OP_Reciprocal] = { 1, 13 }, [IR_OP_ReduceL1] = { 1, 13 }, [IR_OP_ReduceL2] = { 1, 13 },
	[IR_OP_ReduceLogSum] = { 1, 13 }, [IR_OP_ReduceLogSumExp] = { 1, 13 }, [IR_OP_ReduceMax] = { 1, 13 },
	[IR_OP_ReduceMean] = { 1, 13 }, [IR_OP_ReduceMin] = { 1, 13 }, [IR_OP_ReduceProd] = { 1, 13 },
	[IR_OP_ReduceSum] = { 1, 13 }, [IR_OP_ReduceSumSquare] = { 1, 13 }, [IR_OP_Relu] = { 1, 13 },
	[IR_OP_Reshape] = { 1, 13 }, [IR_OP_Resize] = { 10, 13, 6, 0, 6, 0 }, [IR_OP_ReverseSequence] = { 10, 0 },
	[IR_OP_RoiAlign] = { 10, 22 }, [IR_OP_RotaryEmbedding] = { 23, 23 }, [IR_OP_Round] = { 11, 22 },
	[IR_OP_STFT] = { 17, 17 }, [IR_OP_Scan] = { 8, 16 }, [IR_OP_Scatter] = { 9, 0 },
	[IR_OP_ScatterElements] = { 11, 13 }, [IR_OP_ScatterND] = { 11, 13 }, [IR_OP_Selu] = { 1, 22 },
	[IR_OP_SequenceAt] = { 11, 0 }, [IR_OP_SequenceConstruct] = { 11, 0 }, [IR_OP_SequenceInsert] = { 11, 0 },
	[IR_OP_SequenceMap] = { 17, 0 }, [IR_OP_Shape] = { 1, 13 }, [IR_OP_Shrink] = { 9, 0 }, [IR_OP_Sigmoid] = { 1, 13 },
	[IR_OP_Sign] = { 9, 13 }, [IR_OP_Sin] = { 7, 22 }, [IR_OP_Sinh] = { 9, 22 }, [IR_OP_Size] = { 1, 13 },
	[IR_OP_Slice] = { 1, 13 }, [IR_OP_Softmax] = { 1, 13 }, [IR_OP_SoftmaxCrossEntropyLoss] = { 12, 13 },
	[IR_OP_Softplus] = { 1, 22 }, [IR_OP_Softsign] = { 1, 22 }, [IR_OP_SpaceToDepth] = { 1, 13 },
	[IR_OP_Split] = { 1, 13 }, [IR_OP_SplitToSequence] = { 11, 24 }, [IR_OP_Sqrt] = { 1, 13 },
	[IR_OP_Squeeze] = { 1, 13 }, [IR_OP_Sub] = { 1, 13 }, [IR_OP_Sum] = { 1, 13 }, [IR_OP_Swish] = { 24, 24 },
	[IR_OP_Tan] = { 7, 22 }, [IR_OP_Tanh] = { 1, 13 }, [IR_OP_TensorScatter] = { 24, 24 },
	[IR_OP_TfIdfVectorizer] = { 0, 0 }, [IR_OP_ThresholdedRelu] = { 10, 22 }, [IR_OP_Tile] = { 1, 13 },
	[IR_OP_TopK] = { 1, 24 }, [IR_OP_Transpose] = { 1, 13 }, [IR_OP_Trilu] = { 14, 14 }, [IR_OP_Unique] = { 11, 0 },
	[IR_OP_Unsqueeze] = { 1, 13 }, [IR_OP_Upsample] = { 1, 0, 2, 0, 0, 0 }, [IR_OP_Where] = { 9, 16 },
	/* ogsh's fused ops: the kernels take both; their function bodies are checked op by op */
	[IR_OP_ogsh_FusedConv] = { 1, 1 }, [IR_OP_ogsh_FusedGemm] = { 1, 1 }, [IR_OP_ogsh_Pointwise] = { 1, 1 },
	[IR_OP_ogsh_FusedAttention] = { 1, 1 }, [IR_OP_ogsh_LayerNormalization] = { 1, 1, 0, 6, 0, 0 }, [IR_OP_ogsh_Gelu] = { 1, 1 },
};

/* Ops whose result is exactly the same whether the rounding to float16
 * happens before or after them (they move or select values, or are
 * monotone without arithmetic): they may run in either precision, and run
 * in the one of their neighbours so that no Cast is needed around them. */
static bool is_neutral(int op)
{
	switch (op) {
	case IR_OP_Identity: case IR_OP_Reshape: case IR_OP_Transpose: case IR_OP_Squeeze: case IR_OP_Unsqueeze:
	case IR_OP_Flatten: case IR_OP_Concat: case IR_OP_Split: case IR_OP_Slice: case IR_OP_Gather:
	case IR_OP_GatherElements: case IR_OP_GatherND: case IR_OP_Expand: case IR_OP_Tile: case IR_OP_DepthToSpace:
	case IR_OP_SpaceToDepth: case IR_OP_Relu: case IR_OP_MaxPool: case IR_OP_GlobalMaxPool: case IR_OP_Abs:
	case IR_OP_Neg: case IR_OP_Max: case IR_OP_Min: case IR_OP_ReduceMax: case IR_OP_ReduceMin: case IR_OP_Where:
	case IR_OP_Pad: case IR_OP_Dropout:
		return true;
	default:
		return false;
	}
}

/* Input slots that only look at the tensor's shape or convert it: they
 * read whichever precision the tensor has, no Cast needed. */
static bool any_slot(int op, int i)
{
	switch (op) {
	case IR_OP_Shape: case IR_OP_Size: case IR_OP_Cast: case IR_OP_CastLike: case IR_OP_EyeLike:
	case IR_OP_RandomNormalLike: case IR_OP_RandomUniformLike:
		return i == 0;
	default:
		return false;
	}
}

/* How a node accumulates over its reduction. */
enum { ACC_NONE = 0, ACC_SUM, ACC_SQUARES, ACC_EXP };

static int acc_kind(int op)
{
	switch (op) {
	case IR_OP_ReduceSum: case IR_OP_ReduceMean: case IR_OP_ReduceL1: case IR_OP_ReduceLogSum:
	case IR_OP_GlobalAveragePool:
		return ACC_SUM;
	case IR_OP_ReduceSumSquare: case IR_OP_ReduceL2: case IR_OP_LayerNormalization: case IR_OP_ogsh_LayerNormalization:
	case IR_OP_GroupNormalization:
	case IR_OP_InstanceNormalization: case IR_OP_RMSNormalization: case IR_OP_MeanVarianceNormalization:
	case IR_OP_LpNormalization: case IR_OP_GlobalLpPool:
		return ACC_SQUARES;
	case IR_OP_Softmax: case IR_OP_LogSoftmax: case IR_OP_ReduceLogSumExp: case IR_OP_ogsh_FusedAttention:
		return ACC_EXP;
	default:
		return ACC_NONE;
	}
}

/* Attributes that carry the output's element type, by op (NULL: none);
 * *add: the attribute is added when missing (its default is float32). */
static const char *dtype_attr(int op, bool *add)
{
	*add = true;
	switch (op) {
	case IR_OP_Cast:
		return "to";
	case IR_OP_EyeLike: case IR_OP_RandomNormal: case IR_OP_RandomUniform: case IR_OP_RandomNormalLike:
	case IR_OP_RandomUniformLike: case IR_OP_Bernoulli:
		return "dtype";
	case IR_OP_HannWindow: case IR_OP_HammingWindow: case IR_OP_BlackmanWindow: case IR_OP_MelWeightMatrix:
		return "output_datatype";
	case IR_OP_DequantizeLinear:
		*add = false;
		return "output_dtype";
	case IR_OP_ogsh_Pointwise:
		*add = false;
		return "dtype";
	default:
		return NULL;
	}
}

/* onnxruntime's float16 converter's block list (its DEFAULT_OP_BLOCK_LIST), and the whole ai.onnx.ml domain */
#define DEFAULT_BLOCK_OPS                                                                                          \
	"ai.onnx.ml,ArrayFeatureExtractor,Binarizer,CastMap,CategoryMapper,DictVectorizer,FeatureVectorizer,"   \
	"Imputer,LabelEncoder,LinearClassifier,LinearRegressor,Normalizer,OneHotEncoder,RandomUniformLike,"     \
	"SVMClassifier,SVMRegressor,Scaler,TreeEnsembleClassifier,TreeEnsembleRegressor,ZipMap,"                \
	"NonMaxSuppression,TopK,RoiAlign,Range,CumSum,Min,Max,Upsample"

/* ------------------------------------------------------------------------ */
/* State                                                                     */
/* ------------------------------------------------------------------------ */

enum { K_NONE = 0, K_CONV, K_KEEP, K_CONST };    /* what becomes of a node */
enum { R_OTHER = 0, R_DEPTH, R_SUM };            /* why it was kept (the rules that pull a Pow along) */
enum { P_NONE = 0, P_F32, P_T };                 /* a tensor's precision */
enum { S_F32 = 0, S_T, S_ANY };                  /* what a node's slot takes */

struct nst {
	unsigned char kind;     /* K_* */
	unsigned char rule;     /* R_* when kept */
	bool neutral;           /* converted, and may follow its neighbours' precision */
	bool neutral_f32;       /* ... and runs in float32 to save Casts */
	bool passive;           /* converted, but it only reads tensors as they are (Shape, Cast to int): not reported */
	char *why;              /* K_KEEP: why */
};

/* What converting a float32 constant does to its values. */
struct cstat {
	bool done;
	uint64_t numel, nonzero, over, vanish;
	double amax;            /* largest finite |x| */
	double vmax;            /* largest |x| of the values that vanish */
};

struct strlist {
	char **s;
	int n;
};

struct castnote {
	int node;               /* the id of the node it is about (a Cast), or -1 */
	char *text;
};

struct cv {
	struct pass_ctx *c;
	struct ir_model *m;
	struct ir_graph *g;
	int T;                  /* IR_FLOAT16 or IR_BFLOAT16 */
	const char *tn;         /* "float16" */
	double tmax, tsub;      /* its largest finite value and smallest subnormal */
	int64_t opset;
	bool keep_io, clamp;
	double data_max;
	int64_t max_red;
	struct strlist bops, bnodes;
	bool *bnode_used;
	struct nst *ns;         /* by node id */
	int n_ns;
	struct cstat *cs;       /* by value index */
	unsigned char *prec;    /* by value index: the precision at the source (P_*) */
	size_t n_vals;
	const struct ir_calib *calib;   /* the session's calibration, or NULL */
	int n_cal;                      /* its tensors (0 without one) */
	struct castnote *notes; /* Casts inserted and weights, reported after the kept nodes */
	int n_notes, cap_notes;
	/* totals for the summary */
	int n_casts, n_inits, n_consts, n_clamped;
	double bytes_before, bytes_after;
};

static int oom(struct cv *v)
{
	return ir_diag_err(v->c->d, IR_ENOMEM, "out of memory");
}

static int add_note(struct cv *v, const struct ir_node *node, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Keeps a note for the report (emitted after the nodes kept float32). */
static int add_note(struct cv *v, const struct ir_node *node, const char *fmt, ...)
{
	if (v->n_notes == v->cap_notes) {
		int cap = v->cap_notes ? 2 * v->cap_notes : 16;
		struct castnote *p = realloc(v->notes, sizeof(*p) * (size_t)cap);
		if (!p)
			return oom(v);
		v->notes = p;
		v->cap_notes = cap;
	}
	char text[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	struct castnote *n = &v->notes[v->n_notes];
	n->node = node ? node->id : -1;
	if (!(n->text = strdup(text)))
		return oom(v);
	v->n_notes++;
	return 0;
}

static void strlist_clear(struct strlist *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->s[i]);
	free(l->s);
	l->s = NULL;
	l->n = 0;
}

static int strlist_add(struct strlist *l, const char *s, size_t len)
{
	char **p = realloc(l->s, sizeof(char *) * (size_t)(l->n + 1));
	if (!p)
		return IR_ENOMEM;
	l->s = p;
	if (!(p[l->n] = strndup(s, len)))
		return IR_ENOMEM;
	l->n++;
	return 0;
}

static bool strlist_has(const struct strlist *l, const char *s)
{
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->s[i], s))
			return true;
	return false;
}

static void strlist_del(struct strlist *l, const char *s)
{
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->s[i], s)) {
			free(l->s[i]);
			l->s[i] = l->s[--l->n];
			i--;
		}
}

/*
 * Splits a comma list into items (spaces around them dropped). With
 * `edit`, items may start with + (add to `dflt`'s items) or - (remove
 * from them); then every item must, else the list replaces the default.
 */
static int parse_list(struct cv *v, const char *opt, const char *text, const char *dflt, struct strlist *out)
{
	struct strlist items = { 0 };
	int rc = 0;
	for (const char *p = text; *p && !rc;) {
		while (*p == ' ' || *p == ',')
			p++;
		const char *e = p;
		while (*e && *e != ',')
			e++;
		const char *end = e;
		while (end > p && end[-1] == ' ')
			end--;
		if (end > p)
			rc = strlist_add(&items, p, (size_t)(end - p));
		p = e;
	}
	if (rc) {
		strlist_clear(&items);
		return oom(v);
	}
	int n_edit = 0;
	for (int i = 0; i < items.n; i++)
		n_edit += items.s[i][0] == '+' || items.s[i][0] == '-';
	if (dflt && n_edit && n_edit < items.n) {
		strlist_clear(&items);
		return ir_diag_err(v->c->d, IR_ERR, "%s: either every item starts with + or - (to edit the default list) "
				   "or none does (to replace it)", opt);
	}
	if (!dflt || !n_edit) {
		for (int i = 0; i < items.n; i++)
			if (!dflt && (items.s[i][0] == '+' || items.s[i][0] == '-')) {
				rc = ir_diag_err(v->c->d, IR_ERR, "%s: '%s' cannot start with + or -", opt, items.s[i]);
				strlist_clear(&items);
				return rc;
			}
		*out = items;
		return 0;
	}
	/* edit the default list */
	rc = parse_list(v, opt, dflt, NULL, out);
	for (int i = 0; i < items.n && !rc; i++) {
		const char *name = items.s[i] + 1;
		if (!*name)
			rc = ir_diag_err(v->c->d, IR_ERR, "%s: '%s' names nothing", opt, items.s[i]);
		else if (items.s[i][0] == '+') {
			if (!strlist_has(out, name) && strlist_add(out, name, strlen(name)))
				rc = oom(v);
		} else {
			if (!strlist_has(out, name))
				rc = ir_diag_err(v->c->d, IR_ERR, "%s: '%s' is not in the default list", opt, name);
			else
				strlist_del(out, name);
		}
	}
	strlist_clear(&items);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/* ------------------------------------------------------------------------ */

static const struct ir_type *type_of(const struct ir_value *x)
{
	return ir_value_type(x);
}

/* Whether x is a float32 tensor (a plain tensor: sequences are not). */
static bool is_f32(const struct ir_value *x)
{
	if (!x)
		return false;
	if (x->init)
		return x->init->dtype == IR_FLOAT;
	if (x->sparse_init)
		return x->sparse_init->values && x->sparse_init->values->dtype == IR_FLOAT;
	const struct ir_type *t = type_of(x);
	if (t->kind == IR_TYPE_TENSOR && t->elem == IR_FLOAT)
		return true;
	const struct ir_tensor *k = ir_value_const(x);
	return k && k->dtype == IR_FLOAT;
}

/* Whether x's element type is not known (inference could not tell). */
static bool is_unknown(const struct ir_value *x)
{
	if (!x || x->init || x->sparse_init || ir_value_const(x))
		return false;
	const struct ir_type *t = type_of(x);
	return t->kind == IR_TYPE_NONE || ((t->kind == IR_TYPE_TENSOR || t->kind == IR_TYPE_SPARSE_TENSOR) && !t->elem);
}

/* Whether x is a sequence, map or optional holding float32 somewhere. */
static bool is_f32_container(const struct ir_value *x)
{
	if (!x)
		return false;
	const struct ir_type *t = type_of(x);
	if (t->kind != IR_TYPE_SEQUENCE && t->kind != IR_TYPE_MAP && t->kind != IR_TYPE_OPTIONAL &&
	    t->kind != IR_TYPE_SPARSE_TENSOR)
		return false;
	for (const struct ir_type *u = t; u; u = u->inner)
		if (u->elem == IR_FLOAT || u->elem == 0)
			return true;
	return false;
}

/* A constant's float32 tensor, or NULL (graph inputs with an initializer can be overridden: not constant). */
static const struct ir_tensor *const_f32(const struct ir_value *x)
{
	if (!x || x->is_input)
		return NULL;
	const struct ir_tensor *t = ir_value_const(x);
	return t && t->dtype == IR_FLOAT ? t : NULL;
}

/* Whether x is a weight: an initializer (not an input) or a Constant node's output. */
static bool is_const_value(const struct ir_value *x)
{
	if (x->producer)
		return x->producer->op == IR_OP_Constant;
	return (x->init || x->sparse_init) && !x->is_input;
}

static float f32_at(const struct ir_tensor *t, uint64_t i)
{
	float f;
	memcpy(&f, (const char *)ir_tensor_data(t) + 4 * i, 4);
	return f;
}

static uint16_t to_t(int T, float f)
{
	return T == IR_FLOAT16 ? ir_f32_to_f16(f) : ir_f32_to_bf16(f);
}

static float from_t(int T, uint16_t h)
{
	return T == IR_FLOAT16 ? ir_f16_to_f32(h) : ir_bf16_to_f32(h);
}

static void tensor_stat(const struct cv *v, const struct ir_tensor *t, struct cstat *s)
{
	memset(s, 0, sizeof(*s));
	s->done = true;
	s->numel = t->numel;
	if (!ir_tensor_data(t))
		return;
	for (uint64_t i = 0; i < t->numel; i++) {
		float f = f32_at(t, i);
		if (!isfinite(f))
			continue;
		double a = fabs((double)f);
		if (a > s->amax)
			s->amax = a;
		if (f == 0)
			continue;
		s->nonzero++;
		if (a > v->tmax)
			s->over++;
		else if (from_t(v->T, to_t(v->T, f)) == 0) {
			s->vanish++;
			if (a > s->vmax)
				s->vmax = a;
		}
	}
}

/* The statistics of constant x (computed once). */
static const struct cstat *cstat_of(struct cv *v, const struct ir_value *x)
{
	const struct ir_tensor *t = const_f32(x);
	if (!t || x->idx >= v->n_vals)
		return NULL;
	struct cstat *s = &v->cs[x->idx];
	if (!s->done)
		tensor_stat(v, t, s);
	return s;
}

/* Whether converting the constant without clamping would break it: a
 * value overflows, or every non-zero value becomes 0. */
static bool cstat_breaks(const struct cstat *s)
{
	return s->over || (s->vanish && s->vanish == s->nonzero);
}

/*
 * The float32 tensor t in the target type; clamped when v->clamp (values
 * beyond the largest finite one go to it, non-zero values that would
 * become 0 go to the smallest subnormal, signs kept). NULL on no memory.
 */
static struct ir_tensor *convert_tensor(struct cv *v, const struct ir_tensor *t, uint64_t *n_clamped)
{
	struct ir_tensor *o = ir_tensor_new(v->T, t->rank, t->dims, v->c->d);
	if (!o)
		return NULL;
	*n_clamped = 0;
	uint16_t *p = ir_tensor_mutable(o);
	for (uint64_t i = 0; i < t->numel && p; i++) {
		float f = f32_at(t, i);
		if (v->clamp && isfinite(f) && f != 0) {
			double a = fabs((double)f);
			if (a > v->tmax) {
				f = (float)copysign(v->tmax, f);
				++*n_clamped;
			} else if (from_t(v->T, to_t(v->T, f)) == 0) {
				f = (float)copysign(v->tsub, f);
				++*n_clamped;
			}
		}
		p[i] = to_t(v->T, f);
	}
	if (t->name && !(o->name = strdup(t->name))) {
		ir_tensor_unref(o);
		oom(v);
		return NULL;
	}
	return o;
}

/* ------------------------------------------------------------------------ */
/* Calibration                                                               */
/* ------------------------------------------------------------------------ */

/* The calibration's statistics of tensor `name` when it saw any finite value, or NULL. */
static const struct ir_calib_tensor *cal_find(const struct cv *v, const char *name)
{
	const struct ir_calib_tensor *t = v->calib ? ir_calib_find(v->calib, name) : NULL;
	return t && t->count ? t : NULL;
}

static double cal_amax(const struct ir_calib_tensor *t)
{
	return fmax(fabs(t->min), fabs(t->max));
}

/* The mean of |x| and of x^2 from the histogram (bin centres). */
static void cal_moments(const struct ir_calib_tensor *t, double *m1, double *m2)
{
	*m1 = *m2 = 0;
	if (!t->hist || !(t->hist_max > 0))
		return;
	double s1 = 0, s2 = 0, n = 0, w = t->hist_max / IR_CALIB_BINS;
	for (int i = 0; i < IR_CALIB_BINS; i++) {
		double c = (double)t->hist[i], x = (i + 0.5) * w;
		s1 += c * x;
		s2 += c * x * x;
		n += c;
	}
	if (n > 0) {
		*m1 = s1 / n;
		*m2 = s2 / n;
	}
}

/* ------------------------------------------------------------------------ */
/* Deciding each node                                                         */
/* ------------------------------------------------------------------------ */

static const char *nname(const struct ir_node *n, char *buf, size_t size)
{
	return pass_node_name(n, buf, size);
}

static int keep(struct cv *v, const struct ir_node *n, int rule, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Marks n kept float32 with the reason (fmt), ending "kept float32". */
static int keep(struct cv *v, const struct ir_node *n, int rule, const char *fmt, ...)
{
	char text[1024];
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (k >= 0 && (size_t)k < sizeof(text))
		snprintf(text + k, sizeof(text) - (size_t)k, ": kept float32");
	struct nst *s = &v->ns[n->id];
	free(s->why);
	s->kind = K_KEEP;
	s->rule = (unsigned char)rule;
	s->neutral = false;
	if (!(s->why = strdup(text)))
		return oom(v);
	return 0;
}

/* Whether block-nodes names n: its name, n<id> or the bare id, or a glob of the name or n<id>. */
static const char *blocked_node(struct cv *v, const struct ir_node *n)
{
	char id[32];
	snprintf(id, sizeof(id), "n%d", n->id);
	for (int i = 0; i < v->bnodes.n; i++) {
		const char *p = v->bnodes.s[i];
		if ((n->name && *n->name && (!strcmp(p, n->name) || !fnmatch(p, n->name, 0))) || !strcmp(p, id) ||
		    !strcmp(p, id + 1) || !fnmatch(p, id, 0)) {
			v->bnode_used[i] = true;
			return p;
		}
	}
	return NULL;
}

static bool blocked_op(const struct cv *v, const struct ir_node *n)
{
	const char *dom = n->domain ? n->domain : "";
	for (int i = 0; i < v->bops.n; i++) {
		const char *p = v->bops.s[i];
		if (!strcmp(p, n->op_type))
			return true;
		if (strchr(p, '.') && !strcmp(p, dom))
			return true;
	}
	return false;
}

static unsigned since_of(const struct cv *v, int op)
{
	if (op < 0 || op >= IR_OP_COUNT)
		return 0;
	return v->T == IR_FLOAT16 ? ftypes[op].h16 : ftypes[op].bf16;
}

/* The ONNX opset a model-local function imports (0: none). */
static int64_t fn_opset(const struct ir_function *f)
{
	for (size_t i = 0; i < f->n_opsets; i++)
		if (!f->opsets[i].domain || !*f->opsets[i].domain || !strcmp(f->opsets[i].domain, "ai.onnx"))
			return f->opsets[i].version;
	return 0;
}

/* Whether every op of a fused node's function body takes the target type at the function's opset. */
static bool fused_body_ok(const struct cv *v, const struct ir_node *n, char *why, size_t size)
{
	const struct ir_function *f = ir_model_find_function(v->m, n);
	if (!f || !f->body)
		return true;
	int64_t fo = fn_opset(f);
	if (!fo)
		fo = v->opset;
	ir_for_each_node(f->body, b) {
		unsigned s = since_of(v, b->op);
		if (b->op == IR_OP_UNKNOWN) {
			snprintf(why, size, "its function body calls '%s', which ogsh does not know", b->op_type);
			return false;
		}
		if (!s || fo < s) {
			if (s)
				snprintf(why, size, "its function body uses %s, which takes %s from ONNX opset %u (the function "
					 "imports opset %lld)", b->op_type, v->tn, s, (long long)fo);
			else
				snprintf(why, size, "its function body uses %s, which ONNX has in no %s version", b->op_type,
					 v->tn);
			return false;
		}
	}
	return true;
}

/* Product of dims [from, to) of type t; false when one is not a known number (*sym: a symbol). */
static bool dims_prod(const struct ir_type *t, int from, int to, double *out, bool *sym)
{
	*out = 1;
	for (int i = from; i < to; i++) {
		if (t->dims[i].kind != IR_DIM_VALUE) {
			*sym = *sym || t->dims[i].kind == IR_DIM_PARAM;
			return false;
		}
		*out *= (double)t->dims[i].value;
	}
	return true;
}

static int norm_axis(int64_t a, int rank)
{
	if (a < 0)
		a += rank;
	return a < 0 || a >= rank ? -1 : (int)a;
}

/*
 * How many elements one output of a reduction sums: false when the shapes
 * do not say (*sym: because of a symbolic dim).
 */
static bool red_depth(const struct cv *v, const struct ir_node *n, double *depth, bool *sym)
{
	*sym = false;
	*depth = 0;
	const struct ir_value *x = n->n_inputs > 0 ? n->inputs[0] : NULL;
	struct ir_attn_layout al = { .in = "BHSD" };
	if (n->op == IR_OP_ogsh_FusedAttention) {
		const struct ir_attr *l = ir_node_attr(n, "layout");
		char why[200];
		if (ir_attn_layout_parse(l && l->type == IR_ATTR_STRING ? l->s.data : NULL, NULL, &al, why, sizeof(why)))
			return false;
		x = al.packed ? x : n->n_inputs > 1 ? n->inputs[1] : NULL;   /* the keys: K, or the packed input */
	}
	if (!x)
		return false;
	const struct ir_type *t = type_of(x);
	if (t->kind != IR_TYPE_TENSOR || t->rank < 0)
		return false;
	int r = t->rank;
	switch (n->op) {
	case IR_OP_Softmax: case IR_OP_LogSoftmax: {
		bool v13 = v->opset >= 13;
		int a = norm_axis(ir_node_attr_int(n, "axis", v13 ? -1 : 1), r);
		if (a < 0)
			return false;
		return dims_prod(t, a, v13 ? a + 1 : r, depth, sym);
	}
	case IR_OP_LayerNormalization: case IR_OP_ogsh_LayerNormalization: case IR_OP_RMSNormalization: {
		int a = norm_axis(ir_node_attr_int(n, "axis", -1), r);
		return a >= 0 && dims_prod(t, a, r, depth, sym);
	}
	case IR_OP_LpNormalization: {
		int a = norm_axis(ir_node_attr_int(n, "axis", -1), r);
		return a >= 0 && dims_prod(t, a, a + 1, depth, sym);
	}
	case IR_OP_InstanceNormalization: case IR_OP_GlobalAveragePool: case IR_OP_GlobalLpPool:
		return r >= 2 && dims_prod(t, 2, r, depth, sym);
	case IR_OP_GroupNormalization: {
		int64_t g = ir_node_attr_int(n, "num_groups", 0);
		double c, s;
		if (r < 2 || g <= 0 || !dims_prod(t, 1, 2, &c, sym) || !dims_prod(t, 2, r, &s, sym))
			return false;
		*depth = c / (double)g * s;
		return true;
	}
	case IR_OP_ogsh_FusedAttention: {
		/* the softmax sums over the keys: the S axis (of the packed input, one of its own) */
		if (al.packed) {
			int sx = (int)(strchr(al.in, 'S') - al.in);
			return sx < r - 1 && dims_prod(t, sx, sx + 1, depth, sym);
		}
		bool bshd = !strcmp(al.in, "BSHD");
		return r == 4 && dims_prod(t, bshd ? 1 : 2, bshd ? 2 : 3, depth, sym);
	}
	case IR_OP_MeanVarianceNormalization: {
		const struct ir_attr *a = ir_node_attr(n, "axes");
		static const int64_t dflt[] = { 0, 2, 3 };
		const int64_t *ax = a && a->type == IR_ATTR_INTS ? a->ints : dflt;
		size_t na = a && a->type == IR_ATTR_INTS ? a->n : 3;
		*depth = 1;
		for (size_t i = 0; i < na; i++) {
			int k = norm_axis(ax[i], r);
			double d;
			if (k < 0 || !dims_prod(t, k, k + 1, &d, sym))
				return false;
			*depth *= d;
		}
		return true;
	}
	default:
		break;
	}
	/* the Reduce ops: axes from the attribute (older opsets) or input 1 */
	bool seen[IR_MAX_RANK] = { false };
	int n_ax = -1;   /* -1: all axes */
	const struct ir_attr *a = ir_node_attr(n, "axes");
	if (a && a->type == IR_ATTR_INTS) {
		n_ax = 0;
		for (size_t i = 0; i < a->n; i++) {
			int k = norm_axis(a->ints[i], r);
			if (k < 0)
				return false;
			if (!seen[k])
				n_ax++;
			seen[k] = true;
		}
	} else if (n->n_inputs > 1 && n->inputs[1]) {
		const struct ir_tensor *at = pass_const_input(n, 1);
		if (!at || !ir_dtype_is_int(at->dtype) || !ir_tensor_data(at))
			return false;
		n_ax = 0;
		for (uint64_t i = 0; i < at->numel; i++) {
			int64_t ai;
			if (!ir_elem_to_i64(at->dtype, ir_tensor_data(at), i, &ai))
				return false;
			int k = norm_axis(ai, r);
			if (k < 0)
				return false;
			if (!seen[k])
				n_ax++;
			seen[k] = true;
		}
	}
	if (n_ax == 0 || (n_ax < 0 && n->n_inputs > 1 && n->inputs[1])) {
		if (ir_node_attr_int(n, "noop_with_empty_axes", 0)) {
			*depth = 1;
			return true;
		}
		n_ax = -1;
	}
	*depth = 1;
	for (int i = 0; i < r; i++) {
		if (n_ax >= 0 && !seen[i])
			continue;
		double d;
		if (!dims_prod(t, i, i + 1, &d, sym))
			return false;
		*depth *= d;
	}
	return true;
}

static const char *num(double x, char *buf, size_t size)
{
	if (x == floor(x) && fabs(x) < 1e15)
		snprintf(buf, size, "%.0f", x);
	else
		snprintf(buf, size, "%.6g", x);
	return buf;
}

/* The first rule (in the order of the explain text) that keeps n float32; 0 or an error. */
static int decide(struct cv *v, struct ir_node *n)
{
	struct nst *s = &v->ns[n->id];
	char why[600], b1[64], b2[64];
	const char *unk = NULL, *seq = NULL;
	bool f32 = false;
	for (int i = 0; i < n->n_inputs + n->n_outputs + n->n_implicit; i++) {
		const struct ir_value *x = i < n->n_inputs ? n->inputs[i]
					 : i < n->n_inputs + n->n_outputs ? n->outputs[i - n->n_inputs]
					 : n->implicit[i - n->n_inputs - n->n_outputs];
		if (!x)
			continue;
		f32 = f32 || is_f32(x);
		if (!unk && is_unknown(x))
			unk = x->name;
		if (!seq && is_f32_container(x))
			seq = x->name;
	}
	const char *bn = blocked_node(v, n);
	if (!f32 && !unk && !seq)
		return 0;   /* nothing float32 here: left alone */
	s->kind = K_CONV;
	if (bn)
		return strcmp(bn, n->name ? n->name : "") ? keep(v, n, R_OTHER, "in block-nodes ('%s')", bn)
							 : keep(v, n, R_OTHER, "in block-nodes");
	if (n->op == IR_OP_Constant) {
		s->kind = K_CONST;   /* a weight: its precision follows its readers */
		return 0;
	}
	if (blocked_op(v, n))
		return keep(v, n, R_OTHER, "%s is in block-ops", n->op_type);
	if (n->op == IR_OP_Cast && n->n_inputs == 1 && n->inputs[0] && type_of(n->inputs[0])->elem == v->T) {
		/* a Cast from the target type to float32 (such as the boundary an earlier conversion
		 * made): converted it is a Cast to itself, so it goes the way of its readers */
		s->neutral = true;
		return 0;
	}
	char subs[300] = "";
	for (int i = 0, k = 0; i < n->n_attrs; i++)
		if (n->attrs[i].type == IR_ATTR_GRAPH || n->attrs[i].type == IR_ATTR_GRAPHS)
			k += snprintf(subs + k, k < (int)sizeof(subs) ? sizeof(subs) - (size_t)k : 0, "%s%s", k ? ", " : "",
				      n->attrs[i].name);
	if (*subs)
		return keep(v, n, R_OTHER, "%s has subgraphs (%s), which this pass does not enter; Casts around it",
			    n->op_type, subs);
	if (seq)
		return keep(v, n, R_OTHER, "'%s' is a sequence, map or optional, which this pass leaves float32", seq);
	if (unk)
		return keep(v, n, R_OTHER, "the element type of '%s' is not known", unk);
	if (n->op == IR_OP_UNKNOWN) {
		if (ir_model_find_function(v->m, n))
			return keep(v, n, R_OTHER, "'%s' calls a model-local function, which this pass does not convert",
				    n->op_type);
		return keep(v, n, R_OTHER, "'%s'%s%s%s is not an op ogsh knows the types of", n->op_type,
			    n->domain && *n->domain ? " (domain '" : "", n->domain && *n->domain ? n->domain : "",
			    n->domain && *n->domain ? "')" : "");
	}
	unsigned since = since_of(v, n->op);
	if (!since)
		return keep(v, n, R_OTHER, "ONNX has no %s version of %s", v->tn, n->op_type);
	if (v->opset < since)
		return keep(v, n, R_OTHER, "%s takes %s from ONNX opset %u, the model imports opset %lld", n->op_type,
			    v->tn, since, (long long)v->opset);
	if (!strcmp(ir_ops[n->op].domain, FUSED_DOMAIN) && !fused_body_ok(v, n, why, sizeof(why)))
		return keep(v, n, R_OTHER, "%s", why);
	/* weights that float16 cannot hold */
	for (int i = 0; i < n->n_inputs; i++) {
		const struct cstat *cs = cstat_of(v, n->inputs[i]);
		if (!cs || v->clamp || !cstat_breaks(cs))
			continue;
		if (cs->over)
			return keep(v, n, R_OTHER, "its weight '%s' has %llu value%s beyond %s's largest %s (largest |x| "
				    "%s); clamp=on would clamp %s", n->inputs[i]->name, (unsigned long long)cs->over,
				    cs->over == 1 ? "" : "s", v->tn, num(v->tmax, b1, sizeof(b1)), num(cs->amax, b2, sizeof(b2)),
				    cs->over == 1 ? "it" : "them");
		return keep(v, n, R_OTHER, "its weight '%s' would become all zeros: its largest |x| %s is below %s's "
			    "smallest subnormal %.3g; clamp=on would clamp it", n->inputs[i]->name,
			    num(cs->amax, b1, sizeof(b1)), v->tn, v->tsub);
	}
	if (n->op == IR_OP_ConstantOfShape && !v->clamp) {
		const struct ir_attr *a = ir_node_attr(n, "value");
		if (a && a->type == IR_ATTR_TENSOR && a->t && a->t->dtype == IR_FLOAT && a->t->numel >= 1 &&
		    ir_tensor_data(a->t)) {
			struct cstat cs;
			tensor_stat(v, a->t, &cs);
			if (cstat_breaks(&cs))
				return keep(v, n, R_OTHER, "its value %s is out of %s's range; clamp=on would clamp it",
					    num(f32_at(a->t, 0), b1, sizeof(b1)), v->tn);
		}
	}
	/* long reductions, from the shapes */
	int acc = acc_kind(n->op);
	double depth = 0;
	bool sym = false, known = acc && red_depth(v, n, &depth, &sym);
	if (known && depth > (double)v->max_red)
		return keep(v, n, R_DEPTH, "%s over %s elements, deeper than max-reduction %lld", n->op_type,
			    num(depth, b1, sizeof(b1)), (long long)v->max_red);
	/* with calibration: activations beyond data-max, sums beyond the type's range */
	if (v->n_cal) {
		const struct ir_value *worst = NULL;
		double wv = 0;
		bool win = false;
		for (int i = 0; i < n->n_inputs + n->n_outputs; i++) {
			const struct ir_value *x = i < n->n_inputs ? n->inputs[i] : n->outputs[i - n->n_inputs];
			if (!x || !is_f32(x) || is_const_value(x))
				continue;
			const struct ir_calib_tensor *t = cal_find(v, x->name);
			if (t && cal_amax(t) > v->data_max && cal_amax(t) > wv) {
				worst = x;
				wv = cal_amax(t);
				win = i < n->n_inputs;
			}
		}
		if (worst)
			return keep(v, n, R_OTHER, "its %s '%s' reaches |x| = %s (calibration), above data-max %s",
				    win ? "input" : "output", worst->name, num(wv, b1, sizeof(b1)),
				    num(v->data_max, b2, sizeof(b2)));
		const struct ir_calib_tensor *t = known && n->inputs[0] ? cal_find(v, n->inputs[0]->name) : NULL;
		if (t && (acc == ACC_SUM || acc == ACC_SQUARES)) {
			double m1, m2;
			cal_moments(t, &m1, &m2);
			double est = depth * (acc == ACC_SUM ? m1 : m2);
			if (est > v->tmax)
				return keep(v, n, R_SUM, "%s over %s elements: its sum of %s reaches about %.3g (mean %s %.3g "
					    "by calibration), above %s's largest %s", n->op_type, num(depth, b1, sizeof(b1)),
					    acc == ACC_SUM ? "|x|" : "squares", est, acc == ACC_SUM ? "|x|" : "x^2",
					    acc == ACC_SUM ? m1 : m2, v->tn, num(v->tmax, b2, sizeof(b2)));
		}
	}
	if (acc && !known && sym)
		pass_note(v->c, n, "%s: the depth of its reduction depends on a symbolic dim, so max-reduction cannot "
			  "check it", n->op_type);
	s->neutral = is_neutral(n->op);
	return 0;
}

/* A Pow (or x*x) whose result feeds a reduction kept for its depth or sum stays float32 with it. */
static int keep_squares(struct cv *v, struct ir_node *n)
{
	struct nst *s = &v->ns[n->id];
	if (s->kind != K_CONV || n->n_outputs < 1 || !n->outputs[0])
		return 0;
	bool sq = n->op == IR_OP_Pow || (n->op == IR_OP_Mul && n->n_inputs == 2 && n->inputs[0] == n->inputs[1]);
	if (!sq)
		return 0;
	const struct ir_value *y = n->outputs[0];
	for (size_t u = 0; u < y->n_uses; u++) {
		const struct ir_node *r = y->uses[u].node;
		if (r->graph != v->g || r->id >= v->n_ns)
			continue;
		const struct nst *rs = &v->ns[r->id];
		if (rs->kind == K_KEEP && (rs->rule == R_DEPTH || rs->rule == R_SUM)) {
			char rn[256];
			return keep(v, n, R_OTHER, "%s feeds '%s' (%s), kept float32 for its long sum", n->op_type,
				    nname(r, rn, sizeof(rn)), r->op_type);
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Precisions                                                                */
/* ------------------------------------------------------------------------ */

static bool runs_t(const struct cv *v, const struct ir_node *n)
{
	if (n->graph != v->g || n->id < 0 || n->id >= v->n_ns)
		return false;
	const struct nst *s = &v->ns[n->id];
	return s->kind == K_CONV && !s->neutral_f32;
}

/* What slot i of n (an output when `out`) takes when it holds a float32 tensor. */
static int slot_mode(const struct cv *v, const struct ir_node *n, bool out, int i)
{
	if (!runs_t(v, n))
		return S_F32;
	if (!out && any_slot(n->op, i))
		return S_ANY;
	if (n->op >= 0 && n->op < IR_OP_COUNT && i < 8) {
		const struct ftype *f = &ftypes[n->op];
		unsigned mask = v->T == IR_FLOAT16 ? (out ? f->keep_out16 : f->keep_in16) : (out ? f->keep_outbf : f->keep_inbf);
		if (mask & (1u << i))
			return S_F32;
	}
	return S_T;
}

/* The precision a tensor's name must have whatever its writer does (P_NONE: free). */
static int pin_prec(const struct cv *v, const struct ir_value *x)
{
	for (size_t u = 0; u < x->n_uses; u++)
		if (x->uses[u].slot < 0)
			return P_F32;   /* read inside a subgraph, by name */
	if (x->is_output)
		return v->keep_io ? P_F32 : P_T;
	return P_NONE;
}

/* Whether x is a graph input as the user sees it (an initializer listed as an input only because IR < 4 wants it is not). */
static bool is_user_input(const struct cv *v, const struct ir_value *x)
{
	if (!x->is_input)
		return false;
	return !(x->init && v->m->has_ir_version && v->m->ir_version < 4);
}

/* The precision a weight is stored in: float32 when a reader needs it (or it cannot be converted), else the target. */
static int const_prec(const struct cv *v, const struct ir_value *x)
{
	int pin = pin_prec(v, x);
	if (pin)
		return pin;
	if (x->sparse_init)
		return P_F32;
	if (x->producer && (x->producer->id >= v->n_ns || v->ns[x->producer->id].kind != K_CONST))
		return P_F32;
	const struct cstat *cs = x->idx < v->n_vals && v->cs[x->idx].done ? &v->cs[x->idx] : NULL;
	if (cs && !v->clamp && cstat_breaks(cs))
		return P_F32;
	bool want_t = false;
	for (size_t u = 0; u < x->n_uses; u++) {
		int m = slot_mode(v, x->uses[u].node, false, x->uses[u].slot);
		if (m == S_F32)
			return P_F32;
		want_t = want_t || m == S_T;
	}
	return want_t ? P_T : P_F32;
}

/* The precision x has where it is made. */
static int src_prec(const struct cv *v, const struct ir_value *x)
{
	if (x->producer) {
		const struct ir_node *p = x->producer;
		if (p->id < v->n_ns && v->ns[p->id].kind == K_CONST)
			return const_prec(v, x);
		return slot_mode(v, p, true, x->producer_slot) == S_T ? P_T : P_F32;
	}
	if (is_user_input(v, x)) {
		int pin = pin_prec(v, x);   /* read inside a subgraph: float32 even with keep-io=off */
		return pin ? pin : v->keep_io ? P_F32 : P_T;
	}
	return const_prec(v, x);
}

/* The precision reader slot wants of a tensor whose source precision is `src`. */
static int want_prec(const struct cv *v, const struct ir_node *r, int slot, int src)
{
	int m = slot_mode(v, r, false, slot);
	return m == S_ANY ? src : m == S_T ? P_T : P_F32;
}

/* The Casts a neutral node n would cause around it if it ran in precision p. */
static int neutral_cost(struct cv *v, const struct ir_node *n, int p)
{
	struct nst *s = &v->ns[n->id];
	bool keep_f32 = s->neutral_f32;
	s->neutral_f32 = p == P_F32;
	int cost = 0;
	for (int i = 0; i < n->n_inputs; i++) {
		const struct ir_value *x = n->inputs[i];
		if (!x || !is_f32(x) || is_const_value(x))
			continue;
		cost += src_prec(v, x) != p;
	}
	for (int i = 0; i < n->n_outputs; i++) {
		const struct ir_value *y = n->outputs[i];
		if (!y || !is_f32(y))
			continue;
		int pin = pin_prec(v, y);
		bool other = pin && pin != p;
		for (size_t u = 0; u < y->n_uses && !other; u++)
			if (y->uses[u].slot >= 0)
				other = want_prec(v, y->uses[u].node, y->uses[u].slot, p) != p;
		cost += other;
	}
	s->neutral_f32 = keep_f32;
	return cost;
}

/* Lets neutral nodes follow their neighbours where that saves Casts (a few sweeps, both ways). */
static void settle_neutral(struct cv *v)
{
	int n = v->g->n_nodes;
	struct ir_node **order = malloc(sizeof(*order) * (size_t)(n ? n : 1));
	if (!order)
		return;   /* every neutral node converted: correct, maybe a Cast more */
	int k = 0;
	ir_for_each_node(v->g, x)
		order[k++] = x;
	for (int round = 0; round < 8; round++) {
		bool changed = false;
		for (int dir = 0; dir < 2; dir++)
			for (int j = 0; j < k; j++) {
				struct ir_node *x = order[dir ? k - 1 - j : j];
				struct nst *s = &v->ns[x->id];
				if (s->kind != K_CONV || !s->neutral)
					continue;
				int cf = neutral_cost(v, x, P_F32), ct = neutral_cost(v, x, P_T);
				bool f = s->neutral_f32 ? cf <= ct : cf < ct;
				if (f != s->neutral_f32) {
					s->neutral_f32 = f;
					changed = true;
				}
			}
		if (!changed)
			break;
	}
	free(order);
}

/* Marks the converted nodes that take no slot in the target type (they read tensors as they are). */
static void mark_passive(struct cv *v)
{
	ir_for_each_node(v->g, n) {
		struct nst *s = &v->ns[n->id];
		if (s->kind != K_CONV || s->neutral_f32)
			continue;
		bool t = false;
		for (int i = 0; i < n->n_inputs && !t; i++)
			t = is_f32(n->inputs[i]) && slot_mode(v, n, false, i) == S_T;
		for (int i = 0; i < n->n_outputs && !t; i++)
			t = is_f32(n->outputs[i]) && slot_mode(v, n, true, i) == S_T;
		s->passive = !t;
	}
}

/* ------------------------------------------------------------------------ */
/* Rewriting                                                                 */
/* ------------------------------------------------------------------------ */

static const char *prec_name(const struct cv *v, int p)
{
	return p == P_T ? v->tn : "float32";
}

static int set_tensor_attr(struct ir_node *n, const char *name, struct ir_tensor *t, struct ir_diag *d)
{
	struct ir_attr a = { 0 };
	a.name = strdup(name);
	a.type = IR_ATTR_TENSOR;
	a.has_type = true;
	a.t = t;
	if (!a.name) {
		ir_tensor_unref(t);
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	return ir_node_set_attr(n, &a, d);
}

/* Notes what clamping did to weight `name`. */
static int note_clamped(struct cv *v, const char *name, const struct cstat *cs, uint64_t n_clamped)
{
	char b1[64], b2[64];
	if (n_clamped) {
		v->n_clamped++;
		return add_note(v, NULL, "clamped '%s': %llu value%s beyond %s set to +-%s (largest |x| %s), %llu "
				"below its smallest subnormal set to +-%.3g", name, (unsigned long long)cs->over,
				cs->over == 1 ? "" : "s", num(v->tmax, b1, sizeof(b1)), b1, num(cs->amax, b2, sizeof(b2)),
				(unsigned long long)cs->vanish, v->tsub);
	}
	if (cs->vanish)
		return add_note(v, NULL, "'%s': %llu of %llu values %s below %s's smallest subnormal %.3g and become%s 0 "
				"(the largest of them %.3g, the tensor's largest |x| %s); clamp=on keeps them at +-%.3g", name,
				(unsigned long long)cs->vanish, (unsigned long long)cs->numel, cs->vanish == 1 ? "is" : "are",
				v->tn, v->tsub, cs->vanish == 1 ? "s" : "", cs->vmax, num(cs->amax, b1, sizeof(b1)), v->tsub);
	return 0;
}

/*
 * Converts the float32 attributes of a Constant or ConstantOfShape node
 * (value, value_float, value_floats) to the target type. `stats`: count
 * them in the report (main graph), not in function bodies.
 */
static int convert_value_attrs(struct cv *v, struct ir_node *n, bool stats)
{
	struct ir_diag *d = v->c->d;
	const struct ir_attr *a = ir_node_attr(n, "value");
	if (a && a->type == IR_ATTR_TENSOR && a->t && a->t->dtype == IR_FLOAT) {
		struct cstat cs;
		tensor_stat(v, a->t, &cs);
		uint64_t nc;
		struct ir_tensor *t = convert_tensor(v, a->t, &nc);
		if (!t)
			return IR_ENOMEM;
		if (stats) {
			v->n_consts++;
			v->bytes_before += 4.0 * (double)a->t->numel;
			v->bytes_after += 2.0 * (double)a->t->numel;
			char nm[300];
			snprintf(nm, sizeof(nm), "%s", n->outputs[0] ? n->outputs[0]->name : n->name);
			if (note_clamped(v, nm, &cs, nc))
				return IR_ENOMEM;
		}
		return set_tensor_attr(n, "value", t, d);
	}
	if (n->op == IR_OP_ConstantOfShape && !a) {
		/* the default value is a float32 0 */
		int64_t one = 1;
		struct ir_tensor *t = ir_tensor_new(v->T, 1, &one, d);
		return t ? set_tensor_attr(n, "value", t, d) : IR_ENOMEM;
	}
	const struct ir_attr *f = ir_node_attr(n, "value_float");
	const struct ir_attr *fs = ir_node_attr(n, "value_floats");
	if (n->op != IR_OP_Constant || (!(f && f->type == IR_ATTR_FLOAT) && !(fs && fs->type == IR_ATTR_FLOATS)))
		return 0;
	bool scalar = f && f->type == IR_ATTR_FLOAT;
	int64_t len = scalar ? 1 : (int64_t)fs->n;
	struct ir_tensor *t32 = ir_tensor_new(IR_FLOAT, scalar ? 0 : 1, &len, d);
	if (!t32)
		return IR_ENOMEM;
	float *p = ir_tensor_mutable(t32);
	for (int64_t i = 0; i < len && p; i++)
		p[i] = scalar ? f->f : fs->floats[i];
	uint64_t nc;
	struct cstat cs;
	tensor_stat(v, t32, &cs);
	struct ir_tensor *t = convert_tensor(v, t32, &nc);
	ir_tensor_unref(t32);
	if (!t)
		return IR_ENOMEM;
	if (stats) {
		v->n_consts++;
		v->bytes_before += 4.0 * (double)len;
		v->bytes_after += 2.0 * (double)len;
		if (note_clamped(v, n->outputs[0] ? n->outputs[0]->name : n->name, &cs, nc))
			return IR_ENOMEM;
	}
	int rc = set_tensor_attr(n, "value", t, d);
	if (!rc)
		ir_node_remove_attr(n, scalar ? "value_float" : "value_floats");
	return rc;
}

/* Sets the attribute that names n's output type to the target (Cast's to, EyeLike's dtype...). */
static int convert_dtype_attr(struct cv *v, struct ir_node *n)
{
	bool add;
	const char *name = dtype_attr(n->op, &add);
	if (!name)
		return 0;
	const struct ir_attr *a = ir_node_attr(n, name);
	if (a ? a->type == IR_ATTR_INT && a->i == IR_FLOAT : add)
		return pass_set_int_attr(n, name, v->T, v->c->d);
	return 0;
}

/* A node name made unique in g from base. */
static char *unique_node_name(const struct ir_graph *g, const char *base)
{
	size_t len = strlen(base) + 24;
	char *s = malloc(len);
	if (!s)
		return NULL;
	snprintf(s, len, "%s", base);
	int count = 0;
	for (unsigned k = 1; ir_node_by_name(g, s, &count); k++)
		snprintf(s, len, "%s_%u", base, k);
	return s;
}

/* A Cast of `from` to precision p writing `to` (a new value when NULL), placed before `before`. */
static struct ir_node *add_cast(struct cv *v, struct ir_value *from, struct ir_value **to, int p, struct ir_node *before)
{
	struct ir_graph *g = v->g;
	char base[400];
	if (!*to) {
		snprintf(base, sizeof(base), "%s_%s", from->name, prec_name(v, p));
		char *vn = pass_unique_name(g, base);
		if (!vn || !(*to = ir_value_new(g, vn, v->c->d))) {
			free(vn);
			oom(v);
			return NULL;
		}
		free(vn);
	}
	snprintf(base, sizeof(base), "%s_to_%s", from->name, prec_name(v, p));
	char *nn = unique_node_name(g, base);
	struct ir_node *c = nn ? ir_node_new(g, "Cast", "", nn, 1, 1, before) : NULL;
	free(nn);
	if (!c || ir_node_set_input(c, 0, from) || ir_node_set_output(c, 0, *to, v->c->d) ||
	    pass_set_int_attr(c, "to", p == P_T ? v->T : IR_FLOAT, v->c->d)) {
		if (!v->c->d || !v->c->d->error)
			oom(v);
		return NULL;
	}
	v->n_casts++;
	return c;
}

/* "conv1, conv2 and 3 more" */
static void readers_text(struct ir_node **r, int n, char *buf, size_t size)
{
	size_t k = 0;
	buf[0] = 0;
	for (int i = 0; i < n && i < 3; i++) {
		char nb[256];
		k += (size_t)snprintf(buf + k, k < size ? size - k : 0, "%s%s", i ? ", " : "", nname(r[i], nb, sizeof(nb)));
	}
	if (n > 3 && k < size)
		snprintf(buf + k, size - k, " and %d more", n - 3);
}

/* Converts what tensor x holds when its source precision is the target: initializer data, declared type. */
static int convert_source(struct cv *v, struct ir_value *x, bool renamed)
{
	if (x->init && x->init->dtype == IR_FLOAT) {
		struct cstat cs;
		tensor_stat(v, x->init, &cs);
		uint64_t nc;
		struct ir_tensor *t = convert_tensor(v, x->init, &nc);
		if (!t)
			return IR_ENOMEM;
		v->n_inits++;
		v->bytes_before += 4.0 * (double)x->init->numel;
		v->bytes_after += 2.0 * (double)x->init->numel;
		int rc = ir_value_set_init(x, t, v->c->d);
		ir_tensor_unref(t);
		if (rc || note_clamped(v, x->name, &cs, nc))
			return rc ? rc : IR_ENOMEM;
	} else if (x->producer && x->producer->op == IR_OP_Constant) {
		int rc = convert_value_attrs(v, x->producer, true);
		if (rc)
			return rc;
	}
	if (!renamed && x->type.kind == IR_TYPE_TENSOR && x->type.elem == IR_FLOAT)
		x->type.elem = v->T;
	return 0;
}

/* Gives x's readers the precision they want, with one Cast per other precision (see the top of the file). */
static int place_casts(struct cv *v, struct ir_value *x, int src)
{
	int pin = pin_prec(v, x);
	int other = src == P_T ? P_F32 : P_T;
	/* the readers (input slots), and who wants the other precision */
	int n = (int)x->n_uses, n_other = 0, n_src = 0;
	struct ir_node **rn = malloc(sizeof(*rn) * (size_t)(n ? n : 1));
	int *rs = malloc(sizeof(int) * (size_t)(n ? n : 1));
	bool *ro = malloc(sizeof(bool) * (size_t)(n ? n : 1));
	struct ir_node **lst = malloc(sizeof(*lst) * (size_t)(n ? n : 1));
	int rc = 0, k = 0;
	if (!rn || !rs || !ro || !lst) {
		rc = oom(v);
		goto out;
	}
	for (int u = 0; u < n; u++) {
		if (x->uses[u].slot < 0)
			continue;
		rn[k] = x->uses[u].node;
		rs[k] = x->uses[u].slot;
		ro[k] = want_prec(v, rn[k], rs[k], src) != src;
		n_other += ro[k];
		n_src += !ro[k];
		k++;
	}
	char rt[900];
	if (pin && pin != src && x->producer) {
		/* the name keeps precision `pin`: the writer writes a new tensor, a Cast makes the old one */
		struct ir_node *p = x->producer;
		int slot = x->producer_slot;
		char base[400];
		snprintf(base, sizeof(base), "%s_%s", x->name, prec_name(v, src));
		char *vn = pass_unique_name(v->g, base);
		struct ir_value *x2 = vn ? ir_value_new(v->g, vn, v->c->d) : NULL;
		free(vn);
		if (!x2 || (rc = ir_node_set_output(p, slot, NULL, v->c->d)) || (rc = ir_node_set_output(p, slot, x2, v->c->d))) {
			rc = rc ? rc : oom(v);
			goto out;
		}
		struct ir_value *to = x;
		struct ir_node *c = add_cast(v, x2, &to, pin, p->next);
		if (!c) {
			rc = IR_ERR;
			goto out;
		}
		int m = 0;
		for (int i = 0; i < k; i++)
			if (!ro[i]) {
				if (ir_node_set_input(rn[i], rs[i], x2)) {
					rc = oom(v);
					goto out;
				}
				lst[m++] = rn[i];
			}
		if (x->type.kind == IR_TYPE_TENSOR && ir_dtype_is_float(x->type.elem))
			x->type.elem = pin == P_T ? v->T : IR_FLOAT;
		pass_maps(v->c, x2->name, x->name);
		readers_text(lst, m, rt, sizeof(rt));
		rc = add_note(v, c, "Cast '%s' (%s) -> '%s' (%s): %s keeps its %s name%s%s", x2->name,
			      prec_name(v, src), x->name, prec_name(v, pin), x->is_output ? "the graph output" : "a tensor read in a subgraph",
			      prec_name(v, pin), m ? "; also read as is by " : "", m ? rt : "");
		goto out;
	}
	if (!n_other)
		goto out;
	struct ir_value *to = NULL;
	struct ir_node *before = x->producer ? x->producer->next : v->g->first;
	struct ir_node *c = add_cast(v, x, &to, other, before);
	if (!c) {
		rc = IR_ERR;
		goto out;
	}
	int m = 0;
	for (int i = 0; i < k; i++)
		if (ro[i]) {
			if (ir_node_set_input(rn[i], rs[i], to)) {
				rc = oom(v);
				goto out;
			}
			lst[m++] = rn[i];
		}
	pass_maps(v->c, to->name, x->name);
	readers_text(lst, m, rt, sizeof(rt));
	rc = add_note(v, c, "Cast '%s' (%s) -> '%s' (%s) for %s", x->name, prec_name(v, src),
		      to->name, prec_name(v, other), rt);
out:
	free(rn);
	free(rs);
	free(ro);
	free(lst);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Fused ops' functions                                                      */
/* ------------------------------------------------------------------------ */

static const char *fn_key(const struct ir_function *f)
{
	for (size_t i = 0; i < f->n_meta; i++)
		if (f->meta[i].key && !strcmp(f->meta[i].key, "ogsh.key"))
			return f->meta[i].value;
	return NULL;
}

static bool str_eq(const char *a, const char *b)
{
	return !strcmp(a ? a : "", b ? b : "");
}

/* Rewrites a copied function body for the target type: its constants and type attributes. */
static int convert_body(struct cv *v, struct ir_graph *b)
{
	ir_for_each_node(b, n) {
		int rc = 0;
		if (n->op == IR_OP_Constant || n->op == IR_OP_ConstantOfShape)
			rc = convert_value_attrs(v, n, false);
		if (!rc)
			rc = convert_dtype_attr(v, n);
		if (rc)
			return rc;
	}
	return 0;
}

static bool fn_overload_taken(const struct ir_model *m, const char *name, const char *dom, const char *ov)
{
	for (size_t i = 0; i < m->n_functions; i++)
		if (str_eq(m->functions[i].name, name) && str_eq(m->functions[i].domain, dom) &&
		    str_eq(m->functions[i].overload, ov))
			return true;
	return false;
}

/* Index of the model-local function n calls, or -1. */
static int fn_index(const struct ir_model *m, const struct ir_node *n)
{
	const struct ir_function *f = ir_model_find_function(m, n);
	return f ? (int)(f - m->functions) : -1;
}

/*
 * Points converted fused node n at the target-type variant of its
 * function: the one whose key says so, or a copy of its float32 one
 * (overload "<old>_float16") with its constants converted. *old gets the
 * index of the float32 function it left, or -1.
 */
static int convert_fn(struct cv *v, struct ir_node *n, char *done, size_t size)
{
	struct ir_model *m = v->m;
	int fi = fn_index(m, n);
	done[0] = 0;
	if (fi < 0)
		return 0;
	const struct ir_function *f = &m->functions[fi];
	const char *key = fn_key(f);
	char nk[4400];
	size_t kl = key ? strlen(key) : 0;
	if (key && kl > 8 && !strcmp(key + kl - 8, "|float32"))
		snprintf(nk, sizeof(nk), "%.*s|%s", (int)(kl - 8), key, v->tn);
	else
		snprintf(nk, sizeof(nk), "%s|%s|%s", f->name ? f->name : "", f->overload ? f->overload : "", v->tn);
	const char *ov = NULL;
	for (size_t i = 0; i < m->n_functions && !ov; i++) {
		const char *k = fn_key(&m->functions[i]);
		if (k && !strcmp(k, nk) && str_eq(m->functions[i].name, f->name) && str_eq(m->functions[i].domain, f->domain))
			ov = m->functions[i].overload ? m->functions[i].overload : "";
	}
	char nov[300];
	if (!ov) {
		struct ir_function cp;
		if (ir_function_copy(&cp, f))
			return oom(v);
		int rc = cp.body ? convert_body(v, cp.body) : 0;
		const char *base_ov = cp.overload && *cp.overload ? cp.overload : "";
		snprintf(nov, sizeof(nov), "%s%s%s", base_ov, *base_ov ? "_" : "", v->tn);
		for (int k = 2; fn_overload_taken(m, cp.name, cp.domain, nov) && k < 100000; k++)
			snprintf(nov, sizeof(nov), "%s%s%s_%d", base_ov, *base_ov ? "_" : "", v->tn, k);
		char *o = strdup(nov);
		char doc[4600];
		snprintf(doc, sizeof(doc), "%s (in %s, made by convert-%s)", cp.doc ? cp.doc : "", v->tn,
			 v->T == IR_FLOAT16 ? "fp16" : "bf16");
		char *dc = strdup(doc);
		char *nkey = strdup(nk);
		bool have_key = false;
		for (size_t i = 0; i < cp.n_meta; i++)
			if (cp.meta[i].key && !strcmp(cp.meta[i].key, "ogsh.key")) {
				free(cp.meta[i].value);
				cp.meta[i].value = nkey;
				have_key = true;
			}
		struct ir_kv *mk = have_key ? cp.meta : realloc(cp.meta, sizeof(*mk) * (cp.n_meta + 1));
		if (mk && !have_key) {
			cp.meta = mk;
			mk[cp.n_meta].key = strdup("ogsh.key");
			mk[cp.n_meta].value = nkey;
			cp.n_meta++;
			if (!mk[cp.n_meta - 1].key)
				rc = IR_ENOMEM;
		}
		if (!mk)
			free(nkey);
		free(cp.overload);
		cp.overload = o;
		free(cp.doc);
		cp.doc = dc;
		struct ir_function *fs = NULL;
		if (!rc && (!o || !dc || !nkey || !mk || !(fs = realloc(m->functions, sizeof(*fs) * (m->n_functions + 1)))))
			rc = IR_ENOMEM;
		if (rc) {
			ir_function_clear(&cp);
			if (!v->c->d || !v->c->d->error)
				oom(v);
			return rc;
		}
		m->functions = fs;
		fs[m->n_functions++] = cp;
		ov = fs[m->n_functions - 1].overload;
	}
	snprintf(done, size, "overload '%s'", ov);
	char *o = strdup(ov);
	if (!o)
		return oom(v);
	free(n->overload);
	n->overload = o;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The pass                                                                  */
/* ------------------------------------------------------------------------ */

static void cv_free(struct cv *v)
{
	for (int i = 0; i < v->n_ns; i++)
		free(v->ns[i].why);
	free(v->ns);
	free(v->cs);
	free(v->prec);
	free(v->bnode_used);
	strlist_clear(&v->bops);
	strlist_clear(&v->bnodes);
	for (int i = 0; i < v->n_notes; i++)
		free(v->notes[i].text);
	free(v->notes);
}

static int setup(struct cv *v, struct pass_ctx *c, int T)
{
	v->c = c;
	v->m = c->m;
	v->g = c->m->graph;
	v->T = T;
	v->tn = ir_dtype_name(T);
	v->tmax = T == IR_FLOAT16 ? 65504.0 : 3.3895313892515355e38;
	v->tsub = T == IR_FLOAT16 ? ldexp(1, -24) : ldexp(1, -133);
	v->opset = ir_model_opset(c->m, "");
	v->keep_io = pass_opt_bool(c, "keep-io");
	v->clamp = pass_opt_bool(c, "clamp");
	v->data_max = pass_opt_float(c, "data-max");
	v->max_red = pass_opt_int(c, "max-reduction");
	if (!(v->data_max > 0))
		return ir_diag_err(c->d, IR_ERR, "data-max must be above 0, not %g", v->data_max);
	if (v->max_red < 1)
		return ir_diag_err(c->d, IR_ERR, "max-reduction must be 1 or more, not %lld", (long long)v->max_red);
	if (v->opset <= 0)
		return ir_diag_err(c->d, IR_ERR, "the model imports no ONNX opset");
	if (T == IR_BFLOAT16 && v->opset < 13)
		return ir_diag_err(c->d, IR_ERR, "the model imports ONNX opset %lld, and bfloat16 needs opset 13 or "
				   "later (Cast and the arithmetic ops take it from there)", (long long)v->opset);
	int rc = parse_list(v, "block-ops", pass_opt_str(c, "block-ops"), DEFAULT_BLOCK_OPS, &v->bops);
	if (!rc)
		rc = parse_list(v, "block-nodes", pass_opt_str(c, "block-nodes"), NULL, &v->bnodes);
	if (rc)
		return rc;
	if (!(v->bnode_used = calloc((size_t)(v->bnodes.n ? v->bnodes.n : 1), 1)))
		return oom(v);
	v->n_ns = v->g->next_id > 0 ? v->g->next_id : 1;
	v->n_vals = v->g->n_values;
	v->ns = calloc((size_t)v->n_ns, sizeof(*v->ns));
	v->cs = calloc(v->n_vals ? v->n_vals : 1, sizeof(*v->cs));
	v->prec = calloc(v->n_vals ? v->n_vals : 1, 1);
	if (!v->ns || !v->cs || !v->prec)
		return oom(v);
	if (c->calib && c->calib->n > 0) {
		v->calib = c->calib;
		v->n_cal = c->calib->n;
	}
	return 0;
}

static int run_convert(struct pass_ctx *c, int T)
{
	struct cv V = { 0 }, *v = &V;
	int rc = pass_infer(c);
	if (rc == IR_EINTR || rc == IR_ENOMEM)
		return ir_diag_err(c->d, rc, rc == IR_EINTR ? "interrupted" : "out of memory");
	if ((rc = setup(v, c, T)))
		goto out;
	struct ir_graph *g = v->g;

	/* 1. what becomes of each node */
	ir_for_each_node(g, n)
		if ((rc = decide(v, n)))
			goto out;
	for (int i = 0; i < v->bnodes.n; i++)
		if (!v->bnode_used[i]) {
			rc = ir_diag_err(c->d, IR_ERR, "block-nodes: '%s' matches no node (a name, an id, or a glob)",
					 v->bnodes.s[i]);
			goto out;
		}
	ir_for_each_node(g, n)
		if ((rc = keep_squares(v, n)))
			goto out;
	settle_neutral(v);
	mark_passive(v);

	/* 2. every float32 tensor's precision where it is made (before anything moves) */
	for (size_t i = 0; i < v->n_vals; i++) {
		struct ir_value *x = g->values[i];
		if (x && is_f32(x))
			v->prec[i] = (unsigned char)src_prec(v, x);
	}

	/* 3. the converted nodes' type attributes and fused functions */
	size_t n_fn0 = c->m->n_functions;
	bool *fn_was = calloc(n_fn0 ? n_fn0 : 1, 1);
	if (!fn_was) {
		rc = oom(v);
		goto out;
	}
	pass_fns_called(c->m, fn_was);
	char **fn_done = calloc((size_t)v->n_ns, sizeof(char *));
	if (!fn_done) {
		free(fn_was);
		rc = oom(v);
		goto out;
	}
	ir_for_each_node(g, n) {
		if (n->id >= v->n_ns || !runs_t(v, n))
			continue;
		const struct ir_value *y = n->n_outputs > 0 ? n->outputs[0] : NULL;
		bool out_t = y && y->idx < v->n_vals && v->prec[y->idx] == P_T;
		if (out_t && (rc = convert_dtype_attr(v, n)))
			break;
		if (out_t && n->op == IR_OP_ConstantOfShape && (rc = convert_value_attrs(v, n, true)))
			break;
		if (n->op >= 0 && !strcmp(ir_ops[n->op].domain, FUSED_DOMAIN)) {
			char done[400];
			if ((rc = convert_fn(v, n, done, sizeof(done))))
				break;
			if (*done && !(fn_done[n->id] = strdup(done))) {
				rc = oom(v);
				break;
			}
		}
	}
	if (!rc)
		rc = pass_drop_uncalled_fns(v->m, fn_was, n_fn0, FUSED_DOMAIN, v->c->d);
	free(fn_was);

	/* 4. weights and types, then the Casts */
	int n_t = 0;
	for (size_t i = 0; i < v->n_vals && !rc; i++) {
		struct ir_value *x = g->values[i];
		if (!x || !v->prec[i])
			continue;
		int pin = pin_prec(v, x);
		bool renamed = pin && pin != v->prec[i] && x->producer;
		if (v->prec[i] == P_T) {
			n_t++;
			if ((rc = convert_source(v, x, renamed)))
				break;
		}
		rc = place_casts(v, x, v->prec[i]);
	}

	/* 5. the report: a summary, the nodes kept float32, Casts and weights, the nodes converted */
	if (!rc) {
		int n_conv = 0, n_keep = 0;
		for (int i = 0; i < v->n_ns; i++) {
			n_conv += v->ns[i].kind == K_CONV && !v->ns[i].neutral_f32 && !v->ns[i].passive;
			n_keep += v->ns[i].kind == K_KEEP || (v->ns[i].kind == K_CONV && v->ns[i].neutral_f32);
		}
		char b1[32], b2[32];
		pass_note(c, NULL, "%d node%s to %s, %d kept float32; %d tensor%s now %s, %d initializer%s and %d Constant%s "
			  "converted (%s -> %s); %d Cast%s inserted%s", n_conv, n_conv == 1 ? "" : "s", v->tn, n_keep, n_t,
			  n_t == 1 ? "" : "s", v->tn, v->n_inits, v->n_inits == 1 ? "" : "s", v->n_consts,
			  v->n_consts == 1 ? "" : "s", pass_bytes_text(v->bytes_before, b1, sizeof(b1)),
			  pass_bytes_text(v->bytes_after, b2, sizeof(b2)), v->n_casts, v->n_casts == 1 ? "" : "s",
			  v->keep_io ? " (keep-io: the graph's inputs and outputs stay float32)" : "");
		if (v->clamp && v->n_clamped)
			pass_note(c, NULL, "clamp=on: %d weight%s clamped (listed below)", v->n_clamped,
				  v->n_clamped == 1 ? "" : "s");
		else if (v->clamp)
			pass_note(c, NULL, "clamp=on: no weight needed clamping");
		if (c->calib)
			pass_note(c, NULL, "with calibration (%d tensors%s): data-max %g applies", v->n_cal,
				  c->calib->random ? ", from random data: the ranges say nothing about real inputs" : "",
				  v->data_max);
		ir_for_each_node(g, n) {
			if (n->id >= v->n_ns)
				continue;   /* a Cast made here */
			const struct nst *s = &v->ns[n->id];
			if (s->kind == K_KEEP)
				pass_rejected(c, n, "%s", s->why);
			else if (s->kind == K_CONV && s->neutral_f32 && n->op == IR_OP_Cast)
				pass_rejected(c, n, "a Cast from %s to float32 whose readers are float32: left as it is", v->tn);
			else if (s->kind == K_CONV && s->neutral_f32)
				pass_rejected(c, n, "%s only moves or selects values and its neighbours are float32: left "
					      "float32, which saves Casts", n->op_type);
		}
		for (int i = 0; i < v->n_notes; i++)
			pass_note(c, v->notes[i].node >= 0 ? ir_node_by_id(g, v->notes[i].node) : NULL, "%s", v->notes[i].text);
		ir_for_each_node(g, n) {
			if (n->id >= v->n_ns || !runs_t(v, n) || v->ns[n->id].passive)
				continue;
			const char *fd = fn_done[n->id];
			if (n->op == IR_OP_Cast)
				pass_rewrote(c, n, "Cast now to %s", v->tn);
			else
				pass_rewrote(c, n, "%s in %s%s%s", n->op_type, v->tn, fd ? ", function " : "", fd ? fd : "");
		}
		if (n_t || v->n_casts)
			c->rep->changed = true;
	}
	for (int i = 0; i < v->n_ns; i++)
		free(fn_done[i]);
	free(fn_done);
out:
	cv_free(v);
	return rc;
}

static int run_fp16(struct pass_ctx *c)
{
	return run_convert(c, IR_FLOAT16);
}

static int run_bf16(struct pass_ctx *c)
{
	return run_convert(c, IR_BFLOAT16);
}

#define OPT_COMMON(T)                                                                                         \
	{ "keep-io", "bool", "true",                                                                                 \
	  "the graph's float32 inputs and outputs stay float32, with a Cast at the boundary; off: they become " T }, \
	{ "block-ops", "string", DEFAULT_BLOCK_OPS,                                                                   \
	  "ops kept float32 (comma list; a domain such as ai.onnx.ml blocks all its ops; +Op,-Op edit the default)" }, \
	{ "block-nodes", "string", "", "nodes kept float32: names, ids (n7 or 7) or globs ('/encoder/*'), comma list" }, \
	{ "clamp", "bool", "false", "clamp weights beyond " T "'s range or below its smallest subnormal, and list "    \
	  "them; off: they are reported and their readers stay float32" }

static const struct pass_option fp16_opts[] = {
	OPT_COMMON("float16"),
	{ "data-max", "float", "4096", "with calibration: a node whose activations reach a larger |x| stays float32" },
	{ "max-reduction", "int", "65536", "reductions (ReduceSum/Mean, LayerNormalization, Softmax...) over more "
	  "elements stay float32" },
	{ NULL, NULL, NULL, NULL },
};

static const struct pass_option bf16_opts[] = {
	OPT_COMMON("bfloat16"),
	{ "data-max", "float", "1e30", "with calibration: a node whose activations reach a larger |x| stays float32" },
	{ "max-reduction", "int", "65536", "reductions (ReduceSum/Mean, LayerNormalization, Softmax...) over more "
	  "elements stay float32" },
	{ NULL, NULL, NULL, NULL },
};

#define EXPLAIN_RULES                                                                                                \
	"Which nodes stay float32, each named in the report with its reason, in this order: those in block-nodes "   \
	"(names, ids, globs); ops in block-ops, by default onnxruntime's float16 converter's list (the ai.onnx.ml " \
	"ops, RandomUniformLike, NonMaxSuppression, TopK, RoiAlign, Range, CumSum, Min, Max, Upsample: ops whose "    \
	"results are indices, counts or thresholds that rounding breaks, or that its kernels lack); block-ops=+Op "   \
	"adds to that list, block-ops=-Op takes one out, block-ops=A,B replaces it, block-ops= empties it; nodes "    \
	"with subgraphs (If, Loop, Scan), which this pass does not enter: they get Casts around them, and a tensor "  \
	"they read by name keeps its name in float32; sequences; tensors whose type is not known; ops that ONNX "  \
	"does not define for the type at the model's opset (each op's type constraints decide: most ops take "       \
	"bfloat16 from opset 13, Conv from 22, Einsum never; ogsh's fused ops when an op of their function body does not); nodes "        \
	"reading a weight that does not fit (below); reductions deeper than max-reduction; and, with calibration, "   \
	"the activation and long-sum rules below. Where unsure, the node stays float32.\n\n"                          \
	"Long sums. A reduction adds many numbers: ReduceSum and ReduceMean, the mean and the variance of "           \
	"LayerNormalization (a sum of squares), Softmax's sum of exponentials, a norm's Pow and ReduceSum. A sum of " \
	"65,536 values of size 1 is 65,536, past float16's 65,504: that is why max-reduction defaults to 65536 (2^16), " \
	"and a reduction over more elements (from the shapes: the product of the reduced dims) stays float32, with "  \
	"a Pow or x*x that feeds it (the squares then add up unrounded). A symbolic dim leaves the depth unknown: "   \
	"the report says so. With calibration, a sum-type reduction whose input's mean |x| (or mean x^2 for the "     \
	"variance, norms and ReduceSumSquare) times its depth exceeds the type's largest value stays float32 too: "   \
	"a LayerNorm over 768 features whose inputs have mean x^2 of 100 sums squares to 76,800, an overflow in "     \
	"float16 even though every input is small.\n\n"                                                               \
	"data-max (with calibration: `calibrate` first, or a calibration the shell passes): a node whose input or "   \
	"output activations reached a larger |x| on the calibration data stays float32, and the report names the "   \
	"tensor and the value. The default 4096 leaves float16 16x of headroom below 65504 for what happens inside "  \
	"the op (a product before it is summed, x*x in a variance, an exp). Without calibration this rule and the "   \
	"calibrated sum rule do not run; everything else is the same.\n\n"                                           \
	"Weights. A float32 weight beyond the type's largest value would become infinite, and one whose non-zero "    \
	"values all fall below its smallest subnormal would become all zeros (an epsilon of 1e-12 added before a "   \
	"division or a square root): the nodes reading it stay float32 and the report says which weight and its "    \
	"largest |x|; clamp=on instead clamps such values to the largest value or the smallest subnormal (signs "     \
	"kept) and lists every tensor clamped. A weight where only some tiny values flush to zero is converted and " \
	"noted: next to its other values they change nothing.\n\n"                                                   \
	"Casts. Every converted float32 tensor has one precision where it is made; each reader wants one; the "       \
	"readers on the other side share a single Cast, so a chain of converted ops costs exactly two Casts with "    \
	"keep-io (one after the input, one before the output). Ops that only move or select values (Reshape, "       \
	"Transpose, Concat, Slice, Gather, Relu, MaxPool...) give the same result in either precision, so they take " \
	"the precision of their neighbours where that saves Casts, and the report says so. Weights read by both "     \
	"sides stay float32 and the converted readers read a Cast of them (one copy in the file). A graph output "   \
	"written by a converted node keeps its name and type: the node writes NAME_float16 and a Cast writes NAME. "  \
	"Every new tensor is mapped to the one it stands for, so compare --stages and dot --color-by error line up " \
	"the stages.\n\n"                                                                                             \
	"What changes in the graph: float32 initializers and Constant values (Constant, ConstantOfShape), the types " \
	"of float32 tensors (value_info, and the graph's inputs and outputs with keep-io=off), the attributes that "   \
	"name a type (Cast's to, EyeLike's and the Random ops' dtype, the window ops' output_datatype, Pointwise's "   \
	"dtype), and the model-local functions of ogsh's fused ops (FusedConv, FusedGemm, FusedAttention, "          \
	"Pointwise): a converted fused node calls a copy of its function for the new type (overload NAME_float16, "   \
	"constants converted), and functions no node calls any more go. Integer tensors and other float types are "  \
	"left alone. LayerNormalization's stash_type stays float32 (its statistics are computed in float32)."

const struct pass pass_convert_fp16 = {
	.name = "convert-fp16",
	.summary = "convert the float32 graph to float16, keeping float32 where float16 overflows or ONNX has no "
		   "float16 op, with the fewest Casts",
	.explain =
		"float16 (IEEE half) has 1 sign bit, 5 exponent bits and 10 mantissa bits: about 3 significant decimal "
		"digits (a relative step of 2^-10, 0.1%), a largest finite value of 65,504, and below 6.1e-5 subnormal "
		"numbers down to 2^-24 = 5.96e-8, under which everything is 0. Weights and activations take half the "
		"memory and bandwidth of float32, and GPUs multiply float16 on their tensor cores many times faster "
		"(accumulating in float32). Most trained networks keep their accuracy in float16; what breaks is range: "
		"a value past 65,504 becomes infinite, a long sum overflows, a tiny epsilon becomes 0.\n\n"
		"This pass turns every float32 tensor of the graph into float16 except where a rule keeps it: it "
		"converts the initializers and constants, the types, and the attributes that carry a type, and puts a "
		"Cast wherever a float16 tensor meets a node that stays float32. With keep-io (the default) the graph's "
		"float32 inputs and outputs keep their names and types, so whatever feeds the model and reads its "
		"results does not change; a Cast after each input and before each output does the conversion. "
		"keep-io=off makes them float16 too (the model then takes and returns float16).\n\n" EXPLAIN_RULES,
	.options = fp16_opts,
	.level = 0,
	.run = run_fp16,
};

const struct pass pass_convert_bf16 = {
	.name = "convert-bf16",
	.summary = "convert the float32 graph to bfloat16, keeping float32 where ONNX has no bfloat16 op or sums "
		   "run long, with the fewest Casts",
	.explain =
		"bfloat16 (brain float) is the top half of a float32: 1 sign bit, 8 exponent bits and 7 mantissa bits. "
		"It has float32's range (largest value 3.39e38, subnormals down to 2^-133) but only about 2 significant "
		"decimal digits (a relative step of 2^-7, 0.8%). It halves memory and bandwidth like float16 without "
		"float16's overflows, which is why training uses it; the price is precision, so long sums (which GPUs "
		"accumulate in float32) and small differences of large numbers are where it loses.\n\n"
		"This pass turns every float32 tensor of the graph into bfloat16 except where a rule keeps it, as "
		"convert-fp16 does (see there): initializers, constants, types and type attributes converted, a Cast "
		"wherever a bfloat16 tensor meets a float32 node, keep-io by default. ONNX took bfloat16 later than "
		"float16: most ops from opset 13, convolutions, pools and the trigonometric ops from 22, so at older "
		"opsets more nodes stay float32 (the report names the opset each needs); below opset 13 the pass "
		"refuses. data-max defaults to 1e30: bfloat16 only overflows near float32's own limit. onnxruntime's "
		"CPU provider has few bfloat16 kernels: a converted model is for GPUs (and for ogsh's run).\n\n" EXPLAIN_RULES,
	.options = bf16_opts,
	.level = 0,
	.run = run_bf16,
};
