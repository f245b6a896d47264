/*
 * test_calib_gpu.c - the GPU's calibration statistics (kernels/cuda/
 * k_calib.c, cuda_calib_observe: what `calibrate` uses on the GPU) against
 * ir_calib_observe on the same values: equal counts, min, max, moving
 * averages, range and every histogram bin; per-channel sums within double
 * rounding. Sizes 1, 3 and 1000003, float32/float16/bfloat16, NaN and
 * infinities, a first batch of zeros, batches 10x and 1000x larger
 * (re-binning), values below the smallest range and denormals, rows of 37
 * channels, and channels-last [N, C, H, W] values summed over W (the
 * reference reorders them to NCHW first). Also: a channels-last value with
 * channels other than W is refused.
 *
 * Exit status: 0 all passed, 1 a failure, 77 (skip) without a GPU or
 * without CUDA.
 */
#include "exec/exec.h"
#include "tests/gpu/gpu_test.h"
#include "tests/calib_cases.h"

#ifdef OGSH_HAVE_CUDA
#include "kernels/cuda/cuda.h"
#endif

static int failures, checks;

#define CHECK(c) do { checks++; if (!(c)) { failures++; fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); } } while (0)

#ifdef OGSH_HAVE_CUDA

static cudaStream_t stream;
static struct cuda_calib_ws *ws;

static bool gpu_init(char *why, size_t size)
{
	return gpu_test_init(&stream, why, size);
}

static size_t esize(int dtype)
{
	return dtype == IR_FLOAT ? 4 : 2;
}

/* NCHW [N, C, H, W] values from their NHWC store. */
static void to_nchw(const float *nhwc, float *nchw, const int64_t *dims)
{
	int64_t N = dims[0], C = dims[1], H = dims[2], W = dims[3];
	for (int64_t n = 0; n < N; n++)
		for (int64_t h = 0; h < H; h++)
			for (int64_t w = 0; w < W; w++)
				for (int64_t c = 0; c < C; c++)
					nchw[((n * C + c) * H + h) * W + w] = nhwc[((n * H + h) * W + w) * C + c];
}

/* Runs `steps` on a tensor of logical dims (rank 1, 2 or 4; nhwc: stored
 * channels-last) on the GPU and through ir_calib_observe. */
static void run_case(const char *what, int dtype, int rank, const int64_t *dims, bool nhwc, int n_chan,
		     const struct cc_step *steps, int n_steps)
{
	uint64_t n = 1;
	for (int i = 0; i < rank; i++)
		n *= (uint64_t)dims[i];
	float *x = malloc(n * sizeof(float)), *ref = malloc(n * sizeof(float));
	void *raw = malloc(n * sizeof(float)), *dev = NULL;
	struct ir_calib c1, c2;
	ir_calib_init(&c1);
	ir_calib_init(&c2);
	struct ir_calib_tensor *a = ir_calib_add_tensor(&c1, what), *b = ir_calib_add_tensor(&c2, what);
	CHECK(x && ref && raw && a && b);
	CHECK(cudaMalloc(&dev, n * esize(dtype)) == cudaSuccess);
	if (!x || !ref || !raw || !a || !b || !dev)
		goto out;
	struct cuda_tensor ct;
	memset(&ct, 0, sizeof(ct));
	ct.data = dev;
	ct.dtype = dtype;
	ct.rank = rank;
	for (int i = 0; i < rank; i++)
		ct.dims[i] = dims[i];
	ct.nhwc = nhwc;
	for (int s = 0; s < n_steps; s++) {
		/* x is the store (NHWC when nhwc), ref the logical values */
		cc_batch(x, n, steps[s].kind, steps[s].scale);
		cc_round(x, n, dtype, raw);
		if (nhwc)
			to_nchw(x, ref, dims);
		else
			memcpy(ref, x, n * sizeof(float));
		CHECK(cudaMemcpy(dev, raw, n * esize(dtype), cudaMemcpyHostToDevice) == cudaSuccess);
		struct ir_diag d;
		ir_diag_init(&d);
		int r1 = ir_calib_observe(a, ref, n, n_chan, &d);
		int r2 = cuda_calib_observe(b, &ct, n_chan, stream, &ws, &d);
		CHECK(r1 == 0 && r2 == 0);
		if (d.error)
			fprintf(stderr, "%s: %s\n", what, d.error);
		ir_diag_clear(&d);
	}
	char name[200];
	snprintf(name, sizeof(name), "%s (%s, %llu elements%s, %d channels)", what, ir_dtype_name(dtype),
		 (unsigned long long)n, nhwc ? ", channels-last" : "", n_chan);
	checks++;
	if (cc_compare(name, a, b, 1e-9)) {
		failures++;
		fprintf(stderr, "FAIL %s\n", name);
	} else {
		printf("ok   %s\n", name);
	}
out:
	if (dev)
		cudaFree(dev);
	ir_calib_clear(&c1);
	ir_calib_clear(&c2);
	free(x);
	free(ref);
	free(raw);
}

