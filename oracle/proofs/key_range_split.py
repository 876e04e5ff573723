"""KR-6, KR-8: splitting a partition's hash space among k owners covers [0, 2^63 - 1] exactly once, near-equally.

Two arithmetics, both of which KR-6 must allow. Encoding: unbounded integers
(z3 Int, so no overflow to reason about), k symbolic with 1 <= k <= 2^16.
- The model's equal split (KR-8): q = 2^63 div k, r = 2^63 mod k; share i is
  [i·q + min(i, r), that + q + (1 if i < r else 0) - 1], the remainder spread
  over the first shares.
- The seed's long division (`[0, Long.MAX/2 - 1], [Long.MAX/2, Long.MAX]` for
  k = 2, `splitRangesByAvgSize(k)`): a = (2^63 - 1) div k; share i is
  [i·a, (i + 1)·a - 1], the last one ending at 2^63 - 1.
"Exactly once" is proved directly: every hash value v in [0, 2^63 - 1] lies in
the share of its owner (an explicit owner function, the witness), and no v lies
in two shares. "Near-equal" is KR-6's bound: any two shares' sizes differ by
at most k.
"""

from __future__ import annotations

import random

import z3

from kipcheck.oracle.proofs import Theorem, first_failure

HASH_SPACE = 2**63
OWNERS_MAX = 2**16
CLAUSES = ("KR-1", "KR-2", "KR-6", "KR-8")


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


def seed_low(k, i):
    return i * ((HASH_SPACE - 1) / k)


def seed_high(k, i):
    return z3.If(i == k - 1, HASH_SPACE - 1, (i + 1) * ((HASH_SPACE - 1) / k) - 1)


def seed_owner(k, value):
    """The index of the seed's share holding `value`: the quotient by the average, the top going to the last."""
    index = value / ((HASH_SPACE - 1) / k)
    return z3.If(index > k - 1, k - 1, index)


def _inside(low, high, k, value, index):
    return z3.And(0 <= index, index < k, low(k, index) <= value, value <= high(k, index))


def _exactly_once_and_near_equal(low, high, owner_of) -> str | None:
    k, i, j, value = z3.Ints("k i j value")
    owners = [1 <= k, k <= OWNERS_MAX]
    size = lambda index: high(k, index) - low(k, index) + 1  # noqa: E731 - one line, read once
    steps = [
        ("every hash value has an owner", owners + [0 <= value, value < HASH_SPACE],
         _inside(low, high, k, value, owner_of(k, value))),
        ("no hash value has two owners", owners + [_inside(low, high, k, value, i), _inside(low, high, k, value, j)],
         i == j),
        ("every share lies in the hash space", owners + [0 <= i, i < k],
         z3.And(0 <= low(k, i), low(k, i) <= high(k, i), high(k, i) < HASH_SPACE)),
        ("the shares are near-equal (sizes differ by at most k)", owners + [0 <= i, i < k, 0 <= j, j < k],
         size(i) - size(j) <= k),
    ]
    return first_failure(steps, lambda model: f"k={model[k]}, i={model[i]}, j={model[j]}, value={model[value]}")


def check_split_exactly_once() -> str | None:
    return _exactly_once_and_near_equal(share_low, share_high, owner)


def check_seed_split_exactly_once() -> str | None:
    return _exactly_once_and_near_equal(seed_low, seed_high, seed_owner)


def _encoded_shares(k: int, indexes) -> list[tuple[int, int]]:
    return [(z3.simplify(share_low(z3.IntVal(k), z3.IntVal(i))).as_long(),
             z3.simplify(share_high(z3.IntVal(k), z3.IntVal(i))).as_long()) for i in indexes]


def _seed_shares(k: int) -> list[tuple[int, int]]:
    return [(z3.simplify(seed_low(z3.IntVal(k), z3.IntVal(i))).as_long(),
             z3.simplify(seed_high(z3.IntVal(k), z3.IntVal(i))).as_long()) for i in range(k)]


def check_model_agrees(samples: int = 60, seed: int = 287) -> str | None:
    """model.key_range_assign.split(k) equals the encoding, and near_equal accepts both encoded splits and
    rejects one moved by k + 1 values, for k = 1..40, the largest k and random k."""
    from kipcheck.model import key_range_assign

    chooser = random.Random(seed)
    counts = list(range(1, 41)) + [OWNERS_MAX - 1, OWNERS_MAX] + [chooser.randint(41, OWNERS_MAX) for _ in range(samples)]
    for k in counts:
        shares = key_range_assign.split(k)
        if len(shares) != k:
            return f"k={k}: split gives {len(shares)} shares"
        for name, encoded in (("the equal split", shares), ("the seed's split", _seed_shares(k) if k <= 40 else None)):
            if encoded is not None and not key_range_assign.near_equal(encoded):
                return f"k={k}: near_equal rejects {name}"
        skewed = [(0, shares[0][1] - k - 1), (shares[0][1] - k, shares[1][1])] + shares[2:] if k > 1 else None
        if skewed and key_range_assign.near_equal(skewed):
            return f"k={k}: near_equal accepts shares whose sizes differ by more than k"
        indexes = sorted({0, 1, k // 2, k - 2, k - 1} & set(range(k)) | {chooser.randrange(k) for _ in range(5)})
        for index, encoded in zip(indexes, _encoded_shares(k, indexes)):
            if tuple(shares[index]) != encoded:
                return f"k={k}, share {index}: model split gives {list(shares[index])}, the proved encoding {list(encoded)}"
    return None


THEOREMS = [
    Theorem("key-range split covers the hash space exactly once", CLAUSES,
            "for every k in [1, 2^16], the k shares of the model's equal split (KR-8) cover [0, 2^63-1] with no "
            "value twice and are near-equal (KR-6) (unbounded integers; k symbolic)", check_split_exactly_once),
    Theorem("key-range split: the seed's long division is allowed", CLAUSES,
            "for every k in [1, 2^16], the seed's split ((2^63-1) div k each, the rest on the last share) covers "
            "[0, 2^63-1] with no value twice and is near-equal (KR-6) (unbounded integers; k symbolic)",
            check_seed_split_exactly_once),
    Theorem("key-range split: model agrees with the encoding", CLAUSES,
            "model.key_range_assign.split(k) equals the encoded shares and near_equal accepts both encoded splits "
            "and rejects a skewed one, for k = 1..40, 2^16-1, 2^16 and 60 random k", check_model_agrees),
]
