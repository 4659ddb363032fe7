"""Figures quoted in the README and the pages under docs/ are re-measured here, so the documentation cannot drift
from the code."""
import json
import re
import statistics
import sys
from pathlib import Path

import torch

from gan_lessons import costs, graphs, metrics, strategies
from gan_lessons.models import Discriminator, Generator

ROOT = Path(__file__).resolve().parents[2]
# the README and the pages it links to, read as one text: a figure may stand on any of them
README = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])


def test_strategy_cost_table_matches_a_fresh_measurement():
    n = r"([\d.]+)"
    rows = re.findall(rf"^\| `(\w+)` \| {n} / {n} \| {n} / {n} \| {n} / {n} \| ([\d.]+) \|$", README, re.M)
    assert [name for name, *_ in rows] == [s for s in strategies.ALL if s != "retain_graph_seed003"]
    for name, *numbers in rows:
        c = costs.measure(name, *costs.fresh_gan(), steps=5 if name == "wgan_gp" else 2, warmup=1)  # a whole cycle
        measured = [c.G_forward, c.G_backward, c.D_forward, c.D_backward, c.G_grad_passes, c.D_grad_passes]
        assert [float(n) for n in numbers[:6]] == measured, name
        assert numbers[6] == f"{c.peak_mib:.2f}", name
    assert "| `retain_graph_seed003` | raises the version error" in README
    assert costs.measure("retain_graph_seed003", *costs.fresh_gan(), steps=1, warmup=1).error


def test_retained_graph_size_quoted_for_lesson_02():
    G, D, x_real, noise = costs.fresh_gan()
    loss_D = torch.nn.functional.softplus(-D(x_real)).mean() + torch.nn.functional.softplus(D(G(noise(64)))).mean()
    mib = graphs.saved_bytes({"loss_D": loss_D}, [*G.parameters(), *D.parameters()]) / 2**20
    assert f"{mib:.2f} MiB for one batch of 64" in README


def test_benchmark_section_is_its_results_file_rendered():
    """The README quotes one results file, by name, and holds exactly what bench.markdown renders from it."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench
    name = re.search(r"Latest results, from `benchmarks/results/([\w-]+\.json)`", README).group(1)
    results = json.loads((ROOT / "benchmarks/results" / name).read_text())
    assert bench.markdown(results) in README
    assert results["quality"]["bar_mnist_fid"] == bench.QUALITY_FID and len(results["quality"]["runs"]) == 3
    assert {r["strategy"] for r in results["rows"]} == set(bench.NAMES) and all("fast_over_eager" in r for r in results["rows"])


def test_gpu_benchmark_and_training_figures_are_their_results_files():
    """The GPU paragraphs quote results files by name: the benchmark as bench.markdown renders it, the training run
    and the doctor's cost with the figures of their records."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench
    name = re.search(r"\*\*On a GPU\*\*, from `benchmarks/results/([\w-]+\.json)`", README).group(1)
    results = json.loads((ROOT / "benchmarks/results" / name).read_text())
    assert results["machine"]["gpu"] and bench.markdown(results) in README
    run = json.loads((ROOT / "benchmarks/results/2026-11-27_train_cuda.json").read_text())
    assert run["device"] == "cuda" and len(run["history"]) == run["config"]["epochs"] == 20
    seconds = [h["seconds"] for h in run["history"]]
    best = min(run["eval_each_epoch"], key=lambda e: e["mnist_fid"])
    for figure in (f"took {round(sum(seconds), 1)} s of training", f"median epoch {statistics.median(seconds):.2f} s",
                   f"{run['images_per_second']} images/s", f"MNIST-FID {run['metrics']['mnist_fid']} and classifier "
                   f"score {run['metrics']['classifier_score']}", f"epoch {best['epoch']} (MNIST-FID {best['mnist_fid']})",
                   f"back up to {run['eval_each_epoch'][-1]['mnist_fid']} by epoch 20"):
        assert figure in README, figure
    shipped = json.loads((metrics.ASSETS / "generator.json").read_text())
    assert shipped["metrics"]["mnist_fid"] < run["metrics"]["mnist_fid"]       # why the CPU-trained one stays
    doctor = json.loads((ROOT / "benchmarks/results/2026-11-27_doctor_cuda.json").read_text())
    ratios = sorted(r["time_ratio"] for r in doctor["strategies"])
    assert doctor["device_type"] == "cuda" and f"took\n{ratios[0]} to {ratios[-1]} times" in README


def test_shipped_generator_figures_match_its_record():
    g = json.loads((metrics.ASSETS / "generator.json").read_text())
    assert f"MNIST-FID {g['metrics']['mnist_fid']} (real-data baseline" in README
    assert f"classifier score {g['metrics']['classifier_score']} (baseline" in README
    shares, scores = g["metrics"]["coverage"], g["eval_each_epoch"]
    rare, common = min(range(10), key=shares.__getitem__), max(range(10), key=shares.__getitem__)
    assert f"the rarest, {rare}, is {shares[rare]:.1%} of the samples, and the\ncommonest, {common}, is " \
           f"{shares[common]:.1%}" in README
    best = min(scores, key=lambda e: e["mnist_fid"])
    assert f"best after epoch {best['epoch']} (MNIST-FID\n{best['mnist_fid']})" in README
    assert f"up to {scores[-1]['mnist_fid']} by epoch {scores[-1]['epoch']}" in README
    median = statistics.median(h["seconds"] for h in g["history"])
    assert f"The median epoch took {median} s (about {round(60000 // 64 * 64 / median, -1):.0f} images/s)" in README


