"""The sweep report rendered by a real browser: headless Chromium loads report.html, every embedded figure decodes
and the summary is there. Skipped where no Chromium is installed (`apt-get install chromium` on Debian)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from numasim.cli import main

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
SWEEPS = Path(__file__).resolve().parents[2] / "examples" / "sweeps"


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")
def test_the_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    out = tmp_path / "r"
    assert main(["sweep", str(SWEEPS / "tiny.toml"), "-o", str(out), "--processes", "1", "--no-progress"]) == 0
    assert main(["sweep", "report", str(out)]) == 0
    assert CHROMIUM is not None
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
         "--dump-dom", (out / "report.html").as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    assert '<p id="summary">2 runs: 2 ok, 0 failed or missing.</p>' in dom
    assert re.search(r'<body[^>]*data-images-ok="true"', dom), dom[:500]
    assert dom.count("<img") == 5
