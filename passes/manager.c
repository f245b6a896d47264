/*
 * manager.c - running passes: on a clone, checked by ir_model_verify(),
 * kept or rolled back.
 */
#include "passes/pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct pass *pass_find(const char *name)
{
	for (int i = 0; pass_registry[i]; i++)
		if (!strcmp(pass_registry[i]->name, name))
			return pass_registry[i];
	return NULL;
}

int pass_run(struct ir_model *c, const struct pass *p, const struct pass_arg *args, int n_args,
	     struct pass_report *rep, struct ir_diag *d)
{
	return pass_run_calib(c, p, args, n_args, NULL, rep, d);
}

int pass_run_calib(struct ir_model *c, const struct pass *p, const struct pass_arg *args, int n_args,
		   const struct ir_calib *calib, struct pass_report *rep, struct ir_diag *d)
{
	pass_report_init(rep, p->name);
	int rc = pass_check_args(p, args, n_args, d);
	if (rc)
		return rc;
	struct pass_ctx ctx = { .m = c, .pass = p, .rep = rep, .args = args, .n_args = n_args, .d = d,
				.calib = calib };
	rc = p->run(&ctx);
	if (rc) {
		ir_diag_prefix(d, "%s", p->name);
		return rc;
	}
	if (rep->changed)
		c->infer_current = false;
	/* before IR version 4 every initializer is also a graph input: new
	 * initializers a pass made are listed too, with their type */
	if (c->has_ir_version && c->ir_version < 4) {
		struct ir_graph *g = c->graph;
		for (int i = 0; i < g->n_inits; i++) {
			struct ir_value *v = g->inits[i];
			if (v->is_input || !v->init)
				continue;
			struct ir_dim dims[IR_MAX_RANK];
			for (int k = 0; k < v->init->rank; k++)
				dims[k] = (struct ir_dim){ .kind = IR_DIM_VALUE, .value = v->init->dims[k] };
			if ((v->type.kind == IR_TYPE_NONE &&
			     ir_type_set_tensor(&v->type, v->init->dtype, v->init->rank, dims)) ||
			    ir_graph_add_input(g, v))
				return ir_diag_err(d, IR_ENOMEM, "out of memory");
			v->has_type_proto = true;
			v->type.has_elem = true;
		}
	}
	struct ir_diag vd;
	ir_diag_init(&vd);
	if (ir_model_verify(c, &vd)) {
		rc = ir_diag_err(d, IR_ERR, "pass '%s' broke the graph, rolled back: %s", p->name,
				 vd.error ? vd.error : "?");
		ir_diag_clear(&vd);
		return rc;
	}
	ir_diag_clear(&vd);
	return 0;
}

int pass_apply(const struct ir_model *m, const struct pass *p, const struct pass_arg *args, int n_args,
	       bool dry_run, struct ir_model **out, struct pass_report *rep, struct ir_diag *d)
{
	return pass_apply_calib(m, p, args, n_args, NULL, dry_run, out, rep, d);
}

int pass_apply_calib(const struct ir_model *m, const struct pass *p, const struct pass_arg *args, int n_args,
		     const struct ir_calib *calib, bool dry_run, struct ir_model **out, struct pass_report *rep,
		     struct ir_diag *d)
{
	*out = NULL;
	struct ir_model *c = ir_model_clone(m);
	if (!c) {
		pass_report_init(rep, p->name);
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	int rc = pass_run_calib(c, p, args, n_args, calib, rep, d);
	if (rc || dry_run || !rep->changed) {
		ir_model_free(c);
		return rc;
	}
	ir_infer_clear(c->graph);
	c->infer_current = false;
	*out = c;
	return 0;
}
