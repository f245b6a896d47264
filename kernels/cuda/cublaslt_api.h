/*
 * cublaslt_api.h - cuBLASLt as ogsh uses it: the library is opened with
 * dlopen on first use (kernels/cuda/libs_cublaslt.c), never linked, so its
 * functions are called through this table. C only.
 *
 * To use another cuBLASLt function: add its pointer below (named like the
 * function without the "cublasLt" prefix) and its name to the symbol list
 * in libs_cublaslt.c.
 */
#ifndef OGSH_KERNELS_CUDA_CUBLASLT_API_H
#define OGSH_KERNELS_CUDA_CUBLASLT_API_H

#include "kernels/cuda/cuda.h"

#include <cublasLt.h>

struct cuda_lt_api {
	__typeof__(&cublasLtGetVersion) GetVersion;
	__typeof__(&cublasLtCreate) Create;
	__typeof__(&cublasLtDestroy) Destroy;
	__typeof__(&cublasLtMatmulDescCreate) MatmulDescCreate;
	__typeof__(&cublasLtMatmulDescDestroy) MatmulDescDestroy;
	__typeof__(&cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute;
	__typeof__(&cublasLtMatrixLayoutCreate) MatrixLayoutCreate;
	__typeof__(&cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy;
	__typeof__(&cublasLtMatrixLayoutSetAttribute) MatrixLayoutSetAttribute;
	__typeof__(&cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate;
	__typeof__(&cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy;
	__typeof__(&cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute;
	__typeof__(&cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic;
	__typeof__(&cublasLtMatmul) Matmul;
};

/* The functions, loaded on first call (thread-safe); NULL with an error naming
 * the missing library or symbol in d. The table lives until exit. */
const struct cuda_lt_api *cuda_lt_api(struct ir_diag *d);

/* "CUBLAS_STATUS_NOT_SUPPORTED"... (a number for an unknown status; the
 * returned text is static or in a thread-local buffer). */
const char *cuda_lt_status_name(cublasStatus_t s);

/* 0 when s is CUBLAS_STATUS_SUCCESS, else IR_ERR (IR_ENOMEM for
 * CUBLAS_STATUS_ALLOC_FAILED) with "CALL: cublasLt error NAME" in d. */
int cuda_lt_check(cublasStatus_t s, const char *call, struct ir_diag *d);

/* Destroys a handle made by cuda_cublaslt_handle (for whoever frees the
 * cuda_ctx); NULL is fine. */
void cuda_cublaslt_free(void *handle);

#endif
