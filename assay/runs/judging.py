"""Judging a chunk's `llm_judge` checks through the judging service (`assay.judge.service`).

Runs inside one scoring task, so candidate output text never leaves that task's memory. Every
`llm_judge` check of the chunk becomes a `JudgeRequest`, keyed in the verdict cache by the case
content, the keyed output hash, the rubric, the threshold and the judge pin; the service does
the rest (cache, preflight, bounded calls, ledger). With `--judge-repeats K` each check is asked
K times (`judge_repeated`) and takes the majority (`assay.judge.reliability.majority`; an even
split is skipped, `judge split`). With no judge configured, every `llm_judge` check is skipped
with the reason (fail closed). A check not asked because the run's judge circuit opened (too many
consecutive failed calls, `assay.judge.service`) is unavailable — `unavailable: judge circuit
open …`, against coverage, named in the run's summary — never a pass. A check `on: trajectory`
asks about the output's tool calls rendered as text (`assay.trajectory.rendered`: tool names and
arguments, redacted like any output); an output without a trajectory fails it, like every
trajectory check. A check `on: conversation` asks about the record's whole conversation (every
message of `AgentRecord.turns`, each redacted here before it is rendered under its role's header,
`assay.judge.prompts.conversation_block`), with the conversation frame before its rubric (or the
template it names, `conversation_rubric`); its cache key covers the redacted conversation, and
the texts' versions join the run's prompt version (`suite_judge_setup`). A record that shows no
messages (an `output` line) leaves it unavailable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Final

from assay.finops.budget import Decision
from assay.hashing import OutputHasher
from assay.intake.record import Evidence
from assay.judge.agreement import JuryTally
from assay.judge.cache import cache_key
from assay.judge.circuit import CIRCUIT_OPEN, CIRCUIT_OPEN_WHY
from assay.judge.port import JUDGE_SPLIT, JudgeRequest, Verdict
from assay.judge.prompts import conversation_block, conversation_rubric, with_texts
from assay.judge.redaction import Redactor, add_counts
from assay.judge.reliability import majority
from assay.judge.service import JudgeSetup, judge_repeated
from assay.judge.spending import Spender
from assay.outputs.candidate import CandidateOutput
from assay.runs.scoring import CompiledSuite
from assay.scorers import Outcome, Status
from assay.scorers._registry import UNAVAILABLE
from assay.scorers.judge import LlmJudgeConfig
from assay.scorers.trajectory import NO_TRAJECTORY
from assay.store import EvidenceStore
from assay.suites.suite import Suite
from assay.trajectory import rendered

JUDGED_TRAJECTORY: Final = (Evidence.TOOL_NAMES, Evidence.TOOL_ARGUMENTS)
"""What a judge of the trajectory reads: the calls and their arguments."""

CheckKey = tuple[str, int]
"""(case id, position of the check among the case's scorers)."""

NO_CONVERSATION: Final = Outcome(
    Status.SKIPPED,
    0.0,
    UNAVAILABLE + "the record shows no messages, only its final text (an `output` line)",
)
"""A conversation check of a record without messages: not scored, against coverage."""


def suite_judge_setup(setup: JudgeSetup, suite: Suite) -> JudgeSetup:
    """The run's judge setup for `suite`: its prompt version joined by the versions of the
    conversation texts the suite's checks read (the frame, each template named), so that a run
    records, caches under and is calibrated for exactly what its judge read. Unchanged for a
    suite without conversation checks, and where no judge is configured."""
    if setup.prompt_version is None:
        return setup
    rubrics = {
        spec.config.rubric
        for case in suite.cases
        for spec in suite.scorers_for(case)
        if isinstance(spec.config, LlmJudgeConfig) and spec.config.on == "conversation"
    }
    if not rubrics:
        return setup
    versions = [version for rubric in rubrics for version in conversation_rubric(rubric).versions]
    return replace(setup, prompt_version=with_texts(setup.prompt_version, versions))


@dataclass
class ChunkJudgement:
    """What judging one chunk produced (no text)."""

    outcomes: dict[CheckKey, Outcome]
    calls: int = 0
    cache_hits: int = 0
    cost_usd: float = 0.0
    decision: Decision | None = None
    redactions: dict[str, int] = field(default_factory=dict)
    """Redactions per kind in the checks' judge prompts (counted once per check)."""
    repeated: int = 0
    """Checks with all K repeats judged (K > 1 only): the flip rate's denominator."""
    unanimous: int = 0
    """Of those, checks whose K verdicts agreed."""
    split: int = 0
    """Checks whose verdicts split evenly: skipped with `judge split`."""
    over_bound: int = 0
    """Judge calls that reported more output tokens than `max_tokens` allows."""
    jury: JuryTally | None = None
    """A jury's verdicts tallied for its agreement (each repeat of a check its own item)."""


def _outcome(verdict: Verdict) -> Outcome:
    if verdict.reason == CIRCUIT_OPEN:
        return Outcome(Status.SKIPPED, 0.0, UNAVAILABLE + CIRCUIT_OPEN_WHY)
    if verdict.status == "skipped":
        return Outcome(Status.SKIPPED, 0.0, verdict.reason)
    return Outcome(Status.PASS if verdict.status == "pass" else Status.FAIL, verdict.score, "")


def judge_chunk(
    store: EvidenceStore,
    compiled: CompiledSuite,
    outputs: Sequence[CandidateOutput],
    hasher: OutputHasher,
    setup: JudgeSetup,
    *,
    run_id: str,
    chunk: int,
    subject: str,
    now: datetime | None = None,
) -> ChunkJudgement:
    """Judge every `llm_judge` check of one chunk's outputs (see the module docstring)."""
    asked = chunk_questions(compiled, outputs, hasher, setup)
    if not asked.requests:
        return ChunkJudgement(outcomes=asked.unjudged)
    spender = Spender(run_id, compiled.suite.suite, subject, now or datetime.now(UTC))
    batch, repeats = judge_repeated(store, setup, asked.requests, spender, chunk)
    judgement = ChunkJudgement(
        outcomes=asked.unjudged,
        calls=batch.calls,
        cache_hits=batch.cache_hits,
        cost_usd=batch.cost_usd,
        decision=batch.decision,
        over_bound=batch.over_bound,
    )
    if batch.by_juror is not None and setup.jury is not None:
        judgement.jury = JuryTally.of(batch.by_juror, setup.jury.aggregation)
    judgement.redactions = asked.redactions
    for key, verdicts in zip(asked.keys, repeats, strict=True):
        # One verdict is its own majority: no copy per check (a cached re-run's are all hits).
        verdict, unanimous = (verdicts[0], None) if len(verdicts) == 1 else majority(verdicts)
        judgement.outcomes[key] = _outcome(verdict)
        if verdicts[0].redactions:
            judgement.redactions = add_counts(judgement.redactions, verdicts[0].redactions)
        if setup.repeats > 1:
            judgement.repeated += unanimous is not None
            judgement.unanimous += unanimous is True
            judgement.split += verdict.reason == JUDGE_SPLIT
    return judgement


@dataclass
class ChunkQuestions:
    """What judging one chunk asks the judge (in memory only): one `(cache key, request)` per
    judged check, the checks' keys in the same order, the checks whose record cannot answer
    them (unavailable), and the redactions in the conversations asked about."""

    keys: list[CheckKey]
    requests: list[tuple[str, JudgeRequest]]
    unjudged: dict[CheckKey, Outcome]
    redactions: dict[str, int]


def chunk_questions(
    compiled: CompiledSuite,
    outputs: Sequence[CandidateOutput],
    hasher: OutputHasher,
    setup: JudgeSetup,
) -> ChunkQuestions:
    """Every `llm_judge` check of one chunk's outputs as the judge would be asked it, under its
    verdict-cache key, without asking: what `judge_chunk` judges and the cost plan
    (`assay.runs.cost_plan`) counts."""
    suite = compiled.suite
    keys: list[CheckKey] = []
    requests: list[tuple[str, JudgeRequest]] = []
    unjudged: dict[CheckKey, Outcome] = {}
    """Checks of outputs whose record did not capture what they judge: unavailable."""
    conversations = _Conversations(Redactor(setup.redaction))
    for output in outputs:
        case = compiled.cases[output.case_id]
        for position, spec in enumerate(suite.scorers_for(case)):
            if not isinstance(spec.config, LlmJudgeConfig):
                continue
            if spec.config.on == "conversation":
                asked = conversations.asked(output, spec.config)
                if isinstance(asked, Outcome):
                    unjudged[(case.id, position)] = asked
                    continue
                keys.append((case.id, position))
                request = JudgeRequest(
                    case_id=case.id,
                    input=case.input,
                    expected=case.expected,
                    rubric=asked.rubric,
                    output=asked.conversation,
                    pass_threshold=spec.config.pass_threshold,
                )
                content = {
                    "case": case.content_hash,
                    "on": "conversation",
                    "output": hasher(asked.conversation),
                    "rubric": asked.rubric,
                    "threshold": spec.config.pass_threshold,
                }
                requests.append((cache_key(hasher, "check", setup.pin, content), request))
                continue
            judged = output.output
            needs = JUDGED_TRAJECTORY if spec.config.on == "trajectory" else (Evidence.TEXT,)
            why = next((output.unseen[e] for e in needs if e in output.unseen), None)
            if why is not None:
                unjudged[(case.id, position)] = Outcome(Status.SKIPPED, 0.0, UNAVAILABLE + why)
                continue
            if spec.config.on == "trajectory":
                if output.trajectory is None:
                    unjudged[(case.id, position)] = NO_TRAJECTORY
                    continue
                judged = rendered(output.trajectory)
            keys.append((case.id, position))
            content = {
                "case": case.content_hash,
                "output": hasher(judged),
                "rubric": spec.config.rubric,
                "threshold": spec.config.pass_threshold,
            }
            if spec.config.on == "trajectory":
                content["on"] = "trajectory"
            request = JudgeRequest(
                case_id=case.id,
                input=case.input,
                expected=case.expected,
                rubric=spec.config.rubric,
                output=judged,
                pass_threshold=spec.config.pass_threshold,
            )
            requests.append((cache_key(hasher, "check", setup.pin, content), request))
    return ChunkQuestions(keys, requests, unjudged, conversations.redactions)


@dataclass(frozen=True, slots=True)
class _Asked:
    """What a conversation check asks the judge: the framed rubric and the redacted
    conversation under its turn headers (in memory only)."""

    rubric: str
    conversation: str


@dataclass
class _Conversations:
    """Renders each output's conversation once per chunk, redacting every message first, and
    each rubric's frame once; counts the redactions per conversation (not per check)."""

    redactor: Redactor
    redactions: dict[str, int] = field(default_factory=dict)
    _rendered: dict[int, str] = field(default_factory=dict)
    _rubrics: dict[str, str] = field(default_factory=dict)

    def asked(self, output: CandidateOutput, config: LlmJudgeConfig) -> _Asked | Outcome:
        """What the check asks about `output`, or the outcome standing for it (unavailable)."""
        record = output.record
        if record is None or not record.turns:
            return NO_CONVERSATION
        conversation = self._rendered.get(id(output))
        if conversation is None:
            turns: list[tuple[str, str]] = []
            counts: dict[str, int] = {}
            for turn in record.turns:
                redacted = self.redactor.redact(turn.text)
                turns.append((turn.role, redacted.text))
                counts = add_counts(counts, redacted.counts)
            conversation = self._rendered[id(output)] = conversation_block(turns)
            self.redactions = add_counts(self.redactions, counts)
        rubric = self._rubrics.get(config.rubric)
        if rubric is None:
            rubric = self._rubrics[config.rubric] = conversation_rubric(config.rubric).text
        return _Asked(rubric, conversation)
