#!/usr/bin/env python3
"""The testbed's bandwidth probe: `receive PORT` accepts one connection and prints the Mbit/s
it received at (bytes over the time from the first to the last byte); `send HOST PORT BYTES`
connects (retrying for 5 s while the receiver starts) and sends BYTES bytes."""
import socket
import sys
import time


def receive(port: int) -> None:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    srv.settimeout(30)
    conn, _ = srv.accept()
    conn.settimeout(60)
    total, first = 0, None
    while True:
        chunk = conn.recv(1 << 16)
        if not chunk:
            break
        if first is None:
            first = time.monotonic()
        total += len(chunk)
    last = time.monotonic()
    conn.close()
    srv.close()
    secs = max(last - (first or last), 1e-9)
    print(f"{total * 8 / secs / 1e6:.1f}")


def send(host: str, port: int, count: int) -> None:
    deadline = time.monotonic() + 5
    while True:
        try:
            s = socket.create_connection((host, port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    block = b"\0" * (1 << 16)
    left = count
    while left > 0:
        n = s.send(block[: min(left, len(block))])
        left -= n
    s.shutdown(socket.SHUT_WR)
    s.recv(1)  # until the receiver closes: every byte was read
    s.close()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "receive":
        receive(int(sys.argv[2]))
    elif len(sys.argv) == 5 and sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit("usage: bandwidth.py receive PORT | send HOST PORT BYTES")
