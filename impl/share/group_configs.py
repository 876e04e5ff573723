"""GroupConfigs: a share group's dynamic configs, as Kafka 4.2's GroupConfig has them, kept on disk.

    configs = GroupConfigs(directory, share_config, storage)
    configs.alter("g", [("share.record.lock.duration.ms", SET, "20000")])   # -> None, or (error, message)
    configs.describe("g")            # [(name, value, set for the group?)] for every name served
    configs.share_config("g")        # the broker's ShareConfig with the group's values over it

Served names: share.record.lock.duration.ms (read at each acquisition and
renewal, SP-46), share.auto.offset.reset (read when a share-partition is
first initialized; a persisted start offset always wins) and
share.isolation.level (SP-62; read when the group's share-partition is
loaded, as a share-partition trace has one isolation level: Kafka 4.2 reads
it at each ShareFetch, so a change reaches a loaded share-partition here only
after a restart). A group without a value takes the broker's. Kafka 4.2 validates a group's lock duration against
group.share.min/max.record.lock.duration.ms (GroupConfig.validateValues);
under `kip` any positive duration is taken. An alteration is all or nothing
and is on disk (one DurableLog record, fsync'd) before it answers.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import msgspec

from kipcheck.impl.settings import parse_integer
from kipcheck.impl.share.config import ShareConfig
from kipcheck.impl.storage import Storage
from kipcheck.impl.storage.durable_log import DurableLog
from kipcheck.model.errors import Error

LOG_NAME = "group-configs.log"
# IncrementalAlterConfigs' config_operation values.
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# Kafka's group config name -> the ShareConfig field it overrides for the group.
NAMES = {
    "share.record.lock.duration.ms": "record_lock_duration_ms",
    "share.auto.offset.reset": "auto_offset_reset",
    "share.isolation.level": "isolation_level",
}


class GroupConfigs:
    def __init__(self, directory: Path, config: ShareConfig, storage: Storage, fsync: bool = True) -> None:
        self.config = config
        self._groups: dict[str, dict[str, str]] = {}
        self._effective: dict[str, ShareConfig] = {}   # share_config's answers: read at every ShareFetch
        storage.make_dirs(directory)
        self._log = DurableLog(Path(directory) / LOG_NAME, fsync=fsync, storage=storage)
        for payload in self._log.replay():
            record = msgspec.json.decode(payload)
            self._groups[record["group"]] = record["configs"]

    def close(self) -> None:
        self._log.close()

    def alter(self, group: str, changes: list[tuple[str, int, str | None]],
              validate_only: bool = False) -> tuple[str, str] | None:
        """Apply every change to the group's configs, or none: (error name, message) when one is refused.

        A StorageError (Kafka's KAFKA_STORAGE_ERROR) leaves the configs as they were."""
        values = dict(self._groups.get(group, {}))
        for name, operation, value in changes:
            if name not in NAMES:
                return Error.INVALID_CONFIG, f"Unknown group config name: {name} (served: {', '.join(NAMES)})"
            if operation == DELETE:
                values.pop(name, None)
            elif operation == SET and value is not None:
                values[name] = value.strip()
            else:
                return Error.INVALID_CONFIG, f"{name} takes only SET and DELETE (a single value), not operation {operation}"
        try:
            self._config_with(values)
        except ValueError as error:
            return Error.INVALID_CONFIG, str(error)
        if not validate_only and values != self._groups.get(group, {}):
            self._log.append(msgspec.json.encode({"group": group, "configs": values}))
            self._groups[group] = values
            self._effective.pop(group, None)
        return None

    def describe(self, group: str) -> list[tuple[str, str, bool]]:
        values = self._groups.get(group, {})
        effective = self.share_config(group)
        return [(name, str(getattr(effective, field)), name in values) for name, field in NAMES.items()]

    def share_config(self, group: str) -> ShareConfig:
        values = self._groups.get(group)
        if not values:
            return self.config
        if group not in self._effective:
            self._effective[group] = self._config_with(values)
        return self._effective[group]

    def _config_with(self, values: dict[str, str]) -> ShareConfig:
        """The broker's config with the group's values over it; ValueError naming a bad one."""
        overrides: dict[str, str | int] = {}
        for name, value in values.items():
            overrides[NAMES[name]] = value
        lock_name = "share.record.lock.duration.ms"
        if lock_name in values:
            lock_duration_ms = overrides["record_lock_duration_ms"] = parse_integer(lock_name, values[lock_name])
            if lock_duration_ms < 1:
                raise ValueError(f"{lock_name} must be a positive integer, found {lock_duration_ms}")
        config = dataclasses.replace(self.config, **overrides)
        if lock_name in values and config.profile == "kafka-4.2":
            config.check_lock_duration(lock_name)   # GroupConfig.validateValues
        return config
