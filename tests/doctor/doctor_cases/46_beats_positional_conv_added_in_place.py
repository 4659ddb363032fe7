"""
Source: https://github.com/microsoft/unilm/pull/999
Thread: "Update L. 116 of backbone.py"
What the user did: fine-tuned an audio transformer (BEATs) whose encoder adds a convolutional positional embedding
to its input in place (`x += x_conv`). The convolution saved its input, a transposed view of that same `x`, for its
backward, so the addition changed a tensor the backward needs; the pull request writes `x = x.clone() + x_conv`.
Outside GAN training: fine-tuning a pretrained audio model.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class TransformerEncoder(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.pos_conv = nn.Conv1d(dim, dim, kernel_size=5, padding=2, groups=4)
        self.layer_norm = nn.LayerNorm(dim)
        self.layer = nn.TransformerEncoderLayer(dim, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True)

    def forward(self, x):
        x_conv = self.pos_conv(x.transpose(1, 2))
        x_conv = x_conv.transpose(1, 2)
        x += x_conv  # CULPRIT
        return self.layer(self.layer_norm(x))


class AudioClassifier(nn.Module):
    def __init__(self, dim=16, classes=5):
        super().__init__()
        self.frontend = nn.Linear(40, dim)
        self.encoder = TransformerEncoder(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, fbank):
        return self.head(self.encoder(self.frontend(fbank)).mean(1))


model = AudioClassifier()
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
fbank, labels = torch.randn(2, 12, 40), torch.tensor([1, 3])
loss = nn.functional.cross_entropy(model(fbank), labels)
optimizer.zero_grad()
loss.backward()  # RAISES
optimizer.step()

# EXPECT: model.encoder.pos_conv
