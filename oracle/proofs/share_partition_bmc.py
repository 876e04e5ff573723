"""KIP-932 share-partition: a bounded model check of the in-flight record invariants.

Encoding (kip profile): OFFSETS log offsets, MEMBERS members, delivery count
limit LIMIT, max_inflight_records MAX_INFLIGHT; every reachable state within
STEPS steps from the empty partition. A state is, per offset, its state
(available, acquired, acknowledged, archived), delivery count and owner
(0 = none), plus SPSO, SPEO and the log end. One step is one of:
  append c records (SP-2); acquire any set of available offsets in
  [SPSO, log end) within SPSO + MAX_INFLIGHT, count + 1, owned (SP-3, SP-4, SP-7);
  acknowledge [first, last] as accept/release/reject, allowed only when every
  record in it is acquired by the member, otherwise nothing changes (SP-9,
  SP-13, SP-15, SP-19); lock expiry of any set of acquired records (SP-20: the
  clock is abstracted, any lock may expire at any step); leave (SP-22).
Leaving acquired, a record at the limit is archived (SP-21); SPSO then moves
past the terminal prefix (SP-23), SPEO past the highest acquired (SP-24).
A ghost counter per offset counts acquisitions (what SP-4 says the delivery
count is). Invariants checked in every state and step: an acquired record has
exactly one owner and nothing else has one; SPSO never decreases and every
offset below it is terminal; the delivery count equals the acquisitions and
never exceeds the limit; acknowledged and archived records never change again;
SPEO - SPSO <= MAX_INFLIGHT. A vacuity check asserts the bound reaches a
record archived at the limit with SPSO past it.
"""

from __future__ import annotations

from dataclasses import dataclass

import z3

from kipcheck.oracle.proofs import Theorem

OFFSETS, MEMBERS, LIMIT, MAX_INFLIGHT, STEPS = 4, 2, 2, 3, 8
LOCK_MS = 100  # only the model walks of the agreement check have a clock
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 3
STATE_NAMES = ("available", "acquired", "acknowledged", "archived")
APPEND, ACQUIRE, ACKNOWLEDGE, EXPIRE, LEAVE = range(5)
ACTION_NAMES = ("append", "acquire", "acknowledge", "lock expiry", "leave")
ACCEPT, RELEASE, REJECT = range(3)
ACK_NAMES = ("accept", "release", "reject")
CLAUSES = ("SP-1", "SP-2", "SP-3", "SP-4", "SP-7", "SP-9", "SP-15", "SP-19", "SP-20", "SP-21", "SP-22", "SP-23", "SP-24")


@dataclass
class State:
    state: list
    count: list
    owner: list
    deliveries: list  # ghost: acquisitions seen, per offset
    spso: z3.ArithRef
    speo: z3.ArithRef
    log_end: z3.ArithRef


def fresh_state(step: int) -> State:
    def per_offset(name):
        return [z3.Int(f"{name}_{step}_{offset}") for offset in range(OFFSETS)]

    return State(per_offset("state"), per_offset("count"), per_offset("owner"), per_offset("deliveries"),
                 z3.Int(f"spso_{step}"), z3.Int(f"speo_{step}"), z3.Int(f"log_end_{step}"))


def terminal(state) -> z3.BoolRef:
    return z3.Or(state == ACKNOWLEDGED, state == ARCHIVED)


class Rules:
    """The transition rules, one method per spec rule (a mutant overrides one)."""

    def acquired_count(self, count):
        return count + 1  # SP-4

    def released_state(self, count):
        return z3.If(count >= LIMIT, ARCHIVED, AVAILABLE)  # SP-21

    def acknowledged_state(self, ack_type, count):
        # SP-9: accept -> acknowledged, reject -> archived, release -> available (SP-21 at the limit)
        return z3.If(ack_type == ACCEPT, ACKNOWLEDGED, z3.If(ack_type == REJECT, ARCHIVED, self.released_state(count)))

    def acquirable(self, now: State, offset: int):
        # SP-3: available, in [SPSO, log end); SP-7: within the in-flight window
        return z3.And(now.state[offset] == AVAILABLE, now.spso <= offset, offset < now.log_end,
                      offset < now.spso + MAX_INFLIGHT)

    def next_spso(self, now: State, states: list, speo):
        # SP-23: the first non-terminal offset at or after SPSO, else SPEO
        result = speo
        for offset in reversed(range(OFFSETS)):
            result = z3.If(z3.And(offset >= now.spso, offset < speo, z3.Not(terminal(states[offset]))), offset, result)
        return result


