/*
 * pdl.cuh - programmatic dependent launch for ogsh's own short kernels
 * (CUDA C++, device and host).
 *
 * Between two kernels of a stream (or of the CUDA graph captured from it)
 * the second normally starts only after the first has finished and its
 * launch has been processed: a gap of a few microseconds, which a
 * LayerNorm or GELU pass of 9 to 25 us after every GEMM of a transformer
 * layer pays each time. Launched with programmatic stream serialization,
 * the second kernel's blocks may be scheduled while the first one's last
 * blocks still run; pdl_wait() at the top of the kernel (griddepcontrol.wait
 * on sm_90 and later) holds each block until the first kernel has finished
 * and its writes are visible, so nothing is read early. A kernel that uses
 * pdl_launch must call pdl_wait() before it reads any input. Launched
 * without the attribute, pdl_wait() returns at once. OGSH_PDL=0 launches
 * them the usual way.
 */
#ifndef OGSH_KERNELS_CUDA_PDL_CUH
#define OGSH_KERNELS_CUDA_PDL_CUH

#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

static inline bool pdl_on()
{
	static int on = -1;   // read once; a benign race between threads
	if (on < 0) {
		const char *e = getenv("OGSH_PDL");
		on = !(e && !strcmp(e, "0"));
	}
	return on != 0;
}

template <typename... KArgs, typename... Args>
static cudaError_t pdl_launch(void (*kern)(KArgs...), dim3 grid, dim3 block, cudaStream_t s, Args... args)
{
	cudaLaunchConfig_t cfg = {};
	cfg.gridDim = grid;
	cfg.blockDim = block;
	cfg.dynamicSmemBytes = 0;
	cfg.stream = s;
	cudaLaunchAttribute at[1];
	at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
	at[0].val.programmaticStreamSerializationAllowed = 1;
	cfg.attrs = at;
	cfg.numAttrs = pdl_on() ? 1 : 0;
	return cudaLaunchKernelEx(&cfg, kern, static_cast<KArgs>(args)...);
}

__device__ __forceinline__ void pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

#endif
