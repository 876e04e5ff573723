"""IC-2/IC-3: merging one committed range keeps the committed set and the normal form.

Encoding (unbounded integers, any number of ranges): a state is the stable
offset S (inclusive, IC-1) and n ranges [lo[j], hi[j]] held in z3 arrays.
Normal form: lo[j] <= hi[j]; for j < k, hi[j] + 1 < lo[k] (sorted, disjoint,
non-adjacent); lo[0] > S + 1 (above the stable offset, not touching it).
The committed set is {o : o <= S} ∪ the ranges.

One commit [x, y] (x <= y): the ranges ending before x - 1 (a prefix, p of
them) stay, the ranges starting after y + 1 (from index q) stay, and the
ranges p..q-1 that overlap or touch [x, y] are merged with it into
[min(x, lo[p]), max(y, hi[q-1])]. If that merged range touches the stable
offset (p = 0 and it starts at or below S + 1) it is folded into S (IC-3).
The inductive step: from any normal-form state, the new state is in normal
form, S never decreases, and its committed set is exactly old ∪ [x, y].
Membership is proved with the index of the holding range as the witness.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import z3

from kipcheck.oracle.proofs import Theorem, describe, first_failure

CLAUSES = ("IC-1", "IC-2", "IC-3", "IC-5")
_J, _K = z3.Ints("j k")


def normal_form(stable, count, lows, highs, hypothesis: bool = True) -> z3.BoolRef:
    """Normal form of a state; as a hypothesis its quantifiers carry E-matching patterns."""
    nonempty = z3.Implies(z3.And(0 <= _J, _J < count), lows[_J] <= highs[_J])
    apart = z3.Implies(z3.And(0 <= _J, _J < _K, _K < count), highs[_J] + 1 < lows[_K])
    return z3.And(
        count >= 0,
        z3.ForAll([_J], nonempty, patterns=[lows[_J]] if hypothesis else []),
        z3.ForAll([_J, _K], apart, patterns=[z3.MultiPattern(highs[_J], lows[_K])] if hypothesis else []),
        z3.Implies(count > 0, lows[0] > stable + 1),
    )


@dataclass
class Merge:
    """The state after committing [x, y] to (stable, count, lows, highs), given the split points p, q."""

    stable: z3.ArithRef
    count: z3.ArithRef
    lows: z3.ArrayRef
    highs: z3.ArrayRef
    merged_low: z3.ArithRef
    merged_high: z3.ArithRef
    folded: z3.ArithRef  # 1 when the merged range was folded into the stable offset, else 0
    shift: z3.ArithRef  # old index q + t is new index p + 1 + t (before folding)


def split_points(stable, count, lows, highs, first, last, p, q) -> list[z3.BoolRef]:
    """p = number of ranges ending before first - 1; q = index of the first range starting after last + 1."""
    return [
        0 <= p, p <= q, q <= count,
        z3.Implies(p > 0, highs[p - 1] < first - 1), z3.Implies(p < count, highs[p] >= first - 1),
        z3.Implies(q > 0, lows[q - 1] <= last + 1), z3.Implies(q < count, lows[q] > last + 1),
    ]


def merge(stable, count, lows, highs, first, last, p, q) -> Merge:
    index = z3.Int("index")
    merged_low = z3.If(p < q, z3.If(lows[p] < first, lows[p], first), first)
    merged_high = z3.If(p < q, z3.If(highs[q - 1] > last, highs[q - 1], last), last)
    shift = q - p - 1
    folded = z3.If(z3.And(p == 0, merged_low <= stable + 1), 1, 0)

    def placed(old, merged):
        spliced = z3.If(index < p, old[index], z3.If(index == p, merged, old[index + shift]))
        return z3.Lambda([index], z3.substitute(spliced, (index, index + folded)))

    new_stable = z3.If(folded == 1, z3.If(merged_high > stable, merged_high, stable), stable)
    return Merge(new_stable, count - shift - folded, placed(lows, merged_low), placed(highs, merged_high),
                 merged_low, merged_high, folded, shift)


def _inside(offset, count, lows, highs, index):
    return z3.And(0 <= index, index < count, lows[index] <= offset, offset <= highs[index])


def check_merge_step() -> str | None:
    stable, count, first, last, p, q, offset, witness = z3.Ints("S n x y p q o w")
    lows, highs = z3.Array("lo", z3.IntSort(), z3.IntSort()), z3.Array("hi", z3.IntSort(), z3.IntSort())
    hypotheses = [normal_form(stable, count, lows, highs), stable >= -1, 0 <= first, first <= last,
                  *split_points(stable, count, lows, highs, first, last, p, q)]
    new = merge(stable, count, lows, highs, first, last, p, q)
    in_commit = z3.And(first <= offset, offset <= last)
    in_merged = z3.If(offset <= highs[p], p, q - 1)  # the old range holding an offset of the merged range
    old_home = z3.If(witness < p, witness, z3.If(witness < q, p, witness - new.shift)) - new.folded
    new_home = witness + new.folded
    steps = [
        ("new state in normal form", hypotheses,
         normal_form(new.stable, new.count, new.lows, new.highs, hypothesis=False)),
        ("stable offset never decreases", hypotheses, new.stable >= stable),
        ("every committed offset stays committed", hypotheses,
         z3.Implies(z3.Or(offset <= stable, _inside(offset, count, lows, highs, witness)),
                    z3.Or(offset <= new.stable, _inside(offset, new.count, new.lows, new.highs, old_home)))),
        ("the committed range is committed", hypotheses,
         z3.Implies(in_commit, z3.Or(offset <= new.stable, _inside(offset, new.count, new.lows, new.highs, p - new.folded)))),
        ("nothing else becomes committed", hypotheses,
         z3.Implies(z3.Or(offset <= new.stable, _inside(offset, new.count, new.lows, new.highs, witness)),
                    z3.Or(offset <= stable, in_commit, _inside(offset, count, lows, highs, z3.If(
                        z3.Or(offset <= new.stable, new_home == p), in_merged,
                        z3.If(new_home < p, new_home, new_home + new.shift)))))),
    ]
    def show(model: z3.ModelRef) -> str:
        held = model.eval(count).as_long()
        ranges = [[model.eval(lows[i]), model.eval(highs[i])] for i in range(min(held, 6))]
        state = f"stable offset {model.eval(stable)}, ranges {ranges}, commit [{model.eval(first)}, {model.eval(last)}]"
        return ", ".join(filter(None, (state, describe(model, offset=offset))))

    return first_failure(steps, show)


def _member(offset, stable, count, lows, highs) -> z3.BoolRef:
    holder = z3.FreshInt("holder")
    return z3.Or(offset <= stable, z3.Exists([holder], _inside(offset, count, lows, highs, holder)))


def check_normal_form_is_canonical() -> str | None:
    """Two normal-form states with the same committed set are the same state.

    With the merge step this makes the state a function of the union of the commits: any order of the same
    commits, and any repetition, gives the same state. Proved by contradiction on the smallest index where
    the two range lists differ (it exists by well-ordering if they differ at all).
    """
    first_stable, second_stable, first_count, second_count, index, other = z3.Ints("S1 S2 n1 n2 i j")
    arrays = [z3.Array(name, z3.IntSort(), z3.IntSort()) for name in ("lo1", "hi1", "lo2", "hi2")]
    first = (first_stable, first_count, *arrays[:2])
    second = (second_stable, second_count, *arrays[2:])
    (lows1, highs1), (lows2, highs2) = arrays[:2], arrays[2:]

    def same_at(offset):  # an instance of "the committed sets are equal"
        return _member(offset, *first) == _member(offset, *second)

    both_normal = [normal_form(*first), normal_form(*second)]
    differs = z3.And(0 <= index, z3.Or(index < first_count, index < second_count), z3.Or(
        index >= first_count, index >= second_count, lows1[index] != lows2[index], highs1[index] != highs2[index]))
    equal_below = z3.ForAll([other], z3.Implies(z3.And(0 <= other, other < index), z3.And(
        other < first_count, other < second_count, lows1[other] == lows2[other], highs1[other] == highs2[other])),
        patterns=[lows1[other], lows2[other], highs1[other], highs2[other]])
    witnesses = [same_at(offset) for offset in (lows1[index], lows2[index], highs1[index] + 1, highs2[index] + 1)]
    steps = [
        ("same stable offset", both_normal + [same_at(first_stable + 1), same_at(second_stable + 1)],
         first_stable == second_stable),
        ("no smallest index where the ranges differ", both_normal + [first_stable == second_stable] + witnesses,
         z3.Not(z3.And(differs, equal_below))),
    ]
    return first_failure(steps, lambda model: describe(model, S1=first_stable, S2=second_stable, n1=first_count,
                                                       n2=second_count, index=index))


def encoded_merge(stable: int, ranges: list[tuple[int, int]], first: int, last: int) -> tuple[int, list[tuple[int, int]]]:
    """Evaluate the encoding on a concrete state: z3 solves for p and q, then reads the new state."""
    lows, highs = z3.K(z3.IntSort(), z3.IntVal(0)), z3.K(z3.IntSort(), z3.IntVal(0))
    for index, (low, high) in enumerate(ranges):
        lows, highs = z3.Store(lows, index, low), z3.Store(highs, index, high)
    p, q = z3.Ints("p q")
    solver = z3.Solver()
    solver.add(*split_points(stable, len(ranges), lows, highs, first, last, p, q))
    assert solver.check() == z3.sat
    model = solver.model()
    new = merge(z3.IntVal(stable), z3.IntVal(len(ranges)), lows, highs, first, last, model[p], model[q])
    value = lambda term: model.eval(term, model_completion=True).as_long()  # noqa: E731
    count = value(new.count)
    return value(new.stable), [(value(new.lows[i]), value(new.highs[i])) for i in range(count)]


def _random_normal_state(chooser: random.Random) -> tuple[int, list[tuple[int, int]]]:
    stable = chooser.randint(-1, 5)
    ranges, low = [], stable + 2 + chooser.randint(0, 3)
    for _ in range(chooser.randint(0, 4)):
        high = low + chooser.randint(0, 3)
        ranges.append((low, high))
        low = high + 2 + chooser.randint(0, 3)
    return stable, ranges


def check_model_agrees(samples: int = 150, seed: int = 983) -> str | None:
    """model.ic.normal_form(S, ranges + [commit]) equals the encoded merge on random normal-form states."""
    from kipcheck.model import ic

    chooser = random.Random(seed)
    for _ in range(samples):
        stable, ranges = _random_normal_state(chooser)
        first = chooser.randint(0, 30)
        last = first + chooser.randint(0, 6)
        model_stable, model_ranges = ic.normal_form(stable, ranges + [(first, last)])
        expected = encoded_merge(stable, ranges, first, last)
        if (model_stable, [tuple(r) for r in model_ranges]) != expected:
            return (f"stable {stable}, ranges {ranges}, commit [{first}, {last}]: model.ic.normal_form gives "
                    f"({model_stable}, {list(model_ranges)}), the proved encoding {expected}")
    return None


THEOREMS = [
    Theorem("IC merge keeps the committed set and the normal form", CLAUSES,
            "from any normal-form state (stable offset, any number of ranges, unbounded integers), committing "
            "one range gives a normal-form state whose committed set is old ∪ new and whose stable offset "
            "did not decrease", check_merge_step),
    Theorem("IC normal form is canonical: commits are order-independent and idempotent", CLAUSES,
            "two normal-form states (unbounded integers, any number of ranges) with the same committed set are "
            "equal; with the merge step, the state after any order or repetition of the same commits is one state",
            check_normal_form_is_canonical),
    Theorem("IC merge: model agrees with the encoding", CLAUSES,
            "model.ic.normal_form equals the encoded one-range merge on 150 random normal-form states "
            "(up to 4 ranges, offsets below 60)", check_model_agrees),
]
