"""Notification channels: on-call and consumers hear about incidents where they are, not in a terminal.

``channel_config`` reads the channels and routes (``<home>/notifications.yaml``
or ``$ATLASMART_NOTIFICATIONS``); ``outbox`` derives what must be told from the
ledger (``message``: what one message is); ``kinds`` holds one module per
channel kind, each rendering and sending a message its way (Slack-compatible
webhook, PagerDuty Events API v2, email over SMTP), registered in
``kinds.KINDS``; ``channels`` sends one message by its channel's kind, under
the attempt's deadline, secrets scrubbed; ``delivery`` sends what is due with
retries and backoff and records every attempt (``deliver_pending``).
"""

from .delivery import DeliveryReport, deliver_pending

__all__ = ["DeliveryReport", "deliver_pending"]
