/*
 * k_rnn.c - CPU kernels: the recurrent ops RNN, GRU and LSTM.
 *
 * The three share one driver: shapes, attributes (direction, layout,
 * activations with alpha/beta, clip), sequence_lens and the initial states
 * are handled in rnn_run(); a per-op step function computes one time step of
 * one batch row. Everything is computed in double and rounded once when the
 * outputs are stored (float16/bfloat16 included).
 *
 * Gate orders (ONNX): GRU z, r, h; LSTM i, o, f, c; LSTM peepholes i, o, f.
 */
#include "cpu.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>

enum rnn_kind { RNN_PLAIN, RNN_GRU, RNN_LSTM };

enum act_kind {
	ACT_RELU, ACT_TANH, ACT_SIGMOID, ACT_AFFINE, ACT_LEAKYRELU, ACT_THRESHOLDEDRELU,
	ACT_SCALEDTANH, ACT_HARDSIGMOID, ACT_ELU, ACT_SOFTSIGN, ACT_SOFTPLUS,
};

struct rnn_act {
	enum act_kind kind;
	double alpha, beta;
};

/* The activation functions ONNX allows in recurrent ops: their names, how
 * many of activation_alpha/activation_beta each consumes, and the defaults
 * (those of the ONNX operators of the same name) when the lists run out. */
static const struct {
	const char *name;
	enum act_kind kind;
	bool uses_alpha, uses_beta;
	double alpha, beta;
} act_table[] = {
	{ "relu", ACT_RELU, false, false, 0, 0 },
	{ "tanh", ACT_TANH, false, false, 0, 0 },
	{ "sigmoid", ACT_SIGMOID, false, false, 0, 0 },
	{ "affine", ACT_AFFINE, true, true, 1.0, 0.0 },
	{ "leakyrelu", ACT_LEAKYRELU, true, false, 0.01, 0 },
	{ "thresholdedrelu", ACT_THRESHOLDEDRELU, true, false, 1.0, 0 },
	{ "scaledtanh", ACT_SCALEDTANH, true, true, 1.0, 1.0 },
	{ "hardsigmoid", ACT_HARDSIGMOID, true, true, 0.2, 0.5 },
	{ "elu", ACT_ELU, true, false, 1.0, 0 },
	{ "softsign", ACT_SOFTSIGN, false, false, 0, 0 },
	{ "softplus", ACT_SOFTPLUS, false, false, 0, 0 },
};

static double act_apply(const struct rnn_act *a, double x)
{
	switch (a->kind) {
	case ACT_RELU: return x > 0 ? x : 0;
	case ACT_TANH: return tanh(x);
	case ACT_SIGMOID: return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
	case ACT_AFFINE: return a->alpha * x + a->beta;
	case ACT_LEAKYRELU: return x >= 0 ? x : a->alpha * x;
	case ACT_THRESHOLDEDRELU: return x > a->alpha ? x : 0;
	case ACT_SCALEDTANH: return a->alpha * tanh(a->beta * x);
	case ACT_HARDSIGMOID: return fmax(0.0, fmin(1.0, a->alpha * x + a->beta));
	case ACT_ELU: return x >= 0 ? x : a->alpha * (exp(x) - 1.0);
	case ACT_SOFTSIGN: return x / (1.0 + fabs(x));
	case ACT_SOFTPLUS: return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
	}
	return x;
}

/* Case-insensitive name comparison (ONNX spells them "Tanh", runtimes accept "tanh"). */
static bool name_eq(const char *a, size_t alen, const char *b)
{
	size_t i;
	for (i = 0; i < alen && b[i]; i++)
		if (tolower((unsigned char)a[i]) != tolower((unsigned char)b[i]))
			return false;
	return i == alen && !b[i];
}

/* Everything one run of an RNN/GRU/LSTM node needs. */
struct rnn {
	enum rnn_kind kind;
	int gates;          /* 1, 3 or 4 blocks of hidden rows in W and R */
	int nact;           /* activations per direction: 1, 2 or 3 */
	int64_t seq, batch, input, hidden;
	int ndir;
	bool reverse_only;  /* direction "reverse" */
	int layout;
	bool has_clip;
	double clip;
	bool lbr;           /* GRU linear_before_reset */
	bool input_forget;  /* LSTM: couple the forget gate to the input gate */
	struct rnn_act act[2][3];
	/* inputs as doubles */
	double *x, *w, *r, *b, *h0, *c0, *p;
	int64_t *lens;
	/* scratch for one step */
	double *gx, *gh, *tmp;
};

