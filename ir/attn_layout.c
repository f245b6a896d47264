/*
 * attn_layout.c - the layouts of ai.ogsh FusedAttention (declared in ir.h):
 * parsing the `layout` and `out_layout` attributes and the element strides
 * they give, shared by shape inference, the cost model and both backends so
 * that they read a layout one way.
 */
#include "ir/ir.h"

#include <stdio.h>
#include <string.h>

#define NO(...) (snprintf(why, size, __VA_ARGS__), -1)

/* Whether s is made of each letter of `set` once, in any order, with D last. */
static bool letters_ok(const char *s, const char *set)
{
	size_t n = strlen(set);
	if (strlen(s) != n || s[n - 1] != 'D')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr(s, set[i]) || strchr(s, set[i]) != strrchr(s, set[i]))
			return false;
	return true;
}

int ir_attn_layout_parse(const char *layout, const char *out_layout, struct ir_attn_layout *l, char *why, size_t size)
{
	memset(l, 0, sizeof(*l));
	if (!layout)
		layout = "BHSD";
	if (!strcmp(layout, "BHSD") || !strcmp(layout, "BSHD")) {
		l->packed = false;
	} else if (letters_ok(layout, "BSH3D")) {
		l->packed = true;
	} else {
		return NO("layout '%s' is not BHSD, BSHD or a packed layout (the letters B, S, 3, H in any order, then "
			  "D, such as BS3HD)", layout);
	}
	snprintf(l->in, sizeof(l->in), "%s", layout);
	if (out_layout) {
		if (!letters_ok(out_layout, "BSHD"))
			return NO("out_layout '%s' is not the letters B, S, H in any order, then D", out_layout);
		snprintf(l->out, sizeof(l->out), "%s", out_layout);
		l->has_out = true;
	} else {
		size_t k = 0;
		for (const char *p = layout; *p; p++)
			if (*p != '3')
				l->out[k++] = *p;
		l->out[k] = 0;
	}
	return 0;
}

/* The position of letter c in s. */
static int pos(const char *s, char c)
{
	const char *p = strchr(s, c);
	return p ? (int)(p - s) : -1;
}

int ir_attn_view(const struct ir_attn_layout *l, int which, int rank, const int64_t *dims, int64_t heads,
		 struct ir_attn_view *v, char *why, size_t size)
{
	memset(v, 0, sizeof(*v));
	const int n = (int)strlen(l->in);
	if (!l->packed) {
		/* the 4-D layouts, and 3-D [batch, seq, heads*size] whatever the layout */
		if (rank == 4) {
			const int hx = pos(l->in, 'H'), sx = pos(l->in, 'S');
			const int64_t st[4] = { dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1 };
			v->b = dims[0];
			v->h = dims[hx];
			v->s = dims[sx];
			v->d = dims[3];
			v->sb = st[0];
			v->sh = st[hx];
			v->ss = st[sx];
			return 0;
		}
		if (rank != 3)
			return NO("Q, K and V must be 3-D or 4-D");
		if (heads <= 0)
			return NO("a 3-D input needs positive q_num_heads and kv_num_heads");
		if (dims[2] % heads)
			return NO("the last dimension %lld is not a multiple of the %lld heads", (long long)dims[2],
				  (long long)heads);
		v->b = dims[0];
		v->h = heads;
		v->s = dims[1];
		v->d = dims[2] / heads;
		v->sh = v->d;
		v->ss = dims[2];
		v->sb = v->s * v->ss;
		return 0;
	}
	/* packed: the first rank-1 letters are axes of their own, the rest share the last axis */
	if (rank < 2 || rank > n)
		return NO("the packed input has rank %d: layout %s wants %d axes, or fewer with the trailing ones merged",
			  rank, l->in, n);
	int64_t full[5];
	for (int i = 0; i < rank - 1; i++)
		full[i] = dims[i];
	for (int i = rank - 1; i < n; i++)
		if (strchr("BS", l->in[i]) && rank < n)
			return NO("layout %s merges %c into the last axis: only 3, H and D may share it", l->in, l->in[i]);
	int64_t rest = dims[rank - 1];
	for (int i = rank - 1; i < n - 1; i++) {
		int64_t x = l->in[i] == '3' ? 3 : heads;
		if (x <= 0)
			return NO("the packed input merges the heads into its last axis: q_num_heads must be positive");
		if (rest % x)
			return NO("the last dimension %lld does not split into %s", (long long)dims[rank - 1], l->in + rank - 1);
		full[i] = x;
		rest /= x;
	}
	full[n - 1] = rest;
	const int x3 = pos(l->in, '3');
	if (full[x3] != 3)
		return NO("the Q/K/V axis of the packed input has %lld entries, not 3", (long long)full[x3]);
	if (heads > 0 && full[pos(l->in, 'H')] != heads)
		return NO("the packed input has %lld heads, q_num_heads says %lld", (long long)full[pos(l->in, 'H')],
			  (long long)heads);
	int64_t st[5];
	st[n - 1] = 1;
	for (int i = n - 2; i >= 0; i--)
		st[i] = st[i + 1] * full[i + 1];
	v->b = full[pos(l->in, 'B')];
	v->s = full[pos(l->in, 'S')];
	v->h = full[pos(l->in, 'H')];
	v->d = full[n - 1];
	v->sb = st[pos(l->in, 'B')];
	v->ss = st[pos(l->in, 'S')];
	v->sh = st[pos(l->in, 'H')];
	v->off = which * st[x3];
	return 0;
}

void ir_attn_out(const struct ir_attn_layout *l, int64_t b, int64_t h, int64_t s, int64_t d, int64_t dims[4],
		 int64_t *sb, int64_t *sh, int64_t *ss)
{
	int64_t st[4];
	for (int i = 0; i < 4; i++)
		dims[i] = l->out[i] == 'B' ? b : l->out[i] == 'H' ? h : l->out[i] == 'S' ? s : d;
	st[3] = 1;
	for (int i = 2; i >= 0; i--)
		st[i] = st[i + 1] * dims[i + 1];
	*sb = st[pos(l->out, 'B')];
	*sh = st[pos(l->out, 'H')];
	*ss = st[pos(l->out, 'S')];
}
