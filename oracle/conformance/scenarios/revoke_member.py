"""A ProcessingApp (revoke_app.py) on kipcheck's consumer, in its own process, so a scenario can stop or kill it.

    python -m kipcheck.oracle.conformance.scenarios.revoke_member BOOTSTRAP GROUP TOPIC MODE PROCESSING_MS TRACE_DIR SETTINGS \
        LOG_FILE

MODE is delay (KIP-983), callback or naive; SETTINGS are consumer settings,
NAME=VALUE separated by commas (e.g. max.poll.interval.ms=2000), or `-`;
TRACE_DIR `-` writes no trace. The settings `queue=HIGH:LOW` (where a
partition is paused and resumed) and `flush=LOW_MS:HIGH_MS` (each partition's
state flushed before its commit, each flush taking between LOW_MS and HIGH_MS)
are the application's, not the consumer's. The log is revoke_app's event log; the
consumer's revoke-delay trace goes to TRACE_DIR (delay mode). SIGTERM stops it
cleanly (finish, commit, leave); SIGKILL is the crash a scenario wants.
"""

from __future__ import annotations

import signal
import sys
import threading

from kipcheck.oracle.conformance.scenarios.revoke_app import QUEUE_HIGH, QUEUE_LOW, EventLog, ProcessingApp

LIFETIME_S = 600  # a member left behind by a failed scenario ends on its own


def main(argv: list[str]) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    bootstrap, group, topic, mode, processing_ms, trace_dir, settings, log_path = argv
    pairs = dict([] if settings == "-" else [setting.split("=", 1) for setting in settings.split(",")])
    high, _, low = pairs.pop("queue", f"{QUEUE_HIGH}:{QUEUE_LOW}").partition(":")
    flush = pairs.pop("flush", None)
    flush_ms = None if flush is None else tuple(float(bound) for bound in flush.split(":", 1))
    app = ProcessingApp(bootstrap, group, topic, mode, float(processing_ms), EventLog(log_path),
                        None if trace_dir == "-" else trace_dir, (int(high), int(low)), flush_ms, **pairs)
    runner = threading.Thread(target=app.run, daemon=True)
    runner.start()
    stop.wait(LIFETIME_S)
    app.stop()
    runner.join()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
