/*
 * k_calib.c - calibration statistics computed on the GPU (launchers in
 * k_calib.cu): cuda_calib_observe adds one batch of a device tensor to an
 * ir_calib_tensor exactly as ir_calib_observe adds the same values from
 * the host, downloading only a few scalars, the 2048 bin counts and the
 * per-channel sums, never the tensor:
 *   1. kc_stats: non-finite count, min and max of the finite values;
 *   2. ir_calib_observe_stats on the host: n_chan checked, the range set
 *      or doubled (bins merged), min/max/ema/count updated;
 *   3. kc_hist with ir_calib_hist_scale(t) (the CPU's bin formula), and
 *      kc_chan_abssum when n_chan > 0; then ir_calib_add_hist and
 *      ir_calib_add_chan.
 * Two synchronisations of the stream a tensor (after 1 and after 3).
 */
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/k_calib.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(KC_BINS == IR_CALIB_BINS, "k_calib.cu bins as many as ir/calib.c");

struct cuda_calib_ws {
	struct kc_summary *parts, *stats;   /* device: KC_MAX_PARTS and 1 */
	unsigned long long *bins;           /* device: KC_BINS */
	double *sums;                       /* device: sums_cap */
	int64_t sums_cap;
	uint64_t hbins[KC_BINS];            /* host copies */
	double *hsums;
};

void cuda_calib_ws_free(struct cuda_calib_ws *ws)
{
	if (!ws)
		return;
	/* errors of cudaFree are of no use here (a broken context is reported by the next call) */
	if (ws->parts)
		cudaFree(ws->parts);
	if (ws->stats)
		cudaFree(ws->stats);
	if (ws->bins)
		cudaFree(ws->bins);
	if (ws->sums)
		cudaFree(ws->sums);
	free(ws->hsums);
	free(ws);
}

static const char *tname(const struct ir_calib_tensor *t)
{
	return t->name ? t->name : "?";
}

static int ws_get(struct cuda_calib_ws **wsp, int64_t n_chan, struct ir_diag *d)
{
	struct cuda_calib_ws *ws = *wsp;
	if (!ws) {
		if (!(ws = calloc(1, sizeof(*ws))))
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
		*wsp = ws;
		int rc;
		if ((rc = cuda_check(cudaMalloc((void **)&ws->parts, KC_MAX_PARTS * sizeof(struct kc_summary)),
				     "cudaMalloc (calibration)", d)) ||
		    (rc = cuda_check(cudaMalloc((void **)&ws->stats, sizeof(struct kc_summary)),
				     "cudaMalloc (calibration)", d)) ||
		    (rc = cuda_check(cudaMalloc((void **)&ws->bins, KC_BINS * sizeof(unsigned long long)),
				     "cudaMalloc (calibration)", d)))
			return rc;
	}
	if (!ws->parts || !ws->stats || !ws->bins)
		return ir_diag_err(d, IR_ERR, "calibration: the GPU workspace could not be made");
	if (n_chan > ws->sums_cap) {
		if (ws->sums) {
			cudaFree(ws->sums);
			ws->sums = NULL;
		}
		ws->sums_cap = 0;
		double *h = realloc(ws->hsums, (size_t)n_chan * sizeof(double));
		if (!h)
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
		ws->hsums = h;
		int rc = cuda_check(cudaMalloc((void **)&ws->sums, (size_t)n_chan * sizeof(double)),
				    "cudaMalloc (calibration)", d);
		if (rc) {
			ws->sums = NULL;
			return rc;
		}
		ws->sums_cap = n_chan;
	}
	return 0;
}

