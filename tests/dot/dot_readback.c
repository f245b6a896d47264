/*
 * dot_readback.c - reads a drawing written by `dot FILE.dot` back with
 * libcgraph (agread) and checks it against the model it was drawn from.
 *
 *   dot_readback MODEL.onnx DRAWING.dot [--diff ADDED REMOVED CHANGED] [--collapse]
 *
 * MODEL.onnx is the stage that was drawn, saved with `save`. Checked:
 * - op nodes (n<id>): one per node of the main graph, Constant nodes
 *   excepted (folded into their readers' labels); the multiset of op types
 *   (first label line) and the names (second line, maybe shortened to
 *   "...tail") are the model's;
 * - graph inputs (in<k>, shape invhouse) and outputs (out<k>, shape house);
 * - edges: one per tensor and reader, initializers and constants folded;
 * - colours: every op node is filled, all nodes of one op type alike, and
 *   every fill appears in the legend (cluster_legend);
 * --diff: as many added (green), changed (orange) and removed (r<id>,
 *   dashed) nodes as given; --collapse: the scope blocks (b<k>, "N nodes")
 *   and the nodes left alone add up to the model's nodes.
 * Prints what it found; exits 1 on the first mismatch.
 */
#include "ir/ir.h"

#include <graphviz/cgraph.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;

#define CHECK(cond, ...)                                   \
	do {                                               \
		if (!(cond)) {                             \
			fprintf(stderr, "FAIL: " __VA_ARGS__); \
			fputc('\n', stderr);               \
			fails++;                           \
		}                                          \
	} while (0)

static bool is_const_node(const struct ir_node *n)
{
	return !strcmp(n->op_type, "Constant") && n->n_inputs == 0 && n->n_outputs == 1 && n->outputs[0] &&
	       (!n->domain || !n->domain[0] || !strcmp(n->domain, "ai.onnx"));
}

static bool folded(const struct ir_value *v)
{
	if ((v->init || v->sparse_init) && !v->producer)
		return true;
	return v->producer && is_const_node(v->producer);
}

/* Line k of a label whose lines are joined by the two characters "\n". */
static void label_line(const char *label, int k, char *out, size_t size)
{
	const char *p = label;
	for (int i = 0; i < k && p; i++) {
		p = strstr(p, "\\n");
		if (p)
			p += 2;
	}
	out[0] = 0;
	if (!p)
		return;
	const char *e = strstr(p, "\\n");
	size_t n = e ? (size_t)(e - p) : strlen(p);
	if (n >= size)
		n = size - 1;
	memcpy(out, p, n);
	out[n] = 0;
}

static char *get(void *obj, const char *attr)
{
	char *v = agget(obj, (char *)attr);
	return v ? v : "";
}

static bool starts(const char *s, const char *p)
{
	return !strncmp(s, p, strlen(p));
}

