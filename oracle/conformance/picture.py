"""The HTML report of a conformance run: for each counterexample, the record states over time.

    write_html(path, outcome)      # one self-contained file: the clause table, and per failing trace a PNG inline

A share-partition counterexample is replayed through the model step by step;
after each step the state of every offset of the window is kept (with its
owner while acquired). The picture puts time (the step's at_ms) across and
offsets up, one cell per offset and step coloured by state, the owner's name
written in acquired runs, and the failing step marked. Drawn with matplotlib
(Agg, no display needed).
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

from kipcheck.oracle.check import Verdict
from kipcheck.oracle.conformance.probes.probe import replay

COLOURS = {"available": "#9ecae1", "acquired": "#fdae6b", "acknowledged": "#74c476", "archived": "#bdbdbd"}
STEPS_MAX = 200  # a counterexample is shrunk first; a longer one is cut to its last steps


def record_states(lines: list[str]) -> tuple[list[int], list[dict[int, tuple[str, str | None]]], int | None]:
    """(at_ms of each step, {offset: (state, owner)} after each step, index of the failing step or None)."""
    steps = [json.loads(line) for line in lines[1:] if line.strip()]
    states: list[dict[int, tuple[str, str | None]]] = []

    def keep(model, _index) -> None:
        states.append({offset: (model.state_of(offset), model.owner_of(offset))
                       for offset in range(model.spso, model.speo)})

    model, failing = replay(json.loads(lines[0]), steps, keep)
    if failing is not None:
        keep(model, failing)
    return [step["at_ms"] for step in steps[:len(states)]], states, failing


def draw(lines: list[str], title: str) -> bytes:
    """A PNG of the record states over the trace's steps."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot
    from matplotlib.patches import Patch

    times, states, failing = record_states(lines)
    first = max(0, len(states) - STEPS_MAX)
    figure, axes = pyplot.subplots(figsize=(11, 5))
    for column, snapshot in enumerate(states[first:], start=first):
        for offset, (state, owner) in snapshot.items():
            axes.add_patch(pyplot.Rectangle((column, offset), 1, 1, color=COLOURS[state], linewidth=0))
            if owner is not None and (offset - 1 not in snapshot or snapshot[offset - 1][1] != owner):
                axes.text(column + 0.5, offset + 0.5, owner, fontsize=6, ha="center", va="center")
    top = max((max(snapshot, default=0) for snapshot in states), default=0) + 1
    if failing is not None:
        axes.axvline(failing + 0.5, color="red", linewidth=2)
        axes.text(failing + 0.5, top + 0.2, f"step {failing + 1} fails", color="red", ha="center")
    ticks = list(range(first, len(states), max(1, (len(states) - first) // 12)))
    axes.set_xticks([tick + 0.5 for tick in ticks], [f"{tick + 1}\n{times[tick]} ms" for tick in ticks], fontsize=7)
    axes.set_xlim(first, max(len(states), first + 1))
    axes.set_ylim(0, top + 1)
    axes.set_xlabel("step (at_ms)")
    axes.set_ylabel("offset")
    axes.set_title(title, fontsize=9)
    axes.legend(handles=[Patch(color=colour, label=state) for state, colour in COLOURS.items()], loc="upper left",
                fontsize=7)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    pyplot.close(figure)
    return buffer.getvalue()


def write_html(path: Path, table: str, counterexamples: list[tuple[Verdict, Path]]) -> None:
    """A self-contained report: the clause table, then each counterexample's verdict and picture."""
    parts = ["<!doctype html><meta charset='utf-8'><title>kipcheck conform</title>",
             "<style>body{font-family:sans-serif;margin:2em}pre{background:#f4f4f4;padding:1em}</style>",
             "<h1>kipcheck conform</h1><h2>Clauses</h2>", f"<pre>{html.escape(table)}</pre>"]
    parts.append(f"<h2>Counterexamples ({len(counterexamples)})</h2>")
    for verdict, trace in counterexamples:
        parts.append(f"<h3>{html.escape(trace.name)}</h3><p>{html.escape(verdict.summary())}</p>")
        lines = trace.read_text().splitlines()
        if verdict.machine == "share-partition":
            image = base64.b64encode(draw(lines, f"{trace.name}: {verdict.clause}")).decode()
            parts.append(f"<img alt='record states over time' src='data:image/png;base64,{image}'>")
        parts.append(f"<details><summary>the trace ({len(lines) - 1} steps)</summary>"
                     f"<pre>{html.escape(chr(10).join(lines))}</pre></details>")
    path.write_text("\n".join(parts))
