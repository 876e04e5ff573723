"""The spec is one source: every clause a model names exists, and every clause is covered."""

from pathlib import Path

from kipcheck.spec import CLAUSE_ID, clauses

ROOT = Path(__file__).resolve().parent.parent


def named_in(folder, pattern="*.py"):
    found = {}
    for path in (ROOT / folder).rglob(pattern):
        for match in CLAUSE_ID.finditer(path.name + "\n" + path.read_text()):
            found.setdefault(match.group(0), set()).add(str(path.relative_to(ROOT)))
    return found


def test_clauses_parse_with_seed_and_profile():
    every = clauses()
    assert every
    for clause in every.values():
        assert clause.seed and (clause.text or clause.decision), clause.id
        assert clause.profile in ("all", "kip", "kafka-4.2"), clause.id


def test_every_clause_the_models_and_judges_name_exists():
    named = {**named_in("model"), **named_in("oracle")}
    unknown = sorted(set(named) - set(clauses()))
    assert not unknown, f"clause ids used in code but missing from spec/: {unknown}"


def test_every_clause_is_implemented_in_a_model():
    in_models = named_in("model")
    missing = sorted(set(clauses()) - set(in_models))
    assert not missing, f"clauses no model rule is tagged with: {missing}"


def test_every_clause_is_covered_by_a_test_or_an_example_trace():
    """A reader goes from a clause to its code and its test in three steps."""
    covered = {**named_in("tests"), **named_in("oracle/examples", "*.jsonl"), **named_in("oracle/examples", "*.md")}
    uncovered = sorted(set(clauses()) - set(covered))
    assert not uncovered, f"clauses no test or example trace names: {uncovered}"


def test_spec_command_shows_and_lists(capsys):
    from kipcheck.cli import main

    assert main(["spec", "--show", "EX-3"]) == 0
    assert "Never more processors than partitions" in capsys.readouterr().out
    assert main(["spec", "--show", "EX-999"]) == 2
    assert main(["spec", "--decisions", "--machine", "expansion"]) == 0
    assert "EX-1" in capsys.readouterr().out
