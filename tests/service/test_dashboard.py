"""The dashboard in a real browser: Debian's headless Chromium driven by Playwright."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from _service import TOKEN

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

DASH_SCRIPT = """
import time
import numpy as np
import tilegraph as tg

def slow(block):
    time.sleep(0.02)
    return block * 2

x = tg.from_numpy(np.arange(4000.0).reshape(40, 100), chunks=(5, 20))
y = x.map_blocks(slow)
print("total", float((y @ x.T).sum().compute()))
"""


def artifacts_dir() -> Path:
    """Where test artifacts (the screenshot) are kept: $TILEGRAPH_ARTIFACTS, else
    <temp dir>/tilegraph-artifacts."""
    path = Path(os.environ.get("TILEGRAPH_ARTIFACTS")
                or Path(tempfile.gettempdir()) / "tilegraph-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip("Debian's chromium is not installed (make sysdeps installs it)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                              args=["--no-sandbox", "--disable-gpu",
                                    "--disable-dev-shm-usage"])
        yield b
        b.close()


def test_dashboard_shows_a_job_live(server, client, script, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
            if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    try:
        denied = page.request.get(f"{server.url}/")
        assert denied.status == 401 and denied.body() == b""
        reply = page.goto(f"{server.url}/?token={TOKEN}")
        assert reply.status == 200
        page.wait_for_selector("#pool:not(:empty)")
        assert "local threads backend" in page.inner_text("#pool")
        job_id = client.submit(script(DASH_SCRIPT, name="dash.py"))
        row = f'#jobs tr[data-job="{job_id}"]'
        page.wait_for_selector(row, timeout=15_000)
        page.click(row)
        page.wait_for_selector(f'{row}[data-state="running"], {row}[data-state="done"]',
                               timeout=15_000)
        # live: task marks appear while the job runs, then progress reaches 100%
        page.wait_for_function("document.querySelectorAll('#taskstream rect.task').length > 0",
                               timeout=20_000)
        page.wait_for_selector(f'{row}[data-state="done"] .bar[data-progress="100"]',
                               timeout=30_000)
        assert page.inner_text(f"{row} .pct") == "100%"
        job = client.job(job_id)
        page.wait_for_function(
            f"document.querySelectorAll('#taskstream rect.task').length === {job['tasks_done']}",
            timeout=10_000)
        page.wait_for_timeout(400)  # one more redraw
        marks = page.eval_on_selector_all(
            "#taskstream rect.task",
            "rs => rs.map(r => [r.getAttribute('fill'), +r.getAttribute('width')])")
        assert len(marks) == job["tasks_done"] > 0
        assert all(fill.startswith("#") and width > 0 for fill, width in marks)
        assert len({fill for fill, _ in marks}) >= 2  # coloured by kind
        assert page.inner_text(f"{row} td:nth-child(5)") == f"{job['tasks_done']} / " \
            f"{job['tasks_total']}"
        assert "plan: " in page.inner_text("#plan")
        points = page.get_attribute("#memory polyline", "points")
        assert points and len(points.split()) > 2
        assert page.is_hidden("#error-box")
        assert page.query_selector_all("#workers tbody tr")
        shot = artifacts_dir() / "dashboard.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        assert not problems, problems
    finally:
        page.close()


def test_dashboard_shows_a_failed_jobs_error(server, client, script, browser):
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"{server.url}/?token={TOKEN}")
        job_id = client.submit(script("raise KeyError('lost block')\n", name="bad.py"))
        row = f'#jobs tr[data-job="{job_id}"]'
        page.wait_for_selector(f'{row}[data-state="failed"]', timeout=20_000)
        page.click(row)
        page.wait_for_selector("#error-box:not([hidden])")
        text = page.inner_text("#error")
        assert "KeyError: 'lost block'" in text and 'bad.py", line 1' in text
        assert not errors
    finally:
        page.close()
