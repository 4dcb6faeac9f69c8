"""Charts as inline SVG, drawn by matplotlib: no JavaScript, no network, prints as vectors.

matplotlib is imported inside `_figure` only (it costs ~0.3 s), so nothing that merely imports
this package — `assay --help`, the flows — pays for it until a chart is drawn. Text stays text
(`svg.fonttype: none`): a screen reader and a search find the labels, and the file stays small.
Colours are the Okabe–Ito palette (distinguishable with every common colour-vision deficiency),
and every bar or point carries its figures as a text label, so no reading depends on colour.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from assay.stats import Interval, wilson

if TYPE_CHECKING:
    from matplotlib.axes import Axes

BLUE = "#0072B2"
ORANGE = "#E69F00"
VERMILION = "#D55E00"
GREEN = "#009E73"
SKY = "#56B4E9"
PURPLE = "#CC79A7"
GREY = "#666666"
SERIES = (BLUE, ORANGE, GREEN, PURPLE, SKY, VERMILION)
"""Okabe–Ito, in the order series take them."""

LIBRARIES = ("matplotlib.figure", "matplotlib.backends.backend_svg")
"""What drawing a chart imports (see `assay.preload`)."""

TITLE_INCHES = 0.4
"""Above the axes: the title, and a reference line's name."""
AXIS_INCHES = 0.55
"""Below the axes: tick labels and the axis label."""
WIDTH_INCHES = 9.0
"""At 96 dpi about 860 px: two fit side by side at 1,400 px, one fills a printed A4 page."""
ROW_INCHES = 0.32


@dataclass(frozen=True)
class Estimate:
    """One row of a forest plot: a rate with its 95% interval and the counts behind it."""

    label: str
    rate: float
    lo: float
    hi: float
    text: str
    """What the row says in words, e.g. `41/60 · 0.683 (0.558–0.787)`."""

    @classmethod
    def of(cls, label: str, passed: int, n: int) -> Estimate | None:
        """`passed / n` with its Wilson interval; None when n is 0 (no data, no row)."""
        interval = wilson(passed, n)
        if interval is None:
            return None
        rate = passed / n
        text = f"{passed}/{n} · {rate:.3f} ({interval.lo:.3f}–{interval.hi:.3f})"
        return cls(label, rate, interval.lo, interval.hi, text)


EM = 0.56
"""Width of an average character of the sans-serif font, in ems (DejaVu Sans, measured on
labels and figures; a cut label is wider than the margin by no more than a character)."""
MAX_LABEL_CHARS = 40
"""A row label longer than this is cut (with `…`): the margins are sized from the labels."""


def _inches(chars: int, points: float) -> float:
    return chars * EM * points / 72


@contextmanager
def _figure(
    name: str, height: float, sides: tuple[float, float] | None = None
) -> Iterator[tuple[Any, Axes]]:
    """A figure with one axes. With `sides` (left and right margins in inches, for labels and
    figures written beside the rows) the margins are fixed from the text's length; else
    matplotlib's constrained layout measures every text first — 60% of a chart's time, and most
    of a small run's report."""
    import matplotlib

    matplotlib.use("svg", force=False)
    from matplotlib.figure import Figure

    style: dict[str, Any] = {
        "svg.fonttype": "none",
        "text.parse_math": False,  # a `$` in a label is a dollar, not mathtext
        "svg.hashsalt": name,  # ids are stable and differ between the charts of one page
        "font.family": "sans-serif",
        "font.size": 10,
        "axes.spines.top": False,
        "axes.spines.right": False,
    }
    with matplotlib.rc_context(style):  # type: ignore[arg-type]  # keys are a Literal there
        if sides is None:
            figure = Figure(figsize=(WIDTH_INCHES, height), layout="constrained")
        else:
            figure = Figure(figsize=(WIDTH_INCHES, height))
            left, right = sides
            figure.subplots_adjust(
                left=left / WIDTH_INCHES,
                right=1 - right / WIDTH_INCHES,
                top=1 - TITLE_INCHES / height,
                bottom=AXIS_INCHES / height,
            )
        yield figure, figure.add_subplot()


_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.S)


def _svg(figure: Any, name: str) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    svg = _METADATA.sub("", text[text.index("<svg") :])
    label = html.escape(name, quote=True)
    return svg.replace("<svg ", f'<svg role="img" aria-label="{label}" class="chart" ', 1)


