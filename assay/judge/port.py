"""The judge port: what Assay asks a judge, what it gets back, and how many it asks at once.

Scorers, flows and the pairwise comparison depend on this module only; the one adapter
(`assay.judge.openai_adapter`) implements `Judge` for any OpenAI-compatible endpoint. Nothing here
knows about HTTP, SDKs or Prefect.

Two rules shape the models (SPEC §1):

- **Fail closed.** A verdict is `pass` or `fail` only when a judge actually judged (`reason` is
  `"judged"`); everything else — no judge, no credentials, a malformed reply, an outage, a budget
  stop — is `skipped` with score 0 and a reason from a fixed vocabulary, never a pass.
- **Minimal data.** Candidate output text lives only in memory, in `JudgeRequest.output`, which
  neither `repr` nor serialization shows. A `Verdict` holds no free text at all: the judge's
  reasoning is parsed and discarded by the adapter, and `reason` is validated against the
  vocabulary, so neither output text nor reasoning can reach evidence, Prefect or logs through it.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, Final, Literal, Protocol, Self, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

logger = logging.getLogger(__name__)
RequestT = TypeVar("RequestT")
ResultT = TypeVar("ResultT")

Mode = Literal["json_schema", "json_object", "prompt"]
"""How a verdict was obtained from the endpoint (see `assay.judge.openai_adapter`)."""

MODES: Final[tuple[Mode, ...]] = ("json_schema", "json_object", "prompt")
"""Structured-output modes, strongest first: the order the adapter falls back in."""

VerdictStatus = Literal["pass", "fail", "skipped"]

JUDGED: Final = "judged"
NO_JUDGE: Final = "no judge configured"
NO_CREDENTIALS: Final = "no credentials"
MALFORMED_REPLY: Final = "malformed reply"
BUDGET_BLOCKED: Final = "budget_blocked"
JUDGE_SPLIT: Final = "judge split"
"""An even split of a check's repeated verdicts: no majority, so no verdict (never a pass)."""
UNAVAILABLE_PREFIX: Final = "judge unavailable: "

SKIP_REASONS: Final[frozenset[str]] = frozenset(
    {NO_JUDGE, NO_CREDENTIALS, MALFORMED_REPLY, BUDGET_BLOCKED, JUDGE_SPLIT}
)
"""Fixed reasons a verdict may be skipped for, besides `judge unavailable: <ErrorType>`."""

_UNAVAILABLE = re.compile(r"judge unavailable: [A-Za-z_][A-Za-z0-9_]{0,79}")


def judge_unavailable(error: BaseException | type[BaseException]) -> str:
    """The skip reason for a judge that could not be reached: `judge unavailable: <ErrorType>`.

    Only the exception's type name is used: exception messages may quote a server's error body,
    and servers echo requests, so a message could carry the candidate output.
    """
    kind = error if isinstance(error, type) else type(error)
    return UNAVAILABLE_PREFIX + kind.__name__


def is_known_reason(reason: str) -> bool:
    """Whether `reason` belongs to the verdict vocabulary."""
    return reason == JUDGED or reason in SKIP_REASONS or _UNAVAILABLE.fullmatch(reason) is not None


