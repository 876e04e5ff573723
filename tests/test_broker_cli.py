"""`kipcheck broker` on the command line: bad flags exit 2 with a clear message; SIGTERM stops it cleanly."""

from __future__ import annotations

import subprocess
import sys

import pytest



def broker_command(tmp_path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kipcheck", "broker", "--port", "0", "--data-dir", str(tmp_path), *flags],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("flags, message", [
    (("--set", "no.such.setting=1"), "no.such.setting"),
    (("--set", "group.share.delivery.count.limit=many"), "group.share.delivery.count.limit"),
    (("--set", "justaname"), "expected NAME=VALUE"),
    (("--set", "advertised.listeners=nowhere"), "PLAINTEXT://HOST:PORT"),
    (("--port", "70000"), "expected 0..65535"),
    (("--profile", "kafka-9"), "invalid choice"),
    (("--set", "group.share.delivery.count.limit=11"), "group.share.delivery.count.limit must be in 2..10"),
    # kafka-4.4 judges Apache Kafka 4.4 itself: the reference broker does not serve it, and says why.
    (("--profile", "kafka-4.4"), "profile kafka-4.4 is a judging profile: the reference implementation serves "
                                 "kafka-4.2 and kip only"),
])
def test_bad_flags_exit_2_with_a_message(tmp_path, flags, message):
    result = broker_command(tmp_path, *flags)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_help_documents_every_setting():
    from kipcheck.impl.broker.config import known_names
    from kipcheck.impl.share.config import _PROPERTIES as share_names

    help_text = subprocess.run([sys.executable, "-m", "kipcheck", "broker", "--help"], capture_output=True, text=True,
                               timeout=60).stdout
    missing = [name for name in [*known_names(), *share_names] if name != "profile" and name not in help_text]
    assert not missing, f"not in `kipcheck broker --help`: {missing}"


def test_missing_data_dir_exits_2():
    result = subprocess.run([sys.executable, "-m", "kipcheck", "broker"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--data-dir" in result.stderr


@pytest.mark.slow
def test_sigterm_stops_cleanly_and_a_taken_port_is_an_error(tmp_path, start_broker):
    broker = start_broker()
    taken = broker_command(tmp_path / "second", "--port", str(broker.port))
    assert taken.returncode == 1 and "cannot start" in taken.stderr
    assert broker.stop() == 0  # SIGTERM: traces flushed, files fsync'd, exit 0


def test_a_share_setting_out_of_kafkas_range_is_one_line(tmp_path):
    """SP-45: under kafka-4.2 the broker refuses to start, as Kafka 4.2 does, naming the config and its range."""
    result = broker_command(tmp_path, "--set", "group.share.partition.max.record.locks=50")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "kipcheck broker: group.share.partition.max.record.locks must be in 100..10000 under Kafka 4.2, found 50"]
