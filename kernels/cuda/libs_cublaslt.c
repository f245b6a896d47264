/*
 * libs_cublaslt.c - cuBLASLt, opened with dlopen on first use (see
 * kernels/cuda/info.c for why it is not linked) and its handle.
 *
 * To use another function: add it to struct cuda_lt_api (cublaslt_api.h)
 * and to `syms` below.
 */
#include "kernels/cuda/cublaslt_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static const char *const lib_names[] = { "libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so", NULL };

/* the table's members by symbol name */
static const struct {
	const char *name;
	size_t off;
} syms[] = {
#define S(f) { "cublasLt" #f, offsetof(struct cuda_lt_api, f) }
	S(GetVersion), S(Create), S(Destroy),
	S(MatmulDescCreate), S(MatmulDescDestroy), S(MatmulDescSetAttribute),
	S(MatrixLayoutCreate), S(MatrixLayoutDestroy), S(MatrixLayoutSetAttribute),
	S(MatmulPreferenceCreate), S(MatmulPreferenceDestroy), S(MatmulPreferenceSetAttribute),
	S(MatmulAlgoGetHeuristic), S(Matmul),
#undef S
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct cuda_lt_api api;
static int loaded;             /* 0 not tried, 1 loaded, -1 failed (not tried again) */
static char load_error[256];   /* why it failed: every later call reports it */

static bool load(void)
{
	void *h = NULL;
	for (const char *const *n = lib_names; *n && !h; n++)
		h = dlopen(*n, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(load_error, sizeof(load_error), "cannot load cuBLASLt (libcublasLt.so.13, .so.12 or .so): %s",
			 e ? e : "not found");
		return false;
	}
	struct cuda_lt_api t;
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *p = dlsym(h, syms[i].name);
		if (!p) {
			snprintf(load_error, sizeof(load_error), "cuBLASLt has no function '%s'", syms[i].name);
			/* the library stays open: unloading CUDA libraries is not safe */
			return false;
		}
		/* object pointer to function pointer, through memcpy (info.c) */
		memcpy((char *)&t + syms[i].off, &p, sizeof(p));
	}
	api = t;
	return true;
}

const struct cuda_lt_api *cuda_lt_api(struct ir_diag *d)
{
	pthread_mutex_lock(&lock);
	if (!loaded)
		loaded = load() ? 1 : -1;
	bool ok = loaded > 0;
	pthread_mutex_unlock(&lock);
	if (!ok) {
		ir_diag_err(d, IR_ERR, "%s", load_error);
		return NULL;
	}
	return &api;
}

const char *cuda_lt_status_name(cublasStatus_t s)
{
	switch (s) {
	case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
	case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
	case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
	case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
	case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
	case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
	case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
	case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
	case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
	case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
	}
	static _Thread_local char buf[40];
	snprintf(buf, sizeof(buf), "status %d", (int)s);
	return buf;
}

int cuda_lt_check(cublasStatus_t s, const char *call, struct ir_diag *d)
{
	if (s == CUBLAS_STATUS_SUCCESS)
		return 0;
	return ir_diag_err(d, s == CUBLAS_STATUS_ALLOC_FAILED ? IR_ENOMEM : IR_ERR, "%s: cublasLt error %s", call,
			   cuda_lt_status_name(s));
}

void *cuda_cublaslt_handle(struct cuda_ctx *ctx, struct ir_diag *d)
{
	if (ctx->cublaslt)
		return ctx->cublaslt;
	const struct cuda_lt_api *lt = cuda_lt_api(d);
	if (!lt)
		return NULL;
	cublasLtHandle_t h = NULL;
	if (cuda_lt_check(lt->Create(&h), "cublasLtCreate", d))
		return NULL;
	ctx->cublaslt = h;
	return h;
}

void cuda_cublaslt_free(void *handle)
{
	if (!handle)
		return;
	const struct cuda_lt_api *lt = cuda_lt_api(NULL);
	if (lt)
		(void)lt->Destroy((cublasLtHandle_t)handle);
}
