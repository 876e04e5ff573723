"""The README's "In your tests" section and examples/ agree, and the examples run as written: each README
command runs in a copy of its example directory, and ends as the README says (one test passes, the one
with the deliberate bug fails with the lines the README shows; --kipcheck-traces judges the traces)."""

import fnmatch
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
RUN_TIMEOUT_S = 300


def section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## In your tests (pytest)")
    return text[start:text.index("\n## ", start + 1)]


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section(), re.DOTALL)


def commands() -> dict[str, list[str]]:
    """Each README command by its example directory: `cd examples/NAME && ../../.venv/bin/python -m pytest ARGS`."""
    found = {}
    for block in blocks("sh"):
        directory, command = re.fullmatch(r"cd (examples/\w+) && (.*)\n", block).groups()
        python, *arguments = shlex.split(command)
        assert python == "../../.venv/bin/python" and arguments[:2] == ["-m", "pytest"], block
        found.setdefault(directory, []).append(arguments[2:])
    return found


def run_as_written(directory: str, arguments: list[str], tmp_path: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """The README's command, with this Python, in a copy of the example (so nothing is written into it)."""
    copy = tmp_path / Path(directory).name
    shutil.copytree(ROOT / directory, copy, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    done = subprocess.run([sys.executable, "-m", "pytest", *arguments], cwd=copy, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    return done, copy


def shown_output(containing: str) -> list[str]:
    """The lines of the README's output block that contains `containing`; "..." stands for what varies."""
    block = next(block for block in blocks("text") if containing in block)
    return [re.sub(r"[\[*?]", lambda special: f"[{special[0]}]", line).replace("...", "*") for line in block.splitlines()]


def assert_lines_in_order(output: str, expected: list[str]) -> None:
    lines = iter(output.splitlines())
    for pattern in expected:
        assert any(fnmatch.fnmatchcase(line, pattern) for line in lines), f"{pattern!r} not found in order:\n{output}"


def test_the_readme_shows_the_examples_code():
    sources = [path.read_text() for path in EXAMPLES.rglob("*.py")]
    missing = [block for block in blocks("python") if not any(block in source for source in sources)]
    assert blocks("python") and not missing, missing
    assert sorted(commands()) == ["examples/own_broker", "examples/share_consumer_app"]


@pytest.mark.parametrize("directory, shown", [("examples/share_consumer_app", "REFUSED"),
                                               ("examples/own_broker", "AssertionError: VIOLATION")])
def test_the_example_runs_as_written(directory, shown, tmp_path):
    """The README's first command for the example: one test passes, the other fails as the README shows."""
    done, _ = run_as_written(directory, commands()[directory][0], tmp_path)
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr
    assert re.search(r"\n=+ 1 failed, 1 passed in ", done.stdout), done.stdout
    assert_lines_in_order(done.stdout, shown_output(shown))


def test_the_own_broker_example_judges_the_sessions_traces(tmp_path):
    _, arguments = commands()["examples/own_broker"]
    assert "--kipcheck-traces" in arguments and "--junitxml" in arguments
    done, copy = run_as_written("examples/own_broker", arguments, tmp_path)
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr
    assert re.search(r"\n=+ 2 failed, 1 passed in ", done.stdout), done.stdout  # the lazy queue's test and trace
    assert_lines_in_order(done.stdout, [
        "*_ kipcheck-traces::test_the_lazy_queue_conforms.jsonl _*",
        "VIOLATION  test_the_lazy_queue_conforms.jsonl  (share-partition/kip) step 4 breaks SP-16 *",
        "*= kipcheck traces =*",
        "judged 2 traces written under traces in this session: 1 ok, 1 violation",
    ])
    cases = ElementTree.parse(copy / "report.xml").getroot().iter("testcase")
    traces = {case.get("name"): case.find("failure") is None for case in cases
              if case.get("classname") == "kipcheck-traces"}
    assert traces == {"test_the_lazy_queue_conforms.jsonl": False, "test_the_queue_conforms.jsonl": True}
