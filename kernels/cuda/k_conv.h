/*
 * k_conv.h - launchers of the conv family's own CUDA kernels (k_conv.cu),
 * used by k_conv.c around the cuDNN calls. Plain C types only.
 */
#ifndef OGSH_KERNELS_CUDA_K_CONV_H
#define OGSH_KERNELS_CUDA_K_CONV_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types, numbered as ONNX's TensorProto.DataType. */
enum { KCONV_F32 = 1, KCONV_F16 = 10, KCONV_BF16 = 16, KCONV_BYTE = 2 /* any 1-byte type: transposes only */ };

/* The activations of ai.ogsh FusedConv (kernels/cpu/k_fused.c). */
enum { KCONV_ACT_NONE, KCONV_ACT_RELU, KCONV_ACT_CLIP, KCONV_ACT_LEAKY, KCONV_ACT_SIGMOID, KCONV_ACT_HSIGMOID,
       KCONV_ACT_HSWISH, KCONV_ACT_TANH, KCONV_ACT_GELU_ERF, KCONV_ACT_GELU_TANH };

#define KCONV_MAX_SPATIAL 3
#define KCONV_MAX_RANK 8

/*
 * A window copy between two [outer, spatial...] tensors: dst position p
 * (per spatial axis) takes src position p - lo, or `fill` where that is
 * outside src. Pads (lo >= 0, dst larger) and crops (lo < 0).
 */
struct kconv_window {
	int nd;                                  /* spatial axes, 1..KCONV_MAX_SPATIAL */
	int64_t outer;                           /* N * C */
	int64_t src[KCONV_MAX_SPATIAL], dst[KCONV_MAX_SPATIAL], lo[KCONV_MAX_SPATIAL];
};
void kconv_launch_window(int dtype, const void *src, void *dst, const struct kconv_window *w, float fill,
			 cudaStream_t stream);

/*
 * y = act(y + bias[c] + z) in place, computed in float and rounded once;
 * y is [N, channels, inner]. bias (channels elements) and z may be NULL.
 * z is y's size (zfull) or broadcast to y's dims with zstrides (0 on
 * broadcast axes).
 */
struct kconv_epilogue {
	int64_t n, channels, inner;
	int act;
	float p0, p1;                            /* Clip: min, max; LeakyRelu: alpha; HardSigmoid: alpha, beta */
	int zfull;
	int rank;                                /* y's rank, for a broadcast z */
	int64_t dims[KCONV_MAX_RANK], zstrides[KCONV_MAX_RANK];
};
void kconv_launch_epilogue(int dtype, void *y, const void *bias, const void *z, const struct kconv_epilogue *e,
		    cudaStream_t stream);

/*
 * Layout changes for float16/bfloat16 convolutions run in NHWC (cuDNN's
 * tensor-core kernels want channels last): a batched transpose of
 * [batch][rows][cols] into [batch][cols][rows] through 32x32 shared-memory
 * tiles. kconv_launch_to_nhwc: X [N, C, HW] -> [N, HW, C] (rows C, cols HW).
 * kconv_launch_from_nhwc: the conv's result [N, HW, M] -> Y [N, M, HW] with
 * the epilogue applied on the way (bias[c], a full-size z in Y's layout,
 * the activation; e->channels = M, e->inner = HW; e->zfull or no z).
 * Both take KCONV_BYTE (int8, uint8, float8 bytes moved as they are) with
 * no epilogue (e->act none, no bias, no z).
 */
void kconv_launch_to_nhwc(int dtype, const void *x, void *xt, int64_t batch, int64_t rows, int64_t cols,
			  cudaStream_t stream);
void kconv_launch_from_nhwc(int dtype, const void *yt, void *y, const void *bias, const void *z,
			    const struct kconv_epilogue *e, int64_t batch, cudaStream_t stream);

/* src [batch][c][inner] -> dst [batch][inner][cp] with channels c..cp-1
 * zero (cp >= c): a conv input or weight of few channels made channels-last
 * and padded for the tensor-core kernels. */
void kconv_launch_pad_nhwc(int dtype, const void *src, void *dst, int64_t batch, int c, int64_t inner, int cp,
			   cudaStream_t stream);

/* kconv_launch_epilogue on a channels-last y (e->inner 1, e->channels the
 * fastest axis): 8 channels per thread where channels % 8 == 0. */
void kconv_launch_epilogue_cl(int dtype, void *y, const void *bias, const void *z, const struct kconv_epilogue *e,
			      cudaStream_t stream);

/*
 * A depthwise 2-D convolution (group = C = M) on channels-last x [n, h, w, c]
 * into y [n, oh, ow, c], with wt the weights as [kh*kw][c], accumulated in
 * float with the epilogue applied (bias and z may be NULL; z is y's size).
 * n*oh*ow*c < 2^31.
 */
struct kconv_dw {
	int n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
	int act;
	float p0, p1;
};
void kconv_launch_depthwise(int dtype, const void *x, const void *wt, const void *bias, const void *z, void *y,
			    const struct kconv_dw *p, cudaStream_t stream);

/*
 * The same on NCHW x [n, c, h, w] into y [n, c, oh, ow], with wt the weights
 * as ONNX has them ([c, 1, kh, kw]), through shared-memory tiles. Only
 * where kconv_depthwise_nchw_ok: a square 3x3 or 5x5 window, stride 1 or 2
 * on both axes, no dilation, pads under the window, fewer than 2^31
 * elements in x and in y.
 */
int kconv_depthwise_nchw_ok(const struct kconv_dw *p);
void kconv_launch_depthwise_nchw(int dtype, const void *x, const void *wt, const void *bias, const void *z, void *y,
				 const struct kconv_dw *p, cudaStream_t stream);

/*
 * The patch GEMM of a 2-D conv whose kernel is its stride (no pads, no
 * dilation, one group; k_conv.c, patch_prepare): the patches of NCHW x
 * [n, c, h, w] as the rows of p [n * oh * ow, kp] (row-major): row
 * (b * oh + r) * ow + q, column (ci * kh + i) * kw + j holds
 * x[b, ci, r * kh + i, q * kw + j] (the order of W's [M, C, kh, kw]), for
 * columns below k = c * kh * kw; column k holds 1 when `one` is set (the
 * bias's column of the weights) and the other columns up to kp are 0.
 * kp % 8 == 0, p 16-byte aligned; rows and columns past oh * kh or ow * kw
 * of x are not read.
 */
struct kconv_patch {
	int64_t n;
	int c, h, w, oh, ow, kh, kw, k, kp, one;
};
void kconv_launch_patches(int dtype, const void *x, void *p, const struct kconv_patch *q, cudaStream_t stream);

/* W [m, k] (row-major, kp >= k) -> wp [m, kp]: each row copied; column k
 * (when k < kp) holds bias[row], or 0 when bias is NULL; the rest are 0. */
void kconv_launch_patch_weights(int dtype, const void *w, const void *bias, void *wp, int64_t m, int k, int kp,
				cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
