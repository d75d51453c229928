#!/usr/bin/env python3
"""The reply-to-webhook probe of bench/delivery.sh (quality P10): the app's side of the latency.

    probe.py URL INGEST_KEY RATE SECONDS OUT [CONNECTIONS]

Sends RATE replies a second for SECONDS to URL (POST /v1/responses) over CONNECTIONS (4) keep-alive
connections, on a fixed schedule (reply n is due at start + n / RATE, whatever the answers before it took),
each the benchmark's event-invite "accept" (bench/setup-app.sh's rules: one webhook) under its own
Idempotency-Key. Writes OUT, one "key<TAB>micros" line per reply answered 202: when the 202 was read, in
UNIX microseconds (the same clock as the receiver's arrivals, bench/bare/bare.c's BARE_ARRIVALS). Exits 1
when any reply was answered otherwise or not at all.
"""

import http.client
import json
import sys
import threading
import time
import urllib.parse
import uuid


def body(n):
    return json.dumps({
        "actionIdentifier": "accept",
        "categoryIdentifier": "event-invite",
        "notificationIdentifier": f"probe-{n}",
        "userInfo": {
            "aps": {"alert": {"title": "Rooftop party", "body": "Saturday 8pm at the Rooftop"},
                    "category": "event-invite", "mutable-content": 1, "thread-id": "calendar"},
            "eventId": n, "calendarId": "team-1", "location": "Rooftop", "startsAt": "2026-11-28T20:00:00Z",
            "organizer": {"id": "u-1", "tier": "standard"}, "recurring": False, "attendees": 12,
        },
        "deviceToken": f"{n % 512:08x}" * 8,
        "respondedAt": "2026-11-20T10:00:00.000Z",
    }, separators=(",", ":"))


def main():
    if len(sys.argv) < 6:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    url, key, rate, seconds, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    connections = int(sys.argv[6]) if len(sys.argv) > 6 else 4
    target = urllib.parse.urlsplit(url)
    total = int(rate * seconds)
    start = time.monotonic() + 0.1
    answered, refused = [], []
    lock = threading.Lock()

    def sender(first):
        connection = http.client.HTTPConnection(target.hostname, target.port, timeout=10)
        for n in range(first, total, connections):
            delay = start + n / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            idempotency_key = f"probe-{uuid.uuid4()}"
            try:
                connection.request("POST", target.path, body=body(n), headers={
                    "Content-Type": "application/json", "Authorization": f"Bearer {key}",
                    "Idempotency-Key": idempotency_key})
                response = connection.getresponse()
                response.read()
                status = response.status
            except (OSError, http.client.HTTPException) as error:
                # Counted as refused (the run fails), and the next reply goes out on a new connection.
                status = type(error).__name__
                connection.close()
                connection = http.client.HTTPConnection(target.hostname, target.port, timeout=10)
            micros = time.time_ns() // 1000
            with lock:
                (answered if status == 202 else refused).append((idempotency_key, micros, status))

    threads = [threading.Thread(target=sender, args=(index,)) for index in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with open(out, "w") as handle:
        for idempotency_key, micros, _ in answered:
            handle.write(f"{idempotency_key}\t{micros}\n")
    if refused:
        statuses = sorted({str(status) for _, _, status in refused})
        print(f"probe: {len(refused)} of {total} replies not answered 202 (statuses {statuses})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