/* Reads the activations, activation_alpha and activation_beta attributes. */
static int rnn_activations(struct cpu_kctx *k, struct rnn *s)
{
	static const enum act_kind dflt[3][3] = {
		{ ACT_TANH },                           /* RNN: f */
		{ ACT_SIGMOID, ACT_TANH },              /* GRU: f, g */
		{ ACT_SIGMOID, ACT_TANH, ACT_TANH },    /* LSTM: f, g, h */
	};
	const struct ir_attr *a = kattr(k, "activations");
	int na = 0, nb = 0;
	const float *alphas = kattr_floats(k, "activation_alpha", &na);
	const float *betas = kattr_floats(k, "activation_beta", &nb);
	int ia = 0, ib = 0;

	if (!a || a->type != IR_ATTR_STRINGS || a->n == 0) {
		for (int d = 0; d < s->ndir; d++)
			for (int j = 0; j < s->nact; j++) {
				s->act[d][j].kind = dflt[s->kind][j];
				s->act[d][j].alpha = s->act[d][j].beta = 0;
			}
		return 0;
	}
	/* one list per direction; a single list is accepted for both directions */
	if (a->n != (size_t)(s->nact * s->ndir) && a->n != (size_t)s->nact)
		return kerr(k, "activations has %zu names, %d are needed for %d direction%s", a->n,
			    s->nact * s->ndir, s->ndir, s->ndir > 1 ? "s" : "");
	for (size_t i = 0; i < a->n; i++) {
		const struct ir_bytes *nm = &a->strings[i];
		size_t t;
		for (t = 0; t < sizeof(act_table) / sizeof(act_table[0]); t++)
			if (nm->data && name_eq(nm->data, nm->len, act_table[t].name))
				break;
		if (t == sizeof(act_table) / sizeof(act_table[0]))
			return kerr(k, "activation '%.*s' is not supported", (int)nm->len, nm->data ? nm->data : "");
		struct rnn_act *act = &s->act[i / (size_t)s->nact][i % (size_t)s->nact];
		act->kind = act_table[t].kind;
		act->alpha = act_table[t].alpha;
		act->beta = act_table[t].beta;
		if (act_table[t].uses_alpha && ia < na)
			act->alpha = alphas[ia++];
		if (act_table[t].uses_beta && ib < nb)
			act->beta = betas[ib++];
	}
	if (a->n == (size_t)s->nact)
		for (int j = 0; j < s->nact; j++)
			s->act[1][j] = s->act[0][j];
	return 0;
}

/* Checks that t (an optional input when `opt`) has the given dims and dtype. */
static int check_dims(struct cpu_kctx *k, const struct ir_tensor *t, const char *what, int dtype, int rank,
		      const int64_t *dims)
{
	if (t->dtype != dtype)
		return kerr(k, "%s is %s, X is %s", what, ir_dtype_name(t->dtype), ir_dtype_name(dtype));
	bool ok = t->rank == rank;
	for (int i = 0; ok && i < rank; i++)
		ok = t->dims[i] == dims[i];
	if (!ok) {
		char buf[256];
		return kerr(k, "%s has shape %s, %s is expected", what, kshape(t), ir_dims_str(rank, dims, buf, sizeof(buf)));
	}
	return 0;
}

static double clipv(const struct rnn *s, double v)
{
	if (!s->has_clip)
		return v;
	return v < -s->clip ? -s->clip : v > s->clip ? s->clip : v;
}

/* out[j] = sum_i m[j][i] * v[i] (+ bias[j]) for n rows of length len. */
static void matvec(double *out, const double *m, const double *v, const double *bias, int64_t n, int64_t len)
{
	for (int64_t j = 0; j < n; j++) {
		const double *row = m + j * len;
		double acc = bias ? bias[j] : 0.0;
		for (int64_t i = 0; i < len; i++)
			acc += row[i] * v[i];
		out[j] = acc;
	}
}

/*
 * One time step for one batch row in direction d: x (input), h (hidden
 * state, updated in place), c (LSTM cell state, updated in place).
 */
