// k_conv.cu - CUDA kernels and launchers of the conv family (entries in
// k_conv.c): the window copy that pads inputs and crops outputs around
// cuDNN calls, the epilogue (bias, residual, activation) of Conv,
// ConvTranspose and FusedConv, and the patches and weights of the patch
// GEMM (a conv whose kernel is its stride, as one cuBLASLt product).
#include "kernels/cuda/k_conv.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include <type_traits>

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

/* The epilogue on [N, channels, inner] y, V elements (16 bytes) per thread,
 * 32-bit index arithmetic: inner % V == 0 (a vector is in one channel), z
 * absent or full-size, y and z 16-byte aligned, fewer than 2^31 elements. */
template <typename T, int V>
__global__ void epilogue_vec_kernel(T *__restrict__ y, const T *__restrict__ bias, const T *__restrict__ z,
				    uint32_t nvec, uint32_t inner, uint32_t channels, int act, float p0, float p1)
{
	for (uint32_t v = blockIdx.x * blockDim.x + threadIdx.x; v < nvec; v += gridDim.x * blockDim.x) {
		uint4 yv = reinterpret_cast<uint4 *>(y)[v], zv = {};
		if (z)
			zv = reinterpret_cast<const uint4 *>(z)[v];
		float b = bias ? to_f(bias[(v * V / inner) % channels]) : 0.f;
		T *ye = reinterpret_cast<T *>(&yv);
		const T *ze = reinterpret_cast<const T *>(&zv);
#pragma unroll
		for (int k = 0; k < V; k++) {
			float f = to_f(ye[k]) + b;
			if (z)
				f += to_f(ze[k]);
			ye[k] = from_f<T>(act_apply(act, f, p0, p1));
		}
		reinterpret_cast<uint4 *>(y)[v] = yv;
	}
}

/* The epilogue on channels-last y, 8 channels per thread (16-byte loads):
 * channels % 8 == 0 and the buffers 16-byte aligned. I is the index type. */
template <typename T, typename I>
__global__ void epilogue_cl8_kernel(T *__restrict__ y, const T *__restrict__ bias, const T *__restrict__ z, I nvec,
				    I cvec, int act, float p0, float p1)
{
	for (I v = (I)blockIdx.x * blockDim.x + threadIdx.x; v < nvec; v += (I)gridDim.x * blockDim.x) {
		uint4 yv = reinterpret_cast<uint4 *>(y)[v], bv = {}, zv = {};
		if (bias)
			bv = reinterpret_cast<const uint4 *>(bias)[v % cvec];
		if (z)
			zv = reinterpret_cast<const uint4 *>(z)[v];
		T *ye = reinterpret_cast<T *>(&yv);
		const T *be = reinterpret_cast<const T *>(&bv), *ze = reinterpret_cast<const T *>(&zv);
#pragma unroll
		for (int k = 0; k < 8; k++) {
			float f = to_f(ye[k]);
			if (bias)
				f += to_f(be[k]);
			if (z)
				f += to_f(ze[k]);
			ye[k] = from_f<T>(act_apply(act, f, p0, p1));
		}
		reinterpret_cast<uint4 *>(y)[v] = yv;
	}
}

template <typename T>
void epilogue_cl_as(void *y, const void *bias, const void *z, const struct kconv_epilogue *e, cudaStream_t stream)
{
	if (e->n <= 0)
		return;
	bool aligned = ((uintptr_t)y | (uintptr_t)bias | (uintptr_t)z) % 16 == 0;
	if (sizeof(T) != 2 || e->inner != 1 || e->channels % 8 || (!e->zfull && z) || !aligned) {
		epilogue_kernel<T><<<blocks_for(e->n), kThreads, 0, stream>>>((T *)y, (const T *)bias, (const T *)z, *e);
		return;
	}
	int64_t nvec = e->n / 8, cvec = e->channels / 8;
	if (nvec < ((int64_t)1 << 31))
		epilogue_cl8_kernel<T, uint32_t><<<blocks_for(nvec), kThreads, 0, stream>>>(
			(T *)y, (const T *)bias, (const T *)z, (uint32_t)nvec, (uint32_t)cvec, e->act, e->p0, e->p1);
	else
		epilogue_cl8_kernel<T, uint64_t><<<blocks_for(nvec), kThreads, 0, stream>>>(
			(T *)y, (const T *)bias, (const T *)z, (uint64_t)nvec, (uint64_t)cvec, e->act, e->p0, e->p1);
}

