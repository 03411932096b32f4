"""The webhook e2e tests' app: one `webhook()` job on the backend `$XJOBS_E2E_URL` names, its endpoints on the receiver at `$XJOBS_E2E_RECEIVER`.

Each endpoint id is a path of the receiver (`hang`, `flaky`, `gone`, `ok`, `bomb`), signed with
`$XJOBS_E2E_SECRET`; retries come quickly, so a test waits seconds, not minutes.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta

import xjobs
from xjobs.factories import Endpoint, webhook

RECEIVER = os.environ.get("XJOBS_E2E_RECEIVER", "http://127.0.0.1:9")
SECRETS = (os.environ.get("XJOBS_E2E_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),)
ENDPOINTS = {
    path: Endpoint(url=f"{RECEIVER}/{path}", secrets=SECRETS, org_id="org-e2e")
    for path in ("hang", "flaky", "gone", "ok", "bomb")
}

deliver = webhook(
    endpoints=ENDPOINTS,
    ledger=lambda: app.backend.webhooks,
    retry=xjobs.Retry(attempts=5, base=timedelta(milliseconds=200), cap=timedelta(seconds=1)),
    request_timeout=timedelta(seconds=60),
    name="deliver",
    allow_private=True,  # the receiver is on 127.0.0.1
)

app: xjobs.App = xjobs.App(
    backend=os.environ.get("XJOBS_E2E_URL", "memory://"), jobs=[sys.modules[__name__]]
)
