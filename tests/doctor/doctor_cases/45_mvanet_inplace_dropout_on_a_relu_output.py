"""
Source: https://github.com/qianyu-dlut/MVANet/issues/2
Thread: "Training error : Relu variables has been modified by an inplace operation"
What the user did: trained the repository's segmentation network, whose transformer feed-forward block applies a
dropout to the ReLU's output. The dropout was built in place, so it overwrote the ReLU's output, which ReLU's
backward reads; the maintainers' fix clones the activation before the dropout. Outside GAN training: dense
prediction with transformer blocks (high-resolution dichotomous segmentation).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class FeedForward(nn.Module):
    def __init__(self, dim=16, hidden=64, p=0.1):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)
        self.activation = nn.ReLU()
        self.dropout = nn.Dropout(p, inplace=True)  # CULPRIT
        self.dropout2 = nn.Dropout(p)

    def forward(self, g_hw_b_c):
        return g_hw_b_c + self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(g_hw_b_c)))))  # CULPRIT


class Refiner(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Conv2d(3, 16, 3, padding=1)
        self.ffn = FeedForward()
        self.head = nn.Conv2d(16, 1, 1)

    def forward(self, image):
        x = self.embed(image)
        b, c, h, w = x.shape
        tokens = self.ffn(x.flatten(2).transpose(1, 2))
        return self.head(tokens.transpose(1, 2).reshape(b, c, h, w))


model = Refiner()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
image, mask = torch.rand(2, 3, 8, 8), (torch.rand(2, 1, 8, 8) > 0.5).float()
loss = F.binary_cross_entropy_with_logits(model(image), mask)
optimizer.zero_grad()
loss.backward()  # RAISES
optimizer.step()

# EXPECT: model.ffn.activation or model.ffn.dropout
