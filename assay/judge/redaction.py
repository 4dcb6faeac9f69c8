"""Redaction before any judge or embedding call: configured kinds become placeholders.

Every text Assay sends to a model — a case's input and reference answer and a candidate output
in a judge prompt, or a response sent for an embedding — first goes through a `Redactor`, which
replaces what its settings name with `[REDACTED:<kind>]`:

- `email` — addresses (`local@domain.tld`), matched with RE2;
- `phone` — numbers found by `phonenumbers`' matcher (libphonenumber's rules; international
  `+…` numbers anywhere, national numbers for `PHONE_REGION`);
- `credit_card` — 13–19 digit runs (spaces or dashes allowed) that pass the Luhn check;
- `secret` — API keys, tokens and private keys found by `detect-secrets`' regex detector plugins
  (AWS, GitHub, GitLab, Slack, Stripe, OpenAI, JWT, …, every plugin the installed version ships
  except the public-IP one) and its keyword rules (`password = "…"`); a private key's whole
  `BEGIN … END` block goes;
- custom RE2 patterns (`[REDACTED:custom]`).

Why placeholders, not deletion: the judge still sees that something was there (an answer that
quotes the customer's email is different from one that does not). Why the settings are part of
the prompt version (`RedactionSettings.prompt_version`): what the judge reads changes with them,
so a judge calibrated under one setting is uncalibrated under another, and cached verdicts are
not reused across settings. Counts per kind are kept (`Redacted.counts`); values never are.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, field_validator

from assay.canonical import content_hash
from assay.errors import InputError
from assay.judge.port import JudgeRequest, PairRequest
from assay.scorers.regex import compile_pattern

Kind = Literal["email", "phone", "credit_card", "secret"]
KINDS: Final[tuple[Kind, ...]] = get_args(Kind)
CUSTOM: Final = "custom"
REDACT_ENV: Final = "ASSAY_JUDGE_REDACT"
"""Comma list of kinds (default: all of them); `none` turns redaction off."""
OFF: Final = "none"
PHONE_REGION: Final = "US"
"""Region for numbers written without a country code (`+…` numbers match in any region)."""

_EMAIL = compile_pattern(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")
_CARD = compile_pattern(r"\b\d(?:[ \-]?\d){12,18}\b")
_KEY_BLOCK = re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----.*?-----END[^-\n]*-----", re.S)


def placeholder(kind: str) -> str:
    """What replaces a redacted span of `kind`."""
    return f"[REDACTED:{kind}]"


class RedactionSettings(BaseModel):
    """Which kinds are redacted, and any custom RE2 patterns (part of the prompt version)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kinds: tuple[Kind, ...] = KINDS
    patterns: tuple[str, ...] = ()

    @field_validator("kinds")
    @classmethod
    def _ordered(cls, kinds: tuple[Kind, ...]) -> tuple[Kind, ...]:
        return tuple(kind for kind in KINDS if kind in kinds)

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            compile_pattern(pattern)
        return patterns

    @classmethod
    def parse(
        cls, kinds: str | Sequence[str] | None, patterns: Sequence[str] = ()
    ) -> RedactionSettings:
        """Settings from a comma list (or list) of kinds; None means the default (all kinds).

        Raises:
            ValueError: An unknown kind (named) or a pattern RE2 cannot compile.
        """
        if kinds is None:
            names: list[str] = list(KINDS)
        else:
            raw = kinds.split(",") if isinstance(kinds, str) else list(kinds)
            names = [name.strip().lower() for name in raw if name.strip()]
            if names == [OFF]:
                names = []
        for pattern in patterns:
            compile_pattern(pattern)  # a plain ValueError naming the RE2 problem
        unknown = sorted(set(names) - set(KINDS))
        if unknown:
            raise ValueError(
                f"unknown redaction kind {', '.join(unknown)} (use {', '.join(KINDS)} or {OFF})"
            )
        return cls.model_validate({"kinds": tuple(names), "patterns": tuple(patterns)})

    @classmethod
    def configured(
        cls,
        kinds: Sequence[str] | None = None,
        patterns: Sequence[str] = (),
        *,
        source: str = REDACT_ENV,
        environ: Mapping[str, str] | None = None,
    ) -> RedactionSettings:
        """Settings from a JudgeSettings block's `redact` / `redact_patterns`; where it sets no
        kinds (or there is no block), `ASSAY_JUDGE_REDACT` (comma list, `none` for off), else
        every kind.

        Raises:
            InputError: An unknown kind or a bad pattern, naming `source` and the field.
        """
        env = os.environ if environ is None else environ
        try:
            if kinds is None:
                return cls.parse(env.get(REDACT_ENV, "").strip() or None, patterns)
            return cls.parse(kinds, patterns)
        except ValueError as exc:
            raise InputError(source, str(exc), field="redact") from None

    @property
    def active(self) -> bool:
        """Whether anything is redacted at all."""
        return bool(self.kinds or self.patterns)

    @property
    def version(self) -> str:
        """`redact@<hash of the settings>`, or empty when redaction is off."""
        if not self.active:
            return ""
        digest = content_hash(self.model_dump(mode="json")).removeprefix("sha256:")
        return f"redact@{digest[:8]}"

    def prompt_version(self, prompt_version: str) -> str:
        """The version recorded with verdicts: the template's, plus these settings when on."""
        return f"{prompt_version}+{self.version}" if self.active else prompt_version


NO_REDACTION: Final = RedactionSettings(kinds=())


