"""The share session cache model, clause by clause (spec/share-session.md), in both profiles."""

import pytest

from kipcheck.model.share_session import MAX_EPOCH, Session, ShareSessionCache

BOTH = ("kip", "kafka-4.2")


def opened(profile="kip", member="c1", **config):
    cache = ShareSessionCache(profile, **config)
    assert cache.share_fetch(member, 0, add=["orders:0"]).error == "NONE"
    return cache


def epochs(cache):
    return cache.sessions().value


@pytest.mark.parametrize("profile", BOTH)
def test_ss1_check_lists_every_session_epoch(profile):
    """SS-1: The cache holds at most one session per member, with its epoch."""
    cache = opened(profile)
    cache.share_fetch("c2", 0)
    cache.share_fetch("c2", 1)
    assert epochs(cache) == {"c1": 1, "c2": 2}


@pytest.mark.parametrize("profile", BOTH)
def test_ss2_full_fetch_with_acks_is_invalid_and_keeps_the_session(profile):
    """SS-2: A ShareFetch with epoch 0 cannot carry acknowledgements."""
    cache = opened(profile)
    cache.share_fetch("c1", 1)
    answer = cache.share_fetch("c1", 0, has_acks=True)
    assert (answer.error, answer.clause, answer.releases) == ("INVALID_REQUEST", "SS-2", False)
    assert epochs(cache) == {"c1": 2}


def test_ss3_kip_reopen_releases_the_old_sessions_records():
    """SS-3: ShareFetch epoch 0 re-opens the session, releasing the records of the old one."""
    cache = opened("kip")
    cache.share_fetch("c1", 1)
    answer = cache.share_fetch("c1", 0, add=["orders:1"])
    assert (answer.error, answer.clause, answer.releases) == ("NONE", "SS-3", True)
    assert cache.by_member["c1"] == Session(1, frozenset({"orders:1"}))


def test_ss3_kip_first_open_releases_nothing():
    """SS-3: ShareFetch epoch 0 re-opens the session, releasing the records of the old one."""
    answer = ShareSessionCache("kip").share_fetch("c1", 0)
    assert (answer.clause, answer.releases) == ("SS-3", False)


def test_ss4_kafka_reopen_drops_the_session_without_release():
    """SS-4: ShareFetch epoch 0 drops the old session without releasing its records."""
    cache = opened("kafka-4.2")
    answer = cache.share_fetch("c1", 0)
    assert (answer.error, answer.clause, answer.releases) == ("NONE", "SS-4", False)
    assert epochs(cache) == {"c1": 1}


def test_ss5_kafka_full_cache_refuses_and_loses_the_old_session():
    """SS-5: A full cache refuses a new session with SHARE_SESSION_LIMIT_REACHED."""
    cache = opened("kafka-4.2", max_sessions=1)
    assert cache.share_fetch("c2", 0).error == "SHARE_SESSION_LIMIT_REACHED"
    assert cache.share_fetch("c1", 0).error == "NONE", "re-opening frees its own place first"
    cache.by_member["c2"] = Session(4)
    answer = cache.share_fetch("c1", 0)
    assert (answer.error, answer.clause) == ("SHARE_SESSION_LIMIT_REACHED", "SS-5")
    assert cache.sessions() == ({"c2": 4}, "SS-5")


def test_ss5_kafka_counts_other_groups_sessions():
    """SS-5: the limit counts the broker's whole cache: other groups' sessions too."""
    cache = opened("kafka-4.2", max_sessions=3)
    assert cache.share_fetch("c2", 0, other_sessions=2).error == "SHARE_SESSION_LIMIT_REACHED"
    assert cache.share_fetch("c2", 0, other_sessions=1).error == "NONE"
    answer = cache.share_fetch("c1", 0, other_sessions=1)
    assert (answer.error, answer.clause) == ("NONE", "SS-4"), "re-opening frees its own place first"


def test_ss5_kip_has_no_session_limit():
    """SS-5: A full cache refuses a new session with SHARE_SESSION_LIMIT_REACHED."""
    cache = opened("kip", max_sessions=1)
    assert cache.share_fetch("c2", 0).error == "NONE"


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize("request_kind, epoch", [("fetch", 3), ("fetch", -1), ("acknowledge", 3), ("acknowledge", -1)])
def test_ss6_non_zero_epoch_without_session_is_not_found(profile, request_kind, epoch):
    """SS-6: A request with a non-zero epoch needs a session."""
    cache = ShareSessionCache(profile)
    answer = cache.share_fetch("c1", epoch) if request_kind == "fetch" else cache.share_acknowledge("c1", epoch)
    assert (answer.error, answer.clause) == ("SHARE_SESSION_NOT_FOUND", "SS-6")


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize("epoch", [2, MAX_EPOCH, -2])
def test_ss7_wrong_incremental_epoch_is_refused(profile, epoch):
    """SS-7: An incremental epoch must equal the cached epoch."""
    cache = opened(profile)
    for answer in (cache.share_fetch("c1", epoch), cache.share_acknowledge("c1", epoch)):
        assert (answer.error, answer.clause, answer.acknowledges) == ("INVALID_SHARE_SESSION_EPOCH", "SS-7", False)
    assert epochs(cache) == {"c1": 1}


