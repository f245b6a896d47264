// k_qgemm.cu - CUDA kernels of the quantized GEMMs (host parts in
// k_qgemm.c, the interface in k_qgemm.h):
//
// - w4_gemm_kernel: y = x * dq(W) for INT4 weights packed by kqg_w4_pack,
//   m <= 16 rows, the weights dequantized in registers;
// - w4_dequant_kernel: dq(W)^T into a [N][K] workspace (larger m then runs
//   as a cuBLASLt GEMM);
// - epi_kernel: k_qepi.h's epilogue over an int32 or float32 product.
//
// INT4 GEMM. A block of W4_THREADS threads computes W4_NB output columns
// for all m rows. Column n's weights are Kp/2 contiguous bytes ([N][Kp/2]),
// read 16 bytes (32 values of k, a "chunk") at a time: thread t takes
// chunks t, t + W4_THREADS, ... of each of the block's columns, so a warp
// reads 512 contiguous bytes of a column per load, and each x value it
// loads serves W4_NB columns. A chunk is two halves of 16 values; since
// bs >= 16 and bs divides K, a half lies in one scale block.
//
// Dequantization in float32 without conversions: a nibble u (0..15) in
// the low mantissa bits of 2^23 is the float 2^23 + u, so
//   lo nibble:  as_float((b & 0x0f) | 0x4b000000) - (2^23 + z)         = u - z
//   hi nibble:  as_float((b & 0xf0) | 0x4b000000) * 1/16 - (2^19 + z)  = u - z
// both exact (one FADD or FFMA each). For m <= 4 the products x * (u - z)
// of a half are summed first and scaled once (acc += s * sum); for larger
// m the value is scaled once and used by every row (acc += x * (u - z) s).
// Accumulation is float32; the block's threads are reduced through warp
// shuffles and shared memory, then bias is added and y rounded once.
#include "kernels/cuda/k_qgemm.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

constexpr int W4_THREADS = 128;
constexpr int W4_WARPS = W4_THREADS / 32;
constexpr int W4_NB = 4;        // output columns per block
constexpr int EPI_THREADS = 256;
constexpr int64_t MAX_BLOCKS = 132 * 32;

// ---- element access ----

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// 8 consecutive values at p (16-byte aligned) as floats
__device__ __forceinline__ void load8(const __half *p, float *f)
{
	uint4 v = __ldg(reinterpret_cast<const uint4 *>(p));
	uint32_t u[4] = { v.x, v.y, v.z, v.w };
#pragma unroll
	for (int i = 0; i < 4; i++) {
		__half2 h = *reinterpret_cast<const __half2 *>(&u[i]);
		float2 t = __half22float2(h);
		f[2 * i] = t.x;
		f[2 * i + 1] = t.y;
	}
}

