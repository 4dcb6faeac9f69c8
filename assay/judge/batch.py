"""Batch judging: a judging's uncached calls sent through the OpenAI Batch API, durably.

`judge.mode: batch` (`ASSAY_JUDGE_MODE=batch`) hands the judging service's uncached requests
(`assay.judge.service`, after the cache and the preflight) to `judge_in_batches`:

1. each request becomes one line of a JSONL file — `custom_id`, `POST /v1/chat/completions` and
   the body the synchronous adapter would send (the same prompt, redaction, structured mode,
   temperature and `max_tokens`) — uploaded with `purpose="batch"`, and a batch is created on it
   (`completion_window="24h"`);
2. the batch's id and its `custom_id → (case, cache key)` map are written to the store at once
   (write-once, `judge-batches/<run_id>/<batch_id>.json`): a run killed while waiting and
   resumed (`--resume`: same run id) waits for the *same* batch — nothing is sent twice;
3. the batch is looked at every `poll_seconds` (a sleep, not a busy loop), each change logged with
   its counts (`judge batch …: in_progress, 120 of 500 done, 3 failed`) and handed to
   `Batching.on_wait` (`assay.judge.batch_wait`), until it ends (`completed`, `failed`, `expired`
   or `cancelled`);
4. its output file's answers become verdicts exactly as a synchronous reply does, each handed to
   `keep` (the service prices it at the batch rate into the ledger, then caches it) as it is
   read; then `judge-batches/<run_id>/<batch_id>.collected.json` marks the batch collected;
5. **the retry rule**: a request answered with an error (the error file, or a status other than
   200) or never answered (the batch expired, was cancelled or failed as a whole) — and only
   those — is sent again in a new batch of just those requests, at most `MAX_ROUNDS` batches in
   all for a request, and no new batch once `DEADLINE_SECONDS` have passed since its first one.
   What is still unanswered then is skipped (`judge unavailable: BatchRequestFailed`), never a
   pass. A batch-level failure loses nothing that succeeded: its output file is read whatever
   the batch's end.

A malformed reply is not asked again (a synchronous call asks once more): it is skipped
(`malformed reply`). Requests use the structured mode the endpoint is known to answer in
(`json_schema` unless the adapter learned otherwise), with no fallback within a batch. A batch's
files on the provider (input, output, errors) are deleted once it is collected.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar

from pydantic import BaseModel, ConfigDict

from assay.judge.batch_wait import OnWait, wait_for_batch
from assay.judge.endpoint import tls_context
from assay.judge.modes import structured_format
from assay.judge.port import (
    BUDGET_BLOCKED,
    JUDGED,
    MALFORMED_REPLY,
    MODES,
    JudgeRequest,
    PairRequest,
    PairVerdict,
    Verdict,
    judge_unavailable,
)
from assay.judge.prompts import MalformedReply
from assay.judge.replies import PAIR_CONTRACT, VERDICT_CONTRACT, compared, graded, reply_text, usage
from assay.store import EvidenceStore

if TYPE_CHECKING:
    from openai import OpenAI

    from assay.judge.openai_adapter import OpenAIJudge
    from assay.judge.port import JudgePin
    from assay.judge.service import JudgeSetup
    from assay.judge.spending import Spend

logger = logging.getLogger(__name__)

BATCH_PREFIX: Final = "judge-batches/"
ENDPOINT: Final = "/v1/chat/completions"
COMPLETION_WINDOW: Final = "24h"
MAX_ROUNDS: Final = 3
"""Batches a request is sent in at most: the first, and two retries of what failed in it."""
DEADLINE_SECONDS: Final = 48 * 3600
"""No new batch once this long has passed since a request's first batch: one expired batch
(24 h) may still be retried once within its own window."""
DEFAULT_POLL_SECONDS: Final = 30.0
CONTROL_TIMEOUT_SECONDS: Final = 60.0
"""Each Batch API request (upload, create, look, download); the SDK retries transient errors."""


class BatchRequestFailed(Exception):
    """Names a request the Batch API did not answer within the retry rule (never raised)."""


UNANSWERED: Final = judge_unavailable(BatchRequestFailed)

RequestT = TypeVar("RequestT", JudgeRequest, PairRequest)
VerdictT = TypeVar("VerdictT", Verdict, PairVerdict)


@dataclass(frozen=True)
class Batching:
    """Where and how a judging's calls go through the Batch API (`JudgeSetup.batching`)."""

    base_url: str
    api_key: str = field(repr=False)
    poll_seconds: float = DEFAULT_POLL_SECONDS
    max_rounds: int = MAX_ROUNDS
    deadline_seconds: float = DEADLINE_SECONDS
    on_wait: OnWait | None = field(default=None, compare=False, repr=False)
    """Told where a batch stands while it is waited for (a Prefect task shows it as its state
    message); None: only logged."""

    def client(self) -> OpenAI:
        """A synchronous SDK client for the Batch API's files and batches."""
        from openai import DefaultHttpxClient, OpenAI  # the SDK, only for a judging that runs

        return OpenAI(
            api_key=self.api_key,
            base_url=self.base_url,
            timeout=CONTROL_TIMEOUT_SECONDS,
            http_client=DefaultHttpxClient(verify=tls_context()),
        )


