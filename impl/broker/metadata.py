"""Topics: names, partition counts and stable topic ids, kept in `<data dir>/topics.json`.

A topic's id is uuid5 of its name, so it is the same after a restart and on
every broker started from the same data dir: share consumers name topics by
id (ShareGroupHeartbeat assignments, ShareFetch), so ids must never change
under them.

Topic configs: `accept.range.fetch` (seed 000's topic config, default false:
Fetch with KeyRanges answers TOPIC_RANGE_FETCH_NOT_ALLOWED), set by CreateTopics
or IncrementalAlterConfigs and saved with the topic; a topic without configs is
saved as its partition count alone, as before.

A topic exists once `topics.json` holds it: the file is replaced atomically
(impl/storage) before the topic is added in memory, so a topic the disk
refused (TopicError KAFKA_STORAGE_ERROR) is neither visible nor half-saved.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from kipcheck.impl.storage import Storage, StorageError
from kipcheck.model.errors import Error

TOPIC_ID_NAMESPACE = uuid.UUID("6f0e8a52-3a1b-5c1e-9a55-6b1d3c9e0a01")
LEGAL_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
MAX_PARTITIONS = 1000
TOPIC_IDS_CACHED = 4096


class TopicError(Exception):
    """A topic request that cannot be served; `error` is Kafka's error name."""

    def __init__(self, error: str, message: str):
        super().__init__(message)
        self.error = error


TOPIC_CONFIGS = {"accept.range.fetch": "false"}    # the topic configs served, with their defaults


@dataclass(frozen=True)
class Topic:
    name: str
    partitions: int
    configs: tuple[tuple[str, str], ...] = ()      # set explicitly, sorted by name

    def config(self, name: str) -> str:
        return dict(self.configs).get(name, TOPIC_CONFIGS[name])

    @property
    def accept_range_fetch(self) -> bool:
        return self.config("accept.range.fetch") == "true"

    @property
    def topic_id(self) -> uuid.UUID:
        return topic_id_of(self.name)


@lru_cache(maxsize=TOPIC_IDS_CACHED)
def topic_id_of(name: str) -> uuid.UUID:
    return uuid.uuid5(TOPIC_ID_NAMESPACE, name)   # a SHA-1: named in every ShareFetch answer


class Topics:
    """The topic registry of one broker, persisted on every change."""

    def __init__(self, data_dir: Path, storage: Storage | None = None):
        self.path = data_dir / "topics.json"
        self.storage = storage or Storage()
        self.by_name: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        if self.path.exists():
            for name, saved in json.loads(self.path.read_text()).items():
                self._add(Topic(name, saved) if type(saved) is int else
                          Topic(name, saved["partitions"], tuple(sorted(saved["configs"].items()))))

    def get(self, name: str) -> Topic | None:
        return self.by_name.get(name)

    def get_by_id(self, topic_id: uuid.UUID | None) -> Topic | None:
        return self.by_id.get(topic_id) if topic_id is not None else None

    def create(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> Topic:
        """Create a topic (TopicError TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS,
        INVALID_CONFIG, KAFKA_STORAGE_ERROR)."""
        if name in self.by_name:
            raise TopicError(Error.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")  # Kafka's message
        if not LEGAL_TOPIC_NAME.match(name) or name in (".", ".."):
            raise TopicError(Error.INVALID_TOPIC_EXCEPTION, f"illegal topic name {name!r}")
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise TopicError(Error.INVALID_PARTITIONS, f"partition count {partitions} outside 1..{MAX_PARTITIONS}")
        topic = Topic(name, partitions, _checked(configs or {}))
        try:
            self._save([*self, topic])
        except StorageError as error:
            raise TopicError(Error.KAFKA_STORAGE_ERROR, f"topic {name!r} not created: {error}") from error
        self._add(topic)
        return topic

    def grow(self, name: str, partitions: int) -> Topic:
        """The topic with `partitions` partitions, more than it has (TopicError INVALID_PARTITIONS past
        MAX_PARTITIONS, KAFKA_STORAGE_ERROR); saved before it is seen, as a new topic is."""
        topic = self.by_name[name]
        if not topic.partitions < partitions <= MAX_PARTITIONS:
            raise TopicError(Error.INVALID_PARTITIONS, f"partition count {partitions} outside "
                                                       f"{topic.partitions + 1}..{MAX_PARTITIONS}")
        grown = replace(topic, partitions=partitions)
        try:
            self._save([grown if known.name == name else known for known in self])
        except StorageError as error:
            raise TopicError(Error.KAFKA_STORAGE_ERROR, f"topic {name!r} not grown: {error}") from error
        self._add(grown)
        return grown

    def alter(self, name: str, changes: dict[str, str | None]) -> Topic:
        """Set (or with None, reset to its default) topic configs (TopicError INVALID_CONFIG, KAFKA_STORAGE_ERROR)."""
        topic = self.by_name[name]
        configs = {**dict(topic.configs), **changes}
        altered = replace(topic, configs=_checked({key: value for key, value in configs.items() if value is not None}))
        try:
            self._save([altered if known.name == name else known for known in self])
        except StorageError as error:
            raise TopicError(Error.KAFKA_STORAGE_ERROR, f"configs of topic {name!r} not saved: {error}") from error
        self._add(altered)
        return altered

    def __iter__(self):
        return iter(sorted(self.by_name.values(), key=lambda topic: topic.name))

    def _add(self, topic: Topic) -> None:
        self.by_name[topic.name] = topic
        self.by_id[topic.topic_id] = topic

    def _save(self, topics: list[Topic]) -> None:
        self.storage.replace(self.path, json.dumps({
            topic.name: {"partitions": topic.partitions, "configs": dict(topic.configs)} if topic.configs
            else topic.partitions for topic in topics}).encode())


def _checked(configs: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The configs as saved; TopicError INVALID_CONFIG for a name not served or a bad value."""
    for name, value in configs.items():
        if name not in TOPIC_CONFIGS:
            raise TopicError(Error.INVALID_CONFIG, f"unknown topic config {name!r} (served: {', '.join(TOPIC_CONFIGS)})")
        if str(value).lower() not in ("true", "false"):
            raise TopicError(Error.INVALID_CONFIG, f"{name} must be true or false, found {value!r}")
    return tuple(sorted((name, str(value).lower()) for name, value in configs.items()))
