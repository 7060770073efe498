"""A message, as the outbox derives it and every channel kind renders it: plain data, free of any channel.

It lives apart from the outbox (which reads the ledger, the incident record and
the Dagster instance) so that the channel kinds, and the configuration that
reads them, need none of that to be imported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

ONCALL = "oncall"  # the on-call route; every other route is a consumer group's

# Message kinds.
INCIDENT_OPENED = "incident_opened"
INCIDENT_EVIDENCE = "incident_evidence"
INCIDENT_STATUS = "incident_status"
INCIDENT_RESOLVED = "incident_resolved"
WITHDRAWAL = "withdrawal"
HOLD_WAITING = "hold_waiting"
DEAD_RUN = "dead_run"
CONSUMER_NOTICE = "consumer_notice"
TEST = "test"  # ``atlasmart notify test``: tells nothing, never recorded
MESSAGE_KINDS = (INCIDENT_OPENED, INCIDENT_EVIDENCE, INCIDENT_STATUS, INCIDENT_RESOLVED, WITHDRAWAL, HOLD_WAITING,
                 DEAD_RUN, CONSUMER_NOTICE)  # what the outbox derives (TEST is sent by hand only)

# The facts and details that name who acted (never redacted, see Message.redacted).
IDENTITIES = ("Opened by", "By", "Resolved by", "opened_by")


@dataclass(frozen=True)
class Message:
    """One thing to tell one route, as every channel kind renders it.

    Nothing here belongs to one channel kind: a kind derives what it needs from
    the message (PagerDuty its event action from ``kind``, see kinds/pagerduty.py).
    """

    key: str  # the dedup key: the same message always has the same key
    route: str  # ``oncall`` or a consumer group's asset name
    kind: str
    at: str  # when it happened, as recorded
    fresh: bool  # recent enough to be announced when it has no delivery record yet
    headline: str  # a few words: "INC-0001 opened"
    summary: str  # one sentence: the incident's title, the notice's summary
    facts: tuple[tuple[str, str], ...] = ()  # short label / value pairs
    text: str = ""  # the whole message as plain text (Markdown), for email and webhook sections
    incident_id: str | None = None
    details: dict[str, Any] = field(default_factory=dict)  # structured details (PagerDuty custom_details)
    recipient: str | None = None  # a consumer group's contact (an email channel mails it)

    def redacted(self, clean: Callable[[str], str]) -> Message:
        """The message with every text passed through the PII redactor (applied before anything is sent).

        Who acted is left as recorded: actors are staff identities (``--actor``,
        ``--by``), which the ledger keeps as typed; the redactor would take any
        address for a customer's.
        """
        return replace(self, headline=clean(self.headline), summary=clean(self.summary),
                       facts=tuple((label, value if label in IDENTITIES else clean(value))
                                   for label, value in self.facts),
                       text=clean(self.text), details=_clean_values(self.details, clean))


def _clean_values(value: Any, clean: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {k: v if k in IDENTITIES else _clean_values(v, clean) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean_values(v, clean) for v in value]
    return value
