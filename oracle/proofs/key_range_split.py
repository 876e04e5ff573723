"""KR-6: splitting a partition's hash space among k owners covers [0, 2^63 - 1] exactly once.

Encoding: unbounded integers (z3 Int, so no overflow to reason about), k
symbolic with 1 <= k <= 2^16, q = 2^63 div k, r = 2^63 mod k; share i is
[i·q + min(i, r), that + q + (1 if i < r else 0) - 1], the remainder spread
over the first shares as KR-6 says. "Exactly once" is proved directly: every
hash value v in [0, 2^63 - 1] lies in the share of its owner (an explicit
owner function, the witness), and no v lies in two shares.
"""

from __future__ import annotations

import random

import z3

from kipcheck.oracle.proofs import Theorem, first_failure

HASH_SPACE = 2**63
OWNERS_MAX = 2**16
CLAUSES = ("KR-1", "KR-2", "KR-6")


def share_low(k, i):
    quotient, remainder = HASH_SPACE / k, HASH_SPACE % k
    return i * quotient + z3.If(i < remainder, i, remainder)


def share_high(k, i):
    quotient, remainder = HASH_SPACE / k, HASH_SPACE % k
    return share_low(k, i) + quotient + z3.If(i < remainder, 1, 0) - 1


def owner(k, value):
    """The index of the share holding `value`: the witness for coverage."""
    quotient, remainder = HASH_SPACE / k, HASH_SPACE % k
    in_long_shares = remainder * (quotient + 1)
    return z3.If(value < in_long_shares, value / (quotient + 1), remainder + (value - in_long_shares) / quotient)


def _inside(k, value, index):
    return z3.And(0 <= index, index < k, share_low(k, index) <= value, value <= share_high(k, index))


def check_split_exactly_once() -> str | None:
    k, i, j, value = z3.Ints("k i j value")
    owners = [1 <= k, k <= OWNERS_MAX]
    steps = [
        ("every hash value has an owner", owners + [0 <= value, value < HASH_SPACE],
         _inside(k, value, owner(k, value))),
        ("no hash value has two owners", owners + [_inside(k, value, i), _inside(k, value, j)], i == j),
        ("every share lies in the hash space", owners + [0 <= i, i < k],
         z3.And(0 <= share_low(k, i), share_high(k, i) < HASH_SPACE)),
    ]
    return first_failure(steps, lambda model: f"k={model[k]}, i={model[i]}, j={model[j]}, value={model[value]}")


def _encoded_shares(k: int, indexes) -> list[tuple[int, int]]:
    return [(z3.simplify(share_low(z3.IntVal(k), z3.IntVal(i))).as_long(),
             z3.simplify(share_high(z3.IntVal(k), z3.IntVal(i))).as_long()) for i in indexes]


def check_model_agrees(samples: int = 60, seed: int = 287) -> str | None:
    """model.key_range_assign.split(k) equals the encoding, for k = 1..40, the largest k and random k."""
    from kipcheck.model import key_range_assign

    chooser = random.Random(seed)
    counts = list(range(1, 41)) + [OWNERS_MAX - 1, OWNERS_MAX] + [chooser.randint(41, OWNERS_MAX) for _ in range(samples)]
    for k in counts:
        shares = key_range_assign.split(k)
        if len(shares) != k:
            return f"k={k}: split gives {len(shares)} shares"
        indexes = sorted({0, 1, k // 2, k - 2, k - 1} & set(range(k)) | {chooser.randrange(k) for _ in range(5)})
        for index, encoded in zip(indexes, _encoded_shares(k, indexes)):
            if tuple(shares[index]) != encoded:
                return f"k={k}, share {index}: model split gives {list(shares[index])}, the proved encoding {list(encoded)}"
    return None


THEOREMS = [
    Theorem("key-range split covers the hash space exactly once", CLAUSES,
            "for every k in [1, 2^16], the k shares of KR-6 cover [0, 2^63-1] with no value twice "
            "(unbounded integers; k symbolic)", check_split_exactly_once),
    Theorem("key-range split: model agrees with the encoding", CLAUSES,
            "model.key_range_assign.split(k) equals the encoded shares for k = 1..40, 2^16-1, 2^16 "
            "and 60 random k (5 to 10 shares each)", check_model_agrees),
]
