"""How much a jury's jurors agree, and how many independent votes they are worth.

- **Krippendorff's alpha** (Krippendorff, *Content Analysis*, 4th ed., 2018, ch. 12): over the
  items (units) at least two jurors answered, `α = 1 − D_o / D_e`, the observed disagreement of
  the values paired within an item against the disagreement expected from all values pooled,
  computed from the coincidence matrix. Nominal (δ = 0 if equal, else 1) for pass/fail
  verdicts; interval (δ = squared difference) for scores. A juror that did not answer an item
  leaves its value missing. Undefined (None) when fewer than two distinct values were given.
- **Effective number of independent votes** (Kish's design effect, *Survey Sampling*, 1965,
  §5.4): `n_eff = k / (1 + (k − 1)·ρ̄)`, with ρ̄ the mean over juror pairs of the Pearson
  correlation of their pass (1) / fail (0) verdicts on the items both answered, floored at 0 —
  k identical jurors are one vote, k uncorrelated jurors are k. A pair whose correlation is
  undefined (a juror that gave every shared item the same verdict) is left out of ρ̄; with none
  left, n_eff is undefined (None). docs/judge-reliability.md says why this definition.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from assay.judge.config import Aggregation
from assay.judge.port import Verdict

Level = Literal["nominal", "interval"]


def krippendorff_alpha(units: Sequence[Sequence[float | None]], level: Level) -> float | None:
    """Krippendorff's alpha of `units` (each item's values, one per juror; None: missing)."""
    pairable = [[v for v in unit if v is not None] for unit in units]
    pairable = [values for values in pairable if len(values) >= 2]
    domain = sorted({v for values in pairable for v in values})
    if len(domain) < 2:
        return None
    where = {value: i for i, value in enumerate(domain)}
    coincidences = np.zeros((len(domain), len(domain)))
    for values in pairable:
        counts = np.zeros(len(domain))
        for value in values:
            counts[where[value]] += 1
        coincidences += (np.outer(counts, counts) - np.diag(counts)) / (len(values) - 1)
    totals = coincidences.sum(axis=1)
    n = float(totals.sum())
    points = np.array(domain, dtype=float)
    if level == "nominal":
        delta = (points[:, None] != points[None, :]).astype(float)
    else:
        delta = (points[:, None] - points[None, :]) ** 2
    observed = float((coincidences * delta).sum())
    expected = float((np.outer(totals, totals) * delta).sum()) / (n - 1)
    return 1.0 - observed / expected


def mean_correlation(votes: Sequence[Sequence[float | None]]) -> float | None:
    """The mean Pearson correlation over juror pairs (`votes`: one row per juror, one value per
    item, None where the juror did not answer), over the items both answered; pairs with an
    undefined correlation are left out (None: none left)."""
    found = []
    for a, b in combinations(votes, 2):
        shared = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
        if len(shared) < 2:
            continue
        x, y = np.array(shared, dtype=float).T
        if x.std() == 0 or y.std() == 0:
            continue
        found.append(float(np.corrcoef(x, y)[0, 1]))
    return sum(found) / len(found) if found else None


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


def jury_agreement(
    by_juror: Sequence[Sequence[Verdict]], aggregation: Aggregation
) -> JuryAgreement:
    """The agreement of a jury's verdicts: `by_juror[j][i]` is juror j's verdict on item i."""
    passes: list[list[float | None]] = [
        [None if v.status == "skipped" else float(v.status == "pass") for v in row]
        for row in by_juror
    ]
    scores: list[list[float | None]] = [
        [None if v.status == "skipped" else v.score for v in row] for row in by_juror
    ]
    units = [list(unit) for unit in zip(*passes, strict=True)]
    correlation = mean_correlation(passes)
    return JuryAgreement(
        aggregation=aggregation,
        jurors=len(by_juror),
        items=sum(1 for unit in units if sum(v is not None for v in unit) >= 2),
        alpha_verdicts=krippendorff_alpha(units, "nominal"),
        alpha_scores=krippendorff_alpha([list(u) for u in zip(*scores, strict=True)], "interval"),
        mean_correlation=correlation,
        effective_votes=effective_votes(len(by_juror), correlation),
    )