int cuda_calib_observe(struct ir_calib_tensor *t, const struct cuda_tensor *x, int n_chan, cudaStream_t st,
		       struct cuda_calib_ws **wsp, struct ir_diag *d)
{
	if (!cuda_is_float(x->dtype))
		return ir_diag_err(d, IR_ERR, "calibration of '%s': %s is not float, float16 or bfloat16", tname(t),
				   ir_dtype_name(x->dtype));
	int64_t n = cuda_numel(x);
	if (n < 0)
		return ir_diag_err(d, IR_ERR, "calibration of '%s': negative size", tname(t));
	if (n == 0)
		return ir_calib_observe_stats(t, 0, n_chan, 0, 0, 0, d);
	if (!x->data)
		return ir_diag_err(d, IR_ERR, "calibration of '%s': no device memory", tname(t));
	/* where channel c of the last axis is in memory: rows of n_chan, or the
	 * channels-last store of [N, C, H, W] (W is then the last axis) */
	int64_t outer = 0, inner = 1;
	if (n_chan > 0) {
		if (x->nhwc && x->rank == 4) {
			if (x->dims[3] != n_chan)
				return ir_diag_err(d, IR_ERR,
						   "calibration of '%s': channels-last, per-channel sums need the last "
						   "axis (%d channels, it has %" PRId64 ")",
						   tname(t), n_chan, x->dims[3]);
			inner = x->dims[1];
			outer = x->dims[0] * x->dims[2];
		} else {
			outer = n / n_chan;   /* n % n_chan is checked by ir_calib_observe_stats */
		}
	}
	int rc = ws_get(wsp, n_chan, d);
	if (rc)
		return rc;
	struct cuda_calib_ws *ws = *wsp;

	/* pass 1 */
	struct kc_summary s;
	if ((rc = cuda_check(kc_stats(x->data, x->dtype, n, ws->parts, ws->stats, st), "kc_stats", d)) ||
	    (rc = cuda_check(cudaMemcpyAsync(&s, ws->stats, sizeof(s), cudaMemcpyDeviceToHost, st),
			     "downloading calibration statistics", d)) ||
	    (rc = cuda_check(cudaStreamSynchronize(st), "calibration statistics", d)))
		return rc;
	if (s.finite + s.nonfinite != (uint64_t)n)
		return ir_diag_err(d, IR_ERR, "calibration of '%s': the GPU counted %" PRIu64 " elements of %" PRId64,
				   tname(t), (uint64_t)(s.finite + s.nonfinite), n);

	/* the host decides the range */
	if ((rc = ir_calib_observe_stats(t, (uint64_t)n, n_chan, s.nonfinite, s.min, s.max, d)))
		return rc;

	/* pass 2 and the channel sums */
	float scale = ir_calib_hist_scale(t);
	bool hist = s.finite > 0 && scale > 0;
	if (hist && ((rc = cuda_check(cudaMemsetAsync(ws->bins, 0, KC_BINS * sizeof(unsigned long long), st),
				      "cudaMemsetAsync (calibration)", d)) ||
		     (rc = cuda_check(kc_hist(x->data, x->dtype, n, scale, ws->bins, st), "kc_hist", d)) ||
		     (rc = cuda_check(cudaMemcpyAsync(ws->hbins, ws->bins, KC_BINS * sizeof(uint64_t),
						      cudaMemcpyDeviceToHost, st),
				      "downloading the histogram", d))))
		return rc;
	if (n_chan > 0 && ((rc = cuda_check(cudaMemsetAsync(ws->sums, 0, (size_t)n_chan * sizeof(double), st),
					    "cudaMemsetAsync (calibration)", d)) ||
			   (rc = cuda_check(kc_chan_abssum(x->data, x->dtype, outer, n_chan, inner, ws->sums, st),
					    "kc_chan_abssum", d)) ||
			   (rc = cuda_check(cudaMemcpyAsync(ws->hsums, ws->sums, (size_t)n_chan * sizeof(double),
							    cudaMemcpyDeviceToHost, st),
					    "downloading the channel sums", d))))
		return rc;
	if ((hist || n_chan > 0) && (rc = cuda_check(cudaStreamSynchronize(st), "calibration histogram", d)))
		return rc;
	if (hist) {
		ir_calib_add_hist(t, ws->hbins);
	} else if (s.finite > 0) {
		/* only zeros so far (no range yet): bin 0, as ir_calib_observe does */
		memset(ws->hbins, 0, sizeof(ws->hbins));
		ws->hbins[0] = s.finite;
		ir_calib_add_hist(t, ws->hbins);
	}
	if (n_chan > 0)
		ir_calib_add_chan(t, ws->hsums, (uint64_t)n / (uint64_t)n_chan);
	return 0;
}
