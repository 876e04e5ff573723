"""The spec is one source: every clause a model names exists, and every clause is covered."""

import re
from pathlib import Path

from kipcheck.spec import CLAUSE_ID, PREFIXES, clauses

ROOT = Path(__file__).resolve().parent.parent


def named_in(folder, pattern="*.py"):
    found = {}
    for path in (ROOT / folder).rglob(pattern):
        for match in CLAUSE_ID.finditer(path.read_text()):
            found.setdefault(match.group(0), set()).add(str(path.relative_to(ROOT)))
    return found


def test_clauses_parse_with_seed_and_profile():
    every = clauses()
    assert every
    for clause in every.values():
        assert clause.seed and clause.text, clause.id
        assert clause.profile in ("all", "kip", "kafka-4.2"), clause.id


def test_every_clause_the_models_and_judges_name_exists():
    named = {**named_in("model"), **named_in("oracle")}
    unknown = sorted(set(named) - set(clauses()))
    assert not unknown, f"clause ids used in code but missing from spec/: {unknown}"


def test_every_clause_is_implemented_in_a_model():
    in_models = named_in("model")
    missing = sorted(set(clauses()) - set(in_models))
    assert not missing, f"clauses no model rule is tagged with: {missing}"


def test_coverage_report(capsys):
    """Which test or example trace names each clause (printed with -s; not every clause needs a test yet)."""
    covered = {**named_in("tests"), **named_in("oracle/examples", "*.jsonl")}
    for clause_id in clauses():
        print(clause_id, sorted(covered.get(clause_id, ())))
    machines_with_clauses = {clause.machine for clause in clauses().values()}
    assert machines_with_clauses <= set(PREFIXES.values())
