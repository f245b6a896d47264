/*
 * dce.c - dead code elimination: nodes nothing reads.
 */
#include "passes/pass.h"

#include <stdio.h>

static int run(struct pass_ctx *c)
{
	struct ir_graph *g = c->m->graph;
	bool again = true;
	while (again) {
		again = false;
		/* last to first: a dead consumer goes before its producers are looked at */
		for (struct ir_node *n = g->last, *prev; n; n = prev) {
			prev = n->prev;
			if (!pass_node_dead(n))
				continue;
			char name[64];
			pass_node_name(n, name, sizeof(name));
			char op[128];
			snprintf(op, sizeof(op), "%s", n->op_type);
			int rc = ir_node_remove(n, c->d);
			if (rc)
				return rc;
			pass_rewrote(c, NULL, "removed %s (%s): nothing reads its outputs", name, op);
			again = true;
		}
	}
	return 0;
}

const struct pass pass_dce = {
	.name = "dce",
	.summary = "remove nodes whose outputs nothing reads",
	.explain =
		"Dead code elimination. A node is dead when no other node, no subgraph and no graph output "
		"reads any of its outputs: computing it changes nothing the model gives back, so it goes. "
		"Removing one dead node can make its producers dead in turn, so the pass repeats until "
		"nothing more goes (walking the graph from the end, each round finds whole dead chains).\n\n"
		"Initializers that only dead nodes read stay in the model: prune-initializers removes them. "
		"Nodes with side effects do not exist in ONNX inference graphs, so nothing else keeps a node "
		"alive. Subgraphs (If/Loop/Scan bodies) are left as they are.",
	.level = PASS_LEVEL_BASIC,
	.run = run,
};
