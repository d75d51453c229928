#!/usr/bin/env python3
"""The clients and receivers of bench/faults.sh (Python 3 standard library only).

    driver.py receive --ports P[,P...] --log FILE [--delay S] [--slow MIN MAX] [--stuck FRACTION SECONDS]
                      [--fail-first FRACTION] [--kill-pidfile FILE --kill-plan KIND:N,...] [--stats FILE]
    driver.py ingest  --url URL --count N [--concurrency C] [--rate R] [--duration S] [--kind invite|snooze]
                      [--key-prefix P] [--log FILE] [--progress FILE] [--no-retry] [--fresh-connections]
                      [--source-address A] [--timeout S] [--snooze-delays S,S...]
    driver.py send    --url URL --count N [--concurrency C] [--step-delays S,S...] [--answer K] --log FILE
    driver.py probe   --url URL --interval S --duration S --log FILE

receive: a webhook receiver on every port of --ports (127.0.0.1), HTTP/1.1 with keep-alive. Each request is
two lines of --log (tab-separated, PostgreSQL's COPY text format): `arrive <time> <port> <webhook-id> \\N`
when it is read and `answer <time> <port> <webhook-id> <status>` once its answer is written. Each line is
one write to the kernel, nothing buffered, before the receiver goes on: an arrival is in the file before its
request can be answered, so a reader that saw a delivery recorded reads its arrival too. It answers 204
after --delay seconds (default 0), or a time drawn from --slow MIN MAX; --stuck holds the first arrival of
that fraction of ids for SECONDS; --fail-first answers 503 to the first arrival of that fraction of ids
(the same ids on every run: chosen by a CRC of the id). `GET /_stats` answers {"arrived", "answered",
"inflight", "kills"}. With --kill-pidfile, the plan's steps SIGKILL the process whose pid the file holds,
in order, each at most once per pid: `arrive:N` on the Nth arrival or later (that request is never
answered), `answered:N` right after a 2xx to the Nth arrival or later has been written, the process SIGSTOPped before
the write so that it cannot record the delivery first (logged as `killed-after-answer`). Exits on SIGTERM,
after writing its counters ({"arrived", "answered", "kills"}) to --stats: arrivals it counted but did not
log would be the receiver's own loss.

ingest: POSTs N replies to /v1/responses with the ingest key from $FAULTS_INGEST_KEY, each with its own
Idempotency-Key (`<prefix>-<n>`), from C threads, paced at R per second in total when --rate is given, and
stops starting new ones after --duration seconds when given. Each reply is retried with the same key after a
connection error, a timeout, 409, 429 or 5xx (after Retry-After, at most 1 s, or a short backoff) until it
is acknowledged (200 or 202), unless --no-retry. Every attempt is a line of --log: key, attempt, start,
end, status (0 for no answer), Retry-After, the response id of an acknowledgement. --progress is
rewritten every 0.1 s with the number acknowledged. Prints a JSON summary last.
  invite replies: action accept, decline, dismiss and other in turn (the rules of bench/faults.sh give
  them 1, 2, 0 and 0 follow-ups), category "invite".
  snooze replies: action snooze-<delay> (delays from --snooze-delays in turn), a device token and a
  notification identifier of their own.

send: POSTs N notifications to URL (/v1/apps/<app>/notifications) with the server key from $FAULTS_SERVER_KEY,
each to one device of its own with one no-reply step after a delay from --step-delays (in turn) whose
follow-up is a webhook to the app's endpoint; every K-th one (--answer, default 2; 0 for none) is answered
at once through /v1/responses with $FAULTS_INGEST_KEY and the key its push carries. Sends and replies are
retried under their Idempotency-Key until acknowledged. --log gets `sent <id>` and `answered <id>` lines.

probe: GETs URL on a new connection every --interval seconds for --duration seconds; each line of --log is
start, end, status.
"""

import argparse
import asyncio
import concurrent.futures
import hashlib
import http.client
import json
import os
import random
import signal
import socket
import sys
import threading
import time
import urllib.parse
import zlib


def chosen(webhook_id, fraction):
    """Whether `webhook_id` is in the given fraction of ids (the same ids on every run)."""
    return fraction > 0 and zlib.crc32(webhook_id.encode()) % 10000 < fraction * 10000


# --- receive ------------------------------------------------------------------------------------------


