/*
 * exec_io.h - tensors in NumPy files (.npy, .npz) and the one function that
 * compares two tensors' numbers. (To be folded into exec/exec.h.)
 */
#ifndef OGSH_EXEC_IO_H
#define OGSH_EXEC_IO_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"

/* ------------------------------------------------------------------------ */
/* NumPy files (io.c)                                                        */
/* ------------------------------------------------------------------------ */

/*
 * Element types and their .npy descriptors:
 *   float32 <f4, float64 <f8, float16 <f2, int8..int64 <i1..<i8,
 *   uint8..uint64 <u1..<u8, bool |b1, complex64 <c8, complex128 <c16,
 *   bfloat16 <V2 (what ml_dtypes writes; read with a warning, since numpy
 *   gives a 2-byte void no other meaning), string |S<n> and <U<n> (UTF-8 in
 *   memory; written as <U<n>).
 * Big-endian files are converted; Fortran-order files are transposed to C
 * order. Pickled object arrays, structured dtypes and float8/int4 (which
 * numpy cannot tell apart) are refused.
 */

/*
 * Reads the .npy file at `path` into a new tensor (*out, the caller's
 * reference). Returns 0, or IR_ERR / IR_EIO / IR_ENOMEM / IR_EINTR with
 * "cannot read 'path': why" in the diag.
 */
int exec_npy_read(const char *path, struct ir_tensor **out, struct ir_diag *d);

/*
 * Writes `t` to `path` as .npy (format 1.0, or 2.0 when the header needs
 * it), atomically: a temporary file in the same folder, fsync, rename.
 * Returns 0 or an IR_* error with a message.
 */
int exec_npy_write(const char *path, const struct ir_tensor *t, struct ir_diag *d);

/* A tensor with a name: the entries of an .npz archive. */
struct exec_named_tensor {
	char *name;           /* owned */
	struct ir_tensor *t;  /* one reference, owned */
};

/*
 * Reads every entry of the .npz archive at `path` (np.savez: stored,
 * np.savez_compressed: deflate, when built with zlib). *out is a new array
 * of *n entries in archive order (free it with exec_named_free); the names
 * are the entry names without ".npy", kept as names, never used as paths.
 * Returns 0 or an IR_* error with a message.
 */
int exec_npz_read(const char *path, struct exec_named_tensor **out, int *n, struct ir_diag *d);

/*
 * Writes `n` tensors to `path` as an .npz archive of stored (uncompressed)
 * entries "<name>.npy", atomically. Names must be non-empty, unique and free
 * of NUL. Returns 0 or an IR_* error with a message.
 */
int exec_npz_write(const char *path, const struct exec_named_tensor *a, int n, struct ir_diag *d);

/* Frees the names, drops the tensor references and frees the array. */
void exec_named_free(struct exec_named_tensor *a, int n);

/*
 * Where an array lies in a .npy file or an .npz entry, so that a dataset can
 * read it a few rows at a time instead of whole (exec/data.c).
 */
struct exec_npy_loc {
	char *name;             /* .npz: the entry's name without ".npy" (owned); .npy: NULL */
	int dtype;
	int rank;
	int64_t dims[IR_MAX_RANK];
	size_t esize;           /* bytes per element in the file */
	bool swap;              /* big-endian in the file */
	bool fortran;           /* Fortran order (rank > 1): rows are not contiguous */
	bool deflated;          /* a compressed .npz entry: read it whole (exec_npz_read) */
	uint64_t off;           /* file offset of the first element (not deflated) */
	uint64_t size;          /* bytes of data (numel * esize) */
};

/*
 * Reads the header of the .npy file at `path` (checked as exec_npy_read
 * does, the data's size against the file's) into *out. 0 or an IR_* error.
 */
int exec_npy_locate(const char *path, struct exec_npy_loc *out, struct ir_diag *d);
/*
 * The arrays of the .npz archive at `path` in archive order: *out is a new
 * array of *n (exec_npy_loc_free); stored entries can be read in pieces,
 * compressed ones only whole. Entries are not CRC-checked here. 0 or an
 * IR_* error.
 */
int exec_npz_locate(const char *path, struct exec_npy_loc **out, int *n, struct ir_diag *d);
void exec_npy_loc_free(struct exec_npy_loc *a, int n);
/*
 * Reads elements [first, first + count) of a located array (C order, not
 * compressed, not strings) from `fd`, the file open for reading, into dst
 * in the tensor layout (little-endian, bools 0/1). 0 or an IR_* error.
 */
int exec_npy_read_elems(int fd, const char *path, const struct exec_npy_loc *l, uint64_t first, uint64_t count,
			void *dst, struct ir_diag *d);

/* ------------------------------------------------------------------------ */
/* Comparing numbers (compare.c)                                             */
/* ------------------------------------------------------------------------ */

struct exec_cmp_opts {
	double atol, rtol;   /* an element passes when |a-b| <= atol + rtol*|b| */
	int topk;            /* k of the top-k agreement; <= 0: no top-k figures */
};

/*
 * The default tolerances for comparing tensors of `dtype` (see compare.c for
 * the reasons): float32/complex64 rtol 1e-3 atol 1e-7 (ONNX's test runner),
 * float64/complex128 rtol 1e-5 atol 1e-8 (numpy.allclose), float16 1e-3/1e-3,
 * bfloat16 1e-2/1e-2, float8/float4/e8m0 one unit in the last place,
 * integers, bool and strings exact. topk is 5.
 */
void exec_cmp_defaults(int dtype, struct exec_cmp_opts *o);

struct exec_cmp {
	bool shape_ok, dtype_ok;
	char why[256];                /* why the tensors are not comparable ("" if they are) */
	uint64_t n, n_bad;            /* elements, elements failing the tolerance */
	double max_abs, max_rel;      /* rel = |a-b|/|b| (b == 0: inf if a != b) */
	uint64_t worst;               /* flat index of the largest |a-b| - (atol + rtol*|b|) */
	double worst_a, worst_b;
	double cosine, snr_db;        /* SNR = 10 log10(sum b^2 / sum (a-b)^2); inf when equal */
	uint64_t nan_a, nan_b, inf_a, inf_b, nan_mismatch;
	bool has_topk;                /* the last dim is > 1 and opts.topk > 0 */
	double top1_agree, topk_agree;   /* fractions of rows (0..1) */
	bool pass;                    /* shape_ok && dtype_ok && n_bad == 0 */
};

/*
 * Compares `a` (the actual values) with `b` (the expected ones) and fills
 * *r. Tensors of different shapes are not comparable (r->why says so);
 * tensors of the same shape and different numeric dtypes are compared by
 * value but never pass. NaN equals NaN; a NaN in one tensor only is a
 * failing element (nan_mismatch); infinities are equal when of the same
 * sign. Complex tensors compare real and imaginary parts (an element fails
 * when either does). Strings compare exactly. cosine and snr_db cover the
 * elements finite in both. `o` NULL: exec_cmp_defaults(b->dtype).
 * Returns 0 (whether or not they pass), IR_EINTR when stopped by Ctrl-C,
 * or IR_ERR (a mapped file changed under a tensor, no memory).
 */
int exec_compare(const struct ir_tensor *a, const struct ir_tensor *b, const struct exec_cmp_opts *o,
		 struct exec_cmp *r, struct ir_diag *d);

#endif
