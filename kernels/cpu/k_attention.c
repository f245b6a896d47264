/*
 * k_attention.c - CPU kernels: attention ops.
 *
 * Attention (opset 23/24) and ogsh's FusedAttention, RotaryEmbedding, LinearAttention,
 * CausalConvWithState, and FlexAttention of ai.onnx.preview. Inputs are
 * read as doubles and the arithmetic is done in double; each output element
 * is rounded once when stored (float16/bfloat16 included), except where the
 * op defines intermediate values in a narrower type (FlexAttention's scores
 * and probabilities, the conv output before CausalConvWithState's SiLU),
 * and attention without softcap or the scores output, which computes in
 * float32 on cpu_sgemm as the standard ops it stands for do: FusedAttention
 * of float32 tensors in place (attn32_heads), the other cases (float16,
 * bfloat16, Attention, past key/value) from float32 copies (attn_heads_f32).
 */
#include "cpu.h"

#include <math.h>
#include <stdlib.h>

/* --- small helpers --- */

static bool is_float_type(int dt)
{
	return dt == IR_FLOAT || dt == IR_DOUBLE || dt == IR_FLOAT16 || dt == IR_BFLOAT16;
}

/* v rounded to the precision of a float dtype (double: unchanged). */
static double round_to(int dt, double v)
{
	switch (dt) {
	case IR_FLOAT: return (float)v;
	case IR_FLOAT16: return ir_f16_to_f32(ir_f32_to_f16((float)v));
	case IR_BFLOAT16: return ir_bf16_to_f32(ir_f32_to_bf16((float)v));
	default: return v;
	}
}

/* *acc *= v, false on overflow past what size_t counts of doubles allow. */
static bool mul_ok(uint64_t *acc, int64_t v)
{
	if (v < 0)
		return false;
	if (v && *acc > (UINT64_MAX / 16) / (uint64_t)v)
		return false;
	*acc *= (uint64_t)v;
	return true;
}

static void *alloc_f64(struct cpu_kctx *k, uint64_t n)
{
	if (n > SIZE_MAX / sizeof(double) - 1) {
		ir_diag_err(k->d, IR_ENOMEM, "out of memory");
		return NULL;
	}
	double *p = malloc(sizeof(double) * (size_t)(n ? n : 1));
	if (!p)
		ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	return p;
}

/* Softmax of n values in place. A row that is -inf everywhere gives NaN,
 * as in the ONNX definition (exp(-inf - -inf)). */
static void softmax_row(double *s, int64_t n)
{
	double mx = -INFINITY;
	for (int64_t j = 0; j < n; j++)
		if (s[j] > mx)
			mx = s[j];
	double sum = 0;
	for (int64_t j = 0; j < n; j++) {
		s[j] = exp(s[j] - mx);
		sum += s[j];
	}
	for (int64_t j = 0; j < n; j++)
		s[j] /= sum;
}

/* softmax_row in float, for the float32 paths; nan_zero: NaN results are 0.
 * Vectorized (cpu_fast_f32's softmax): the same bits on every thread count. */
static void softmax_row_f32(float *row, int64_t n, bool nan_zero)
{
	cpu_fast_f32(CPU_FAST_SOFTMAX, row, row, n);
	for (int64_t t = 0; nan_zero && t < n; t++)
		if (isnan(row[t]))
			row[t] = 0;
}

/* ------------------------------------------------------------------------ */
/* Attention                                                                 */
/* ------------------------------------------------------------------------ */

/*
 * Q, K, V are 4-D (batch, heads, seq, head_size) or 3-D (batch, seq,
 * heads * head_size). An element (b, h, s, d) is at b*sb + h*sh + s*ss + d.
 */
struct attn_view {
	int64_t b, heads, seq, size;   /* batch, head count, sequence length, head size */
	int64_t sb, sh, ss, off;
};

static int attn_view(struct cpu_kctx *k, const struct ir_tensor *t, const char *what, int64_t heads, bool bshd,
		     struct attn_view *v)
{
	if (t->rank == 4) {   /* heads on axis 1, or 2 with bshd (batch, seq, heads, head_size) */
		const int hx = bshd ? 2 : 1, sx = 3 - hx;
		const int64_t st[3] = { t->dims[1] * t->dims[2] * t->dims[3], t->dims[2] * t->dims[3], t->dims[3] };
		v->b = t->dims[0];
		v->off = 0;
		v->heads = t->dims[hx];
		v->seq = t->dims[sx];
		v->size = t->dims[3];
		v->sb = st[0];
		v->sh = st[hx];
		v->ss = st[sx];
		return 0;
	}
	if (heads <= 0)
		return kerr(k, "%s is 3-D: q_num_heads and kv_num_heads must be positive", what);
	if (t->dims[2] % heads)
		return kerr(k, "%s's last dimension %lld is not a multiple of its %lld heads", what,
			    (long long)t->dims[2], (long long)heads);
	v->b = t->dims[0];
	v->off = 0;
	v->heads = heads;
	v->seq = t->dims[1];
	v->size = t->dims[2] / heads;
	v->sh = v->size;
	v->ss = t->dims[2];
	v->sb = v->seq * v->ss;
	return 0;
}

struct attn_job {
	const struct ir_tensor *Q, *M;
	const struct attn_view *q;
	int qt;
	const double *pk, *pv;   /* present key and value, (B, Hkv, T, D or Dv) */
	int64_t D, Dv, T, Lq, Hq, Hkv, group, P;
	double scale, softcap;
	const int64_t *mdims, *mstr;
	bool mbool;
	int is_causal;
	const int64_t *nonpad;
	void *yd, *qkout;
	int64_t mode;
	bool nan_zero;
	int64_t ysb, ysh, yss;   /* y (b, h, i, d) at b*ysb + h*ysh + i*yss + d */
	double *scratch;         /* per worker: D + 3 T doubles */
};

/* What the mask, the causal limit and nonpad_kv_seqlen add to the score of
 * query i and key j of (batch b, head h): 0, the mask's value or -inf. */
static double attn_bias(const struct attn_job *jb, int64_t b, int64_t h, int64_t i, int64_t j)
{
	const struct ir_tensor *M = jb->M;
	const int64_t *mstr = jb->mstr;
	if ((jb->is_causal && j > i + jb->P) || (jb->nonpad && j >= jb->nonpad[b]))
		return -INFINITY;
	if (!M)
		return 0;
	if (j >= jb->mdims[3])
		return -INFINITY;
	uint64_t mo = (uint64_t)(b * mstr[0] + h * mstr[1] + i * mstr[2] + j * mstr[3]);
	if (jb->mbool)
		return kldi(IR_BOOL, kdata(M), mo) ? 0 : -INFINITY;
	return kld(M->dtype, kdata(M), mo);
}