class Receiver:
    def __init__(self, arguments):
        self.arguments = arguments
        # Each line goes to the kernel with one write(2) on an O_APPEND descriptor before the receiver
        # goes on (no buffer of its own): an arrival is in the file before its request can be answered,
        # and whoever reads the file after a delivery was recorded reads that delivery's arrival.
        self.log = os.open(arguments.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.arrived = 0
        self.answered = 0
        self.inflight = 0
        self.seen = set()
        self.plan = []
        for step in filter(None, (arguments.kill_plan or "").split(",")):
            kind, _, threshold = step.partition(":")
            if kind not in ("arrive", "answered") or not threshold.isdigit():
                raise SystemExit(f"driver: bad --kill-plan step {step!r}")
            self.plan.append((kind, int(threshold)))
        self.kills = 0
        self.killed_pids = set()

    def write(self, event, port, webhook_id, status=None):
        status_text = "\\N" if status is None else str(status)
        webhook_id = webhook_id.replace("\t", " ").replace("\\", "/") or "\\N"
        os.write(self.log, f"{event}\t{time.time():.6f}\t{port}\t{webhook_id}\t{status_text}\n".encode())

    def due_pid(self, kind):
        """The pid the plan's next step would kill now, if that step is of `kind` and due; else None."""
        if self.kills >= len(self.plan):
            return None
        step_kind, threshold = self.plan[self.kills]
        if step_kind != kind or self.arrived < threshold:
            return None
        try:
            with open(self.arguments.kill_pidfile, encoding="ascii") as handle:
                pid = int(handle.read().strip() or 0)
        except (OSError, ValueError):
            return None
        if pid <= 0 or pid in self.killed_pids:
            return None
        return pid

    def kill_step(self, kind):
        """Runs the plan's next step if it is of `kind` and due: True when it killed."""
        pid = self.due_pid(kind)
        if pid is None:
            return False
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        self.killed_pids.add(pid)
        self.kills += 1
        self.write(f"kill-{self.kills}", 0, str(pid))
        return True

    def delay_for(self, webhook_id, first):
        arguments = self.arguments
        if first and arguments.stuck and chosen(webhook_id, arguments.stuck[0]):
            return arguments.stuck[1]
        if arguments.slow:
            return random.uniform(arguments.slow[0], arguments.slow[1])
        return arguments.delay

    async def serve_connection(self, reader, writer, port):
        try:
            while True:
                request_line = await reader.readline()
                if not request_line:
                    return
                headers = {}
                while True:
                    line = await reader.readline()
                    if line in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = line.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length") or 0)
                if length:
                    await reader.readexactly(length)
                parts = request_line.decode("latin-1").split()
                path = parts[1] if len(parts) > 1 else "/"
                if path == "/_stats":
                    body = json.dumps(
                        {"arrived": self.arrived, "answered": self.answered, "inflight": self.inflight,
                         "kills": self.kills}).encode()
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                                 % (len(body), body))
                    await writer.drain()
                    continue
                if not await self.answer(writer, port, headers.get("webhook-id", "")):
                    return
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            writer.close()

    async def answer(self, writer, port, webhook_id):
        """Answers one delivery; False when the connection is to be dropped unanswered."""
        self.arrived += 1
        first = webhook_id not in self.seen
        self.seen.add(webhook_id)
        self.write("arrive", port, webhook_id)
        if self.kill_step("arrive"):
            return False
        self.inflight += 1
        try:
            delay = self.delay_for(webhook_id, first)
            if delay > 0:
                await asyncio.sleep(delay)
            failing = first and chosen(webhook_id, self.arguments.fail_first)
            status = 503 if failing else 204
            reason = b"Service Unavailable" if failing else b"No Content"
            # A kill "after the answer" stops the process before the answer is written and kills it
            # after: the 2xx has left, and the process can never have read it and recorded the delivery,
            # however fast it is (without the stop, a fast worker sometimes recorded it first).
            stopped = self.due_pid("answered") if status < 300 else None
            if stopped is not None:
                try:
                    os.kill(stopped, signal.SIGSTOP)
                except ProcessLookupError:
                    stopped = None
            try:
                writer.write(b"HTTP/1.1 %d %s\r\nContent-Length: 0\r\n\r\n" % (status, reason))
                await writer.drain()
            except BaseException:
                if stopped is not None:
                    os.kill(stopped, signal.SIGCONT)
                raise
        finally:
            self.inflight -= 1
        self.answered += 1
        self.write("answer", port, webhook_id, status)
        if status < 300 and self.kill_step("answered"):
            self.write("killed-after-answer", port, webhook_id)
        return True


