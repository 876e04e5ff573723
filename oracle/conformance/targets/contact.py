"""First contact with a broker over the wire: waiting until it serves share groups, and reading the share settings
it describes about itself.

    wait_ready(("127.0.0.1", 9092), timeout_s=30)     # TargetUnreachable (its message is one line) if it never is
    described = describe_settings(("127.0.0.1", 9092), names)   # {Kafka name: value} of `names` it describes

Ready means: the broker accepts a connection, its ApiVersions lists ShareFetch (API 78), its Metadata names at
least one broker, and FindCoordinator (where it serves version 4) finds the coordinator of a group. A broker that is
starting refuses connections; a fresh Kafka answers COORDINATOR_NOT_AVAILABLE until __consumer_offsets exists; both
are waited for, up to the timeout.

A broker describes its settings with DescribeConfigs (API 32) of resource type BROKER, named by its node id, as Kafka
answers for its static and dynamic configs alike. In the same request the runner asks for a fresh group's configs
(resource type GROUP): a group's share.record.lock.duration.ms (and, from Kafka 4.4, its share.delivery.count.limit
and share.partition.max.record.locks) is what its records get, so where the broker describes it, it is taken over
the broker-wide value. A broker that does not serve a resource, refuses it or leaves a name out describes nothing
for that name (nor does a value that is not a positive integer): the runner then uses what --set says, or Kafka's
default.
"""

from __future__ import annotations

import time

from kipcheck.impl.consumer.connection import BrokerConnection, ConnectionFailed

API_VERSIONS, METADATA, FIND_COORDINATOR, DESCRIBE_CONFIGS, SHARE_FETCH = 18, 3, 10, 32, 78
BROKER_RESOURCE, GROUP_RESOURCE = 4, 32   # ConfigResource.Type
# A group's own config -> the broker-wide setting it takes the place of (Kafka's GroupConfig names).
GROUP_SETTINGS = {"share.record.lock.duration.ms": "group.share.record.lock.duration.ms",
                  "share.delivery.count.limit": "group.share.delivery.count.limit",
                  "share.partition.max.record.locks": "group.share.partition.max.record.locks"}
SETTINGS_PROBE_GROUP = "kipcheck-settings"   # never joined: it has no config of its own, so it shows the defaults
GROUP_KEY = 0
CONTACT_TIMEOUT_S = 30.0  # how long the runner waits, by default, for a target to serve share groups
CONTACT_TIMEOUT_MS = 5_000   # one request of the first contact; a slower broker is asked again
RETRY_PAUSE_S = 0.5
READY_PROBE_GROUP = "kipcheck-ready"


class TargetUnreachable(RuntimeError):
    """The broker did not become reachable and ready in time; the message, one line, says what was last seen."""


def wait_ready(address: tuple[str, int], timeout_s: float) -> None:
    """Return once the broker at `address` serves share groups; TargetUnreachable after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            reason = _not_ready(address)
        except (ConnectionFailed, OSError) as error:
            reason = str(error)
        if reason is None:
            return
        if time.monotonic() >= deadline:
            raise TargetUnreachable(f"not reachable and ready after {timeout_s:g} s ({reason})")
        time.sleep(RETRY_PAUSE_S)


def _not_ready(address: tuple[str, int]) -> str | None:
    """Why the broker is not ready yet, or None when it is."""
    connection = _connect(address)
    try:
        versions = _api_versions(connection)
        if SHARE_FETCH not in versions:
            return "it does not serve ShareFetch (no share groups)"
        brokers = connection.request(METADATA, 12, topics=[], allow_auto_topic_creation=False,
                                     include_topic_authorized_operations=False).brokers
        if not brokers:
            return "its Metadata names no broker"
        if versions.get(FIND_COORDINATOR, -1) >= 4:
            found = connection.request(FIND_COORDINATOR, 4, key_type=GROUP_KEY,
                                       coordinator_keys=[READY_PROBE_GROUP]).coordinators[0]
            if found.error_code.name != "none":
                return f"FindCoordinator answers {found.error_code.name.upper()}"
        return None
    finally:
        connection.close()


def describe_settings(address: tuple[str, int], names) -> dict[str, str]:
    """{name: value} of the settings among `names` that the broker describes (DescribeConfigs: BROKER, then GROUP)."""
    connection = _connect(address)
    try:
        version = min(_api_versions(connection).get(DESCRIBE_CONFIGS, -1), 4)
        if version < 1:
            return {}
        brokers = connection.request(METADATA, 12, topics=[], allow_auto_topic_creation=False,
                                     include_topic_authorized_operations=False).brokers
        if not brokers:
            return {}
        group_names = sorted(name for name, broker_name in GROUP_SETTINGS.items() if broker_name in names)
        answer = connection.request(DESCRIBE_CONFIGS, version, resources=[
            {"resource_type": BROKER_RESOURCE, "resource_name": str(_node_of(brokers, address)),
             "configuration_keys": sorted(names)},
            {"resource_type": GROUP_RESOURCE, "resource_name": SETTINGS_PROBE_GROUP, "configuration_keys": group_names}],
            include_synonyms=False, include_documentation=False)
    finally:
        connection.close()
    described = {}
    for result in sorted(answer.results, key=lambda result: result.resource_type == GROUP_RESOURCE):  # group last
        if result.error_code.name != "none":
            continue
        for config in result.configs:
            name = GROUP_SETTINGS.get(config.name, config.name) if result.resource_type == GROUP_RESOURCE else config.name
            # Every share setting the runner reads is a positive integer: another value describes nothing it can use.
            if name in names and (config.value or "").isdigit() and int(config.value) > 0:
                described[name] = config.value
    return described


def _node_of(brokers, address: tuple[str, int]) -> int:
    """The node id of the broker at `address` (the first one listed when none matches: a broker behind a proxy)."""
    return next((broker.node_id for broker in brokers if (broker.host, broker.port) == address), brokers[0].node_id)


def _connect(address: tuple[str, int]) -> BrokerConnection:
    host, port = address
    return BrokerConnection(host, port, "kipcheck-contact", CONTACT_TIMEOUT_MS, 100_000_000)


def _api_versions(connection: BrokerConnection) -> dict[int, int]:
    """{api key: the highest version served} (v2: what every broker with share groups serves)."""
    return {entry.api_key: entry.max_version for entry in connection.request(API_VERSIONS, 2).api_keys}