class JudgeRequest(BaseModel):
    """One output to grade against one rubric.

    `output` is the candidate output. It is kept out of `repr` and out of `model_dump` /
    `model_dump_json` (`exclude=True`), so a request passed to a log line, an exception or a
    Prefect parameter by mistake does not carry the text with it.

    Attributes:
        case_id: The suite case, for logs and for matching verdicts to cases.
        input: The case's input (the task the agent was given).
        expected: The case's reference answer, if it has one.
        rubric: What the judge checks.
        output: The candidate output (in memory only; never logged or stored).
        pass_threshold: When set, the verdict passes iff score >= threshold, whatever the
            judge's own pass/fail says.
        max_output_tokens: The most the judge may answer with (`max_tokens`); the judging
            service sets it to what the budget preflight priced, so a long-winded judge cannot
            spend past the projection.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    case_id: str
    input: str
    expected: str | None = None
    rubric: str = Field(min_length=1)
    output: str = Field(repr=False, exclude=True)
    pass_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    max_output_tokens: int | None = Field(default=None, ge=1)


class JudgePin(BaseModel):
    """Which judge a verdict, a run or a report comes from: the model pin and the prompt version.

    Changing either makes verdicts incomparable: the verdict cache is keyed on it, runs record
    it, and a judge is calibrated per pin. Both are None only where no judge was configured.
    """

    model_config = ConfigDict(frozen=True)

    model: str | None
    prompt_version: str | None


class _Reply(BaseModel):
    """What every judge reply records besides its answer: why, how, by whom, at what cost."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: str
    reason: str
    mode: Mode | None = None
    model: str | None = None
    prompt_version: str | None = None
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    redactions: dict[str, int] = Field(default_factory=dict)
    """Spans redacted per kind from the prompt before it was sent (counts only, never values)."""

    def _check_reason(self) -> None:
        if not is_known_reason(self.reason):
            raise ValueError("verdict reason is not in the judge vocabulary")
        if self.status == "skipped" and self.reason == JUDGED:
            raise ValueError("a skipped verdict needs the reason it was skipped")

    @classmethod
    def skipped(
        cls,
        reason: str,
        *,
        mode: Mode | None = None,
        model: str | None = None,
        prompt_version: str | None = None,
        input_tokens: int = 0,
        output_tokens: int = 0,
        redactions: dict[str, int] | None = None,
    ) -> Self:
        """A reply that was not judged, with its reason (and any tokens already spent)."""
        return cls.model_validate(
            {
                "status": "skipped",
                "reason": reason,
                "mode": mode,
                "model": model,
                "prompt_version": prompt_version,
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "redactions": redactions or {},
                **cls._SKIPPED_ANSWER,
            }
        )

    _SKIPPED_ANSWER: ClassVar[dict[str, Any]] = {}


class Verdict(_Reply):
    """What a judge said about one output — without anything it wrote.

    Attributes:
        status: `pass` / `fail` when judged; `skipped` otherwise (never a pass).
        score: The judge's score in [0, 1]; 0 when skipped.
        reason: `"judged"` for pass/fail; for skipped, one of `SKIP_REASONS` or
            `judge unavailable: <ErrorType>`.
        mode: The structured-output mode that produced the reply, when there was one.
        model: The judge model pin, when a judge was involved.
        prompt_version: `name@hash` of the prompt template, when a judge was involved.
        input_tokens: Prompt tokens the judge billed for this verdict, over every reply it
            took (including a discarded malformed one); 0 when the server reports none.
        output_tokens: Completion tokens billed, likewise.
    """

    status: VerdictStatus
    score: float = Field(ge=0.0, le=1.0)
    _SKIPPED_ANSWER: ClassVar[dict[str, Any]] = {"score": 0.0}

    @model_validator(mode="after")
    def _fail_closed(self) -> Verdict:
        self._check_reason()
        if self.status == "skipped":
            if self.score != 0.0:
                raise ValueError("a skipped verdict has score 0")
        elif self.reason != JUDGED:
            raise ValueError(f"a {self.status} verdict must have been judged")
        return self


class Judge(Protocol):
    """A judge model behind some API. Implementations never raise for a judging failure: they
    return a skipped `Verdict` with its reason (and `judge_all` guards against those that do).
    """

    @property
    def model(self) -> str:
        """The model pin, recorded with every verdict (a judge is calibrated per pin)."""
        ...

    @property
    def prompt_version(self) -> str:
        """The prompt template's `name@hash`, recorded with every verdict."""
        ...

    async def judge(self, request: JudgeRequest) -> Verdict:
        """Grade one output."""
        ...


class Slots(Protocol):
    """What a call takes a slot of before it starts and gives back after: an
    `asyncio.Semaphore`, or slots shared across threads (`assay.judge.concurrency`)."""

    async def acquire(self) -> object: ...

    def release(self) -> None: ...