async def receive_main(arguments):
    receiver = Receiver(arguments)
    servers = []
    for port in arguments.ports:
        servers.append(await asyncio.start_server(
            lambda r, w, port=port: receiver.serve_connection(r, w, port), "127.0.0.1", port, backlog=1024))
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signal_number, stopped.set)

    await stopped.wait()
    for server in servers:
        server.close()
    os.close(receiver.log)
    if arguments.stats:
        with open(arguments.stats, "w", encoding="ascii") as handle:
            json.dump({"arrived": receiver.arrived, "answered": receiver.answered, "kills": receiver.kills}, handle)


# --- ingest -------------------------------------------------------------------------------------------

RETRYABLE = {0, 408, 409, 429} | set(range(500, 600))


def invite_body(index):
    action = ("accept", "decline", "dismiss", "other")[index % 4]
    return {"actionIdentifier": action,
            "userInfo": {"aps": {"category": "invite"}, "eventId": str(index)}}


def snooze_token(key):
    return "0" + hashlib.sha256(key.encode()).hexdigest()[:63]


def snooze_send(key):
    """The notification a snooze reply answers: sent through ActionHook to the reply's device (a snooze
    re-sends only what ActionHook itself sent, to the device it sent it to)."""
    return {"to": [snooze_token(key)], "category": "timer",
            "aps": {"alert": {"title": "Timer", "body": "Your tea is ready"}}, "userInfo": {"timerId": key},
            "ttlSeconds": 3600}


def snooze_body(index, key, delays, sent):
    """A snooze of the notification `sent` (the send's answer), forwarded with the key its push carried."""
    return {"actionIdentifier": f"snooze-{delays[index % len(delays)]}",
            "notificationIdentifier": sent["collapseId"], "deviceToken": snooze_token(key),
            "userInfo": {"aps": {"alert": {"title": "Timer", "body": "Your tea is ready"}, "category": "timer"},
                         "timerId": key, "actionhook": {"n": sent["id"], "d": 0}}}