__device__ __forceinline__ void load8(const __nv_bfloat16 *p, float *f)
{
	uint4 v = __ldg(reinterpret_cast<const uint4 *>(p));
	uint32_t u[4] = { v.x, v.y, v.z, v.w };
#pragma unroll
	for (int i = 0; i < 4; i++) {
		f[2 * i] = __uint_as_float(u[i] << 16);
		f[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
	}
}

__device__ __forceinline__ void load8(const float *p, float *f)
{
	float4 a = __ldg(reinterpret_cast<const float4 *>(p));
	float4 b = __ldg(reinterpret_cast<const float4 *>(p + 4));
	f[0] = a.x; f[1] = a.y; f[2] = a.z; f[3] = a.w;
	f[4] = b.x; f[5] = b.y; f[6] = b.z; f[7] = b.w;
}

// the 8 values u - z of one 32-bit word of nibbles (k order: byte 0 low,
// byte 0 high, byte 1 low, ...); clo = 2^23 + z, chi = 2^19 + z
__device__ __forceinline__ void dequant8(uint32_t w, float clo, float chi, float *d)
{
#pragma unroll
	for (int b = 0; b < 4; b++) {
		uint32_t t = w >> (8 * b);
		d[2 * b] = __uint_as_float((t & 0x0fu) | 0x4b000000u) - clo;
		d[2 * b + 1] = fmaf(__uint_as_float((t & 0xf0u) | 0x4b000000u), 0.0625f, -chi);
	}
}

__device__ __forceinline__ uint32_t word_of(const uint4 &v, int i)
{
	return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// ---- INT4 GEMM ----

struct w4_args {
	const uint8_t *wq;      // [N][kp/2]
	const void *sc;         // [N][nblk] half or float
	const uint8_t *zq;      // [N][nblk] or NULL
	float zc;               // the zero point when zq is NULL
	int m, k, n, kp, nblk, lbs;
};

// MT: rows computed (m <= MT; rows past m repeat row m - 1 and are not
// stored); DIRECT: scale each value (large MT) rather than each half's sum
template <typename XT, typename ST, int MT, bool DIRECT>
__global__ void __launch_bounds__(W4_THREADS) w4_gemm_kernel(w4_args a, const XT *__restrict__ x,
							     const XT *__restrict__ bias, XT *__restrict__ y)
{
	__shared__ float red[W4_WARPS][MT][W4_NB];
	const ST *sc = static_cast<const ST *>(a.sc);
	const int n0 = blockIdx.x * W4_NB;
	const uint8_t *wcol[W4_NB];
	int64_t mcol[W4_NB];   // the column's first scale / zero index
#pragma unroll
	for (int c = 0; c < W4_NB; c++) {
		int n = min(n0 + c, a.n - 1);
		wcol[c] = a.wq + (int64_t)n * (a.kp / 2);
		mcol[c] = (int64_t)n * a.nblk;
	}
	const XT *xrow[MT];
#pragma unroll
	for (int r = 0; r < MT; r++)
		xrow[r] = x + (int64_t)min(r, a.m - 1) * a.k;

	float acc[MT][W4_NB];
#pragma unroll
	for (int r = 0; r < MT; r++)
#pragma unroll
		for (int c = 0; c < W4_NB; c++)
			acc[r][c] = 0.0f;

	const int nchunks = a.kp / 32;
	for (int ch = threadIdx.x; ch < nchunks; ch += W4_THREADS) {
		const int k0 = ch * 32;
		uint4 wv[W4_NB];
#pragma unroll
		for (int c = 0; c < W4_NB; c++)
			wv[c] = __ldcs(reinterpret_cast<const uint4 *>(wcol[c] + k0 / 2));
		float s[W4_NB] = {}, clo[W4_NB] = {}, chi[W4_NB] = {};
		int blk = -1;
#pragma unroll
		for (int h = 0; h < 2; h++) {
			const int kk = k0 + 16 * h;
			if (kk >= a.k)
				break;   // the padding of the last chunk
			const int b = kk >> a.lbs;
			if (b != blk) {
				blk = b;
#pragma unroll
				for (int c = 0; c < W4_NB; c++) {
					s[c] = to_f(__ldg(&sc[mcol[c] + b]));
					float z = a.zq ? (float)__ldg(&a.zq[mcol[c] + b]) : a.zc;
					clo[c] = 8388608.0f + z;
					chi[c] = 524288.0f + z;
				}
			}
			float p[MT][W4_NB];
			if constexpr (!DIRECT) {
#pragma unroll
				for (int r = 0; r < MT; r++)
#pragma unroll
					for (int c = 0; c < W4_NB; c++)
						p[r][c] = 0.0f;
			}
#pragma unroll
			for (int wi = 0; wi < 2; wi++) {
				const int kw = kk + 8 * wi;
				float d[W4_NB][8];
#pragma unroll
				for (int c = 0; c < W4_NB; c++) {
					dequant8(word_of(wv[c], 2 * h + wi), clo[c], chi[c], d[c]);
					if constexpr (DIRECT) {
#pragma unroll
						for (int j = 0; j < 8; j++)
							d[c][j] *= s[c];
					}
				}
#pragma unroll
				for (int r = 0; r < MT; r++) {
					float xf[8];
					load8(xrow[r] + kw, xf);
#pragma unroll
					for (int c = 0; c < W4_NB; c++)
#pragma unroll
						for (int j = 0; j < 8; j++) {
							if constexpr (DIRECT)
								acc[r][c] = fmaf(xf[j], d[c][j], acc[r][c]);
							else
								p[r][c] = fmaf(xf[j], d[c][j], p[r][c]);
						}
				}
			}
			if constexpr (!DIRECT) {
#pragma unroll
				for (int r = 0; r < MT; r++)
#pragma unroll
					for (int c = 0; c < W4_NB; c++)
						acc[r][c] = fmaf(p[r][c], s[c], acc[r][c]);
			}
		}
	}

	// the block's sum: within each warp, then across warps
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
	for (int r = 0; r < MT; r++)
#pragma unroll
		for (int c = 0; c < W4_NB; c++) {
			float v = acc[r][c];
#pragma unroll
			for (int o = 16; o > 0; o >>= 1)
				v += __shfl_xor_sync(0xffffffffu, v, o);
			if (lane == 0)
				red[warp][r][c] = v;
		}
	__syncthreads();
	if (threadIdx.x < MT * W4_NB) {
		const int r = threadIdx.x / W4_NB, c = threadIdx.x % W4_NB, n = n0 + c;
		if (r < a.m && n < a.n) {
			float v = 0.0f;
#pragma unroll
			for (int w = 0; w < W4_WARPS; w++)
				v += red[w][r][c];
			if (bias)
				v += to_f(bias[n]);
			y[(int64_t)r * a.n + n] = from_f<XT>(v);
		}
	}
}

template <typename XT, typename ST, int MT>
cudaError_t w4_launch_m(const w4_args &a, const void *x, const void *bias, void *y, cudaStream_t st)
{
	unsigned blocks = (unsigned)((a.n + W4_NB - 1) / W4_NB);
	w4_gemm_kernel<XT, ST, MT, (MT >= 8)><<<blocks, W4_THREADS, 0, st>>>(
		a, static_cast<const XT *>(x), static_cast<const XT *>(bias), static_cast<XT *>(y));
	return cudaGetLastError();
}

template <typename XT, typename ST>
cudaError_t w4_launch(const w4_args &a, const void *x, const void *bias, void *y, cudaStream_t st)
{
	if (a.m <= 1)
		return w4_launch_m<XT, ST, 1>(a, x, bias, y, st);
	if (a.m <= 2)
		return w4_launch_m<XT, ST, 2>(a, x, bias, y, st);
	if (a.m <= 4)
		return w4_launch_m<XT, ST, 4>(a, x, bias, y, st);
	if (a.m <= 8)
		return w4_launch_m<XT, ST, 8>(a, x, bias, y, st);
	return w4_launch_m<XT, ST, 16>(a, x, bias, y, st);
}

template <typename XT>
cudaError_t w4_launch_x(int sdt, const w4_args &a, const void *x, const void *bias, void *y, cudaStream_t st)
{
	if (sdt == KQ_FLOAT16)
		return w4_launch<XT, __half>(a, x, bias, y, st);
	return w4_launch<XT, float>(a, x, bias, y, st);
}

// ---- INT4 dequantization into [N][K] ----

template <typename YT, typename ST>
__global__ void w4_dequant_kernel(w4_args a, YT *__restrict__ w)
{
	const ST *sc = static_cast<const ST *>(a.sc);
	const int64_t wpc = a.kp / 8;   // 32-bit words per column
	const int64_t total = (int64_t)a.n * wpc;
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
	     t += (int64_t)gridDim.x * blockDim.x) {
		const int64_t n = t / wpc;
		const int kw = (int)(t - n * wpc) * 8;
		if (kw >= a.k)
			continue;   // padding (K is a multiple of 16, so a word is all in or all out)
		const uint32_t word = __ldg(reinterpret_cast<const uint32_t *>(a.wq + n * (a.kp / 2)) + kw / 8);
		const int64_t mi = n * a.nblk + (kw >> a.lbs);
		const float s = to_f(__ldg(&sc[mi]));
		const float z = a.zq ? (float)__ldg(&a.zq[mi]) : a.zc;
		float d[8];
		dequant8(word, 8388608.0f + z, 524288.0f + z, d);
		alignas(16) YT out[8];
#pragma unroll
		for (int j = 0; j < 8; j++)
			out[j] = from_f<YT>(d[j] * s);
		YT *dst = w + n * a.k + kw;
		if (sizeof(YT) == 2) {
			*reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(out);
		} else {
			reinterpret_cast<uint4 *>(dst)[0] = reinterpret_cast<const uint4 *>(out)[0];
			reinterpret_cast<uint4 *>(dst)[1] = reinterpret_cast<const uint4 *>(out)[1];
		}
	}
}

template <typename YT>
cudaError_t w4_dequant_y(int sdt, const w4_args &a, void *w, cudaStream_t st)
{
	int64_t total = (int64_t)a.n * (a.kp / 8);
	int64_t b = (total + 255) / 256;
	unsigned blocks = (unsigned)(b < MAX_BLOCKS ? b : MAX_BLOCKS);
	if (sdt == KQ_FLOAT16)
		w4_dequant_kernel<YT, __half><<<blocks, 256, 0, st>>>(a, static_cast<YT *>(w));
	else
		w4_dequant_kernel<YT, float><<<blocks, 256, 0, st>>>(a, static_cast<YT *>(w));
	return cudaGetLastError();
}

bool aligned16(const void *p)
{
	return ((uintptr_t)p & 15u) == 0;
}

bool w4_args_of(const kqg_w4_layout *l, const void *packed, int m, w4_args *a)
{
	if (!l || !packed || !aligned16(packed) || l->k <= 0 || l->n <= 0 || l->kp % 32 || l->bs < 16 ||
	    (1 << l->lbs) != l->bs || l->k > INT32_MAX / 2 || l->n > INT32_MAX || l->kp > INT32_MAX ||
	    l->nblk > INT32_MAX || (l->sdt != KQ_FLOAT16 && l->sdt != KQ_FLOAT))
		return false;
	const uint8_t *base = static_cast<const uint8_t *>(packed);
	a->wq = base + l->w_off;
	a->sc = base + l->s_off;
	a->zq = l->has_zp ? base + l->z_off : nullptr;
	a->zc = (float)l->zp_const;
	a->m = m;
	a->k = (int)l->k;
	a->n = (int)l->n;
	a->kp = (int)l->kp;
	a->nblk = (int)l->nblk;
	a->lbs = l->lbs;
	return true;
}

// ---- the epilogue ----

template <typename AT>
__global__ void epi_kernel(const AT *__restrict__ acc, int64_t total, int64_t n, kqe_params e,
			   const float *__restrict__ alpha, const float *__restrict__ beta, const void *z, void *y)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
	     i += (int64_t)gridDim.x * blockDim.x) {
		const int64_t ch = i % n;
		const float zv = e.zdt ? kqe_load(z, i, e.zdt) : 0.0f;
		const float v = kqe_value(&e, (float)acc[i], alpha[ch], beta ? beta[ch] : 0.0f, zv);
		kqe_store(&e, y, i, v);
	}
}

