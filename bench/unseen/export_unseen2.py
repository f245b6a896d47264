#!/usr/bin/env python3
"""Two more architectures the tests never use, exported on the GPU machine into
the current folder, float32 and float16: torchvision EfficientNet-B0 (depthwise
3x3 and 5x5 at strides 1 and 2, squeeze-excite; default exporter, opset 20,
dynamic batch) and transformers DistilBERT (random weights; the TorchScript
exporter, dynamo=False, at opset 14, so LayerNorm and GELU arrive decomposed)."""
import torch
import torchvision
import transformers

torch.manual_seed(0)
m = torchvision.models.efficientnet_b0().eval()
x = torch.randn(2, 3, 224, 224)
for dt, tag in ((torch.float32, "fp32"), (torch.float16, "fp16")):
    with torch.no_grad():
        torch.onnx.export(m.to(dt), (x.to(dt),), f"effnet_{tag}.onnx", input_names=["x"], output_names=["y"],
                          dynamic_shapes=({0: torch.export.Dim("batch")},), opset_version=20, external_data=False)
    print("wrote", f"effnet_{tag}.onnx", flush=True)
d = transformers.DistilBertModel(transformers.DistilBertConfig(n_layers=2)).eval()
ids = torch.randint(5, 1000, (2, 48))
mask = torch.ones(2, 48, dtype=torch.long)
mask[1, 40:] = 0
for dt, tag in ((torch.float32, "fp32"), (torch.float16, "fp16")):
    dev = "cuda" if dt == torch.float16 and torch.cuda.is_available() else "cpu"
    with torch.no_grad():
        torch.onnx.export(d.to(dev, dt), (ids.to(dev), mask.to(dev)), f"distilbert_{tag}.onnx",
                          input_names=["input_ids", "attention_mask"], output_names=["out"], opset_version=14,
                          dynamo=False, dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                                                      "attention_mask": {0: "batch", 1: "seq"}})
    print("wrote", f"distilbert_{tag}.onnx", flush=True)
