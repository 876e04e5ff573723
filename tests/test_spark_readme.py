"""The README's Spark examples run as written (on the tests' shared local Spark, which they get back
from local_session) and print what their comments say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def spark_examples() -> list[str]:
    section = README.read_text().split("## Spark\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def expected_output(code: str) -> str:
    return "".join(line.split("#")[-1].strip() + "\n" for line in code.splitlines() if line.strip().startswith("print("))


def test_readme_has_an_example_per_connector():
    examples = spark_examples()
    assert len(examples) == 2
    assert '"kipcheck-share"' in examples[0] and '"kipcheck-keyrange"' in examples[1]


def test_readme_examples_run_as_written(spark):
    for code in spark_examples():
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})
        assert printed.getvalue() == expected_output(code)