/* Depthwise conv on channels-last tensors: each thread computes V adjacent
 * channels of one output pixel (V*sizeof(T)-byte loads, coalesced across
 * the threads); wt is W as [kh*kw][C]. The epilogue (bias, a full-size z,
 * the activation) on the way out. */
template <typename T, int V> struct vec_of { T v[V]; };

template <typename T, int V>
__device__ __forceinline__ vec_of<T, V> load_v(const T *p)
{
	using W = typename std::conditional<V * sizeof(T) == 16, uint4,
		  typename std::conditional<V * sizeof(T) == 8, uint2,
		  typename std::conditional<V * sizeof(T) == 4, uint32_t, T>::type>::type>::type;
	W w = *reinterpret_cast<const W *>(p);
	return *reinterpret_cast<vec_of<T, V> *>(&w);
}

template <typename T, int V>
__global__ void depthwise_kernel(const T *__restrict__ x, const T *__restrict__ wt, const T *__restrict__ bias,
				 const T *__restrict__ z, T *__restrict__ y, struct kconv_dw p, uint32_t total)
{
	uint32_t cv = (uint32_t)(p.c / V);
	for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
		uint32_t c = (i % cv) * V, pix = i / cv;
		uint32_t ow = pix % (uint32_t)p.ow, t = pix / (uint32_t)p.ow;
		uint32_t oh = t % (uint32_t)p.oh, n = t / (uint32_t)p.oh;
		int ih0 = (int)oh * p.sh - p.ph, iw0 = (int)ow * p.sw - p.pw;
		const T *xn = x + (size_t)n * p.h * p.w * p.c + c;
		float acc[V];
#pragma unroll
		for (int k = 0; k < V; k++)
			acc[k] = 0.f;
		for (int a = 0; a < p.kh; a++) {
			int ih = ih0 + a * p.dh;
			if (ih < 0 || ih >= p.h)
				continue;
			for (int b = 0; b < p.kw; b++) {
				int iw = iw0 + b * p.dw;
				if (iw < 0 || iw >= p.w)
					continue;
				vec_of<T, V> xv = load_v<T, V>(xn + ((size_t)ih * p.w + iw) * p.c);
				vec_of<T, V> wv = load_v<T, V>(wt + (size_t)(a * p.kw + b) * p.c + c);
#pragma unroll
				for (int k = 0; k < V; k++)
					acc[k] += to_f(xv.v[k]) * to_f(wv.v[k]);
			}
		}
		size_t o = (size_t)pix * p.c + c;
		vec_of<T, V> out;
#pragma unroll
		for (int k = 0; k < V; k++) {
			float f = acc[k];
			if (bias)
				f += to_f(bias[c + k]);
			if (z)
				f += to_f(z[o + k]);
			out.v[k] = from_f<T>(act_apply(p.act, f, p.p0, p.p1));
		}
		*reinterpret_cast<vec_of<T, V> *>(y + o) = out;
	}
}

template <typename T, int V>
void depthwise_v(const void *x, const void *wt, const void *bias, const void *z, void *y, const struct kconv_dw *p,
		 uint32_t total, cudaStream_t stream)
{
	depthwise_kernel<T, V><<<blocks_for(total), kThreads, 0, stream>>>((const T *)x, (const T *)wt, (const T *)bias,
									   (const T *)z, (T *)y, *p, total);
}

template <typename T>
void depthwise_as(const void *x, const void *wt, const void *bias, const void *z, void *y, const struct kconv_dw *p,
		  cudaStream_t stream)
{
	int64_t pixels = (int64_t)p->n * p->oh * p->ow;
	if (pixels <= 0 || p->c <= 0)
		return;
	bool al = ((uintptr_t)x | (uintptr_t)wt | (uintptr_t)y | (uintptr_t)z) % 16 == 0;
	int v = al && (p->c * (int)sizeof(T)) % 16 == 0 ? (int)(16 / sizeof(T)) : al && p->c % 2 == 0 && sizeof(T) == 2 ? 2 : 1;
	uint32_t total = (uint32_t)(pixels * (p->c / v));
	if (v == 8)
		depthwise_v<T, (16 / sizeof(T) == 8 ? 8 : 1)>(x, wt, bias, z, y, p, total, stream);
	else if (v == 4)
		depthwise_v<T, (16 / sizeof(T) == 4 ? 4 : 1)>(x, wt, bias, z, y, p, total, stream);
	else if (v == 2)
		depthwise_v<T, 2>(x, wt, bias, z, y, p, total, stream);
	else
		depthwise_v<T, 1>(x, wt, bias, z, y, p, total, stream);
}

