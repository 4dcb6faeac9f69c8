"""How much a jury's jurors agree, and how many independent votes they are worth.

- **Krippendorff's alpha** (Krippendorff, *Content Analysis*, 4th ed., 2018, ch. 12): over the
  items (units) at least two jurors answered, `α = 1 − D_o / D_e`, the observed disagreement of
  the values paired within an item against the disagreement expected from all values pooled.
  Nominal (δ = 0 if equal, else 1) for pass/fail verdicts; interval (δ = squared difference) for
  scores. A juror that did not answer an item leaves its value missing. Undefined (None) when
  fewer than two distinct values were given.
- **Effective number of independent votes** (Kish's design effect, *Survey Sampling*, 1965,
  §5.4): `n_eff = k / (1 + (k − 1)·ρ̄)`, with ρ̄ the mean over juror pairs of the Pearson
  correlation of their pass (1) / fail (0) verdicts on the items both answered, floored at 0 —
  k identical jurors are one vote, k uncorrelated jurors are k. A pair whose correlation is
  undefined (a juror that gave every shared item the same verdict) is left out of ρ̄; with none
  left, n_eff is undefined (None). docs/judge-reliability.md says why this definition.

Both are computed from sums that add up item by item (`AlphaSums`, `PairSums`, together a
`JuryTally`), so the tallies of a run's chunks merge into the run's figures exactly as if its
whole verdict matrix had been measured at once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from itertools import combinations
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from assay.judge.config import Aggregation
from assay.judge.port import Verdict

Level = Literal["nominal", "interval"]


class AlphaSums(BaseModel):
    """Krippendorff's alpha's sufficient statistics over the pairable values (those of items at
    least two jurors answered), from the coincidence matrix's sums: within item u of m_u values
    the disagreement `Σ_{i≠j} δ(v_i, v_j)` weighs 1 / (m_u − 1); pooled, nominal needs each
    value's count n_c (`D_e ∝ n² − Σ n_c²`), interval the values' sum and sum of squares
    (`D_e ∝ 2(n·Σv² − (Σv)²)`)."""

    level: Level
    values: int = 0
    """n, the pairable values."""
    observed: float = 0.0
    """`Σ_u Σ_{i≠j} δ(v_i, v_j) / (m_u − 1)`: the observed disagreement times n."""
    counts: dict[float, int] = Field(default_factory=dict)
    """Nominal: each value's count."""
    total: float = 0.0
    """Interval: the values' sum."""
    squares: float = 0.0
    """Interval: the values' sum of squares."""
    low: float | None = None
    high: float | None = None

    @classmethod
    def of(cls, units: Iterable[Sequence[float | None]], level: Level) -> AlphaSums:
        """The sums of `units` (each item's values, one per juror; None: missing)."""
        sums = cls(level=level)
        for unit in units:
            sums.add_unit([v for v in unit if v is not None])
        return sums

    def add_unit(self, values: Sequence[float]) -> None:
        """Count one item's answered values (an item fewer than two answered is not pairable)."""
        m = len(values)
        if m < 2:
            return
        within: float
        if self.level == "nominal":
            counts: dict[float, int] = {}
            for value in values:
                counts[value] = counts.get(value, 0) + 1
                self.counts[value] = self.counts.get(value, 0) + 1
            within = m * m - sum(c * c for c in counts.values())
        else:
            total = math.fsum(values)
            squares = math.fsum(v * v for v in values)
            within = 2 * (m * squares - total * total)
            self.total += total
            self.squares += squares
        self.values += m
        self.observed += within / (m - 1)
        low, high = min(values), max(values)
        self.low = low if self.low is None else min(self.low, low)
        self.high = high if self.high is None else max(self.high, high)

    def merge(self, other: AlphaSums) -> None:
        """Add another tally's sums (e.g. another chunk's) into this one."""
        self.values += other.values
        self.observed += other.observed
        for value, count in other.counts.items():
            self.counts[value] = self.counts.get(value, 0) + count
        self.total += other.total
        self.squares += other.squares
        for bound in (other.low, other.high):
            if bound is not None:
                self.low = bound if self.low is None else min(self.low, bound)
                self.high = bound if self.high is None else max(self.high, bound)

    @property
    def alpha(self) -> float | None:
        """Krippendorff's alpha; None with fewer than two distinct values."""
        if self.low is None or self.low == self.high:
            return None
        n = self.values
        pooled: float
        if self.level == "nominal":
            pooled = n * n - sum(c * c for c in self.counts.values())
        else:
            pooled = 2 * (n * self.squares - self.total * self.total)
        return 1.0 - self.observed / (pooled / (n - 1))


def krippendorff_alpha(units: Sequence[Sequence[float | None]], level: Level) -> float | None:
    """Krippendorff's alpha of `units` (each item's values, one per juror; None: missing)."""
    return AlphaSums.of(units, level).alpha


