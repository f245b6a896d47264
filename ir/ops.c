/*
 * ops.c - the op table built from ops.def, and lookup by (domain, type).
 */
#include "ir_private.h"

#include <stdio.h>

const struct ir_op_info ir_ops[IR_OP_COUNT] = {
#define IR_OP(id, dom, in_min, in_max, out_min, out_max, flags, since) \
	[IR_OP_##id] = { #id, dom, in_min, in_max, out_min, out_max, flags, since },
#include "ops.def"
#undef IR_OP
};

/* The C identifier of a non-default-domain op carries a prefix ("ml_Scaler");
 * the ONNX op type is what follows the first '_'. */
static const char *op_type_of(int op)
{
	const char *n = ir_ops[op].name;
	if (ir_ops[op].domain[0]) {
		const char *u = strchr(n, '_');
		if (u)
			return u + 1;
	}
	return n;
}

static const struct ir_attr_schema attr_schemas[] = {
#define IR_ATTR_DEF(id, name, type, required, dflt, since, until) \
	{ IR_OP_##id, name, type, required, dflt, since, until },
#include "attrs.def"
#undef IR_ATTR_DEF
};

#define N_ATTR_SCHEMAS ((int)(sizeof(attr_schemas) / sizeof(attr_schemas[0])))

const struct ir_attr_schema *ir_op_attrs(int op, int *count)
{
	*count = 0;
	if (op < 0 || op >= IR_OP_COUNT)
		return NULL;
	/* rows are grouped by op in table order: binary search for the first */
	int lo = 0, hi = N_ATTR_SCHEMAS;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (attr_schemas[mid].op < op)
			lo = mid + 1;
		else
			hi = mid;
	}
	int n = 0;
	while (lo + n < N_ATTR_SCHEMAS && attr_schemas[lo + n].op == op)
		n++;
	*count = n;
	return n ? &attr_schemas[lo] : NULL;
}

bool ir_attr_schema_at(const struct ir_attr_schema *a, int64_t opset)
{
	return opset <= 0 || (a->since <= opset && (a->until == 0 || opset < a->until));
}

const struct ir_attr_schema *ir_op_attr(int op, const char *name, int64_t opset)
{
	int n;
	const struct ir_attr_schema *a = ir_op_attrs(op, &n);
	for (int i = 0; i < n; i++)
		if (strcmp(a[i].name, name) == 0 && ir_attr_schema_at(&a[i], opset))
			return &a[i];
	return NULL;
}

static bool default_domain(const char *d)
{
	return !d || !*d || strcmp(d, "ai.onnx") == 0;
}

int64_t ir_model_opset(const struct ir_model *m, const char *domain)
{
	for (size_t i = 0; m && i < m->n_opsets; i++) {
		const char *d = m->opsets[i].domain;
		if (default_domain(domain) ? default_domain(d) : (d && strcmp(d, domain) == 0))
			return m->opsets[i].version;
	}
	return 0;
}

static struct ir_map *op_map;
static char op_keys[IR_OP_COUNT][96];

static void build_map(void)
{
	struct ir_map *m = ir_map_new(IR_OP_COUNT);
	if (!m)
		return;
	for (int i = 0; i < IR_OP_COUNT; i++) {
		snprintf(op_keys[i], sizeof(op_keys[i]), "%s:%s", ir_ops[i].domain, op_type_of(i));
		if (ir_map_put(m, op_keys[i], (void *)(intptr_t)(i + 1))) {
			ir_map_free(m);
			return;
		}
	}
	op_map = m;
}

int ir_op_lookup(const char *domain, const char *op_type)
{
	if (!op_map)
		build_map();
	if (!op_map || !domain || !op_type)
		return IR_OP_UNKNOWN;
	if (strcmp(domain, "ai.onnx") == 0)
		domain = "";
	char key[256];
	int n = snprintf(key, sizeof(key), "%s:%s", domain, op_type);
	if (n < 0 || (size_t)n >= sizeof(key))
		return IR_OP_UNKNOWN;
	intptr_t v = (intptr_t)ir_map_get(op_map, key);
	return v ? (int)v - 1 : IR_OP_UNKNOWN;
}
