"""
Source: https://github.com/huggingface/transformers/issues/21381
Thread: "gradient checkpointing disables requires_grad when freezing part of models (fix with use_reentrant=False)"
What the user did: froze the first layers of a BERT-style encoder, the embeddings among them, and trained the rest
with gradient checkpointing, whose default then was torch.utils.checkpoint's reentrant variant. That variant runs
each block's forward under no_grad and gives its output a graph only if one of its inputs requires grad: with the
embeddings frozen none does, so the loss had no graph and backward raised "element 0 of tensors does not require
grad and does not have a grad_fn" (transformers#23170 is the same with LoRA adapters). Outside GAN training:
fine-tuning a transformer with frozen embeddings and activation checkpointing.
"""
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.attn, self.mlp = nn.Linear(dim, dim), nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(),
                                                                 nn.Linear(2 * dim, dim))

    def forward(self, h):
        h = h + torch.tanh(self.attn(h))
        return h + self.mlp(h)


class Encoder(nn.Module):
    def __init__(self, vocab=50, dim=16, depth=3):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])
        self.gradient_checkpointing = True

    def forward(self, ids):
        h = self.embeddings(ids)
        for block in self.blocks:
            h = checkpoint(block, h, use_reentrant=True) if self.gradient_checkpointing else block(h)  # CULPRIT
        return h.mean(1)


encoder = Encoder()
encoder.embeddings.weight.requires_grad_(False)      # freeze the embeddings
optimizer = torch.optim.AdamW([p for p in encoder.parameters() if p.requires_grad], lr=1e-4)
ids, targets = torch.randint(0, 50, (4, 7)), torch.randn(4, 16)
loss = (encoder(ids) - targets).pow(2).mean()
optimizer.zero_grad()
loss.backward()  # RAISES
optimizer.step()

# EXPECT: encoder.blocks.2 or encoder.blocks.0
