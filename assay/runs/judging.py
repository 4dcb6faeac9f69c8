"""Judging a chunk's `llm_judge` checks through the judging service (`assay.judge.service`).

Runs inside one scoring task, so candidate output text never leaves that task's memory. Every
`llm_judge` check of the chunk becomes a `JudgeRequest`, keyed in the verdict cache by the case
content, the keyed output hash, the rubric, the threshold and the judge pin; the service does
the rest (cache, preflight, bounded calls, ledger). With no judge configured, every `llm_judge`
check is skipped with the reason (fail closed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from assay.finops.budget import Decision
from assay.hashing import OutputHasher
from assay.judge.port import JudgeRequest, Verdict
from assay.judge.service import JudgeSetup, cache_key, judge_requests
from assay.outputs import CandidateOutput
from assay.runs.scoring import CompiledSuite
from assay.scorers import Outcome, Status
from assay.scorers.judge import LlmJudgeConfig
from assay.store import EvidenceStore

CheckKey = tuple[str, int]
"""(case id, position of the check among the case's scorers)."""


@dataclass
class ChunkJudgement:
    """What judging one chunk produced (no text)."""

    outcomes: dict[CheckKey, Outcome]
    calls: int = 0
    cache_hits: int = 0
    cost_usd: float = 0.0
    decision: Decision | None = None


def _outcome(verdict: Verdict) -> Outcome:
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
    suite = compiled.suite
    keys: list[CheckKey] = []
    requests: list[tuple[str, JudgeRequest]] = []
    for output in outputs:
        case = compiled.cases[output.case_id]
        for position, spec in enumerate(suite.scorers_for(case)):
            if not isinstance(spec.config, LlmJudgeConfig):
                continue
            keys.append((case.id, position))
            content = {
                "case": case.content_hash,
                "output": hasher(output.output),
                "rubric": spec.config.rubric,
                "threshold": spec.config.pass_threshold,
            }
            request = JudgeRequest(
                case_id=case.id,
                input=case.input,
                expected=case.expected,
                rubric=spec.config.rubric,
                output=output.output,
                pass_threshold=spec.config.pass_threshold,
            )
            requests.append((cache_key(hasher, "check", setup.pin, content), request))
    if not requests:
        return ChunkJudgement(outcomes={})
    batch = judge_requests(
        store,
        setup,
        requests,
        suite=suite.suite,
        subject=subject,
        run_id=run_id,
        chunk=chunk,
        now=now,
    )
    return ChunkJudgement(
        outcomes={key: _outcome(v) for key, v in zip(keys, batch.verdicts, strict=True)},
        calls=batch.calls,
        cache_hits=batch.cache_hits,
        cost_usd=batch.cost_usd,
        decision=batch.decision,
    )
