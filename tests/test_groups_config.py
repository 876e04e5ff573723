"""The consumer-group settings: Kafka's names reach GroupConfig through the broker's --set; bad ones are refused."""

from __future__ import annotations

import pytest

from kipcheck.impl.broker.config import known_names, split_properties
from kipcheck.impl.groups.config import GroupConfig


def test_group_settings_are_routed_to_the_group_config():
    config, share = split_properties({"group.consumer.session.timeout.ms": "6000", "group.initial.rebalance.delay.ms": "0",
                                      "group.consumer.assignors": "range, uniform", "num.partitions": "2",
                                      "group.share.delivery.count.limit": "3"})
    assert config.groups == GroupConfig(consumer_session_timeout_ms=6000, initial_rebalance_delay_ms=0,
                                        consumer_assignors=("range", "uniform"))
    assert config.default_partitions == 2 and share.delivery_count_limit == 3
    assert {"group.consumer.heartbeat.interval.ms", "offset.metadata.max.bytes", "group.max.size"} <= set(known_names())


@pytest.mark.parametrize("bad", [{"group.consumer.session.timeout.ms": "0"}, {"group.consumer.assignors": "sticky"},
                                 {"group.consumer.assignors": ""}, {"group.initial.rebalance.delay.ms": "-1"},
                                 {"group.min.session.timeout.ms": "9000", "group.max.session.timeout.ms": "8000"},
                                 {"group.max.size": "many"},
                                 {"group.consumer.heartbeat.interval.ms": "9000", "group.consumer.session.timeout.ms": "9000"}])
def test_bad_group_settings_name_the_setting(bad):
    with pytest.raises(ValueError, match=next(iter(bad)).split(".")[1]):
        split_properties(bad)
