"""No dead imports, undefined names or unused variables anywhere (ruff's pyflakes rules)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "E9,F", "--no-cache",
         "kipcheck", "spec", "model", "impl", "oracle", "tests", "bench", "examples"],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