class BatchedRequest(BaseModel):
    """What one line of a submitted batch stands for (no text)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    """The verdict-cache key of the question (the case's check, and which repeat)."""
    case_id: str


class Submission(BaseModel):
    """A batch as submitted: the store's write-once record of it (no text)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    batch_id: str
    input_file_id: str
    round: int
    """1 for a request's first batch, 2 for the batch its failures were sent again in, …"""
    first_submitted_at: float
    """When the requests' first batch was submitted (epoch seconds): the retry deadline's start."""
    requests: dict[str, BatchedRequest]
    """custom_id → the question it asks."""


class Collected(BaseModel):
    """A batch whose answers were all handed on (write-once); its failures re-sent or skipped."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    batch_id: str
    status: str
    answered: int
    unanswered: list[str]
    """custom_ids without an answer (error file, or never reached)."""


def record_key(run_id: str, batch_id: str, collected: bool = False) -> str:
    """Where a run's batch is recorded as submitted (`Submission`), or as `Collected`."""
    return f"{BATCH_PREFIX}{run_id}/{batch_id}{'.collected' if collected else ''}.json"


@dataclass(frozen=True)
class _Kind:
    """How one kind of request is put into a body and its reply read back (as the adapter)."""

    system: Callable[[OpenAIJudge], str]
    user: Callable[[OpenAIJudge, Any], tuple[str, dict[str, int]]]
    version: Callable[[OpenAIJudge], str]
    contract: Any
    answer: Callable[[Any, Any, dict[str, Any]], Any]


def _user_verdict(judge: OpenAIJudge, request: JudgeRequest) -> tuple[str, dict[str, int]]:
    redacted, counts = judge.redactor.request(request)
    return judge.prompt.user_message(redacted), counts


def _user_pair(judge: OpenAIJudge, request: PairRequest) -> tuple[str, dict[str, int]]:
    redacted, counts = judge.redactor.pair(request)
    return judge.pairwise_prompt.pair_message(redacted), counts


_VERDICT = _Kind(
    system=lambda judge: judge.prompt.system,
    user=_user_verdict,
    version=lambda judge: judge.prompt_version,
    contract=VERDICT_CONTRACT,
    answer=lambda request, reply, stamp: graded(request.pass_threshold, reply, stamp),
)
_PAIR = _Kind(
    system=lambda judge: judge.pairwise_prompt.system,
    user=_user_pair,
    version=lambda judge: judge.pairwise_prompt_version,
    contract=PAIR_CONTRACT,
    answer=lambda _request, winner, stamp: compared(winner, stamp),
)


def ask_in_batches(
    store: EvidenceStore,
    setup: JudgeSetup,
    requests: Sequence[tuple[str, RequestT]],
    spend: Spend,
    cacheable: Callable[[VerdictT, JudgePin], bool],
    skipped: Callable[[str, JudgePin | None], VerdictT],
) -> list[VerdictT]:
    """The judging service's calls of one batch (`assay.judge.service`), through the Batch API:
    each answer's spend recorded, then its verdict cached, as it is read; once a block budget's
    limit is passed, what failed is not sent again but skipped (`budget_blocked`). No call is in
    flight here, so neither the window nor the circuit applies.

    Raises:
        JudgeUnsupportedError: The configured judge is not the OpenAI-compatible adapter.
    """
    from assay.judge.openai_adapter import OpenAIJudge
    from assay.judge.service import JudgeUnsupportedError

    assert setup.make_judge is not None and setup.batching is not None
    judge = setup.make_judge()
    if not isinstance(judge, OpenAIJudge):
        raise JudgeUnsupportedError(f"the configured judge ({type(judge).__name__}) cannot batch")
    pin = setup.pin

    def keep(position: int, verdict: VerdictT) -> None:
        spend.calls([verdict])
        if cacheable(verdict, pin):
            store.put_once_if_absent(requests[position][0], verdict.model_dump_json().encode())

    def stopped() -> VerdictT | None:
        return skipped(BUDGET_BLOCKED, pin) if spend.guard.stopped is not None else None

    answers: list[VerdictT] = judge_in_batches(
        store, setup.batching, judge, requests, run_id=spend.spender.run_id, keep=keep,
        stopped=stopped,
    )  # fmt: skip
    spend.close()
    return answers


def judge_in_batches(
    store: EvidenceStore,
    batching: Batching,
    judge: OpenAIJudge,
    requests: Sequence[tuple[str, RequestT]],
    *,
    run_id: str,
    keep: Callable[[int, VerdictT], None],
    stopped: Callable[[], VerdictT | None],
) -> list[VerdictT]:
    """Judge `(cache key, request)` pairs through the Batch API (see the module docstring).

    Args:
        keep: Called with each verdict's position as it is read (the service records its
            spend and caches it); an exception stops the judging and is raised.
        stopped: Before a retry batch is sent: None to send it, else the verdict standing for
            every request not yet answered (a block budget's limit was passed).

    Returns:
        One verdict per request, in order.
    """
    kind = _PAIR if requests and isinstance(requests[0][1], PairRequest) else _VERDICT
    verdicts: dict[int, VerdictT] = {}
    positions = {key: position for position, (key, _) in enumerate(requests)}
    client = batching.client()
    try:
        waiting = _submissions_to_resume(store, run_id, positions)
        resumed = {key for submission in waiting for key in _keys(submission)}
        fresh = [p for p in range(len(requests)) if requests[p][0] not in resumed]
        if fresh:
            waiting.append(_submit(store, client, judge, kind, requests, fresh, run_id, 1, None))
        while waiting:
            submission = waiting.pop(0)
            batch = wait_for_batch(
                client, submission.batch_id, len(submission.requests), batching.poll_seconds,
                batching.on_wait,
            )  # fmt: skip
            read = _collect(client, judge, kind, requests, positions, submission, batch)
            for position, verdict in read.answers.items():
                verdicts[position] = verdict
                keep(position, verdict)
            _forget_files(client, submission.input_file_id, batch)
            missing = [
                positions[submission.requests[custom_id].key]
                for custom_id in read.missing
                if submission.requests[custom_id].key in positions
            ]
            collected = Collected(
                batch_id=batch.id, status=batch.status, answered=len(read.answers),
                unanswered=read.missing,
            )  # fmt: skip
            store.put_once_if_absent(
                record_key(run_id, batch.id, collected=True), collected.model_dump_json().encode()
            )
            if not missing:
                continue
            standing_in = stopped()
            late = time.time() - submission.first_submitted_at >= batching.deadline_seconds
            if standing_in is None and submission.round < batching.max_rounds and not late:
                again = _submit(
                    store, client, judge, kind, requests, missing, run_id,
                    submission.round + 1, submission.first_submitted_at,
                )  # fmt: skip
                waiting.append(again)
                continue
            for position in missing:
                verdicts[position] = standing_in or kind.contract.skipped(
                    UNANSWERED, model=judge.model, prompt_version=kind.version(judge)
                )
    finally:
        client.close()
    return [verdicts[position] for position in range(len(requests))]


def _keys(submission: Submission) -> set[str]:
    return {request.key for request in submission.requests.values()}


def _submissions_to_resume(
    store: EvidenceStore, run_id: str, positions: dict[str, int]
) -> list[Submission]:
    """This run's batches not yet collected that ask any of these questions (a resumed run's)."""
    prefix = f"{BATCH_PREFIX}{run_id}/"
    found = []
    for key in store.list(prefix):
        if key.endswith(".collected.json"):
            continue
        submission = Submission.model_validate_json(store.get(key))
        if store.exists(record_key(run_id, submission.batch_id, collected=True)):
            continue
        if _keys(submission) & positions.keys():
            logger.info("judge batch %s: resumed, not sent again", submission.batch_id)
            found.append(submission)
    return sorted(found, key=lambda submission: submission.round)


def _submit(
    store: EvidenceStore,
    client: OpenAI,
    judge: OpenAIJudge,
    kind: _Kind,
    requests: Sequence[tuple[str, Any]],
    positions: Sequence[int],
    run_id: str,
    round_: int,
    first_submitted_at: float | None,
) -> Submission:
    """Upload the requests at `positions` as a JSONL file, create a batch on it, and record it."""
    lines = []
    batched: dict[str, BatchedRequest] = {}
    mode = judge.endpoint_mode or MODES[0]
    response_format = structured_format(mode, kind.contract.name, kind.contract.schema)
    for number, position in enumerate(positions):
        key, request = requests[position]
        custom_id = f"request-{number}"
        user, _ = kind.user(judge, request)
        body: dict[str, Any] = {
            "model": judge.model,
            "messages": [
                {"role": "system", "content": kind.system(judge)},
                {"role": "user", "content": user},
            ],
        }
        if response_format is not None:
            body["response_format"] = response_format
        if judge.temperature is not None:
            body["temperature"] = judge.temperature
        if request.max_output_tokens is not None:
            body["max_tokens"] = request.max_output_tokens
        line = {"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body}
        lines.append(json.dumps(line, ensure_ascii=False))
        batched[custom_id] = BatchedRequest(key=key, case_id=request.case_id)
    data = ("\n".join(lines) + "\n").encode()
    uploaded = client.files.create(
        file=("assay-judge-batch.jsonl", data, "application/jsonl"), purpose="batch"
    )
    batch = client.batches.create(
        input_file_id=uploaded.id,
        endpoint=ENDPOINT,
        completion_window=COMPLETION_WINDOW,
        metadata={"assay_run": run_id[:512], "round": str(round_)},
    )
    submission = Submission(
        batch_id=batch.id,
        input_file_id=uploaded.id,
        round=round_,
        first_submitted_at=first_submitted_at or float(batch.created_at),
        requests=batched,
    )
    store.put_once(record_key(run_id, batch.id), submission.model_dump_json().encode())
    logger.info(
        "judge batch %s: %d request(s) submitted (round %d)", batch.id, len(positions), round_
    )
    return submission


@dataclass
class _Read:
    answers: dict[int, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)


def _collect(
    client: OpenAI,
    judge: OpenAIJudge,
    kind: _Kind,
    requests: Sequence[tuple[str, Any]],
    positions: dict[str, int],
    submission: Submission,
    batch: Any,
) -> _Read:
    """The verdicts the batch's output file holds for these requests, and which were not
    answered (in the error file, answered with an error status, or never reached)."""
    read = _Read()
    replied: set[str] = set()
    for line in _lines(client, batch.output_file_id):
        custom_id = line.get("custom_id")
        response = line.get("response") or {}
        asked = submission.requests.get(custom_id) if isinstance(custom_id, str) else None
        if asked is None or response.get("status_code") != 200:
            continue
        replied.add(asked.key)
        position = positions.get(asked.key)
        if position is not None:
            read.answers[position] = _verdict(judge, kind, requests[position][1], response)
    read.missing = [
        custom_id for custom_id, asked in submission.requests.items() if asked.key not in replied
    ]
    errors: dict[str, int] = {}
    for line in _lines(client, batch.error_file_id):
        error = line.get("error") or (line.get("response") or {}).get("status_code")
        code = str(error.get("code") if isinstance(error, dict) else error)
        errors[code] = errors.get(code, 0) + 1
    if read.missing:  # codes and counts only: an error's message may echo the request
        logger.warning(
            "judge batch %s: %s, %d request(s) unanswered (errors: %s)",
            batch.id,
            batch.status,
            len(read.missing),
            ", ".join(f"{code} {count}" for code, count in sorted(errors.items())) or "none",
        )
    return read


def _verdict(judge: OpenAIJudge, kind: _Kind, request: Any, response: dict[str, Any]) -> Any:
    """A reply's verdict, as the synchronous adapter reads it (`assay.judge.replies`)."""
    completion = response.get("body")
    tokens_in, tokens_out = usage(completion)
    _, redactions = kind.user(judge, request)
    mode = judge.endpoint_mode or MODES[0]
    stamp: dict[str, Any] = {
        "mode": mode,
        "model": judge.model,
        "prompt_version": kind.version(judge),
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "redactions": redactions,
    }
    try:
        reply = kind.contract.parse(reply_text(completion))
    except MalformedReply:
        return kind.contract.skipped(MALFORMED_REPLY, **stamp)
    return kind.answer(request, reply, stamp | {"reason": JUDGED})


def _lines(client: OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if not file_id:
        return []
    text = client.files.content(file_id).text
    found = []
    for raw in text.splitlines():
        if raw.strip():
            parsed = json.loads(raw)
            if isinstance(parsed, dict):
                found.append(parsed)
    return found


def _forget_files(client: OpenAI, input_file_id: str, batch: Any) -> None:
    """Delete what the batch left on the provider: prompts hold candidate outputs."""
    for file_id in (input_file_id, batch.output_file_id, batch.error_file_id):
        if file_id:
            try:
                client.files.delete(file_id)
            except Exception as exc:  # the provider deletes batch files after 30 days anyway
                logger.warning(
                    "judge batch %s: file not deleted (%s)", batch.id, type(exc).__name__
                )
