"""Text scorers: exact, contains, not_contains."""

from __future__ import annotations

from assay.scorers._registry import PASS, Outcome, Scorer, ScorerConfig, fail, quote, scorer


class ExactConfig(ScorerConfig):
    """`exact`: the whole output equals `value`."""

    value: str
    strip: bool = True
    case_sensitive: bool = True


class ContainsConfig(ScorerConfig):
    """`contains` / `not_contains`: `value` occurs (or not) anywhere in the output."""

    value: str
    case_sensitive: bool = True


@scorer("exact", ExactConfig, shorthand="value")
def exact(config: ExactConfig) -> Scorer:
    """Pass when the output equals the value (optionally stripped and case-folded)."""
    expected = config.value.strip() if config.strip else config.value
    if not config.case_sensitive:
        expected = expected.casefold()

    def check(output: str) -> Outcome:
        text = output.strip() if config.strip else output
        if not config.case_sensitive:
            text = text.casefold()
        return PASS if text == expected else fail("differs")

    suffix = "" if config.case_sensitive else " (any case)"
    return Scorer("exact", f"exact {quote(config.value)}{suffix}", check)


def _substring_check(config: ContainsConfig, *, wanted: bool, reason: str) -> Scorer:
    needle = config.value if config.case_sensitive else config.value.casefold()
    fold = not config.case_sensitive

    def check(output: str) -> Outcome:
        found = needle in (output.casefold() if fold else output)
        return PASS if found is wanted else fail(reason)

    name = "contains" if wanted else "not_contains"
    suffix = "" if config.case_sensitive else " (any case)"
    return Scorer(name, f"{name} {quote(config.value)}{suffix}", check)


@scorer("contains", ContainsConfig, shorthand="value")
def contains(config: ContainsConfig) -> Scorer:
    """Pass when the value occurs in the output."""
    return _substring_check(config, wanted=True, reason="missing")


@scorer("not_contains", ContainsConfig, shorthand="value")
def not_contains(config: ContainsConfig) -> Scorer:
    """Pass when the value does not occur in the output."""
    return _substring_check(config, wanted=False, reason="present")
