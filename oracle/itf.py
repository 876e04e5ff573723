"""Replay Quint's ITF traces through the Python models, step by step.

The specs in tla/*.qnt are a second, independent statement of four machines.
`quint run --mbt --out-itf` writes each simulated run as an ITF trace whose
states carry `mbt::actionTaken` (the action of the step) and
`mbt::nondetPicks` (the values its `nondet` bindings chose). A `Replayer`
maps each action and its picks to calls on the machine's Python model, then
compares the fields the Quint state holds after the step with the model's:
the first difference raises `Mismatch`, naming the step, the action and the
field. A model `Violation` on a step Quint allowed is a mismatch too.

Library API:

- `run_quint(spec, out_dir, ...) -> QuintRun`: simulate one spec with its
  `invariants` definition and write ITF traces (needs tla/node_modules).
- `load(path) -> itf_py.Trace`, `replay(trace, machine=None, model=None) -> int`
  (the number of steps replayed); `model` replaces the machine's model class,
  which is how tests check that a broken model is caught.
- `REPLAYERS`: machine name -> Replayer class.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar

import itf_py

from kipcheck.model import ic, revoke_delay, share_partition, share_session, share_state
from kipcheck.model.errors import Error
from kipcheck.model.violation import Violation

# tla/share_partition_log.qnt: the share-partition machine under kafka-4.2, over a log with transactions.
SHARE_PARTITION_LOG = "share-partition/kafka-4.2-log"
ACTION = "mbt::actionTaken"
PICKS = "mbt::nondetPicks"
# Which machine a trace belongs to, from the Quint module it was simulated from.
MODULES = {"share_partition": "share-partition", "share_session": "share-session",
           "revoke_delay": "revoke-delay", "ic": "ic", "share_partition_log": SHARE_PARTITION_LOG,
           "share_state_records": "share-state"}


class Mismatch(AssertionError):
    """The Python model and the Quint spec disagree after a step."""

    def __init__(self, step: int, action: str, field: str, quint: Any, model: Any) -> None:
        super().__init__(f"step {step} ({action}): {field}: quint {quint!r}, model {model!r}")
        self.step, self.action, self.field, self.quint, self.model = step, action, field, quint, model


def plain(value: Any) -> Any:
    """An ITF value as plain, comparable Python: sets and tuples as sorted or ordered lists."""
    if isinstance(value, frozenset):
        items = [plain(item) for item in value]
        try:
            return sorted(items)
        except TypeError:  # records or mixed types: any fixed order will do
            return sorted(items, key=repr)
    if isinstance(value, dict):
        return {plain(key): plain(item) for key, item in value.items()}
    if hasattr(value, "_fields"):
        if hasattr(type(value), "_itf_variant"):
            return plain(value.value) if value._fields == ("value",) else {k: plain(v) for k, v in value._asdict().items()}
        return {name: plain(item) for name, item in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


def picks_of(state: itf_py.State) -> dict[str, Any]:
    """The nondeterministic picks a step made, by name (`load` keeps only those that were made)."""
    return {name: plain(pick) for name, pick in state.values[PICKS]._asdict().items()}


class Replayer:
    """Drives one machine's model from Quint states. Subclasses map actions to model calls."""

    machine: ClassVar[str]
    model_class: ClassVar[type]

    def __init__(self, initial: dict[str, Any], model_class: type | None = None) -> None:
        self.model_class = model_class or type(self).model_class
        self.start(initial)

    def start(self, initial: dict[str, Any]) -> None:
        raise NotImplementedError

    def apply(self, action: str, picks: dict[str, Any], state: dict[str, Any]) -> None:
        """Make the model calls of one Quint step; `state` is the Quint state after it."""
        handler: Callable[[dict[str, Any], dict[str, Any]], None] | None = getattr(self, "on_" + action, None)
        if handler is None:
            raise ValueError(f"{self.machine}: no replay for Quint action {action!r}")
        handler(picks, state)

    def quint_view(self, state: dict[str, Any]) -> dict[str, Any]:
        """The fields of a Quint state that the model must match, in model terms."""
        raise NotImplementedError

    def model_view(self) -> dict[str, Any]:
        raise NotImplementedError