class Ingest:
    def __init__(self, arguments):
        self.arguments = arguments
        url = urllib.parse.urlsplit(arguments.url)
        self.host, self.port = url.hostname, url.port or 80
        self.path = (url.path or "/v1/responses")
        self.key = os.environ.get("FAULTS_INGEST_KEY", "")
        if not self.key:
            raise SystemExit("driver: FAULTS_INGEST_KEY is not set")
        self.delays = [int(d) for d in arguments.snooze_delays.split(",")]
        self.lock = threading.Lock()
        self.next_index = 0
        self.started = time.time()
        self.acked = 0
        self.failed = 0
        self.attempts = 0
        self.statuses = {}
        self.log = open(arguments.log, "a", encoding="utf-8") if arguments.log else None

    def take(self):
        """The next reply's index and when to send it, or None when done."""
        with self.lock:
            index = self.next_index
            if index >= self.arguments.count:
                return None
            if self.arguments.duration and time.time() - self.started >= self.arguments.duration:
                return None
            self.next_index += 1
        at = self.started + index / self.arguments.rate if self.arguments.rate else 0
        return index, at

    def record(self, key, attempt, start, end, status, retry_after, response_id):
        with self.lock:
            self.attempts += 1
            self.statuses[status] = self.statuses.get(status, 0) + 1
            if self.log:
                self.log.write(f"{key}\t{attempt}\t{start:.6f}\t{end:.6f}\t{status}\t{retry_after or chr(92) + 'N'}"
                               f"\t{response_id or chr(92) + 'N'}\n")

    def send(self, key):
        """Sends the notification of snooze `key` (--send-url, FAULTS_SERVER_KEY), retried under its own
        Idempotency-Key until acknowledged, and returns the answer."""
        url = urllib.parse.urlsplit(self.arguments.send_url)
        server_key = os.environ.get("FAULTS_SERVER_KEY", "")
        if not url.path or not server_key:
            raise SystemExit("driver: snoozes need --send-url and FAULTS_SERVER_KEY")
        body = json.dumps(snooze_send(key)).encode()
        for _ in range(300):
            try:
                connection = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=self.arguments.timeout)
                connection.request("POST", url.path, body=body, headers={
                    "Authorization": f"Bearer {server_key}", "Content-Type": "application/json",
                    "Idempotency-Key": f"{key}-send"})
                response = connection.getresponse()
                answer = response.read()
                connection.close()
                if response.status in (200, 202):
                    return json.loads(answer)
                if response.status not in RETRYABLE:
                    raise SystemExit(f"driver: the send of {key} answered {response.status}: {answer[:200]!r}")
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.1)
        raise SystemExit(f"driver: the send of {key} was never acknowledged")

    def connect(self):
        connection = http.client.HTTPConnection(self.host, self.port, timeout=self.arguments.timeout,
                                                source_address=(self.arguments.source_address, 0)
                                                if self.arguments.source_address else None)
        connection.connect()
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection

    def send_one(self, index, connection):
        key = f"{self.arguments.key_prefix}-{index}"
        if self.arguments.kind == "snooze":
            body = snooze_body(index, key, self.delays, self.send(key))
        else:
            body = invite_body(index)
        data = json.dumps(body, separators=(",", ":")).encode()
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json",
                   "Idempotency-Key": key}
        attempt = 0
        while True:
            attempt += 1
            start = time.time()
            status, retry_after, response_id = 0, None, None
            try:
                if connection is None:
                    connection = self.connect()
                connection.request("POST", self.path, body=data, headers=headers)
                response = connection.getresponse()
                answer = response.read()
                status = response.status
                retry_after = response.getheader("Retry-After")
                if status in (200, 202):
                    response_id = json.loads(answer).get("id")
                if self.arguments.fresh_connections or response.will_close:
                    connection.close()
                    connection = None
            except (OSError, http.client.HTTPException, ValueError):
                if connection is not None:
                    connection.close()
                connection = None
            end = time.time()
            self.record(key, attempt, start, end, status, retry_after, response_id)
            if status in (200, 202):
                with self.lock:
                    self.acked += 1
                return connection
            if self.arguments.no_retry or status not in RETRYABLE:
                with self.lock:
                    self.failed += 1
                return connection
            wait = min(1.0, float(retry_after)) if retry_after and retry_after.isdigit() else min(
                1.0, 0.05 * 2 ** min(attempt - 1, 5))
            time.sleep(wait * random.uniform(0.8, 1.2))

    def worker(self):
        connection = None
        while True:
            taken = self.take()
            if taken is None:
                break
            index, at = taken
            pause = at - time.time()
            if pause > 0:
                time.sleep(pause)
            connection = self.send_one(index, connection)
        if connection is not None:
            connection.close()

    def report_progress(self, done):
        path = self.arguments.progress
        while not done.wait(0.1):
            with open(path + ".tmp", "w", encoding="ascii") as handle:
                handle.write(f"{self.acked}\n")
            os.replace(path + ".tmp", path)

    def run(self):
        done = threading.Event()
        reporter = None
        if self.arguments.progress:
            reporter = threading.Thread(target=self.report_progress, args=(done,), daemon=True)
            reporter.start()
        threads = [threading.Thread(target=self.worker) for _ in range(self.arguments.concurrency)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        done.set()
        if reporter:
            reporter.join()
            with open(self.arguments.progress, "w", encoding="ascii") as handle:
                handle.write(f"{self.acked}\n")
        if self.log:
            self.log.close()
        print(json.dumps({"replies": self.next_index, "acknowledged": self.acked, "failed": self.failed,
                          "attempts": self.attempts, "seconds": round(time.time() - self.started, 2),
                          "statuses": {str(k): v for k, v in sorted(self.statuses.items())}}))
        return 0


# --- send -------------------------------------------------------------------------------------------------


def send_main(arguments):
    """Sends COUNT notifications, each to one device with one no-reply step (a webhook), and answers every
    ANSWER-th one at once through the ingest route with the key the push would carry. Retries a send or a
    reply under the same Idempotency-Key until it is acknowledged. Logs `sent|answered <notification id>`."""
    url = urllib.parse.urlsplit(arguments.url)
    server_key = os.environ["FAULTS_SERVER_KEY"]
    ingest_key = os.environ["FAULTS_INGEST_KEY"]
    delays = [int(d) for d in arguments.step_delays.split(",")]
    lock = threading.Lock()
    log = open(arguments.log, "a", encoding="utf-8")

    def call(path, key, body, idempotency_key):
        for _ in range(100):
            try:
                connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
                connection.request("POST", path, body=json.dumps(body), headers={
                    "Authorization": f"Bearer {key}", "Content-Type": "application/json",
                    "Idempotency-Key": idempotency_key})
                response = connection.getresponse()
                answer = response.read()
                connection.close()
                if response.status in (200, 202):
                    return json.loads(answer)
                if response.status not in (409, 429, 503):
                    raise SystemExit(f"driver: {path} answered {response.status}: {answer[:200]!r}")
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.1)
        raise SystemExit(f"driver: {path} was never acknowledged")

    def one(n):
        token = "%064x" % random.getrandbits(256)
        sent = call(f"{url.path}", server_key, {
            "to": [{"deviceToken": token, "recipient": f"user-{n}"}], "aps": {"alert": f"#{n}"},
            "onNoReply": [{"afterSeconds": delays[n % len(delays)], "followUps": [{"type": "webhook"}]}],
        }, f"send-{n}")
        with lock:
            log.write(f"sent\t{sent['id']}\n")
        if arguments.answer and n % arguments.answer == 0:
            call("/v1/responses", ingest_key, {
                "actionIdentifier": "ok", "deviceToken": token,
                "userInfo": {"aps": {"alert": f"#{n}"}, "actionhook": {"n": sent["id"], "d": 0}},
            }, f"reply-{n}")
            with lock:
                log.write(f"answered\t{sent['id']}\n")

    with concurrent.futures.ThreadPoolExecutor(arguments.concurrency) as pool:
        for result in pool.map(one, range(arguments.count)):
            pass
    log.close()
    return 0