static void rnn_step(struct rnn *s, int d, const double *x, double *h, double *c)
{
	const int64_t H = s->hidden, G = s->gates;
	const double *w = s->w + (size_t)d * G * H * s->input;
	const double *r = s->r + (size_t)d * G * H * H;
	const double *wb = s->b ? s->b + (size_t)d * 2 * G * H : NULL;
	const double *rb = wb ? wb + G * H : NULL;
	double *gx = s->gx, *gh = s->gh;
	const struct rnn_act *f = &s->act[d][0], *g = &s->act[d][1], *hh = &s->act[d][2];

	matvec(gx, w, x, wb, G * H, s->input);
	switch (s->kind) {
	case RNN_PLAIN:
		matvec(gh, r, h, rb, H, H);
		for (int64_t j = 0; j < H; j++)
			h[j] = act_apply(f, clipv(s, gx[j] + gh[j]));
		break;
	case RNN_GRU: {
		/* z and r from the first two blocks of R */
		matvec(gh, r, h, rb, 2 * H, H);
		double *z = s->tmp, *rr = s->tmp + H, *hc = s->tmp + 2 * H;
		for (int64_t j = 0; j < H; j++) {
			z[j] = act_apply(f, clipv(s, gx[j] + gh[j]));
			rr[j] = act_apply(f, clipv(s, gx[H + j] + gh[H + j]));
		}
		const double *rh = r + 2 * H * H;
		const double *rbh = rb ? rb + 2 * H : NULL;
		if (s->lbr) {
			/* h~ = g(Wh x + Wbh + r * (Rh h + Rbh)) */
			matvec(gh, rh, h, rbh, H, H);
			for (int64_t j = 0; j < H; j++)
				hc[j] = act_apply(g, clipv(s, gx[2 * H + j] + rr[j] * gh[j]));
		} else {
			/* h~ = g(Wh x + Wbh + Rh (r * h) + Rbh) */
			double *rhp = s->tmp + 3 * H;
			for (int64_t j = 0; j < H; j++)
				rhp[j] = rr[j] * h[j];
			matvec(gh, rh, rhp, rbh, H, H);
			for (int64_t j = 0; j < H; j++)
				hc[j] = act_apply(g, clipv(s, gx[2 * H + j] + gh[j]));
		}
		for (int64_t j = 0; j < H; j++)
			h[j] = (1.0 - z[j]) * hc[j] + z[j] * h[j];
		break;
	}
	case RNN_LSTM: {
		matvec(gh, r, h, rb, 4 * H, H);
		const double *p = s->p ? s->p + (size_t)d * 3 * H : NULL;
		for (int64_t j = 0; j < H; j++) {
			double pi = p ? p[j] : 0, po = p ? p[H + j] : 0, pf = p ? p[2 * H + j] : 0;
			double gi = act_apply(f, clipv(s, gx[j] + gh[j] + pi * c[j]));
			double gf;
			if (s->input_forget)
				gf = 1.0 - gi;
			else
				gf = act_apply(f, clipv(s, gx[2 * H + j] + gh[2 * H + j] + pf * c[j]));
			double gc = act_apply(g, clipv(s, gx[3 * H + j] + gh[3 * H + j]));
			double cn = gf * c[j] + gi * gc;
			double go = act_apply(f, clipv(s, gx[H + j] + gh[H + j] + po * cn));
			c[j] = cn;
			h[j] = go * act_apply(hh, cn);
		}
		break;
	}
	}
}

static void rnn_free(struct rnn *s)
{
	free(s->x);
	free(s->w);
	free(s->r);
	free(s->b);
	free(s->h0);
	free(s->c0);
	free(s->p);
	free(s->lens);
	free(s->gx);
	free(s->gh);
	free(s->tmp);
}

/* Stores n doubles into tensor data of `dtype` at element offset `off`. */
static void store_row(int dtype, void *dst, uint64_t off, const double *v, int64_t n)
{
	if (dtype == IR_FLOAT) {
		float *f = (float *)dst + off;
		for (int64_t i = 0; i < n; i++)
			f[i] = (float)v[i];
	} else {
		for (int64_t i = 0; i < n; i++)
			kst(dtype, dst, off + (uint64_t)i, v[i]);
	}
}

