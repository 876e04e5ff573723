"""Print the mutation table: each seeded rule bug, whether the suite caught it (the state machines,
fast profile, and `kipcheck prove` where a theorem covers the rule), and the time it took. Usage: .venv/bin/python bench/mutation_report.py [NAME...]"""

import importlib.util
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parent.parent / "tests" / "mutants" / "catalog.py"


def main(names: list[str]) -> int:
    spec = importlib.util.spec_from_file_location("kipcheck_mutant_catalog", _PATH)
    catalog = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = catalog
    spec.loader.exec_module(catalog)
    unknown = set(names) - {mutant.name for mutant in catalog.CATALOG}
    if unknown:
        print(f"unknown mutants: {sorted(unknown)}; known: {[mutant.name for mutant in catalog.CATALOG]}")
        return 2
    verdicts = [catalog.run_mutant(mutant) for mutant in catalog.CATALOG if not names or mutant.name in names]
    print(catalog.table(verdicts))
    return 0 if all(verdict.machine_killed for verdict in verdicts) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
