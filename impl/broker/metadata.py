"""Topics: names, partition counts and stable topic ids, kept in `<data dir>/topics.json`.

A topic's id is uuid5 of its name, so it is the same after a restart and on
every broker started from the same data dir: share consumers name topics by
id (ShareGroupHeartbeat assignments, ShareFetch), so ids must never change
under them.

A topic exists once `topics.json` holds it: the file is replaced atomically
(impl/storage) before the topic is added in memory, so a topic the disk
refused (TopicError KAFKA_STORAGE_ERROR) is neither visible nor half-saved.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from kipcheck.impl.storage import Storage, StorageError

TOPIC_ID_NAMESPACE = uuid.UUID("6f0e8a52-3a1b-5c1e-9a55-6b1d3c9e0a01")
LEGAL_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
MAX_PARTITIONS = 1000


class TopicError(Exception):
    """A topic request that cannot be served; `error` is Kafka's error name."""

    def __init__(self, error: str, message: str):
        super().__init__(message)
        self.error = error


@dataclass(frozen=True)
class Topic:
    name: str
    partitions: int

    @property
    def topic_id(self) -> uuid.UUID:
        return topic_id_of(self.name)


def topic_id_of(name: str) -> uuid.UUID:
    return uuid.uuid5(TOPIC_ID_NAMESPACE, name)


class Topics:
    """The topic registry of one broker, persisted on every change."""

    def __init__(self, data_dir: Path, storage: Storage | None = None):
        self.path = data_dir / "topics.json"
        self.storage = storage or Storage()
        self.by_name: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        if self.path.exists():
            for name, partitions in json.loads(self.path.read_text()).items():
                self._add(Topic(name, partitions))

    def get(self, name: str) -> Topic | None:
        return self.by_name.get(name)

    def get_by_id(self, topic_id: uuid.UUID | None) -> Topic | None:
        return self.by_id.get(topic_id) if topic_id is not None else None

    def create(self, name: str, partitions: int) -> Topic:
        """Create a topic (TopicError TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS,
        KAFKA_STORAGE_ERROR)."""
        if name in self.by_name:
            raise TopicError("TOPIC_ALREADY_EXISTS", f"topic {name!r} already exists")
        if not LEGAL_TOPIC_NAME.match(name) or name in (".", ".."):
            raise TopicError("INVALID_TOPIC_EXCEPTION", f"illegal topic name {name!r}")
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise TopicError("INVALID_PARTITIONS", f"partition count {partitions} outside 1..{MAX_PARTITIONS}")
        topic = Topic(name, partitions)
        try:
            self._save([*self, topic])
        except StorageError as error:
            raise TopicError("KAFKA_STORAGE_ERROR", f"topic {name!r} not created: {error}") from error
        self._add(topic)
        return topic

    def __iter__(self):
        return iter(sorted(self.by_name.values(), key=lambda topic: topic.name))

    def _add(self, topic: Topic) -> None:
        self.by_name[topic.name] = topic
        self.by_id[topic.topic_id] = topic

    def _save(self, topics: list[Topic]) -> None:
        self.storage.replace(self.path, json.dumps({topic.name: topic.partitions for topic in topics}).encode())
