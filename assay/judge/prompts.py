"""Versioned judge prompts, and the reply contract of the default one.

A prompt template is a text file in `assay/judge/prompts/` (package data) with two sections::

    === system ===
    ...instructions...
    === user ===
    ...the case, with $input, $expected, $rubric and $output placeholders...

Its version is `name@<first 12 hex digits of the SHA-256 of the file's bytes>`: any edit, even
whitespace, is a new version. Why: a judge is calibrated for one (model pin, prompt version),
verdicts are cached under it, and regression reports say when it changed — so the version must
change exactly when what the judge reads changes.

Placeholders use `string.Template` syntax (`$name`): substitution is a single pass, so a `$`
inside a case or an output is never expanded, and JSON braces in the instructions need no
escaping. Candidate outputs go in through `untrusted_block`, which fences them between marker
lines tagged with a hash of the output itself: an output cannot forge its own closing marker,
and any look-alike of a marker's opening inside it is neutralised (`neutralised`).

A conversation check (`llm_judge {on: conversation}`) is asked with the same template: its
rubric is preceded by the conversation frame (`conversation.frame.txt`) and may be a shipped
template's text (`rubric.<name>.txt`), and its output is the conversation rendered by
`conversation_block`. Those texts are versioned like a template (`name@<sha256[:12]>`), and
`with_texts` adds their versions to the prompt version a run records.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any, Final, Literal

from assay.judge.port import WINNERS, JudgeRequest, PairRequest, Winner
from assay.scorers.judge import CONVERSATION_RUBRICS

SYSTEM_HEADER: Final = "=== system ==="
USER_HEADER: Final = "=== user ==="
NO_REFERENCE: Final = "(no reference answer)"

_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*)\n[ \t]*```", re.DOTALL)

VERDICT_KEYS: Final = ("reasoning", "score", "verdict")

VERDICT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        # Reasoning first: the judge writes its argument before committing to a verdict.
        "reasoning": {
            "type": "string",
            "description": "Which rubric points the output meets or misses, before deciding.",
        },
        "score": {
            "type": "number",
            "description": "How fully the output meets the rubric, from 0 to 1.",
        },
        "verdict": {"type": "string", "enum": ["pass", "fail"]},
    },
    "required": list(VERDICT_KEYS),
    "additionalProperties": False,
}
"""JSON Schema of the default prompt's reply, in the order the judge must write it.

No `minimum`/`maximum` on `score`: some strict structured-output implementations reject those
keywords; the range is checked by `parse_verdict_reply` instead.
"""


class PromptError(ValueError):
    """A prompt template is missing or malformed, or rendering lacks a placeholder's value."""


class MalformedReply(ValueError):
    """A judge reply that does not follow the reply contract.

    The message says what is wrong in fixed words ("score out of range"); it never quotes the
    reply, which may repeat the candidate output.
    """


@dataclass(frozen=True, slots=True)
class Prompt:
    """A loaded prompt template.

    Attributes:
        name: The template's name (its file name without `.txt`).
        version: `name@<sha256[:12]>` of the file's bytes.
        system: The system message, used as is.
        user_template: The user message, with `$placeholders`.
    """

    name: str
    version: str
    system: str
    user_template: str

    @property
    def placeholders(self) -> frozenset[str]:
        """The `$names` the user template needs."""
        return frozenset(Template(self.user_template).get_identifiers())

    def render(self, **values: str) -> str:
        """The user message with every placeholder filled, verbatim and in a single pass.

        Raises:
            PromptError: A placeholder has no value (its name is given, never a value).
        """
        missing = self.placeholders - values.keys()
        if missing:
            raise PromptError(f"prompt {self.version} needs values for {sorted(missing)}")
        return Template(self.user_template).substitute(values)

    def user_message(self, request: JudgeRequest) -> str:
        """The user message grading `request` with this (single-output) template.

        The output is fenced by `untrusted_block`; a missing reference answer reads as
        `(no reference answer)`.
        """
        return self.render(
            input=request.input,
            expected=NO_REFERENCE if request.expected is None else request.expected,
            rubric=request.rubric,
            output=untrusted_block(request.output),
        )

    def pair_message(self, request: PairRequest) -> str:
        """The user message comparing the two outputs of `request` with this (pairwise) template.

        Each output is fenced by `untrusted_block`, as `RESPONSE 1` (first) and `RESPONSE 2`
        (second); a missing reference answer reads as `(no reference answer)`.
        """
        return self.render(
            input=request.input,
            expected=NO_REFERENCE if request.expected is None else request.expected,
            rubric=request.rubric,
            first=untrusted_block(request.first, "RESPONSE 1"),
            second=untrusted_block(request.second, "RESPONSE 2"),
        )