def forest(
    title: str,
    rows: Sequence[Estimate],
    reference: float | None = None,
    axis: str = "pass rate (95% Wilson interval)",
    reference_label: str = "threshold",
) -> str:
    """Rates with their 95% interval bars, one row each, the figures written beside each row.

    `reference` (a threshold or target) is a dashed vertical line; a row whose whole interval
    lies below it is drawn in vermilion and says `below` in its label (colour is never the only
    sign)."""
    labels = [_clipped(row.label) for row in rows]
    notes = [
        row.text + (" · below" if reference is not None and row.hi < reference else "")
        for row in rows
    ]
    sides = (
        _inches(max(map(len, labels), default=0), 10) + 0.2,
        _inches(max(map(len, notes), default=0), 9) + 0.25,
    )
    height = TITLE_INCHES + AXIS_INCHES + ROW_INCHES * len(rows)
    with _figure(title, height, sides) as (figure, axes):
        ys = list(range(len(rows)))[::-1]
        for y, row, note in zip(ys, rows, notes, strict=True):
            below = reference is not None and row.hi < reference
            colour = VERMILION if below else BLUE
            axes.errorbar(
                row.rate, y, xerr=_whiskers([row]), fmt="o", color=colour, ecolor=colour, capsize=3
            )
            axes.annotate(
                note,
                (1.02, y),
                xycoords=("axes fraction", "data"),
                va="center",
                fontsize=9,
                color=colour,
            )
        if reference is not None:
            _mark(axes, reference, f"{reference_label} {reference:g}", GREY)
        axes.set_yticks(ys, labels)
        axes.set_xlim(-0.02, 1.02)
        axes.set_ylim(-0.7, len(rows) - 0.3)
        axes.set_xlabel(axis)
        axes.set_title(title, loc="left", fontsize=11)
        return _svg(figure, title)


def _clipped(label: str) -> str:
    return label if len(label) <= MAX_LABEL_CHARS else label[: MAX_LABEL_CHARS - 1] + "…"


def _mark(axes: Axes, x: float, label: str, colour: str) -> None:
    """A dashed vertical line at `x` (a threshold, a limit), named above the plot."""
    axes.axvline(x, color=colour, linestyle="--", linewidth=1)
    axes.annotate(
        label,
        (x, 1.0),
        xycoords=("data", "axes fraction"),
        fontsize=8,
        color=colour,
        ha="center",
        va="bottom",
    )


def _whole_numbers() -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def _whiskers(rows: Sequence[Estimate]) -> list[list[float]]:
    """Below and above each rate (never negative: a rate of 1 may sit a rounding above `hi`)."""
    return [[max(0.0, r.rate - r.lo) for r in rows], [max(0.0, r.hi - r.rate) for r in rows]]


def _cycle(count: int) -> list[str]:
    return [SERIES[i % len(SERIES)] for i in range(count)]


def bars(title: str, rows: Sequence[Estimate], axis: str) -> str:
    """Vertical bars with interval whiskers and each bar's figures written above it."""
    with _figure(title, 3.2) as (figure, axes):
        xs = list(range(len(rows)))
        colours = _cycle(len(rows))
        axes.bar(
            xs,
            [row.rate for row in rows],
            yerr=_whiskers(rows),
            color=colours,
            capsize=4,
            width=0.55,
        )
        for x, row in zip(xs, rows, strict=True):
            axes.annotate(row.text, (x, min(row.hi + 0.04, 1.08)), ha="center", fontsize=9)
        axes.set_xticks(xs, [row.label for row in rows])
        axes.set_ylim(0, 1.15)
        axes.set_ylabel(axis)
        axes.set_title(title, loc="left", fontsize=11)
        return _svg(figure, title)


def spend(title: str, rows: Sequence[tuple[str, float]], limit: float | None) -> str:
    """Horizontal bars of USD amounts, each labelled; the budget's limit as a dashed line."""
    with _figure(title, 0.9 + 0.4 * len(rows)) as (figure, axes):
        ys = list(range(len(rows)))[::-1]
        values = [value for _, value in rows]
        axes.barh(ys, values, color=_cycle(len(rows)), height=0.5)
        top = max([*values, limit or 0.0, 1e-9])
        for y, value in zip(ys, values, strict=True):
            axes.annotate(f"${value:,.4f}", (value + top * 0.01, y), va="center", fontsize=9)
        if limit is not None:
            _mark(axes, limit, f"limit ${limit:,.2f}", VERMILION)
        axes.set_yticks(ys, [name for name, _ in rows])
        axes.set_xlim(0, top * 1.25)
        axes.set_xlabel("USD")
        axes.set_title(title, loc="left", fontsize=11)
        return _svg(figure, title)


def curves(title: str, series: Sequence[tuple[str, dict[int, float]]], axis: str) -> str:
    """One line per series over k = 1, 2, …, each point labelled with its value."""
    with _figure(title, 3.2) as (figure, axes):
        for (name, points), colour, marker in zip(
            series, _cycle(len(series)), "osD^v", strict=False
        ):
            ks = sorted(points)
            values = [points[k] for k in ks]
            axes.plot(ks, values, marker=marker, color=colour, label=name)
            for k, value in zip(ks, values, strict=True):
                axes.annotate(
                    f"{value:.2f}",
                    (k, value),
                    textcoords="offset points",
                    xytext=(0, 6),
                    ha="center",
                    fontsize=8,
                    color=colour,
                )
        axes.set_ylim(0, 1.1)
        axes.set_xlabel("k (trials)")
        axes.set_ylabel(axis)
        axes.xaxis.set_major_locator(_whole_numbers())
        axes.legend(loc="lower left", frameon=False)
        axes.set_title(title, loc="left", fontsize=11)
        return _svg(figure, title)


