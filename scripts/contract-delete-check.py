"""DELETE /v1/me step by step against a live gateway (scripts/contract-check.sh runs it).

CONTRACT_BASE is the gateway's URL, CONTRACT_TOKEN the access token of a fresh user, who is
deleted here. Exits 1, saying which step, when an answer is not the documented one.
"""

import json
import os
import sys
import urllib.error
import urllib.request

BASE = os.environ["CONTRACT_BASE"]
TOKEN = os.environ["CONTRACT_TOKEN"]


def call(method, path, token=TOKEN, key=None):
    """The status, headers and parsed JSON body (None when there is none) of one request."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if key is not None:
        headers["Idempotency-Key"] = key
    request = urllib.request.Request(BASE + path, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            status, got, body = response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        status, got, body = error.code, error.headers, error.read()
    return status, got, (json.loads(body) if body else None)


failures = []


def expect(step, condition, got):
    if not condition:
        failures.append(f"{step}: got {got}")


status, _, body = call("DELETE", "/v1/me", token=None)
expect("no token: 401", status == 401, (status, body))
status, _, body = call("DELETE", "/v1/me", key="not valid")
expect("an Idempotency-Key with a space: 400 invalid-idempotency-key",
       status == 400 and (body or {}).get("code") == "invalid-idempotency-key", (status, body))
status, _, body = call("GET", "/v1/credits")
expect("before the deletion the token works: 200", status == 200, (status, body))

status, headers, body = call("DELETE", "/v1/me", key="contract-delete-1")
job = (body or {}).get("jobId")
expect("the deletion: 202 with a jobId", status == 202 and isinstance(job, str), (status, body))
expect("the deletion: Location names the job", headers.get("Location") == f"/v1/jobs/{job}", headers.get("Location"))

status, _, body = call("DELETE", "/v1/me", key="contract-delete-1")
expect("the same Idempotency-Key again: 202 with the same job",
       status == 202 and (body or {}).get("jobId") == job, (status, body))
for method, path in [("GET", "/v1/credits"), ("GET", "/v1/profiles"), ("POST", "/v1/me/export")]:
    status, _, body = call(method, path)
    expect(f"after the deletion {method} {path}: 401 user-deleted",
           status == 401 and (body or {}).get("code") == "user-deleted", (status, body))

for failure in failures:
    print(f"contract-delete-check: {failure}", file=sys.stderr)
if failures:
    sys.exit(1)
print("contract-delete-check: DELETE /v1/me answered as documented (8 steps)")
