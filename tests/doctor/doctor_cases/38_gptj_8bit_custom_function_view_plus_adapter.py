"""
Source: https://github.com/gustavecortal/gpt-j-fine-tuning-example/issues/1
Thread: "Forbidden Custom Function Behavior: Output 0 of DequantizeAndLinearBackward is a view and is being
modified inplace."
What the user did: fine-tuned an 8-bit GPT-J with adapters. Each frozen linear layer computes its output with a
custom autograd.Function that dequantizes the weight, and the layer then adds its adapter's output in place
(`output += self.adapter(input)`). The Function's forward returned a view (its result reshaped back to the
input's batch shape), and autograd forbids writing in place into a view a custom Function returned; the thread's
fix is to return a clone. Outside GAN training: parameter-efficient fine-tuning of a quantized language model.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class DequantizeAndLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, codes, scale):
        weight = codes.float() * scale
        ctx.save_for_backward(codes, scale)
        out = input.reshape(-1, input.shape[-1]) @ weight.t()
        return out.view(*input.shape[:-1], weight.shape[0])  # CULPRIT

    @staticmethod
    def backward(ctx, grad_output):
        codes, scale = ctx.saved_tensors
        return grad_output @ (codes.float() * scale), None, None


class FrozenLinear8bit(nn.Module):
    def __init__(self, dim_in, dim_out, rank=2):
        super().__init__()
        weight = torch.randn(dim_out, dim_in)
        self.scale = nn.Parameter(weight.abs().amax() / 127, requires_grad=False)
        self.register_buffer("codes", (weight / self.scale).round().to(torch.int8))
        self.adapter = nn.Sequential(nn.Linear(dim_in, rank, bias=False), nn.Linear(rank, dim_out, bias=False))

    def forward(self, input):
        output = DequantizeAndLinear.apply(input, self.codes, self.scale)
        output += self.adapter(input)  # CULPRIT
        return output


layer = FrozenLinear8bit(16, 16)
optimizer = torch.optim.Adam(layer.adapter.parameters(), lr=1e-4)
hidden = torch.randn(2, 5, 16)
loss = layer(hidden).pow(2).mean()  # RAISES
optimizer.zero_grad()
loss.backward()
optimizer.step()

# EXPECT: output