@dataclass(frozen=True, slots=True)
class Redacted:
    """A text with its spans replaced, and how many of each kind were replaced."""

    text: str
    counts: dict[str, int]


def _luhn(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


@dataclass(frozen=True)
class _SecretRules:
    """detect-secrets' detectors: the regex detectors' patterns (the whole match goes) and the
    keyword rules as (pattern, group holding the secret).

    The keyword rules (`password = "…"`) are slow patterns that can only match on a line that
    names a keyword, so, as detect-secrets itself does, they run line by line, and only on lines
    where `keyword_gate` (the keywords alone, in RE2) finds one.
    """

    detectors: list[re.Pattern[str]]
    keyword_rules: list[tuple[re.Pattern[str], int]]
    keyword_gate: Any


def _secret_rules() -> _SecretRules:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins import keyword
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.ip_public import IPPublicDetector

    detectors: list[re.Pattern[str]] = []
    for plugin in get_mapping_from_secret_type_to_class().values():
        if issubclass(plugin, RegexBasedDetector) and plugin is not IPPublicDetector:
            denylist: Any = getattr(plugin, "denylist")  # noqa: B009 - untyped class attribute
            detectors.extend(denylist)
    rules = {
        **keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP,
        **keyword.CONFIG_DENYLIST_REGEX_TO_GROUP,
    }
    gate = compile_pattern("|".join(keyword.DENYLIST), "i")
    return _SecretRules(detectors, list(rules.items()), gate)


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """(offset, line) for every line of `text`."""
    at = 0
    for line in text.splitlines(keepends=True):
        yield at, line
        at += len(line)


class Redactor:
    """Applies one `RedactionSettings` to texts and judge requests (stateless; thread-safe)."""

    def __init__(self, settings: RedactionSettings) -> None:
        self.settings = settings
        self._custom = [compile_pattern(pattern) for pattern in settings.patterns]

    @cached_property
    def _secrets(self) -> _SecretRules:
        return _secret_rules()

    def _spans(self, text: str) -> Iterator[tuple[int, int, str]]:
        kinds = self.settings.kinds
        if "secret" in kinds:
            for block in _KEY_BLOCK.finditer(text):
                yield block.start(), block.end(), "secret"
            rules = self._secrets
            for pattern in rules.detectors:
                for match in pattern.finditer(text):
                    yield match.start(), match.end(), "secret"
            for offset, line in _lines(text):
                if rules.keyword_gate.search(line) is None:
                    continue
                for pattern, group in rules.keyword_rules:
                    for match in pattern.finditer(line):
                        if match.group(group):
                            start, end = match.span(group)
                            yield offset + start, offset + end, "secret"
        if "credit_card" in kinds:
            for match in _CARD.finditer(text):
                digits = re.sub(r"\D", "", match.group(0))
                if 13 <= len(digits) <= 19 and _luhn(digits):
                    yield match.start(), match.end(), "credit_card"
        if "email" in kinds:
            for match in _EMAIL.finditer(text):
                yield match.start(), match.end(), "email"
        if "phone" in kinds:
            import phonenumbers  # libphonenumber's metadata: loaded by the first phone redaction

            for number in phonenumbers.PhoneNumberMatcher(text, PHONE_REGION):
                yield number.start, number.end, "phone"
        for custom in self._custom:
            for match in custom.finditer(text):
                if match.end() > match.start():
                    yield match.start(), match.end(), CUSTOM

    def redact(self, text: str) -> Redacted:
        """`text` with every configured span replaced; overlapping spans: the earliest, longest."""
        if not self.settings.active or not text:
            return Redacted(text, {})
        spans = sorted(self._spans(text), key=lambda span: (span[0], -span[1]))
        parts: list[str] = []
        counts: Counter[str] = Counter()
        at = 0
        for start, end, kind in spans:
            if start < at:
                continue  # inside a span already replaced
            parts += [text[at:start], placeholder(kind)]
            counts[kind] += 1
            at = end
        parts.append(text[at:])
        return Redacted("".join(parts), dict(counts))

    def _fields(self, **texts: str | None) -> tuple[dict[str, Any], dict[str, int]]:
        redacted: dict[str, Any] = {}
        counts: Counter[str] = Counter()
        for name, text in texts.items():
            if text is None:
                redacted[name] = None
                continue
            done = self.redact(text)
            redacted[name] = done.text
            counts.update(done.counts)
        return redacted, dict(counts)

    def request(self, request: JudgeRequest) -> tuple[JudgeRequest, dict[str, int]]:
        """The request with its input, reference answer and output redacted, and the counts."""
        if not self.settings.active:
            return request, {}
        fields, counts = self._fields(
            input=request.input, expected=request.expected, output=request.output
        )
        return request.model_copy(update=fields), counts

    def pair(self, request: PairRequest) -> tuple[PairRequest, dict[str, int]]:
        """The pair with its input, reference answer and both outputs redacted, and the counts."""
        if not self.settings.active:
            return request, {}
        fields, counts = self._fields(
            input=request.input,
            expected=request.expected,
            first=request.first,
            second=request.second,
        )
        return request.model_copy(update=fields), counts


def add_counts(total: dict[str, int], more: Mapping[str, int]) -> dict[str, int]:
    """`total` with `more` added, kind by kind (a new dict; kinds in a stable order)."""
    merged = Counter(total)
    merged.update(more)
    return dict(sorted(merged.items()))
