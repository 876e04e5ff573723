from pathlib import Path

import pytest


@pytest.fixture
def trace_path(request, tmp_path) -> Path:
    """Where a test's queue writes its trace: under --kipcheck-traces DIR when the session was given one (to
    be judged when it ends), else in the test's own temporary directory."""
    directory = request.config.getoption("kipcheck_traces") or tmp_path
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"{request.node.name}.jsonl"
