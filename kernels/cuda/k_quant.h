/*
 * k_quant.h - launchers of the quantization family (k_quant.cu), called by
 * the entries in k_quant.c. Plain C types only.
 *
 * Element types are ONNX's numbers (KQ_* of k_quant_math.h). Every launcher
 * returns the cudaError_t of its launch (cudaSuccess when there was
 * nothing to do); the entries check it with cuda_check_launch.
 */
#ifndef OGSH_KERNELS_CUDA_K_QUANT_H
#define OGSH_KERNELS_CUDA_K_QUANT_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * One QuantizeLinear or DequantizeLinear over n elements of x. The scale
 * (and zero point) of element i is at
 *   mode 0 (one value):  0
 *   mode 1 (per axis):   (i / inner) % adim
 *   mode 2 (blocked):    ((i / (adim * inner)) * sdim + ((i / inner) % adim) / bs) * inner + i % inner
 * where adim is x's size on the axis, inner the product of the dims after
 * it, bs the block size and sdim the scale's size on the axis.
 */
struct kq_launch {
	int64_t n;
	int xdt;        /* QuantizeLinear: float, float16, bfloat16; DequantizeLinear: the quantized type */
	int sdt;        /* the scale: float, float16, bfloat16 */
	int zdt;        /* the zero point (the quantized type), 0 when there is none */
	int ydt;        /* QuantizeLinear: the quantized type; DequantizeLinear: float, float16, bfloat16 */
	int cdt;        /* QuantizeLinear: the float type x, the scale and x / scale are rounded to */
	int saturate;   /* QuantizeLinear to float8: out-of-range values saturate (else inf or NaN) */
	int mode;
	int64_t inner, adim, bs, sdim;
};

/* y = saturate(round(x / scale) + zero_point): to int8, uint8, int16,
 * uint16, int4, uint4 (two a byte, low nibble first; the high nibble of an
 * odd count's last byte is 0) or one of the four float8 types. */
cudaError_t kq_quantize(const struct kq_launch *p, const void *x, const void *scale, const void *zp, void *y,
			cudaStream_t st);

/* y = (x - zero_point) * scale from int8, uint8, int16, uint16, int32,
 * int4, uint4, the four float8 types or float4 e2m1. */
cudaError_t kq_dequantize(const struct kq_launch *p, const void *x, const void *scale, const void *zp, void *y,
			  cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
