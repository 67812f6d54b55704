#!/usr/bin/env python3
"""Open-loop load for the gateway's benchmark (scripts/bench-gateway.sh); Python standard library only.

  gateway-load.py get --url URL --token T --rate R --seconds S [--connections C]
      GET URL at a fixed rate R from C keep-alive connections. Each request's latency is measured
      from the moment it was due, not from when a connection was free, so a stall is counted
      against every request it delayed (no coordinated omission).

  gateway-load.py journey --base URL --tokens FILE --rate R --seconds S [--connections C]
      For users whose access tokens are the lines of FILE: one SSE stream (GET /v1/events) per
      user, then POST /v1/profiles at a fixed total rate R, spread over the users, from C
      keep-alive connections; the latency of one journey is from the POST being due to its
      chart.calculated arriving on the user's stream.

Both print one JSON object: offered and achieved rates, latency percentiles in ms, errors, and the
generator's own CPU seconds.

The generator shares the machine with what it measures, so it is written to be cheap: one
thread on its own small epoll loop with callbacks on received bytes (asyncio's stream readers took
a coroutine step per header line), requests assembled from bytes built once per token, and no
cyclic garbage collection during the run (the objects made per request hold no cycles).
"""

import argparse
import collections
import gc
import heapq
import json
import select
import socket
import sys
import time
import urllib.parse

now = time.perf_counter


def percentiles(values):
    if not values:
        return {}
    ordered = sorted(values)

    def at(q):
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)

    return {"p50_ms": at(0.50), "p90_ms": at(0.90), "p99_ms": at(0.99), "max_ms": round(ordered[-1] * 1000, 2)}


# Largest response head or body the generator accepts; anything bigger is an error, not a hang.
MAX_HEAD = 64 * 1024
MAX_BODY = 16 * 1024 * 1024
# How long the answers to the last requests are waited for before they count as failed.
ANSWER_WAIT = 30.0


class ResponseParser:
    """Incremental HTTP/1.1 response parser (Content-Length or chunked bodies)."""

    __slots__ = ("buffer", "status", "length", "chunked", "body")

    def __init__(self):
        self.buffer = b""
        self.status = None

    def feed(self, data):
        """Adds bytes; returns a list of (status, body) for the responses now complete."""
        self.buffer += data
        done = []
        while True:
            if self.status is None:
                end = self.buffer.find(b"\r\n\r\n")
                if end < 0:
                    if len(self.buffer) > MAX_HEAD:
                        raise ValueError("response head too large")
                    return done
                head = self.buffer[:end].lower()
                self.buffer = self.buffer[end + 4:]
                self.status = int(head[9:12])
                self.chunked = b"\r\ntransfer-encoding: chunked" in head
                self.length = 0
                self.body = b""
                at = head.find(b"\r\ncontent-length:")
                if at >= 0:
                    stop = head.find(b"\r\n", at + 2)
                    self.length = int(head[at + 17:stop if stop >= 0 else len(head)])
                    if self.length > MAX_BODY:
                        raise ValueError("response body too large")
            if self.chunked:
                while True:
                    line_end = self.buffer.find(b"\r\n")
                    if line_end < 0:
                        return done
                    size = int(self.buffer[:line_end].split(b";", 1)[0], 16)
                    if size == 0:
                        # The last chunk: no trailers are expected from the gateway.
                        if len(self.buffer) < line_end + 4:
                            return done
                        self.buffer = self.buffer[line_end + 4:]
                        break
                    if len(self.buffer) < line_end + 2 + size + 2:
                        return done
                    self.body += self.buffer[line_end + 2:line_end + 2 + size]
                    if len(self.body) > MAX_BODY:
                        raise ValueError("response body too large")
                    self.buffer = self.buffer[line_end + 2 + size + 2:]
                body = self.body
            else:
                if len(self.buffer) < self.length:
                    return done
                body = self.buffer[:self.length]
                self.buffer = self.buffer[self.length:]
            done.append((self.status, body))
            self.status = None