class PairSums(BaseModel):
    """One juror pair's Pearson correlation's sufficient statistics over the items both
    answered: n, Σx, Σy, Σx², Σy², Σxy."""

    n: int = 0
    x: float = 0.0
    y: float = 0.0
    xx: float = 0.0
    yy: float = 0.0
    xy: float = 0.0

    @classmethod
    def of(cls, a: Sequence[float | None], b: Sequence[float | None]) -> PairSums:
        """The sums of two jurors' values on the same items (None: not answered)."""
        sums = cls()
        for x, y in zip(a, b, strict=True):
            if x is not None and y is not None:
                sums.n += 1
                sums.x += x
                sums.y += y
                sums.xx += x * x
                sums.yy += y * y
                sums.xy += x * y
        return sums

    def merge(self, other: PairSums) -> None:
        """Add another tally's sums into this one."""
        for name in type(self).model_fields:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def correlation(self) -> float | None:
        """Pearson's r; None under two shared items or when either juror never varied."""
        spread_x = self.n * self.xx - self.x * self.x
        spread_y = self.n * self.yy - self.y * self.y
        if self.n < 2 or spread_x <= 0 or spread_y <= 0:
            return None
        return (self.n * self.xy - self.x * self.y) / math.sqrt(spread_x * spread_y)


def _mean_correlation(pairs: Iterable[PairSums]) -> float | None:
    found = [r for r in (pair.correlation for pair in pairs) if r is not None]
    return sum(found) / len(found) if found else None


def mean_correlation(votes: Sequence[Sequence[float | None]]) -> float | None:
    """The mean Pearson correlation over juror pairs (`votes`: one row per juror, one value per
    item, None where the juror did not answer), over the items both answered; pairs with an
    undefined correlation are left out (None: none left)."""
    return _mean_correlation(PairSums.of(a, b) for a, b in combinations(votes, 2))


def effective_votes(jurors: int, correlation: float | None) -> float | None:
    """Kish's effective number of independent votes of `jurors` with mean pairwise
    correlation `correlation` (floored at 0, so never more than `jurors`)."""
    if correlation is None:
        return None
    return jurors / (1 + (jurors - 1) * max(correlation, 0.0))


class JuryAgreement(BaseModel):
    """A jury's agreement on the items it judged (figures only, no text).

    Attributes:
        jurors: k, the jury's size.
        items: Items at least two jurors answered (alpha's n).
        alpha_verdicts: Krippendorff's alpha, nominal, over pass/fail verdicts.
        alpha_scores: Krippendorff's alpha, interval, over scores.
        mean_correlation: ρ̄, the jurors' mean pairwise correlation of verdicts.
        effective_votes: Kish's n_eff = k / (1 + (k − 1)·max(ρ̄, 0)).
    """

    model_config = ConfigDict(frozen=True)

    aggregation: Aggregation
    jurors: int
    items: int
    alpha_verdicts: float | None
    alpha_scores: float | None
    mean_correlation: float | None
    effective_votes: float | None


class JuryTally(BaseModel):
    """What a jury's agreement is computed from (sums only, no text): the tallies of a run's
    chunks merge (`merge`) into the run's, which gives the figures of its whole verdict matrix."""

    aggregation: Aggregation
    jurors: int
    items: int = 0
    """Items at least two jurors answered."""
    verdicts: AlphaSums = Field(default_factory=lambda: AlphaSums(level="nominal"))
    """Pass (1) / fail (0) verdicts."""
    scores: AlphaSums = Field(default_factory=lambda: AlphaSums(level="interval"))
    pairs: list[PairSums]
    """Per juror pair, in `itertools.combinations` order, over their verdicts."""

    @classmethod
    def of(cls, by_juror: Sequence[Sequence[Verdict]], aggregation: Aggregation) -> JuryTally:
        """The tally of a jury's verdicts: `by_juror[j][i]` is juror j's verdict on item i."""
        passes: list[list[float | None]] = [
            [None if v.status == "skipped" else float(v.status == "pass") for v in row]
            for row in by_juror
        ]
        scores: list[list[float | None]] = [
            [None if v.status == "skipped" else v.score for v in row] for row in by_juror
        ]
        units = [list(unit) for unit in zip(*passes, strict=True)]
        return cls(
            aggregation=aggregation,
            jurors=len(by_juror),
            items=sum(1 for unit in units if sum(v is not None for v in unit) >= 2),
            verdicts=AlphaSums.of(units, "nominal"),
            scores=AlphaSums.of(zip(*scores, strict=True), "interval"),
            pairs=[PairSums.of(a, b) for a, b in combinations(passes, 2)],
        )

    def merge(self, other: JuryTally) -> None:
        """Add another tally of the same jury (e.g. another chunk's) into this one."""
        if (other.aggregation, other.jurors) != (self.aggregation, self.jurors):
            raise ValueError(
                f"cannot merge the tally of a {other.aggregation} jury of {other.jurors} into "
                f"a {self.aggregation} jury of {self.jurors}"
            )
        self.items += other.items
        self.verdicts.merge(other.verdicts)
        self.scores.merge(other.scores)
        for ours, theirs in zip(self.pairs, other.pairs, strict=True):
            ours.merge(theirs)

    def agreement(self) -> JuryAgreement:
        """The jury's agreement over everything tallied."""
        correlation = _mean_correlation(self.pairs)
        return JuryAgreement(
            aggregation=self.aggregation,
            jurors=self.jurors,
            items=self.items,
            alpha_verdicts=self.verdicts.alpha,
            alpha_scores=self.scores.alpha,
            mean_correlation=correlation,
            effective_votes=effective_votes(self.jurors, correlation),
        )


def jury_agreement(
    by_juror: Sequence[Sequence[Verdict]], aggregation: Aggregation
) -> JuryAgreement:
    """The agreement of a jury's verdicts: `by_juror[j][i]` is juror j's verdict on item i."""
    return JuryTally.of(by_juror, aggregation).agreement()