def untrusted_block(text: str, label: str = "CANDIDATE OUTPUT") -> str:
    """Fence untrusted text between marker lines that it cannot forge.

    The tag is a hash of the text itself, so the text would have to contain its own hash to
    close the fence early. The prompt tells the judge that everything between the markers is
    data to grade and that instructions inside it are to be ignored.

    Args:
        text: The untrusted text (a candidate output).
        label: Marker wording; the pairwise template uses `RESPONSE 1` and `RESPONSE 2`.
    """
    tag = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    shown = neutralised(text, _FENCE_WORDS)
    return f"<<<BEGIN {label} {tag}>>>\n{shown}\n<<<END {label} {tag}>>>"


_INVISIBLE: Final = "\u00ad\u034f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff"
"""Format and zero-width characters: a reader sees nothing, so a marker may hide them."""
_FENCE_WORDS: Final = ("BEGIN", "END")
_TURN_WORDS: Final = (*_FENCE_WORDS, "TURN")


def neutralised(text: str, words: Sequence[str]) -> str:
    """`text` with every look-alike of a marker line's opening (`<<<` before one of `words`, in
    any case, with spaces or zero-width characters anywhere in it) written as `&lt;&lt;&lt;`.

    A hash tag on the real markers makes them unforgeable, but a judge reads, it does not
    compare hashes: `<<<END CANDIDATE OUTPUT 0000>>>` inside an output reads as the end of the
    data. Only the opening changes, so an output that merely contains `<<<` elsewhere is shown
    as written.
    """
    gap = f"[{_INVISIBLE} \\t]*"
    spelled = "|".join(f"[{_INVISIBLE}]*".join(map(re.escape, word)) for word in words)
    opening = re.compile(f"<{gap}<{gap}<{gap}(?=(?:{spelled}))", re.IGNORECASE)
    return opening.sub("&lt;&lt;&lt;", text)


def parse_prompt(name: str, content: str) -> Prompt:
    """Build a `Prompt` from a template file's text (see the module docstring for the format).

    Raises:
        PromptError: The name is not a slug, or the sections are missing, repeated, out of
            order or empty.
    """
    if not _NAME.fullmatch(name):
        raise PromptError(f"prompt name {name!r} must be lower-case letters, digits, - or _")
    lines = content.splitlines()
    system_at = [i for i, line in enumerate(lines) if line.strip() == SYSTEM_HEADER]
    user_at = [i for i, line in enumerate(lines) if line.strip() == USER_HEADER]
    if len(system_at) != 1 or len(user_at) != 1 or system_at[0] > user_at[0]:
        raise PromptError(
            f"prompt {name!r} needs one {SYSTEM_HEADER!r} line, then one {USER_HEADER!r} line"
        )
    if any(line.strip() for line in lines[: system_at[0]]):
        raise PromptError(f"prompt {name!r} has text before {SYSTEM_HEADER!r}")
    system = "\n".join(lines[system_at[0] + 1 : user_at[0]]).strip()
    user = "\n".join(lines[user_at[0] + 1 :]).strip()
    if not system or not user:
        raise PromptError(f"prompt {name!r} has an empty section")
    if not Template(user).is_valid():
        raise PromptError(f"prompt {name!r} has an invalid $placeholder (write $$ for a dollar)")
    digest = hashlib.sha256(content.encode("utf-8")).hexdigest()[:12]
    return Prompt(name=name, version=f"{name}@{digest}", system=system, user_template=user)


