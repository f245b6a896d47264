// k_conv.cu - CUDA kernels and launchers of the conv family (entries in
// k_conv.c): the window copy that pads inputs and crops outputs around
// cuDNN calls, and the epilogue (bias, residual, activation) of Conv,
// ConvTranspose and FusedConv.
#include "kernels/cuda/k_conv.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

namespace {

const int kThreads = 256;

template <typename T> __host__ __device__ __forceinline__ float to_f(T v) { return (float)v; }
template <> __host__ __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }
template <> __host__ __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __host__ __device__ __forceinline__ T from_f(float v) { return (T)v; }
template <> __host__ __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __host__ __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// enough blocks to fill the GPU several times over; the loops stride the rest
unsigned blocks_for(int64_t n)
{
	int64_t b = (n + kThreads - 1) / kThreads;
	const int64_t cap = 132 * 32;
	return (unsigned)(b < cap ? (b < 1 ? 1 : b) : cap);
}

template <typename T>
__global__ void window_kernel(const T *__restrict__ src, T *__restrict__ dst, struct kconv_window w, int64_t n, T fill)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
		int64_t r = i, off = 0, scale = 1;
		bool inside = true;
		for (int a = w.nd - 1; a >= 0; a--) {
			int64_t p = r % w.dst[a];
			r /= w.dst[a];
			int64_t q = p - w.lo[a];
			if (q < 0 || q >= w.src[a])
				inside = false;
			off += q * scale;
			scale *= w.src[a];
		}
		// r is now the (n, c) plane
		dst[i] = inside ? src[r * scale + off] : fill;
	}
}

__device__ __forceinline__ float act_apply(int act, float v, float p0, float p1)
{
	switch (act) {
	case KCONV_ACT_RELU: return v < 0.f ? 0.f : v;
	case KCONV_ACT_CLIP: return v < p0 ? p0 : (v > p1 ? p1 : v);
	case KCONV_ACT_LEAKY: return v < 0.f ? p0 * v : v;
	case KCONV_ACT_SIGMOID: return 1.f / (1.f + expf(-v));
	case KCONV_ACT_HSIGMOID: {
		float t = p0 * v + p1;
		return t < 0.f ? 0.f : (t > 1.f ? 1.f : t);
	}
	case KCONV_ACT_HSWISH: {
		float t = v / 6.f + 0.5f;
		return v * (t < 0.f ? 0.f : (t > 1.f ? 1.f : t));
	}
	case KCONV_ACT_TANH: return tanhf(v);
	case KCONV_ACT_GELU_ERF: return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
	case KCONV_ACT_GELU_TANH:
		return 0.5f * v * (1.f + tanhf(0.79788456080286535588f * (v + 0.044715f * v * v * v)));
	default: return v;
	}
}

template <typename T>
__global__ void epilogue_kernel(T *__restrict__ y, const T *__restrict__ bias, const T *__restrict__ z,
				struct kconv_epilogue e)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < e.n; i += (int64_t)gridDim.x * blockDim.x) {
		float v = to_f(y[i]);
		if (bias)
			v += to_f(bias[(i / e.inner) % e.channels]);
		if (z) {
			int64_t zo = i;
			if (!e.zfull) {
				int64_t r = i;
				zo = 0;
				for (int a = e.rank - 1; a >= 0; a--) {
					zo += (r % e.dims[a]) * e.zstrides[a];
					r /= e.dims[a];
				}
			}
			v += to_f(z[zo]);
		}
		y[i] = from_f<T>(act_apply(e.act, v, e.p0, e.p1));
	}
}

template <typename T>
void window_as(const void *src, void *dst, const struct kconv_window *w, float fill, cudaStream_t stream)
{
	int64_t n = w->outer;
	for (int a = 0; a < w->nd; a++)
		n *= w->dst[a];
	if (n <= 0)
		return;
	window_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>((const T *)src, (T *)dst, *w, n, from_f<T>(fill));
}

template <typename T>
void epilogue_as(void *y, const void *bias, const void *z, const struct kconv_epilogue *e, cudaStream_t stream)
{
	if (e->n <= 0)
		return;
	epilogue_kernel<T><<<blocks_for(e->n), kThreads, 0, stream>>>((T *)y, (const T *)bias, (const T *)z, *e);
}

constexpr int kTile = 32;

/* out[b][c][r] = in[b][r][c] (+ the epilogue when e is given: then r is the
 * channel of the output, bias[r], z in out's layout, the activation) */
