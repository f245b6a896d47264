/*
 * cudnn_api.h - cuDNN as the GPU kernels reach it: a table of the library's
 * functions, resolved with dlopen/dlsym on first use (libs_cudnn.c), since
 * ogsh does not link cuDNN. C only.
 *
 * To use another cuDNN function: add a member below (its type from
 * <cudnn.h> through __typeof__) and its name to the list in libs_cudnn.c.
 */
#ifndef OGSH_KERNELS_CUDA_CUDNN_API_H
#define OGSH_KERNELS_CUDA_CUDNN_API_H

#include "kernels/cuda/cuda.h"

#include <cudnn.h>

#define CUDNN_FN(name) __typeof__(&cudnn##name) name

struct cudnn_api {
	CUDNN_FN(GetVersion);
	CUDNN_FN(GetErrorString);
	CUDNN_FN(Create);
	CUDNN_FN(Destroy);
	CUDNN_FN(SetStream);
	/* descriptors */
	CUDNN_FN(CreateTensorDescriptor);
	CUDNN_FN(DestroyTensorDescriptor);
	CUDNN_FN(SetTensorNdDescriptor);
	CUDNN_FN(CreateFilterDescriptor);
	CUDNN_FN(DestroyFilterDescriptor);
	CUDNN_FN(SetFilterNdDescriptor);
	CUDNN_FN(CreateConvolutionDescriptor);
	CUDNN_FN(DestroyConvolutionDescriptor);
	CUDNN_FN(SetConvolutionNdDescriptor);
	CUDNN_FN(SetConvolutionMathType);
	CUDNN_FN(SetConvolutionGroupCount);
	CUDNN_FN(CreateActivationDescriptor);
	CUDNN_FN(DestroyActivationDescriptor);
	CUDNN_FN(SetActivationDescriptor);
	CUDNN_FN(CreatePoolingDescriptor);
	CUDNN_FN(DestroyPoolingDescriptor);
	CUDNN_FN(SetPoolingNdDescriptor);
	/* convolution forward */
	CUDNN_FN(GetConvolutionForwardAlgorithmMaxCount);
	CUDNN_FN(GetConvolutionForwardAlgorithm_v7);
	CUDNN_FN(FindConvolutionForwardAlgorithmEx);
	CUDNN_FN(GetConvolutionForwardWorkspaceSize);
	CUDNN_FN(ConvolutionForward);
	CUDNN_FN(ConvolutionBiasActivationForward);
	/* convolution backward data (ConvTranspose) */
	CUDNN_FN(GetConvolutionBackwardDataAlgorithmMaxCount);
	CUDNN_FN(GetConvolutionBackwardDataAlgorithm_v7);
	CUDNN_FN(FindConvolutionBackwardDataAlgorithmEx);
	CUDNN_FN(GetConvolutionBackwardDataWorkspaceSize);
	CUDNN_FN(ConvolutionBackwardData);
	/* pooling */
	CUDNN_FN(PoolingForward);
	/* LRN */
	CUDNN_FN(CreateLRNDescriptor);
	CUDNN_FN(DestroyLRNDescriptor);
	CUDNN_FN(SetLRNDescriptor);
	CUDNN_FN(LRNCrossChannelForward);
	/* the graph (backend) API */
	CUDNN_FN(BackendCreateDescriptor);
	CUDNN_FN(BackendDestroyDescriptor);
	CUDNN_FN(BackendSetAttribute);
	CUDNN_FN(BackendGetAttribute);
	CUDNN_FN(BackendFinalize);
	CUDNN_FN(BackendExecute);
};

#undef CUDNN_FN

/* The table, the library opened on the first call; NULL with "cuDNN not
 * found: ..." (or the missing symbol) in d. Static: never freed. */
const struct cudnn_api *cuda_cudnn(struct ir_diag *d);

/* 0 when st is CUDNN_STATUS_SUCCESS, else IR_ERR (IR_ENOMEM for an
 * allocation failure) with "CALL: cudnn error CUDNN_STATUS_..." in d. */
int cuda_cudnn_check(cudnnStatus_t st, const char *call, struct ir_diag *d);

/* Destroys a handle made by cuda_cudnn_handle (ctx->cudnn); NULL is fine. */
void cuda_cudnn_handle_free(void *handle);

#endif
