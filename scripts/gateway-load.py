#!/usr/bin/env python3
"""Open-loop load for the gateway's benchmark (scripts/bench-gateway.sh); Python standard library only.

  gateway-load.py get --url URL --token T --rate R --seconds S [--connections C]
      GET URL at a fixed rate R from C keep-alive connections. Each request's latency is measured
      from the moment it was due, not from when a connection was free, so a stall is counted
      against every request it delayed (no coordinated omission).

  gateway-load.py journey --base URL --tokens FILE --rate R --seconds S
      For users whose access tokens are the lines of FILE: one SSE stream (GET /v1/events) per
      user, then POST /v1/profiles at a fixed total rate R, spread over the users; the latency of
      one journey is from the POST being due to its chart.calculated arriving on the user's
      stream.

Both print one JSON object: offered and achieved rates, latency percentiles in ms, errors.
"""

import argparse
import asyncio
import json
import sys
import time
import urllib.parse


def percentiles(values):
    if not values:
        return {}
    ordered = sorted(values)

    def at(q):
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)

    return {"p50_ms": at(0.50), "p90_ms": at(0.90), "p99_ms": at(0.99), "max_ms": round(ordered[-1] * 1000, 2)}


class Connection:
    """One HTTP/1.1 keep-alive connection; requests on it are sequential."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.reader = self.writer = None

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def request(self, method, path, headers=None, body=b""):
        if self.writer is None:
            await self.open()
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}", f"Content-Length: {len(body)}"]
        for name, value in (headers or {}).items():
            lines.append(f"{name}: {value}")
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("closed")
        status = int(status_line.split()[1])
        length, chunked = 0, False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value.strip())
            elif name == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
        if chunked:
            data = b""
            while True:
                size = int((await self.reader.readline()).strip(), 16)
                chunk = await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                data += chunk[:-2]
        else:
            data = await self.reader.readexactly(length)
        return status, data

    def close(self):
        if self.writer is not None:
            self.writer.close()
            self.writer = None


async def run_get(args):
    url = urllib.parse.urlsplit(args.url)
    headers = {"Authorization": f"Bearer {args.token}"}
    total = int(args.rate * args.seconds)
    interval = 1.0 / args.rate
    queue = asyncio.Queue()
    latencies, errors, statuses = [], 0, {}
    start = time.perf_counter() + 0.2

    async def worker():
        nonlocal errors
        connection = Connection(url.hostname, url.port)
        while True:
            due = await queue.get()
            if due is None:
                connection.close()
                return
            try:
                status, _ = await connection.request("GET", url.path, headers)
                statuses[status] = statuses.get(status, 0) + 1
                if status == 200:
                    latencies.append(time.perf_counter() - due)
                else:
                    errors += 1
            except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError):
                errors += 1
                connection.close()

    workers = [asyncio.create_task(worker()) for _ in range(args.connections)]
    for i in range(total):
        due = start + i * interval
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        queue.put_nowait(due)
    for _ in workers:
        queue.put_nowait(None)
    await asyncio.gather(*workers)
    elapsed = time.perf_counter() - start
    result = {"mode": "get", "offered_per_s": args.rate, "requests": total, "ok": len(latencies),
              "errors": errors, "statuses": statuses, "achieved_per_s": round(len(latencies) / elapsed, 1)}
    result.update(percentiles(latencies))
    return result


async def sse_stream(host, port, token, on_event, ready, stats):
    """Reads one user's stream; like the app, reconnects with Last-Event-ID when it is closed
    (the gateway closes a stream that falls too far behind)."""
    last_id = None
    while True:
        try:
            last_id = await sse_connection(host, port, token, on_event, ready, last_id)
        except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError, RuntimeError):
            pass
        stats["reconnects"] += 1
        await asyncio.sleep(0.05)


async def sse_connection(host, port, token, on_event, ready, last_id):
    reader, writer = await asyncio.open_connection(host, port)
    resume = f"Last-Event-ID: {last_id}\r\n" if last_id else ""
    writer.write((f"GET /v1/events HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
                  f"Accept: text/event-stream\r\n{resume}\r\n").encode())
    status_line = await reader.readline()
    if b" 200 " not in status_line:
        writer.close()
        raise RuntimeError(f"SSE answered {status_line!r}")
    chunked = False
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        if line.lower().startswith(b"transfer-encoding:") and b"chunked" in line.lower():
            chunked = True
    ready.set()
    buffer = b""
    try:
        while True:
            if chunked:
                size_line = await reader.readline()
                if not size_line:
                    return last_id
                size = int(size_line.strip() or b"0", 16)
                if size == 0:
                    return last_id
                buffer += (await reader.readexactly(size + 2))[:-2]
            else:
                data = await reader.read(65536)
                if not data:
                    return last_id
                buffer += data
            while b"\n\n" in buffer:
                message, buffer = buffer.split(b"\n\n", 1)
                event, data = None, []
                for field in message.decode().split("\n"):
                    if field.startswith("event:"):
                        event = field[6:].strip()
                    elif field.startswith("data:"):
                        data.append(field[5:].lstrip())
                    elif field.startswith("id:") and field[3:].strip():
                        last_id = field[3:].strip()
                if event and data:
                    on_event(event, "\n".join(data))
    finally:
        writer.close()


async def run_journey(args):
    base = urllib.parse.urlsplit(args.base)
    tokens = [line.strip() for line in open(args.tokens) if line.strip()]
    due_by_job, arrived_by_job = {}, {}
    latencies, errors, statuses = [], 0, {}
    # From sending the POST to its 202: tells a slow gateway from slow workers.
    accept_latencies = []

    def on_event(event, data):
        if event != "chart.calculated":
            return
        try:
            job = json.loads(data)["jobId"]
        except (ValueError, KeyError, TypeError):
            return
        now = time.perf_counter()
        if job in due_by_job:
            latencies.append(now - due_by_job.pop(job))
        else:
            arrived_by_job[job] = now

    streams = []
    stream_stats = {"reconnects": 0}
    for token in tokens:
        ready = asyncio.Event()
        streams.append(asyncio.create_task(sse_stream(base.hostname, base.port, token, on_event, ready, stream_stats)))
        await asyncio.wait_for(ready.wait(), 10)

    total = int(args.rate * args.seconds)
    interval = 1.0 / args.rate
    queue = asyncio.Queue()
    run = f"{time.time_ns() % 10**9:09d}"
    start = time.perf_counter() + 0.2

    async def worker():
        nonlocal errors
        connection = Connection(base.hostname, base.port)
        while True:
            item = await queue.get()
            if item is None:
                connection.close()
                return
            due, index = item
            token = tokens[index % len(tokens)]
            body = json.dumps({"profile": {
                "name": f"Bench {run} {index}", "birthDate": "1990-10-07", "birthTime": "15:00",
                "timezone": "Europe/Kyiv", "latitude": 50.4501, "longitude": 30.5234,
                "locationName": "Kyiv, Ukraine"}}).encode()
            try:
                sent = time.perf_counter()
                status, data = await connection.request(
                    "POST", "/v1/profiles",
                    {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}, body)
                accept_latencies.append(time.perf_counter() - sent)
                statuses[status] = statuses.get(status, 0) + 1
                if status != 202:
                    errors += 1
                    continue
                job = json.loads(data)["jobId"]
                if job in arrived_by_job:
                    latencies.append(arrived_by_job.pop(job) - due)
                else:
                    due_by_job[job] = due
            except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError, KeyError):
                errors += 1
                connection.close()

    workers = [asyncio.create_task(worker()) for _ in range(args.connections)]
    for i in range(total):
        due = start + i * interval
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        queue.put_nowait((due, i))
    for _ in workers:
        queue.put_nowait(None)
    await asyncio.gather(*workers)
    posted_end = time.perf_counter()
    deadline = posted_end + args.drain
    while due_by_job and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)
    finished = time.perf_counter()
    for stream in streams:
        stream.cancel()
    await asyncio.gather(*streams, return_exceptions=True)
    done = len(latencies)
    result = {"mode": "journey", "users": len(tokens), "offered_per_s": args.rate, "posted": total,
              "completed": done, "missing": len(due_by_job), "errors": errors, "statuses": statuses,
              "posted_per_s": round(total / (posted_end - start), 1),
              "completed_per_s": round(done / (finished - start), 1),
              "stream_reconnects": stream_stats["reconnects"]}
    result.update(percentiles(latencies))
    result.update({f"accept_{key}": value for key, value in percentiles(accept_latencies).items()
                   if key in ("p50_ms", "p99_ms")})
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    get = sub.add_parser("get")
    get.add_argument("--url", required=True)
    get.add_argument("--token", required=True)
    get.add_argument("--rate", type=float, required=True)
    get.add_argument("--seconds", type=float, default=10)
    get.add_argument("--connections", type=int, default=32)
    journey = sub.add_parser("journey")
    journey.add_argument("--base", required=True)
    journey.add_argument("--tokens", required=True)
    journey.add_argument("--rate", type=float, required=True)
    journey.add_argument("--seconds", type=float, default=10)
    journey.add_argument("--connections", type=int, default=32)
    journey.add_argument("--drain", type=float, default=10, help="seconds to wait for the last events")
    args = parser.parse_args()
    if args.rate <= 0 or args.seconds <= 0 or args.connections <= 0:
        parser.error("--rate, --seconds and --connections must be positive")
    started = time.process_time()
    result = asyncio.run(run_get(args) if args.mode == "get" else run_journey(args))
    # The load generator's own CPU: on a small machine it competes with what it measures.
    result["generator_cpu_s"] = round(time.process_time() - started, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