class Loop:
    """A minimal event loop on epoll: the generator needs readable sockets and a few timers, and
    asyncio's general machinery (handles, futures, contexts per callback) costs more CPU per
    request than the rest of the generator."""

    def __init__(self):
        self.epoll = select.epoll()
        self.readers = {}
        self.timers = []
        self.sequence = 0

    def add(self, sock, on_readable):
        self.readers[sock.fileno()] = on_readable
        self.epoll.register(sock.fileno(), select.EPOLLIN)

    def remove(self, sock):
        fd = sock.fileno()
        if self.readers.pop(fd, None) is not None:
            self.epoll.unregister(fd)

    def call_later(self, delay, callback):
        self.sequence += 1
        heapq.heappush(self.timers, (now() + delay, self.sequence, callback))

    def run_once(self, timeout):
        """Waits at most `timeout` seconds for readable sockets, then runs what is ready and due."""
        if self.timers:
            timeout = min(timeout, max(0.0, self.timers[0][0] - now()))
        for fd, _ in self.epoll.poll(max(0.0, timeout)):
            handler = self.readers.get(fd)
            if handler is not None:
                handler()
        while self.timers and self.timers[0][0] <= now():
            heapq.heappop(self.timers)[2]()


def open_socket(host, port):
    sock = socket.create_connection((host, port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # Blocking sends (a request is far smaller than the socket buffer); reads only when epoll
    # says the socket is readable, so they never wait.
    sock.settimeout(None)
    return sock


class RequestConnection:
    """One keep-alive connection; requests on it are sequential, as in the app."""

    def __init__(self, pool, sock):
        self.pool, self.sock = pool, sock
        self.parser = ResponseParser()
        self.item = None
        pool.loop.add(sock, self.readable)

    def readable(self):
        try:
            data = self.sock.recv(262144)
        except OSError:
            data = b""
        if not data:
            self.lost()
            return
        try:
            responses = self.parser.feed(data)
        except ValueError:
            self.lost()
            return
        for status, body in responses:
            item, self.item = self.item, None
            if item is None:
                self.lost()
                return
            self.pool.finished(self, item, status, body)

    def send(self, data):
        try:
            self.sock.sendall(data)
        except OSError:
            self.lost()

    def lost(self):
        if self.sock is None:
            return
        self.pool.loop.remove(self.sock)
        self.sock.close()
        self.sock = None
        item, self.item = self.item, None
        self.pool.lost(self, item)

    def close(self):
        if self.sock is not None:
            self.pool.loop.remove(self.sock)
            self.sock.close()
            self.sock = None


class Pool:
    """C connections taking requests in the order they fell due (a request waits for a free
    connection, and its latency still counts from when it was due)."""

    def __init__(self, loop, host, port, size, encode, on_response, on_error):
        self.loop, self.host, self.port, self.size = loop, host, port, size
        self.encode, self.on_response, self.on_error = encode, on_response, on_error
        self.idle = collections.deque()
        self.waiting = collections.deque()
        self.connections = set()
        self.reconnecting = 0
        self.closing = False

    def open(self):
        for _ in range(self.size):
            self.connect()

    def connect(self):
        try:
            connection = RequestConnection(self, open_socket(self.host, self.port))
        except OSError:
            # The gateway cannot be reached: the requests waiting for a connection fail (as a
            # request does when its connection cannot be opened), and the connection is tried
            # again shortly, as the app would.
            while self.waiting:
                self.on_error(self.waiting.popleft())
            self.reconnecting += 1
            self.loop.call_later(0.05, self.reconnect)
            return
        self.connections.add(connection)
        self.ready(connection)

    def reconnect(self):
        self.reconnecting -= 1
        if not self.closing:
            self.connect()

    def ready(self, connection):
        if self.waiting:
            self.send(connection, self.waiting.popleft())
        else:
            self.idle.append(connection)

    def submit(self, item):
        if self.idle:
            self.send(self.idle.popleft(), item)
        else:
            self.waiting.append(item)

    def send(self, connection, item):
        connection.item = item
        item[2] = now()
        connection.send(self.encode(item))

    def finished(self, connection, item, status, body):
        self.on_response(item, status, body)
        self.ready(connection)

    def lost(self, connection, item):
        self.connections.discard(connection)
        try:
            self.idle.remove(connection)
        except ValueError:
            pass
        if item is not None:
            self.on_error(item)
        if not self.closing:
            self.connect()

    def busy(self):
        return bool(self.waiting) or any(connection.item is not None for connection in self.connections)

    def abandon(self):
        """Counts every request still waiting or unanswered as failed."""
        while self.waiting:
            self.on_error(self.waiting.popleft())
        for connection in self.connections:
            if connection.item is not None:
                self.on_error(connection.item)
                connection.item = None

    def close(self):
        self.closing = True
        for connection in list(self.connections):
            connection.close()
        self.connections.clear()
        self.idle.clear()


def offer(loop, pool, total, rate, start):
    """Submits request i at start + i / rate (open loop); if the generator falls behind, every
    request already due is submitted at once and keeps its due time. Returns when every request
    has been answered or failed; requests unanswered 30 s after the last was due count as failed
    (a gateway that stops answering ends the run instead of hanging it)."""
    interval = 1.0 / rate
    i = 0
    while i < total:
        current = now()
        while i < total and start + i * interval <= current:
            pool.submit([start + i * interval, i, 0.0])
            i += 1
        if i < total:
            loop.run_once(start + i * interval - now())
    deadline = now() + ANSWER_WAIT
    while pool.busy() and now() < deadline:
        loop.run_once(0.05)
    pool.abandon()


def run_get(args):
    url = urllib.parse.urlsplit(args.url)
    request = (f"GET {url.path} HTTP/1.1\r\nHost: {url.hostname}:{url.port}\r\nContent-Length: 0\r\n"
               f"Authorization: Bearer {args.token}\r\n\r\n").encode()
    total = int(args.rate * args.seconds)
    latencies, statuses = [], {}
    errors = 0

    def on_response(item, status, body):
        nonlocal errors
        statuses[status] = statuses.get(status, 0) + 1
        if status == 200:
            latencies.append(now() - item[0])
        else:
            errors += 1

    def on_error(item):
        nonlocal errors
        errors += 1

    loop = Loop()
    pool = Pool(loop, url.hostname, url.port, args.connections, lambda item: request, on_response, on_error)
    pool.open()
    start = now() + 0.2
    offer(loop, pool, total, args.rate, start)
    elapsed = now() - start
    pool.close()
    result = {"mode": "get", "offered_per_s": args.rate, "requests": total, "ok": len(latencies),
              "errors": errors, "statuses": statuses, "achieved_per_s": round(len(latencies) / elapsed, 1)}
    result.update(percentiles(latencies))
    return result


class EventStream:
    """One user's SSE stream; like the app, reconnects with Last-Event-ID when it is closed (the
    gateway closes a stream that falls too far behind)."""

    def __init__(self, loop, host, port, token, on_event, stats):
        self.loop, self.host, self.port, self.token = loop, host, port, token
        self.on_event, self.stats = on_event, stats
        self.last_id = None
        self.ready = False
        self.sock = None
        self.closing = False

    def connect(self):
        if self.closing:
            return
        try:
            sock = open_socket(self.host, self.port)
            resume = f"Last-Event-ID: {self.last_id}\r\n" if self.last_id else ""
            sock.sendall((f"GET /v1/events HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                          f"Authorization: Bearer {self.token}\r\nAccept: text/event-stream\r\n{resume}\r\n").encode())
        except OSError:
            self.reconnect()
            return
        self.sock = sock
        self.head = True
        self.raw = b""
        self.payload = b""
        self.chunked = False
        self.loop.add(sock, self.readable)

    def reconnect(self):
        if self.closing:
            return
        self.stats["reconnects"] += 1
        self.loop.call_later(0.05, self.connect)

    def drop(self):
        if self.sock is not None:
            self.loop.remove(self.sock)
            self.sock.close()
            self.sock = None

    def close(self):
        self.closing = True
        self.drop()

    def readable(self):
        try:
            data = self.sock.recv(262144)
        except OSError:
            data = b""
        try:
            if data and self.received(data):
                return
        except ValueError:
            pass
        self.drop()
        self.reconnect()

    def received(self, data):
        """Takes the bytes read; returns False when the stream has ended."""
        if self.head:
            self.raw += data
            end = self.raw.find(b"\r\n\r\n")
            if end < 0:
                if len(self.raw) > MAX_HEAD:
                    raise ValueError("SSE head too large")
                return True
            head = self.raw[:end].lower()
            if b" 200 " not in head[:16]:
                raise ValueError(f"SSE answered {head[:32]!r}")
            self.chunked = b"\r\ntransfer-encoding: chunked" in head
            self.head = False
            self.ready = True
            data, self.raw = self.raw[end + 4:], b""
        if self.chunked:
            raw = self.raw + data
            position = 0
            while True:
                line_end = raw.find(b"\r\n", position)
                if line_end < 0:
                    break
                size = int(raw[position:line_end].split(b";", 1)[0] or b"0", 16)
                if size == 0:
                    return False
                if len(raw) < line_end + 2 + size + 2:
                    break
                self.payload += raw[line_end + 2:line_end + 2 + size]
                position = line_end + 2 + size + 2
            self.raw = raw[position:]
            if len(self.raw) > MAX_BODY:
                raise ValueError("SSE chunk too large")
        else:
            self.payload += data
        if b"\n\n" not in self.payload:
            if len(self.payload) > MAX_BODY:
                raise ValueError("SSE event too large")
            return True
        messages = self.payload.split(b"\n\n")
        self.payload = messages.pop()
        for message in messages:
            event, lines = None, []
            for field in message.split(b"\n"):
                if field.startswith(b"event:"):
                    event = field[6:].strip()
                elif field.startswith(b"data:"):
                    lines.append(field[5:].lstrip())
                elif field.startswith(b"id:") and field[3:].strip():
                    self.last_id = field[3:].strip().decode()
            if event and lines:
                self.on_event(event, b"\n".join(lines))
        return True


def run_journey(args):
    base = urllib.parse.urlsplit(args.base)
    tokens = [line.strip() for line in open(args.tokens) if line.strip()]
    due_by_job, arrived_by_job = {}, {}
    latencies, statuses = [], {}
    errors = 0
    # From sending the POST to its 202: tells a slow gateway from slow workers.
    accept_latencies = []

    def on_event(event, data):
        if event != b"chart.calculated":
            return
        try:
            job = json.loads(data)["jobId"]
        except (ValueError, KeyError, TypeError):
            return
        arrived = now()
        due = due_by_job.pop(job, None)
        if due is not None:
            latencies.append(arrived - due)
        else:
            arrived_by_job[job] = arrived

    loop = Loop()
    stream_stats = {"reconnects": 0}
    streams = []
    for token in tokens:
        stream = EventStream(loop, base.hostname, base.port, token, on_event, stream_stats)
        streams.append(stream)
        stream.connect()
        deadline = now() + 10
        while not stream.ready:
            if now() > deadline:
                raise TimeoutError("an event stream did not open within 10 s")
            loop.run_once(0.05)

    total = int(args.rate * args.seconds)
    run = f"{time.time_ns() % 10**9:09d}"
    heads = [(f"POST /v1/profiles HTTP/1.1\r\nHost: {base.hostname}:{base.port}\r\n"
              f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: ").encode()
             for token in tokens]
    body_start = ('{"profile": {"name": "Bench ' + run + " ").encode()
    body_end = (b'", "birthDate": "1990-10-07", "birthTime": "15:00", "timezone": "Europe/Kyiv", '
                b'"latitude": 50.4501, "longitude": 30.5234, "locationName": "Kyiv, Ukraine"}}')

    def encode(item):
        index = item[1]
        body = body_start + str(index).encode() + body_end
        return heads[index % len(heads)] + str(len(body)).encode() + b"\r\n\r\n" + body

    def on_response(item, status, body):
        nonlocal errors
        accept_latencies.append(now() - item[2])
        statuses[status] = statuses.get(status, 0) + 1
        if status != 202:
            errors += 1
            return
        try:
            job = json.loads(body)["jobId"]
        except (ValueError, KeyError, TypeError):
            errors += 1
            return
        arrived = arrived_by_job.pop(job, None)
        if arrived is not None:
            latencies.append(arrived - item[0])
        else:
            due_by_job[job] = item[0]

    def on_error(item):
        nonlocal errors
        errors += 1

    pool = Pool(loop, base.hostname, base.port, args.connections, encode, on_response, on_error)
    pool.open()
    start = now() + 0.2
    offer(loop, pool, total, args.rate, start)
    posted_end = now()
    deadline = posted_end + args.drain
    while due_by_job and now() < deadline:
        loop.run_once(min(0.05, deadline - now()))
    finished = now()
    pool.close()
    for stream in streams:
        stream.close()
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
    if not (0 < args.rate <= 100_000 and 0 < args.seconds <= 3600 and 0 < args.connections <= 1024):
        parser.error("--rate (at most 100000), --seconds (at most 3600) and --connections (at most 1024)"
                     " must be positive")
    if args.mode == "journey" and not 0 <= args.drain <= 600:
        parser.error("--drain must be between 0 and 600 seconds")
    started = time.process_time()
    gc.collect()
    gc.freeze()
    gc.disable()
    result = run_get(args) if args.mode == "get" else run_journey(args)
    # The load generator's own CPU: on a small machine it competes with what it measures.
    result["generator_cpu_s"] = round(time.process_time() - started, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
