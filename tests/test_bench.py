"""The benchmark's code paths, on a few CPU steps (its figures come from real runs, written to results files)."""
import importlib.util
from pathlib import Path

import torch

spec = importlib.util.spec_from_file_location("bench", Path(__file__).resolve().parents[1] / "benchmarks/bench.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
CPU = torch.device("cpu")


def test_time_strategy_reports_a_steady_state_rate(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    row = bench.time_strategy("g_first", False, CPU, steps=3, repeats=3)
    assert row["mode"] == "eager" and len(row["rates"]) == 3
    rate = row["steps_per_s"]                                   # rounded to 0.1: allow that much
    assert rate > 0 and abs(row["us_per_step"] * rate / 1e6 - 1) <= 0.05 / rate + 1e-3
    assert row["x_floor"] > 1


def test_quality_stops_at_the_bar_and_says_when_it_is_missed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    easy = bench.quality(CPU, bar=1e9, max_epochs=3, n=200, limit=640)
    assert easy["reached"] and easy["epochs"] == 1 and easy["train_seconds"] == round(easy["per_epoch"][0]["seconds"], 1)
    hard = bench.quality(CPU, bar=0.0, max_epochs=2, n=200, limit=640)
    assert not hard["reached"] and hard["epochs"] == 2 and hard["train_seconds"] is None
    assert hard["per_epoch"][1]["mnist_fid"] > 0