static void refusals(void)
{
	void *dev = NULL;
	CHECK(cudaMalloc(&dev, 2 * 3 * 4 * 5 * sizeof(float)) == cudaSuccess);
	CHECK(cudaMemset(dev, 0, 2 * 3 * 4 * 5 * sizeof(float)) == cudaSuccess);
	struct cuda_tensor ct = { .data = dev, .dtype = IR_FLOAT, .rank = 4, .dims = { 2, 3, 4, 5 }, .nhwc = true };
	struct ir_calib c;
	ir_calib_init(&c);
	struct ir_calib_tensor *t = ir_calib_add_tensor(&c, "v");
	struct ir_diag d;
	ir_diag_init(&d);
	CHECK(cuda_calib_observe(t, &ct, 3, stream, &ws, &d) == IR_ERR);   /* channels-last: only W (5) */
	CHECK(d.error && strstr(d.error, "last axis"));
	ir_diag_clear(&d);
	ct.dtype = IR_INT32;
	CHECK(cuda_calib_observe(t, &ct, 0, stream, &ws, &d) == IR_ERR);
	ir_diag_clear(&d);
	CHECK(t->batches == 0);
	ir_calib_clear(&c);
	cudaFree(dev);
}

int main(void)
{
	char why[256];
	if (!gpu_init(why, sizeof(why))) {
		printf("test_calib_gpu: skipped: %s\n", why);
		return 77;
	}
	static const int dtypes[] = { IR_FLOAT, IR_FLOAT16, IR_BFLOAT16 };
	static const int64_t sizes[] = { 1, 3, 1000003 };
	for (int di = 0; di < 3; di++) {
		int dt = dtypes[di];
		for (int si = 0; si < 3; si++)
			run_case("flat", dt, 1, &sizes[si], false, sizes[si] == 3 ? 3 : 0, cc_steps, CC_N_STEPS);
		const int64_t rows[2] = { 4099, 37 };
		run_case("rows", dt, 2, rows, false, 37, cc_steps, CC_N_STEPS);
		const int64_t small[4] = { 2, 5, 7, 3 }, big[4] = { 8, 64, 28, 28 };
		run_case("nchw", dt, 4, big, false, 28, cc_steps, CC_N_STEPS);
		run_case("nhwc", dt, 4, small, true, 3, cc_steps, CC_N_STEPS);
		run_case("nhwc", dt, 4, big, true, 28, cc_steps, CC_N_STEPS);
		if (dt != IR_FLOAT16)
			run_case("tiny", dt, 1, &sizes[2], false, 0, cc_tiny_steps, CC_N_TINY);
	}
	refusals();
	cuda_calib_ws_free(ws);
	cudaStreamDestroy(stream);
	printf("test_calib_gpu: %d checks, %d failures\n", checks, failures);
	return failures ? 1 : 0;
}

#else

int main(void)
{
	printf("test_calib_gpu: skipped: ogsh was built without CUDA\n");
	return 77;
}

#endif
