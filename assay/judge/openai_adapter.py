"""The OpenAI-compatible judge: one adapter for OpenAI, vLLM, Ollama, llama.cpp and the like.

It talks to `POST {base_url}/chat/completions` through the official `openai` SDK, with the SDK's
own retries off (`max_retries=0`): tenacity owns every retry, so there is one bounded, jittered
policy with a total deadline, as for S3 (`assay.s3`).

**Structured output, with fallback.** The reply is requested in the strongest form the endpoint
accepts: `json_schema`, then `json_object`, then `prompt` (the ladder: `assay.judge.modes`).

**The fallback rule.** Which answers mean "this endpoint does not support that mode":

- 400 or 422 to a structured mode is a rejection: the next mode is asked at once, without
  waiting and without using up an attempt.
- 500 to a structured mode is ambiguous: llama.cpp's server answers 500 to `json_schema`, but
  so does any server having a bad moment. The first 500 is treated as transient (backoff, next
  attempt, same mode). A *second* 500 to the same mode in the same call makes the adapter probe:
  it asks the next mode at once, stepping down past further 400/422/500 answers. A reply from a
  lower mode proves the gap. Any other failure during the probe (timeout, 429, 502, …) means the
  server is unwell: the attempt fails as transient and the call goes on with its original mode.
  Each call probes at most once, so an outage costs a few extra requests, never a loop.
- Other statuses never change the mode.

The mode that produced a reply is remembered in the adapter's `ModeMemory` (one per instance,
or one shared by the judges of one configuration), and later calls (any thread, any event loop)
start from it. The memory only moves down the ladder, and only after a reply in the lower mode:
a rejection followed by an outage teaches nothing, and a single transient 500 never downgrades
an endpoint. Residual
risk: a server that fails twice in a row with 500 and then answers the probe is read as not
supporting the mode, for the life of that memory (a new `ModeMemory` starts afresh). Every
verdict records its mode, so such a downgrade is visible in the evidence.

**Retries** (tenacity): 429 (honouring `Retry-After` / `Retry-After-Ms`, else full-jitter
exponential backoff), 408, 409, 5xx, timeouts and connection errors; at most `max_attempts`
attempts, none started once the next wait would cross `deadline_seconds`, and each request's
timeout is clipped to the time left (30 s a request and 60 s a call by default:
`ASSAY_JUDGE_TIMEOUT_SECONDS`, `ASSAY_JUDGE_DEADLINE_SECONDS`). A malformed reply is asked for
again once, at once. What still fails becomes `skipped` with `judge unavailable: <ErrorType>` or
`malformed reply` — never a pass. Each request's outcome moves the batch's window (`watched`).

**Pairwise.** `judge_pair` compares two outputs with the `pairwise` prompt through the same
machinery (modes, fallback and its memory, retries, deadline), asking for the pairwise reply
schema (`{"reasoning", "winner"}`) and parsing it strictly (`parse_pair_reply`): the verdict
keeps only the winner's position (`first`, `second` or `tie`).

**Minimal data.** The output text and the rendered prompt exist only in this call's memory.
Nothing here logs them or puts them in an exception or a verdict; server error bodies (which
may echo the request) are never logged either: only status codes and exception type names.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, TypeVar

from openai import APIStatusError
from openai.types.chat import ChatCompletionMessageParam
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    wait_random_exponential,
)

from assay.judge.concurrency import BillingMemory, watched
from assay.judge.endpoint import (
    BASE_URL_ENV,
    DEADLINE_ENV,
    DEFAULT_BASE_URL,
    DEFAULT_DEADLINE_SECONDS,
    DEFAULT_TIMEOUT_SECONDS,
    TIMEOUT_ENV,
    LoopClients,
    api_key_for,
    is_transient,
    redact_url,
    retry_after_seconds,
    seconds_from_env,
)
from assay.judge.modes import ModeMemory, next_mode, structured_format
from assay.judge.port import (
    JUDGED,
    MALFORMED_REPLY,
    MODES,
    JudgeRequest,
    Mode,
    PairRequest,
    PairVerdict,
    Verdict,
    judge_unavailable,
)
from assay.judge.prompts import PAIRWISE_PLACEHOLDERS, MalformedReply, Prompt, load_prompt
from assay.judge.redaction import NO_REDACTION, RedactionSettings, Redactor
from assay.judge.replies import (
    PAIR_CONTRACT,
    VERDICT_CONTRACT,
    ReplyContract,
    compared,
    finish_reason,
    graded,
    reply_text,
    usage,
)

logger = logging.getLogger(__name__)

REJECTION_STATUSES: Final = frozenset({400, 422})
"""Answers to a structured mode that mean "not supported here": fall back at once."""

AMBIGUOUS_STATUS: Final = 500
"""llama.cpp's answer to `json_schema`, and also a plain server error: see the module docs."""

