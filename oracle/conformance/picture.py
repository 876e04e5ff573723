"""The HTML report of a conformance run: for each counterexample, what each member did, up to the step that failed.

    write_html(path, table, counterexamples)   # one self-contained file: the clause table, per failing trace a picture

A counterexample of any machine is replayed through its machine's judge (on
the plain model) up to the step that broke a clause (counterexample.py). Its picture,
an inline SVG:

- the lanes: one lane per member (and per log, clock or coordinator that
  acted), steps across, each step a box in the lane of who took it, saying
  what it asked and what it was answered; the failing step in red, and under
  the lanes who did what there, what was observed and what the model allowed;
- for a share-partition, the record states under the lanes, step for step:
  offsets up, one cell per offset coloured by state, the owner named in
  acquired runs. The failing step's column shows the state the step met,
  with the records it acquired or acknowledged outlined in red and named
  after the member that did.

A long trace is drawn from STEPS_MAX steps before its failing step on, and a
wide window as the OFFSETS_MAX offsets around the records of the failing step.
"""

from __future__ import annotations

import html
import textwrap
from pathlib import Path

from kipcheck.oracle.check import Verdict
from kipcheck.oracle.conformance.counterexample import LOGGED, Counterexample, claims, read_counterexample

COLOURS = {"available": "#9ecae1", "acquired": "#fdae6b", "acknowledged": "#74c476", "archiving": "#e7969c",
           "archived": "#bdbdbd", LOGGED: "#eeeeee"}
FAILED = "#d62728"
STEPS_MAX = 30      # steps drawn before the failing one
OFFSETS_MAX = 60    # offsets drawn of a share-partition's window
LABEL_PX, COLUMN_PX, LANE_PX, CELL_PX, LINE_PX = 140, 140, 58, 13, 12
CHARS_PER_BOX, LINES_PER_BOX, CHARS_PER_CAPTION, LEGEND_PX = 21, 4, 150, 130


def _text(x: float, y: float, text: str, size: int = 10, anchor: str = "start", colour: str = "#000",
          weight: str = "normal") -> str:
    return (f"<text x='{x:.0f}' y='{y:.0f}' font-size='{size}' text-anchor='{anchor}' fill='{colour}' "
            f"font-weight='{weight}'>{html.escape(text)}</text>")


def _clipped(text: str, chars: int = CHARS_PER_BOX) -> str:
    return text if len(text) <= chars else text[:chars - 1] + "…"


def _wrapped(text: str, chars: int, lines_max: int) -> list[str]:
    """`text` in lines of at most `chars`, at most `lines_max` of them (the last cut short with … if need be)."""
    lines = textwrap.wrap(text, chars, break_on_hyphens=False) or [""]
    if len(lines) > lines_max:
        lines = lines[:lines_max - 1] + [_clipped(" ".join(lines[lines_max - 1:]), chars)]
    return lines


