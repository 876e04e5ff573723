"""The spec is one source: every clause a model names exists, and every clause is covered."""

import re
from pathlib import Path

from kipcheck.model.profiles import PROFILES
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
        assert set(clause.profiles) <= set(PROFILES) and len(set(clause.profiles)) == len(clause.profiles), clause.id
        assert clause.profile == "all" or clause.profiles, clause.id


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


def test_spec_show_is_case_insensitive_and_cites_documents_by_title(capsys):
    """A stranger reads the source by its title, never a seed number or an internal note."""
    from kipcheck.cli import main
    from kipcheck.spec import SEEDS

    for clause_id in clauses():
        assert main(["spec", "--show", clause_id.lower()]) == 0
        shown = capsys.readouterr().out
        assert shown.startswith(clause_id + ":")
        source = next(line for line in shown.splitlines() if line.startswith("source: "))
        assert not re.search(r"(?<![\d,])\b00[0-4]\b", source), source  # a seed number, not "10,000"
        assert "notes" not in shown and "shared/" not in shown, shown
    assert main(["spec", "--show", "sp-21"]) == 0 and SEEDS["002"] in capsys.readouterr().out


def test_a_violation_line_names_the_clause_title_and_how_to_read_it():
    from kipcheck.oracle.check import check_file

    verdict = check_file(ROOT / "oracle/examples/share-partition/violations/archived-at-the-limit-delivered-again.SP-21.jsonl")
    assert verdict.title == clauses()["SP-21"].title
    assert f'breaks SP-21 "{verdict.title}"' in verdict.summary() and "kipcheck spec --show SP-21" in verdict.summary()