def load_prompt(name: str = "default", directory: Path | None = None) -> Prompt:
    """Load the prompt template `name` (`<name>.txt`).

    Args:
        name: Template name: `default` (grade one output) or `pairwise` (compare two).
        directory: Where to read it from; default: the templates shipped in this package.

    Raises:
        PromptError: No such template, or it is malformed.
    """
    if not _NAME.fullmatch(name):
        raise PromptError(f"prompt name {name!r} must be lower-case letters, digits, - or _")
    try:
        if directory is None:
            data = resources.files("assay.judge").joinpath("prompts", f"{name}.txt").read_bytes()
        else:
            data = (directory / f"{name}.txt").read_bytes()
    except FileNotFoundError:
        raise PromptError(f"no judge prompt named {name!r}") from None
    return parse_prompt(name, data.decode("utf-8"))


@dataclass(frozen=True, slots=True)
class VerdictReply:
    """A parsed reply to the default prompt — without its reasoning, which is discarded."""

    score: float
    verdict: Literal["pass", "fail"]


def parse_verdict_reply(text: str | None) -> VerdictReply:
    """Parse a judge's reply strictly, keeping the score and verdict and dropping the reasoning.

    Accepted: exactly one JSON object, optionally inside one Markdown code fence, with a string
    `reasoning`, a `score` that is a finite JSON number in [0, 1] (not a string, not a boolean)
    and a `verdict` of exactly `"pass"` or `"fail"`. Extra keys are ignored; duplicate keys,
    `NaN`/`Infinity`, trailing text and a second object are rejected.

    Raises:
        MalformedReply: What is wrong, in words that never quote the reply.
    """
    document = _reply_document(text, VERDICT_KEYS)
    score = document["score"]
    if isinstance(score, bool) or not isinstance(score, int | float):
        raise MalformedReply("score is not a number")
    if not 0.0 <= score <= 1.0:  # also false for NaN, were it to get here
        raise MalformedReply("score out of range")
    verdict = document["verdict"]
    if verdict == "pass":
        return VerdictReply(float(score), "pass")
    if verdict == "fail":
        return VerdictReply(float(score), "fail")
    raise MalformedReply("verdict is not pass or fail")


def _reply_document(text: str | None, keys: tuple[str, ...]) -> dict[str, Any]:
    """The reply's one JSON object (optionally fenced), with every key and a string `reasoning`."""
    if text is None:
        raise MalformedReply("reply has no text")
    body = text.strip()
    fenced = _FENCE.fullmatch(body)
    if fenced is not None:
        body = fenced.group(1).strip()
    try:
        document = json.loads(body, object_pairs_hook=_unique_keys, parse_constant=_no_constants)
    except (ValueError, RecursionError):
        raise MalformedReply("reply is not exactly one JSON object") from None
    if not isinstance(document, dict):
        raise MalformedReply("reply is not a JSON object")
    missing = [key for key in keys if key not in document]
    if missing:
        raise MalformedReply(f"reply lacks {', '.join(missing)}")
    if not isinstance(document["reasoning"], str):
        raise MalformedReply("reasoning is not a string")
    return document


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        raise ValueError("duplicate key")
    return document


def _no_constants(name: str) -> Any:
    raise ValueError("NaN and Infinity are not JSON")


# --- pairwise replies -------------------------------------------------------------------------

PAIR_KEYS: Final = ("reasoning", "winner")
PAIRWISE_PLACEHOLDERS: Final = frozenset({"first", "second"})
"""What a pairwise template must show the judge (besides the case, which it may leave out)."""

PAIR_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        # Reasoning first: the judge compares both responses before it picks one.
        "reasoning": {
            "type": "string",
            "description": "How each response meets or misses the rubric, before choosing.",
        },
        "winner": {"type": "string", "enum": list(WINNERS)},
    },
    "required": list(PAIR_KEYS),
    "additionalProperties": False,
}
"""JSON Schema of the pairwise prompt's reply, in the order the judge must write it."""


