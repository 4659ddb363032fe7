"""
Source: https://github.com/pytorch/examples/pull/779
Thread: "[word_language_model] Fix grad in-place operation"
What the user did: reported that the word-level RNN language model example's hand-written
SGD step, which adds -lr * p.grad to every parameter with an in-place add_ outside
torch.no_grad(), raises "a leaf Variable that requires grad is being used in an in-place
operation"; the PR changed it to update p.data instead.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)


class RNNModel(nn.Module):
    def __init__(self, ntoken=30, ninp=8, nhid=16):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, x, hidden=None):
        out, hidden = self.rnn(self.encoder(x), hidden)
        return self.decoder(out), hidden


model = RNNModel()
criterion = nn.CrossEntropyLoss()
lr, clip = 20.0, 0.25

data = torch.randint(0, 30, (6, 2))      # (seq, batch)
targets = torch.randint(0, 30, (6, 2))
model.zero_grad()
output, hidden = model(data)
loss = criterion(output.view(-1, 30), targets.view(-1))
loss.backward()
torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
for p in model.parameters():
    p.add_(p.grad, alpha=-lr)  # CULPRIT # RAISES

# EXPECT: model.encoder.weight
