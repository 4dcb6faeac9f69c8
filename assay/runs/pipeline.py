"""The bookkeeping of a suite run around its steps: its inputs checked once before any flow run
exists (`prepare_run`, called by the launcher, flows/launch.py), the plan and the chunk jobs it is
cut into (`set_up_run`), what a scored chunk hands back (`ChunkSummary`), and the chunks merged
into the run's figures (`merge_chunks`). The `suite-run` flow (flows/suite_run.py) only sequences
them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel

from assay.finops.budget import Decision, strictest
from assay.hashing import OutputHasher, store_secret
from assay.judge.agreement import JuryTally
from assay.judge.config import JudgeConfig
from assay.judge.port import JudgePin
from assay.judge.redaction import add_counts
from assay.judge.reliability import Correction, JudgeReliability, run_reliability
from assay.outputs.slices import OutputsIndex, OutputSlice
from assay.runs.baselines import named_baseline
from assay.runs.lifecycle import resumed_run_id
from assay.runs.metrics import RunMetrics
from assay.runs.options import RunOptions
from assay.runs.records import RunPlan
from assay.runs.sampling import index_run_outputs
from assay.store import EvidenceStore
from assay.subject import Subject
from assay.suites import registry
from assay.suites.registry import SuiteVersion
from assay.suites.suite import TrialsPolicy


@dataclass(frozen=True)
class PreparedRun:
    """A run whose inputs were checked: its options name the suite's published version."""

    options: RunOptions
    subject: Subject
    store: EvidenceStore

    @property
    def labels(self) -> tuple[str, ...]:
        """The run's tags: its suite's name and its subject."""
        return (f"suite:{registry.parse_ref(self.options.suite)[0]}", f"subject:{self.subject}")


def prepare_run(
    evidence: EvidenceStore, options: RunOptions, *, suite_files: bool = True
) -> PreparedRun:
    """Check a run's inputs once, before any flow run exists: the suite is resolved (a suite
    file published when `suite_files`), the subject, baseline and resumed run checked, and the
    outputs validated; the index that validation builds is kept for the flow's ingest in this
    process (`assay.runs.sampling`), so the outputs are read in full once.

    `suite_files` is False for the service: it names published suites only, and never reads its
    host's files on a caller's say-so.
    """
    if suite_files:
        version, suite = registry.publish_or_resolve(evidence, options.suite)
    else:
        version, suite = registry.resolve(evidence, options.suite)
    who = Subject.given_or_default(options.subject, options.outputs)
    if options.baseline is not None:
        baseline = named_baseline(
            evidence, options.baseline, version.suite, cross_suite=options.cross_suite
        )
        options = options.model_copy(update={"baseline": baseline})
    if options.resume and options.run_id is not None:
        options = options.model_copy(update={"run_id": resumed_run_id(evidence, options.run_id)})
    index_run_outputs(suite, options.outputs, options.sample, options.seed, options.chunk_size)
    named = {"suite": version.ref} | ({} if options.storage_block else {"store": evidence.uri})
    return PreparedRun(options=options.model_copy(update=named), subject=who, store=evidence)


class ChunkJob(BaseModel):
    """One scoring chunk's work: its slice of outputs (or the cases that have none), and how to
    score and judge it. Only references and case ids: never output text."""

    store: str
    """The store reference tasks open (`flows`' `store_reference`)."""
    run_id: str
    suite_ref: str
    chunk: int
    piece: OutputSlice | None
    missing: list[str]
    sample: int | None
    seed: int
    subject: str
    judge_block: str | None = None
    fresh_judge: bool = False
    judge_repeats: int | None = None
    judge: JudgeConfig | None = None
    """The environment's judge as resolved where the run was launched (no `judge_block`), so
    every worker judges with the same model, endpoint, concurrency, prices and redaction; None:
    a block's, or none configured. Never the API key: each process brings its own."""


class CaseRow(BaseModel):
    """One row of the per-case table artifact (no output text)."""

    case_id: str
    status: str
    score: float | None
    label: str


