"""
Source: https://github.com/chxy95/Deep-Mutual-Learning/issues/5
Thread: "Trying to backward through the graph a second time, but the buffers have already been freed. Specify
retain_graph=True when calling backward the first time."
What the reporter found: reproducing deep mutual learning (several models trained together, each also pulled
toward its peers' predictions by a KL term), their loop failed when updating the second network, and they asked
whether `loss.backward(retain_graph=True)` was right. One forward per model fills `outputs`; then each model in
turn takes a step on its cross-entropy plus the KL to the others' outputs. With the peer's output used as the KL
target without detaching it, model 0's backward also runs through model 1's graph and frees it, and model 1's loss
then fails. Their solution in the thread: "check whether the teacher model's output is detached from the graph";
the repository wraps the peer's output in `Variable(...)`, which detaches it, and the maintainer could not
reproduce the error. The fix: `F.softmax(outputs[j].detach(), dim=1)`; retain_graph=True would let model 0's loss
push gradients into model 1. Outside GAN training: mutual learning / online distillation of classifiers.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable

torch.manual_seed(0)

model_num = 2
models = [nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 5)) for _ in range(model_num)]
optimizers = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in models]
loss_ce = nn.CrossEntropyLoss()
loss_kl = nn.KLDivLoss(reduction='batchmean')
train_loader = [(torch.randn(4, 8), torch.randint(0, 5, (4,))) for _ in range(2)]

for i, (images, labels) in enumerate(train_loader):
    images, labels = Variable(images), Variable(labels)
    outputs = []
    for model in models:
        outputs.append(model(images))
    for i in range(model_num):
        ce_loss = loss_ce(outputs[i], labels)
        kl_loss = 0
        for j in range(model_num):
            if i != j:
                kl_loss += loss_kl(F.log_softmax(outputs[i], dim=1),
                                   F.softmax(outputs[j], dim=1))
        loss = ce_loss + kl_loss / (model_num - 1)
        optimizers[i].zero_grad()
        loss.backward()  # CULPRIT (model 0) # RAISES (model 1)
        optimizers[i].step()

# EXPECT: outputs[j] or outputs[1]
