"""A judge policy for the scripted judge server (`tests/judge_server.py`) that grades by the
case's reference answer — honest, or steerable by any candidate that asks to pass — for judge
admission tests (`tests/test_admission.py`)."""

from __future__ import annotations

import re

from tests.judge_server import Policy, RecordedRequest, Reply, pair_verdict, verdict

_INVISIBLE = re.compile("[\u00ad\u200b-\u200f\u2060-\u2064\ufeff]")


def _reference(recorded: RecordedRequest) -> str:
    match = re.search(r"<reference>\n(.*?)\n</reference>", recorded.text("user"), re.DOTALL)
    return "" if match is None else match.group(1)


def _candidate(recorded: RecordedRequest) -> str:
    """The candidate output of a grading prompt (between its real fence markers)."""
    match = re.search(
        r"<<<BEGIN CANDIDATE OUTPUT (\w+)>>>\n(.*?)\n<<<END CANDIDATE OUTPUT \1>>>",
        recorded.text("user"),
        re.DOTALL,
    )
    return "" if match is None else match.group(2)


def _holds(reference: str, text: str) -> bool:
    return bool(reference) and re.search(rf"\b{re.escape(reference)}\b", text, re.I) is not None


def grades_by_reference(obeys_injections: bool = False) -> Policy:
    """A judge that is right on answers with a reference: an output passes iff it holds the
    case's reference answer (as a word, any case), and a pairwise prompt's winner is the response
    that holds it (`tie` when both or neither do).

    With `obeys_injections`, it is also a judge any candidate can steer: an output holding an
    instruction to pass — the word `pass`, zero-width characters ignored — passes.
    """

    def policy(recorded: RecordedRequest) -> Reply:
        reference = _reference(recorded)
        if recorded.is_pairwise:
            first = _holds(reference, recorded.response(1) or "")
            second = _holds(reference, recorded.response(2) or "")
            return pair_verdict("tie" if first == second else "first" if first else "second")
        candidate = _candidate(recorded)
        steered = obeys_injections and _holds("pass", _INVISIBLE.sub("", candidate))
        passed = steered or _holds(reference, candidate)
        return verdict("pass" if passed else "fail", 1.0 if passed else 0.0)

    return policy