@pytest.mark.parametrize("profile", BOTH)
def test_ss8_incremental_fetch_adds_then_forgets_and_increments(profile):
    """SS-8: A successful incremental ShareFetch updates the partitions and increments the epoch."""
    cache = opened(profile)
    answer = cache.share_fetch("c1", 1, add=["orders:1", "orders:2"], forget=["orders:0", "orders:2"], has_acks=True)
    assert (answer.error, answer.clause, answer.acknowledges, answer.releases) == ("NONE", "SS-8", True, False)
    assert cache.by_member["c1"] == Session(2, frozenset({"orders:1"}))


@pytest.mark.parametrize("profile", BOTH)
def test_ss9_epoch_after_integer_max_value_is_one(profile):
    """SS-9: The epoch after Integer.MAX_VALUE is 1."""
    cache = ShareSessionCache(profile)
    cache.by_member["c1"] = Session(MAX_EPOCH)
    assert cache.share_fetch("c1", MAX_EPOCH).error == "NONE"
    assert epochs(cache) == {"c1": 1}
    cache.by_member["c1"] = Session(MAX_EPOCH)
    assert cache.share_acknowledge("c1", MAX_EPOCH).error == "NONE"
    assert epochs(cache) == {"c1": 1}


@pytest.mark.parametrize("lists", [{"add": ["orders:1"]}, {"forget": ["orders:0"]}])
def test_ss10_kip_final_fetch_with_topics_is_invalid_before_lookup(lists):
    """SS-10: A final ShareFetch cannot add or forget topic-partitions."""
    assert ShareSessionCache("kip").share_fetch("c1", -1, **lists)[:4] == ("INVALID_REQUEST", "SS-10", False, False)
    cache = opened("kip")
    assert cache.share_fetch("c1", -1, **lists).error == "INVALID_REQUEST"
    assert epochs(cache) == {"c1": 1}


def test_ss11_kafka_final_fetch_ignores_topics():
    """SS-11: A final ShareFetch accepts and ignores topic-partitions to add or forget."""
    cache = opened("kafka-4.2")
    answer = cache.share_fetch("c1", -1, add=["orders:1"], forget=["orders:0"])
    assert (answer.error, answer.clause, answer.releases) == ("NONE", "SS-11", True)
    assert epochs(cache) == {}


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize("request_kind", ["fetch", "acknowledge"])
def test_ss12_final_request_closes_releases_and_is_not_epoch_checked(profile, request_kind):
    """SS-12: A final request closes the session, releasing its records; its epoch is not checked."""
    cache = opened(profile)
    cache.share_fetch("c1", 1)
    answer = cache.share_fetch("c1", -1, has_acks=True) if request_kind == "fetch" else cache.share_acknowledge("c1", -1)
    assert answer[:5] == ("NONE", "SS-12", True, True, {"orders:0"})
    assert cache.sessions() == ({}, "SS-12")


@pytest.mark.parametrize("profile", BOTH)
def test_ss13_acknowledge_epoch_zero_is_refused_with_or_without_session(profile):
    """SS-13: A ShareAcknowledge with epoch 0 fails with INVALID_SHARE_SESSION_EPOCH."""
    assert ShareSessionCache(profile).share_acknowledge("c1", 0)[:4] == ("INVALID_SHARE_SESSION_EPOCH", "SS-13", False, False)
    cache = opened(profile)
    assert cache.share_acknowledge("c1", 0).clause == "SS-13"
    assert epochs(cache) == {"c1": 1}


@pytest.mark.parametrize("profile", BOTH)
def test_ss14_incremental_acknowledge_keeps_partitions_and_increments(profile):
    """SS-14: A successful incremental ShareAcknowledge increments the epoch."""
    cache = opened(profile)
    assert cache.share_acknowledge("c1", 1)[:4] == ("NONE", "SS-14", True, False)
    assert cache.by_member["c1"] == Session(2, frozenset({"orders:0"}))


@pytest.mark.parametrize("profile", BOTH)
def test_ss15_refused_request_changes_nothing_and_rules_the_next_check(profile):
    """SS-15: A refused request changes nothing."""
    cache = opened(profile)
    before = dict(cache.by_member)
    for answer in (cache.share_fetch("c1", 9, add=["orders:9"]), cache.share_fetch("c1", 0, has_acks=True),
                   cache.share_acknowledge("c1", 0), cache.share_fetch("c2", 1)):
        assert answer.error != "NONE" and not answer.acknowledges and not answer.releases
    assert cache.by_member == before
    assert cache.sessions().clause == "SS-15"