def initial(state: State) -> list:
    return [*(s == AVAILABLE for s in state.state), *(c == 0 for c in state.count), *(o == 0 for o in state.owner),
            *(d == 0 for d in state.deliveries), state.spso == 0, state.speo == 0, state.log_end == 0]


def transition(rules: Rules, now: State, after: State, step: int) -> list:
    action, member, appended = z3.Ints(f"action_{step} member_{step} appended_{step}")
    first, last, ack_type = z3.Ints(f"first_{step} last_{step} ack_type_{step}")
    chosen = [z3.Bool(f"chosen_{step}_{offset}") for offset in range(OFFSETS)]  # acquired or expired offsets
    owns_range = z3.And(now.spso <= first, first <= last, last < now.speo, *(
        z3.Implies(z3.And(first <= offset, offset <= last), z3.And(now.state[offset] == ACQUIRED, now.owner[offset] == member))
        for offset in range(OFFSETS)))
    constraints = [0 <= action, action <= LEAVE, 1 <= member, member <= MEMBERS, 0 <= ack_type, ack_type <= REJECT,
                   z3.Implies(action == APPEND, z3.And(1 <= appended, now.log_end + appended <= OFFSETS))]
    new_states, new_speo = [], now.speo
    for offset in range(OFFSETS):
        state, count, owner = now.state[offset], now.count[offset], now.owner[offset]
        take = z3.And(action == ACQUIRE, chosen[offset])
        constraints.append(z3.Implies(take, rules.acquirable(now, offset)))
        expire = z3.And(action == EXPIRE, chosen[offset], state == ACQUIRED)
        leave = z3.And(action == LEAVE, state == ACQUIRED, owner == member)
        acked = z3.And(action == ACKNOWLEDGE, owns_range, first <= offset, offset <= last)
        released = z3.Or(expire, leave)
        new_state = z3.If(take, ACQUIRED, z3.If(released, rules.released_state(count),
                          z3.If(acked, rules.acknowledged_state(ack_type, count), state)))
        constraints += [
            after.state[offset] == new_state,
            after.count[offset] == z3.If(take, rules.acquired_count(count), count),
            after.owner[offset] == z3.If(take, member, z3.If(z3.Or(released, acked), 0, owner)),
            after.deliveries[offset] == z3.If(take, now.deliveries[offset] + 1, now.deliveries[offset]),
        ]
        new_states.append(new_state)
        new_speo = z3.If(take, z3.If(offset + 1 > new_speo, offset + 1, new_speo), new_speo)  # SP-24
    constraints += [after.log_end == z3.If(action == APPEND, now.log_end + appended, now.log_end),
                    after.speo == new_speo, after.spso == rules.next_spso(now, new_states, new_speo)]
    return constraints


def invariant(state: State) -> z3.BoolRef:
    facts = [state.speo - state.spso <= MAX_INFLIGHT, state.spso <= state.speo]
    for offset in range(OFFSETS):
        s, count, owner = state.state[offset], state.count[offset], state.owner[offset]
        facts += [
            z3.If(s == ACQUIRED, z3.And(1 <= owner, owner <= MEMBERS), owner == 0),  # one owner, only while acquired
            count == state.deliveries[offset], count <= LIMIT,
            z3.Implies(offset < state.spso, terminal(s)),
            z3.Implies(s == ACQUIRED, z3.And(state.spso <= offset, offset < state.speo)),
        ]
    return z3.And(facts)


def step_invariant(before: State, after: State) -> z3.BoolRef:
    kept = [z3.Implies(terminal(before.state[offset]), z3.And(after.state[offset] == before.state[offset],
                                                              after.count[offset] == before.count[offset]))
            for offset in range(OFFSETS)]
    return z3.And(after.spso >= before.spso, *kept)


def unroll(rules: Rules) -> tuple[list[State], list]:
    states = [fresh_state(step) for step in range(STEPS + 1)]
    constraints = initial(states[0])
    for step in range(STEPS):
        constraints += transition(rules, states[step], states[step + 1], step)
    return states, constraints