# --- probe --------------------------------------------------------------------------------------------


def probe_main(arguments):
    url = urllib.parse.urlsplit(arguments.url)
    stop_at = time.time() + arguments.duration
    with open(arguments.log, "a", encoding="utf-8") as log:
        while time.time() < stop_at:
            start = time.time()
            status = 0
            try:
                connection = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=10)
                connection.request("GET", url.path or "/")
                response = connection.getresponse()
                response.read()
                status = response.status
                connection.close()
            except (OSError, http.client.HTTPException):
                pass
            end = time.time()
            log.write(f"{start:.6f}\t{end:.6f}\t{status}\n")
            log.flush()
            time.sleep(max(0.0, arguments.interval - (end - start)))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    receive = commands.add_parser("receive")
    receive.add_argument("--ports", required=True, type=lambda text: [int(p) for p in text.split(",")])
    receive.add_argument("--log", required=True)
    receive.add_argument("--delay", type=float, default=0.0)
    receive.add_argument("--slow", type=float, nargs=2, metavar=("MIN", "MAX"))
    receive.add_argument("--stuck", type=float, nargs=2, metavar=("FRACTION", "SECONDS"))
    receive.add_argument("--fail-first", type=float, default=0.0)
    receive.add_argument("--kill-pidfile")
    receive.add_argument("--kill-plan")
    receive.add_argument("--stats")

    ingest = commands.add_parser("ingest")
    ingest.add_argument("--url", required=True)
    ingest.add_argument("--count", type=int, required=True)
    ingest.add_argument("--concurrency", type=int, default=16)
    ingest.add_argument("--rate", type=float, default=0.0)
    ingest.add_argument("--duration", type=float, default=0.0)
    ingest.add_argument("--kind", choices=("invite", "snooze"), default="invite")
    ingest.add_argument("--key-prefix", default="reply")
    ingest.add_argument("--snooze-delays", default="10")
    ingest.add_argument("--send-url", default="")
    ingest.add_argument("--log")
    ingest.add_argument("--progress")
    ingest.add_argument("--no-retry", action="store_true")
    ingest.add_argument("--fresh-connections", action="store_true")
    ingest.add_argument("--source-address")
    ingest.add_argument("--timeout", type=float, default=10.0)

    send = commands.add_parser("send")
    send.add_argument("--url", required=True)
    send.add_argument("--count", type=int, required=True)
    send.add_argument("--concurrency", type=int, default=8)
    send.add_argument("--step-delays", default="10")
    send.add_argument("--answer", type=int, default=2)
    send.add_argument("--log", required=True)

    probe = commands.add_parser("probe")
    probe.add_argument("--url", required=True)
    probe.add_argument("--interval", type=float, default=0.1)
    probe.add_argument("--duration", type=float, required=True)
    probe.add_argument("--log", required=True)

    arguments = parser.parse_args()
    if arguments.command == "receive":
        if arguments.kill_plan and not arguments.kill_pidfile:
            parser.error("--kill-plan needs --kill-pidfile")
        asyncio.run(receive_main(arguments))
        return 0
    if arguments.command == "ingest":
        return Ingest(arguments).run()
    if arguments.command == "send":
        return send_main(arguments)
    return probe_main(arguments)


if __name__ == "__main__":
    sys.exit(main())
