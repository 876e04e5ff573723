"""Broker addresses in answers, rewritten so that clients stay behind the proxy.

    brokers = BrokerMap("127.0.0.1")
    brokers.add("kafka-1", 9092)                 # an upstream broker (one listener each)
    body = rewrite(body, brokers.listener_of)    # every (host, port) of a broker in a kio answer: the proxy's

Kafka names brokers by (host, port) in Metadata (`brokers`), FindCoordinator
(the answer itself before v4, `coordinators` from v4), DescribeCluster
(`brokers`), and the current leaders of Produce, Fetch, ShareFetch and
ShareAcknowledge (`node_endpoints`). `rewrite` walks any kio answer and replaces
every entity that has both a `host` and a `port` field, so a version or an API
that adds one is rewritten without a list here to forget. A broker the proxy
was not told about is added when an answer names it (`listener_of` asks the
proxy for a new listener), so a cluster is followed as it grows.
"""

from __future__ import annotations

import dataclasses
import socket
from functools import lru_cache
from typing import Any, Callable

from kio.serial._introspect import EntityField, EntityTupleField, classify_field

# The answers that may name a broker: api key -> the first version that does. Those that always do are decoded
# every time; the others (a leader named beside records) only when they hold the name of a broker host.
NAMING_BROKERS = {0: 10, 1: 16, 3: 0, 10: 0, 60: 0, 78: 0, 79: 0}
ALWAYS_NAMING = frozenset({3, 10, 60})


@lru_cache(maxsize=1024)
def resolved(host: str) -> str:
    """A host as one address, so that `localhost` and `127.0.0.1` are one broker (the name when it does not
    resolve)."""
    try:
        return socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0]
    except OSError:
        return host


class BrokerMap:
    """Upstream brokers and the listener of the proxy that stands for each."""

    def __init__(self, listen_host: str):
        self.listen_host = listen_host
        self.entries: list[tuple[int, str, int]] = []      # (proxy port, upstream host, upstream port)
        self.host_names: list[bytes] = []                  # every name a broker was given by, as an answer holds it
        self.listeners: dict[tuple[str, int], int] = {}   # (resolved host, port) upstream -> proxy port
        self.on_new: Callable[[str, int], int] | None = None  # opens a listener for a broker first named in an answer

    def add(self, host: str, port: int, listen_port: int) -> None:
        self.entries.append((listen_port, host, port))
        self.listeners[(resolved(host), port)] = listen_port
        self._named(host)

    def _named(self, host: str) -> None:
        if host.encode() not in self.host_names:
            self.host_names.append(host.encode())

    def listener_of(self, host: str, port: int) -> tuple[str, int]:
        """The proxy's address for the upstream broker at host:port."""
        self._named(host)
        key = (resolved(host), port)
        listen_port = self.listeners.get(key)
        if listen_port is None:
            if self.on_new is None:
                return host, port
            listen_port = self.on_new(host, port)
        return self.listen_host, listen_port

    def may_name_broker(self, api_key: int, api_version: int, frame: bytes) -> bool:
        """Whether an answer may hold a broker's address: a cheap test before decoding it."""
        if api_version < NAMING_BROKERS.get(api_key, 1 << 15):
            return False
        return api_key in ALWAYS_NAMING or any(host in frame for host in self.host_names)


def rewrite(entity: Any, listener_of: Callable[[str, int], tuple[str, int]]) -> Any:
    """`entity` with every (host, port) replaced by listener_of(host, port); the same object when nothing is."""
    cls = type(entity)
    changes = {}
    names = _entity_fields(cls)
    if "host" in names and "port" in names and entity.host is not None and entity.port >= 0:
        host, port = listener_of(entity.host, int(entity.port))
        if (host, port) != (entity.host, entity.port):
            changes["host"], changes["port"] = host, type(entity.port)(port)
    for name, many in names.items():
        if many is None:
            continue
        value = getattr(entity, name)
        if value is None:
            continue
        if many:
            new = tuple(rewrite(item, listener_of) for item in value)
            if any(item is not old for item, old in zip(new, value)):
                changes[name] = new
        elif (new := rewrite(value, listener_of)) is not value:
            changes[name] = new
    return dataclasses.replace(entity, **changes) if changes else entity


@lru_cache(maxsize=None)
def _entity_fields(cls: type) -> dict[str, bool | None]:
    """Field name -> True (a tuple of entities), False (one entity), None (anything else)."""
    kinds: dict[str, bool | None] = {}
    for field in dataclasses.fields(cls):
        kind = classify_field(field)
        kinds[field.name] = isinstance(kind, EntityTupleField) if isinstance(kind, (EntityField, EntityTupleField)) \
            else None
    return kinds