/*
 * Depthwise conv on NCHW with a K x K window (dilation 1) and stride S: a
 * block computes `th` output rows of `pl` planes (n, c) from a shared-memory
 * copy, in float, of the input rows they read (zeros where the pads are),
 * loaded a row a warp (coalesced). Each thread then takes one output column
 * of one plane for a run of rows; a warp's threads hold neighbouring
 * columns, so the stores are coalesced. The epilogue (bias, a full-size z,
 * the activation) on the way out. tiles: blocks per plane group (the
 * plane's row tiles); grid: tiles * ceil(n*c / pl) blocks.
 */
template <typename T, int K, int S>
__global__ void __launch_bounds__(256) depthwise_nchw_kernel(const T *__restrict__ x, const T *__restrict__ wt,
							    const T *__restrict__ bias, const T *__restrict__ z,
							    T *__restrict__ y, struct kconv_dw p, int th, int pl,
							    int tiles, int rg)
{
	extern __shared__ float sm[];
	const int planes = p.n * p.c;
	const int rows = (th - 1) * S + K, sw = (p.ow - 1) * S + K;
	const int g = blockIdx.x / tiles, t = blockIdx.x - g * tiles;
	const int plane0 = g * pl, oh0 = t * th;
	const int npl = min(pl, planes - plane0), nrow = min(th, p.oh - oh0);
	const int ih0 = oh0 * S - p.ph;
	float *ws = sm + pl * rows * sw;   /* the planes' weights */
	for (int i = threadIdx.x; i < npl * K * K; i += blockDim.x)
		ws[i] = to_f(wt[(size_t)((plane0 + i / (K * K)) % p.c) * K * K + i % (K * K)]);
	if (sw >= 64) {
		/* a row a warp, four loads in flight a lane */
		const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarp = blockDim.x >> 5;
		for (int jr = warp; jr < npl * rows; jr += nwarp) {
			int j = jr / rows, r = jr - j * rows, ih = ih0 + r;
			float *dst = sm + jr * sw;
			const T *src = x + ((size_t)(plane0 + j) * p.h + ih) * p.w - p.pw;
			bool in = ih >= 0 && ih < p.h;
			for (int col0 = lane; col0 < sw; col0 += 128) {
				float v[4];
#pragma unroll
				for (int u = 0; u < 4; u++) {
					int col = col0 + 32 * u, iw = col - p.pw;
					v[u] = in && col < sw && iw >= 0 && iw < p.w ? to_f(src[col]) : 0.f;
				}
#pragma unroll
				for (int u = 0; u < 4; u++)
					if (col0 + 32 * u < sw)
						dst[col0 + 32 * u] = v[u];
			}
		}
	} else {
		/* narrow rows (small planes): the block's rows as one run of elements */
		for (int e = threadIdx.x; e < npl * rows * sw; e += blockDim.x) {
			int jr = e / sw, col = e - jr * sw;
			int j = jr / rows, ih = ih0 + (jr - j * rows), iw = col - p.pw;
			sm[e] = ih >= 0 && ih < p.h && iw >= 0 && iw < p.w
					? to_f(x[((size_t)(plane0 + j) * p.h + ih) * p.w + iw])
					: 0.f;
		}
	}
	__syncthreads();
	const int rpg = (nrow + rg - 1) / rg;
	for (int item = threadIdx.x; item < npl * p.ow * rg; item += blockDim.x) {
		int j = item / (p.ow * rg), rem = item - j * p.ow * rg;
		int q = rem / p.ow, ox = rem - q * p.ow;
		int r0 = q * rpg, r1 = min(r0 + rpg, nrow);
		int plane = plane0 + j, c = plane % p.c;
		float w[K * K];
#pragma unroll
		for (int i = 0; i < K * K; i++)
			w[i] = ws[j * K * K + i];
		float b = bias ? to_f(bias[c]) : 0.f;
		const float *base = sm + j * rows * sw + ox * S;
		size_t o = ((size_t)plane * p.oh + oh0 + r0) * p.ow + ox;
		for (int oy = r0; oy < r1; oy++, o += p.ow) {
			const float *in = base + oy * S * sw;
			float acc = 0.f;
#pragma unroll
			for (int ky = 0; ky < K; ky++)
#pragma unroll
				for (int kx = 0; kx < K; kx++)
					acc += in[ky * sw + kx] * w[ky * K + kx];
			acc += b;
			if (z)
				acc += to_f(z[o]);
			y[o] = from_f<T>(act_apply(p.act, acc, p.p0, p.p1));
		}
	}
}