@pytest.mark.parametrize("profile", BOTH)
def test_ss16_full_fetch_ignores_its_forget_list(profile):
    """SS-16: The forget list of a full ShareFetch is ignored."""
    cache = ShareSessionCache(profile)
    cache.share_fetch("c1", 0, add=["orders:0"], forget=["orders:0", "orders:1"])
    assert cache.by_member["c1"].partitions == frozenset({"orders:0"})


@pytest.mark.parametrize("profile", BOTH)
def test_ss17_disconnect_removes_the_session_and_releases_its_records(profile):
    """SS-17: A closed connection removes the member's session and releases its records."""
    cache = opened(profile)
    cache.share_fetch("c2", 0)
    cache.share_fetch("c1", 1)
    assert cache.disconnect("c1")[:5] == ("NONE", "SS-17", False, True, {"orders:0"})
    assert epochs(cache) == {"c2": 1}
    assert cache.sessions().clause == "SS-17"
    assert cache.share_acknowledge("c1", 2).error == "SHARE_SESSION_NOT_FOUND"


@pytest.mark.parametrize("profile", BOTH)
def test_ss17_disconnect_without_a_session_releases_nothing(profile):
    """SS-17: A closed connection removes the member's session and releases its records."""
    cache = opened(profile)
    assert cache.disconnect("c2")[:5] == ("NONE", "SS-17", False, False, set())
    assert epochs(cache) == {"c1": 1}


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize("error", ["COORDINATOR_NOT_AVAILABLE", "KAFKA_STORAGE_ERROR"])
def test_ss18_a_storage_refusal_changes_nothing(profile, error):
    """SS-18: A request refused with a storage error changes nothing."""
    cache = opened(profile)
    answer = cache.storage_failure(error)
    assert (answer.error, answer.clause, answer.acknowledges, answer.releases) == (error, "SS-18", False, False)
    assert cache.sessions() == ({"c1": 1}, "SS-15")
    assert cache.share_fetch("c1", 1).error == "NONE", "the member retries with the same epoch"


def test_ss30_a_closing_session_releases_only_its_share_partitions():
    """SS-30: the records are released in the partitions still in the session, not in forgotten ones."""
    cache = ShareSessionCache("kafka-4.2")
    cache.share_fetch("c1", 0, add=["orders:0", "orders:1"])
    cache.share_fetch("c1", 1, forget=["orders:1"])
    assert cache.share_fetch("c1", -1).released == {"orders:0"}
    cache.share_fetch("c1", 0, add=["orders:1"])
    assert cache.disconnect("c1").released == {"orders:1"}


def test_ss31_a_disconnect_that_leaves_no_session_empties_the_group():
    """SS-31: the last session's disconnect drops the group's share-partitions; a final request does not."""
    cache = ShareSessionCache("kafka-4.2")
    cache.share_fetch("c1", 0, add=["orders:0"])
    cache.share_fetch("c2", 0, add=["orders:0"])
    assert not cache.disconnect("c1").group_empty
    assert cache.share_fetch("c2", -1).group_empty is False
    cache.share_fetch("c2", 0)
    assert cache.disconnect("c2").group_empty
    assert not cache.disconnect("c2").group_empty                 # no session: nothing left to empty
    assert not ShareSessionCache("kip").disconnect("c1").group_empty


def test_ss31_the_connection_of_a_stale_session_still_empties_the_group():
    """SS-31: a session a final request ended is stale; its connection's close runs the group-empty check anyway
    (Kafka 4.2's ShareSessionCacheTest testShareGroupListenerEventsOnStaleSession)."""
    cache = ShareSessionCache("kafka-4.2")
    cache.share_fetch("c1", 0, add=["orders:0"])
    cache.share_fetch("c1", -1)                                    # the session goes; its connection stays
    answer = cache.disconnect("c1")
    assert answer.group_empty and not answer.releases and answer.released == frozenset()
    assert not cache.disconnect("c1").group_empty                  # that connection is gone: nothing to check
    assert not cache.disconnect("stranger").group_empty            # a connection that opened no session
    cache.share_fetch("c1", 0)
    cache.share_fetch("c2", 0)
    cache.share_fetch("c1", -1)
    assert not cache.disconnect("c1").group_empty                  # c2 still has a session
    kip = ShareSessionCache("kip")
    kip.share_fetch("c1", 0)
    kip.share_fetch("c1", -1)
    assert not kip.disconnect("c1").group_empty

