#!/usr/bin/env python3
"""
export_tiny_transformers.py - exports tiny ViT (torchvision), BERT and GPT-2
(transformers) with both of torch.onnx.export's exporters (dynamo=True, the
default, and dynamo=False, TorchScript), opset 20, batch 2, into
tests/models/exported/. The files are committed: CI has no torch. They show
the node patterns fuse-qkv must match (see tests/passes/test_fuse_qkv.py).

usage: export_tiny_transformers.py [OUTDIR]   (needs torch, torchvision, transformers)
"""
import os
import sys

import torch


def models():
    import torchvision
    import transformers
    torch.manual_seed(0)
    vit = torchvision.models.VisionTransformer(image_size=16, patch_size=8, num_layers=2, num_heads=4,
                                               hidden_dim=32, mlp_dim=64, num_classes=10).eval()
    torch.nn.init.normal_(vit.heads.head.weight, std=0.2)   # torchvision starts the head at zero
    yield "vit", vit, (torch.randn(2, 3, 16, 16),), ["pixels"]
    bcfg = transformers.BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=64, max_position_embeddings=32)
    bert = transformers.BertModel(bcfg, add_pooling_layer=False).eval()
    ids = torch.randint(0, 50, (2, 10))
    yield "bert", bert, (ids, torch.ones(2, 10, dtype=torch.int64)), ["input_ids", "attention_mask"]
    gcfg = transformers.GPT2Config(vocab_size=50, n_embd=32, n_layer=2, n_head=4, n_positions=32, use_cache=False)
    gpt2 = transformers.GPT2Model(gcfg).eval()
    yield "gpt2", gpt2, (ids, torch.ones(2, 10, dtype=torch.int64)), ["input_ids", "attention_mask"]


class Wrap1(torch.nn.Module):
    """The first output only (transformers' models return dataclasses)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        out = self.m(x)
        return out if isinstance(out, torch.Tensor) else out[0]


class Wrap2(Wrap1):
    def forward(self, x, mask):
        return self.m(x, attention_mask=mask)[0]


def strip(path):
    """Drops the doc strings and metadata (source stack traces) the exporters write: a third of the bytes."""
    import onnx
    m = onnx.load(path)
    for n in m.graph.node:
        n.doc_string = ""
        del n.metadata_props[:]
    for v in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output) + list(m.graph.initializer):
        v.doc_string = ""
        del v.metadata_props[:]
    del m.metadata_props[:]
    m.graph.doc_string = ""
    onnx.save(m, path)


def main():
    # the fused fast path of nn.MultiheadAttention has no ONNX export (TorchScript)
    torch.backends.mha.set_fastpath_enabled(False)
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "exported")
    os.makedirs(outdir, exist_ok=True)
    for name, m, args, names in models():
        w = (Wrap1 if len(args) == 1 else Wrap2)(m).eval()
        for dynamo in (True, False):
            path = os.path.join(outdir, "%s_%s.onnx" % (name, "dynamo" if dynamo else "ts"))
            axes = {n: {0: "batch"} for n in names}
            axes["y"] = {0: "batch"}
            kw = dict(input_names=names, output_names=["y"], opset_version=20, dynamo=dynamo, dynamic_axes=axes)
            if dynamo:
                kw["external_data"] = False
            with torch.no_grad():
                torch.onnx.export(w, args, path, **kw)
            strip(path)
            print(path, os.path.getsize(path))


if __name__ == "__main__":
    main()
