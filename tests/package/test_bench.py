"""The benchmark's code paths, on a few CPU steps (its figures come from real runs, written to results files)."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))                     # bench imports dcgan_style from beside it
spec = importlib.util.spec_from_file_location("bench", BENCHMARKS / "bench.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
CPU = torch.device("cpu")
RATES = {"matmul_gflops": 100.0, "copy_gb_s": 10.0}


def test_floor_is_the_larger_of_compute_and_adam_traffic():
    f = bench.floor_us(4.783e9, 3_300_000, RATES)
    assert f["compute_floor_us"] == pytest.approx(47830.0) and f["adam_memory_floor_us"] == pytest.approx(9240.0)
    assert f["floor_us"] == f["compute_floor_us"]
    slow_memory = bench.floor_us(1e9, 3_300_000, {"matmul_gflops": 1000.0, "copy_gb_s": 1.0})
    assert slow_memory["floor_us"] == slow_memory["adam_memory_floor_us"]


def test_step_flops_count_only_matmuls_and_convolutions():
    # depends only on the shapes: batch 64 through seed 000's models
    assert bench.step_flops("d_first_reuse_fake") == 4_783_325_184
    assert bench.step_flops("one_forward") < bench.step_flops("d_first_reuse_fake")   # one D forward fewer


def test_windows_are_interleaved_and_alternate_their_order():
    calls = []
    times = bench.interleaved({"eager": lambda: calls.append("eager"), "fast": lambda: calls.append("fast")}, 3)
    assert calls == ["eager", "fast", "fast", "eager", "eager", "fast"]
    assert all(len(t) == 3 for t in times.values())


def test_eager_row_reports_a_median_step_time_against_its_floor(tmp_path):
    floor = bench.floor_us(bench.step_flops("g_first"), 3_300_000, RATES)
    row = bench.eager_vs_fast("g_first", CPU, steps=2, rounds=3, fast=False, tmp=str(tmp_path), floor=floor)
    eager = row["eager"]
    assert len(eager["window_s"]) == 3 and "fast" not in row and "fast_over_eager" not in row
    median_ms = sorted(eager["window_s"])[1] / 2 * 1000
    assert eager["ms_per_step"] == pytest.approx(median_ms, abs=0.26)      # window_s is rounded to 1 ms, over 2 steps
    assert eager["x_floor"] == pytest.approx(eager["ms_per_step"] * 1000 / floor["floor_us"], rel=0.01)


def test_trainer_and_dataloader_loops_are_timed_against_each_other(tmp_path):
    v = bench.versus_dataloader(CPU, steps=2, rounds=2, tmp=str(tmp_path))
    assert list(v) == ["trainer", "dcgan_style_0_workers", "dcgan_style_2_workers"]
    assert v["trainer"]["time_over_trainer_median"] == 1.0 and all(x["images_per_s"] > 0 for x in v.values())


def test_quality_stops_at_the_bar_and_says_when_it_is_missed(tmp_path):
    easy = bench.quality(CPU, seeds=(0,), bar=1e9, max_epochs=3, n=200, limit=640, tmp=str(tmp_path))
    run = easy["runs"][0]
    assert easy["reached"] == "1 of 1 seeds" and run["epochs"] == 1
    assert run["train_seconds"] == round(run["per_epoch"][0]["seconds"], 1) == easy["median_train_seconds"]
    hard = bench.quality(CPU, seeds=(0,), bar=0.0, max_epochs=2, n=200, limit=640, tmp=str(tmp_path / "hard"))
    run = hard["runs"][0]
    assert hard["reached"] == "0 of 1 seeds" and run["epochs"] == 2 and run["train_seconds"] is None
    assert hard["median_train_seconds"] is None and run["per_epoch"][1]["mnist_fid"] > 0


def test_the_dcgan_style_loop_is_timed_to_the_same_bar(tmp_path):
    easy = bench.quality_dcgan_style(CPU, seeds=(0,), bar=1e9, max_epochs=3, n=200, workers=0, limit=640)
    assert easy["reached"] == "1 of 1 seeds" and easy["runs"][0]["epochs"] == 1 and easy["median_train_seconds"] > 0
    hard = bench.quality_dcgan_style(CPU, seeds=(0,), bar=0.0, max_epochs=2, n=200, workers=0, limit=640)
    assert hard["reached"] == "0 of 1 seeds" and hard["runs"][0]["epochs"] == 2 and hard["median_train_seconds"] is None
    committed = json.loads((BENCHMARKS / "results" / "2026-11-23_cpu.json").read_text())
    text = bench.markdown({**committed, "quality_dcgan_style": hard})
    assert text.startswith(bench.markdown(committed)) and "DCGAN-style, 0 workers, to the same bar: seed 0: not " \
        "within 2 epochs. Reached by 0 of 1 seeds" in text
