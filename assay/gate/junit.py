"""JUnit XML for CI systems: one test case per suite case, one per gate rule.

CI systems (GitHub Actions reporters, GitLab, Jenkins) render JUnit natively, so a failed gate
shows which cases failed and which rule stopped the merge. Failure messages are the cases'
redacted labels (built from scorer configuration, never from output text); for a run with
trials, each case is one test case, decided over its trials, and its message (a passed case's
`system-out`) gives the trial counts. A conversation is one test case: its message names
its first failing turn and the numbers of every failing turn, and the failure's text lists each
turn's verdict and label (docs/conversations.md). A case whose other checks passed but whose
`llm_judge` check was not judged is `skipped`, never a pass.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from assay.gate.decision import GateDecision
from assay.runs.conversations import turn_prefix
from assay.runs.scoring import CaseEvidence
from assay.runs.trial_rule import TRIALS_LABEL
from assay.scorers import Status


def _suite(parent: ET.Element, name: str, tests: int, failures: int, skipped: int) -> ET.Element:
    return ET.SubElement(
        parent,
        "testsuite",
        name=name,
        tests=str(tests),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
    )


def _failure_message(case: CaseEvidence) -> str:
    """The case's label; a conversation's adds which of its turns failed (`failing turns 2, 3
    of 3`) when more than the one its label names."""
    failing = [t.turn for t in case.turns or () if t.status in (Status.FAIL, Status.ERROR)]
    if len(failing) < 2:
        return case.label
    numbers = ", ".join(map(str, failing))
    return f"{case.label} (failing turns {numbers} of {len(case.turns or ())})"


def _turn_lines(case: CaseEvidence) -> str:
    """Each turn of a conversation: `turn 2 of 3: fail — contains "A-1042": missing`."""
    count = len(case.turns or ())
    return "\n".join(
        f"{turn_prefix(t.turn, count)}: {'missing' if t.missing else t.status.value} — {t.label}"
        for t in case.turns or ()
    )


def junit_xml(decision: GateDecision, cases: Sequence[CaseEvidence]) -> str:
    """Render a gate decision and its run's per-case evidence as a JUnit XML document."""
    root = ET.Element("testsuites", name=f"assay gate {decision.run_id}")
    unjudged = set(decision.unjudged_cases)
    failed = [c for c in cases if c.status in (Status.FAIL, Status.ERROR)]
    # A case that passed only because its judge check was skipped is shown as skipped: CI
    # dashboards must not count it as a pass.
    skipped = [
        c
        for c in cases
        if c.status is Status.SKIPPED or (c.status is Status.PASS and c.case_id in unjudged)
    ]
    classname = f"assay.{decision.suite}"
    case_suite = _suite(
        root,
        f"{decision.suite}@{decision.suite_version} · {decision.subject}",
        len(cases),
        len(failed),
        len(skipped),
    )
    for case in cases:
        element = ET.SubElement(case_suite, "testcase", classname=classname, name=case.case_id)
        if case.status is Status.SKIPPED:
            ET.SubElement(element, "skipped", message=case.label)
        elif case.status is Status.PASS and case.case_id in unjudged:
            ET.SubElement(element, "skipped", message=f"llm_judge not judged: {case.label}")
        elif case.status is not Status.PASS:
            kind = "no output" if case.missing else case.status.value
            failure = ET.SubElement(element, "failure", message=_failure_message(case), type=kind)
            if case.turns:
                failure.text = _turn_lines(case)
        elif TRIALS_LABEL.search(case.label):
            ET.SubElement(element, "system-out").text = case.label
    rules_failed = [r for r in decision.rules if not r.passed]
    rule_suite = _suite(root, "assay gate rules", len(decision.rules), len(rules_failed), 0)
    for rule in decision.rules:
        element = ET.SubElement(rule_suite, "testcase", classname="assay.gate", name=rule.rule)
        if not rule.passed:
            ET.SubElement(element, "failure", message=rule.detail, type=rule.rule)
    if decision.warnings:
        ET.SubElement(rule_suite, "system-out").text = "\n".join(
            f"warning: {note}" for note in decision.warnings
        )
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
