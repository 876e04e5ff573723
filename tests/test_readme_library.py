"""The README's library snippet runs as written, on an allowed trace and on one that breaks a clause."""

import contextlib
import io
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "oracle" / "examples" / "share-partition"


def library_snippet() -> str:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    return next(block for block in blocks if "check_file" in block)


@pytest.mark.parametrize("example, first_lines", [
    ("kip-lock-expiry.jsonl", ["ok"]),
    ("violations/archived-at-the-limit-delivered-again.SP-21.jsonl",
     ["violation", 'step 6 breaks SP-21 "The delivery count limit archives a record leaving acquired"', "SP-21 6 None"]),
])
def test_the_library_snippet_runs_as_written(example, first_lines, tmp_path, monkeypatch):
    shutil.copy(EXAMPLES / example, tmp_path / "trace.jsonl")
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(library_snippet(), "README.md", "exec"), {})
    lines = printed.getvalue().splitlines()
    assert [line for line, start in zip(lines, first_lines) if line.startswith(start)] == lines[:len(first_lines)], lines
    assert any(line.startswith(("ok ", "VIOLATION ")) and "trace.jsonl" in line for line in lines), lines
    assert lines[-1] == "Ruled(value='NONE', clause='SP-9')"
