"""The wheel builds without warnings of the project's own, ships every example trace and spec file, and
declares the pytest plugin."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIPPED = shutil.ignore_patterns(".git", ".venv", "node_modules", "build", "*.egg-info", "__pycache__", ".pytest_cache",
                                 ".hypothesis", "tests", "bench", "tla")


def test_the_wheel_builds_cleanly_with_all_its_data(tmp_path):
    source, wheels = tmp_path / "source", tmp_path / "wheels"
    shutil.copytree(ROOT, source, ignore=SKIPPED)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-w", str(wheels), "-v"],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    output = build.stdout + build.stderr
    warnings = [line for line in output.splitlines()
                if "Warning" in line or "deprecated" in line.lower() or "absent from the" in line]
    assert not warnings, "\n".join(warnings)
    wheel = zipfile.ZipFile(next(wheels.glob("kipcheck-*.whl")))
    names = set(wheel.namelist())
    entry_points = wheel.read(next(name for name in names if name.endswith(".dist-info/entry_points.txt"))).decode()
    assert "[pytest11]\nkipcheck = kipcheck.testing.plugin" in entry_points, entry_points  # the pytest plugin
    examples = {f"kipcheck/oracle/{path.relative_to(ROOT / 'oracle')}" for path in (ROOT / "oracle/examples").rglob("*.jsonl")}
    specs = {f"kipcheck/spec/{path.name}" for path in (ROOT / "spec").glob("*.md")}
    assert examples and examples <= names and specs <= names, sorted((examples | specs) - names)
