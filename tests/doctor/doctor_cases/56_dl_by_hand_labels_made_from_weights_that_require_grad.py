"""
Source: https://github.com/zhangyu2234/Deep-learning-by-hand
Thread: the repository's notebook "1.3 Problems I encountered" (Chapter 1), which opens with "RuntimeError: Trying to
backward through the graph a second time ..." and works out where it comes from.
What the author found: the synthetic data set is made from "true" weights, `Y = torch.mm(X, true_W) + true_b`, and
true_W and true_b were created with requires_grad=True. So the labels carry a graph: every mini-batch of labels the
data loader yields is a slice of that one graph, the first batch's `l.backward()` consumes it, and the second batch
fails. The fix that follows: labels are data, so make true_W and true_b without requires_grad (or detach Y).
Computing Y again in every pass would hide the error but keep sending gradients into weights that nobody trains.
Outside GAN training: a fully connected layer on synthetic data, with hand-written SGD.
"""
import torch

torch.manual_seed(0)

num_samples, num_features, num_hiddens = 200, 2, 2
X = torch.randn((num_samples, num_features), dtype=torch.float32)
true_W = torch.randn((num_hiddens, 1), requires_grad=True, dtype=torch.float32)
true_b = torch.randn(1, requires_grad=True, dtype=torch.float32)
Y = torch.mm(X, true_W) + true_b


def relu(x):
    return torch.max(x, torch.zeros_like(x))


def loss(y_hat, y):
    return ((y_hat - y.reshape(y_hat.shape)) ** 2 / 2).sum()


def sgd(params, lr, batch_size):
    with torch.no_grad():
        for param in params:
            param -= lr * param.grad / batch_size
            param.grad.zero_()


def DataLoader(X, Y, batch_size, shuffle=True):
    idx = torch.randperm(len(X)) if shuffle else torch.arange(len(X))
    for i in range(0, len(X), batch_size):
        j = idx[i:i + batch_size]
        yield X[j], Y[j]


def fc(x, w, b):
    return relu(torch.mm(x, w) + b)


W = torch.normal(0, 0.01, size=(num_hiddens, 1), requires_grad=True)
b = torch.zeros(1, requires_grad=True)
batch_size, lr, num_epochs = 20, 0.01, 2
for epoch in range(num_epochs):
    for x, y in DataLoader(X, Y, batch_size, shuffle=True):
        l = loss(fc(x, W, b), y)
        l.backward()  # CULPRIT (first batch) # RAISES (second batch)
        sgd([W, b], lr, batch_size)

# EXPECT: Y or true_W
