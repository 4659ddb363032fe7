"""
Source: https://github.com/pytorch/pytorch/issues/26596
Thread: "nn.Embedding with max_norm shows unstable behavior and causes sometimes runtime error."
What the user did: used an embedding table twice in one loss, first whole (`embedding.weight @ W.t()`), then through
the layer itself (`embedding(idx)`), with max_norm set. With max_norm, the embedding's forward renormalises the
rows it looks up in place, inside torch.nn.functional.embedding and under no_grad, so the weight the first product
saved has changed by the backward (the fix that landed was a note in the docs: clone the weight, or swap the two
lines). Outside GAN training: embeddings with a norm constraint, word2vec and knowledge-graph models.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
n, d, m = 3, 5, 7
embedding = nn.Embedding(n, d, max_norm=True)
W = torch.randn((m, d), requires_grad=True)
optimizer = torch.optim.Adam(list(embedding.parameters()) + [W], lr=1e-3)

optimizer.zero_grad()
idx = torch.tensor([1, 2])
a = embedding.weight @ W.t()
b = embedding(idx) @ W.t()  # CULPRIT
out = a.unsqueeze(0) + b.unsqueeze(1)
loss = out.sigmoid().prod()
loss.backward()  # RAISES
optimizer.step()

# EXPECT: embedding.weight