template <typename T, int K, int S>
void depthwise_nchw_as(const void *x, const void *wt, const void *bias, const void *z, void *y,
		       const struct kconv_dw *p, cudaStream_t stream)
{
	const int target = 2048;   /* outputs a block */
	const size_t smem_max = 40 * 1024;
	int planes = p->n * p->c, th, pl;
	if (p->oh * p->ow >= target) {
		pl = 1;
		th = min((target + p->ow - 1) / p->ow, p->oh);
	} else {
		th = p->oh;
		pl = min(target / (p->oh * p->ow), max(1, kThreads / p->ow));
	}
	int sw = (p->ow - 1) * S + K;
	for (;;) {
		size_t need = ((size_t)pl * ((th - 1) * S + K) * sw + (size_t)pl * K * K) * sizeof(float);
		if (need <= smem_max || (pl == 1 && th == 1))
			break;
		if (pl > 1)
			pl = (pl + 1) / 2;
		else
			th = (th + 1) / 2;
	}
	if (pl > planes)
		pl = planes;
	int tiles = (p->oh + th - 1) / th;
	/* row groups: enough (column, rows) items for the block's threads */
	int rg = kThreads / (pl * p->ow);
	if (rg < 1)
		rg = 1;
	if (rg > th)
		rg = th;
	int64_t blocks = (int64_t)tiles * ((planes + pl - 1) / pl);
	size_t smem = ((size_t)pl * ((th - 1) * S + K) * sw + (size_t)pl * K * K) * sizeof(float);
	depthwise_nchw_kernel<T, K, S><<<(unsigned)blocks, kThreads, smem, stream>>>(
		(const T *)x, (const T *)wt, (const T *)bias, (const T *)z, (T *)y, *p, th, pl, tiles, rg);
}

template <typename T>
void depthwise_nchw_k(const void *x, const void *wt, const void *bias, const void *z, void *y,
		      const struct kconv_dw *p, cudaStream_t stream)
{
	if (p->kh == 3 && p->sh == 1)
		depthwise_nchw_as<T, 3, 1>(x, wt, bias, z, y, p, stream);
	else if (p->kh == 3)
		depthwise_nchw_as<T, 3, 2>(x, wt, bias, z, y, p, stream);
	else if (p->sh == 1)
		depthwise_nchw_as<T, 5, 1>(x, wt, bias, z, y, p, stream);
	else
		depthwise_nchw_as<T, 5, 2>(x, wt, bias, z, y, p, stream);
}

/* [batch][c][inner] -> [batch][inner][cp], channels c..cp-1 zero: one
 * thread per (batch, inner) position, reads coalesced per channel. */
