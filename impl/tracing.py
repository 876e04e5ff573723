"""Trace files in shared/TRACE-FORMAT.md (version 1), for every writer in impl/: what all of them share.

    trace = Trace(path, {"machine": "ic", "config": {}}, storage)   # a new file gets the header; an old one resumes
    trace.step(at_ms, actor, op, args, observed)
    trace = open_new_trace(directory, stem, header, storage)        # `<stem>.jsonl`, else the next incarnation
    trace = open_revoke_delay_trace(directory, "consumer", group_id, member_id)   # or "coordinator"
    quoted_name("g:orders:0") -> "g%3Aorders%3A0";  safe_name("a.b") -> "a%2Eb"

Each machine's writer lives with its machine (impl/share/tracing.py, the
consumer's revoke-delay and ic traces, the group coordinator's, impl/ic's,
the Spark connectors'); they all write through Trace.

`at_ms` is the clock the writer was given; a value below the previous step's
is written as the previous value (the format demands a clock that never goes
back). Each line is one write to the operating system (through impl/storage),
so a killed process leaves at most a partial last line, which the checker
reports as malformed and a resuming writer cuts off.

A trace is a faithful record or none: a line the disk refuses is cut back
(never half-written), and that trace is given up: renamed to
`<name>.jsonl.incomplete` (never judged, never resumed), with an error in the
log; nothing a writer answers depends on its traces. JSON is written with
msgspec here: impl/ never imports oracle/.

Revoke-delay traces have two writers, the consumer and the group coordinator
(spec/revoke-delay.md, "Who writes which trace"), so their file names are
made here: `revoke-delay.<view>.<group>.<member>.jsonl`, the coordinator's view
with `config.view = "coordinator"` (RD-12).
"""

from __future__ import annotations

import logging
import urllib.parse
from pathlib import Path

import msgspec

from kipcheck.impl.storage import Storage, StorageError

FORMAT, VERSION = "kipcheck-trace", 1
INCOMPLETE_SUFFIX = ".incomplete"
COORDINATOR_ACTOR = "coordinator"

log = logging.getLogger("kipcheck.traces")


class Trace:
    """One trace file: a header, then numbered steps."""

    def __init__(self, path: Path, header: dict, storage: Storage | None = None) -> None:
        """`storage`: the writer's storage (a broker's bounds its open files); a client's trace may have its own."""
        self.path = path
        self._storage = storage = storage or Storage()
        self._step, self._clock_ms, self._file = _resume(path, storage)
        self.complete = True
        if self._file.size == 0:
            self._write({"format": FORMAT, "version": VERSION, **header})

    def step(self, at_ms: int, actor: str, op: str, args: dict, observed: dict | None = None) -> None:
        self._step += 1
        self._clock_ms = max(self._clock_ms, at_ms)
        record = {"step": self._step, "at_ms": self._clock_ms, "actor": actor, "op": op, "args": args}
        if observed is not None:
            record["observed"] = observed
        self._write(record)

    def _write(self, record: dict) -> None:
        if not self.complete:
            return
        try:
            self._file.append(msgspec.json.encode(record) + b"\n")
        except StorageError as error:
            self._give_up(error)

    def _give_up(self, error: StorageError) -> None:
        """A trace missing a step would be judged wrongly: set it aside, whole lines only."""
        self.complete = False
        target = self.path.with_name(self.path.name + INCOMPLETE_SUFFIX)
        try:
            if self._file.exists:
                self._storage.rename(self.path, target)
        except StorageError as rename_error:
            log.error("trace %s incomplete (%s) and not renamed: %s", self.path, error, rename_error)
            return
        log.error("trace %s incomplete from step %d (%s): set aside as %s", self.path.name, self._step, error,
                  target.name)

    def close(self) -> None:
        self._file.close()


def _resume(path: Path, storage: Storage):
    """(last step number, last at_ms, the file) of a trace; an existing one loses a partial last line."""
    if not path.exists():
        return 0, 0, storage.append_file(path)
    data = path.read_bytes()
    complete = data.rfind(b"\n") + 1
    file = storage.append_file(path, complete, len(data))
    lines = data[:complete].splitlines()
    if len(lines) <= 1:
        return 0, 0, file
    last = msgspec.json.decode(lines[-1])
    return last["step"], last["at_ms"], file


def new_incarnation(directory: Path, stem: str) -> Path:
    """`<stem>.jsonl`, or `<stem>.<n>.jsonl` with the first n >= 2 not yet taken (a process restarted)."""
    path, incarnation = directory / f"{stem}.jsonl", 1
    while path.exists():
        incarnation += 1
        path = directory / f"{stem}.{incarnation}.jsonl"
    return path


def open_new_trace(directory: str | Path, stem: str, header: dict, storage: Storage | None = None) -> Trace:
    """A new trace file `<stem>.jsonl`, or `<stem>.<incarnation>.jsonl` if taken (a broker restarted)."""
    directory, storage = Path(directory), storage or Storage()
    storage.make_dirs(directory)
    return Trace(new_incarnation(directory, stem), header, storage)


def open_revoke_delay_trace(directory: str | Path, view: str, group_id: str, member_id: str,
                            storage: Storage | None = None) -> Trace:
    """A new revoke-delay trace file (a new incarnation if one exists), written through `storage`."""
    config = {"view": view} if view == "coordinator" else {}
    return open_new_trace(directory, f"revoke-delay.{view}.{safe_name(group_id)}.{safe_name(member_id)}",
                          {"machine": "revoke-delay", "config": config}, storage)


def safe_name(name: str) -> str:
    """A readable, reversible file name part: dots escaped too, so it never looks like an incarnation."""
    return urllib.parse.quote(name, safe="-_").replace(".", "%2E")


def quoted_name(key: str) -> str:
    """A key as one file name part, every character but letters, digits and `_.-~` escaped."""
    return urllib.parse.quote(key, safe="")


def partition_names(partitions) -> list[str]:
    """Partitions as traces name them ("topic:partition"), sorted."""
    return sorted(str(tp) for tp in partitions)