static int rnn_run(struct cpu_kctx *k, enum rnn_kind kind)
{
	struct rnn s;
	memset(&s, 0, sizeof(s));
	s.kind = kind;
	s.gates = kind == RNN_PLAIN ? 1 : kind == RNN_GRU ? 3 : 4;
	s.nact = kind == RNN_PLAIN ? 1 : kind == RNN_GRU ? 2 : 3;
	int rc = IR_ERR;
	struct ir_tensor *ty = NULL, *th = NULL, *tc = NULL;
	double *hs = NULL, *cs = NULL;

	const struct ir_tensor *X = kin_req(k, 0), *W = kin_req(k, 1), *R = kin_req(k, 2);
	if (!X || !W || !R)
		return IR_ERR;
	const struct ir_tensor *B = kin(k, 3), *L = kin(k, 4), *H0 = kin(k, 5);
	const struct ir_tensor *C0 = kind == RNN_LSTM ? kin(k, 6) : NULL;
	const struct ir_tensor *P = kind == RNN_LSTM ? kin(k, 7) : NULL;
	int dt = X->dtype;
	if (dt != IR_FLOAT && dt != IR_DOUBLE && dt != IR_FLOAT16 && dt != IR_BFLOAT16)
		return kerr(k, "X must be a float tensor, not %s", ir_dtype_name(dt));

	const char *dir = kattr_s(k, "direction", "forward");
	if (!strcmp(dir, "forward")) {
		s.ndir = 1;
	} else if (!strcmp(dir, "reverse")) {
		s.ndir = 1;
		s.reverse_only = true;
	} else if (!strcmp(dir, "bidirectional")) {
		s.ndir = 2;
	} else {
		return kerr(k, "direction '%s' is not one of forward, reverse, bidirectional", dir);
	}
	int64_t layout = kattr_i(k, "layout", 0);
	if (layout != 0 && layout != 1)
		return kerr(k, "layout %lld is not 0 or 1", (long long)layout);
	s.layout = (int)layout;
	if (kattr_has(k, "clip")) {
		s.has_clip = true;
		s.clip = kattr_f(k, "clip", 0);
		if (!(s.clip >= 0))
			return kerr(k, "clip %g is negative", s.clip);
	}
	s.lbr = kind == RNN_GRU && kattr_i(k, "linear_before_reset", 0) != 0;
	s.input_forget = kind == RNN_LSTM && kattr_i(k, "input_forget", 0) != 0;

	if (X->rank != 3)
		return kerr(k, "X must have rank 3, not %d", X->rank);
	s.seq = s.layout ? X->dims[1] : X->dims[0];
	s.batch = s.layout ? X->dims[0] : X->dims[1];
	s.input = X->dims[2];
	if (R->rank != 3)
		return kerr(k, "R must have rank 3, not %d", R->rank);
	s.hidden = R->dims[2];
	if (kattr_has(k, "hidden_size") && kattr_i(k, "hidden_size", 0) != s.hidden)
		return kerr(k, "hidden_size %lld does not match R's last dimension %lld",
			    (long long)kattr_i(k, "hidden_size", 0), (long long)s.hidden);
	const int64_t H = s.hidden, G = s.gates, ND = s.ndir;
	if (H > INT64_MAX / 8 / G)
		return kerr(k, "hidden size %lld is too large", (long long)H);

	int64_t dims[4];
	dims[0] = ND, dims[1] = G * H, dims[2] = s.input;
	if (check_dims(k, W, "W", dt, 3, dims))
		return IR_ERR;
	dims[2] = H;
	if (check_dims(k, R, "R", dt, 3, dims))
		return IR_ERR;
	if (B) {
		dims[1] = 2 * G * H;
		if (check_dims(k, B, "B", dt, 2, dims))
			return IR_ERR;
	}
	int64_t sdims[3] = { ND, s.batch, H };
	if (s.layout)
		sdims[0] = s.batch, sdims[1] = ND;
	if (H0 && check_dims(k, H0, "initial_h", dt, 3, sdims))
		return IR_ERR;
	if (C0 && check_dims(k, C0, "initial_c", dt, 3, sdims))
		return IR_ERR;
	if (P) {
		dims[1] = 3 * H;
		if (check_dims(k, P, "P", dt, 2, dims))
			return IR_ERR;
	}
	if (L) {
		if (!ir_dtype_is_int(L->dtype))
			return kerr(k, "sequence_lens must be an integer tensor, not %s", ir_dtype_name(L->dtype));
		if (L->rank != 1 || L->dims[0] != s.batch)
			return kerr(k, "sequence_lens has shape %s, [%lld] is expected", kshape(L), (long long)s.batch);
	}
	if (rnn_activations(k, &s))
		return IR_ERR;

	/* inputs as doubles, scratch space */
	if (!(s.x = kload_f64(X)) || !(s.w = kload_f64(W)) || !(s.r = kload_f64(R)) ||
	    (B && !(s.b = kload_f64(B))) || (P && !(s.p = kload_f64(P))) ||
	    (H0 && !(s.h0 = kload_f64(H0))) || (C0 && !(s.c0 = kload_f64(C0))) ||
	    !(s.gx = malloc(sizeof(double) * (size_t)(G * H + 1))) ||
	    !(s.gh = malloc(sizeof(double) * (size_t)(G * H + 1))) ||
	    !(s.tmp = malloc(sizeof(double) * (size_t)(4 * H + 1))) ||
	    !(s.lens = malloc(sizeof(int64_t) * (size_t)(s.batch + 1))) ||
	    !(hs = malloc(sizeof(double) * (size_t)(H + 1))) ||
	    !(cs = malloc(sizeof(double) * (size_t)(H + 1)))) {
		rc = ir_diag_err(k->d, IR_ENOMEM, "out of memory");
		goto out;
	}
	for (int64_t b = 0; b < s.batch; b++) {
		s.lens[b] = L ? kldi(L->dtype, kdata(L), (uint64_t)b) : s.seq;
		if (s.lens[b] < 0 || s.lens[b] > s.seq) {
			rc = kerr(k, "sequence_lens[%lld] is %lld, outside [0, %lld]", (long long)b,
				  (long long)s.lens[b], (long long)s.seq);
			goto out;
		}
	}

	/* outputs: Y [seq, dir, batch, H] (layout 1: [batch, seq, dir, H]),
	 * Y_h and Y_c [dir, batch, H] (layout 1: [batch, dir, H]) */
	int64_t ydims[4] = { s.seq, ND, s.batch, H };
	if (s.layout)
		ydims[0] = s.batch, ydims[1] = s.seq, ydims[2] = ND;
	if (kwant(k, 0) && !(ty = kout(k, 0, dt, 4, ydims)))
		goto out;
	if (kwant(k, 1) && !(th = kout(k, 1, dt, 3, sdims)))
		goto out;
	if (kind == RNN_LSTM && kwant(k, 2) && !(tc = kout(k, 2, dt, 3, sdims)))
		goto out;
	void *yd = ty ? kwdata(ty) : NULL, *hd = th ? kwdata(th) : NULL, *cd = tc ? kwdata(tc) : NULL;

	for (int d = 0; d < ND; d++) {
		bool rev = s.reverse_only || d == 1;
		for (int64_t b = 0; b < s.batch; b++) {
			if ((rc = kstop(k)))
				goto out;
			/* offset of (d, b) in a state tensor */
			uint64_t so = (uint64_t)(s.layout ? (b * ND + d) * H : (d * s.batch + b) * H);
			for (int64_t j = 0; j < H; j++) {
				hs[j] = s.h0 ? s.h0[so + (uint64_t)j] : 0.0;
				cs[j] = s.c0 ? s.c0[so + (uint64_t)j] : 0.0;
			}
			int64_t len = s.lens[b];
			for (int64_t step = 0; step < s.seq; step++) {
				int64_t t = rev ? len - 1 - step : step;
				if (step >= len)
					t = step; /* padding: Y is zero there */
				uint64_t yo = (uint64_t)(s.layout ? ((b * s.seq + t) * ND + d) * H
							     : ((t * ND + d) * s.batch + b) * H);
				if (step >= len) {
					if (yd)
						for (int64_t j = 0; j < H; j++)
							kst(dt, yd, yo + (uint64_t)j, 0.0);
					continue;
				}
				uint64_t xo = (uint64_t)(s.layout ? (b * s.seq + t) * s.input : (t * s.batch + b) * s.input);
				rnn_step(&s, d, s.x + xo, hs, cs);
				if (yd)
					store_row(dt, yd, yo, hs, H);
			}
			if (hd)
				store_row(dt, hd, so, hs, H);
			if (cd)
				store_row(dt, cd, so, cs, H);
		}
	}
	rc = 0;
out:
	free(hs);
	free(cs);
	rnn_free(&s);
	return rc;
}

static int k_rnn(struct cpu_kctx *k) { return rnn_run(k, RNN_PLAIN); }
static int k_gru(struct cpu_kctx *k) { return rnn_run(k, RNN_GRU); }
static int k_lstm(struct cpu_kctx *k) { return rnn_run(k, RNN_LSTM); }

const struct cpu_kernel cpu_kernels_rnn[] = {
	{ IR_OP_RNN, k_rnn, NULL },
	{ IR_OP_GRU, k_gru, NULL },
	{ IR_OP_LSTM, k_lstm, NULL },
	{ -1, NULL, NULL },
};
