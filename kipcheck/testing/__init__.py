"""kipcheck in pytest: a judged broker for a test, judged traces for a session (README, "In your tests").

plugin.py      the pytest11 entry point: the option, the marker and the fixtures; imports nothing until used
targets.py     what the fixtures start: the reference broker and Apache Kafka
findings.py    a target's traces judged after a test, and what the failing test prints
assertions.py  assert_conforms, for tests that write their own traces (also `kipcheck.assert_conforms`)
session.py     --kipcheck-traces DIR: the session's traces, judged when it ends
"""
