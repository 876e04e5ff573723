"""The judge a trace's header asks for: its machine's, or the judges of a partial view and of a client's conduct.

    judge = judge_for(header)       # what oracle/check.py judges every trace with

A header may say `"view": "partial"` (the trace holds the steps of some members only: spec SP-80 and SS-41
say which clauses still hold) and `"conduct": true` (the actors' own requests are judged too: SP-85, SS-40,
IC-22). A full view with conduct is judged by the machine's judge and by the conduct rules, step by step;
a partial view by the view's rules (model/partial_view.py) and, with conduct, the conduct rules. One module
per machine here, imported only for a trace of that machine (`kipcheck check` on one file stays quick).
"""

from __future__ import annotations

from typing import Callable

from kipcheck.oracle import judges
from kipcheck.oracle.judge import Judge
from kipcheck.oracle.trace import Header, Malformed

VIEW_MACHINES = ("share-partition", "share-session")
CONDUCT_MACHINES = ("share-partition", "share-session", "ic")


def judge_for(header: Header, reference: bool = False) -> Judge:
    """The judge of a trace with this header (Malformed for a machine or a view no judge knows)."""
    judge_class = judges.judge_class(header.machine)
    if judge_class is None:
        raise Malformed(1, f"unknown machine {header.machine!r} (known: {', '.join(judges.machines())})")
    if header.view == "partial" and header.machine not in VIEW_MACHINES:
        raise Malformed(1, f'"view": "partial" is defined for {" and ".join(VIEW_MACHINES)} traces only')
    if header.conduct and header.machine not in CONDUCT_MACHINES:
        raise Malformed(1, f'"conduct" is defined for {", ".join(CONDUCT_MACHINES)} traces only')
    if header.view == "partial" or header.conduct:
        from importlib import import_module

        return import_module(f"{__name__}.{header.machine.replace('-', '_')}").judge(header, reference)
    if reference and getattr(judge_class, "has_fast_acceptor", False):
        return judge_class(header.config, header.profile, reference=True)
    return judge_class(header.config, header.profile)


def declared_as(method: Callable) -> Callable:
    """An op that takes the fields `method` (another judge's op) declares."""
    def declare(handler: Callable) -> Callable:
        handler.fields = method.fields
        return handler
    return declare
