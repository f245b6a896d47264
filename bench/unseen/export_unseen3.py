#!/usr/bin/env python3
"""Two more architectures the tests never use, exported on the GPU machine into
the current folder, float32 and float16: torchvision DenseNet-121 (3x3 convs of
128 -> 32 channels at 56x56 down to 7x7, which the CPU computes by Winograd;
default exporter, opset 20, dynamic batch) and transformers ELECTRA (2 layers,
random weights; the TorchScript exporter, dynamo=False, at opset 14, so GELU
arrives decomposed and optimize fuses it into the FFN's Gemm)."""
import torch
import torchvision
import transformers

torch.manual_seed(0)
dev = "cuda" if torch.cuda.is_available() else "cpu"
m = torchvision.models.densenet121().eval()
x = torch.randn(2, 3, 224, 224)
for dt, tag in ((torch.float32, "fp32"), (torch.float16, "fp16")):
    with torch.no_grad():
        torch.onnx.export(m.to(dev, dt), (x.to(dev, dt),), f"densenet_{tag}.onnx", input_names=["x"],
                          output_names=["y"], dynamic_shapes=({0: torch.export.Dim("batch")},), opset_version=20,
                          external_data=False)
    print("wrote", f"densenet_{tag}.onnx", flush=True)
class Electra(torch.nn.Module):
    """ELECTRA's encoder called with keywords (its forward's positions vary across versions)."""

    def __init__(self):
        super().__init__()
        self.m = transformers.ElectraModel(transformers.ElectraConfig(num_hidden_layers=2))

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


e = Electra().eval()
ids = torch.randint(5, 1000, (2, 40))
mask = torch.ones(2, 40, dtype=torch.long)
mask[1, 33:] = 0
for dt, tag in ((torch.float32, "fp32"), (torch.float16, "fp16")):
    with torch.no_grad():
        torch.onnx.export(e.to(dev, dt), (ids.to(dev), mask.to(dev)), f"electra_{tag}.onnx",
                          input_names=["input_ids", "attention_mask"], output_names=["out"], opset_version=14,
                          dynamo=False, dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                                                      "attention_mask": {0: "batch", 1: "seq"}})
    print("wrote", f"electra_{tag}.onnx", flush=True)
