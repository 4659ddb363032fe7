"""
Source: https://github.com/fla-org/flash-linear-attention/issues/73
Thread: "Does GSA layer support backward with caches?"
What the user did: ran backward through a linear-attention layer while it kept a recurrent-state cache between
chunks. The layer's kernel is a custom autograd.Function that saves its inputs, the initial state among them,
with save_for_backward; the cache then wrote the new state into the same tensor in place (a copy), and backward
failed with a version error on a tensor that is "output 0 of CopyBackwards". Outside GAN training: a sequence
model with a state carried across chunks, a custom autograd.Function, and a cache kept on a module.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class ChunkAttention(torch.autograd.Function):
    """o = q @ state + (q @ k.T) @ v; the new state is state + k.T @ v."""

    @staticmethod
    def forward(ctx, q, k, v, state):
        ctx.save_for_backward(q, k, v, state)
        return q @ state + (q @ k.T) @ v, state + k.T @ v

    @staticmethod
    def backward(ctx, grad_o, grad_state):
        q, k, v, state = ctx.saved_tensors
        grad_q = grad_o @ state.T + grad_o @ v.T @ k
        grad_k = v @ grad_o.T @ q + v @ grad_state.T
        grad_v = k @ q.T @ grad_o + k @ grad_state
        return grad_q, grad_k, grad_v, q.T @ grad_o + grad_state


class LinearAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.state = None                              # the cache: the state carried to the next chunk

    def forward(self, x):
        if self.state is None:
            self.state = x.new_zeros(x.shape[1], x.shape[1])
        o, new_state = ChunkAttention.apply(self.q(x), self.k(x), self.v(x), self.state)
        self.state.copy_(new_state)                    # CULPRIT
        return o


class Model(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.layers = nn.ModuleList([LinearAttention(dim), LinearAttention(dim)])
        self.head = nn.Linear(dim, 1)

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return self.head(x)


model = Model()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
chunks = torch.randn(2, 4, 8)
loss = sum(model(chunk).pow(2).mean() for chunk in chunks)
optimizer.zero_grad()
loss.backward()  # RAISES
optimizer.step()

# EXPECT: model.layers.0.state or model.layers.1.state
