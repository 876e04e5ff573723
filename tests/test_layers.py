"""Layers point one way: model/ imports nothing from impl/ or oracle/; impl/ never imports oracle/; inside impl/,
the floor and the feature packages keep the order impl/__init__.py draws."""

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


# impl/ (impl/__init__.py): the floor imports only the floor; each feature package the floor and the packages named.
FLOOR = ("storage", "wire", "tracing", "settings", "topic_partition")
IMPL_ALLOWED = {
    **{name: () for name in FLOOR},
    "share": (),
    "groups": ("expansion",),
    "expansion": (),
    "ic": ("groups",),
    "consumer": ("ic",),
    "broker": ("share", "groups", "ic", "expansion"),
    "spark": ("consumer",),
    "job": ("consumer", "expansion"),
}


def impl_module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(("kipcheck", *(parts[:-1] if parts[-1] == "__init__" else parts)))


IMPL_MODULES = {impl_module(path): path for path in (ROOT / "impl").rglob("*.py")}


def impl_imports(module: str) -> set[str]:
    """The impl/ modules `module` imports anywhere in its body (in functions too), `from package import module`
    and relative imports resolved."""
    path, found = IMPL_MODULES[module], set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]) if node.level else ""
            source = ".".join(part for part in (base, node.module) if part)
            found.update(f"{source}.{alias.name}" if f"{source}.{alias.name}" in IMPL_MODULES else source
                         for alias in node.names)
    return {name for name in found if name in IMPL_MODULES and name != module}


def impl_package(module: str) -> str:
    return module.split(".")[2] if module.count(".") >= 2 else ""


def test_every_impl_package_has_a_layer():
    assert sorted({impl_package(module) for module in IMPL_MODULES} - {""}) == sorted(IMPL_ALLOWED)


@pytest.mark.parametrize("package", sorted(IMPL_ALLOWED))
def test_impl_package_imports_only_the_floor_and_its_allowed_packages(package):
    allowed = {package, *FLOOR, *IMPL_ALLOWED[package]} if package not in FLOOR else set(FLOOR)
    offences = [f"{module} imports {name}" for module in sorted(IMPL_MODULES) if impl_package(module) == package
                for name in sorted(impl_imports(module)) if impl_package(name) not in allowed]
    assert not offences


def reachable(modules: set[str]) -> set[str]:
    seen, todo = set(), list(modules)
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(impl_imports(module))
    return seen


def test_the_client_never_imports_the_broker():
    """Not even through another package: the consumer runs where no broker code is."""
    client = {module for module in IMPL_MODULES if impl_package(module) == "consumer"}
    assert not [module for module in reachable(client) if impl_package(module) == "broker"]


def test_impl_has_no_import_cycles():
    """Function-level imports count too: broker.py imports handlers/, which are given the broker instead."""
    cycles = [f"{module} -> {name} -> ... -> {module}" for module in sorted(IMPL_MODULES)
              for name in sorted(impl_imports(module)) if module in reachable({name})]
    assert not cycles
