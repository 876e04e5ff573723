"""`kipcheck check --spark` gives the same verdicts and exit status as the plain checker, on the same inputs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kipcheck.oracle.check import check_file
from kipcheck.oracle.spark_check import check_on_spark

EXAMPLES = Path(__file__).resolve().parent.parent / "oracle" / "examples"


def mixed_inputs(directory: Path) -> Path:
    """Good and violating example traces of every machine, plus malformed and unreadable inputs."""
    for path in sorted(EXAMPLES.rglob("*.jsonl")):
        target = directory / path.relative_to(EXAMPLES)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    broken = directory / "broken"
    broken.mkdir()
    (broken / "empty.jsonl").write_bytes(b"")
    (broken / "bad-json.jsonl").write_bytes(b'{"format": "kipcheck-trace", "version": 1, "machine": "ic"\n')
    (broken / "unknown-machine.jsonl").write_bytes(
        b'{"format": "kipcheck-trace", "version": 1, "machine": "nope", "config": {}}\n')
    (broken / "not-utf8.jsonl").write_bytes(b"\xff\xfe\n")
    return directory


def test_same_verdicts_as_the_plain_checker(spark, tmp_path):
    paths = sorted(str(path) for path in mixed_inputs(tmp_path).rglob("*.jsonl")) + [str(tmp_path / "missing.jsonl")]
    plain = [check_file(path) for path in paths]
    assert {verdict.status for verdict in plain} == {"ok", "violation", "malformed"}
    assert check_on_spark(paths, spark=spark) == plain


def test_cli_prints_the_same_lines_and_exit_status(tmp_path):
    inputs = mixed_inputs(tmp_path / "traces")
    plain = subprocess.run([sys.executable, "-m", "kipcheck", "check", str(inputs)],
                           capture_output=True, text=True, timeout=300)
    on_spark = subprocess.run([sys.executable, "-m", "kipcheck", "check", "--spark", "--master", "local[2]",
                               str(inputs)], capture_output=True, text=True, timeout=600)
    assert plain.returncode == 2, plain.stdout + plain.stderr
    assert (on_spark.returncode, on_spark.stdout) == (plain.returncode, plain.stdout), on_spark.stderr
    assert "VIOLATION" in plain.stdout and "MALFORMED" in plain.stdout
    only_good = subprocess.run([sys.executable, "-m", "kipcheck", "check", "--spark", "--master", "local[2]", "-q",
                                *sorted(str(path) for path in inputs.rglob("*.jsonl") if "violations" not in path.parts and "broken" not in path.parts)],
                               capture_output=True, text=True, timeout=600)
    assert (only_good.returncode, only_good.stdout) == (0, "")


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory):
    """A Spark standalone master and two one-core workers on loopback; skipped, with the reason, without Java."""
    from kipcheck.impl.spark.session import JavaMissing, find_java
    from kipcheck.impl.spark.standalone import StandaloneCluster

    try:
        find_java()
    except JavaMissing as missing:
        pytest.skip(str(missing))
    with StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2) as cluster:
        yield cluster


def test_a_standalone_cluster_gives_the_same_verdicts(standalone_cluster, tmp_path):
    inputs = mixed_inputs(tmp_path / "traces")
    plain = subprocess.run([sys.executable, "-m", "kipcheck", "check", str(inputs)],
                           capture_output=True, text=True, timeout=300)
    on_cluster = subprocess.run([sys.executable, "-m", "kipcheck", "check", "--spark", "--master",
                                 standalone_cluster.master_url, str(inputs)], capture_output=True, text=True, timeout=900)
    assert (on_cluster.returncode, on_cluster.stdout) == (plain.returncode, plain.stdout), on_cluster.stderr
    violations = [line for line in on_cluster.stdout.splitlines() if line.startswith("VIOLATION")]
    assert len(violations) == len(list(inputs.rglob("violations/*.jsonl"))) > 0, "every violating trace is found"
    # Judged by the workers' executors (separate JVMs, each with its own Python workers), not by the driver.
    for work in standalone_cluster.worker_directories():
        assert list(work.glob("app-*/*/stderr")), f"no executor ran on {work.name}"


def test_traces_are_packed_whole_and_balanced(tmp_path):
    from kipcheck.oracle.spark_check import packed

    paths = []
    for index, size in enumerate([900, 10, 500, 400, 10, 10, 300]):
        path = tmp_path / f"t{index}.jsonl"
        path.write_bytes(b"x" * size)
        paths.append(str(path))
    groups = packed(paths + [str(tmp_path / "missing.jsonl")], 3)
    assert sorted(index for group in groups for index, _ in group) == list(range(8)), "each trace in one task"
    loads = sorted(sum(os.path.getsize(path) for _, path in group if os.path.exists(path)) for group in groups)
    assert loads == [530, 700, 900]  # 900 | 400 + 300 | 500 + 10 + 10 + 10 (+ the missing one)
