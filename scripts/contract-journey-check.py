"""A client's journey against a live gateway, every answer checked against openapi.yaml
(scripts/contract-check.sh runs it, with the schemathesis virtualenv's Python, whose PyYAML and
jsonschema_rs it uses).

Registers, opens the event stream, creates two profiles and waits for their chart.calculate jobs,
reads the jobs, the profiles and the natal charts, asks for a progression, a month of transits
and a synastry and reads each job and its stored result, then reads the events the stream
carried. Each answer's body is validated against the schema the document gives for that
operation, status and content type; each event's `data:` against `Event`. Where generated
requests (schemathesis) rarely reach a computed chart or a finished job, this walks there.

CONTRACT_BASE is the gateway's URL. Exits 1 naming the answer and the path inside the body
that does not match (e.g. `GET /v1/profiles/{id}/chart 200: /planets/0/sign: ...`).
"""

import json
import os
import queue
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

import jsonschema_rs
import yaml

BASE = os.environ["CONTRACT_BASE"]
DOCUMENT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "openapi.yaml")
with open(DOCUMENT_PATH, encoding="utf-8") as handle:
    DOCUMENT = yaml.safe_load(handle)
# Ids prefixed so that parallel runs against one gateway never share a name.
RUN = uuid.uuid4().hex[:8]

failures = []
checked = 0


def validator(schema):
    """A validator for `schema`, its `#/components/...` references resolved in the document."""
    return jsonschema_rs.Draft202012Validator(
        {**schema, "components": DOCUMENT["components"]}, validate_formats=True
    )


def component(name):
    return validator({"$ref": f"#/components/schemas/{name}"})


def mismatches(schema_validator, body, most=10):
    """`/path/in/body: message` for the first `most` places the body does not match."""
    found = []
    for error in schema_validator.iter_errors(body):
        if len(found) == most:
            found.append("… (more mismatches in this body)")
            break
        path = "/" + "/".join(str(part) for part in error.instance_path)
        found.append(f"{path}: {error.message}"[:400])
    return found


