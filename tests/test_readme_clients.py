"""The README's producer + ShareConsumer example runs as written against the broker started as the README says."""

import contextlib
import io
import re
from pathlib import Path

from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker

ROOT = Path(__file__).resolve().parent.parent


def readme_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)


def test_the_share_consumer_example_reads_what_it_produced(tmp_path):
    start = next(block for block in readme_blocks("sh") if "kipcheck broker --data-dir /tmp/kc --set" in block)
    settings = dict(setting.split("=", 1) for setting in re.findall(r"--set (\S+)", start))
    example = next(block for block in readme_blocks("python") if "ShareConsumer" in block)
    with EmbeddedBroker(tmp_path, settings=settings) as broker:  # a free port: 9092 may be taken here
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(example.replace("127.0.0.1:9092", broker.bootstrap), "README.md", "exec"), {})
    lines = printed.getvalue().splitlines()
    assert sorted(lines) == [f"{number} b'order-{number}' 1" for number in range(3)], lines


def test_the_key_range_sharing_example_processes_each_record_once(tmp_path):
    """IC-21: the README's two sharers of one partition process the six records between them, once each."""
    start = next(block for block in readme_blocks("sh") if "kipcheck broker --data-dir /tmp/kc --set" in block)
    settings = dict(setting.split("=", 1) for setting in re.findall(r"--set (\S+)", start))
    example = next(block for block in readme_blocks("python") if "commit_ranges" in block)
    with EmbeddedBroker(tmp_path, settings=settings) as broker:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(example.replace("127.0.0.1:9092", broker.bootstrap), "README.md", "exec"), {})
    assert printed.getvalue().splitlines() == ["[0, 1, 2, 3, 4, 5]"]
