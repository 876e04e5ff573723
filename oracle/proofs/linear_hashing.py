"""KIP-287 (EX-2, EX-3): linear hashing keeps keys on their processor as partitions grow.

Encoding: unbounded integers. LH(v, n) with level modulus M (the largest
N0·2^L <= n, so M <= n < 2M): b = v mod M; if b < n - M then v mod 2M else b.
A key's processor is LH(LH(h, P), C). Level moduli are N0·2^L, so for C <= P
the modulus of C divides that of P (and twice it does, when the levels
differ); the proofs use exactly these divisibility facts, through two lemmas
about Euclidean division that z3 proves first from the definition of div/mod:
  (A) x mod (k·m) mod m = x mod m          (k, m >= 1, x >= 0)
  (B) x mod 2m is x mod m or x mod m + m    (m >= 1, x >= 0)
Claims, for every key hash h >= 0, N0 >= 1 and N0 <= C <= P (no bound):
  1. LH(LH(h, P), C) = LH(h, C): the processor does not depend on P, so adding
     partitions never moves a key (KIP-287 "Support partition expansion").
  2. For C <= C' <= P: LH(h, C') = LH(h, C) or LH(h, C') >= C: adding processors
     moves keys only onto the new processors.
  3. Expected to fail: with P < C (EX-3 broken), adding one partition moves
     some key between processors. z3 searches h < 256, N0 <= 4, P, C < 32
     (bounded: a counterexample needs concrete values; the fewest processors first)
     and the counterexample is replayed through model.expansion.linear_hash.
  4. A split moves keys only from bucket b - M to the new bucket b: for every
     h >= 0 and M <= b < 2M (M the level modulus of b buckets, unbounded),
     LH(h, b + 1) != LH(h, b) implies LH(h, b) = b - M and LH(h, b + 1) = b.
     By induction over one bucket at a time, the keys of a partition added by
     an expansion come only from its ancestors, the first of them below the old
     count being its source (EX-5); so draining the source up to the split
     offset before reading the new partition keeps every key in order (EX-6).
     model.expansion.source is sampled against that induction.
"""

from __future__ import annotations

import random

import z3

from kipcheck.oracle.proofs import Theorem, describe, first_failure

CLAUSES = ("EX-2", "EX-3")
SPLIT_CLAUSES = ("EX-5", "EX-6")


def linear_hash(value, buckets, modulus):
    """LH(value, buckets) as a z3 term, given the level modulus M of `buckets`."""
    low = value % modulus
    return z3.If(low < buckets - modulus, value % (2 * modulus), low)


def level_modulus(buckets: int, initial_buckets: int) -> int:
    """The largest initial_buckets·2^L that is <= buckets (written again here, not taken from the model:
    the agreement check compares the two)."""
    modulus = initial_buckets
    while modulus * 2 <= buckets:
        modulus *= 2
    return modulus


def _lemma_steps() -> list[tuple[str, list, z3.BoolRef]]:
    x, m, k, quotient, rest = z3.Ints("x m k quotient rest")
    product = k * m
    outer_q, outer_r = x / product, x % product
    inner_q, inner_r = outer_r / m, outer_r % m
    base = [x >= 0, m >= 1, k >= 1]
    joined = outer_q * k + inner_q
    return [
        ("lemma A: k·m >= 1", base, product >= 1),
        ("lemma A: x = (x div km)·km + x mod km", base + [product >= 1],
         z3.And(x == outer_q * product + outer_r, 0 <= outer_r, outer_r < product)),
        ("lemma A: x mod km = (..div m)·m + ..mod m", base + [product >= 1, 0 <= outer_r],
         z3.And(outer_r == inner_q * m + inner_r, 0 <= inner_r, inner_r < m)),
        ("lemma A: x = (q1·k + q2)·m + r2", base + [x == outer_q * product + outer_r, outer_r == inner_q * m + inner_r],
         x == (outer_q * k + inner_q) * m + inner_r),
        ("division is unique (quotient)", [m >= 1, x == quotient * m + rest, 0 <= rest, rest < m], x / m == quotient),
        ("division is unique (remainder)", [m >= 1, x / m == quotient, x == quotient * m + rest], x % m == rest),
        ("lemma A: (x mod km) mod m = x mod m", base + [
            x == joined * m + inner_r, 0 <= inner_r, inner_r < m,  # the steps above
            z3.Implies(z3.And(x == joined * m + inner_r, 0 <= inner_r, inner_r < m), x / m == joined),  # uniqueness,
            z3.Implies(z3.And(x / m == joined, x == joined * m + inner_r), x % m == inner_r),  # at quotient q1·k + q2
        ], (x % product) % m == x % m),
        ("lemma B: x mod 2m is x mod m or x mod m + m (A with k = 2)", [x >= 0, m >= 1, (x % (2 * m)) % m == x % m],
         z3.Or(x % (2 * m) == x % m, x % (2 * m) == x % m + m)),
    ]


