"""StallProbe: another client's view of the broker while an attack runs: the longest it waited for an answer.

    with StallProbe(port) as probe:
        attack()
    probe.longest_s      # the longest round trip of an ApiVersions request, sent every PERIOD_S
    probe.longest_share  # longest_s over the time the attack ran: near 1 when the broker served the attack
                         # on its event loop, whatever the machine's load (which stretches both alike)
    probe.unanswered     # requests that got no answer at all (a closed connection)

One connection of its own, one ApiVersions request at a time, on a thread, so
the attack never waits for it. Used by tests/test_broker_attacks.py and
bench/bench_attacks.py.
"""

from __future__ import annotations

import threading
import time

from kipcheck.oracle.conformance.probes.raw_client import RawClient

PERIOD_S = 0.02
API_VERSIONS = 18


class StallProbe:
    def __init__(self, port: int):
        self.port = port
        self.longest_s = 0.0
        self.answered = self.unanswered = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "StallProbe":
        self._client = RawClient(self.port, timeout_s=600)
        self._entered = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.elapsed_s = time.monotonic() - self._entered
        self._stop.set()
        self._thread.join()
        self._client.close()

    @property
    def longest_share(self) -> float:
        return self.longest_s / self.elapsed_s

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            answer = self._client.request(API_VERSIONS, 3, client_software_name="probe", client_software_version="1")
            self.longest_s = max(self.longest_s, time.monotonic() - started)
            if answer is None:
                self.unanswered += 1
                return
            self.answered += 1
            self._stop.wait(PERIOD_S)
