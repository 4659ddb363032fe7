"""JupyterLab in a real browser: Run All on lessons 01, 05 and 06, the strategy widget clicked through, graphs
rendered as images. The server runs from this environment on loopback with a token; Debian's Chromium is driven
by Playwright (never `playwright install`). Screenshots go to build/screenshots/."""
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
SHOTS = ROOT / "build" / "screenshots"
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium: apt-get install chromium")]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server over a copy of the notebooks (the browser's saves never touch the repository)."""
    root = tmp_path_factory.mktemp("lab")
    for nb in (ROOT / "notebooks").glob("*.ipynb"):
        # outputs and prompts cleared: a stale [N] from the committed run must never pass for a finished Run All
        notebook = json.loads(nb.read_text())
        for cell in notebook["cells"]:
            if cell["cell_type"] == "code":
                cell["outputs"], cell["execution_count"] = [], None
        (root / nb.name).write_text(json.dumps(notebook))
    port, token = _free_port(), secrets.token_hex(16)
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.open_browser=False"]
    if os.geteuid() == 0:
        command.append("--allow-root")
    settings = root / ".settings" / "@jupyterlab"
    for extension, plugin, value in (("notebook-extension", "tracker", {"windowingMode": "none"}),
                                     ("apputils-extension", "notification", {"fetchNews": "false"})):
        (settings / extension).mkdir(parents=True, exist_ok=True)
        (settings / extension / f"{plugin}.jupyterlab-settings").write_text(json.dumps(value))
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(root / ".jupyter"), "GAN_LESSONS_QUICK": "1",
           "JUPYTERLAB_SETTINGS_DIR": str(root / ".settings")}
    log = open(root / "server.log", "w")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                assert server.poll() is None and time.time() < deadline, (root / "server.log").read_text()[-2000:]
                time.sleep(0.5)
        yield base, token
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True,
            viewport={"width": 1400, "height": 1000},
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--no-first-run", "--disable-sync"])
        try:
            yield context
        finally:
            context.close()


def _run_all(page, base, token, name, timeout_s):
    """Open a notebook (which starts a fresh kernel), wait for that kernel, Run All, and wait until the last code
    cell has run. No "Restart Kernel": restarting right after the first connect sometimes left JupyterLab's
    kernel stuck at "Starting" (the server log showed a garbled websocket message after the reconnect)."""
    page.goto(f"{base}/lab/workspaces/{Path(name).stem}/tree/{name}?reset&token={token}")  # one tab per workspace
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.get_by_text(re.compile(r"\| Idle$")).first.wait_for(timeout=120_000)      # status bar: kernel ready
    prompts = [p.strip() for p in page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()]
    assert prompts and all(p == "[ ]:" for p in prompts), prompts                 # nothing has run yet
    page.click(".jp-Notebook")
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    deadline = time.time() + timeout_s
    while True:
        prompts = [p.strip() for p in page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()]
        # a fresh kernel numbers cells 1..N; Run All reached the end when the last cell shows [N]
        if prompts[-1] == f"[{len(prompts)}]:" and all(re.fullmatch(r"\[\d+\]:", p) for p in prompts):
            return prompts
        assert time.time() < deadline, f"Run All did not reach the last cell: {prompts}"
        time.sleep(1)


def _assert_no_errors(page):
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']", has_text="Traceback")
    assert errors.count() == 0, errors.first.inner_text()[:2000]
    assert page.locator("text=Error displaying widget").count() == 0


def _images(page):
    return page.locator(".jp-RenderedSVG img, .jp-RenderedSVG svg, .jp-RenderedImage img")


def test_lesson_01_runs_all_and_draws_its_graph(lab, browser):
    page = browser.new_page()
    _run_all(page, *lab, "01_leaf_tensors.ipynb", timeout_s=300)
    _assert_no_errors(page)
    graph = page.locator(".jp-RenderedSVG img, .jp-RenderedSVG svg").first     # the torchviz graph, as an image
    graph.scroll_into_view_if_needed(timeout=60_000)
    assert graph.bounding_box()["width"] > 50
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "lesson01.png"))
    page.close()


def test_lesson_05_widget_switches_graph_and_cost_row(lab, browser):
    page = browser.new_page()
    _run_all(page, *lab, "05_gan_update_strategies.ipynb", timeout_s=480)
    _assert_no_errors(page)
    widget = page.locator(".widget-toggle-buttons").first
    widget.wait_for(timeout=120_000)                 # widget views render after the kernel's reply
    widget.scroll_into_view_if_needed(timeout=60_000)
    output = page.locator(".widget-vbox .jp-OutputArea, .widget-vbox .widget-output").first
    seen = {}
    for button in widget.locator("button").all():
        name = button.inner_text().strip()
        button.click()
        row = output.locator("td code", has_text=name)
        row.first.wait_for(timeout=120_000)           # the cost row is this strategy's
        if name == "retain_graph_seed003":
            output.locator("text=raises").first.wait_for(timeout=120_000)
            continue
        graph = output.locator(".jp-RenderedSVG img, .jp-RenderedSVG svg").first
        graph.wait_for(timeout=120_000)
        box = graph.bounding_box()
        assert box and box["width"] > 50 and box["height"] > 50   # rendered as an image
        seen[name] = urllib.parse.unquote(graph.get_attribute("src") or graph.inner_html())
        assert f"one step of {name}" in seen[name]                   # the graph drawn is this strategy's
        if name == "d_first_reuse_fake":
            SHOTS.mkdir(parents=True, exist_ok=True)
            widget.scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / "lesson05_widget.png"))
    assert len(seen) == 4
    _assert_no_errors(page)
    page.close()


def test_lesson_06_runs_all_in_quick_mode(lab, browser):
    page = browser.new_page()
    _run_all(page, *lab, "06_train_mnist_gan.ipynb", timeout_s=600)
    _assert_no_errors(page)
    assert _images(page).count() >= 3
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "lesson06.png"))
    page.close()