/* n<digits>, in<digits>... */
static bool named(const char *name, const char *prefix)
{
	size_t k = strlen(prefix);
	if (strncmp(name, prefix, k) || !name[k])
		return false;
	for (const char *p = name + k; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

struct opcount {
	char op[256];
	int model, drawn;
	char fill[16];
};

static struct opcount ops[512];
static int n_ops;

static struct opcount *op_slot(const char *op)
{
	for (int i = 0; i < n_ops; i++)
		if (!strcmp(ops[i].op, op))
			return &ops[i];
	if (n_ops == 512)
		return NULL;
	snprintf(ops[n_ops].op, sizeof(ops[n_ops].op), "%s", op);
	return &ops[n_ops++];
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: dot_readback MODEL.onnx DRAWING.dot [--diff A R C] [--collapse]\n");
		return 2;
	}
	int want_added = -1, want_removed = -1, want_changed = -1;
	bool collapse = false;
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--diff") && i + 3 < argc) {
			want_added = atoi(argv[i + 1]);
			want_removed = atoi(argv[i + 2]);
			want_changed = atoi(argv[i + 3]);
			i += 3;
		} else if (!strcmp(argv[i], "--collapse")) {
			collapse = true;
		} else {
			fprintf(stderr, "dot_readback: unknown argument '%s'\n", argv[i]);
			return 2;
		}
	}
	struct ir_diag d;
	ir_diag_init(&d);
	struct ir_model *m = ir_model_load(argv[1], NULL, &d);
	if (!m) {
		fprintf(stderr, "FAIL: %s: %s\n", argv[1], d.error ? d.error : "cannot load");
		return 1;
	}
	FILE *f = fopen(argv[2], "r");
	if (!f) {
		fprintf(stderr, "FAIL: cannot open %s\n", argv[2]);
		return 1;
	}
	Agraph_t *G = agread(f, NULL);
	fclose(f);
	if (!G) {
		fprintf(stderr, "FAIL: %s: agread could not parse it\n", argv[2]);
		return 1;
	}
	CHECK(agisdirected(G), "the drawing is not a digraph");
	const struct ir_graph *g = m->graph;

	/* what the model says */
	int model_nodes = 0, model_inputs = 0, model_edges = 0;
	ir_for_each_node(g, n) {
		if (is_const_node(n))
			continue;
		model_nodes++;
		struct opcount *o = op_slot(n->op_type);
		if (o)
			o->model++;
		for (int i = 0; i < n->n_inputs + n->n_implicit; i++) {
			const struct ir_value *v = i < n->n_inputs ? n->inputs[i] : n->implicit[i - n->n_inputs];
			if (!v || folded(v))
				continue;
			bool dup = false;
			for (int j = 0; j < i && !dup; j++)
				dup = (j < n->n_inputs ? n->inputs[j] : n->implicit[j - n->n_inputs]) == v;
			if (!dup)
				model_edges++;
		}
	}
	for (int i = 0; i < g->n_inputs; i++)
		model_inputs += !g->inputs[i]->init && !g->inputs[i]->sparse_init;
	for (int i = 0; i < g->n_outputs; i++)
		model_edges += !folded(g->outputs[i]);

	/* what the drawing says */
	Agraph_t *leg = agsubg(G, "cluster_legend", 0);
	CHECK(leg != NULL, "no legend (cluster_legend)");
	int op_nodes = 0, inputs = 0, outputs = 0, removed = 0, added = 0, changed = 0, blocks = 0, in_blocks = 0;
	int legend_nodes = 0;
	char line[256];
	for (Agnode_t *n = agfstnode(G); n; n = agnxtnode(G, n)) {
		const char *name = agnameof(n);
		const char *label = get(n, "label");
		const char *fill = get(n, "fillcolor");
		if (starts(name, "legend_")) {
			legend_nodes++;
			CHECK(leg && agsubnode(leg, n, 0), "%s is not in the legend cluster", name);
			continue;
		}
		if (named(name, "in")) {
			inputs++;
			CHECK(!strcmp(get(n, "shape"), "invhouse"), "input %s is not an invhouse", name);
			label_line(label, 0, line, sizeof(line));
			CHECK(!strcmp(line, "input"), "input %s labelled '%s'", name, line);
		} else if (named(name, "out")) {
			outputs++;
			CHECK(!strcmp(get(n, "shape"), "house"), "output %s is not a house", name);
		} else if (named(name, "r")) {
			removed++;
			CHECK(strstr(get(n, "style"), "dashed") != NULL, "removed node %s is not dashed", name);
			CHECK(!strcmp(fill, "#ffcdd2"), "removed node %s filled %s", name, fill);
		} else if (named(name, "b")) {
			blocks++;
			label_line(label, 1, line, sizeof(line));
			int k = atoi(line);
			CHECK(k >= 2 && strstr(line, " nodes"), "block %s: second line '%s'", name, line);
			in_blocks += k;
		} else if (named(name, "n")) {
			op_nodes++;
			label_line(label, 0, line, sizeof(line));
			char op[256];
			memcpy(op, line, sizeof(op));
			char *sp = strstr(op, " (");   /* "Op (domain)" */
			if (sp)
				*sp = 0;
			struct opcount *o = op_slot(op);
			CHECK(o && o->model > 0, "%s: op '%s' is not in the model", name, op);
			if (o) {
				o->drawn++;
				if (want_added < 0) {
					if (!o->fill[0])
						snprintf(o->fill, sizeof(o->fill), "%s", fill);
					CHECK(!strcmp(o->fill, fill), "%s (%s) filled %s, other %s nodes %s", name, op,
					      fill, op, o->fill);
				}
			}
			CHECK(fill[0] && strcmp(fill, "white"), "%s is not filled", name);
			/* the name line is a node name of the model (maybe "...tail") */
			label_line(label, 1, line, sizeof(line));
			int cnt = 0;
			bool found = ir_node_by_name(g, line, &cnt) != NULL;
			if (!found && starts(line, "...")) {
				ir_for_each_node(g, x) {
					size_t a = strlen(x->name), b = strlen(line + 3);
					if (a >= b && !strcmp(x->name + a - b, line + 3)) {
						found = true;
						break;
					}
				}
			}
			if (!found && line[0] == 'n')   /* unnamed nodes show their id */
				found = true;
			CHECK(found, "%s: no node named '%s' in the model", name, line);
			if (!strcmp(fill, "#c8f7c5"))
				added++;
			if (!strcmp(fill, "#ffe0b2"))
				changed++;
		} else if (named(name, "x")) {
			/* the cut ends of long edges (large drawings only) */
		} else {
			CHECK(0, "unexpected node '%s'", name);
		}
	}
	/* edges between drawn nodes (not the legend's) */
	int edges = 0, removed_edges = 0;
	for (Agnode_t *n = agfstnode(G); n; n = agnxtnode(G, n))
		for (Agedge_t *e = agfstout(G, n); e; e = agnxtout(G, e)) {
			if (starts(agnameof(agtail(e)), "legend_"))
				continue;
			if (named(agnameof(agtail(e)), "r") || named(agnameof(aghead(e)), "r"))
				removed_edges++;
			else
				edges++;
		}
	printf("%s: %d op nodes, %d inputs, %d outputs, %d edges, %d legend entries", argv[2], op_nodes, inputs,
	       outputs, edges, legend_nodes);
	if (want_added >= 0)
		printf(", %d added, %d changed, %d removed (%d edges)", added, changed, removed, removed_edges);
	if (collapse)
		printf(", %d blocks of %d nodes", blocks, in_blocks);
	printf("\n");
	CHECK(inputs == model_inputs, "%d inputs drawn, the model has %d", inputs, model_inputs);
	CHECK(outputs == g->n_outputs, "%d outputs drawn, the model has %d", outputs, g->n_outputs);
	if (collapse) {
		CHECK(blocks > 0, "--collapse drew no blocks");
		CHECK(op_nodes + in_blocks == model_nodes, "%d nodes + %d in blocks, the model has %d", op_nodes,
		      in_blocks, model_nodes);
		CHECK(edges <= model_edges, "%d edges, more than the model's %d", edges, model_edges);
	} else {
		CHECK(op_nodes == model_nodes, "%d op nodes drawn, the model has %d (Constants folded)", op_nodes,
		      model_nodes);
		CHECK(edges == model_edges, "%d edges drawn, the model has %d", edges, model_edges);
		for (int i = 0; i < n_ops; i++)
			CHECK(ops[i].model == ops[i].drawn, "op %s: %d drawn, %d in the model", ops[i].op, ops[i].drawn,
			      ops[i].model);
	}
	if (want_added >= 0) {
		CHECK(added == want_added, "%d added nodes drawn, diff says %d", added, want_added);
		CHECK(removed == want_removed, "%d removed nodes drawn, diff says %d", removed, want_removed);
		CHECK(changed == want_changed, "%d changed nodes drawn, diff says %d", changed, want_changed);
	} else if (leg) {
		/* every fill of an op node is in the legend */
		for (int i = 0; i < n_ops; i++) {
			if (!ops[i].drawn || !ops[i].fill[0])
				continue;
			bool in = false;
			for (Agnode_t *n = agfstnode(leg); n && !in; n = agnxtnode(leg, n))
				in = !strcmp(get(n, "fillcolor"), ops[i].fill);
			CHECK(in, "the fill %s of %s is not in the legend", ops[i].fill, ops[i].op);
		}
	}
	agclose(G);
	ir_model_free(m);
	ir_diag_clear(&d);
	return fails ? 1 : 0;
}
