"""Layers point one way: model/ imports nothing from impl/ or oracle/; impl/ never imports oracle/."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "model": ("kipcheck.impl", "kipcheck.oracle", "kipcheck.commands", "kipcheck.cli"),
    "impl": ("kipcheck.oracle",),
    "spec": ("kipcheck.impl", "kipcheck.oracle", "kipcheck.model"),
}


def imports(path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_point_one_way(layer):
    offences = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in (ROOT / layer).rglob("*.py")
        for name in imports(path)
        if name.startswith(FORBIDDEN[layer]) or name.split(".")[0] in {"model", "impl", "oracle", "spec"}
    ]
    assert not offences


def test_model_is_pure():
    impure = {"time", "random", "threading", "asyncio", "socket", "os", "subprocess"}
    offences = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in (ROOT / "model").rglob("*.py")
        for name in imports(path)
        if name.split(".")[0] in impure
    ]
    assert not offences