/* the (batch, head) pairs [p0, p1) of an attention */
static void attn_heads(void *ctx, int64_t p0, int64_t p1, int worker)
{
	const struct attn_job *jb = ctx;
	const struct ir_tensor *Q = jb->Q;
	const struct attn_view q = *jb->q;
	const int qt = jb->qt;
	const double *pk = jb->pk, *pv = jb->pv;
	const int64_t D = jb->D, Dv = jb->Dv, T = jb->T, Lq = jb->Lq, Hq = jb->Hq, Hkv = jb->Hkv;
	const int64_t group = jb->group, mode = jb->mode;
	const double scale = jb->scale, softcap = jb->softcap;
	const bool nan_zero = jb->nan_zero;
	const int64_t ysb = jb->ysb, ysh = jb->ysh, yss = jb->yss;
	void *yd = jb->yd, *qkout = jb->qkout;
	double *qv = jb->scratch + (size_t)worker * (size_t)(D + 3 * T);
	double *row = qv + D, *raw = row + T, *cap = raw + T;
	for (int64_t p = p0; p < p1; p++) {
		const int64_t b = p / Hq, h = p % Hq;
		const int64_t hk = h / group;
		const double *kb = pk + (b * Hkv + hk) * T * D, *vb = pv + (b * Hkv + hk) * T * Dv;
		for (int64_t i = 0; i < Lq; i++) {
			uint64_t qo = (uint64_t)(q.off + b * q.sb + h * q.sh + i * q.ss);
			for (int64_t d = 0; d < D; d++)
				qv[d] = kld(qt, kdata(Q), qo + (uint64_t)d);
			for (int64_t j = 0; j < T; j++) {
				double acc = 0;
				const double *kr = kb + j * D;
				for (int64_t d = 0; d < D; d++)
					acc += qv[d] * kr[d];
				raw[j] = acc * scale;
				/* softcap comes before the mask, so -inf stays -inf */
				cap[j] = softcap > 0 ? softcap * tanh(raw[j] / softcap) : raw[j];
				row[j] = cap[j] + attn_bias(jb, b, h, i, j);
			}
			uint64_t qko = (uint64_t)(((b * Hq + h) * Lq + i) * T);
			if (qkout && mode == 0)
				for (int64_t j = 0; j < T; j++)
					kst(qt, qkout, qko + (uint64_t)j, raw[j]);
			if (qkout && mode == 1)
				for (int64_t j = 0; j < T; j++)
					kst(qt, qkout, qko + (uint64_t)j, cap[j]);
			if (qkout && mode == 2)
				for (int64_t j = 0; j < T; j++)
					kst(qt, qkout, qko + (uint64_t)j, row[j]);
			softmax_row(row, T);
			for (int64_t j = 0; nan_zero && j < T; j++)
				if (isnan(row[j]))
					row[j] = 0;
			if (qkout && mode == 3)
				for (int64_t j = 0; j < T; j++)
					kst(qt, qkout, qko + (uint64_t)j, row[j]);
			for (int64_t d = 0; d < Dv; d++) {
				double acc = 0;
				for (int64_t j = 0; j < T; j++)
					acc += row[j] * vb[j * Dv + d];
				kst(qt, yd, (uint64_t)(b * ysb + h * ysh + i * yss + d), acc);
			}
		}
	}
}

/*
 * The float32 path (no softcap, no qk output): per (batch, head) pair,
 * S = Q K^T * scale and O = P V by cpu_sgemm (called inside a pool range it
 * runs on this thread alone), the mask, causal limit and softmax in float
 * between them. Q, K and V of float16/bfloat16 go in exactly as float32;
 * the output is rounded once. The double path above is element by element
 * and about 10x slower; the two agree to float32 rounding.
 */
struct attn_f32 {
	const struct attn_job *jb;
	const float *kf, *vf;   /* (B, Hkv, T, D) and (B, Hkv, T, Dv) */
	float *scratch;         /* per worker: per floats */
	size_t per;
};

static void attn_heads_f32(void *ctx, int64_t p0, int64_t p1, int worker)
{
	const struct attn_f32 *af = ctx;
	const struct attn_job *jb = af->jb;
	const struct ir_tensor *Q = jb->Q;
	const struct attn_view q = *jb->q;
	const int qt = jb->qt;
	const int64_t D = jb->D, Dv = jb->Dv, T = jb->T, Lq = jb->Lq, Hq = jb->Hq, Hkv = jb->Hkv;
	const int64_t group = jb->group;
	const bool nan_zero = jb->nan_zero;
	float *qf = af->scratch + (size_t)worker * af->per, *sc = qf + Lq * D, *of = sc + Lq * T;
	for (int64_t p = p0; p < p1; p++) {
		const int64_t b = p / Hq, h = p % Hq, hk = h / group;
		const float *kb = af->kf + (b * Hkv + hk) * T * D, *vb = af->vf + (b * Hkv + hk) * T * Dv;
		for (int64_t i = 0; i < Lq; i++) {
			uint64_t qo = (uint64_t)(q.off + b * q.sb + h * q.sh + i * q.ss);
			for (int64_t d = 0; d < D; d++)
				qf[i * D + d] = (float)kld(qt, kdata(Q), qo + (uint64_t)d);
		}
		cpu_sgemm(false, true, Lq, T, D, (float)jb->scale, qf, D, kb, D, 0.f, sc, T);
		for (int64_t i = 0; i < Lq; i++) {
			float *row = sc + i * T;
			if (jb->M || jb->is_causal || jb->nonpad)
				for (int64_t j = 0; j < T; j++)
					row[j] += (float)attn_bias(jb, b, h, i, j);
			/* as softmax_row: a row -inf everywhere (or with a NaN) is NaN */
			softmax_row_f32(row, T, nan_zero);
		}
		cpu_sgemm(false, false, Lq, Dv, T, 1.f, sc, T, vb, Dv, 0.f, of, Dv);
		for (int64_t i = 0; i < Lq; i++)
			for (int64_t d = 0; d < Dv; d++)
				kst(qt, jb->yd, (uint64_t)(b * jb->ysb + h * jb->ysh + i * jb->yss + d), of[i * Dv + d]);
	}
}

/*
 * FusedAttention in float32, its common case (float32 Q, K and V, no past,
 * softcap, scores output or nonpad lengths; an additive float32 mask or
 * none): per (batch, head) pair S = scale * Q K^T and Y = softmax(S +
 * mask) V on the GEMM, the softmax in float, which is the arithmetic of the
 * standard ops the fusion replaced (MatMul, Div, Add, Softmax, MatMul) at
 * their speed; the double loop above took twice the unfused graph's time
 * on BERT-base. With fewer pairs than two a thread (BERT-base's 12 heads
 * on 16 threads) a pair's query rows are cut into nqb blocks of at least
 * three rows: a row's scores, softmax and output are its own, and a GEMM
 * element does not depend on the rows around it as long as a product has
 * more than two rows (cpu_sgemm's few-row path sums differently), so the
 * bits are the same at any thread count. Not more blocks than that: each
 * block packs the head's K again.
 */
struct attn32_job {
	const float *q, *k, *v, *mask;
	float *y;
	const struct attn_view *qv, *kv, *vv;
	const int64_t *mstr;
	int64_t Lq, T, D, Dv, Hq, group;
	float scale;
	bool causal, nan_zero;
	int64_t ysb, ysh, yss;
	int64_t nqb;             /* query blocks per pair: rows [blk * Lq / nqb, (blk + 1) * Lq / nqb) */
	float *scratch;          /* per worker: a block's rows of T floats */
};

/* The query blocks per pair for `pairs` pairs of Lq rows on `threads` threads. */
static int64_t attn32_blocks(int64_t pairs, int64_t Lq, int threads)
{
	int64_t want = 2 * (int64_t)threads, n = pairs >= want ? 1 : (want + pairs - 1) / pairs;
	return Lq < 6 ? 1 : n > Lq / 3 ? Lq / 3 : n;
}