template <typename T>
__global__ void pad_nhwc_kernel(const T *__restrict__ src, T *__restrict__ dst, int64_t batch, int c, int64_t inner,
				int cp)
{
	int64_t n = batch * inner;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
		int64_t b = i / inner, q = i % inner;
		const T *s = src + b * c * inner + q;
		T *d = dst + i * cp;
		for (int k = 0; k < cp; k++)
			d[k] = k < c ? s[(int64_t)k * inner] : from_f<T>(0.f);
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
	constexpr int V = 16 / sizeof(T);
	bool aligned = ((uintptr_t)y | (uintptr_t)z) % 16 == 0;
	if (aligned && e->inner % V == 0 && (!z || e->zfull) && e->n < ((int64_t)1 << 31)) {
		uint32_t nvec = (uint32_t)(e->n / V);
		epilogue_vec_kernel<T, V><<<blocks_for(nvec), kThreads, 0, stream>>>(
			(T *)y, (const T *)bias, (const T *)z, nvec, (uint32_t)e->inner, (uint32_t)e->channels, e->act, e->p0,
			e->p1);
		return;
	}
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

// eight elements stored at once (16 bytes for 2-byte types, two 16-byte stores for float)
template <typename T> struct __align__(16) vec8 {
	T v[8];
};

// one thread per 8 columns of a row of p (the reads of neighbouring threads
// are neighbouring runs of a patch row: whole 32-byte sectors when kw % 8 == 0)
template <typename T>
__global__ void patches_kernel(const T *__restrict__ x, T *__restrict__ p, struct kconv_patch q, int64_t groups)
{
	const int gpr = q.kp / 8, kk = q.kh * q.kw;
	const int64_t ohw = (int64_t)q.oh * q.ow;
	for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += (int64_t)gridDim.x * blockDim.x) {
		int64_t row = g / gpr;
		int col = (int)(g - row * gpr) * 8;
		int64_t b = row / ohw;
		int pos = (int)(row - b * ohw);
		int r = pos / q.ow, s = pos - r * q.ow;
		// x[b, 0, r * kh, s * kw]
		const T *xb = x + (b * q.c * q.h + (int64_t)r * q.kh) * q.w + (int64_t)s * q.kw;
		int ci = col / kk, t = col - ci * kk;
		int i = t / q.kw, j = t - i * q.kw;
		vec8<T> v;
#pragma unroll
		for (int e = 0; e < 8; e++) {
			int cc = col + e;
			if (cc < q.k)
				v.v[e] = xb[((int64_t)ci * q.h + i) * q.w + j];
			else
				v.v[e] = from_f<T>(cc == q.k && q.one ? 1.f : 0.f);
			if (++j == q.kw) {
				j = 0;
				if (++i == q.kh) {
					i = 0;
					ci++;
				}
			}
		}
		*reinterpret_cast<vec8<T> *>(p + row * q.kp + col) = v;
	}
}

template <typename T>
__global__ void patch_weights_kernel(const T *__restrict__ w, const T *__restrict__ bias, T *__restrict__ wp,
				     int64_t m, int k, int kp)
{
	int64_t n = m * kp;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
		int64_t row = i / kp;
		int col = (int)(i - row * kp);
		T v = from_f<T>(0.f);
		if (col < k)
			v = w[row * k + col];
		else if (col == k && bias)
			v = bias[row];
		wp[i] = v;
	}
}

template <typename T> void patches_as(const void *x, void *p, const struct kconv_patch *q, cudaStream_t stream)
{
	int64_t groups = q->n * q->oh * q->ow * (q->kp / 8);
	if (groups <= 0)
		return;
	patches_kernel<T><<<blocks_for(groups), kThreads, 0, stream>>>((const T *)x, (T *)p, *q, groups);
}

template <typename T>
void patch_weights_as(const void *w, const void *bias, void *wp, int64_t m, int k, int kp, cudaStream_t stream)
{
	int64_t n = m * kp;
	if (n <= 0)
		return;
	patch_weights_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>((const T *)w, (const T *)bias, (T *)wp, m, k, kp);
}

}   // namespace

