"""Apache Kafka's own Java clients (KafkaShareConsumer, KafkaConsumer, Admin), driven from Python: one JVM running
java/src/main/java/dev/kipcheck/kafka/ClientDriver.java, any number of named clients in it, any broker.

    with JavaClients(bootstrap, work_dir / "java.log", line="4.2") as java:
        consumer = java.share_consumer("a", "workers", ["tasks"], {"share.acknowledgement.mode": "explicit"})
        records = consumer.poll(500)                 # [JavaRecord], in the order the client gave them
        consumer.acknowledge(records, "ACCEPT")
        consumer.commit_sync()                       # {"tasks-0": None}: each partition's error, or None
        java.share_group_offsets("workers")          # {"tasks-0": ShareOffset(start=0, lag=0)}
        java.events                                  # every callback so far (rebalances, commits, acknowledgements)

Every call is answered by the driver within its own timeout and a margin; a call the client refused raises
JavaClientError with the client's exception; KafkaUnavailable (oracle/kafka/runtime.py) when Java, Maven or the
jars are missing. The JVM's warnings go to the log file given.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from kipcheck.oracle.kafka.line_program import LineProgram, LineProgramFailed

PROGRAM = "dev.kipcheck.kafka.ClientDriver"
ANSWER_MARGIN_S = 60.0   # beyond a call's own timeout: the JVM may be starting, or the machine loaded
ACKNOWLEDGE_TYPES = ("ACCEPT", "RELEASE", "REJECT", "RENEW")


class JavaClientError(RuntimeError):
    """A Java client refused a call (the message is its exception), or the driver itself failed."""


@dataclass(frozen=True)
class JavaRecord:
    topic: str
    partition: int
    offset: int
    key: str | None
    value: str | None
    delivery_count: int | None = None   # a share consumer's records only

    @property
    def address(self) -> str:
        return f"{self.topic}:{self.partition}:{self.offset}"


@dataclass(frozen=True)
class ShareOffset:
    start: int | None   # the start offset stored (Kafka keeps it below records acknowledged since its last move)
    lag: int | None     # records from the start to the log end not yet delivered for good (None: not told)


class JavaClients:
    """One ClientDriver JVM against `bootstrap`; its clients are created through it and live until it stops."""

    def __init__(self, bootstrap: str, log_path: Path, line: str = "4.2"):
        self.line = line
        self.program = LineProgram(PROGRAM, [bootstrap], line, log_path)
        self.events: list[dict[str, Any]] = []

    def __enter__(self) -> "JavaClients":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def ask(self, *words: Any, timeout_s: float = 0.0) -> dict[str, Any]:
        """Send one command; its answer (JavaClientError when the call raised or the driver failed)."""
        if any(not str(word) or set(str(word)) & {" ", "\n"} for word in words):
            raise ValueError(f"a driver command's words are non-empty and hold no space or newline: {words}")
        try:
            answer = self.program.ask(" ".join(map(str, words)), timeout_s + ANSWER_MARGIN_S)
        except LineProgramFailed as failure:
            raise JavaClientError(str(failure)) from None
        self.events += answer.get("events", [])
        if "error" in answer:
            raise JavaClientError(f"{words[0]} {words[1] if len(words) > 1 else ''}: {answer['error']}")
        return answer

    # -- clients --------------------------------------------------------------------------------------------

    def share_consumer(self, name: str, group: str, topics: list[str],
                       settings: dict[str, Any] | None = None) -> "JavaShareConsumer":
        self.ask("share_consumer", name, group, ",".join(topics), *_settings(settings))
        return JavaShareConsumer(self, name)

    def consumer(self, name: str, group: str, topics: list[str],
                 settings: dict[str, Any] | None = None) -> "JavaConsumer":
        """A KafkaConsumer that commits what it consumed of a partition before letting it go."""
        self.ask("consumer", name, group, ",".join(topics), *_settings(settings))
        return JavaConsumer(self, name)

    # -- Admin ----------------------------------------------------------------------------------------------

    def set_group_config(self, group: str, settings: dict[str, Any]) -> None:
        self.ask("set_group_config", group, *_settings(settings))

    def share_group_offsets(self, group: str) -> dict[str, "ShareOffset"]:
        """{"TOPIC-P": ShareOffset} of every share-partition the group has, as its share coordinator stores it."""
        offsets = self.ask("share_group_offsets", group)["offsets"]
        return {partition: ShareOffset(**offset) for partition, offset in offsets.items()}

    def consumer_group_offsets(self, group: str) -> dict[str, int]:
        return self.ask("consumer_group_offsets", group)["offsets"]

    # -- the process ----------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Close every client (the driver's exit) and wait; kill -9 if it does not end."""
        self.program.stop("exit")

    def kill(self) -> None:
        """SIGKILL: the clients vanish without a goodbye (their connections close)."""
        self.program.kill()


class _Client:
    def __init__(self, driver: JavaClients, name: str):
        self.driver, self.name = driver, name

    def poll(self, timeout_ms: int = 500) -> list[JavaRecord]:
        answer = self.driver.ask("poll", self.name, timeout_ms, timeout_s=timeout_ms / 1000)
        return [JavaRecord(**record) for record in answer["records"]]

    def commit_async(self) -> None:
        self.driver.ask("commit_async", self.name)

    def close(self, timeout_ms: int = 30_000) -> None:
        self.driver.ask("close", self.name, timeout_ms, timeout_s=timeout_ms / 1000)

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        """This client's events so far (of `kind` only, when given), in order."""
        return [event for event in self.driver.events
                if event["client"] == self.name and kind in (None, event["event"])]


class JavaShareConsumer(_Client):
    def acknowledge(self, records: Iterable[JavaRecord], kind: str) -> None:
        if kind not in ACKNOWLEDGE_TYPES:
            raise ValueError(f"an acknowledgement is one of {', '.join(ACKNOWLEDGE_TYPES)}, not {kind!r}")
        addresses = [record.address for record in records]
        if addresses:
            self.driver.ask("acknowledge", self.name, kind, *addresses)

    def commit_sync(self, timeout_ms: int = 30_000) -> dict[str, str | None]:
        """The acknowledgements sent: {"TOPIC-P": None, or the error the broker answered}."""
        return self.driver.ask("commit_sync", self.name, timeout_ms, timeout_s=timeout_ms / 1000)["results"]


class JavaConsumer(_Client):
    def commit_sync(self, timeout_ms: int = 30_000) -> dict[str, int]:
        """Commit every partition's consumed position; {"TOPIC-P": offset committed}."""
        return self.driver.ask("commit_sync", self.name, timeout_ms, timeout_s=timeout_ms / 1000)["committed"]


def _settings(settings: dict[str, Any] | None) -> list[str]:
    return [f"{name}={value}" for name, value in (settings or {}).items()]