static void attn32_heads(void *ctx, int64_t p0, int64_t p1, int worker)
{
	const struct attn32_job *j = ctx;
	const int64_t T = j->T;
	float *S = j->scratch + (size_t)worker * (size_t)(((j->Lq + j->nqb - 1) / j->nqb) * T);
	for (int64_t p = p0; p < p1; p++) {
		const int64_t bh = p / j->nqb, blk = p % j->nqb;
		const int64_t b = bh / j->Hq, h = bh % j->Hq, hk = h / j->group;
		const int64_t i0 = blk * j->Lq / j->nqb, ni = (blk + 1) * j->Lq / j->nqb - i0;
		const float *qh = j->q + j->qv->off + b * j->qv->sb + h * j->qv->sh + i0 * j->qv->ss;
		const float *kh = j->k + j->kv->off + b * j->kv->sb + hk * j->kv->sh;
		const float *vh = j->v + j->vv->off + b * j->vv->sb + hk * j->vv->sh;
		cpu_sgemm(false, true, ni, T, j->D, j->scale, qh, j->qv->ss, kh, j->kv->ss, 0.0f, S, T);
		for (int64_t i = 0; i < ni; i++) {
			float *row = S + i * T;
			if (j->mask) {
				const float *mr = j->mask + b * j->mstr[0] + h * j->mstr[1] + (i0 + i) * j->mstr[2];
				for (int64_t t = 0; t < T; t++)
					row[t] += mr[t * j->mstr[3]];
			}
			for (int64_t t = i0 + i + 1; j->causal && t < T; t++)
				row[t] = -INFINITY;
			softmax_row_f32(row, T, j->nan_zero);
		}
		cpu_sgemm(false, false, ni, j->Dv, T, 1.0f, S, T, vh, j->vv->ss, 0.0f,
			  j->y + b * j->ysb + h * j->ysh + i0 * j->yss, j->yss);
	}
}

/* Q (which 0), K or V of FusedAttention's packed input (see ir_attn_view). */
static int attn_packed_view(struct cpu_kctx *k, const struct ir_attn_layout *l, const struct ir_tensor *t, int which,
			    int64_t heads, struct attn_view *v)
{
	struct ir_attn_view w;
	char why[200];
	if (ir_attn_view(l, which, t->rank, t->dims, heads, &w, why, sizeof(why)))
		return kerr(k, "%s", why);
	*v = (struct attn_view){ .b = w.b, .heads = w.h, .seq = w.s, .size = w.d, .sb = w.sb, .sh = w.sh,
				 .ss = w.ss, .off = w.off };
	return 0;
}

/*
 * Attention, and ai.ogsh FusedAttention (Q, K, V, mask?): the same with
 * the mask broadcast as numpy's (a last axis of 1 spans every key) and,
 * with nan_to_zero, NaN softmax rows counted as zeros. FusedAttention's
 * layout may pack Q, K and V in input 0 and its out_layout order the
 * output (ir_attn_layout); its BHSD and BSHD forms are read as before.
 */
