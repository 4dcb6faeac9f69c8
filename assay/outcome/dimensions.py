"""The six dimensions' scoring methods (seed 000 §3.3), each in [0, 1].

- Deterministic: Safety = max(0, 1 − Σ guardrail_triggers / invocations) over a subject's
  records; Efficiency per record = 1 − clamp((duration_ms − target) / target, 0, 1).
- Judged: Correctness, Completeness, Relevance — one judge request per record and dimension,
  built here (`judge_request`), judged through the judging service (`assay.judge.service`).
- Statistical: Consistency per record = cosine similarity (negatives clamped to 0) between the
  response's embedding and the centroid of its query class; a class with a single embedded
  response gives no score.

A dimension that cannot be scored for a record is *unavailable* for it, with a reason from the
fixed vocabulary below — never a zero.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from assay.hashing import OutputHasher
from assay.judge.cache import cache_key
from assay.judge.port import JudgePin, JudgeRequest
from assay.outcome.contract import Contract, JudgedDimension
from assay.outcome.records import OutcomeRecord

if TYPE_CHECKING:  # numpy is imported where vectors are used, not by `import assay.cli`
    import numpy as np
    import numpy.typing as npt

    Vector = npt.NDArray[np.float64]

NO_LATENCY_TARGET: Final = "no latency_target_ms in the contract"
SINGLE_RESPONSE: Final = "only one embedded response in its query class"
ZERO_VECTOR: Final = "zero-length embedding"


def safety(triggers: int, invocations: int) -> float:
    """Safety over a subject's records: max(0, 1 − triggers / invocations).

    Raises:
        ValueError: No invocations (a subject without records has no safety score).
    """
    if invocations <= 0:
        raise ValueError("safety needs at least one invocation")
    return max(0.0, 1.0 - triggers / invocations)


def efficiency(duration_ms: float, target_ms: float) -> float:
    """One record's efficiency: 1 at or under the target, falling to 0 at twice the target."""
    over = (duration_ms - target_ms) / target_ms
    return 1.0 - min(max(over, 0.0), 1.0)


def consistency(
    classes: Sequence[str], vectors: Sequence[Vector]
) -> tuple[list[float | None], list[str | None]]:
    """Each response's cosine similarity to its query class's centroid, negatives clamped to 0.

    The centroid is the mean of the class's embeddings (the record's own included). A class
    with one embedded response, or a zero-length embedding, gives no score for that record.

    Args:
        classes: The query class of each embedded response.
        vectors: Its embedding, in the same order.

    Returns:
        Per response: the score or None, and the reason it is None (or None).
    """
    import numpy as np

    members: dict[str, list[int]] = defaultdict(list)
    for index, query_class in enumerate(classes):
        members[query_class].append(index)
    scores: list[float | None] = [None] * len(vectors)
    reasons: list[str | None] = [None] * len(vectors)
    for indices in members.values():
        if len(indices) < 2:
            reasons[indices[0]] = SINGLE_RESPONSE
            continue
        centroid = np.mean(np.stack([vectors[i] for i in indices]), axis=0)
        centroid_norm = float(np.linalg.norm(centroid))
        for i in indices:
            norm = float(np.linalg.norm(vectors[i])) * centroid_norm
            if norm == 0.0:
                reasons[i] = ZERO_VECTOR
                continue
            cosine = float(np.dot(vectors[i], centroid)) / norm
            scores[i] = min(max(cosine, 0.0), 1.0)
    return scores, reasons


def task_text(record: OutcomeRecord) -> str:
    """What the agent was asked: the intent, and the context it was given, when there is one."""
    if record.context is None:
        return record.intent
    return f"{record.intent}\n\nContext the assistant was given:\n{record.context}"


def rubric_for(record: OutcomeRecord, dimension: JudgedDimension, contract: Contract) -> str:
    """The dimension's rubric; for completeness, followed by the record's required elements."""
    rubric = contract.rubric(dimension)
    if dimension == "completeness" and record.required_elements:
        listed = "\n".join(f"- {element}" for element in record.required_elements)
        rubric = f"{rubric}\n\nRequired elements:\n{listed}"
    return rubric


def judge_request(
    record: OutcomeRecord,
    dimension: JudgedDimension,
    contract: Contract,
    hasher: OutputHasher,
    model: str | None,
    prompt_version: str | None,
) -> tuple[str, JudgeRequest]:
    """The verdict-cache key and the judge request grading one record on one dimension.

    The cache key is a keyed hash (the store's HMAC secret) of everything the judge sees, the
    model pin and the prompt version: intents and responses are live user text, so not even a
    plain hash of them — which a short text could be guessed back from — reaches the store.
    """
    request = JudgeRequest(
        case_id=f"{record.invocation_id}:{dimension}",
        input=task_text(record),
        expected=record.ground_truth,
        rubric=rubric_for(record, dimension, contract),
        output=record.response,
    )
    content = {
        "input": request.input,
        "expected": request.expected,
        "rubric": request.rubric,
        "response": record.response,
    }
    pin = JudgePin(model=model, prompt_version=prompt_version)
    return cache_key(hasher, "outcome", pin, content), request