AMBIGUOUS_REPEATS: Final = 2
"""500s to one structured mode, in one call, after which the next mode is probed."""

MALFORMED_RETRIES: Final = 1
"""A malformed reply is asked for again this many times before the verdict is skipped."""

ReplyT = TypeVar("ReplyT")
SkippedT = TypeVar("SkippedT")
AnswerT = TypeVar("AnswerT")


@dataclass
class _Call:
    """The state of one `judge` call across its attempts (never holds any text)."""

    mode: Mode
    deadline_at: float
    started_at: float = field(default_factory=time.monotonic)
    server_errors: dict[Mode, int] = field(default_factory=dict)
    probed: bool = False
    replied: bool = False
    malformed: int = 0
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    redactions: dict[str, int] = field(default_factory=dict)
    """Spans redacted per kind from the call's prompt (counts only)."""
    max_tokens: int | None = None
    truncated: bool = False
    """The reply was cut at `max_tokens`: asking again would be cut again, and paid again."""


class OpenAIJudge:
    """A `Judge` behind any OpenAI-compatible chat-completions endpoint.

    Safe to share across tasks, threads and event loops: it keeps one SDK client per running
    event loop (`LoopClients`: an HTTP connection pool belongs to the loop that opened it).

    Args:
        model: The model pin (`gpt-4o-2024-08-06`, a vLLM/Ollama model name, …).
        base_url: The API root, e.g. `http://127.0.0.1:8080/v1`; default `OPENAI_BASE_URL`,
            else OpenAI's.
        api_key: Default `OPENAI_API_KEY`. Local servers that need none accept any string.
        prompt: A prompt template name (see `load_prompt`) or a loaded `Prompt`. It must use
            the default prompt's reply contract (`parse_verdict_reply`).
        timeout: Seconds one request may take; default `ASSAY_JUDGE_TIMEOUT_SECONDS`, else 30.
        max_attempts: Attempts per verdict, retries included (>= 1).
        deadline_seconds: Time budget per verdict: no attempt starts once the next wait would
            cross it, and requests are cut off when it runs out; default
            `ASSAY_JUDGE_DEADLINE_SECONDS`, else 60.
        backoff_seconds: Base of the exponential backoff (full jitter: a wait is uniform in
            [0, backoff × 2^(attempt-1)]).
        max_backoff_seconds: Ceiling of one backoff wait (a `Retry-After` is honoured as sent).
        temperature: Sampling temperature; None leaves it to the server (for models that
            refuse the parameter).
        pairwise_prompt: The template `judge_pair` uses (name or loaded `Prompt`); it must show
            `$first` and `$second` and use the pairwise reply contract (`parse_pair_reply`).
        modes: Where the structured-output mode the endpoint answers in is remembered (shared
            by the judges of one configuration); default this judge's own.
        redaction: What is replaced by placeholders in the input, reference answer and
            output(s) before any prompt is sent (`assay.judge.redaction`); part of the recorded
            prompt versions. Default: nothing (`judge_setup` passes the configured settings).
        billing: Told whether each reply was billed within its `max_tokens`
            (`assay.judge.concurrency.BillingMemory`, shared like `modes`); default none.

    Raises:
        ValueError: No model, no API key, a bound that is not positive, or a pairwise prompt
            without `$first` and `$second`.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        prompt: str | Prompt = "default",
        timeout: float | None = None,
        max_attempts: int = 5,
        deadline_seconds: float | None = None,
        *,
        backoff_seconds: float = 0.5,
        max_backoff_seconds: float = 8.0,
        temperature: float | None = 0.0,
        pairwise_prompt: str | Prompt = "pairwise",
        modes: ModeMemory | None = None,
        redaction: RedactionSettings = NO_REDACTION,
        billing: BillingMemory | None = None,
    ) -> None:
        if timeout is None:
            timeout = seconds_from_env(TIMEOUT_ENV, DEFAULT_TIMEOUT_SECONDS)
        if deadline_seconds is None:
            deadline_seconds = seconds_from_env(DEADLINE_ENV, DEFAULT_DEADLINE_SECONDS)
        key = api_key_for("OpenAIJudge", model, api_key, timeout, deadline_seconds, max_attempts)
        if backoff_seconds < 0 or max_backoff_seconds < 0:
            raise ValueError("backoff_seconds and max_backoff_seconds must not be negative")
        self._model = model
        self.base_url = (base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL).rstrip("/")
        self._api_key = key
        self.prompt = prompt if isinstance(prompt, Prompt) else load_prompt(prompt)
        self.pairwise_prompt = (
            pairwise_prompt if isinstance(pairwise_prompt, Prompt) else load_prompt(pairwise_prompt)
        )
        if not PAIRWISE_PLACEHOLDERS.issubset(self.pairwise_prompt.placeholders):
            raise ValueError(
                f"pairwise prompt {self.pairwise_prompt.version} must show $first and $second"
            )
        self.redactor = Redactor(redaction)
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.deadline_seconds = deadline_seconds
        self.temperature = temperature
        self._backoff = wait_random_exponential(multiplier=backoff_seconds, max=max_backoff_seconds)
        self._modes = modes if modes is not None else ModeMemory()
        self._billing = billing
        self._where = redact_url(self.base_url)
        self._clients = LoopClients(key, self.base_url, timeout)

    def __repr__(self) -> str:
        return f"OpenAIJudge(model={self._model!r}, base_url={self._where!r})"

    @property
    def model(self) -> str:
        """The model pin recorded with every verdict."""
        return self._model

    @property
    def prompt_version(self) -> str:
        """The prompt template's `name@hash` (+ the redaction settings), recorded with verdicts."""
        return self.redactor.settings.prompt_version(self.prompt.version)

    @property
    def pairwise_prompt_version(self) -> str:
        """The pairwise template's `name@hash` (+ the redaction settings), recorded likewise."""
        return self.redactor.settings.prompt_version(self.pairwise_prompt.version)

    @property
    def endpoint_mode(self) -> Mode | None:
        """The mode this judge's memory holds for its endpoint, or None before any fallback."""
        return self._modes.mode

    async def aclose(self) -> None:
        """Close the SDK client of the running event loop (the others close with their loop)."""
        await self._clients.aclose()

    async def __aenter__(self) -> OpenAIJudge:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _start_call(self, max_tokens: int | None) -> tuple[_Call, AsyncRetrying]:
        """A fresh call (mode from the endpoint's memory, deadline from now) and its retries."""
        deadline_at = time.monotonic() + self.deadline_seconds
        call = _Call(
            mode=self.endpoint_mode or MODES[0], deadline_at=deadline_at, max_tokens=max_tokens
        )
        retrying = AsyncRetrying(
            retry=retry_if_exception(lambda exc: self._should_retry(exc, call)),
            stop=stop_after_attempt(self.max_attempts) | stop_before_delay(self.deadline_seconds),
            wait=self._wait,
            reraise=True,
        )
        return call, retrying

    async def judge(self, request: JudgeRequest) -> Verdict:
        """Grade one output; never raises for a judging failure, never passes one.

        Returns:
            `pass`/`fail` with the judge's score (pass = the judge's verdict, or
            score >= `request.pass_threshold` when the request has one); else `skipped` with
            `malformed reply` or `judge unavailable: <ErrorType>`. Either way with the model
            pin, prompt version, mode and the tokens billed.
        """
        request, redacted = self.redactor.request(request)
        user = self.prompt.user_message(request)
        answer = partial(graded, request.pass_threshold)
        return await self._answer(self.prompt, user, VERDICT_CONTRACT, request, redacted, answer)

    async def judge_pair(self, request: PairRequest) -> PairVerdict:
        """Compare two outputs with the pairwise prompt; never raises for a judging failure.

        The same request machinery as `judge` (structured-output fallback and its memory,
        tenacity retries, `Retry-After`, deadline, one re-ask after a malformed reply), with the
        pairwise reply contract: the reasoning is parsed and discarded, only the winner kept.

        Returns:
            `judged` with the winner's *position* (`first`, `second` or `tie`); else `skipped`
            with `malformed reply` or `judge unavailable: <ErrorType>`. Either way with the
            model pin, the pairwise prompt version, the mode and the tokens billed.
        """
        request, redacted = self.redactor.pair(request)
        prompt = self.pairwise_prompt
        user = prompt.pair_message(request)
        return await self._answer(prompt, user, PAIR_CONTRACT, request, redacted, compared)

    async def _answer(
        self,
        prompt: Prompt,
        user: str,
        contract: ReplyContract[ReplyT, AnswerT],
        request: JudgeRequest | PairRequest,
        redactions: dict[str, int],
        answer: Callable[[ReplyT, dict[str, Any]], AnswerT],
    ) -> AnswerT:
        """One call (attempts, retries, fallbacks) with `prompt`'s system text and `user`, its
        reply turned into `answer(reply, stamp)`; when there is none, log why and return the
        contract's skipped verdict with the tokens spent (a failure is never a pass)."""
        version = self.redactor.settings.prompt_version(prompt.version)
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": prompt.system},
            {"role": "user", "content": user},
        ]
        call, retrying = self._start_call(request.max_output_tokens)
        call.redactions = redactions
        try:
            reply: ReplyT = await retrying(self._attempt_as, messages, call, contract)
        except MalformedReply:
            reason = MALFORMED_REPLY
        except Exception as exc:
            reason = judge_unavailable(exc)
        else:
            return answer(reply, self._judged(call, version))
        pair = "pair for " if isinstance(request, PairRequest) else ""
        return self._give_up(
            f"{pair}case {request.case_id}", call, reason, contract.skipped, version
        )

    def _judged(self, call: _Call, prompt_version: str) -> dict[str, Any]:
        """What a judged reply records besides its answer: the mode, the pin, the tokens."""
        return {
            "reason": JUDGED,
            "mode": call.mode,
            "model": self._model,
            "prompt_version": prompt_version,
            "input_tokens": call.input_tokens,
            "output_tokens": call.output_tokens,
            "redactions": call.redactions,
        }

    async def _attempt_as(
        self,
        messages: list[ChatCompletionMessageParam],
        call: _Call,
        contract: ReplyContract[ReplyT, Any],
    ) -> ReplyT:
        """One attempt: a request in the call's mode, plus any immediate fallback requests, for
        any reply contract (the schema asked for and the parser applied)."""
        mode = call.mode
        probing = False
        while True:
            try:
                completion = await self._request(mode, messages, call, contract)
            except APIStatusError as exc:
                lower = self._fallback(mode, exc.status_code, call, probing)
                if lower is None:
                    raise
                logger.info(
                    "judge %s at %s: %s answered HTTP %d, trying %s",
                    self._model,
                    self._where,
                    mode,
                    exc.status_code,
                    lower,
                )
                if exc.status_code == AMBIGUOUS_STATUS:
                    probing = True
                elif not probing:
                    call.mode = lower  # a definite rejection: not asked again in this call
                mode = lower
                continue
            break
        call.mode = mode
        call.replied = True
        self._remember(mode)
        tokens_in, tokens_out = usage(completion)
        call.input_tokens += tokens_in
        call.output_tokens += tokens_out
        call.truncated = finish_reason(completion) == "length"
        try:
            return contract.parse(reply_text(completion))
        except MalformedReply:
            call.malformed += 1
            raise

    def _fallback(self, mode: Mode, status: int, call: _Call, probing: bool) -> Mode | None:
        """The mode to ask at once after `status` in `mode`, or None to fail the attempt."""
        lower = next_mode(mode)
        if lower is None:
            return None
        if status in REJECTION_STATUSES:
            return lower
        if status != AMBIGUOUS_STATUS:
            return None
        if probing:
            return lower
        call.server_errors[mode] = call.server_errors.get(mode, 0) + 1
        if call.server_errors[mode] >= AMBIGUOUS_REPEATS and not call.probed:
            call.probed = True
            return lower
        return None

    async def _request(
        self,
        mode: Mode,
        messages: list[ChatCompletionMessageParam],
        call: _Call,
        contract: ReplyContract[Any, Any] = VERDICT_CONTRACT,
    ) -> object:
        """One HTTP request, its timeout clipped to what is left of the call's deadline."""
        body: dict[str, Any] = {"model": self._model, "messages": messages}
        response_format = structured_format(mode, contract.name, contract.schema)
        if response_format is not None:
            body["response_format"] = response_format
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if call.max_tokens is not None:
            body["max_tokens"] = call.max_tokens
        left = call.deadline_at - time.monotonic()
        call.requests += 1
        # The SDK's documented low-level `post` (same client, auth, errors and headers) rather
        # than `chat.completions.create`: `create` runs its typed-parameter transform over the
        # messages and the JSON schema (~3 ms of CPU per request) and builds a ChatCompletion
        # model from the reply (~0.8 ms), both measured in bench/bench_judge.py — enough to make
        # Assay, not the judge, the bottleneck at 16 calls in flight. The body is already what
        # goes on the wire, and the reply is read as plain JSON (`cast_to=object`), defensively.
        # `watched` widens or narrows the batch's window, and tells the endpoint's memory.
        with watched(call.max_tokens, self._billing) as reply:
            completion: object = await self._clients.client().post(
                "/chat/completions",
                cast_to=object,
                body=body,
                options={"timeout": max(0.001, min(self.timeout, left))},
            )
            reply.billed(usage(completion)[1])
        return completion

    def _remember(self, mode: Mode) -> None:
        """Record that the endpoint answers in `mode`; the memory only ever moves down."""
        if not self._modes.step_down(mode):
            return
        logger.info("judge %s at %s: using %s from now on", self._model, self._where, mode)

    def _should_retry(self, exc: BaseException, call: _Call) -> bool:
        if isinstance(exc, MalformedReply):
            return call.malformed <= MALFORMED_RETRIES and not call.truncated
        return is_transient(exc)

    def _wait(self, state: RetryCallState) -> float:
        """Seconds before the next attempt: none after a malformed reply, the server's
        `Retry-After` when it sent one, else full-jitter exponential backoff."""
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, MalformedReply):
            return 0.0
        if isinstance(exc, APIStatusError):
            asked = retry_after_seconds(exc.response.headers)
            if asked is not None:
                return asked
        return float(self._backoff(state))

    def _give_up(
        self,
        what: str,
        call: _Call,
        reason: str,
        skipped: Callable[..., SkippedT],
        prompt_version: str,
    ) -> SkippedT:
        """Log why `what` (a case, or a pair) went unjudged and return its skipped verdict,
        built by `skipped` (`Verdict.skipped` or `PairVerdict.skipped`) with the tokens spent."""
        logger.warning(
            "judge %s at %s: %s skipped (%s) after %d request(s) in %.1fs",
            self._model,
            self._where,
            what,
            reason,
            call.requests,
            time.monotonic() - call.started_at,
        )
        return skipped(
            reason,
            mode=call.mode if call.replied else None,
            model=self._model,
            prompt_version=prompt_version,
            input_tokens=call.input_tokens,
            output_tokens=call.output_tokens,
            redactions=call.redactions,
        )