template <typename T>
__global__ void transpose_kernel(const T *__restrict__ in, T *__restrict__ out, int64_t rows, int64_t cols,
				 const T *__restrict__ bias, const T *__restrict__ z, struct kconv_epilogue e, int epi)
{
	__shared__ float tile[kTile][kTile + 1];
	int64_t b = blockIdx.z;
	int64_t r0 = (int64_t)blockIdx.y * kTile, c0 = (int64_t)blockIdx.x * kTile;
	const T *src = in + b * rows * cols;
	T *dst = out + b * rows * cols;
	for (int i = threadIdx.y; i < kTile; i += blockDim.y) {
		int64_t r = r0 + i, c = c0 + threadIdx.x;
		if (r < rows && c < cols)
			tile[i][threadIdx.x] = to_f(src[r * cols + c]);
	}
	__syncthreads();
	for (int i = threadIdx.y; i < kTile; i += blockDim.y) {
		int64_t c = c0 + i, r = r0 + threadIdx.x;
		if (r < rows && c < cols) {
			float v = tile[threadIdx.x][i];
			int64_t o = c * rows + r;
			if (epi) {
				/* out is [channels = cols][inner = rows] */
				if (bias)
					v += to_f(bias[c]);
				if (z)
					v += to_f(z[b * rows * cols + o]);
				v = act_apply(e.act, v, e.p0, e.p1);
			}
			dst[o] = from_f<T>(v);
		}
	}
}

template <typename T>
void transpose_as(const void *in, void *out, int64_t batch, int64_t rows, int64_t cols, const void *bias,
		  const void *z, const struct kconv_epilogue *e, cudaStream_t stream)
{
	if (batch <= 0 || rows <= 0 || cols <= 0)
		return;
	dim3 grid((unsigned)((cols + kTile - 1) / kTile), (unsigned)((rows + kTile - 1) / kTile), (unsigned)batch);
	dim3 block(kTile, 8);
	struct kconv_epilogue none = {};
	transpose_kernel<T><<<grid, block, 0, stream>>>((const T *)in, (T *)out, rows, cols, (const T *)bias,
							(const T *)z, e ? *e : none, e != nullptr);
}

}   // namespace

extern "C" void kconv_launch_to_nhwc(int dtype, const void *x, void *xt, int64_t batch, int64_t rows, int64_t cols,
				     cudaStream_t stream)
{
	switch (dtype) {
	case KCONV_F32: transpose_as<float>(x, xt, batch, rows, cols, nullptr, nullptr, nullptr, stream); break;
	case KCONV_F16: transpose_as<__half>(x, xt, batch, rows, cols, nullptr, nullptr, nullptr, stream); break;
	case KCONV_BF16: transpose_as<__nv_bfloat16>(x, xt, batch, rows, cols, nullptr, nullptr, nullptr, stream); break;
	default: break;
	}
}

extern "C" void kconv_launch_from_nhwc(int dtype, const void *yt, void *y, const void *bias, const void *z,
				       const struct kconv_epilogue *e, int64_t batch, cudaStream_t stream)
{
	/* yt is [batch][inner][channels] */
	int64_t rows = e->inner, cols = e->channels;
	switch (dtype) {
	case KCONV_F32: transpose_as<float>(yt, y, batch, rows, cols, bias, z, e, stream); break;
	case KCONV_F16: transpose_as<__half>(yt, y, batch, rows, cols, bias, z, e, stream); break;
	case KCONV_BF16: transpose_as<__nv_bfloat16>(yt, y, batch, rows, cols, bias, z, e, stream); break;
	default: break;
	}
}

extern "C" void kconv_launch_window(int dtype, const void *src, void *dst, const struct kconv_window *w, float fill,
			     cudaStream_t stream)
{
	switch (dtype) {
	case KCONV_F32: window_as<float>(src, dst, w, fill, stream); break;
	case KCONV_F16: window_as<__half>(src, dst, w, fill, stream); break;
	case KCONV_BF16: window_as<__nv_bfloat16>(src, dst, w, fill, stream); break;
	default: break;
	}
}

extern "C" void kconv_launch_epilogue(int dtype, void *y, const void *bias, const void *z, const struct kconv_epilogue *e,
			       cudaStream_t stream)
{
	switch (dtype) {
	case KCONV_F32: epilogue_as<float>(y, bias, z, e, stream); break;
	case KCONV_F16: epilogue_as<__half>(y, bias, z, e, stream); break;
	case KCONV_BF16: epilogue_as<__nv_bfloat16>(y, bias, z, e, stream); break;
	default: break;
	}
}