def parse_pair_reply(text: str | None) -> Winner:
    """Parse a pairwise judge's reply strictly, keeping the winner and dropping the reasoning.

    Accepted: exactly one JSON object, optionally inside one Markdown code fence, with a string
    `reasoning` and a `winner` of exactly `"first"`, `"second"` or `"tie"`. Extra keys are
    ignored; duplicate keys, `NaN`/`Infinity`, trailing text and a second object are rejected
    (the same rules as `parse_verdict_reply`).

    Raises:
        MalformedReply: What is wrong, in words that never quote the reply.
    """
    document = _reply_document(text, PAIR_KEYS)
    winner = document["winner"]
    for known in WINNERS:
        if winner == known:
            return known
    raise MalformedReply("winner is not first, second or tie")


# --- conversations ----------------------------------------------------------------------------

CONVERSATION_FRAME: Final = "conversation"
"""The text put before every conversation check's rubric (`conversation.frame.txt`)."""
ROLES: Final = frozenset({"system", "user", "assistant", "tool"})

_TAG_LETTERS = "abcdefghijklmnop"


@dataclass(frozen=True, slots=True)
class ConversationRubric:
    """What a judge of a whole conversation reads as its rubric, and the versions of its texts.

    Attributes:
        text: The frame (how the conversation is shown), then the named template's text or the
            rubric as the suite wrote it.
        versions: `name@<sha256[:12]>` of every shipped text used (the frame, the template): part
            of the recorded prompt version (`with_texts`), so editing one makes the judge
            uncalibrated, as editing the prompt does.
    """

    text: str
    versions: tuple[str, ...]


def _shipped_text(stem: str) -> tuple[str, str]:
    """(text, version) of a shipped text file `<stem>.txt`; the version names it without the
    `rubric.` / `.frame` part of the file name (`goal_completion@…`, `conversation@…`)."""
    data = resources.files("assay.judge").joinpath("prompts", f"{stem}.txt").read_bytes()
    name = stem.removeprefix("rubric.").removesuffix(".frame")
    return data.decode("utf-8").strip(), f"{name}@{hashlib.sha256(data).hexdigest()[:12]}"


def conversation_rubric(rubric: str) -> ConversationRubric:
    """The rubric a conversation check asks with: the frame, then `rubric` — the text of the
    template it names (one of `CONVERSATION_RUBRICS`), or itself."""
    frame, frame_version = _shipped_text(f"{CONVERSATION_FRAME}.frame")
    if rubric in CONVERSATION_RUBRICS:
        text, version = _shipped_text(f"rubric.{rubric}")
        return ConversationRubric(f"{frame}\n{text}", (frame_version, version))
    return ConversationRubric(f"{frame}\n{rubric}", (frame_version,))


def with_texts(prompt_version: str, versions: Iterable[str]) -> str:
    """A prompt version with the versions of the further shipped texts a judge reads
    (`default@…+redact@…+conversation@…+goal_completion@…`; each once, in name order)."""
    return "".join([prompt_version, *(f"+{version}" for version in sorted(set(versions)))])


def conversation_block(turns: Sequence[tuple[str, str]]) -> str:
    """A conversation as the judge reads it: every message under a header line
    `<<<TURN n ROLE tag>>>` (the frame, `conversation.frame.txt`, explains them).

    The tag is a hash of the whole conversation, so no message can forge a header of its own
    (it would have to contain the hash of a text that contains it). It is written in letters
    only because redaction runs again on the judge's whole output (`Redactor.request`): a phone
    or card matcher must never find digits in a header.

    Args:
        turns: (role, text) per message, in order; roles from `ROLES`, texts already redacted.
    """
    digest = hashlib.sha256(
        json.dumps(list(turns), ensure_ascii=False).encode("utf-8", "surrogatepass")
    ).hexdigest()
    tag = "".join(_TAG_LETTERS[int(char, 16)] for char in digest[:16])
    return "\n".join(
        f"<<<TURN {number} {role.upper()} {tag}>>>\n{neutralised(text, _TURN_WORDS)}"
        for number, (role, text) in enumerate(turns, start=1)
    )