// four consecutive elements of one row per thread (n % 4 == 0, acc and y
// 16-byte aligned): one 16-byte load of acc, one store of y's 4 elements
template <typename AT>
__global__ void epi4_kernel(const AT *__restrict__ acc, int64_t total4, int64_t n, kqe_params e,
			    const float *__restrict__ alpha, const float *__restrict__ beta, const void *z, void *y,
			    int ysize)
{
	for (int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; q < total4;
	     q += (int64_t)gridDim.x * blockDim.x) {
		const int64_t i = q * 4, ch = i % n;
		const uint4 raw = __ldcs(reinterpret_cast<const uint4 *>(acc) + q);
		const AT *av = reinterpret_cast<const AT *>(&raw);
		uint4 out = make_uint4(0, 0, 0, 0);
#pragma unroll
		for (int j = 0; j < 4; j++) {
			const float zv = e.zdt ? kqe_load(z, i + j, e.zdt) : 0.0f;
			const float v = kqe_value(&e, (float)av[j], alpha[ch + j], beta ? beta[ch + j] : 0.0f, zv);
			kqe_store(&e, &out, j, v);
		}
		if (ysize == 1)
			reinterpret_cast<uint32_t *>(y)[q] = out.x;
		else if (ysize == 2)
			reinterpret_cast<uint2 *>(y)[q] = make_uint2(out.x, out.y);
		else
			reinterpret_cast<uint4 *>(y)[q] = out;
	}
}

