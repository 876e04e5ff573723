"""The share-session judge: bad trace input exits 2 with a reason; kip and kafka-4.2 answers differ where the spec says."""

import json

import pytest

from kipcheck.oracle.check import check_lines

HEADER = {"format": "kipcheck-trace", "version": 1, "machine": "share-session"}


def trace(*steps, profile="kip", config=None):
    header = {**HEADER, "profile": profile, **({"config": config} if config else {})}
    numbered = [{"step": n, "at_ms": n, "actor": "c1", **step} for n, step in enumerate(steps, start=1)]
    return [json.dumps(header)] + [json.dumps(step) for step in numbered]


def fetch(epoch=0, observed=None, **args):
    return {"op": "share_fetch", "args": {"epoch": epoch, **args}, **({"observed": observed} if observed else {})}


@pytest.mark.parametrize("lines, reason", [
    (trace(fetch(add=["orders"])), '"topic:partition"'),
    (trace(fetch(add=[3])), '"topic:partition"'),
    (trace(fetch(epoch="1")), "args.epoch"),
    (trace({"op": "share_fetch", "args": {}}), "needs args.epoch"),
    (trace(fetch(acks=[{"tp": "orders:0", "first": 0}])), "{tp, first, last, type}"),
    (trace({"op": "share_acknowledge", "args": {"epoch": 1, "acks": [7]}}), "{tp, first, last, type}"),
    (trace({"op": "check", "observed": {"sessions": {"c1": "1"}}}), "integer epochs"),
    (trace(fetch(), config={"max_sessions": -1}), "max_sessions"),
    (trace(fetch(), config={"max_sessions": True}), "max_sessions"),
    (trace({"op": "leave"}), "unknown op"),
    (trace(fetch(observed={"error": "NONE", "other_sessions": -1})), "other_sessions"),
    (trace(fetch(observed={"error": "NONE", "other_sessions": "2"})), "other_sessions"),
])
def test_malformed_input_is_reported_not_judged(lines, reason):
    verdict = check_lines(lines)
    assert verdict.status == "malformed" and reason in verdict.reason, verdict.summary()


@pytest.mark.parametrize("profile, error, clause", [("kip", "INVALID_REQUEST", None), ("kafka-4.2", "NONE", None),
                                                     ("kip", "NONE", "SS-10"), ("kafka-4.2", "INVALID_REQUEST", "SS-11")])
def test_final_fetch_with_topics_is_judged_per_profile(profile, error, clause):
    verdict = check_lines(trace(fetch(observed={"error": "NONE"}), fetch(-1, add=["orders:1"], observed={"error": error}),
                                profile=profile))
    assert (verdict.status, verdict.clause) == (("ok", None) if clause is None else ("violation", clause))


def test_check_after_a_refusal_names_ss15():
    check = {"op": "check", "observed": {"sessions": {"c1": 6}}}
    verdict = check_lines(trace(fetch(observed={"error": "NONE"}), fetch(5), check))
    assert (verdict.status, verdict.step, verdict.clause) == ("violation", 3, "SS-15")


@pytest.mark.parametrize("profile", ["kip", "kafka-4.2"])
def test_check_after_a_disconnect_names_ss17(profile):
    disconnect, check = {"op": "disconnect"}, {"op": "check", "observed": {"sessions": {"c1": 1}}}
    verdict = check_lines(trace(fetch(observed={"error": "NONE"}), disconnect, check, profile=profile))
    assert (verdict.status, verdict.step, verdict.clause) == ("violation", 3, "SS-17")
    verdict = check_lines(trace(fetch(observed={"error": "NONE"}), disconnect, fetch(1, observed={"error": "NONE"}),
                                profile=profile))
    assert (verdict.status, verdict.step, verdict.clause) == ("violation", 3, "SS-6")


@pytest.mark.parametrize("other_sessions, error, clause", [
    (None, "SHARE_SESSION_LIMIT_REACHED", "SS-5"),   # without the field, the group alone does not fill the cache
    (1, "SHARE_SESSION_LIMIT_REACHED", None),        # another group's session fills it: a correct refusal
    (0, "SHARE_SESSION_LIMIT_REACHED", "SS-5"),
    (1, "NONE", "SS-5"),
])
def test_ss5_other_groups_sessions_count_toward_the_limit(other_sessions, error, clause):
    observed = {"error": error, **({} if other_sessions is None else {"other_sessions": other_sessions})}
    verdict = check_lines(trace(fetch(observed={"error": "NONE"}), {**fetch(observed=observed), "actor": "c2"},
                                profile="kafka-4.2", config={"max_sessions": 2}))
    assert (verdict.status, verdict.clause) == ("ok" if clause is None else "violation", clause), verdict.summary()
