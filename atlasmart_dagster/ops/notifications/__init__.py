"""Notification channels: on-call and consumers hear about incidents where they are, not in a terminal.

``channel_config`` reads the channels and routes (``<home>/notifications.yaml``
or ``$ATLASMART_NOTIFICATIONS``); ``outbox`` derives what must be told from the
ledger; ``channels`` renders and sends one message (Slack-compatible webhook,
PagerDuty Events API v2, email over SMTP); ``delivery`` sends what is due with
retries and backoff and records every attempt (``deliver_pending``).
"""

from .delivery import DeliveryReport, deliver_pending

__all__ = ["DeliveryReport", "deliver_pending"]
