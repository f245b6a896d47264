/*
 * k_qepi.h - the epilogue of a quantized island on the GPU, written once for
 * every kernel that ends one (the int8/FP8 implicit-GEMM convolution and
 * GEMM of k_qconv.cu, the cuBLASLt paths of k_qgemm.cu) and for the host
 * (their tests compute the expected values with the same functions).
 *
 * An island DQ(x) -> Conv/Gemm(DQ(W)) [+ bias] [+ DQ(z)] [activation] [Q]
 * becomes, per output element of channel ch with integer accumulator acc:
 *
 *   v = acc * alpha[ch] + beta[ch]
 *   v = round_sat_int8(v) * mid                       (only when mid > 0)
 *   v = v + zscale * z                                (z optional)
 *   v = act(v)
 *   y = quantized ? saturate(round_half_even(v)) : v  (in y's type)
 *
 * with alpha[ch] = S_x * S_w[ch] / S_y, beta[ch] = bias[ch] / S_y and
 * zscale = S_z / S_y when the island ends in a Q of scale S_y (1/S_y folded
 * in by the planner; Clip's bounds are divided by S_y too), and S_y = 1 when
 * it ends in float. Relu and LeakyRelu commute with a positive scale.
 *
 * Element types are ONNX's numbers (KQ_* of k_quant_math.h); activation
 * kinds are KACT_* of kernels/fused.h (repeated here as KQE_ACT_*, the
 * same numbers, so the .cu files need no ir.h).
 */
#ifndef OGSH_KERNELS_CUDA_K_QEPI_H
#define OGSH_KERNELS_CUDA_K_QEPI_H

#include "kernels/cuda/k_quant_math.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

/* activations an island's epilogue applies (the numbers of KACT_*) */
enum { KQE_ACT_NONE = 0, KQE_ACT_RELU = 1, KQE_ACT_CLIP = 2, KQE_ACT_LEAKY = 3 };

/* The epilogue's parameters that are the same for every element. */
struct kqe_params {
	int ydt;            /* KQ_INT8, KQ_UINT8 (zero point yzp), KQ_F8E4M3FN: quantized; KQ_FLOAT, KQ_FLOAT16, KQ_BFLOAT16 */
	int act;            /* KQE_ACT_* */
	float act0, act1;   /* Clip: min, max (already divided by S_y); LeakyRelu: alpha */
	float yzp;          /* the output zero point (uint8); 0 otherwise */
	int zdt;            /* residual type: KQ_INT8, KQ_F8E4M3FN, KQ_FLOAT, KQ_FLOAT16, KQ_BFLOAT16; 0 none */
	float zscale;       /* v += zscale * z */
	float mid;          /* > 0: the product is first rounded to int8 (alpha and beta in units of
			     * that tensor's scale S_a) and then taken to S_y's units: mid = S_a / S_y
			     * (onnxruntime's Conv -> Q -> DQ -> Add(DQ(z)) -> Q); 0: no such step */
};

KQ_FN float kqe_act(const struct kqe_params *e, float v)
{
	switch (e->act) {
	case KQE_ACT_RELU:
		return v > 0.0f ? v : 0.0f;   /* NaN stays NaN through neither branch: gives 0, as fmaxf would */
	case KQE_ACT_CLIP:
		v = v < e->act0 ? e->act0 : v;
		return v > e->act1 ? e->act1 : v;
	case KQE_ACT_LEAKY:
		return v >= 0.0f ? v : v * e->act0;
	default:
		return v;
	}
}

/* Element i of a tensor of type dt, as a float (int8, uint8, e4m3fn, float, float16, bfloat16). */
KQ_FN float kqe_load(const void *p, long long i, int dt)
{
	switch (dt) {
	case KQ_INT8:
		return (float)((const int8_t *)p)[i];
	case KQ_UINT8:
		return (float)((const uint8_t *)p)[i];
	case KQ_F8E4M3FN: {
		struct kq_f8fmt f;
		kq_f8_format(KQ_F8E4M3FN, &f);
		return kq_f8_decode(&f, ((const uint8_t *)p)[i]);
	}
	case KQ_FLOAT16: {
		uint16_t h = ((const uint16_t *)p)[i];
#if defined(__CUDA_ARCH__)
		return __half2float(__ushort_as_half(h));
#else
		/* host: exact conversion of a binary16 code */
		uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff;
		if (e == 0)
			return (s ? -1.0f : 1.0f) * (float)m * kq_pow2(-24);
		if (e == 31)
			return kq_u2f(s | 0x7f800000u | (m << 13));
		return kq_u2f(s | ((e + 112) << 23) | (m << 13));
#endif
	}
	case KQ_BFLOAT16:
		return kq_u2f((uint32_t)((const uint16_t *)p)[i] << 16);
	default:
		return ((const float *)p)[i];
	}
}

/* The final value v (after the activation) stored as element i of y. */
KQ_FN void kqe_store(const struct kqe_params *e, void *y, long long i, float v)
{
	switch (e->ydt) {
	case KQ_INT8:
		((int8_t *)y)[i] = (int8_t)kq_round_sat(v, 0.0f, -128.0f, 127.0f);
		break;
	case KQ_UINT8:
		((uint8_t *)y)[i] = (uint8_t)kq_round_sat(v, e->yzp, 0.0f, 255.0f);
		break;
	case KQ_F8E4M3FN: {
		struct kq_f8fmt f;
		kq_f8_format(KQ_F8E4M3FN, &f);
		((uint8_t *)y)[i] = (uint8_t)kq_f8_encode(&f, v, true);
		break;
	}
#if defined(__CUDA_ARCH__)
	case KQ_FLOAT16:
		((__half *)y)[i] = __float2half_rn(v);
		break;
	case KQ_BFLOAT16:
		((__nv_bfloat16 *)y)[i] = __float2bfloat16_rn(v);
		break;
#endif
	default:
		((float *)y)[i] = v;
		break;
	}
}

/* The whole epilogue of one element: acc the integer (or FP8 float)
 * accumulator, a and b its channel's alpha and beta, z the residual's
 * element (0 when there is none). */
KQ_FN float kqe_value(const struct kqe_params *e, float acc, float a, float b, float z)
{
#if defined(__CUDA_ARCH__)
	/* nvcc would contract these into fused multiply-adds (one rounding)
	 * where the host rounds the product and the sum: keep them apart */
	float v = __fadd_rn(__fmul_rn(acc, a), b);
	if (e->mid > 0.0f)
		v = __fmul_rn((float)kq_round_sat(v, 0.0f, -128.0f, 127.0f), e->mid);
	if (e->zdt)
		v = __fadd_rn(v, __fmul_rn(e->zscale, z));
#else
	float v = acc * a + b;
	if (e->mid > 0.0f)
		v = (float)kq_round_sat(v, 0.0f, -128.0f, 127.0f) * e->mid;
	if (e->zdt)
		v += e->zscale * z;
#endif
	return kqe_act(e, v);
}

#endif
