/*
 * util.c - what every GPU kernel entry uses: status checks, shapes and
 * strides.
 */
#include "kernels/cuda/cuda.h"

int64_t cuda_numel(const struct cuda_tensor *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->rank; i++)
		n *= t->dims[i];
	return n;
}

int cuda_check(cudaError_t err, const char *call, struct ir_diag *d)
{
	if (err == cudaSuccess)
		return 0;
	return ir_diag_err(d, err == cudaErrorMemoryAllocation ? IR_ENOMEM : IR_ERR, "%s: cuda error %s: %s", call,
			   cudaGetErrorName(err), cudaGetErrorString(err));
}

int cuda_check_launch(const char *kernel, struct ir_diag *d)
{
	return cuda_check(cudaGetLastError(), kernel, d);
}

bool cuda_is_float(int dtype)
{
	return dtype == IR_FLOAT || dtype == IR_FLOAT16 || dtype == IR_BFLOAT16;
}

void cuda_strides(const struct cuda_tensor *t, int64_t *strides)
{
	int64_t s = 1;
	for (int i = t->rank - 1; i >= 0; i--) {
		strides[i] = s;
		s *= t->dims[i];
	}
}

void cuda_bcast_strides(const struct cuda_tensor *t, int rank, const int64_t *out_dims, int64_t *strides)
{
	int64_t own[IR_MAX_RANK];
	cuda_strides(t, own);
	int off = rank - t->rank;
	for (int i = 0; i < rank; i++) {
		int j = i - off;
		strides[i] = (j < 0 || t->dims[j] == 1 || out_dims[i] == 1) ? 0 : own[j];
	}
}
