"""
Source: https://github.com/meta-llama/llama/issues/841
Thread: "Cache"
What the user did: fine-tuned LLaMA with the reference model code, whose attention layers keep a key/value cache
as plain tensor attributes (cache_k, cache_v) and write each forward's keys and values into them by slice
assignment. In training, the write gives the cache the graph of that forward; the cache is kept across iterations,
so the next forward's attention reads keys whose graph reaches back into the last iteration's, already freed by its
backward: "Trying to backward through the graph a second time". Outside GAN training: a transformer's inference
cache left on during training.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Attention(nn.Module):
    def __init__(self, dim=16, max_batch=4, max_seq=8):
        super().__init__()
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.cache_k = torch.zeros(max_batch, max_seq, dim)
        self.cache_v = torch.zeros(max_batch, max_seq, dim)

    def forward(self, x, start_pos):
        bsz, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        self.cache_k[:bsz, start_pos:start_pos + seqlen] = xk  # CULPRIT
        self.cache_v[:bsz, start_pos:start_pos + seqlen] = xv  # CULPRIT
        keys = self.cache_k[:bsz, :start_pos + seqlen]
        values = self.cache_v[:bsz, :start_pos + seqlen]
        scores = F.softmax(xq @ keys.transpose(1, 2) / 4.0, dim=-1)
        return self.wo(scores @ values)


class Transformer(nn.Module):
    def __init__(self, vocab=32, dim=16, depth=2):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([Attention(dim) for _ in range(depth)])
        self.output = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens, start_pos=0):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = h + layer(h, start_pos)
        return self.output(h)


model = Transformer()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(2):
    tokens = torch.randint(0, 32, (2, 8))
    logits = model(tokens[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, 32), tokens[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()  # RAISES
    optimizer.step()

# EXPECT: model.layers.0.cache_k or model.layers.1.cache_k or model.layers.0.cache_v or model.layers.1.cache_v
