"""The NotificationTarget block: where Assay sends findings."""

from __future__ import annotations

import inspect

from prefect.blocks.abstract import NotificationBlock
from prefect.blocks.core import Block
from prefect.utilities.asyncutils import run_coro_as_sync
from pydantic import Field


class NotificationTarget(Block):
    """Sends Assay findings through a saved Prefect notification block (webhook, Slack, …).

    Example:
        ```python
        from prefect.blocks.notifications import SlackWebhook
        from blocks import NotificationTarget

        SlackWebhook(url="https://hooks.slack.com/…").save("eval-alerts")
        NotificationTarget(notification_block="slack-webhook/eval-alerts").save("default")
        ```
    """

    _block_type_name = "Assay Notification Target"
    _block_type_slug = "assay-notification-target"
    _description = "Routes Assay findings to a Prefect notification block."

    notification_block: str = Field(
        description="Saved notification block as `block-type-slug/name`, e.g. "
        "`custom-webhook/eval-alerts` or `slack-webhook/eval-alerts`."
    )
    finding_kinds: list[str] = Field(
        default_factory=lambda: [
            "eval_regression",
            "budget_blocked",
            "judge_uncalibrated",
            "governance_action",
            "monitor_threshold",
            "monitor_no_data",
        ],
        description="Finding kinds to send; others are recorded but not sent.",
    )

    def notify(self, subject: str, body: str) -> None:
        """Send one message through the referenced notification block."""
        target = Block.load(self.notification_block)
        if not isinstance(target, NotificationBlock):
            raise TypeError(f"{self.notification_block} is not a notification block")
        sent = target.notify(body=body, subject=subject)
        if inspect.isawaitable(sent):  # some notification blocks are async-only
            run_coro_as_sync(sent)