def response_schema(method, template, status, content_type):
    """The schema openapi.yaml gives this answer, or a failure saying what it lacks."""
    operation = DOCUMENT["paths"].get(template, {}).get(method.lower())
    if operation is None:
        raise LookupError(f"no operation {method} {template} in the document")
    response = operation["responses"].get(str(status))
    if response is None:
        raise LookupError(f"status {status} is not documented")
    if "$ref" in response:
        response = DOCUMENT["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
    media = (content_type or "").split(";")[0].strip()
    content = response.get("content", {})
    if media not in content:
        raise LookupError(f"content type {media!r} is not documented (documented: {sorted(content)})")
    return content[media]["schema"]


def call(method, template, path=None, token=None, body=None, expect=200):
    """One request; its answer's body, validated against the document (failures recorded)."""
    global checked
    path = path or template
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(BASE + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, got, raw = response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        status, got, raw = error.code, error.headers, error.read()
    step = f"{method} {template} {status}"
    parsed = json.loads(raw) if raw else None
    if status != expect:
        failures.append(f"{step}: expected {expect}: {raw[:300]!r}")
        return None
    checked += 1
    try:
        schema = response_schema(method, template, status, got.get("Content-Type"))
    except LookupError as missing:
        failures.append(f"{step}: {missing}")
        return parsed
    failures.extend(f"{step}: {problem}" for problem in mismatches(validator(schema), parsed))
    return parsed


def finished_job(job_id, token, kind):
    """The job once terminal (long polls of at most 10 s, 30 s in all); `succeeded` expected."""
    deadline = time.monotonic() + 30
    while True:
        job = call("GET", "/v1/jobs/{id}", f"/v1/jobs/{job_id}?wait=10", token=token)
        if job is None or job.get("status") in ("succeeded", "failed", "dead", "cancelled"):
            break
        if time.monotonic() > deadline:
            failures.append(f"{kind} job {job_id}: not finished within 30 s: {job}")
            return None
    if job is not None and job.get("status") != "succeeded":
        failures.append(f"{kind} job {job_id}: expected succeeded, got {job}")
        return None
    return job


class EventReader(threading.Thread):
    """Reads `GET /v1/events` into a queue of (event type, parsed data); a daemon, so an open
    stream never holds the check up (the process's exit closes it)."""

    def __init__(self, token):
        super().__init__(daemon=True)
        self.token = token
        self.events = queue.Queue()
        self.opened = threading.Event()
        self.failure = None

    def run(self):
        request = urllib.request.Request(
            BASE + "/v1/events",
            headers={"Authorization": f"Bearer {self.token}", "Accept": "text/event-stream"},
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                if not response.headers.get("Content-Type", "").startswith("text/event-stream"):
                    self.failure = f"GET /v1/events: content type {response.headers.get('Content-Type')!r}"
                    self.opened.set()
                    return
                kind, data = None, []
                for raw in response:
                    line = raw.decode("utf-8").rstrip("\r\n")
                    # The first comment is written when the stream is registered.
                    if line.startswith(":"):
                        self.opened.set()
                    elif line.startswith("event:"):
                        kind = line[6:].strip()
                    elif line.startswith("data:"):
                        data.append(line[5:].strip())
                    elif line == "" and data:
                        self.events.put((kind, "\n".join(data)))
                        kind, data = None, []
        except Exception as error:  # any failure of the stream is the check's failure
            self.failure = f"GET /v1/events: {error}"
            self.opened.set()


def main():
    tokens = call("POST", "/v1/devices", expect=201)
    if tokens is None:
        return
    token = tokens["accessToken"]

    reader = EventReader(token)
    reader.start()
    if not reader.opened.wait(10) or reader.failure:
        failures.append(reader.failure or "GET /v1/events: no first line within 10 s")
        return

    profiles = []
    for name, extra in [(f"journey-a-{RUN}", {"points": ["MeanNode", "Chiron"]}), (f"journey-b-{RUN}", {})]:
        body = {
            "profile": {
                "name": name,
                "birthDate": "1990-10-07",
                "birthTime": "15:00" if not profiles else "06:30",
                "timezone": "Europe/Kyiv",
                "latitude": 50.4501,
                "longitude": 30.5234,
                "locationName": "Kyiv, Ukraine",
            },
            **extra,
        }
        accepted = call("POST", "/v1/profiles", token=token, body=body, expect=202)
        if accepted is None:
            return
        job = finished_job(accepted["jobId"], token, "chart.calculate")
        if job is None:
            return
        profile_id = (job.get("result") or {}).get("profileId")
        if not profile_id or not (job.get("result") or {}).get("chartId"):
            failures.append(f"chart.calculate job: no profileId and chartId in its result: {job}")
            return
        profiles.append(profile_id)

    call("GET", "/v1/profiles", token=token)
    for profile_id in profiles:
        call("GET", "/v1/profiles/{id}", f"/v1/profiles/{profile_id}", token=token)
        chart = call("GET", "/v1/profiles/{id}/chart", f"/v1/profiles/{profile_id}/chart", token=token)
        if chart is not None and profile_id == profiles[0] and len(chart.get("points") or []) != 2:
            failures.append(f"the first profile's chart: expected its 2 points, got {chart.get('points')}")

    a, b = profiles
    results = [
        ("chart.return", "/v1/profiles/{id}/returns", {"kind": "progressed", "date": "2030-06-01"}),
        ("chart.transits", "/v1/profiles/{id}/transits", {"from": "2027-01-01", "to": "2027-01-31"}),
        ("chart.synastry", "/v1/profiles/{id}/synastry", {"partnerProfileId": b}),
    ]
    kinds = set()
    for kind, template, body in results:
        accepted = call("POST", template, template.replace("{id}", a), token=token, body=body, expect=202)
        if accepted is None:
            continue
        job = finished_job(accepted["jobId"], token, kind)
        result_id = ((job or {}).get("result") or {}).get("resultId")
        if not result_id:
            failures.append(f"{kind} job: no resultId in its result: {job}")
            continue
        result = call("GET", "/v1/chart-results/{id}", f"/v1/chart-results/{result_id}", token=token)
        if result is not None:
            kinds.add(result.get("kind"))
            if not isinstance(result.get("result"), dict):
                failures.append(f"{kind}: the chart result has no result document: {str(result)[:300]}")
    if kinds != {"progressed", "transits", "synastry"}:
        failures.append(f"chart results: expected the kinds progressed, transits and synastry, got {kinds}")

    # Two chart.calculated and three chart.computed events were published for this user.
    event_schema = component("Event")
    seen = {}
    deadline = time.monotonic() + 10
    while seen.get("chart.calculated", 0) < 2 or seen.get("chart.computed", 0) < 3:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            failures.append(f"GET /v1/events: expected 2 chart.calculated and 3 chart.computed within 10 s, saw {seen}")
            break
        try:
            kind, text = reader.events.get(timeout=remaining)
        except queue.Empty:
            continue
        step = f"GET /v1/events event {kind}"
        try:
            data = json.loads(text)
        except ValueError:
            failures.append(f"{step}: data is not JSON: {text[:200]!r}")
            continue
        schema = component("StreamNotice") if kind in ("reset", "end") else event_schema
        failures.extend(f"{step}: {problem}" for problem in mismatches(schema, data))
        if kind not in ("reset", "end") and data.get("type") != kind:
            failures.append(f"{step}: its data's type is {data.get('type')!r}")
        seen[kind] = seen.get(kind, 0) + 1
    if reader.failure:
        failures.append(reader.failure)
    return seen


started = time.monotonic()
events = main()
for failure in failures[:60]:
    print(f"contract-journey-check: {failure}", file=sys.stderr)
if failures:
    if len(failures) > 60:
        print(f"contract-journey-check: … and {len(failures) - 60} more", file=sys.stderr)
    sys.exit(1)
print(
    f"contract-journey-check: {checked} answers and {sum((events or {}).values())} events matched openapi.yaml "
    f"in {time.monotonic() - started:.1f} s"
)