int epi_ysize(int ydt)
{
	switch (ydt) {
	case KQ_INT8: case KQ_UINT8: case KQ_F8E4M3FN: return 1;
	case KQ_FLOAT16: case KQ_BFLOAT16: return 2;
	case KQ_FLOAT: return 4;
	default: return 0;
	}
}

template <typename AT>
cudaError_t epi_launch(const void *acc, int64_t m, int64_t n, const kqe_params &e, const float *alpha,
		       const float *beta, const void *z, void *y, cudaStream_t st)
{
	const int ys = epi_ysize(e.ydt);
	const int64_t total = m * n;
	const AT *a = static_cast<const AT *>(acc);
	if (n % 4 == 0 && aligned16(acc) && aligned16(y)) {
		int64_t b = (total / 4 + EPI_THREADS - 1) / EPI_THREADS;
		unsigned blocks = (unsigned)(b < MAX_BLOCKS ? b : MAX_BLOCKS);
		epi4_kernel<AT><<<blocks, EPI_THREADS, 0, st>>>(a, total / 4, n, e, alpha, beta, z, y, ys);
	} else {
		int64_t b = (total + EPI_THREADS - 1) / EPI_THREADS;
		unsigned blocks = (unsigned)(b < MAX_BLOCKS ? b : MAX_BLOCKS);
		epi_kernel<AT><<<blocks, EPI_THREADS, 0, st>>>(a, total, n, e, alpha, beta, z, y);
	}
	return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t kqg_w4_gemm(const struct kqg_w4_layout *l, const void *packed, int xdt, int m,
				   const void *x, const void *bias, void *y, cudaStream_t st)
{
	w4_args a;
	if (m < 1 || m > KQG_W4_MAX_M || !w4_args_of(l, packed, m, &a) || !aligned16(x) || !aligned16(y) ||
	    l->k % 16)
		return cudaErrorInvalidValue;
	switch (xdt) {
	case KQ_FLOAT16: return w4_launch_x<__half>(l->sdt, a, x, bias, y, st);
	case KQ_BFLOAT16: return w4_launch_x<__nv_bfloat16>(l->sdt, a, x, bias, y, st);
	case KQ_FLOAT: return w4_launch_x<float>(l->sdt, a, x, bias, y, st);
	default: return cudaErrorInvalidValue;
	}
}

extern "C" cudaError_t kqg_w4_dequant(const struct kqg_w4_layout *l, const void *packed, int ydt, void *w,
				      cudaStream_t st)
{
	w4_args a;
	if (!w4_args_of(l, packed, 1, &a) || !aligned16(w) || l->k % 16)
		return cudaErrorInvalidValue;
	switch (ydt) {
	case KQ_FLOAT16: return w4_dequant_y<__half>(l->sdt, a, w, st);
	case KQ_BFLOAT16: return w4_dequant_y<__nv_bfloat16>(l->sdt, a, w, st);
	case KQ_FLOAT: return w4_dequant_y<float>(l->sdt, a, w, st);
	default: return cudaErrorInvalidValue;
	}
}

extern "C" cudaError_t kqg_epilogue(int accdt, const void *acc, int64_t m, int64_t n, const struct kqe_params *e,
				    const float *alpha, const float *beta, const void *z, void *y, cudaStream_t st)
{
	if (m < 0 || n <= 0 || !e || !alpha || !epi_ysize(e->ydt) || (e->zdt && !z))
		return cudaErrorInvalidValue;
	if (m == 0)
		return cudaSuccess;
	if (accdt == KQ_INT32)
		return epi_launch<int32_t>(acc, m, n, *e, alpha, beta, z, y, st);
	if (accdt == KQ_FLOAT)
		return epi_launch<float>(acc, m, n, *e, alpha, beta, z, y, st);
	return cudaErrorInvalidValue;
}