def _describe_action(model: z3.ModelRef, step: int) -> str:
    value = lambda name: model.eval(z3.Int(f"{name}_{step}"), model_completion=True).as_long()  # noqa: E731
    action, member = value("action"), value("member")
    chosen = [o for o in range(OFFSETS) if z3.is_true(model.eval(z3.Bool(f"chosen_{step}_{o}"), model_completion=True))]
    if action == APPEND:
        return f"append {value('appended')}"
    if action == ACKNOWLEDGE:
        return f"m{member} acknowledges [{value('first')}, {value('last')}] {ACK_NAMES[value('ack_type')]}"
    if action == LEAVE:
        return f"m{member} leaves"
    who = f"m{member} " if action == ACQUIRE else ""
    return f"{who}{ACTION_NAMES[action]} {chosen}"


def _show_trace(model: z3.ModelRef, states: list[State], upto: int) -> str:
    lines = []
    for step in range(upto + 1):
        state = states[step]
        records = " ".join(
            f"{offset}:{STATE_NAMES[model.eval(state.state[offset]).as_long()]}"
            f"/count {model.eval(state.count[offset])}/owner m{model.eval(state.owner[offset])}"
            for offset in range(model.eval(state.log_end).as_long()))
        action = "start" if step == 0 else _describe_action(model, step - 1)
        lines.append(f"  {step}. {action}: spso={model.eval(state.spso)} speo={model.eval(state.speo)} {records}")
    return "\n".join(lines)


def check_invariants(rules: Rules | None = None) -> str | None:
    rules = rules or Rules()
    states, constraints = unroll(rules)
    for depth in range(STEPS + 1):  # the shortest breaking trace first
        bad = z3.Not(invariant(states[depth]))
        if depth:
            bad = z3.Or(bad, z3.Not(step_invariant(states[depth - 1], states[depth])))
        solver = z3.Solver()
        solver.add(*constraints, *(invariant(states[d]) for d in range(depth)), bad)
        if solver.check() == z3.sat:
            return f"invariant broken after {depth} steps:\n" + _show_trace(solver.model(), states, depth)
    return None


def check_not_vacuous(rules: Rules | None = None) -> str | None:
    """The bound reaches a record archived at the delivery limit with SPSO past it."""
    states, constraints = unroll(rules or Rules())
    last = states[-1]
    solver = z3.Solver()
    solver.add(*constraints, z3.Or(*(z3.And(last.state[o] == ARCHIVED, last.count[o] == LIMIT, last.spso > o)
                                     for o in range(OFFSETS))))
    return None if solver.check() == z3.sat else f"no archived-at-limit record reachable in {STEPS} steps: the check is vacuous"


def _observe(partition) -> dict:
    """The model's state in the encoding's terms; offsets below SPSO are known only to be terminal (None)."""
    records = {}
    for offset in range(OFFSETS):
        if offset < partition.spso:
            records[offset] = None
        elif offset < partition.speo:
            owner = partition.owner_of(offset)
            records[offset] = (STATE_NAMES.index(partition.state_of(offset)), partition.delivery_count_of(offset),
                               0 if owner is None else int(owner[1:]))
        else:  # SP-1: past SPEO, never acquired
            records[offset] = (AVAILABLE, 0, 0)
    return {"spso": partition.spso, "speo": partition.speo, "log_end": partition.log_end_offset, "records": records}


def _pinned(state: State, observed: dict) -> list:
    facts = [state.spso == observed["spso"], state.speo == observed["speo"], state.log_end == observed["log_end"]]
    for offset, record in observed["records"].items():
        if record is None:
            facts += [terminal(state.state[offset]), state.owner[offset] == 0,
                      0 <= state.count[offset], state.count[offset] <= LIMIT]
        else:
            facts += [state.state[offset] == record[0], state.count[offset] == record[1], state.owner[offset] == record[2]]
    return facts


def _action(step: int, kind: int, member: int = 1, chosen=(), **fields) -> list:
    """Pin the encoding's action variables of `step` to what the model was asked to do."""
    facts = [z3.Int(f"action_{step}") == kind, z3.Int(f"member_{step}") == member]
    if kind == ACQUIRE:
        facts += [z3.Bool(f"chosen_{step}_{offset}") == (offset in chosen) for offset in range(OFFSETS)]
    return facts + [z3.Int(f"{name}_{step}") == value for name, value in fields.items()]


