"""``privlab ui`` in a real browser (issue 34 item 10): what a user looks for in MLflow's UI.

The quickstart runs into a fresh store, ``privlab ui`` serves it, and a headless Chromium
(Debian's ``chromium`` package; Playwright drives it through ``executable_path``, no browser
download) opens the address it printed and checks what a user looks for: the experiment, the
parent run with its configuration runs nested under it, the Dataset and Source columns filled,
a configuration's params and metrics on its run page, its ledger readable as an artifact and a
plot rendered. Skipped, with the reason, where Playwright or Chromium is missing
(``pip install -e ".[browser]"`` and ``apt-get install chromium``).
"""

from __future__ import annotations

import getpass
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from privlab.platform.tracking.tracker import Tracker

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "privlab.platform.cli"]
TIMEOUT_MS = 60_000


def _chromium() -> str:
    path = os.environ.get("PRIVLAB_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no Chromium here (apt-get install chromium, or PRIVLAB_CHROMIUM=/path/to/chrome)")
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason='Playwright is not installed (pip install -e ".[browser]")')
    executable = _chromium()
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def quickstart_ui(browser: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The quickstart in a fresh store, served by ``privlab ui`` (stopped at the end)."""
    folder = tmp_path_factory.mktemp("ui")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    subprocess.run([*CLI, "run", str(REPO / "experiments" / "quickstart.toml"), "--serial", "--no-progress",
                    "--tracking-uri", uri], check=True, capture_output=True, cwd=folder, timeout=600)
    ui = subprocess.Popen([*CLI, "ui", "--tracking-uri", uri], cwd=folder, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    try:
        url = ui.stdout.readline().strip()  # type: ignore[union-attr]
        assert url.startswith("http://127.0.0.1:"), (url, ui.poll())
        tracker = Tracker(uri)
        experiment_id = tracker.experiment_id("quickstart", create=False)
        (parent,) = tracker.parent_runs(experiment_id)
        children = tracker.child_runs(experiment_id, parent.info.run_id)
        yield {"url": url, "base": url.split("/#")[0], "experiment_id": experiment_id, "parent": parent,
               "children": {c.data.tags["privlab.config_id"]: c for c in children}, "tracker": tracker}
    finally:
        ui.terminate()
        assert ui.wait(timeout=60) == 0, ui.stderr.read()  # type: ignore[union-attr]


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1600, "height": 1000})  # type: ignore[attr-defined]
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        yield page
    finally:
        context.close()


def test_the_runs_view_shows_the_experiment_its_run_nested_runs_dataset_and_source(quickstart_ui: dict,
                                                                                  page: object) -> None:
    parent = quickstart_ui["parent"]
    assert re.fullmatch(rf".*/#/experiments/{quickstart_ui['experiment_id']}/runs\?workflowType=machine_learning",
                        quickstart_ui["url"])
    page.goto(quickstart_ui["url"])  # type: ignore[attr-defined]
    name = page.get_by_text(parent.info.run_name, exact=True)  # type: ignore[attr-defined]
    name.wait_for()
    assert re.fullmatch(r"quickstart \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", parent.info.run_name)
    body = page.inner_text("body")  # type: ignore[attr-defined]
    assert "quickstart" in body and "Traces 0" not in body and "No data available" not in body
    assert "Dataset" in body and re.search(r"census_like_20000 \([0-9a-f]{12}\)", body), body
    assert "quickstart.toml" in body  # the Source column
    children = quickstart_ui["children"]
    child_name = children["laplace_mean-000"].info.run_name
    assert not page.get_by_text(child_name, exact=True).count()  # type: ignore[attr-defined]
    row = page.locator("[role=row]", has=name).first  # type: ignore[attr-defined]
    row.locator("button[data-component-id$='runnamecellrenderer.tsx_46']").click()  # the row's expander
    page.get_by_text(child_name, exact=True).wait_for()  # type: ignore[attr-defined]
    shown = page.inner_text("body")  # type: ignore[attr-defined]
    assert sum(c.info.run_name in shown for c in children.values()) >= 10  # the configurations, nested


def test_a_configurations_run_page_shows_its_params_and_metrics(quickstart_ui: dict, page: object) -> None:
    child = quickstart_ui["children"]["laplace_mean-000"]
    page.goto(f"{quickstart_ui['base']}/#/experiments/{quickstart_ui['experiment_id']}/runs/"  # type: ignore[attr-defined]
              f"{child.info.run_id}")
    for text in ("abs_error_mean", child.info.run_name, quickstart_ui["parent"].info.run_name):  # and its parent
        page.get_by_text(text, exact=True).first.wait_for()  # type: ignore[attr-defined]
    body = page.inner_text("body")  # type: ignore[attr-defined]
    assert re.search(r"params\.epsilon\s+0\.1\b", body) and re.search(r"eps_configuration\s+0\.1\b", body)
    assert f"{child.data.metrics['abs_error_mean']}" in body
    assert getpass.getuser() in body  # "Created by"


def test_a_configuration_opened_from_the_runs_view_stays_in_the_machine_learning_view(
        quickstart_ui: dict, page: object) -> None:
    """Issue 46 item 6: a child run opened from the runs view landed in GenAI's "Evaluation
    runs" (breadcrumb "quickstart › Evaluations"); its name is its id then its varying
    parameters, and its duration is its real span, not 0 ms."""
    child = quickstart_ui["children"]["laplace_mean-000"]
    assert child.info.run_name == "laplace_mean-000 epsilon=0.1 n=100"
    assert child.info.end_time - child.info.start_time > 0
    page.set_viewport_size({"width": 4000, "height": 1000})  # type: ignore[attr-defined]  # every column drawn
    page.goto(quickstart_ui["url"])  # type: ignore[attr-defined]  # a fresh browser: nothing remembered
    parent = page.get_by_text(quickstart_ui["parent"].info.run_name, exact=True)  # type: ignore[attr-defined]
    parent.wait_for()
    row = page.locator("[role=row]", has=parent).first  # type: ignore[attr-defined]
    row.locator("button[data-component-id$='runnamecellrenderer.tsx_46']").click()  # the row's expander
    link = page.get_by_text(child.info.run_name, exact=True)  # type: ignore[attr-defined]
    link.wait_for()
    shown = page.inner_text("body")  # type: ignore[attr-defined]
    assert "0ms" not in shown.replace(" ", "")  # the Duration column: every configuration's real span
    # The default metric columns: each study's headline metric and the configurations' ε.
    columns = page.evaluate("() => [...document.querySelectorAll('[col-id]')].map(e => e.getAttribute('col-id'))")  # type: ignore[attr-defined]
    assert {"metrics.`abs_error_mean`", "metrics.`eps_configuration`"} <= set(columns), columns
    link.click()
    page.get_by_text("abs_error_mean", exact=True).first.wait_for()  # type: ignore[attr-defined]
    body = page.inner_text("body")  # type: ignore[attr-defined]
    assert "Evaluations" not in body and "Evaluation runs" not in body, body[:2000]
    assert page.evaluate("() => localStorage.getItem('mlflow.workflowType_v1')") == '"machine_learning"'  # type: ignore[attr-defined]


def test_the_ledger_is_readable_on_the_run_page(quickstart_ui: dict, page: object) -> None:
    # The ledger whole is the run's ledger.txt artifact (each step's ε, δ, sensitivity and noise
    # scale); its privlab.ledger tag, short enough to show whole, says what it totals and where it is.
    child = quickstart_ui["children"]["laplace_mean-000"]
    tag = child.data.tags["privlab.ledger"]
    assert tag.startswith("ε = 0.1 over 1 step(s) (laplace)") and tag.endswith("Artifacts › ledger.txt")
    ledger = quickstart_ui["tracker"].read_text(child.info.run_id, "ledger.txt")
    page.goto(f"{quickstart_ui['base']}/#/experiments/{quickstart_ui['experiment_id']}/runs/"  # type: ignore[attr-defined]
              f"{child.info.run_id}")
    page.get_by_text("privlab.ledger").first.wait_for()  # type: ignore[attr-defined]
    assert tag in page.inner_text("body")  # type: ignore[attr-defined]
    page.goto(f"{quickstart_ui['base']}/#/experiments/{quickstart_ui['experiment_id']}/runs/"  # type: ignore[attr-defined]
              f"{child.info.run_id}/artifacts/ledger.txt")
    page.get_by_text("dp_mean").first.wait_for()  # type: ignore[attr-defined]
    body = page.inner_text("body")  # type: ignore[attr-defined]
    total = next(line for line in ledger.splitlines() if line.startswith("total"))
    assert total in body and "laplace(sensitivity=0.01, scale=0.1)" in body


def test_a_plot_renders(quickstart_ui: dict, page: object) -> None:
    parent = quickstart_ui["parent"]
    plot = "plots/laplace_mean-abs_error.png"
    assert plot in quickstart_ui["tracker"].list_artifacts(parent.info.run_id, "plots")
    page.goto(f"{quickstart_ui['base']}/#/experiments/{quickstart_ui['experiment_id']}/runs/"  # type: ignore[attr-defined]
              f"{parent.info.run_id}/artifacts/{plot}")
    page.wait_for_function(  # type: ignore[attr-defined]
        "() => [...document.images].some(i => i.src.startsWith('blob:') && i.complete && i.naturalWidth > 0)")
    widths = page.evaluate(  # type: ignore[attr-defined]
        "() => [...document.images].filter(i => i.src.startsWith('blob:')).map(i => i.naturalWidth)")
    assert widths and all(w > 300 for w in widths), widths
