"""Impossible counts at every byte of every request the broker serves: it stays up, with bounded memory.

For every API and version the broker advertises (its own ApiVersions answer),
a short valid request with one of everything (wire.sample_frame) gets each
huge count encoding (wire.HUGE_COUNTS: int32 2^31 - 1, unsigned varints for
2^32 + 4 and 2^31 - 1, int16 2^15 - 1) written over, and inserted at, every
byte after the header's fixed part, header included; each frame goes on its
own connection. Kafka refuses such counts before allocating (KAFKA-14063), and
so must the broker: afterwards it is alive, answers ApiVersions, and its peak
resident memory (VmHWM, reset after start-up) grew by less than
PEAK_GROWTH_MAX_BYTES.
"""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor

from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker
from kipcheck.oracle.conformance.probes.raw_client import RawClient, huge_count_mutations, sample_frame

API_VERSIONS = 18
PEAK_GROWTH_MAX_BYTES = 64 << 20
SENDERS = 4


def advertised_versions(port: int) -> list[tuple[int, int]]:
    client = RawClient(port)
    answer = client.request(API_VERSIONS, 3, client_software_name="fuzz", client_software_version="1")
    client.close()
    return [(api.api_key, version) for api in answer.api_keys for version in range(api.min_version, api.max_version + 1)]


def send_until_closed(port: int, frame: bytes) -> None:
    """Send one frame, say we are done, and read until the broker closes: it has then handled the frame."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as connection:
        connection.sendall(frame)
        connection.shutdown(socket.SHUT_WR)
        while connection.recv(65536):
            pass


def test_huge_counts_anywhere_in_any_request_leave_the_broker_serving(tmp_path):
    with EmbeddedBroker(tmp_path, traced=False) as broker:
        versions = advertised_versions(broker.port)
        broker.reset_peak_memory()  # the peak of start-up (imports) would hide the fuzz's own
        peak_before = broker.peak_memory_bytes()
        started, sent = time.monotonic(), 0
        with ThreadPoolExecutor(SENDERS) as senders:
            for api_key, version in versions:
                frames = list(huge_count_mutations(sample_frame(api_key, version)))
                try:
                    list(senders.map(lambda frame: send_until_closed(broker.port, frame), frames))
                except OSError as error:
                    raise AssertionError(f"api key {api_key} v{version}: {error}; broker alive: {broker.alive()}\n"
                                         f"{broker.log_tail()}") from None
                sent += len(frames)
                assert broker.alive(), f"broker died on api key {api_key} v{version}\n{broker.log_tail()}"
        peak_after = broker.peak_memory_bytes()
        client = RawClient(broker.port)
        answer = client.request(API_VERSIONS, 3, client_software_name="fuzz", client_software_version="1")
        client.close()
        assert answer is not None and answer.error_code == 0
        assert peak_after - peak_before < PEAK_GROWTH_MAX_BYTES, f"peak memory {peak_before} -> {peak_after} bytes"
        print(f"{sent} frames over {len(versions)} api versions ({len({key for key, _ in versions})} apis) "
              f"in {time.monotonic() - started:.1f} s; broker peak memory {peak_before >> 20} -> {peak_after >> 20} MiB")