def test_no_tanh_figures_match_its_record():
    g = json.loads((metrics.ASSETS / "generator_no_tanh.json").read_text())
    assert g["config"]["tanh"] is False and g["config"]["epochs"] == 20
    scores, m = g["eval_each_epoch"], g["metrics"]
    best = min(scores, key=lambda e: e["mnist_fid"])
    assert f"best MNIST-FID, {best['mnist_fid']}, after epoch {best['epoch']}" in README
    assert f"{scores[-1]['mnist_fid']} after epoch {scores[-1]['epoch']}" in README
    assert f"MNIST-FID\n{m['mnist_fid']} and classifier score {m['classifier_score']}" in README
    shares = m["coverage"]
    assert f"onto zeros\n({shares[0]:.1%}) and eights ({shares[8]:.1%})" in README
    assert sorted(range(10), key=lambda d: -shares[d])[:2] == [0, 8]
    words = {6: "six"}
    assert f"{words[sum(s < 0.02 for s in shares)]} digits are under 2%" in README


def test_doctor_cost_table_matches_its_results_file():
    name = re.search(r"results in `benchmarks/results/([\w-]+_doctor_cpu\.json)`", README).group(1)
    o = json.loads((ROOT / "benchmarks/results" / name).read_text())
    for r in o["strategies"]:
        row = (f"| `{r['strategy']}` | {r['ms_per_step_plain']} | {r['ms_per_step_doctor']} | {r['time_ratio']} | "
               f"{r['peak_rss_mib_plain']} | {r['peak_rss_mib_doctor']} | {r['rss_ratio']} |")
        assert row in README, row
    assert f"at worst {o['worst_time_ratio']}x the time" in README
    assert f"at worst {o['worst_rss_ratio']}x the peak memory" in README
    assert o["worst_time_ratio"] <= 1.3 and o["worst_rss_ratio"] <= 1.5      # the bounds set for it, as measured


def test_doctor_mlp_cost_sentence_matches_its_results_file():
    o = json.loads((ROOT / "benchmarks/results/2026-11-27_doctor_mlp_cpu.json").read_text())
    said = " ".join(README.split())
    assert (f"{o['pairs']} pairs of {o['steps_per_window']}-step windows, 1 CPU thread) a step takes "
            f"{o['ms_doctor_median']} ms under the doctor against {o['ms_plain_median']} ms, a median paired ratio "
            f"of {o['ratio_median']}x ({o['ratio_min']} to {o['ratio_max']})") in said
    assert f"costs {o['empty_mode_ratio_median']}x on its own" in said


def test_doctor_example_in_readme_is_what_the_doctor_says():
    """The README's sample diagnosis is checked against a live run of seed 000's loop."""
    import warnings

    import torch.nn.functional as F

    from gan_lessons.doctor import doctor
    torch.manual_seed(0)
    g, d = Generator(), Discriminator()
    g_optimizer, d_optimizer = torch.optim.Adam(g.parameters()), torch.optim.Adam(d.parameters())
    x_real = torch.rand(8, 1, 28, 28) * 2 - 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with doctor(g=g, d=d, g_optimizer=g_optimizer, d_optimizer=d_optimizer):
                gz = g(torch.randn(8, 64))
                dgz = F.sigmoid(d(gz))
                d_loss = F.binary_cross_entropy_with_logits(d(x_real), torch.ones(8)) + \
                    F.binary_cross_entropy_with_logits(dgz, torch.zeros(8))
                g_loss = F.binary_cross_entropy_with_logits(dgz, torch.ones(8))
                d_loss.backward(retain_graph=True)
                d_optimizer.step()
                g_loss.backward()
    except RuntimeError as error:
        facts = error.diagnosis.facts
    for line in (f"  - tensor: {facts['tensor']}", f"  - versions: {facts['versions']}"):
        assert line in README
    inside = "AddmmBackward0 (linear in d.net.7) at gan_lessons/models.py, line"
    assert f"  - saved by: {inside}" in README and ", called from line 5 (`dgz = F.sigmoid(d(gz))`)" in README
    assert facts["saved by"].startswith(inside) and ", called from line " in facts["saved by"]
    assert facts["saved by"].split(", called from")[0] in README          # the models.py line, as it is now
    assert facts["modified by"].startswith("d_optimizer.step() at line")


