/*
 * wcache.c - the packed forms of constant weights, kept across runs (see
 * cpu.h, cpu_wcache_get).
 *
 * A Conv's weights are the A operand of its products and a MatMul's
 * constant right side the B operand; packing them into the micro-kernel's
 * panels on every run reads and rewrites every weight (ResNet-50: 100 MB a
 * run, about a seventh of its time on one core). The cache packs each once.
 *
 * An entry is keyed by the weight tensor (the initializer, or the executor's
 * aligned copy of it) and a tag. Initializers are never changed in place
 * (a pass that changes weights makes new tensors), and the entry holds a
 * reference to its tensor, so the address cannot be reused by another
 * tensor while the entry lives. The same weight read by several nodes with
 * the same tag shares one entry. When the entry's reference is the last
 * one (the model and its stages were freed), the entry is dropped at the
 * next miss. A mutex guards the table, so kernels may call it from any
 * thread.
 */
#include "cpu.h"

#include <pthread.h>
#include <stdlib.h>

struct wc_entry {
	struct ir_tensor *key;   /* one reference held */
	uint32_t tag;
	float *data;
	size_t bytes;
};

static pthread_mutex_t wc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct wc_entry *wc;
static size_t wc_n, wc_cap, wc_bytes;

/* Drops the entries whose tensor only the cache holds. Under wc_lock. */
static void wc_sweep(void)
{
	size_t k = 0;
	for (size_t i = 0; i < wc_n; i++) {
		if (wc[i].key->refcount == 1) {
			ir_tensor_unref(wc[i].key);
			free(wc[i].data);
			wc_bytes -= wc[i].bytes;
		} else {
			wc[k++] = wc[i];
		}
	}
	wc_n = k;
}

/* cpu_wcache_get(): see cpu.h */

const float *cpu_wcache_get(struct cpu_kctx *k, int in, uint32_t tag, size_t nfloats, cpu_wcache_make make,
			   const void *arg)
{
	const struct ir_node *n = k->node;
	if (!n || in < 0 || in >= n->n_inputs || in >= k->n_in || !n->inputs[in] || !n->inputs[in]->init)
		return NULL;
	/* the executor passes the initializer itself or its aligned copy:
	 * either is a tensor that lives as long as the model */
	const struct ir_tensor *ct = kin(k, in);
	if (!ct)
		return NULL;
	struct ir_tensor *t = (struct ir_tensor *)ct;
	const float *r = NULL;
	pthread_mutex_lock(&wc_lock);
	for (size_t i = 0; i < wc_n; i++)
		if (wc[i].key == t && wc[i].tag == tag) {
			r = wc[i].data;
			goto out;
		}
	wc_sweep();
	if (wc_n == wc_cap) {
		size_t cap = wc_cap ? 2 * wc_cap : 64;
		struct wc_entry *e = realloc(wc, sizeof(*e) * cap);
		if (!e)
			goto out;
		wc = e;
		wc_cap = cap;
	}
	if (wc_bytes + nfloats * sizeof(float) > CPU_WCACHE_MAX)
		goto out;
	float *d = make(arg);
	if (!d)
		goto out;
	ir_tensor_ref(t);
	wc[wc_n++] = (struct wc_entry){ t, tag, d, nfloats * sizeof(float) };
	wc_bytes += nfloats * sizeof(float);
	r = d;
out:
	pthread_mutex_unlock(&wc_lock);
	return r;
}

/* cpu_wcache_clear(): see cpu.h */

void cpu_wcache_clear(void)
{
	pthread_mutex_lock(&wc_lock);
	for (size_t i = 0; i < wc_n; i++) {
		ir_tensor_unref(wc[i].key);
		free(wc[i].data);
	}
	free(wc);
	wc = NULL;
	wc_n = wc_cap = wc_bytes = 0;
	pthread_mutex_unlock(&wc_lock);
}