static int k_attention(struct cpu_kctx *k)
{
	const bool fused = k->node->op == IR_OP_ogsh_FusedAttention;
	struct ir_attn_layout al;
	char lwhy[200];
	if (ir_attn_layout_parse(fused ? kattr_s(k, "layout", "BHSD") : "BHSD", fused ? kattr_s(k, "out_layout", NULL)
				 : NULL, &al, lwhy, sizeof(lwhy)))
		return kerr(k, "%s", lwhy);
	if (al.packed && (kin(k, 1) || kin(k, 2)))
		return kerr(k, "layout %s packs Q, K and V in input 0: inputs 1 and 2 must be omitted", al.in);
	const struct ir_tensor *Q = kin_req(k, 0);
	const struct ir_tensor *K = al.packed ? Q : kin_req(k, 1), *V = al.packed ? Q : kin_req(k, 2);
	if (!Q || !K || !V)
		return IR_ERR;
	const struct ir_tensor *M = kin(k, 3), *PK = kin(k, 4), *PV = kin(k, 5);
	const struct ir_tensor *NP = kin(k, 6);
	int qt = Q->dtype;
	if (!is_float_type(qt) || !is_float_type(K->dtype) || !is_float_type(V->dtype))
		return kerr(k, "Q, K and V must be float tensors, not %s, %s, %s", ir_dtype_name(qt),
			    ir_dtype_name(K->dtype), ir_dtype_name(V->dtype));
	if (K->dtype != qt)
		return kerr(k, "K is %s, Q is %s", ir_dtype_name(K->dtype), ir_dtype_name(qt));
	if (!al.packed && ((Q->rank != 3 && Q->rank != 4) || K->rank != Q->rank || V->rank != Q->rank))
		return kerr(k, "Q, K and V must all be 3-D or all 4-D, not %s, %s, %s", kshape(Q), kshape(K), kshape(V));
	int64_t qh = kattr_i(k, "q_num_heads", 0), kvh = kattr_i(k, "kv_num_heads", 0);
	const bool bshd = !strcmp(al.in, "BSHD");
	struct attn_view q, kk, vv;
	if (al.packed) {
		if (attn_packed_view(k, &al, Q, 0, qh, &q) || attn_packed_view(k, &al, Q, 1, qh, &kk) ||
		    attn_packed_view(k, &al, Q, 2, qh, &vv))
			return IR_ERR;
	} else if (attn_view(k, Q, "Q", qh, bshd, &q) || attn_view(k, K, "K", kvh, bshd, &kk) ||
		   attn_view(k, V, "V", kvh, bshd, &vv)) {
		return IR_ERR;
	}
	const int64_t B = q.b;
	if (kk.b != B || vv.b != B)
		return kerr(k, "Q, K and V have different batch sizes: %s, %s, %s", kshape(Q), kshape(K), kshape(V));
	if (kk.heads != vv.heads || kk.seq != vv.seq)
		return kerr(k, "K %s and V %s differ in heads or sequence length", kshape(K), kshape(V));
	if (kk.size != q.size)
		return kerr(k, "Q's head size %lld differs from K's %lld", (long long)q.size, (long long)kk.size);
	if (kk.heads <= 0 || q.heads % kk.heads)
		return kerr(k, "q heads %lld are not a multiple of kv heads %lld", (long long)q.heads,
			    (long long)kk.heads);
	const int64_t Hq = q.heads, Hkv = kk.heads, Lq = q.seq, D = q.size, Dv = vv.size;
	const int64_t group = Hq / Hkv;

	/* the past cache: (batch, kv_heads, past, head_size) */
	if (!!PK != !!PV)
		return kerr(k, "past_key and past_value must be given together");
	int64_t P = 0;
	if (PK) {
		if (PK->dtype != K->dtype || PV->dtype != V->dtype)
			return kerr(k, "past_key/past_value types differ from K/V");
		if (PK->rank != 4 || PV->rank != 4 || PK->dims[0] != B || PK->dims[1] != Hkv || PK->dims[3] != D ||
		    PV->dims[0] != B || PV->dims[1] != Hkv || PV->dims[3] != Dv || PV->dims[2] != PK->dims[2])
			return kerr(k, "past_key %s or past_value %s does not match [%lld,%lld,past,%lld/%lld]",
				    kshape(PK), kshape(PV), (long long)B, (long long)Hkv, (long long)D, (long long)Dv);
		P = PK->dims[2];
	}
	const int64_t T = P + kk.seq;

	/* the mask, broadcast to (B, Hq, Lq, M) with M <= T (missing columns are masked out) */
	int64_t mdims[4] = { 1, 1, 1, 1 }, mstr[4] = { 0, 0, 0, 0 };
	bool mbool = false;
	if (M) {
		if (M->rank < 1 || M->rank > 4)
			return kerr(k, "attn_mask must have rank 1 to 4, not %d", M->rank);
		if (M->dtype == IR_STRING || ir_dtype_bits(M->dtype) == 0)
			return kerr(k, "attn_mask has type %s", ir_dtype_name(M->dtype));
		mbool = M->dtype == IR_BOOL;
		int64_t want[4] = { B, Hq, Lq, T };
		int64_t s = 1;
		for (int i = 3, j = M->rank - 1; j >= 0; i--, j--) {
			mdims[i] = M->dims[j];
			if (i < 3 && mdims[i] != 1 && mdims[i] != want[i])
				return kerr(k, "attn_mask %s does not broadcast to [%lld,%lld,%lld,%lld]", kshape(M),
					    (long long)B, (long long)Hq, (long long)Lq, (long long)T);
			mstr[i] = mdims[i] == 1 && i < 3 ? 0 : s;
			s *= mdims[i];
		}
		if (fused && mbool)
			return kerr(k, "FusedAttention's mask is additive: %s is not a float type", ir_dtype_name(M->dtype));
		if (fused && mdims[3] == 1) {
			mdims[3] = T;
			mstr[3] = 0;
		} else if (fused && mdims[3] != T) {
			return kerr(k, "mask %s does not broadcast to the %lld keys", kshape(M), (long long)T);
		}
		if (mdims[3] > T)
			return kerr(k, "attn_mask's last dimension %lld is longer than the %lld keys", (long long)mdims[3],
				    (long long)T);
	}
	int64_t *nonpad = NULL;
	if (NP) {
		if (!ir_dtype_is_int(NP->dtype) || NP->rank != 1 || NP->dims[0] != B)
			return kerr(k, "nonpad_kv_seqlen must be an integer tensor of shape [%lld], not %s %s",
				    (long long)B, ir_dtype_name(NP->dtype), kshape(NP));
	}
	int is_causal = kattr_i(k, "is_causal", 0) != 0;
	double softcap = kattr_f(k, "softcap", 0);
	int64_t mode = kattr_i(k, "qk_matmul_output_mode", 0);
	if (mode < 0 || mode > 3)
		return kerr(k, "qk_matmul_output_mode %lld is not 0, 1, 2 or 3", (long long)mode);
	double scale = kattr_has(k, "scale") ? kattr_f(k, "scale", 0) : 1.0 / sqrt((double)D);
	const bool nan_zero = fused && kattr_i(k, "nan_to_zero", 0) != 0;

	/* outputs: y (b, h, i, d) at b*ysb + h*ysh + i*yss + d */
	int64_t ydims[4] = { B, Hq, Lq, Dv };
	int64_t ysb = Hq * Lq * Dv, ysh = Lq * Dv, yss = Dv;
	int yrank = 4;
	if (al.packed || al.has_out) {
		ir_attn_out(&al, B, Hq, Lq, Dv, ydims, &ysb, &ysh, &yss);
	} else if (bshd || Q->rank == 3) {
		ydims[1] = Lq;
		ydims[2] = Hq;
		ysb = Lq * Hq * Dv;
		yss = Hq * Dv;
		ysh = Dv;
		if (Q->rank == 3) {
			yrank = 3;
			ydims[2] = Hq * Dv;
		}
	}
	int64_t pkd[4] = { B, Hkv, T, D }, pvd[4] = { B, Hkv, T, Dv }, qkd[4] = { B, Hq, Lq, T };
	struct ir_tensor *ty = kout(k, 0, qt, yrank, ydims);
	if (!ty)
		return IR_ERR;
	struct ir_tensor *tpk = NULL, *tpv = NULL, *tqk = NULL;
	if (kwant(k, 1) && !(tpk = kout(k, 1, K->dtype, 4, pkd)))
		return IR_ERR;
	if (kwant(k, 2) && !(tpv = kout(k, 2, V->dtype, 4, pvd)))
		return IR_ERR;
	if (kwant(k, 3) && !(tqk = kout(k, 3, qt, 4, qkd)))
		return IR_ERR;

	/* FusedAttention in float32 with float32 masks: in place (attn32_heads) */
	if (fused && qt == IR_FLOAT && K->dtype == IR_FLOAT && V->dtype == IR_FLOAT && !PK && !NP && !tpk && !tpv &&
	    !tqk && softcap == 0 && (!M || M->dtype == IR_FLOAT)) {
		int64_t nqb = attn32_blocks(B * Hq, Lq, cpu_threads()), qrows = (Lq + nqb - 1) / nqb;
		uint64_t nscr = (uint64_t)cpu_threads();
		if (!mul_ok(&nscr, qrows) || !mul_ok(&nscr, T) || nscr > SIZE_MAX / sizeof(float) - 1)
			return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
		struct attn32_job j = { kdata(Q), kdata(K), kdata(V), M ? kdata(M) : NULL, kwdata(ty), &q, &kk, &vv,
					mstr, Lq, T, D, Dv, Hq, group, (float)scale, is_causal, nan_zero, ysb, ysh, yss,
					nqb, malloc(sizeof(float) * (size_t)(nscr ? nscr : 1)) };
		if (!j.scratch)
			return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
		int rc32 = kpar(k, B * Hq * nqb, kgrain(qrows * T * (D + Dv)), attn32_heads, &j);
		free(j.scratch);
		return rc32;
	}

	/* float32 (and float16/bfloat16 read as float32) without softcap or the qk output: sgemm */
	const bool f32 = (qt == IR_FLOAT || qt == IR_FLOAT16 || qt == IR_BFLOAT16) && V->dtype == qt && !tqk &&
			 softcap == 0 && (!PK || (PK->dtype == qt && PV->dtype == qt));
	/* present key and value as doubles (float32 on that path), (B, Hkv, T, D) */
	uint64_t nk = 1, nv = 1;
	if (!mul_ok(&nk, B) || !mul_ok(&nk, Hkv) || !mul_ok(&nk, T) || !mul_ok(&nk, D) || !mul_ok(&nv, B) ||
	    !mul_ok(&nv, Hkv) || !mul_ok(&nv, T) || !mul_ok(&nv, Dv))
		return kerr(k, "key/value cache is too large");
	int rc = IR_ERR;
	double *pk = NULL, *pv = NULL;
	float *pkf = NULL, *pvf = NULL;
	if (f32) {
		if (!(pkf = malloc(sizeof(float) * (size_t)nk)) || !(pvf = malloc(sizeof(float) * (size_t)nv))) {
			rc = ir_diag_err(k->d, IR_ENOMEM, "out of memory (the key/value cache, %llu values)",
					 (unsigned long long)(nk + nv));
			goto out;
		}
	} else if (!(pk = alloc_f64(k, nk)) || !(pv = alloc_f64(k, nv))) {
		goto out;
	}
	if (NP && !(nonpad = malloc(sizeof(int64_t) * (size_t)(B + 1)))) {
		rc = ir_diag_err(k->d, IR_ENOMEM, "out of memory");
		goto out;
	}
	for (int64_t b = 0; NP && b < B; b++)
		nonpad[b] = kldi(NP->dtype, kdata(NP), (uint64_t)b);
	for (int64_t b = 0; b < B; b++)
		for (int64_t h = 0; h < Hkv; h++)
			for (int64_t t = 0; t < T; t++) {
				const uint64_t ik = (uint64_t)(((b * Hkv + h) * T + t) * D);
				const uint64_t iv = (uint64_t)(((b * Hkv + h) * T + t) * Dv);
				const struct ir_tensor *ks = t < P ? PK : K, *vs = t < P ? PV : V;
				uint64_t ok, ov;
				if (t < P) {
					ok = (uint64_t)(((b * Hkv + h) * P + t) * D);
					ov = (uint64_t)(((b * Hkv + h) * P + t) * Dv);
				} else {
					ok = (uint64_t)(kk.off + b * kk.sb + h * kk.sh + (t - P) * kk.ss);
					ov = (uint64_t)(vv.off + b * vv.sb + h * vv.sh + (t - P) * vv.ss);
				}
				for (int64_t d = 0; d < D; d++) {
					const double x = kld(ks->dtype, kdata(ks), ok + (uint64_t)d);
					if (f32)
						pkf[ik + (uint64_t)d] = (float)x;
					else
						pk[ik + (uint64_t)d] = x;
				}
				for (int64_t d = 0; d < Dv; d++) {
					const double x = kld(vs->dtype, kdata(vs), ov + (uint64_t)d);
					if (f32)
						pvf[iv + (uint64_t)d] = (float)x;
					else
						pv[iv + (uint64_t)d] = x;
				}
			}
	if (tpk && kwdata(tpk))
		for (uint64_t i = 0; i < nk; i++)
			kst(tpk->dtype, kwdata(tpk), i, f32 ? (double)pkf[i] : pk[i]);
	if (tpv && kwdata(tpv))
		for (uint64_t i = 0; i < nv; i++)
			kst(tpv->dtype, kwdata(tpv), i, f32 ? (double)pvf[i] : pv[i]);

	struct attn_job j = { Q, M, &q, qt, pk, pv, D, Dv, T, Lq, Hq, Hkv, group, P, scale, softcap, mdims, mstr,
			      mbool, is_causal, nonpad, kwdata(ty), tqk ? kwdata(tqk) : NULL, mode, nan_zero, ysb,
			      ysh, yss, NULL };
	if (f32) {
		struct attn_f32 af = { &j, pkf, pvf, NULL, 0 };
		uint64_t per = (uint64_t)Lq, nscr = (uint64_t)cpu_threads();
		if (!mul_ok(&per, D + T + Dv) || !mul_ok(&nscr, (int64_t)per) ||
		    !(af.scratch = malloc(sizeof(float) * (size_t)nscr))) {
			rc = ir_diag_err(k->d, IR_ENOMEM, "out of memory (attention scratch)");
			goto out;
		}
		af.per = (size_t)per;
		rc = kpar(k, B * Hq, 1, attn_heads_f32, &af);
		free(af.scratch);
		goto out;
	}
	uint64_t per = (uint64_t)D + 3 * (uint64_t)T, nscr = (uint64_t)cpu_threads();
	if (!mul_ok(&nscr, (int64_t)per) || !(j.scratch = alloc_f64(k, nscr)))
		goto out;
	/* one (batch, head) pair a range at least: each writes its own rows of the outputs */
	rc = kpar(k, B * Hq, kgrain(Lq * T * (D + Dv)), attn_heads, &j);
	free(j.scratch);
	if (rc)
		goto out;
	rc = 0;
out:
	free(pk);
	free(pv);
	free(pkf);
	free(pvf);
	free(nonpad);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* RotaryEmbedding                                                           */
/* ------------------------------------------------------------------------ */

static int k_rotary_embedding(struct cpu_kctx *k)
{
	const struct ir_tensor *X = kin_req(k, 0), *C = kin_req(k, 1), *S = kin_req(k, 2);
	if (!X || !C || !S)
		return IR_ERR;
	const struct ir_tensor *PI = kin(k, 3);
	int dt = X->dtype;
	if (!is_float_type(dt) || C->dtype != dt || S->dtype != dt)
		return kerr(k, "input, cos_cache and sin_cache must be float tensors of one type");
	/* element (b, h, s, d) of X is at b*sb + h*sh + s*ss + d */
	int64_t Bn, Hn, Ln, Dn, sb, sh, ss;
	if (X->rank == 4) {
		Bn = X->dims[0], Hn = X->dims[1], Ln = X->dims[2], Dn = X->dims[3];
		ss = Dn, sh = Ln * Dn, sb = Hn * sh;
	} else if (X->rank == 3) {
		int64_t nh = kattr_i(k, "num_heads", 0);
		if (nh <= 0)
			return kerr(k, "input is 3-D: num_heads must be positive");
		if (X->dims[2] % nh)
			return kerr(k, "hidden size %lld is not a multiple of num_heads %lld", (long long)X->dims[2],
				    (long long)nh);
		Bn = X->dims[0], Ln = X->dims[1], Hn = nh, Dn = X->dims[2] / nh;
		sh = Dn, ss = X->dims[2], sb = Ln * ss;
	} else {
		return kerr(k, "input must be 3-D or 4-D, not %s", kshape(X));
	}
	int64_t rd = kattr_i(k, "rotary_embedding_dim", 0);
	if (rd == 0)
		rd = Dn;
	if (rd < 0 || rd > Dn || rd % 2)
		return kerr(k, "rotary_embedding_dim %lld must be even and at most the head size %lld", (long long)rd,
			    (long long)Dn);
	const int64_t half = rd / 2;
	bool inter = kattr_i(k, "interleaved", 0) != 0;
	int64_t maxpos = 0;
	if (PI) {
		if (!ir_dtype_is_int(PI->dtype) || PI->rank != 2 || PI->dims[0] != Bn || PI->dims[1] != Ln)
			return kerr(k, "position_ids must be integers of shape [%lld,%lld], not %s", (long long)Bn,
				    (long long)Ln, kshape(PI));
		if (C->rank != 2 || S->rank != 2 || C->dims[1] != half || S->dims[1] != half || S->dims[0] != C->dims[0])
			return kerr(k, "cos_cache %s and sin_cache %s must be [max_position, %lld]", kshape(C), kshape(S),
				    (long long)half);
		maxpos = C->dims[0];
	} else {
		if (C->rank != 3 || S->rank != 3 || C->dims[0] != Bn || C->dims[1] != Ln || C->dims[2] != half ||
		    S->dims[0] != Bn || S->dims[1] != Ln || S->dims[2] != half)
			return kerr(k, "cos_cache %s and sin_cache %s must be [%lld,%lld,%lld]", kshape(C), kshape(S),
				    (long long)Bn, (long long)Ln, (long long)half);
	}
	struct ir_tensor *o = kout(k, 0, dt, X->rank, X->dims);
	if (!o)
		return IR_ERR;
	void *y = kwdata(o);
	const void *x = kdata(X);
	for (int64_t b = 0; b < Bn; b++)
		for (int64_t s = 0; s < Ln; s++) {
			int rc = kstop(k);
			if (rc)
				return rc;
			/* the cache row for this token */
			uint64_t co;
			if (PI) {
				int64_t pos = kldi(PI->dtype, kdata(PI), (uint64_t)(b * Ln + s));
				if (pos < 0 || pos >= maxpos)
					return kerr(k, "position id %lld is outside [0, %lld)", (long long)pos,
						    (long long)maxpos);
				co = (uint64_t)(pos * half);
			} else {
				co = (uint64_t)((b * Ln + s) * half);
			}
			for (int64_t h = 0; h < Hn; h++) {
				uint64_t base = (uint64_t)(b * sb + h * sh + s * ss);
				for (int64_t i = 0; i < half; i++) {
					uint64_t i1 = base + (uint64_t)(inter ? 2 * i : i);
					uint64_t i2 = base + (uint64_t)(inter ? 2 * i + 1 : i + half);
					double c = kld(dt, kdata(C), co + (uint64_t)i), sn = kld(dt, kdata(S), co + (uint64_t)i);
					double x1 = kld(dt, x, i1), x2 = kld(dt, x, i2);
					kst(dt, y, i1, c * x1 - sn * x2);
					kst(dt, y, i2, sn * x1 + c * x2);
				}
				for (int64_t d = rd; d < Dn; d++)
					kst(dt, y, base + (uint64_t)d, kld(dt, x, base + (uint64_t)d));
			}
		}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* CausalConvWithState                                                       */
/* ------------------------------------------------------------------------ */

static int k_causal_conv_with_state(struct cpu_kctx *k)
{
	const struct ir_tensor *X = kin_req(k, 0), *W = kin_req(k, 1);
	if (!X || !W)
		return IR_ERR;
	const struct ir_tensor *Bi = kin(k, 2), *PS = kin(k, 3);
	int dt = X->dtype;
	if (!is_float_type(dt) || W->dtype != dt || (Bi && Bi->dtype != dt) || (PS && PS->dtype != dt))
		return kerr(k, "input, weight, bias and past_state must be float tensors of one type");
	if (X->rank != 3)
		return kerr(k, "input must be (batch, channels, length), not %s", kshape(X));
	const int64_t B = X->dims[0], C = X->dims[1], L = X->dims[2];
	if (W->rank != 3 || W->dims[0] != C || W->dims[1] != 1 || W->dims[2] < 1)
		return kerr(k, "weight must be [%lld,1,k] with k >= 1, not %s", (long long)C, kshape(W));
	const int64_t Kw = W->dims[2], Ks = Kw - 1;
	if (Bi && (Bi->rank != 1 || Bi->dims[0] != C))
		return kerr(k, "bias must be [%lld], not %s", (long long)C, kshape(Bi));
	if (PS && (PS->rank != 3 || PS->dims[0] != B || PS->dims[1] != C || PS->dims[2] != Ks))
		return kerr(k, "past_state must be [%lld,%lld,%lld], not %s", (long long)B, (long long)C, (long long)Ks,
			    kshape(PS));
	const char *act = kattr_s(k, "activation", "none");
	bool silu;
	if (!strcmp(act, "none"))
		silu = false;
	else if (!strcmp(act, "silu") || !strcmp(act, "swish"))
		silu = true;
	else
		return kerr(k, "activation '%s' is not one of none, silu, swish", act);

	int64_t sdims[3] = { B, C, Ks };
	struct ir_tensor *to = kout(k, 0, dt, 3, X->dims);
	if (!to)
		return IR_ERR;
	struct ir_tensor *ts = kout(k, 1, dt, 3, sdims);
	if (!ts)
		return IR_ERR;
	double *pad = alloc_f64(k, (uint64_t)(Ks + L));
	if (!pad)
		return IR_ERR;
	void *y = kwdata(to), *st = kwdata(ts);
	for (int64_t b = 0; b < B; b++)
		for (int64_t c = 0; c < C; c++) {
			int rc = kstop(k);
			if (rc) {
				free(pad);
				return rc;
			}
			/* the channel's padded sequence: past state (or zeros), then the input */
			for (int64_t t = 0; t < Ks; t++)
				pad[t] = PS ? kld(dt, kdata(PS), (uint64_t)((b * C + c) * Ks + t)) : 0.0;
			for (int64_t t = 0; t < L; t++)
				pad[Ks + t] = kld(dt, kdata(X), (uint64_t)((b * C + c) * L + t));
			double bias = Bi ? kld(dt, kdata(Bi), (uint64_t)c) : 0.0;
			for (int64_t t = 0; t < L; t++) {
				double acc = bias;
				for (int64_t j = 0; j < Kw; j++)
					acc += kld(dt, kdata(W), (uint64_t)(c * Kw + j)) * pad[t + j];
				if (silu) {
					/* the conv output is a value of the input type before the activation */
					acc = round_to(dt, acc);
					acc = acc / (1.0 + exp(-acc));
				}
				kst(dt, y, (uint64_t)((b * C + c) * L + t), acc);
			}
			for (int64_t t = 0; t < Ks; t++)
				kst(dt, st, (uint64_t)((b * C + c) * Ks + t), pad[L + t]);
		}
	free(pad);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* LinearAttention                                                           */
/* ------------------------------------------------------------------------ */

static int k_linear_attention(struct cpu_kctx *k)
{
	const struct ir_tensor *Q = kin_req(k, 0), *K = kin_req(k, 1), *V = kin_req(k, 2);
	if (!Q || !K || !V)
		return IR_ERR;
	const struct ir_tensor *PS = kin(k, 3), *G = kin(k, 4), *BT = kin(k, 5);
	const char *rule = kattr_s(k, "update_rule", "gated_delta");
	bool gating, delta;
	if (!strcmp(rule, "linear"))
		gating = false, delta = false;
	else if (!strcmp(rule, "gated"))
		gating = true, delta = false;
	else if (!strcmp(rule, "delta"))
		gating = false, delta = true;
	else if (!strcmp(rule, "gated_delta"))
		gating = true, delta = true;
	else
		return kerr(k, "update_rule '%s' is not one of linear, gated, delta, gated_delta", rule);
	if (gating != !!G)
		return kerr(k, "update_rule '%s' %s the decay input", rule, gating ? "needs" : "does not take");
	if (delta != !!BT)
		return kerr(k, "update_rule '%s' %s the beta input", rule, delta ? "needs" : "does not take");
	int64_t Hq = kattr_i(k, "q_num_heads", 0), Hk = kattr_i(k, "kv_num_heads", 0);
	if (Hq <= 0 || Hk <= 0 || Hq % Hk)
		return kerr(k, "q_num_heads %lld must be a positive multiple of kv_num_heads %lld", (long long)Hq,
			    (long long)Hk);
	int dt = Q->dtype;
	if (!is_float_type(dt) || K->dtype != dt || V->dtype != dt || (G && G->dtype != dt) || (BT && BT->dtype != dt))
		return kerr(k, "query, key, value, decay and beta must be float tensors of one type");
	if (Q->rank != 3 || K->rank != 3 || V->rank != 3)
		return kerr(k, "query, key and value must be 3-D (B, T, H*D), not %s, %s, %s", kshape(Q), kshape(K),
			    kshape(V));
	const int64_t B = Q->dims[0], T = Q->dims[1];
	if (K->dims[0] != B || V->dims[0] != B || K->dims[1] != T || V->dims[1] != T)
		return kerr(k, "query %s, key %s and value %s differ in batch or length", kshape(Q), kshape(K), kshape(V));
	if (Q->dims[2] % Hq || V->dims[2] % Hk)
		return kerr(k, "query or value's last dimension is not a multiple of its heads");
	const int64_t dk = Q->dims[2] / Hq, dv = V->dims[2] / Hk, grp = Hq / Hk;
	if (K->dims[2] != Hk * dk)
		return kerr(k, "key %s must have last dimension %lld", kshape(K), (long long)(Hk * dk));
	bool gper = false;   /* decay per key dimension (else per head) */
	if (G) {
		if (G->rank != 3 || G->dims[0] != B || G->dims[1] != T || (G->dims[2] != Hk && G->dims[2] != Hk * dk))
			return kerr(k, "decay %s must be [%lld,%lld,%lld or %lld]", kshape(G), (long long)B, (long long)T,
				    (long long)Hk, (long long)(Hk * dk));
		gper = G->dims[2] != Hk;
	}
	int64_t bw = 0;
	if (BT) {
		if (BT->rank != 3 || BT->dims[0] != B || BT->dims[1] != T || (BT->dims[2] != Hk && BT->dims[2] != 1))
			return kerr(k, "beta %s must be [%lld,%lld,%lld or 1]", kshape(BT), (long long)B, (long long)T,
				    (long long)Hk);
		bw = BT->dims[2];
	}
	int sdt = dt;
	if (PS) {
		if (!is_float_type(PS->dtype) || PS->rank != 4 || PS->dims[0] != B || PS->dims[1] != Hk ||
		    PS->dims[2] != dk || PS->dims[3] != dv)
			return kerr(k, "past_state %s must be [%lld,%lld,%lld,%lld]", kshape(PS), (long long)B,
				    (long long)Hk, (long long)dk, (long long)dv);
		sdt = PS->dtype;
	}
	double scale = kattr_f(k, "scale", 0);
	if (scale == 0)
		scale = 1.0 / sqrt((double)dk);

	int64_t sdims[4] = { B, Hk, dk, dv }, odims[3] = { B, T, Hq * dv };
	struct ir_tensor *to = kout(k, 0, dt, 3, odims);
	if (!to)
		return IR_ERR;
	struct ir_tensor *ts = kout(k, 1, sdt, 4, sdims);
	if (!ts)
		return IR_ERR;
	uint64_t ns = 1;
	if (!mul_ok(&ns, B) || !mul_ok(&ns, Hk) || !mul_ok(&ns, dk) || !mul_ok(&ns, dv))
		return kerr(k, "state is too large");
	double *S = alloc_f64(k, ns), *vt = alloc_f64(k, (uint64_t)dv), *kt = alloc_f64(k, (uint64_t)dk);
	double *qt = alloc_f64(k, (uint64_t)dk);
	if (!S || !vt || !kt || !qt) {
		free(S);
		free(vt);
		free(kt);
		free(qt);
		return IR_ERR;
	}
	for (uint64_t i = 0; i < ns; i++)
		S[i] = PS ? kld(PS->dtype, kdata(PS), i) : 0.0;
	void *y = kwdata(to);
	for (int64_t b = 0; b < B; b++)
		for (int64_t t = 0; t < T; t++) {
			int rc = kstop(k);
			if (rc) {
				free(S);
				free(vt);
				free(kt);
				free(qt);
				return rc;
			}
			for (int64_t h = 0; h < Hk; h++) {
				double *s = S + (b * Hk + h) * dk * dv;
				uint64_t ko = (uint64_t)((b * T + t) * Hk * dk + h * dk);
				uint64_t vo = (uint64_t)((b * T + t) * Hk * dv + h * dv);
				/* decay: S *= exp(g) (per head, or per key dimension) */
				if (G)
					for (int64_t i = 0; i < dk; i++) {
						uint64_t go = gper ? ko + (uint64_t)i : (uint64_t)((b * T + t) * Hk + h);
						double e = exp(kld(dt, kdata(G), go));
						for (int64_t m = 0; m < dv; m++)
							s[i * dv + m] *= e;
					}
				for (int64_t m = 0; m < dv; m++)
					vt[m] = kld(dt, kdata(V), vo + (uint64_t)m);
				for (int64_t i = 0; i < dk; i++)
					kt[i] = kld(dt, kdata(K), ko + (uint64_t)i);
				/* delta rule: v <- beta * (v - S^T k) */
				if (BT) {
					double be = kld(dt, kdata(BT), (uint64_t)((b * T + t) * bw + (bw == 1 ? 0 : h)));
					for (int64_t m = 0; m < dv; m++) {
						double r = 0;
						for (int64_t i = 0; i < dk; i++)
							r += s[i * dv + m] * kt[i];
						vt[m] = be * (vt[m] - r);
					}
				}
				/* S += k (outer) v */
				for (int64_t i = 0; i < dk; i++)
					for (int64_t m = 0; m < dv; m++)
						s[i * dv + m] += kt[i] * vt[m];
				/* read: every query head of this kv head */
				for (int64_t g = 0; g < grp; g++) {
					int64_t hq = h * grp + g;
					uint64_t qo = (uint64_t)((b * T + t) * Hq * dk + hq * dk);
					for (int64_t i = 0; i < dk; i++)
						qt[i] = kld(dt, kdata(Q), qo + (uint64_t)i);
					for (int64_t m = 0; m < dv; m++) {
						double acc = 0;
						for (int64_t i = 0; i < dk; i++)
							acc += qt[i] * s[i * dv + m];
						kst(dt, y, (uint64_t)((b * T + t) * Hq * dv + hq * dv + m), scale * acc);
					}
				}
			}
		}
	void *sd = kwdata(ts);
	for (uint64_t i = 0; sd && i < ns; i++)
		kst(sdt, sd, i, S[i]);
	free(S);
	free(vt);
	free(kt);
	free(qt);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* FlexAttention (ai.onnx.preview)                                           */
/* ------------------------------------------------------------------------ */

/*
 * Runs a modifier subgraph (score_mod, prob_mod) on the (B, Hq, L, S)
 * values in v, which are of type cdt; replaces v with its output.
 */
static int flex_mod(struct cpu_kctx *k, const struct ir_graph *g, const char *what, int cdt, const int64_t *dims,
		    double *v, uint64_t n)
{
	if (!k->hooks || !k->hooks->run_graph)
		return kerr(k, "%s cannot run here: no subgraph support", what);
	if (g->n_inputs != 1 || g->n_outputs != 1)
		return kerr(k, "%s must have one input and one output, not %d and %d", what, g->n_inputs, g->n_outputs);
	struct ir_tensor *t = ir_tensor_new(cdt, 4, dims, k->d);
	if (!t)
		return IR_ENOMEM;
	void *p = ir_tensor_mutable(t);
	for (uint64_t i = 0; p && i < n; i++)
		kst(cdt, p, i, v[i]);
	struct kern_value in, out;
	memset(&in, 0, sizeof(in));
	memset(&out, 0, sizeof(out));
	in.kind = KV_TENSOR;
	in.t = t;
	int rc = k->hooks->run_graph(k, g, 1, &in, &out);
	ir_tensor_unref(t);
	if (rc)
		return rc;
	if (out.kind != KV_TENSOR || out.t->numel != n || out.t->rank != 4 || !is_float_type(out.t->dtype)) {
		kern_value_clear(&out);
		return kerr(k, "%s must return a float tensor of the shape of its input", what);
	}
	for (int i = 0; i < 4; i++)
		if (out.t->dims[i] != dims[i]) {
			rc = kerr(k, "%s returned %s, the shape of its input is needed", what, kshape(out.t));
			kern_value_clear(&out);
			return rc;
		}
	for (uint64_t i = 0; i < n; i++)
		v[i] = round_to(cdt, kld(out.t->dtype, kdata(out.t), i));
	kern_value_clear(&out);
	return 0;
}

static int k_flex_attention(struct cpu_kctx *k)
{
	const struct ir_tensor *Q = kin_req(k, 0), *K = kin_req(k, 1), *V = kin_req(k, 2);
	if (!Q || !K || !V)
		return IR_ERR;
	int dt = Q->dtype;
	if (!is_float_type(dt) || K->dtype != dt || V->dtype != dt)
		return kerr(k, "Q, K and V must be float tensors of one type");
	if (Q->rank != 4 || K->rank != 4 || V->rank != 4)
		return kerr(k, "Q, K and V must be 4-D, not %s, %s, %s", kshape(Q), kshape(K), kshape(V));
	const int64_t B = Q->dims[0], Hq = Q->dims[1], L = Q->dims[2], E = Q->dims[3];
	const int64_t Hk = K->dims[1], S = K->dims[2], Ev = V->dims[3];
	if (K->dims[0] != B || V->dims[0] != B || V->dims[1] != Hk || V->dims[2] != S || K->dims[3] != E)
		return kerr(k, "Q %s, K %s and V %s do not match", kshape(Q), kshape(K), kshape(V));
	if (Hk <= 0 || Hq % Hk)
		return kerr(k, "q heads %lld are not a multiple of kv heads %lld", (long long)Hq, (long long)Hk);
	const int64_t grp = Hq / Hk;
	/* scores and probabilities are in the softmax precision */
	int cdt = dt == IR_DOUBLE ? IR_DOUBLE : IR_FLOAT;
	if (kattr_has(k, "softmax_precision")) {
		int64_t sp = kattr_i(k, "softmax_precision", 0);
		if (sp != IR_FLOAT && sp != IR_DOUBLE && sp != IR_FLOAT16 && sp != IR_BFLOAT16)
			return kerr(k, "softmax_precision %lld is not a float type", (long long)sp);
		cdt = (int)sp;
	}
	double scale = kattr_has(k, "scale") ? kattr_f(k, "scale", 0) : 1.0 / sqrt((double)E);
	/* Q and K are each scaled by sqrt(scale), computed in float32, as values of the input type */
	double sq = round_to(dt, (float)sqrt((float)scale));
	const struct ir_attr *sm = kattr(k, "score_mod"), *pm = kattr(k, "prob_mod");
	if (sm && (sm->type != IR_ATTR_GRAPH || !sm->g))
		return kerr(k, "score_mod must be a graph");
	if (pm && (pm->type != IR_ATTR_GRAPH || !pm->g))
		return kerr(k, "prob_mod must be a graph");

	int64_t sdims[4] = { B, Hq, L, S }, ydims[4] = { B, Hq, L, Ev };
	uint64_t n = 1;
	if (!mul_ok(&n, B) || !mul_ok(&n, Hq) || !mul_ok(&n, L) || !mul_ok(&n, S))
		return kerr(k, "the score matrix is too large");
	struct ir_tensor *to = kout(k, 0, dt, 4, ydims);
	if (!to)
		return IR_ERR;
	double *sc = alloc_f64(k, n), *qs = NULL, *ks = NULL, *vs = NULL;
	int rc = IR_ERR;
	if (!sc || !(qs = kload_f64(Q)) || !(ks = kload_f64(K)) || !(vs = kload_f64(V))) {
		rc = sc ? ir_diag_err(k->d, IR_ENOMEM, "out of memory") : IR_ENOMEM;
		goto out;
	}
	for (uint64_t i = 0; i < Q->numel; i++)
		qs[i] = round_to(dt, qs[i] * sq);
	for (uint64_t i = 0; i < K->numel; i++)
		ks[i] = round_to(dt, ks[i] * sq);
	for (int64_t b = 0; b < B; b++)
		for (int64_t h = 0; h < Hq; h++) {
			if ((rc = kstop(k)))
				goto out;
			const double *kb = ks + (b * Hk + h / grp) * S * E;
			for (int64_t i = 0; i < L; i++) {
				const double *qr = qs + ((b * Hq + h) * L + i) * E;
				double *row = sc + ((b * Hq + h) * L + i) * S;
				for (int64_t j = 0; j < S; j++) {
					double acc = 0;
					for (int64_t e = 0; e < E; e++)
						acc += qr[e] * kb[j * E + e];
					/* the product is a value of the input type, then of the softmax type */
					row[j] = round_to(cdt, round_to(dt, acc));
				}
			}
		}
	if (sm && (rc = flex_mod(k, sm->g, "score_mod", cdt, sdims, sc, n)))
		goto out;
	for (uint64_t r = 0; S && r < n / (uint64_t)S; r++) {
		softmax_row(sc + r * (uint64_t)S, S);
		for (int64_t j = 0; j < S; j++)
			sc[r * (uint64_t)S + (uint64_t)j] = round_to(cdt, sc[r * (uint64_t)S + (uint64_t)j]);
	}
	if (pm && (rc = flex_mod(k, pm->g, "prob_mod", cdt, sdims, sc, n)))
		goto out;
	void *y = kwdata(to);
	for (int64_t b = 0; b < B; b++)
		for (int64_t h = 0; h < Hq; h++)
			for (int64_t i = 0; i < L; i++) {
				const double *row = sc + ((b * Hq + h) * L + i) * S;
				uint64_t vb = (uint64_t)((b * Hk + h / grp) * S * Ev);
				for (int64_t e = 0; e < Ev; e++) {
					double acc = 0;
					for (int64_t j = 0; j < S; j++)
						acc += row[j] * vs[vb + (uint64_t)(j * Ev + e)];
					kst(dt, y, (uint64_t)(((b * Hq + h) * L + i) * Ev + e), acc);
				}
			}
	rc = 0;
out:
	free(sc);
	free(qs);
	free(ks);
	free(vs);
	return rc;
}

const struct cpu_kernel cpu_kernels_attention[] = {
	{ IR_OP_Attention, k_attention, NULL },
	{ IR_OP_ogsh_FusedAttention, k_attention, NULL },
	{ IR_OP_RotaryEmbedding, k_rotary_embedding, NULL },
	{ IR_OP_CausalConvWithState, k_causal_conv_with_state, NULL },
	{ IR_OP_LinearAttention, k_linear_attention, NULL },
	{ IR_OP_preview_FlexAttention, k_flex_attention, NULL },
	{ -1, NULL, NULL },
};
