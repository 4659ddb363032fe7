"""
Source: https://github.com/facebookresearch/fairseq/issues/251
Thread: "Problem About Changing the encoder_out"
What the user did: while decoding in a fairseq encoder-decoder model, they overwrote a
channel slice of the encoder output in place (encoder_out[0][:, :, j] = f(...)), after
the decoder's attention had already used that tensor; backward then failed. A maintainer
answered to copy the tensor instead of modifying it in place.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)

V, E, H, B, S, T = 20, 8, 16, 2, 5, 3
embed = nn.Embedding(V, E)
encoder = nn.LSTM(E, H, batch_first=True)
dec_cell = nn.GRUCell(E + H, H)
out_proj = nn.Linear(H, V)
params = [p for m in (embed, encoder, dec_cell, out_proj) for p in m.parameters()]
optimizer = optim.Adam(params, lr=1e-3)

src = torch.randint(0, V, (B, S))
tgt = torch.randint(0, V, (B, T + 1))

enc_out, _ = encoder(embed(src))          # (B, S, H)
h = torch.zeros(B, H)                      # decoder initial state
loss = 0.0
for t in range(T):
    # dot-product attention over the encoder states (bmm saves enc_out)
    scores = torch.bmm(enc_out, h.unsqueeze(2)).squeeze(2)
    attn = F.softmax(scores, dim=1)
    context = torch.bmm(attn.unsqueeze(1), enc_out).squeeze(1)
    h = dec_cell(torch.cat([embed(tgt[:, t]), context], dim=1), h)
    loss = loss + F.cross_entropy(out_proj(h), tgt[:, t + 1])
    if t == 0:
        j = 3
        enc_out[:, :, j] = torch.tanh(enc_out[:, :, j])  # CULPRIT

optimizer.zero_grad()
loss.backward()  # RAISES
optimizer.step()

# EXPECT: enc_out
