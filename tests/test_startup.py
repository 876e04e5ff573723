"""Start-up: each command imports only what it needs (bench/bench_startup.py measures the time)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "oracle" / "examples"
MACHINES = ("expansion", "ic", "key_range_assign", "revoke_delay", "share_partition", "share_session", "share_state")
# Heavy libraries no `kipcheck check` needs: the prover, the clients, the test library, the wire protocol.
NEVER_IMPORTED_BY_CHECK = ("z3", "confluent_kafka", "hypothesis", "kio", "asyncio", "tqdm", "kipcheck.impl.broker",
                           "kipcheck.impl.share", "kipcheck.commands.broker", "kipcheck.commands.conform",
                           "kipcheck.commands.prove", "kipcheck.oracle.conformance", "kipcheck.oracle.proofs")

_IMPORTS_AFTER_CHECK = """
import json, sys
from kipcheck.cli import main
code = main(["check", sys.argv[1]])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def modules_after_check(trace: Path) -> set[str]:
    result = subprocess.run([sys.executable, "-c", _IMPORTS_AFTER_CHECK, str(trace)], capture_output=True, text=True,
                            timeout=120, check=True)
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["code"] == 0, result.stdout
    return set(report["modules"])


def imported(modules: set[str], package: str) -> bool:
    return any(name == package or name.startswith(package + ".") for name in modules)


@pytest.mark.parametrize("machine", ["share_partition", "expansion"])
def test_check_imports_only_its_machine(machine):
    trace = sorted((EXAMPLES / machine.replace("_", "-")).glob("*.jsonl"))[0]
    modules = modules_after_check(trace)
    assert f"kipcheck.model.{machine}" in modules and f"kipcheck.oracle.judges.{machine}" in modules
    unneeded = [package for package in NEVER_IMPORTED_BY_CHECK if imported(modules, package)]
    unneeded += [f"kipcheck.{layer}.{other}" for other in MACHINES if other != machine
                 for layer in ("model", "oracle.judges") if f"kipcheck.{layer}.{other}" in modules]
    assert not unneeded, f"`kipcheck check` on a {machine} trace imported {unneeded}"


def test_broker_writes_nothing_in_the_working_directory(tmp_path):
    """kio would import hypothesis, which builds a unicode table in ./.hypothesis; the broker keeps it out."""
    work_dir, data_dir = tmp_path / "cwd", tmp_path / "data"
    work_dir.mkdir()
    broker = subprocess.Popen([sys.executable, "-m", "kipcheck", "broker", "--port", "0", "--data-dir", str(data_dir)],
                              stdout=subprocess.PIPE, text=True, cwd=work_dir)
    try:
        assert broker.stdout.readline().startswith("listening on")
    finally:
        broker.terminate()
        broker.wait(60)
    assert sorted(path.name for path in work_dir.iterdir()) == []
