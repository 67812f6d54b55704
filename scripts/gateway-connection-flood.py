#!/usr/bin/env python3
"""A connection flood against a gateway on this machine, and its resident memory around it (issue 29, F13).

    python3 scripts/gateway-connection-flood.py --port P --pid PID [--connections N] [--runs R] [--hold S]

Each run opens N TCP connections to 127.0.0.1:P as fast as it can, sends on each the start of a
request head (`GET /healthz HTTP/1.1` and one header, never the blank line, so the server holds
a half-read request), keeps them S seconds, closes them all and waits. It prints one JSON line
per run: the gateway's VmRSS before, at the peak of the hold, 5 s after and --settle seconds
after (the gateway trims its heap within 30 s of a flood), in MB; how long connecting took; and
how many connections the server had closed on its own by the end of the hold
(GATEWAY_MAX_CONNECTIONS, or its idle timeout). Loopback only; bounded in count and time.
"""
import argparse
import json
import os
import socket
import time


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def closed_by_peer(sock):
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def flood(port, pid, connections, hold, settle):
    before = rss_mb(pid)
    sockets = []
    failed = 0
    started = time.monotonic()
    for _ in range(connections):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(2)
        try:
            sock.connect(("127.0.0.1", port))
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: flood\r\n")
            sockets.append(sock)
        except OSError:
            failed += 1
            sock.close()
    connect_seconds = time.monotonic() - started
    peak = rss_mb(pid)
    deadline = time.monotonic() + hold
    while time.monotonic() < deadline:
        peak = max(peak, rss_mb(pid))
        time.sleep(0.2)
    refused = sum(1 for sock in sockets if closed_by_peer(sock))
    for sock in sockets:
        sock.close()
    time.sleep(5)
    after = rss_mb(pid)
    time.sleep(max(0, settle - 5))
    return {
        "connections": connections,
        "connect_seconds": round(connect_seconds, 1),
        "connect_failed": failed,
        "closed_by_server": refused,
        "rss_before_mb": round(before, 1),
        "rss_peak_mb": round(peak, 1),
        "rss_after_5s_mb": round(after, 1),
        "rss_after_settle_mb": round(rss_mb(pid), 1),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hold", type=float, default=3)
    parser.add_argument("--settle", type=float, default=40)
    arguments = parser.parse_args()
    if not 1 <= arguments.connections <= 50_000 or not 1 <= arguments.runs <= 20:
        parser.error("connections 1-50000, runs 1-20")
    for run in range(1, arguments.runs + 1):
        result = flood(arguments.port, arguments.pid, arguments.connections, arguments.hold, arguments.settle)
        result["run"] = run
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