extern "C" void kconv_launch_to_nhwc(int dtype, const void *x, void *xt, int64_t batch, int64_t rows, int64_t cols,
				     cudaStream_t stream)
{
	switch (dtype) {
	case KCONV_F32: transpose_as<float>(x, xt, batch, rows, cols, nullptr, nullptr, nullptr, stream); break;
	case KCONV_F16: transpose_as<__half>(x, xt, batch, rows, cols, nullptr, nullptr, nullptr, stream); break;
	case KCONV_BF16: transpose_as<__nv_bfloat16>(x, xt, batch, rows, cols, nullptr, nullptr, nullptr, stream); break;
	case KCONV_BYTE: transpose_as<uint8_t>(x, xt, batch, rows, cols, nullptr, nullptr, nullptr, stream); break;
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
	case KCONV_BYTE: transpose_as<uint8_t>(yt, y, batch, rows, cols, nullptr, nullptr, nullptr, stream); break;
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

extern "C" void kconv_launch_epilogue_cl(int dtype, void *y, const void *bias, const void *z,
					 const struct kconv_epilogue *e, cudaStream_t stream)
{
	switch (dtype) {
	case KCONV_F32: epilogue_cl_as<float>(y, bias, z, e, stream); break;
	case KCONV_F16: epilogue_cl_as<__half>(y, bias, z, e, stream); break;
	case KCONV_BF16: epilogue_cl_as<__nv_bfloat16>(y, bias, z, e, stream); break;
	default: break;
	}
}

extern "C" void kconv_launch_depthwise(int dtype, const void *x, const void *wt, const void *bias, const void *z,
				       void *y, const struct kconv_dw *p, cudaStream_t stream)
{
	switch (dtype) {
	case KCONV_F32: depthwise_as<float>(x, wt, bias, z, y, p, stream); break;
	case KCONV_F16: depthwise_as<__half>(x, wt, bias, z, y, p, stream); break;
	case KCONV_BF16: depthwise_as<__nv_bfloat16>(x, wt, bias, z, y, p, stream); break;
	default: break;
	}
}

extern "C" int kconv_depthwise_nchw_ok(const struct kconv_dw *p)
{
	int64_t outs = (int64_t)p->n * p->c * p->oh * p->ow, ins = (int64_t)p->n * p->c * p->h * p->w;
	return (p->kh == 3 || p->kh == 5) && p->kw == p->kh && (p->sh == 1 || p->sh == 2) && p->sw == p->sh &&
	       p->dh == 1 && p->dw == 1 && p->ph >= 0 && p->pw >= 0 && p->ph < p->kh && p->pw < p->kw && p->oh > 0 &&
	       p->ow > 0 && p->ow <= 512 && outs < ((int64_t)1 << 31) && ins < ((int64_t)1 << 31);
}

extern "C" void kconv_launch_depthwise_nchw(int dtype, const void *x, const void *wt, const void *bias, const void *z,
					    void *y, const struct kconv_dw *p, cudaStream_t stream)
{
	switch (dtype) {
	case KCONV_F32: depthwise_nchw_k<float>(x, wt, bias, z, y, p, stream); break;
	case KCONV_F16: depthwise_nchw_k<__half>(x, wt, bias, z, y, p, stream); break;
	case KCONV_BF16: depthwise_nchw_k<__nv_bfloat16>(x, wt, bias, z, y, p, stream); break;
	default: break;
	}
}

extern "C" void kconv_launch_pad_nhwc(int dtype, const void *src, void *dst, int64_t batch, int c, int64_t inner, int cp,
				      cudaStream_t stream)
{
	int64_t n = batch * inner;
	if (n <= 0)
		return;
	switch (dtype) {
	case KCONV_F32: pad_nhwc_kernel<float><<<blocks_for(n), kThreads, 0, stream>>>((const float *)src, (float *)dst, batch, c, inner, cp); break;
	case KCONV_F16: pad_nhwc_kernel<__half><<<blocks_for(n), kThreads, 0, stream>>>((const __half *)src, (__half *)dst, batch, c, inner, cp); break;
	case KCONV_BF16: pad_nhwc_kernel<__nv_bfloat16><<<blocks_for(n), kThreads, 0, stream>>>((const __nv_bfloat16 *)src, (__nv_bfloat16 *)dst, batch, c, inner, cp); break;
	default: break;
	}
}

extern "C" void kconv_launch_patches(int dtype, const void *x, void *p, const struct kconv_patch *q, cudaStream_t stream)
{
	switch (dtype) {
	case KCONV_F32: patches_as<float>(x, p, q, stream); break;
	case KCONV_F16: patches_as<__half>(x, p, q, stream); break;
	case KCONV_BF16: patches_as<__nv_bfloat16>(x, p, q, stream); break;
	default: break;
	}
}

extern "C" void kconv_launch_patch_weights(int dtype, const void *w, const void *bias, void *wp, int64_t m, int k, int kp,
					   cudaStream_t stream)
{
	switch (dtype) {
	case KCONV_F32: patch_weights_as<float>(w, bias, wp, m, k, kp, stream); break;
	case KCONV_F16: patch_weights_as<__half>(w, bias, wp, m, k, kp, stream); break;
	case KCONV_BF16: patch_weights_as<__nv_bfloat16>(w, bias, wp, m, k, kp, stream); break;
	default: break;
	}
}
