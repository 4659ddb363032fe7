"""How good are the digits? Three numbers from a small MNIST classifier shipped with the package (lesson 06).

- MNIST-FID: the Fréchet distance between the classifier's penultimate features of generated images and of
  the 10k MNIST test images (lower is better; real training images score the baseline).
- Classifier score: the Inception Score computed with this classifier (higher is better, at most 10).
- Class coverage: the share of each digit among the samples (uniform is about 0.1 each).

`python -m gan_lessons classifier` trains the classifier (once) and writes gan_lessons/assets/."""
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from gan_lessons import data

ASSETS = Path(__file__).parent / "assets"


class Classifier(nn.Module):
    """About 47k parameters; `features` is the 64-d penultimate layer used by MNIST-FID."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU())
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.features(x))


def train_classifier(root=data.DEFAULT_ROOT, epochs=4, seed=0, out=ASSETS):
    """Train on the 60k training digits, report test accuracy, save weights and a JSON record."""
    torch.manual_seed(seed)
    (x_train, y_train), (x_test, y_test) = data.mnist_tensors(root, True), data.mnist_tensors(root, False)
    net, started = Classifier(), time.perf_counter()
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 2e-3, total_steps=epochs * (len(x_train) // 128))
    for _ in range(epochs):
        order = torch.randperm(len(x_train))
        for i in range(len(x_train) // 128):
            idx = order[i * 128:(i + 1) * 128]
            loss = F.cross_entropy(net(data.to_unit_range(x_train[idx])), y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    accuracy = (predict(net, data.to_unit_range(x_test)).argmax(1) == y_test).float().mean().item()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    torch.save(net.state_dict(), out / "classifier.pt")
    record = {"test_accuracy": round(accuracy, 4), "epochs": epochs, "seed": seed, "torch": torch.__version__,
              "train_seconds": round(time.perf_counter() - started, 1),
              "parameters": sum(p.numel() for p in net.parameters())}
    (out / "classifier.json").write_text(json.dumps(record, indent=2) + "\n")
    return net, record


def load_classifier() -> Classifier:
    net = Classifier()
    net.load_state_dict(torch.load(ASSETS / "classifier.pt", map_location="cpu", weights_only=True))
    return net.eval()


@torch.no_grad()
def predict(net, images, batch=1000):
    """Logits for images in [-1, 1], shape [N, 1, 28, 28]."""
    net.eval()
    return torch.cat([net(images[i:i + batch]) for i in range(0, len(images), batch)])


@torch.no_grad()
def features(net, images, batch=1000):
    net.eval()
    return torch.cat([net.features(images[i:i + batch]) for i in range(0, len(images), batch)]).double()


def frechet_distance(f1: torch.Tensor, f2: torch.Tensor) -> float:
    """||mu1 - mu2||^2 + tr(S1 + S2 - 2 sqrt(S1 S2)); the trace of the root from the eigenvalues of S1 S2."""
    mu1, mu2 = f1.mean(0), f2.mean(0)
    s1, s2 = torch.cov(f1.T), torch.cov(f2.T)
    root_trace = torch.linalg.eigvals(s1 @ s2).real.clamp(min=0).sqrt().sum()
    return float((mu1 - mu2).pow(2).sum() + s1.trace() + s2.trace() - 2 * root_trace)


def classifier_score(logits: torch.Tensor) -> float:
    """Inception Score with our classifier: exp(mean KL(p(y|x) || p(y)))."""
    p = logits.double().softmax(1)
    marginal = p.mean(0, keepdim=True)
    return float((p * (p.clamp_min(1e-12).log() - marginal.log())).sum(1).mean().exp())


def coverage(logits: torch.Tensor) -> list:
    """Share of each digit 0..9 among the images, by the classifier's vote."""
    return [round(v, 4) for v in (torch.bincount(logits.argmax(1), minlength=10).double() / len(logits)).tolist()]


def evaluate(images: torch.Tensor, root=data.DEFAULT_ROOT, net=None) -> dict:
    """All three metrics for images in [-1, 1], against the MNIST test set."""
    net = net or load_classifier()
    test_images = data.to_unit_range(data.mnist_tensors(root, train=False)[0])
    logits = predict(net, images)
    return {"mnist_fid": round(frechet_distance(features(net, images), features(net, test_images)), 3),
            "classifier_score": round(classifier_score(logits), 3),
            "coverage": coverage(logits), "n": len(images)}


def baseline(root=data.DEFAULT_ROOT, n=10000, seed=0) -> dict:
    """The same metrics for n real training images: what a perfect generator would score."""
    train_images = data.mnist_tensors(root, train=True)[0]
    pick = torch.randperm(len(train_images), generator=torch.Generator().manual_seed(seed))[:n]
    return evaluate(data.to_unit_range(train_images[pick]), root)
