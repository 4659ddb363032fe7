"""
Source: https://github.com/GBLin5566/toward-controlled-generation-of-text-pytorch/issues/8
Thread: "RuntimeError: Trying to backward through the graph a second time, but the buffers
have already been freed. Specify retain_graph=True when calling backward the first time."
What the user did: ran the text-VAE training step (train_vae_with_attr_loss), which
failed at total_vae_loss.backward() after the first batch. In that script the decoder's
soft one-hot output `next_word` is kept alive across batches (the loop checks whether the
name already exists), so the next batch starts decoding from the previous batch's output
and its backward re-enters the previous, already freed graph.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)

V, H, Z, B, T = 12, 16, 4, 3, 5


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, 8)
        self.gru = nn.GRU(8, H, batch_first=True)
        self.to_mean = nn.Linear(H, Z)
        self.to_logvar = nn.Linear(H, Z)

    def forward(self, x):
        _, h = self.gru(self.emb(x))
        self.z_mean = self.to_mean(h[0])
        self.z_logvar = self.to_logvar(h[0])
        return self.z_mean + torch.randn_like(self.z_mean) * torch.exp(0.5 * self.z_logvar)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.init_h = nn.Linear(Z, H)
        self.cell = nn.GRUCell(V, H)
        self.out = nn.Linear(H, V)

    def forward(self, word_onehot, hidden, temp=0.5):
        hidden = self.cell(word_onehot, hidden)
        pre_soft = self.out(hidden)
        return F.softmax(pre_soft / temp, dim=1), hidden, pre_soft


def latent_loss(mean, logvar):
    return -0.5 * torch.mean(1 + logvar - mean.pow(2) - logvar.exp())


encoder, decoder = Encoder(), Decoder()
vae_opt = optim.Adam(list(encoder.parameters()) + list(decoder.parameters()), lr=1e-3)
bos = F.one_hot(torch.zeros(B, dtype=torch.long), V).float()

for batch in range(2):
    tokens = torch.randint(0, V, (B, T))
    z = encoder(tokens)
    hidden = decoder.init_h(z)
    vae_loss = 0.0
    for t in range(T - 1):
        if 'next_word' in locals():
            word = next_word            # leftover from the previous step -- or previous batch
        else:
            word = bos
        output, hidden, pre_soft = decoder(word, hidden)
        next_word = output
        vae_loss = vae_loss + F.cross_entropy(pre_soft, tokens[:, t + 1])
    ll = latent_loss(encoder.z_mean, encoder.z_logvar)
    total_vae_loss = vae_loss + ll
    vae_opt.zero_grad()
    total_vae_loss.backward()  # CULPRIT (batch 0) # RAISES (batch 1)
    vae_opt.step()

# EXPECT: next_word
