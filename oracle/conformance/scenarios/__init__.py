"""The client scenarios: real clients against the embedded reference broker, each on a broker of its own.

    names()                                      # every scenario, in the order `kipcheck conform` runs them
    result = scenario("share-groups")(work_dir)  # a ScenarioResult (runner.py); launcher=, profile="kip" optional

One module per family, each with its SCENARIOS (name -> scenario), named in
MODULES: share (share groups through confluent-kafka), groups (consumer
groups, classic and KIP-848), revoke (KIP-983 consumers beside confluent-kafka
ones), kafka42 (what Kafka 4.2 adds to share groups, spoken through kio),
ic (key-range sharing with individual commit), kafka42_log (transactions and
the log start under share groups), java (Apache Kafka's own Java clients,
KafkaShareConsumer and KafkaConsumer). The portable ones (every java scenario,
and share-groups, explicit-acknowledgement, plain-fetch, groups-broker-killed)
also run on a broker they did not start, the Kafka target's, and name what they
leave behind, read from the outside after them (outside.py) for `conform
--compare`. Beside them: runner.py (one scenario on a
broker of its own, then its traces judged), clients.py and the processes the
scenarios start (group_member.py, holder.py, revoke_member.py on
revoke_app.py), and soak.py (the broker killed -9 in a loop under load,
bench/soak.py). The scenario modules are imported when a scenario is first asked
for, not with this package.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Callable

MODULES = ("share", "groups", "revoke", "kafka42", "ic", "kafka42_log", "java")


@cache
def _registry() -> dict[str, Callable]:
    registry: dict[str, Callable] = {}
    for module_name in MODULES:
        found = importlib.import_module(f"{__name__}.{module_name}").SCENARIOS
        twice = set(found) & set(registry)
        assert not twice, f"scenarios named in two modules: {sorted(twice)}"
        registry.update(found)
    return registry


def names() -> list[str]:
    """Every client scenario's name, in the order `kipcheck conform` runs them."""
    return list(_registry())


def portable_names() -> list[str]:
    """The scenarios that can also run on a broker they did not start (`shared=`), e.g. a target's Apache Kafka."""
    return [name for name, scenario in _registry().items() if getattr(scenario, "portable", False)]


def java_names() -> list[str]:
    """The scenarios whose clients are Apache Kafka's Java clients: run when named, or with --java-clients."""
    return list(importlib.import_module(f"{__name__}.java").SCENARIOS)


def scenario(name: str) -> Callable:
    """The scenario `name` (KeyError for a name no module defines)."""
    return _registry()[name]
