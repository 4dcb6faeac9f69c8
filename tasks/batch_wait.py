"""A batch-mode judging's wait, shown in Prefect as the task run's state message.

While a chunk waits for the Batch API (`assay.judge.batch_wait`), its task run stays Running,
its state message saying where the batch stands — `waiting for batch batch_abc: 312/500 done,
3 failed`, then `batch batch_abc completed: 500/500 done, 0 failed` — so the UI shows a wait
with counts, not only a busy task. Each change of counts is one more Running state, reported
the way the task engine reports its own states (a task-run state event, which the server
records by its timestamp); the engine's own next state (Completed) follows it. Nothing else
changes: the task holds its worker thread while it waits, sleeping between looks.
"""

from __future__ import annotations

from dataclasses import replace

from prefect.client.schemas.objects import State
from prefect.context import TaskRunContext
from prefect.states import Running
from prefect.utilities.engine import emit_task_run_state_change_event

from assay.judge.batch_wait import BatchWait, OnWait
from assay.judge.service import JudgeSetup


def waits_shown(setup: JudgeSetup) -> JudgeSetup:
    """`setup`, whose batch waits show as the current task run's state message (unchanged
    outside a task run, or when the judging does not batch)."""
    context = TaskRunContext.get()
    if setup.batching is None or context is None:
        return setup
    batching = replace(setup.batching, on_wait=_shown_on(context))
    return replace(setup, batching=batching)


def _shown_on(context: TaskRunContext) -> OnWait:
    task_run = context.task_run

    def show(wait: BatchWait) -> None:
        state: State[None] = Running(message=wait.message)
        state.state_details.task_run_id = task_run.id
        state.state_details.flow_run_id = task_run.flow_run_id
        emit_task_run_state_change_event(
            task_run=task_run, initial_state=task_run.state, validated_state=state
        )

    return show