def test_wgan_gp_comparison_is_its_results_file_rendered():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import compare_runs
    runs = json.loads((ROOT / "benchmarks/results/2026-11-23_wgan_gp_vs_default_cpu.json").read_text())["runs"]
    assert compare_runs.markdown(runs) in README
    default, wgan_gp = runs
    same_time = [c for c in default["curve"] if c["epoch"] == 3][0], wgan_gp["curve"][-1]
    assert abs(same_time[0]["train_seconds"] - same_time[1]["train_seconds"]) < 5          # "the same 229 s"
    assert f"scored\nMNIST-FID {same_time[0]['mnist_fid']:.1f}" in README and f"scored {same_time[1]['mnist_fid']:.1f}" in README


def test_doctor_on_public_repositories_matches_its_results_files():
    said = " ".join(README.split())
    for name in ("PyTorch-GAN", "examples"):
        r = json.loads((ROOT / f"benchmarks/results/2026-11-27_doctor_real_{name}.json").read_text())
        s = r["summary"]
        source, commit = r["source"].split(" @ ")
        assert (f"{source.removeprefix('https://github.com/')} at {commit[:7]}: {s['scripts']} scripts, "
                f"{s['identical']} behaving identically ({s['ran_to_the_end']} ran to the end, "
                f"{len(s['failed_alike'])} failed the same way in both runs), {s['warnings_on_scripts_that_ran']} "
                f"warnings on the scripts that ran, a median whole-command ratio of {s['median_wall_ratio']}x; of the "
                f"injected bugs, {s['injected_that_raise_named']} of the {s['injected_that_raise']} that raise and "
                f"{s['injected_silent_named']} of the {s['injected_silent_that_change_the_weights']} silent ones that "
                f"change the final weights are named") in said, name
        assert all(f"`{d.split('/')[-1]}`" in said for d in s["different"])


def test_distributed_cost_sentence_matches_its_results_file():
    o = json.loads((ROOT / "benchmarks/results/2026-11-27_distributed_cpu.json").read_text())
    said = " ".join(README.split())
    assert (f"{o['ms_two_median']} ms a step with two processes against {o['ms_one_median']} ms with one, a median "
            f"paired ratio of {o['ratio_median']}x ({o['ratio_min']} to {o['ratio_max']})") in said


def test_fixed_cost_paragraph_is_its_results_file():
    """docs/training.md's fixed-cost table is fixed_cost.markdown of the file it names, and the ranges its sentences
    quote are that file's."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import fixed_cost
    name = re.search(r"From\s+`benchmarks/results/([\w-]+_fixed_cost_cpu\.json)`", README).group(1)
    results = json.loads((ROOT / "benchmarks/results" / name).read_text())
    assert fixed_cost.markdown(results) in README
    rows = {r["strategy"]: r for r in results["rows"]}
    calls = [(r["eager_batch_2"]["plain"]["aten_calls"], r["eager_batch_2"]["trainer"]["aten_calls"]) for r in rows.values()]
    assert all(t < p / 1.8 for p, t in calls)                      # "halves the calls of every step"
    lo_hi = lambda xs: f"{min(xs)}–{max(xs)}"                      # noqa: E731
    assert f"from {lo_hi([p for p, _ in calls])} to {lo_hi([t for _, t in calls])}" in README
    small = {n: r["eager_batch_2"]["trainer_over_plain"]["median"] for n, r in rows.items()}
    rest = [v for n, v in small.items() if n != "one_forward"]
    text = README.replace("\n", " ")
    assert f"took {min(rest):.2f} to {max(rest):.2f} of the time in five strategies" in text and small["one_forward"] > 1
    assert f"`one_forward` came out at {small['one_forward']:.2f}" in text
    large = [r["eager_batch_64"]["trainer_over_plain"]["median"] for r in rows.values()]
    assert f"the step took {min(large):.2f} to {max(large):.2f} of the time." in text


NUMBER_WORDS = {"ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16}
CHINESE_NUMBERS = {"十": 10, "十一": 11, "十二": 12, "十三": 13, "十四": 14, "十五": 15, "十六": 16}


def test_every_count_of_lessons_the_docs_state_is_the_tree_s():
    """Where a page says how many lessons there are ("Fourteen lessons", 十四课), the number is the number of lesson
    notebooks; a dated record (a bold date, as in docs/setup.md) says what it covered then and is left out."""
    lessons = len(list((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))
    found = []
    for path in [ROOT / "README.md", ROOT / "README.zh-CN.md", ROOT / "CONTRIBUTING.md", ROOT / "notebooks" / "README.md",
                 *sorted((ROOT / "docs").glob("*.md"))]:
        for paragraph in path.read_text(encoding="utf-8").split("\n\n"):
            if re.search(r"\*\*[^*]*\d{4}-\d\d-\d\d\*\*", paragraph):
                continue
            found += [(path.name, m[0], NUMBER_WORDS[m[1].lower()]) for m in
                      re.finditer(rf"\b({'|'.join(NUMBER_WORDS)}) lessons\b", paragraph, re.I)]
            found += [(path.name, m[0], CHINESE_NUMBERS[m[1]]) for m in
                      re.finditer(rf"({'|'.join(sorted(CHINESE_NUMBERS, key=len, reverse=True))})课", paragraph)]
    assert found, "no page states the number of lessons"
    wrong = [(name, said) for name, said, n in found if n != lessons]
    assert not wrong, f"{lessons} lessons in the tree, but: {wrong}"
