"""Broker conformance: `kipcheck conform` probes a share-group broker from the outside and judges what it saw.

    targets/     what is probed, one module per kind of target (embedded, wire, librdkafka-mock, in-process),
                 behind one Target protocol and registry; its docstring says how to add one
    probes/      the runner's own client (probe.py), the named scenarios and swarm runs it makes (catalogue.py),
                 running them within a budget (runner.py), lock timers seen from outside (tolerance.py), and
                 RawClient for requests no real client sends (raw_client.py)
    scenarios/   the client scenarios: real clients against the reference broker, each on a broker of its own,
                 one module per family behind a registry
    session.py   one run against a target: its runs, its own traces, the client scenarios, the verdict
    report.py    the table per machine and clause, JUnit
    picture.py   the HTML report: each counterexample's steps, one lane per member, and its record states
    shrink.py    the minimal failing trace
    adapter_example.py   the worked example of the adapter of `--target python:MODULE:FACTORY`
"""
