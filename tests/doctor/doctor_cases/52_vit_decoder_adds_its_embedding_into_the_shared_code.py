"""
Source: https://github.com/thuanz123/enhancing-transformers/issues/11
Thread: "An inplace operation in the forward process"
What the reporter found: the ViT decoder of an image tokenizer adds its positional embedding to its input tokens in
place (`token += self.de_pos_embedding`). The tokens are a view of the quantized code the caller passes in, so the
first decoder changes the caller's tensor, which the quantizer's own backward and a second decoder both rely on; the
backward then fails. The fix in the thread: `token = token + self.de_pos_embedding`. Outside GAN training: a
vector-quantized image tokenizer with two decoders reading one code.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class ViTDecoder(nn.Module):
    def __init__(self, tokens=16, dim=8, patch=4):
        super().__init__()
        self.de_pos_embedding = nn.Parameter(torch.randn(1, tokens, dim) * 0.02)
        self.block = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.GELU())
        self.to_pixel = nn.Linear(dim, patch * patch * 3)

    def forward(self, token):
        token += self.de_pos_embedding  # CULPRIT
        return self.to_pixel(self.block(token))


codebook = nn.Embedding(32, 8)
encoder = nn.Linear(48, 8)
decoder_a, decoder_b = ViTDecoder(), ViTDecoder()
params = [*codebook.parameters(), *encoder.parameters(), *decoder_a.parameters(), *decoder_b.parameters()]
optimizer = torch.optim.Adam(params, lr=1e-4)

patches = torch.rand(2, 16, 48)
z = encoder(patches)
distances = torch.cdist(z, codebook.weight.expand(2, -1, -1))
z_q = codebook(distances.argmin(-1))
quant = z + (z_q - z).detach()                      # straight-through estimator
commit = F.mse_loss(z, z_q.detach()) + F.mse_loss(z_q, z.detach())
rec_a = decoder_a(quant)
rec_b = decoder_b(quant)
loss = F.mse_loss(rec_a, patches) + F.mse_loss(rec_b, patches) + commit
optimizer.zero_grad()
loss.backward()  # RAISES
optimizer.step()

# EXPECT: quant