CROWDED_POINTS = 12
"""Past this many points, a point's figures are written upright so that they do not overlap."""


def by_index(title: str, rows: Sequence[tuple[int, int, int, Interval | None]], axis: str) -> str:
    """Pass rates over an index (turn 1, 2, …; rows of (index, n, passed, its 95% interval), a
    row without an interval left out): each point with its interval as a whisker, joined in
    order, its figures (`4/6 0.67`) written above it, so a decay over the index shows."""
    drawn = [
        (index, Estimate("", passed / n, interval.lo, interval.hi, ""), passed, n)
        for index, n, passed, interval in rows
        if interval is not None and n
    ]
    upright = len(drawn) > CROWDED_POINTS
    with _figure(title, 3.2) as (figure, axes):
        xs = [index for index, _, _, _ in drawn]
        estimates = [row for _, row, _, _ in drawn]
        line = axes.errorbar(
            xs,
            [row.rate for row in estimates],
            yerr=_whiskers(estimates),
            fmt="-o",
            color=BLUE,
            ecolor=BLUE,
            capsize=3,
        )
        line.lines[0].set_gid("index-points")
        for x, row, passed, n in drawn:
            axes.annotate(
                f"{passed}/{n} {row.rate:.2f}",
                (x, row.hi),
                textcoords="offset points",
                xytext=(0, 4),
                ha="center",
                va="bottom",
                fontsize=8,
                rotation=90 if upright else 0,
                color=BLUE,
            )
        axes.set_ylim(0, 1.3 if upright else 1.12)
        axes.set_xlabel(axis)
        axes.set_ylabel("pass rate (95% interval)")
        axes.xaxis.set_major_locator(_whole_numbers())
        axes.set_title(title, loc="left", fontsize=11)
        return _svg(figure, title)


@dataclass(frozen=True)
class TrendPoint:
    """One run of a trend: its pass rate and interval, and whether it regressed."""

    run: int
    """The run's place on the axis every subject shares, oldest first (1-based)."""
    estimate: Estimate
    regressed: bool


def trend(title: str, series: Sequence[tuple[str, Sequence[TrendPoint]]]) -> str:
    """Pass rate per run for each subject: a line of points, its 95% interval as a shaded band,
    regressed runs ringed in vermilion and labelled. Each subject's points and band are SVG
    groups `trend-points-N` and `trend-band-N` (N: the subject's place in the legend).

    The x axis is run order over every subject (`TrendPoint.run`), whole numbers only and half a
    run of room at each end — one run alone is not drawn on an axis of 0.95–1.05 — and the
    legend sits below the plot, where it hides no point."""
    with _figure(title, 3.8 + 0.25 * ((len(series) + 2) // 3)) as (figure, axes):
        for number, ((name, points), colour) in enumerate(
            zip(series, _cycle(len(series)), strict=True)
        ):
            xs = [p.run for p in points]
            band = axes.fill_between(
                xs,
                [p.estimate.lo for p in points],
                [p.estimate.hi for p in points],
                color=colour,
                alpha=0.18,
                linewidth=0,
            )
            band.set_gid(f"trend-band-{number}")
            axes.errorbar(  # a lone run's interval too, where a band has no width
                xs,
                [p.estimate.rate for p in points],
                yerr=_whiskers([p.estimate for p in points]),
                fmt="none",
                ecolor=colour,
                alpha=0.6,
                capsize=3,
            )
            (line,) = axes.plot(
                xs, [p.estimate.rate for p in points], marker="o", color=colour, label=name
            )
            line.set_gid(f"trend-points-{number}")
            for point in points:
                label = f"{point.estimate.rate:.2f}" + (" regressed" if point.regressed else "")
                axes.annotate(
                    label,
                    (point.run, point.estimate.rate),
                    textcoords="offset points",
                    xytext=(0, 7),
                    ha="center",
                    fontsize=8,
                    color=VERMILION if point.regressed else colour,
                )
            regressed = [p for p in points if p.regressed]
            if regressed:
                axes.scatter(
                    [p.run for p in regressed],
                    [p.estimate.rate for p in regressed],
                    s=140,
                    facecolors="none",
                    edgecolors=VERMILION,
                    linewidths=1.8,
                    zorder=3,
                )
        runs = [point.run for _, points in series for point in points]
        axes.set_ylim(0, 1.1)
        axes.set_xlim(min(runs, default=1) - 0.5, max(runs, default=1) + 0.5)
        axes.set_xlabel("run, oldest first (one order over every subject)")
        axes.set_ylabel("pass rate (95% Wilson band)")
        axes.xaxis.set_major_locator(_whole_numbers())
        figure.legend(loc="outside lower center", ncols=min(len(series), 3), frameon=False)
        axes.set_title(title, loc="left", fontsize=11)
        return _svg(figure, title)