def _box_lines(asked: str, answered: str) -> list[str]:
    """What a step's box says: what it asked, then what it was answered, within LINES_PER_BOX lines."""
    answer = _wrapped(answered, CHARS_PER_BOX, LINES_PER_BOX // 2) if answered else []
    return _wrapped(asked, CHARS_PER_BOX, LINES_PER_BOX - len(answer)) + answer


def _lanes(example: Counterexample, top: float) -> tuple[list[str], float]:
    """The lanes part of the SVG (a header row of step numbers, then one lane per actor); its height."""
    parts, actors = [], example.actors()
    for column, step in enumerate(example.steps):
        x = LABEL_PX + column * COLUMN_PX
        parts.append(_text(x + 4, top + 12, f"step {step.number} · {step.at_ms} ms", 9, colour="#555"))
    for row, actor in enumerate(actors):
        y = top + 20 + row * LANE_PX
        parts.append(f"<rect x='0' y='{y:.0f}' width='{LABEL_PX + len(example.steps) * COLUMN_PX}' "
                     f"height='{LANE_PX}' fill='{'#f7f7f7' if row % 2 else '#ffffff'}'/>")
        parts.append(_text(6, y + LANE_PX / 2 + 4, _clipped(actor, 19), 11, weight="bold"))
    for column, step in enumerate(example.steps):
        failing = example.failing is not None and column == len(example.steps) - 1
        for actor, asked, answered in example.entries(step):
            x, y = LABEL_PX + column * COLUMN_PX + 3, top + 20 + actors.index(actor) * LANE_PX + 3
            parts.append(f"<g><title>{html.escape(f'{actor}: {asked} {answered}'.strip())}</title>"
                         f"<rect x='{x:.0f}' y='{y:.0f}' width='{COLUMN_PX - 6}' height='{LANE_PX - 6}' rx='4' "
                         f"fill='{'#fde0dd' if failing else '#e8eef7'}' stroke='{FAILED if failing else '#8da0cb'}' "
                         f"stroke-width='{2 if failing else 1}'/>"
                         + "".join(_text(x + 4, y + 13 + index * LINE_PX, line)
                                   for index, line in enumerate(_box_lines(asked, answered)))
                         + "</g>")
    return parts, 20 + len(actors) * LANE_PX


def _caption(example: Counterexample, top: float) -> tuple[list[str], float]:
    """What the failing step did, what was observed and what the model allowed, in words under the lanes."""
    lines = [wrapped for line in example.failure_lines() for wrapped in _wrapped(line, CHARS_PER_CAPTION, 3)]
    parts = [_text(6, top + 16 + index * 15, line, 11, colour=FAILED if index == 0 else "#000",
                   weight="bold" if index == 0 else "normal") for index, line in enumerate(lines)]
    return parts, 10 + len(lines) * 15


def _offsets(example: Counterexample) -> list[int]:
    """The offsets the record grid shows: the window's over the drawn steps, at most OFFSETS_MAX of them, around
    the records of the failing step."""
    seen = sorted({offset for states in example.records for offset in states} | set(example.failing_claims()))
    if len(seen) <= OFFSETS_MAX:
        return seen
    claimed = [offset for offset in example.failing_claims() if offset in seen]
    middle = seen.index(claimed[0]) if claimed else 0
    start = max(0, min(middle - OFFSETS_MAX // 2, len(seen) - OFFSETS_MAX))
    return seen[start:start + OFFSETS_MAX]


def _records(example: Counterexample, top: float) -> tuple[list[str], float]:
    """The record-state grid of a share-partition: one row per offset, highest on top, one column per step."""
    offsets = _offsets(example)
    if not offsets:
        return [], 0
    parts = [_text(6, top + 12, "record states after each step (at the failing step: the states it met)", 11,
                   weight="bold")]
    height = len(offsets) * CELL_PX
    row_of = {offset: index for index, offset in enumerate(reversed(offsets))}
    base = top + 20
    for offset, row in row_of.items():
        parts.append(_text(LABEL_PX - 6, base + row * CELL_PX + 10, str(offset), 9, "end", "#555"))
    for column, states in enumerate(example.records):
        x = LABEL_PX + column * COLUMN_PX
        for offset, (state, owner) in states.items():
            if offset in row_of:
                y = base + row_of[offset] * CELL_PX
                parts.append(f"<rect x='{x}' y='{y}' width='{COLUMN_PX}' height='{CELL_PX}' fill='{COLOURS[state]}' "
                             f"stroke='#fff' stroke-width='0.5'/>")
                if owner is not None and (offset + 1 not in row_of or states.get(offset + 1, ("", None))[1] != owner):
                    parts.append(_text(x + 4, y + 10, _clipped(owner), 9))   # named once, at a run's top drawn offset
    parts += _claimed(example, row_of, base)
    legend_y = base + height + 14
    for index, (state, colour) in enumerate([*COLOURS.items(), ("failing step's records", None)]):
        x = LABEL_PX + index * LEGEND_PX
        parts.append(f"<rect x='{x}' y='{legend_y - 9}' width='10' height='10' fill='{colour or 'none'}' "
                     f"stroke='{FAILED if colour is None else 'none'}' stroke-width='2'/>")
        parts.append(_text(x + 14, legend_y, state, 9))
    return parts, 20 + height + 22


def _claimed(example: Counterexample, row_of: dict[int, int], base: float) -> list[str]:
    """The failing step's records outlined in red, each run named after the member and what it did to them."""
    parts = []
    x = LABEL_PX + (len(example.steps) - 1) * COLUMN_PX
    for first, last, label in claims(example.failing_step()) if example.failing is not None else []:
        rows = [row for offset, row in row_of.items() if first <= offset <= last]
        if rows:
            y, height = base + min(rows) * CELL_PX, (max(rows) - min(rows) + 1) * CELL_PX
            parts.append(f"<rect x='{x + 1}' y='{y + 1}' width='{COLUMN_PX - 2}' height='{height - 2}' fill='none' "
                         f"stroke='{FAILED}' stroke-width='2'/>")
            parts.append(_text(x + COLUMN_PX - 4, y + 10, _clipped(label, 24), 9, "end", FAILED, "bold"))
    return parts


def picture(example: Counterexample, title: str) -> str:
    """An SVG of a counterexample: its lanes, what failed, and a share-partition's records."""
    parts = [_text(6, 16, title, 12, weight="bold")]
    if example.skipped:
        parts.append(_text(6, 30, f"(the {example.skipped} steps before step {example.steps[0].number} are not drawn)",
                           9, colour="#555"))
    height = 36.0
    for draw in (_lanes, _caption, _records) if example.machine == "share-partition" else (_lanes, _caption):
        drawn, drawn_height = draw(example, height)
        parts += drawn
        height += drawn_height
    legend_px = LABEL_PX + (len(COLOURS) + 1) * LEGEND_PX if example.machine == "share-partition" else 0
    caption_px = 7 * min(CHARS_PER_CAPTION, max(map(len, example.failure_lines()), default=0))
    width = max(LABEL_PX + len(example.steps) * COLUMN_PX, legend_px, caption_px) + 10
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{height + 10:.0f}' "
            f"font-family='monospace' role='img' aria-label='{html.escape(title, quote=True)}'>"
            + "".join(parts) + "</svg>")


def write_html(path: Path, table: str, counterexamples: list[tuple[Verdict, Path]]) -> None:
    """A self-contained report: the clause table, then each counterexample's verdict and picture."""
    parts = ["<!doctype html><meta charset='utf-8'><title>kipcheck conform</title>",
             "<style>body{font-family:sans-serif;margin:2em}pre{background:#f4f4f4;padding:1em}"
             "figure{overflow-x:auto;margin:1em 0}</style>",
             "<h1>kipcheck conform</h1><h2>Clauses</h2>", f"<pre>{html.escape(table)}</pre>"]
    parts.append(f"<h2>Counterexamples ({len(counterexamples)})</h2>")
    for verdict, trace in counterexamples:
        parts.append(f"<h3>{html.escape(trace.name)}</h3><p>{html.escape(verdict.summary())}</p>")
        lines = trace.read_text().splitlines()
        example = read_counterexample(lines, STEPS_MAX)
        parts += [f"<p><b>{html.escape(line)}</b></p>" for line in example.failure_lines()[:1]]
        parts.append(f"<figure>{picture(example, f'{trace.name}: {verdict.clause}')}</figure>")
        parts.append(f"<details><summary>the trace ({len(lines) - 1} steps)</summary>"
                     f"<pre>{html.escape(chr(10).join(lines))}</pre></details>")
    path.write_text("\n".join(parts))