def _mod_facts(h, small, large, nested_ok: bool):
    """Lemma A instances: (h mod large) mod small = h mod small, when small divides large."""
    return z3.Implies(nested_ok, (h % large) % small == h % small)


def _level(buckets, modulus):
    return z3.And(modulus >= 1, modulus <= buckets, buckets < 2 * modulus)


def check_partition_expansion_keeps_processor() -> str | None:
    h, processors, partitions, mod_c, mod_p = z3.Ints("h C P Mc Mp")
    deeper = mod_p >= 2 * mod_c  # P's level is above C's: 2·Mc divides Mp
    hypotheses = [
        h >= 0, processors <= partitions, _level(processors, mod_c), _level(partitions, mod_p),
        z3.Or(mod_p == mod_c, deeper),  # both are N0·2^L and C <= P
        _mod_facts(h, mod_c, mod_p, True), _mod_facts(h, mod_c, 2 * mod_p, True),
        _mod_facts(h, 2 * mod_c, 2 * mod_p, True), _mod_facts(h, 2 * mod_c, mod_p, deeper),
        z3.Or(h % (2 * mod_c) == h % mod_c, h % (2 * mod_c) == h % mod_c + mod_c),  # lemma B
    ]
    partition = linear_hash(h, partitions, mod_p)
    goal = linear_hash(partition, processors, mod_c) == linear_hash(h, processors, mod_c)
    return first_failure(_lemma_steps() + [("processor of a key = LH(h, C) for every P >= C", hypotheses, goal)],
                         lambda model: describe(model, h=h, C=processors, P=partitions, Mc=mod_c, Mp=mod_p))


def check_processor_expansion_moves_only_to_new() -> str | None:
    h, before, after, mod_before, mod_after = z3.Ints("h C C2 Mc Mc2")
    deeper = mod_after >= 2 * mod_before
    hypotheses = [
        h >= 0, before <= after, _level(before, mod_before), _level(after, mod_after),
        z3.Or(mod_after == mod_before, deeper),
        _mod_facts(h, 2 * mod_before, mod_after, deeper), _mod_facts(h, 2 * mod_before, 2 * mod_after, deeper),
        z3.Or(h % (2 * mod_before) == h % mod_before, h % (2 * mod_before) == h % mod_before + mod_before),
    ]
    old, new = linear_hash(h, before, mod_before), linear_hash(h, after, mod_after)
    return first_failure(_lemma_steps() + [("a key moves only to a new processor", hypotheses, z3.Or(new == old, new >= before))],
                         lambda model: describe(model, h=h, C=before, C2=after))


def check_split_moves_keys_only_to_the_new_bucket() -> str | None:
    h, buckets, mod, mod_next = z3.Ints("h b M M2")
    hypotheses = [
        h >= 0, _level(buckets, mod), _level(buckets + 1, mod_next),
        # b + 1 buckets keep b's level, or start the next one when b + 1 = 2M (the split pointer back at 0)
        z3.Or(mod_next == mod, z3.And(mod_next == 2 * mod, buckets + 1 == 2 * mod)),
        z3.Or(h % (2 * mod) == h % mod, h % (2 * mod) == h % mod + mod),  # lemma B
    ]
    before, after = linear_hash(h, buckets, mod), linear_hash(h, buckets + 1, mod_next)
    goal = z3.Implies(before != after, z3.And(before == buckets - mod, after == buckets))
    return first_failure(_lemma_steps() + [("a split moves keys only from b - M to b", hypotheses, goal)],
                         lambda model: describe(model, h=h, b=buckets, M=mod, M2=mod_next))


def check_model_source_agrees(samples: int = 400, seed: int = 287) -> str | None:
    """model.expansion.source and parent follow the split theorem, by induction, on random (N0, P <= P', h)."""
    from kipcheck.model import expansion

    chooser = random.Random(seed)
    for _ in range(samples):
        initial = chooser.randint(1, 12)
        before = chooser.randint(initial, 6 * initial)
        after = chooser.randint(before, 6 * initial + 20)
        value = chooser.randint(0, 2**31 - 1)
        partition = expansion.linear_hash(value, after, initial)
        was = expansion.linear_hash(value, before, initial)
        if partition >= before and was != expansion.source(partition, before, initial):
            return (f"key hash {value}, N0={initial}: in partition {was} at {before} partitions and {partition} at "
                    f"{after}, but model.expansion.source gives {expansion.source(partition, before, initial)}")
        if partition < before and partition != was:
            return f"key hash {value}, N0={initial}: moved from old partition {was} to old partition {partition}"
    return None


