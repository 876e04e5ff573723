"""`kipcheck prove`: every theorem holds, the expected refutation is found, and broken encodings fail."""

import z3
import pytest

from kipcheck.cli import main
from kipcheck.oracle import proofs
from kipcheck.oracle.proofs import ic_merge, key_range_split, linear_hashing, share_partition_bmc
from kipcheck.spec import clauses


@pytest.mark.parametrize("theorem", proofs.all_theorems(), ids=lambda theorem: theorem.name)
def test_theorem_holds(theorem):
    result = proofs.run(theorem)
    assert result.ok, f"{result.status}: {result.detail}"
    assert set(theorem.clauses) <= set(clauses()), "every theorem names clauses that exist in spec/"


def test_kip287_refutation_names_a_real_counterexample():
    """EX-3: with fewer partitions than processors, z3's counterexample moves a key between existing processors."""
    found = linear_hashing.check_fewer_partitions_moves_keys()
    assert found is not None and "confirmed by model.expansion.linear_hash" in found


def test_cli_prints_one_line_per_theorem_and_exits_zero(capsys):
    assert main(["prove", "--only", "KIP-287"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 7 and lines[-1] == "6 of 6 theorems hold"
    assert any(line.startswith("refuted as expected") and "confirmed" in line for line in lines)


def test_cli_exits_one_when_a_theorem_fails(capsys, monkeypatch):
    """IC-2 broken in the encoding: adjacency ignored, so z3 finds two touching ranges."""
    def touching_is_apart(stable, count, lows, highs, first, last, p, q):
        return [0 <= p, p <= q, q <= count,
                z3.Implies(p > 0, highs[p - 1] < first), z3.Implies(p < count, highs[p] >= first),
                z3.Implies(q > 0, lows[q - 1] <= last), z3.Implies(q < count, lows[q] > last)]

    monkeypatch.setattr(ic_merge, "split_points", touching_is_apart)
    assert main(["prove", "--only", "IC merge keeps"]) == 1
    assert "FAILED" in capsys.readouterr().out


def test_cli_rejects_bad_arguments(capsys):
    assert main(["prove", "--only", "no such theorem"]) == 2
    assert main(["prove", "--bmc-steps", "0"]) == 2


def test_list_shows_statements(capsys):
    assert main(["prove", "--list"]) == 0
    assert "2^16" in capsys.readouterr().out


def test_split_proof_fails_when_the_remainder_is_dropped(monkeypatch):
    """KR-1: shares of size q with no remainder leave the top of the hash space without an owner."""
    monkeypatch.setattr(key_range_split, "share_high", lambda k, i: key_range_split.share_low(k, i) + key_range_split.HASH_SPACE / k - 1)
    assert key_range_split.check_split_exactly_once() is not None


def test_seed_split_proof_fails_when_the_last_share_does_not_take_the_rest(monkeypatch):
    """KR-1, KR-6: the seed's long division covers the top of the hash space only through its last share."""
    monkeypatch.setattr(key_range_split, "seed_high",
                        lambda k, i: (i + 1) * ((key_range_split.HASH_SPACE - 1) / k) - 1)
    assert "every hash value has an owner" in key_range_split.check_seed_split_exactly_once()


def test_linear_hash_proof_fails_with_plain_modulo(monkeypatch):
    """EX-2: plain `h mod n` instead of linear hashing moves keys when partitions grow."""
    monkeypatch.setattr(linear_hashing, "linear_hash", lambda value, buckets, modulus: value % buckets)
    assert linear_hashing.check_partition_expansion_keeps_processor() is not None


def test_split_proof_fails_with_plain_modulo(monkeypatch):
    """EX-5: with `h mod n`, growing from b to b + 1 buckets moves keys between old buckets too."""
    monkeypatch.setattr(linear_hashing, "linear_hash", lambda value, buckets, modulus: value % buckets)
    assert linear_hashing.check_split_moves_keys_only_to_the_new_bucket() is not None


def test_source_check_fails_when_the_parent_is_off_by_one(monkeypatch):
    """EX-5: a parent one bucket too high names the wrong source, and the sampled check finds a key that says so."""
    from kipcheck.model import expansion

    parent = expansion.parent
    monkeypatch.setattr(expansion, "parent", lambda bucket, initial: parent(bucket, initial) + (bucket % 2))
    assert "model.expansion.source gives" in linear_hashing.check_model_source_agrees()


def test_bounded_check_fails_when_release_at_the_limit_does_not_archive():
    class NeverArchive(share_partition_bmc.Rules):
        def released_state(self, count):
            return share_partition_bmc.AVAILABLE

    found = share_partition_bmc.check_invariants(NeverArchive())
    assert found is not None and "count 3" in found


def test_contradictory_hypotheses_are_reported_not_proved():
    x = z3.Int("x")
    found = proofs.first_failure([("impossible", [x > 1, x < 0], x == 5)], str)
    assert found == "impossible: vacuous, its hypotheses contradict each other"


def test_canonical_form_proof_fails_when_touching_ranges_are_allowed(monkeypatch):
    """IC-2: without 'non-adjacent', [1, 2] [3, 4] and [1, 4] hold the same offsets: the form is not canonical.

    z3 may find that counterexample or give up on the quantifiers (UNKNOWN); either way it is not proved."""
    def touching_allowed(stable, count, lows, highs, hypothesis=True):
        j, k = z3.Ints("j k")
        apart = z3.ForAll([j, k], z3.Implies(z3.And(0 <= j, j < k, k < count), highs[j] < lows[k]))
        nonempty = z3.ForAll([j], z3.Implies(z3.And(0 <= j, j < count), lows[j] <= highs[j]))
        return z3.And(count >= 0, nonempty, apart, z3.Implies(count > 0, lows[0] > stable + 1))

    canonical = next(theorem for theorem in ic_merge.THEOREMS if "canonical" in theorem.name)
    monkeypatch.setattr(proofs, "TIMEOUT_MS", 5_000)
    monkeypatch.setattr(ic_merge, "normal_form", touching_allowed)
    assert proofs.run(canonical).status in ("FAILED", "UNKNOWN")
