"""A counterexample read for its picture: its steps up to the one that broke a clause, replayed through its judge.

    example = read_counterexample(lines, steps_max=30)   # the lines of a trace, header first
    example.steps           # the last steps up to and including the failing one (at most steps_max + 1)
    example.failing         # the Violation of the last step (None: the trace broke no clause)
    example.actors()        # one lane each: the members, and the log, clock or coordinator that acted
    example.entries(step)   # [(lane, what it asked, what it was answered)]
    example.failure_lines() # the failing step in words: who did what, what was observed, what the model allowed
    example.records         # share-partition: {offset: (state, owner)} after each step; before it, for the failing one
                            # (records in the log past the window: LOGGED)

The judge is the machine's own (oracle/judges/), on the plain model, so the
picture shows what `kipcheck check --reference` decides.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from kipcheck.model.violation import Violation
from kipcheck.oracle.views import judge_for
from kipcheck.oracle.trace import Malformed, Step, read_header, read_steps

RecordStates = dict[int, tuple[str, "str | None"]]
LOGGED = "in the log"   # a record past SPEO: written, never acquired yet
LOGGED_MAX = 100        # of those, the ones kept after each step
CLAIMED_MAX = 100       # offsets of one run the failing step claims, kept to draw


def short(value: object) -> str:
    """A field's value in few characters: ranges as first-last, objects as {name: value}, lists in brackets."""
    if isinstance(value, dict):
        if {"first", "last"} <= value.keys():
            rest = " ".join(str(other) for name, other in value.items() if name not in ("first", "last"))
            return f"{value['first']}-{value['last']}" + (f" {rest}" if rest else "")
        return "{" + ", ".join(f"{name}: {short(other)}" for name, other in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(short(item) for item in value) + "]"
    return str(value)


def _fields(values: dict | None) -> str:
    return " ".join(f"{name}={short(value)}" for name, value in (values or {}).items())


def claims(step: Step) -> list[tuple[int, int, str]]:
    """The share-partition records a step took or acknowledged: (first, last, who and how)."""
    if step.op == "acquire":
        return [(run[0], run[1], f"{step.actor} acquired") for run in (step.observed or {}).get("records", [])]
    if step.op == "acknowledge":
        return [(batch["first"], batch["last"], f"{step.actor} {batch['type']}") for batch in step.args["batches"]]
    return []


@dataclass
class Counterexample:
    machine: str
    steps: list[Step] = field(default_factory=list)
    failing: Violation | None = None
    skipped: int = 0                                            # steps before the first kept
    records: list[RecordStates] = field(default_factory=list)   # share-partition only

    def failing_step(self) -> Step | None:
        return self.steps[-1] if self.failing is not None and self.steps else None

    def failing_claims(self) -> list[int]:
        """The offsets the failing step took or acknowledged (CLAIMED_MAX at most of each run: a hostile
        acknowledgement may name a range far past the log)."""
        step = self.failing_step()
        return [offset for first, last, _ in (claims(step) if step else [])
                for offset in range(first, min(last, first + CLAIMED_MAX - 1) + 1)]

    def entries(self, step: Step) -> list[tuple[str, str, str]]:
        """(lane, asked, answered) of one step: the actor's lane, or, for an assignment, each assigned member's."""
        assignment = (step.observed or {}).get("assignment")
        if self.machine == "key-range-assign" and isinstance(assignment, dict):
            return [(member, "assigned", short(entries)) for member, entries in assignment.items()]
        answered = f"→ {_fields(step.observed)}" if step.observed else ""
        return [(step.actor, f"{step.op} {_fields(step.args)}".strip(), answered)]

    def actors(self) -> list[str]:
        """The lanes, in the order they first act."""
        return list(dict.fromkeys(lane for step in self.steps for lane, _, _ in self.entries(step)))

    def failure_lines(self) -> list[str]:
        if self.failing is None:
            return []
        step, violation = self.failing_step(), self.failing
        if step is None:
            head = f"the header breaks {violation.clause}"
        else:
            asked = ", ".join(f"{lane} {what} {answer}".strip() for lane, what, answer in self.entries(step))
            head = f"step {step.number} breaks {violation.clause}: {asked}"
        return [head, f"observed: {violation.observed}", f"the model allowed: {violation.allowed}"]


def _record_states(model) -> RecordStates:
    """The window's records (state, owner while acquired), then up to LOGGED_MAX records past it."""
    states = {offset: (model.state_of(offset), model.owner_of(offset)) for offset in range(model.spso, model.speo)}
    logged = range(model.speo, min(model.log_end_offset, model.speo + LOGGED_MAX))
    return states | {offset: (LOGGED, None) for offset in logged}


def read_counterexample(lines: list[str], steps_max: int) -> Counterexample:
    """Replay `lines` (a trace, header first) through its machine's judge up to the first step it does not allow,
    keeping the last `steps_max` steps before that one."""
    header = read_header(lines[0])
    example = Counterexample(header.machine)
    try:
        judge = judge_for(header, reference=True)
    except Violation as violation:  # the header asks for settings the profile refuses (SP-45)
        example.failing = violation
        return example
    watched = header.machine == "share-partition" and hasattr(judge, "model")  # a partial view keeps no window
    kept: deque[tuple[Step, RecordStates]] = deque(maxlen=steps_max + 1)
    before = _record_states(judge.model) if watched else {}
    try:
        for step in read_steps(iter(lines[1:])):
            try:
                judge.judge(step)
            except Violation as violation:
                kept.append((step, before))  # the state the failing step met
                example.failing = violation
                break
            before = _record_states(judge.model) if watched else {}
            kept.append((step, before))
    except Malformed:
        pass  # drawn up to the last step that made sense
    example.skipped = max(0, (kept[0][0].number - 1) if kept else 0)
    example.steps = [step for step, _ in kept]
    example.records = [states for _, states in kept] if watched else []
    return example