async def judge_all(
    judge: Judge,
    requests: Sequence[JudgeRequest],
    max_concurrency: int | Slots,
    on_verdict: Callable[[int, Verdict], Awaitable[None] | None] | None = None,
    stop: Callable[[], BaseException | None] | None = None,
) -> list[Verdict]:
    """Judge many outputs with at most `max_concurrency` calls in flight; verdicts in order.

    Why bounded: a judged suite should be limited by the judge's latency and rate limit, not by
    Assay, yet never open thousands of connections at once. A semaphore is acquired *before*
    each task is created, so at most `max_concurrency` tasks (and requests) exist at any time,
    however long `requests` is.

    A request whose `judge` call raises becomes `skipped` with `judge unavailable: <ErrorType>`
    (the message is not used: it may quote the output); the others carry on. Cancellation
    propagates.

    Args:
        judge: Any `Judge`.
        requests: The outputs to grade.
        max_concurrency: Calls in flight at most (>= 1), or slots shared with other calls.
        on_verdict: Called with (request index, verdict) as each verdict arrives, while other
            calls are still in flight — so per-verdict work (e.g. writing the verdict cache)
            overlaps the judge's latency instead of following it. When it returns an
            awaitable, the call's concurrency slot is held until it completes: at most
            `max_concurrency` verdicts are ever asked for or arrived but not yet kept.
        stop: Asked before each call is started; when it returns an error, no further call
            starts, the calls in flight finish (their verdicts still reach `on_verdict`), and
            that error is raised — e.g. the store can no longer take the verdicts or the spend.

    Returns:
        One verdict per request, in request order.
    """

    def on_error(request: JudgeRequest, exc: Exception) -> Verdict:
        logger.warning(
            "judge failed on case %s (%s); verdict skipped", request.case_id, type(exc).__name__
        )
        return Verdict.skipped(
            judge_unavailable(exc), model=judge.model, prompt_version=judge.prompt_version
        )

    return await _bounded(judge.judge, requests, max_concurrency, on_error, on_verdict, stop)


async def _bounded(
    call: Callable[[RequestT], Awaitable[ResultT]],
    requests: Sequence[RequestT],
    max_concurrency: int | Slots,
    on_error: Callable[[RequestT, Exception], ResultT],
    on_result: Callable[[int, ResultT], Awaitable[None] | None] | None = None,
    stop: Callable[[], BaseException | None] | None = None,
) -> list[ResultT]:
    """Run `call` over `requests` with at most `max_concurrency` in flight; results in order.

    The semaphore is acquired *before* each task is created, so at most `max_concurrency` tasks
    exist at any time however long `requests` is. An exception becomes `on_error`'s result for
    that request only; cancellation propagates. `on_result` sees each result as it arrives.
    """
    if isinstance(max_concurrency, int):
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, not {max_concurrency}")
        slots: Slots = asyncio.Semaphore(max_concurrency)
    else:
        slots = max_concurrency
    results: list[ResultT | None] = [None] * len(requests)

    async def run(index: int, request: RequestT) -> None:
        try:
            try:
                result = await call(request)
            except Exception as exc:
                result = on_error(request, exc)
            results[index] = result
            if on_result is not None:
                kept = on_result(index, result)
                if kept is not None:
                    await kept  # the slot is held until the result is kept
        finally:
            slots.release()

    stopped: BaseException | None = None
    async with asyncio.TaskGroup() as group:
        for index, request in enumerate(requests):
            await slots.acquire()
            stopped = stop() if stop is not None else None
            if stopped is not None:
                slots.release()
                break
            group.create_task(run(index, request))
    if stopped is not None:
        raise stopped

    done = [result for result in results if result is not None]
    if len(done) != len(requests):  # pragma: no cover - every task stores a result
        raise RuntimeError("a judge call lost its verdict")
    return done


# --- pairwise ---------------------------------------------------------------------------------

PairStatus = Literal["judged", "skipped"]
Winner = Literal["first", "second", "tie"]
WINNERS: Final[tuple[Winner, ...]] = ("first", "second", "tie")
"""What a pairwise judge may answer: the response shown first, the second, or neither."""