class ICReplayer(Replayer):
    """tla/ic.qnt through model/ic.py."""

    machine = "ic"
    model_class = ic.IndividualCommit

    def start(self, initial: dict[str, Any]) -> None:
        config = initial["config"]
        self.model = self.model_class(max_ranges=config["maxRanges"],
                                      accept_individual_commit=config["acceptIndividualCommit"])
        self.log: list[dict] = []  # every append so far, in write order
        self._answer(Error.NONE)

    def _answer(self, error: str, appends: list[dict] | None = None, amended: list[list[int]] | None = None,
                held: tuple[int, list[list[int]]] | None = None) -> None:
        # IC-9: a commit answers the state after it; a fetch (or nothing) answers the held state.
        stable_offset, ranges = held or self.model.fetch()
        self.answer = {"error": error, "stable_offset": stable_offset, "ranges": ranges,
                       "appends": appends or [], "amended": amended or []}

    def on_commit(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        result = self.model.commit(picks["request"])
        self.log += result.appends
        self._answer(result.error, result.appends, held=(result.stable_offset, result.ranges))

    def on_fetch(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self._answer(Error.NONE)

    def on_amend(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self._answer(Error.NONE, amended=self.model.amend(picks["fetched"], [picks["processed"]]))

    def quint_view(self, state: dict[str, Any]) -> dict[str, Any]:
        appends = [{"log": "primary", "stable_offset": offset} for offset in state["appendedStableOffset"]]
        appends += [{"log": "ic", "put": r} for r in state["appendedPuts"]]
        appends += [{"log": "ic", "tombstone": r} for r in state["appendedTombstones"]]
        return {"error": state["lastError"], "stable_offset": state["stableOffset"], "ranges": state["ranges"],
                "appends": appends, "amended": state["amendedCommit"],
                "log_replayed": [state["stableOffset"], state["ranges"]]}

    def model_view(self) -> dict[str, Any]:
        # IC-12: the logs written so far replay to the held state.
        return {**self.answer, "log_replayed": list(ic.replay(self.log))}


class SharePartitionReplayer(Replayer):
    """tla/share_partition.qnt through model/share_partition.py (kip profile)."""

    machine = "share-partition"
    model_class = share_partition.SharePartition

    def start(self, initial: dict[str, Any]) -> None:
        config = initial["config"]
        self.model = self.model_class(
            start_offset=config["startOffset"], delivery_count_limit=config["deliveryCountLimit"],
            record_lock_duration_ms=config["recordLockDurationMs"],
            max_inflight_records=config["maxInflightRecords"], profile="kip")
        self.error = Error.NONE

    def on_appendBatch(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.model.advance(state["nowMs"])
        self.model.append(picks["count"])
        self.error = Error.NONE

    def on_acquire(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        # The observed answer: the picked offsets with the delivery counts Quint gave them (SP-4).
        records = state["partition"]["records"]
        runs: list[list[int]] = []
        for offset in picks["offsets"]:
            count = records[offset]["deliveryCount"]
            if runs and runs[-1][1] == offset - 1 and runs[-1][2] == count:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset, count])
        self.model.acquire(state["nowMs"], picks["member"], picks["maxRecords"], runs)
        self.error = Error.NONE

    def on_acknowledge(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        if "ownFirst" in picks:
            batches = [[picks["ownFirst"], picks["ownLast"], picks["ackType"]]]
        else:
            batches = [picks["batch"], picks["secondBatch"]][:picks["batchCount"]]
        ruled = self.model.acknowledge(state["nowMs"], picks["member"], [tuple(batch) for batch in batches])
        self.error = ruled.value

    def on_leave(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.model.leave(state["nowMs"], picks["member"])
        self.error = Error.NONE

    def on_tick(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.model.advance(state["nowMs"])
        self.error = Error.NONE

    def quint_view(self, state: dict[str, Any]) -> dict[str, Any]:
        partition = state["partition"]
        window = {}
        for offset in range(partition["spso"], partition["speo"]):
            record = partition["records"][offset]
            acquired = record["state"] == share_partition.ACQUIRED
            window[offset] = [record["state"], record["deliveryCount"], record["owner"] or None,
                              record["lockDeadlineMs"] if acquired else None]
        return {"error": state["lastError"], "spso": partition["spso"], "speo": partition["speo"],
                "log_end_offset": partition["logEnd"], "window": window}

    def model_view(self) -> dict[str, Any]:
        model = self.model
        window = {offset: [model.state_of(offset), model.delivery_count_of(offset), model.owner_of(offset),
                           model.lock_deadline_of(offset)] for offset in range(model.spso, model.speo)}
        return {"error": self.error, "spso": model.spso, "speo": model.speo,
                "log_end_offset": model.log_end_offset, "window": window}


class ShareSessionReplayer(Replayer):
    """tla/share_session.qnt through model/share_session.py (the profile is picked per run)."""

    machine = "share-session"
    model_class = share_session.ShareSessionCache

    def start(self, initial: dict[str, Any]) -> None:
        config = initial["config"]
        self.model = self.model_class(profile=config["profile"], max_sessions=config["maxSessions"])
        self.answer = share_session.Answer(Error.NONE, "SS-1")

    # The request is in the state (`lastRequest`): several branches of the spec send a ShareFetch.
    def on_shareFetch(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        request = state["lastRequest"]
        self.answer = self.model.share_fetch(request["member"], request["epoch"], add=request["add"],
                                             forget=request["forget"], has_acks=request["hasAcks"])

    def on_shareAcknowledge(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        request = state["lastRequest"]
        self.answer = self.model.share_acknowledge(request["member"], request["epoch"])

    def quint_view(self, state: dict[str, Any]) -> dict[str, Any]:
        sessions = {member: [session["epoch"], session["partitions"]] for member, session in state["sessions"].items()}
        return {"error": state["lastError"], "acknowledges": state["lastAcknowledges"],
                "releases": state["lastReleases"], "sessions": sessions}

    def model_view(self) -> dict[str, Any]:
        sessions = {member: [session.epoch, sorted(session.partitions)]
                    for member, session in self.model.by_member.items()}
        return {"error": self.answer.error, "acknowledges": self.answer.acknowledges,
                "releases": self.answer.releases, "sessions": sessions}


class RevokeDelayReplayer(Replayer):
    """tla/revoke_delay.qnt through model/revoke_delay.py."""

    machine = "revoke-delay"
    model_class = revoke_delay.RevokeDelayConsumer
    NO_POLL = {"revoked": [], "toBeRevoked": [], "lost": [], "fetchable": [], "recordsFrom": []}

    def start(self, initial: dict[str, Any]) -> None:
        self.model = self.model_class()
        self._answer()

    def _answer(self, polled: dict[str, Any] | None = None, delay_result: bool = False,
                commit_error: str = Error.NONE) -> None:
        self.answer = {"polled": polled or self.NO_POLL, "delay_result": delay_result, "commit_error": commit_error}

    def on_coordinatorAssigns(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.model.assign(picks["ps"])
        self._answer()

    def on_coordinatorRevokes(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.model.revoke(picks["ps"])
        self._answer()

    def on_coordinatorLoses(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.model.lose(picks["ps"])
        self._answer()

    def on_poll(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        result = self.model.poll()
        # RD-7: the records Quint's poll returned must be allowed by the model.
        self.model.check_records_from(picks["recordsFrom"])
        self._answer({"revoked": sorted(result.revoked), "toBeRevoked": sorted(result.to_be_revoked),
                      "lost": sorted(result.lost), "fetchable": sorted(result.fetchable),
                      "recordsFrom": picks["recordsFrom"]})

    def on_delayRevoke(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self._answer(delay_result=self.model.delay_revoke(state["delayRequest"]))

    def on_commit(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self._answer(commit_error=self.model.commit(picks["partition"]))

    def quint_view(self, state: dict[str, Any]) -> dict[str, Any]:
        consumer = state["consumer"]
        return {"polled": state["polled"], "delay_result": state["delayResult"], "commit_error": state["commitError"],
                "owned": consumer["owned"], "revoke_next": consumer["revokeNext"],
                "revoke_thereafter": consumer["revokeThereafter"], "lost": consumer["lost"],
                "pending": consumer["pending"]}

    def model_view(self) -> dict[str, Any]:
        model = self.model
        return {**self.answer, "owned": sorted(model.owned), "revoke_next": sorted(model.revoke_next),
                "revoke_thereafter": sorted(model.revoke_thereafter), "lost": sorted(model.lost),
                "pending": [[kind, sorted(partitions)] for kind, partitions in model.pending]}


class SharePartitionLogReplayer(Replayer):
    """tla/share_partition_log.qnt through model/share_partition.py (kafka-4.2: SP-61..SP-67)."""

    machine = SHARE_PARTITION_LOG
    model_class = share_partition.SharePartition

    def start(self, initial: dict[str, Any]) -> None:
        config = initial["config"]
        self.model = self.model_class(
            delivery_count_limit=config["deliveryCountLimit"], record_lock_duration_ms=self.LOCK_DURATION_MS,
            profile="kafka-4.2", isolation_level="read_committed" if config["readCommitted"] else "read_uncommitted")
        self.error = Error.NONE

    LOCK_DURATION_MS = 100  # the spec's LOCK_DURATION_MS

    def apply(self, action: str, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.error = Error.NONE  # only an acknowledgement answers; Quint acknowledges held runs only
        super().apply(action, picks, state)

    def on_appendBatch(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.model.advance(state["nowMs"])
        self.model.append(picks["count"])

    def on_appendTxn(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.model.advance(state["nowMs"])
        self.model.append(picks["count"], picks["producer"])

    def on_endTxn(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.model.advance(state["nowMs"])
        self.model.end_transaction(picks["producer"], "commit" if picks["commit"] else "abort")

    def on_acquire(self, picks: dict[str, Any], state: dict[str, Any],
                   released_beside: frozenset[int] = frozenset()) -> None:
        # The observed answer: what Quint acquired, with the counts it gave, and what it archived (SP-63).
        records = state["partition"]["records"]
        acquired = share_partition.runs_of(state["lastAcquired"], lambda offset: records[offset]["deliveryCount"])
        archived = [[first, last] for first, last, _ in share_partition.runs_of(state["lastArchived"], lambda _: 1)]
        self.model.acquire(state["nowMs"], picks["member"], picks["maxRecords"], [list(run) for run in acquired],
                           archived=archived, released_beside=released_beside)

    def on_fetchReleasing(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        # SP-67: the ShareFetch's release, then its acquisition, which may leave the released records out.
        first, last = picks["releasedRun"]
        self.error = self.model.acknowledge(state["nowMs"], picks["member"], [(first, last, "release")]).value
        released = frozenset(range(max(first, self.model.spso), min(last + 1, self.model.speo)))
        self.on_acquire(picks, state, released)

    def on_acknowledge(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        first, last = picks["heldRun"]
        self.error = self.model.acknowledge(state["nowMs"], picks["member"], [(first, last, picks["ackType"])]).value

    def on_logStart(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.model.move_log_start(state["nowMs"], picks["offset"])

    def on_compact(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.model.compact(state["nowMs"], *picks["batch"])

    def on_tick(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.model.advance(state["nowMs"])

    def quint_view(self, state: dict[str, Any]) -> dict[str, Any]:
        partition = state["partition"]
        window = {offset: [partition["records"][offset]["state"], partition["records"][offset]["deliveryCount"],
                           partition["records"][offset]["owner"] or None]
                  for offset in range(partition["spso"], partition["speo"])}
        return {"error": Error.NONE, "spso": partition["spso"], "speo": partition["speo"],
                "log_end_offset": state["log"]["end"], "window": window}

    def model_view(self) -> dict[str, Any]:
        model = self.model
        window = {offset: [model.state_of(offset), model.delivery_count_of(offset), model.owner_of(offset)]
                  for offset in range(model.spso, model.speo)}
        return {"error": self.error, "spso": model.spso, "speo": model.speo, "log_end_offset": model.log_end_offset,
                "window": window}


class ShareStateRecordsReplayer(Replayer):
    """tla/share_state_records.qnt through model/share_state.py (kafka-4.2: ST-31..ST-35)."""

    machine = "share-state"
    model_class = share_state.ShareCoordinator

    def start(self, initial: dict[str, Any]) -> None:
        # The spec's UPDATES_PER_SNAPSHOT and COLD_INTERVAL_MS.
        self.model = self.model_class("kafka-4.2", deltas_per_checkpoint=2, cold_snapshot_interval_ms=100)
        self.error = Error.NONE

    def apply(self, action: str, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.model.advance(state["nowMs"])
        self.model.appended, self.error = "none", Error.NONE
        super().apply(action, picks, state)

    def on_initialize(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.error = self.model.initialize(picks["stateEpoch"], picks["startOffset"]).error

    def on_write(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.error = self.model.write(picks["stateEpoch"], picks["startOffset"], [], picks["leaderEpoch"]).error

    def on_read(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.error = self.model.read(picks["leaderEpoch"]).error

    def on_delete(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.error = self.model.delete().error

    def on_coldSnapshot(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.model.cold_snapshot()

    def on_prune(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.model.prune()

    def on_failover(self, picks: dict[str, Any], state: dict[str, Any]) -> None:
        self.model.failover()

    def quint_view(self, state: dict[str, Any]) -> dict[str, Any]:
        key = state["key"]
        stored = [key["snapshotEpoch"], key["stateEpoch"], key["leaderEpoch"], key["startOffset"], key["updates"]]
        return {"error": state["lastError"], "appended": state["appended"], "state": stored if key["exists"] else None}

    def model_view(self) -> dict[str, Any]:
        stored = self.model.state
        return {"error": self.error, "appended": self.model.appended,
                "state": None if stored is None else [stored.checkpoint_epoch, stored.state_epoch, stored.leader_epoch,
                                                      stored.start_offset, stored.deltas]}


REPLAYERS: dict[str, type[Replayer]] = {replayer.machine: replayer for replayer in (
    ICReplayer, SharePartitionReplayer, ShareSessionReplayer, RevokeDelayReplayer, SharePartitionLogReplayer,
    ShareStateRecordsReplayer)}


def load(path: str | Path) -> itf_py.Trace:
    """Read an ITF trace written by `quint run --mbt`."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    for state in data["states"]:
        if PICKS not in state:
            raise ValueError(f"{path}: no {PICKS} in the trace: simulate with `quint run --mbt`")
        # Keep the picks the step made ({"tag": "Some", "value": v} -> v). itf-py 0.5.0 cannot
        # read the others: it names a class after the tag, and `None` is a Python keyword.
        state[PICKS] = {name: pick["value"] for name, pick in state[PICKS].items() if pick["tag"] == "Some"}
    return itf_py.trace_from_json(data)


def machine_of(trace: itf_py.Trace) -> str:
    source = Path(trace.meta.get("source", "")).stem
    if source not in MODULES:
        raise ValueError(f"ITF trace from {source or 'an unknown source'!r}: expected one of {sorted(MODULES)}")
    return MODULES[source]


def replay(trace: itf_py.Trace, machine: str | None = None, model: type | None = None) -> int:
    """Replay every step of `trace` through the model; raise Mismatch at the first difference."""
    machine = machine or machine_of(trace)
    if machine not in REPLAYERS:
        raise ValueError(f"no Quint replay for machine {machine!r} (known: {', '.join(sorted(REPLAYERS))})")
    replayer_class = REPLAYERS[machine]
    states = [{name: plain(value) for name, value in state.values.items()} for state in trace.states]
    replayer = replayer_class(states[0], model)
    _compare(replayer, 0, "init", states[0])
    for index, (raw, state) in enumerate(zip(trace.states[1:], states[1:]), start=1):
        action = state[ACTION]
        try:
            replayer.apply(action, picks_of(raw), state)
        except Violation as violation:
            raise Mismatch(index, action, f"allowed ({violation.clause})", "allowed", str(violation)) from None
        _compare(replayer, index, action, state)
    return len(states) - 1


def _compare(replayer: Replayer, index: int, action: str, state: dict[str, Any]) -> None:
    expected, actual = replayer.quint_view(state), replayer.model_view()
    # Fields in the view's order (answers first), so a mismatch names the most telling one.
    for field in [*expected, *(name for name in actual if name not in expected)]:
        if expected.get(field) != actual.get(field):
            raise Mismatch(index, action, field, expected.get(field), actual.get(field))


@dataclass(frozen=True)
class QuintRun:
    command: list[str]  # reproduces the run
    returncode: int
    output: str
    traces: list[Path]


def run_quint(spec: Path, out_dir: Path, *, samples: int, steps: int, traces: int, seed: int,
              tla_dir: Path | None = None, timeout_s: float = 300) -> QuintRun:
    """Simulate `spec` with its `invariants` (TypeScript backend) and write `traces` ITF files to `out_dir`."""
    quint = (tla_dir or spec.parent) / "node_modules" / ".bin" / "quint"
    if not quint.exists():
        raise FileNotFoundError(f"{quint} is missing: run `npm ci` in {quint.parents[2]} (make test does)")
    out_dir.mkdir(parents=True, exist_ok=True)
    pattern = out_dir / f"{spec.stem}_{{seq}}.itf.json"
    command = [str(quint), "run", "--backend=typescript", "--mbt", "--invariant=invariants",
               f"--max-samples={samples}", f"--max-steps={steps}", f"--n-traces={traces}",
               f"--seed={seed}", f"--out-itf={pattern}", "--verbosity=1", str(spec)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    written = sorted(out_dir.glob(f"{spec.stem}_*.itf.json"))
    return QuintRun(command, done.returncode, done.stdout + done.stderr, written)
