"""The probes: the runner's own share-group client, speaking the protocol as careless and hostile clients would.

probe.py (a kio client that writes what it saw as share-partition and
share-session traces), catalogue.py (the named hostile and crash scenarios,
and seeded swarm runs), runner.py (running them within a budget, every trace
judged), tolerance.py (lock timers seen from outside), raw_client.py
(RawClient: requests no real client would send, for tests and fuzzing).
"""
