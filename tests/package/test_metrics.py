"""The quality metric: the shipped classifier, the Fréchet distance, the classifier score, coverage."""
import json

import pytest
import torch

from gan_lessons import data, metrics


@pytest.fixture(scope="module")
def test_set():
    x, y = data.mnist_tensors(train=False)
    return data.to_unit_range(x), y


def test_shipped_classifier_reaches_its_recorded_accuracy(test_set):
    x, y = test_set
    accuracy = (metrics.predict(metrics.load_classifier(), x).argmax(1) == y).float().mean().item()
    record = json.loads((metrics.ASSETS / "classifier.json").read_text())
    assert accuracy >= 0.99
    assert round(accuracy, 4) == record["test_accuracy"]


def test_frechet_distance_properties():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(5000, 8, generator=g).double(), torch.randn(5000, 8, generator=g).double()
    assert metrics.frechet_distance(a, a) == pytest.approx(0, abs=1e-6)
    assert metrics.frechet_distance(a, b) < 0.05
    # a pure mean shift of 3 in every one of 8 dimensions costs 8 * 9 = 72
    assert metrics.frechet_distance(a, a + 3) == pytest.approx(72, rel=1e-6)


def test_classifier_score_bounds():
    sure = torch.eye(10).repeat(10, 1) * 50      # confident and balanced: score 10
    assert metrics.classifier_score(sure) == pytest.approx(10, rel=1e-3)
    same = torch.zeros(100, 10)
    same[:, 3] = 50                              # confident, one class only: score 1
    assert metrics.classifier_score(same) == pytest.approx(1, rel=1e-3)
    assert metrics.coverage(same)[3] == 1.0


def test_real_train_images_score_far_better_than_noise(test_set):
    real = metrics.baseline(n=2000)
    noise = metrics.evaluate(torch.rand(2000, 1, 28, 28) * 2 - 1)
    assert real["mnist_fid"] < 5 < noise["mnist_fid"]
    assert real["classifier_score"] > 9 > noise["classifier_score"]
    assert all(0.07 < share < 0.14 for share in real["coverage"])