class ChunkSummary(BaseModel):
    """What the flow keeps of a persisted chunk: counts and a few table rows."""

    chunk: int
    written: bool
    """False when identical evidence was already there (a retry or a resumed run)."""
    metrics: RunMetrics
    rows: list[CaseRow]
    budget: Decision | None = None
    """The FinOps preflight's decision, when this chunk had judge calls to make."""
    judge: JudgePin | None = None
    """The judge this chunk was set up with, when the suite has llm_judge checks."""
    redactions: dict[str, int] = {}
    """Redactions per kind in this chunk's judge prompts (counts only)."""
    judge_repeats: int = 1
    """Verdicts asked per llm_judge check (the judge setup's K)."""
    jury: JuryTally | None = None
    """A jury's verdicts in this chunk, tallied for its agreement (sums only)."""


@dataclass(frozen=True)
class RunSetup:
    plan: RunPlan
    regression_threshold: float
    jobs: list[ChunkJob]


def set_up_run(
    store: str,
    evidence: EvidenceStore,
    options: RunOptions,
    version: SuiteVersion,
    index: OutputsIndex,
    run_id: str,
) -> RunSetup:
    """The run's plan, and its chunk jobs: the indexed slices, then the cases with no output."""
    _, golden = registry.resolve(evidence, version.ref)
    who = Subject.given_or_default(options.subject, options.outputs)
    size = options.chunk_size
    missing = [index.missing[i : i + size] for i in range(0, len(index.missing), size)]
    pieces: list[tuple[OutputSlice | None, list[str]]] = [(piece, []) for piece in index.slices]
    pieces += [(None, ids) for ids in missing]
    plan = RunPlan(
        run_id=run_id,
        suite=version.suite,
        suite_version=version.version,
        subject_kind=who.kind,
        subject_id=who.id,
        variant=who.variant,
        pass_threshold=golden.pass_threshold,
        min_coverage=golden.min_coverage,
        outputs=str(options.outputs),
        sample=options.sample,
        seed=options.seed if options.sample is not None else None,
        cases=sum(p.cases for p in index.slices) + len(index.missing),
        chunks=len(pieces),
        trials_policy=golden.trials or (TrialsPolicy() if index.trials else None),
        # Keyed like output hashes: a plain digest of a small run's outputs could be guessed.
        outputs_digest=OutputHasher(store_secret(evidence))(index.digest()),
    )
    judge = None if options.judge_block else JudgeConfig.from_environ()
    jobs = [
        ChunkJob(
            store=store,
            run_id=run_id,
            suite_ref=version.ref,
            chunk=number,
            piece=piece,
            missing=ids,
            sample=options.sample,
            seed=options.seed,
            subject=plan.subject,
            judge_block=options.judge_block,
            fresh_judge=options.fresh_judge,
            judge_repeats=options.judge_repeats,
            judge=judge,
        )
        for number, (piece, ids) in enumerate(pieces)
    ]
    return RunSetup(plan=plan, regression_threshold=golden.regression_threshold, jobs=jobs)


@dataclass
class MergedChunks:
    """Every chunk's figures, merged in chunk order."""

    metrics: RunMetrics = field(default_factory=RunMetrics)
    budget: Decision | None = None
    judge: JudgePin | None = None
    redactions: dict[str, int] | None = None
    repeats: int = 1
    jury: JuryTally | None = None
    rows: list[CaseRow] = field(default_factory=list)

    def reliability(self, correction: Correction | None) -> JudgeReliability:
        """The run's judge figures (consistency, redactions, the PPI++ correction)."""
        return run_reliability(
            repeats=self.repeats,
            repeated=self.metrics.repeated_checks,
            unanimous=self.metrics.unanimous_checks,
            split=self.metrics.split_checks,
            redactions=self.redactions,
            correction=correction,
            jury=self.jury,
        )


def merge_chunks(summaries: Iterable[ChunkSummary]) -> MergedChunks:
    """Merged in chunk order, not completion order: float sums then match a sequential run."""
    merged = MergedChunks()
    for summary in sorted(summaries, key=lambda done: done.chunk):
        merged.metrics.merge(summary.metrics)
        merged.budget = strictest(merged.budget, summary.budget)
        merged.judge = summary.judge or merged.judge
        if summary.judge is not None:
            merged.redactions = add_counts(merged.redactions or {}, summary.redactions)
            merged.repeats = max(merged.repeats, summary.judge_repeats)
        if summary.jury is not None:
            if merged.jury is None:
                merged.jury = summary.jury.model_copy(deep=True)
            else:
                merged.jury.merge(summary.jury)
        merged.rows.extend(summary.rows)
    return merged
