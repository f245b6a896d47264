#!/usr/bin/env python3
"""Export models ogsh's tests never use, the way users export them, into the current folder:
torchvision Swin-T and ConvNeXt-tiny (float32 and float16), and a small RoBERTa
from transformers (random weights), with torch.onnx.export's default exporter,
opset 20, a dynamic batch (and sequence for RoBERTa)."""
import torch
import torchvision
import transformers

torch.manual_seed(0)
B = torch.export.Dim("batch")
for name, ctor in (("swin", torchvision.models.swin_t), ("convnext", torchvision.models.convnext_tiny)):
    m = ctor().eval()
    x = torch.randn(2, 3, 224, 224)
    for dt, tag in ((torch.float32, "fp32"), (torch.float16, "fp16")):
        with torch.no_grad():
            torch.onnx.export(m.to(dt), (x.to(dt),), f"{name}_{tag}.onnx", input_names=["x"], output_names=["y"],
                              dynamic_shapes=({0: B},), opset_version=20, external_data=False)
        print("wrote", f"{name}_{tag}.onnx")
cfg = transformers.RobertaConfig(hidden_size=256, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512,
                                 vocab_size=1000, max_position_embeddings=140)
r = transformers.RobertaModel(cfg).eval()
ids = torch.randint(5, 1000, (2, 64))
mask = torch.ones(2, 64, dtype=torch.long)
mask[1, 50:] = 0
S = torch.export.Dim("seq")
for dt, tag in ((torch.float32, "fp32"), (torch.float16, "fp16")):
    with torch.no_grad():
        torch.onnx.export(r.to(dt), (ids, mask), f"roberta_{tag}.onnx", input_names=["input_ids", "attention_mask"],
                          output_names=["out"], dynamic_shapes=({0: B, 1: S}, {0: B, 1: S}), opset_version=20,
                          external_data=False)
    print("wrote", f"roberta_{tag}.onnx")
