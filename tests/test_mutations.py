"""The assurance can fail: seeded rule bugs in copies of the models are caught by the state machines (fast
profile) and, where a theorem covers the rule, by `kipcheck prove`. The table of the bugs caught is printed
at the end of the run (one line per bug, CAUGHT or MISSED)."""

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent / "mutants" / "catalog.py"
_SPEC = importlib.util.spec_from_file_location("kipcheck_mutant_catalog", _PATH)
catalog = sys.modules.setdefault(_SPEC.name, importlib.util.module_from_spec(_SPEC))
if not hasattr(catalog, "CATALOG"):
    _SPEC.loader.exec_module(catalog)

VERDICTS = []


def test_at_least_ten_distinct_mutants():
    assert len({mutant.name for mutant in catalog.CATALOG}) >= 10
    assert len({mutant.machine for mutant in catalog.CATALOG}) == 7, "every machine has a seeded bug"


@pytest.mark.parametrize("mutant", catalog.CATALOG, ids=lambda mutant: mutant.name)
def test_mutant_is_killed(mutant):
    verdict = catalog.run_mutant(mutant)
    VERDICTS.append(verdict)
    assert verdict.machine_killed, f"{mutant.name} ({mutant.bug}) survived the {mutant.machine} state machine"
    assert verdict.proof_killed in (None, True), f"{mutant.name} survived kipcheck prove ({mutant.proof_family})"


def test_patches_are_undone():
    """A mutant lives only inside its `with` block (tests/machines runs the real models on their own)."""
    for mutant in catalog.CATALOG:
        originals = [getattr(owner, attribute) for owner, attribute, _ in mutant.patches]
        with catalog.applied(mutant):
            assert all(getattr(owner, attribute) is replacement for owner, attribute, replacement in mutant.patches)
        assert [getattr(owner, attribute) for owner, attribute, _ in mutant.patches] == originals


def test_print_kill_table(capsys):
    if not VERDICTS:
        pytest.skip("no mutant ran in this session")
    with capsys.disabled():
        print("\n" + catalog.table(VERDICTS))
    assert all(verdict.machine_killed for verdict in VERDICTS)
