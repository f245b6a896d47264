/*
 * qweight.h - private to passes/: recognising quantized weights, so that the
 * passes that clean up and fold never undo quantization (qweight.c).
 *
 * A quantized weight is stored quantized: an integer or float8/float4
 * constant read by a DequantizeLinear (onnxruntime's and ogsh's QDQ form),
 * or a float constant read by a QuantizeLinear whose output a
 * DequantizeLinear reads (the Q->DQ form some tools write). Folding either
 * into a float constant would lose the low-precision storage: the file
 * grows 4x and TensorRT no longer sees the quantization.
 */
#ifndef OGSH_PASSES_QWEIGHT_H
#define OGSH_PASSES_QWEIGHT_H

#include "passes/pass.h"

/* Whether dtype is one a DequantizeLinear reads (an integer type or float8/float4). */
bool qw_quant_dtype(int dtype);

/*
 * Whether n is a DequantizeLinear of a quantized constant, or a
 * QuantizeLinear of a constant that a DequantizeLinear reads (the weight
 * form of a Q->DQ pair). When it is, why gets the sentence for the report:
 * "weight is quantized (DequantizeLinear of int8 'w'): kept", and *dtype
 * (may be NULL) the weight's stored type (a Q: its output type, when known).
 */
bool qw_node_keeps(const struct ir_node *n, int *dtype, char *why, size_t size);

/*
 * Whether value v (a weight input of a Conv, Gemm, MatMul...) is a quantized
 * weight: the output of a node qw_node_keeps() keeps, possibly through
 * shape-only ops (Reshape, Transpose, Flatten, Squeeze, Unsqueeze,
 * Identity). why gets the report's sentence.
 */
bool qw_value_quantized(const struct ir_value *v, char *why, size_t size);

#endif
