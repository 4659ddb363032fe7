"""
Source: https://github.com/harvardnlp/annotated-transformer/issues/14
Thread: "loss.backward() inside SimpleLossCompute"
What the user noticed: the loss-compute helper calls loss.backward() whether or not it was given an optimizer, so
each validation batch's backward adds its gradients into the parameters' .grad, where nothing clears them: the
first training step after validation applies them together with its own, and the model is trained on the
validation data, silently (a commenter checked it). Outside GAN training: a sequence-to-sequence transformer.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class SimpleLossCompute:
    def __init__(self, generator, criterion, opt=None):
        self.generator, self.criterion, self.opt = generator, criterion, opt

    def __call__(self, x, y):
        loss = self.criterion(self.generator(x).flatten(0, 1), y.flatten())
        loss.backward()  # CULPRIT
        if self.opt is not None:
            self.opt.step()  # CULPRIT
            self.opt.zero_grad()
        return loss.item()


class EncoderDecoder(nn.Module):
    def __init__(self, vocab=20, dim=16):
        super().__init__()
        self.encoder = nn.Sequential(nn.Embedding(vocab, dim), nn.Linear(dim, dim), nn.ReLU())
        self.generator = nn.Linear(dim, vocab)

    def forward(self, src):
        return self.encoder(src)


model = EncoderDecoder()
criterion = nn.CrossEntropyLoss()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)


def run_epoch(batches, loss_compute):
    return sum(loss_compute(model(src), tgt) for src, tgt in batches)


train_batches = [(torch.randint(0, 20, (4, 6)), torch.randint(0, 20, (4, 6))) for _ in range(2)]
val_batches = [(torch.randint(0, 20, (4, 6)), torch.randint(0, 20, (4, 6)))]
for epoch in range(2):
    model.train()
    run_epoch(train_batches, SimpleLossCompute(model.generator, criterion, opt))
    model.eval()
    run_epoch(val_batches, SimpleLossCompute(model.generator, criterion, None))

# SILENT
# EXPECT: opt or self.opt