def _random_step(partition, chooser, now: int, step: int) -> tuple[str, int, list]:
    """Apply one random operation of the kip model; return what it was, the new time and the pinned action."""
    member = chooser.randint(1, MEMBERS)
    actor = f"c{member}"
    kind = chooser.choice(("append", "acquire", "acquire", "acknowledge", "acknowledge", "tick", "leave"))
    if kind == "append" and partition.log_end_offset < OFFSETS:
        count = chooser.randint(1, OFFSETS - partition.log_end_offset)
        partition.append(count)
        return f"append {count}", now, _action(step, APPEND, appended=count)
    if kind == "acquire":
        records = partition.lowest_acquisition(chooser.randint(1, OFFSETS))
        partition.acquire(now, actor, OFFSETS, records)
        chosen = {offset for first, last, _ in records for offset in range(first, last + 1)}
        return f"{actor} acquires {records}", now, _action(step, ACQUIRE, member, chosen)
    if kind == "acknowledge" and partition.speo > partition.spso:
        held = [o for o in range(partition.spso, partition.speo) if partition.owner_of(o) is not None]
        if held and chooser.random() < 0.7:  # mostly records someone holds, so acknowledgements succeed
            first = chooser.choice(held)
            actor = partition.owner_of(first)
            member, last = int(actor[1:]), first
            while last + 1 < partition.speo and partition.owner_of(last + 1) == actor and chooser.random() < 0.6:
                last += 1
        else:
            first = chooser.randint(partition.spso, partition.speo - 1)
            last = chooser.randint(first, partition.speo - 1)
        ack_type = chooser.randrange(len(ACK_NAMES))
        answer = partition.acknowledge(now, actor, [(first, last, ACK_NAMES[ack_type])])
        pinned = _action(step, ACKNOWLEDGE, member, first=first, last=last, ack_type=ack_type)
        return f"{actor} acknowledges [{first}, {last}] {ACK_NAMES[ack_type]}: {answer.value}", now, pinned
    if kind == "leave":
        partition.leave(now, actor)
        return f"{actor} leaves", now, _action(step, LEAVE, member)
    now += chooser.randint(0, 2 * LOCK_MS)
    partition.advance(now)
    return f"time passes to {now} ms", now, _action(step, EXPIRE)


def check_model_agrees(walks: int = 40, steps: int = 12, seed: int = 932) -> str | None:
    """Every step of random walks through model.share_partition (kip) is the encoded step for the same action."""
    import random

    from kipcheck.model.share_partition import SharePartition

    chooser, rules = random.Random(seed), Rules()
    before_state, after_state = fresh_state(1000), fresh_state(1001)
    relation = transition(rules, before_state, after_state, 1000)
    for walk in range(walks):
        partition = SharePartition(delivery_count_limit=LIMIT, record_lock_duration_ms=LOCK_MS,
                                   max_inflight_records=MAX_INFLIGHT)
        now = 0
        for step in range(steps):
            before = _observe(partition)
            operation, now, action = _random_step(partition, chooser, now, 1000)
            after = _observe(partition)
            solver = z3.Solver()
            solver.add(*relation, *action, *_pinned(before_state, before), *_pinned(after_state, after))
            if solver.check() != z3.sat:
                return (f"walk {walk}, step {step}: the model's '{operation}' takes {before} to {after}, "
                        "a step the proved encoding does not allow")
    return None


THEOREMS = [
    Theorem(f"share-partition invariants hold in every reachable state (bounded: {OFFSETS} offsets, "
            f"{MEMBERS} members, delivery limit {LIMIT}, max in-flight {MAX_INFLIGHT})", CLAUSES,
            f"bounded model check: {STEPS} steps, {OFFSETS} offsets, {MEMBERS} members, delivery limit {LIMIT}, "
            f"max in-flight {MAX_INFLIGHT}; owners, SPSO, delivery counts, terminal states, in-flight window",
            check_invariants),
    Theorem("share-partition bounded check is not vacuous", CLAUSES,
            f"within {STEPS} steps a record is archived at the delivery limit and SPSO has passed it",
            check_not_vacuous),
    Theorem("share-partition: model agrees with the encoding", CLAUSES,
            "40 random walks of 12 steps through model.share_partition (kip, same bounds): every step the model "
            "takes is a step of the encoded transition relation", check_model_agrees),
]