def _bounded_linear_hash(value, buckets, initial, levels: int = 5):
    """LH with the level found by cases (L < levels): for the bounded counterexample search."""
    result = value % initial
    for level in range(levels):
        modulus = initial * 2**level
        result = z3.If(z3.And(modulus <= buckets, buckets < 2 * modulus), linear_hash(value, buckets, modulus), result)
    return result


def check_fewer_partitions_moves_keys() -> str | None:
    """Returns the counterexample (the theorem is expected to be refuted), or None if z3 finds none."""
    from kipcheck.model import expansion

    h, initial, processors, partitions = z3.Ints("h N0 C P")
    bounds = [0 <= h, h < 256, 1 <= initial, initial <= 4, initial <= partitions, partitions < processors, processors < 32]

    def processor(partition_count):
        return _bounded_linear_hash(_bounded_linear_hash(h, partition_count, initial), processors, initial)

    solver = z3.Solver()
    solver.add(*bounds, processor(partitions) != processor(partitions + 1))
    for count in range(2, 32):  # the fewest processors first: the smallest counterexample reads best
        if solver.check(processors == count) == z3.sat:
            break
    else:
        return None
    found = {name: solver.model()[term].as_long() for name, term in
             (("h", h), ("N0", initial), ("C", processors), ("P", partitions))}

    def model_processor(partition_count):
        partition = expansion.linear_hash(found["h"], partition_count, found["N0"])
        return expansion.linear_hash(partition, found["C"], found["N0"])

    before, after = model_processor(found["P"]), model_processor(found["P"] + 1)
    replay = "confirmed by model.expansion.linear_hash" if before != after else "NOT reproduced by model.expansion.linear_hash"
    return (f"key hash {found['h']}, N0={found['N0']}, C={found['C']} processors: P {found['P']} -> {found['P'] + 1} "
            f"partitions moves the key from processor {before} to {after} ({replay})")


def check_model_agrees(samples: int = 400, seed: int = 253) -> str | None:
    """model.expansion.linear_hash equals the encoding on random (value, buckets, N0)."""
    from kipcheck.model import expansion

    chooser = random.Random(seed)
    for _ in range(samples):
        initial = chooser.randint(1, 12)
        buckets = chooser.randint(initial, 40 * initial)
        value = chooser.randint(0, 2**31 - 1) if chooser.random() < 0.5 else chooser.randint(0, 4 * buckets)
        encoded = z3.simplify(linear_hash(z3.IntVal(value), z3.IntVal(buckets), z3.IntVal(level_modulus(buckets, initial)))).as_long()
        modelled = expansion.linear_hash(value, buckets, initial)
        if modelled != encoded:
            return f"LH({value}, {buckets} buckets, N0={initial}): model gives {modelled}, the proved encoding {encoded}"
    return None


def _confirmed(check):
    """A refutation only counts when the model reproduces it."""
    def confirmed() -> str | None:
        found = check()
        return None if found is None or "NOT reproduced" in found else found
    return confirmed


THEOREMS = [
    Theorem("KIP-287: adding partitions keeps every key's processor", CLAUSES,
            "for all h >= 0, N0 >= 1, N0 <= C <= P (unbounded): LH(LH(h, P), C) = LH(h, C)",
            check_partition_expansion_keeps_processor),
    Theorem("KIP-287: adding processors moves keys only onto new processors", CLAUSES,
            "for all h >= 0 and C <= C' (unbounded): LH(h, C') = LH(h, C) or LH(h, C') >= C",
            check_processor_expansion_moves_only_to_new),
    Theorem("KIP-287 without partitions >= processors: adding a partition keeps processors", CLAUSES,
            "expected to fail when P < C; bounded search h < 256, N0 <= 4, P < C < 32",
            _confirmed(check_fewer_partitions_moves_keys), expect_refuted=True),
    Theorem("KIP-287: model agrees with the encoding", CLAUSES,
            "model.expansion.linear_hash equals the encoded LH on 400 random (value, buckets, N0)",
            check_model_agrees),
    Theorem("KIP-287: a split moves keys only from its parent to the new partition", SPLIT_CLAUSES,
            "for all h >= 0, M <= b < 2M (unbounded): LH(h, b+1) != LH(h, b) implies LH(h, b) = b - M, "
            "LH(h, b+1) = b", check_split_moves_keys_only_to_the_new_bucket),
    Theorem("KIP-287: model agrees a new partition's keys come from its source", SPLIT_CLAUSES,
            "model.expansion.source on 400 random (N0, P <= P', h): the key's partition at P is the source of its "
            "partition at P' (old partitions keep their keys)", check_model_source_agrees),
]
