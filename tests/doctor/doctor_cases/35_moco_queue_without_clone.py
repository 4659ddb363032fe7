"""
Source: https://github.com/facebookresearch/moco/issues/21
Thread: "Question about cloning the queue"
What the user asked: why MoCo's forward takes the negatives from `self.queue.clone().detach()` rather than the
queue itself. The maintainer's answer: the queue is changed in place by `_dequeue_and_enqueue` in the same forward,
so without the clone PyTorch raises an error at backward. This is the forward without the clone. Outside GAN
training: contrastive learning with a queue of keys kept as a module buffer and written under @torch.no_grad().
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class MoCo(nn.Module):
    def __init__(self, dim=8, K=16, m=0.99, T=0.07):
        super().__init__()
        self.K, self.m, self.T = K, m, T
        self.encoder_q = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, dim))
        self.encoder_k = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, dim))
        for q, k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            k.data.copy_(q.data)
            k.requires_grad = False
        self.register_buffer("queue", F.normalize(torch.randn(dim, K), dim=0))
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        for q, k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            k.data = k.data * self.m + q.data * (1.0 - self.m)

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys):
        ptr = int(self.queue_ptr)
        self.queue[:, ptr:ptr + keys.shape[0]] = keys.T  # CULPRIT
        self.queue_ptr[0] = (ptr + keys.shape[0]) % self.K

    def forward(self, im_q, im_k):
        q = F.normalize(self.encoder_q(im_q), dim=1)
        with torch.no_grad():
            self._momentum_update_key_encoder()
            k = F.normalize(self.encoder_k(im_k), dim=1)
        l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
        l_neg = torch.einsum("nc,ck->nk", [q, self.queue])        # the queue itself, not a clone
        logits = torch.cat([l_pos, l_neg], dim=1) / self.T
        labels = torch.zeros(logits.shape[0], dtype=torch.long)
        self._dequeue_and_enqueue(k)
        return logits, labels


model = MoCo()
optimizer = torch.optim.SGD(model.encoder_q.parameters(), lr=0.03, momentum=0.9)
images = torch.randn(4, 12)
logits, labels = model(images + 0.1 * torch.randn(4, 12), images + 0.1 * torch.randn(4, 12))
loss = F.cross_entropy(logits, labels)
optimizer.zero_grad()
loss.backward()  # RAISES
optimizer.step()

# EXPECT: model.queue
