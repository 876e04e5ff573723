"""The spec is one source: every clause a model names exists, and every clause is covered."""

import re
from pathlib import Path

from kipcheck.model.profiles import PROFILES
from kipcheck.spec import CLAUSE_ID, clauses, parse, served_by

ROOT = Path(__file__).resolve().parent.parent
# A clause id as a tag in code: the id, then no further digit (SP-1 is not named by SP-10).
IMPL_TAG = re.compile(r"\b((?:SP|SS|ST|IC|RD|KR|EX|XM)-\d+)(?!\d)")
# Clauses the reference implementation should serve and does not: neither tagged in impl/ nor model-only.
NOT_YET_SERVED = {
    "SP-65": "the reference broker has no compacted topics, so no batch of a share-partition is ever compacted away",
}


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


def implementation_map_problems(every: dict, impl_text: str, not_yet_served=()) -> list[str]:
    """What is wrong with the map from clauses to the code of impl/ that serves them."""
    named = set(IMPL_TAG.findall(impl_text))
    problems = []
    for clause_id, clause in every.items():
        if clause.model_only and clause_id in named:
            problems.append(f"{clause_id} is marked model-only, yet impl/ names it")
        elif clause_id in not_yet_served and (clause.model_only or clause_id in named):
            problems.append(f"{clause_id} is served or marked now: take it off NOT_YET_SERVED")
        elif not clause.model_only and clause_id not in named and clause_id not in not_yet_served:
            problems.append(f"{clause_id} is neither named in impl/ nor marked model-only")
    return problems


def served_by_problems(spec_file: Path) -> list[str]:
    """A spec file with clauses names the impl modules that serve it, and each one exists."""
    modules = served_by(spec_file)
    problems = [f"{spec_file.name}: 'Served by:' names {module}, which does not exist"
                for module in modules if not (ROOT / module).is_file()]
    if parse(spec_file) and not modules:
        problems.append(f"{spec_file.name} has clauses but no 'Served by:' line")
    return problems


def test_every_clause_is_served_in_impl_or_marked_model_only():
    impl_text = "\n".join(path.read_text() for path in sorted((ROOT / "impl").rglob("*.py")))
    assert not implementation_map_problems(clauses(), impl_text, NOT_YET_SERVED)


def test_each_spec_file_names_the_impl_modules_that_serve_it():
    for spec_file in sorted((ROOT / "spec").glob("*.md")):
        assert not served_by_problems(spec_file)


FABRICATED_SPEC = """# sample

Served by: impl/share/partition.py, impl/share/nowhere.py

## SP-1: Served
- seed: 002, "x"

Text.

## SP-2: Model-only and still named
- seed: 002, "x"
- model-only: judges a trace

Text.

## SP-3: Neither
- seed: 002, "x"

Text.

## SP-4: Model-only
- seed: 002, "x"
- decision: why
- model-only: judges a trace

Text.
"""


def test_the_implementation_map_checks_catch_a_broken_map(tmp_path):
    spec_file = tmp_path / "share-partition.md"
    spec_file.write_text(FABRICATED_SPEC)
    every = {clause.id: clause for clause in parse(spec_file)}
    assert every["SP-4"].model_only == "judges a trace" and every["SP-4"].text == "Text."
    impl_text = "# SP-1: served here\n# SP-2: and here\n# SP-30 and SP-40 are other clauses\n"
    assert implementation_map_problems(every, impl_text) == [
        "SP-2 is marked model-only, yet impl/ names it", "SP-3 is neither named in impl/ nor marked model-only"]
    assert implementation_map_problems(every, "# SP-1 # SP-30", {"SP-3"}) == []
    assert implementation_map_problems(every, "# SP-1 # SP-3.", {"SP-3"}) == [
        "SP-3 is served or marked now: take it off NOT_YET_SERVED"]
    assert served_by_problems(spec_file) == ["share-partition.md: 'Served by:' names impl/share/nowhere.py, "
                                             "which does not exist"]
    spec_file.write_text(FABRICATED_SPEC.replace("Served by: impl/share/partition.py, impl/share/nowhere.py\n", ""))
    assert served_by_problems(spec_file) == ["share-partition.md has clauses but no 'Served by:' line"]


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
