"""Broker conformance: `kipcheck conform` probes a share-group broker from the outside and judges what it saw.

The runner's modules: targets.py (what is probed), probe.py (a kio client that
writes what it saw as traces), tolerance.py (lock timers seen from outside),
catalogue.py (the named hostile and crash scenarios, and seeded swarm runs),
conform.py (running them within a budget), inprocess.py (an implementation
driven in this process: `reference`, `python:MODULE:FACTORY`), session.py (one
run against a target, the verdict), report.py (the table per machine and
clause, JUnit), picture.py (the HTML report), shrink.py (the minimal failing
trace). scenarios.py, group_scenarios.py and revoke_scenarios.py are the
scenarios with real clients against an embedded broker (embedded.py), which
`kipcheck conform --target embedded` runs too.
"""