class PairRequest(BaseModel):
    """Two outputs for the same case, to compare against one rubric, in a given order.

    `first` and `second` are candidate outputs, shown to the judge as Response 1 and Response 2.
    Like `JudgeRequest.output`, they are kept out of `repr` and serialization (`exclude=True`).

    Attributes:
        case_id: The suite case, for logs and for matching verdicts to cases.
        input: The case's input (the task both agents were given).
        expected: The case's reference answer, if it has one.
        rubric: What the judge compares the responses on.
        first: The output shown first (in memory only; never logged or stored).
        second: The output shown second (in memory only; never logged or stored).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    case_id: str
    input: str
    expected: str | None = None
    rubric: str = Field(min_length=1)
    first: str = Field(repr=False, exclude=True)
    second: str = Field(repr=False, exclude=True)
    max_output_tokens: int | None = Field(default=None, ge=1)
    """The most the judge may answer with (see `JudgeRequest.max_output_tokens`)."""


class PairVerdict(_Reply):
    """Which of two presented outputs a judge preferred — without anything it wrote.

    The winner names a *position* (`first`/`second`), not a subject: mapping it back to A or B,
    and checking both orders agree, is the pairwise comparison's job (`assay.pairwise`).

    Attributes:
        status: `judged` when the judge answered; `skipped` otherwise (never a win).
        winner: `first`, `second` or `tie` when judged; None when skipped.
        reason: `"judged"`, or why it was skipped (the `Verdict` vocabulary).
        mode: The structured-output mode that produced the reply, when there was one.
        model: The judge model pin, when a judge was involved.
        prompt_version: `name@hash` of the pairwise prompt, when a judge was involved.
        input_tokens: Prompt tokens billed for this verdict, over every reply it took.
        output_tokens: Completion tokens billed, likewise.
    """

    status: PairStatus
    winner: Winner | None = None

    @model_validator(mode="after")
    def _fail_closed(self) -> PairVerdict:
        self._check_reason()
        if self.status == "skipped":
            if self.winner is not None:
                raise ValueError("a skipped verdict has no winner")
        elif self.reason != JUDGED or self.winner is None:
            raise ValueError("a judged pairwise verdict has reason `judged` and a winner")
        return self


@runtime_checkable
class PairJudge(Protocol):
    """A judge that compares two outputs. Like `Judge`, it never raises for a judging failure:
    it returns a skipped `PairVerdict` with its reason."""

    @property
    def model(self) -> str:
        """The model pin, recorded with every verdict."""
        ...

    @property
    def pairwise_prompt_version(self) -> str:
        """The pairwise prompt template's `name@hash`, recorded with every verdict."""
        ...

    async def judge_pair(self, request: PairRequest) -> PairVerdict:
        """Say which of the two presented outputs meets the rubric better (or a tie)."""
        ...


async def judge_pairs_all(
    judge: PairJudge,
    requests: Sequence[PairRequest],
    max_concurrency: int | Slots,
    on_verdict: Callable[[int, PairVerdict], Awaitable[None] | None] | None = None,
    stop: Callable[[], BaseException | None] | None = None,
) -> list[PairVerdict]:
    """Judge many pairs with at most `max_concurrency` calls in flight; verdicts in order.

    The pairwise twin of `judge_all` (same semaphore-before-task bound): a request whose
    `judge_pair` raises becomes `skipped` with `judge unavailable: <ErrorType>`; the others carry
    on. Cancellation propagates.

    Args:
        judge: Any `PairJudge`.
        requests: The pairs to compare (each order of a case is its own request).
        max_concurrency: Calls in flight at most (>= 1), or slots shared with other calls.
        on_verdict: Called with (request index, verdict) as each verdict arrives.
        stop: As in `judge_all`.

    Returns:
        One verdict per request, in request order.
    """

    def on_error(request: PairRequest, exc: Exception) -> PairVerdict:
        logger.warning(
            "pairwise judge failed on case %s (%s); verdict skipped",
            request.case_id,
            type(exc).__name__,
        )
        return PairVerdict.skipped(
            judge_unavailable(exc), model=judge.model, prompt_version=judge.pairwise_prompt_version
        )

    return await _bounded(judge.judge_pair, requests, max_concurrency, on_error, on_verdict, stop)
