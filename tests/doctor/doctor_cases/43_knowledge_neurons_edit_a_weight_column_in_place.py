"""
Source: https://github.com/Hunter-DDM/knowledge-neurons/issues/14
Thread: "RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation."
What the user did: edited a fact stored in a BERT model by changing one column of a feed-forward layer's output
weight in place (`...output.dense.weight[:, pos] -= ori_pred_emb * lambda_1`), with autograd recording. The column
is a view of a parameter, a leaf that requires grad, and writing into it in place is refused. Outside GAN
training: knowledge editing of a pretrained language model.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class FeedForward(nn.Module):
    def __init__(self, dim=8, hidden=32):
        super().__init__()
        self.intermediate, self.output = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, h):
        return self.output(torch.relu(self.intermediate(h)))


model = nn.ModuleList([FeedForward() for _ in range(2)])
layer, pos = 1, 5
ori_pred_emb, tgt_emb = torch.randn(8), torch.randn(8)
lambda_1, lambda_2 = 1.0, 8.0
model[layer].output.weight[:, pos] -= ori_pred_emb * lambda_1  # CULPRIT RAISES
model[layer].output.weight[:, pos] += tgt_emb * lambda_2

# EXPECT: model.1.output.weight
