#!/usr/bin/env python3
"""An APNs stand-in for ActionHook's delivery tests: real HTTP/2 over TLS (ALPN "h2" only).

    apns_standin.py --cert server.pem --key server.key --auth-key KID:TEAMID:public.pem \
        [--auth-key ...] [--topic com.example.app ...] --log requests.jsonl

Listens on 127.0.0.1 on a free port and prints that port alone on stdout's first line. Exits on
SIGTERM/SIGINT, and when the test process that started it goes away: its parent process changes, or
stdin reaches end of file (pipe ends leaked into other children can delay the latter, hence both).

Every `POST /3/device/<token>` is checked the way APNs checks it, and answered like APNs: 200 with
`apns-id`, or an error status with `{"reason": ...}` (410 adds `timestamp`).

- The provider token: `authorization: bearer <JWT>`, ES256 over the public key of `--auth-key` for its
  `kid`, header `alg`/`kid`, claims `iss` (that key's team) and an integer `iat`. A bad signature or any
  malformed part is 403 InvalidProviderToken; `iat` more than an hour old is 403 ExpiredProviderToken.
- Token updates: a NEW token (one not seen before) for a `kid` whose `iat` is less than 20 minutes after
  the previous new token's `iat` is 429 TooManyProviderTokenUpdates (the status APNs documents). The
  first new token after APNs declared one of that kid's tokens expired is exempt (the client must
  replace an expired token). Updates are counted per `kid` across all connections: instances sending
  with one key must share its token.
- Headers: `apns-topic` (one of `--topic`, or one with the push type's suffix, when any is given),
  `apns-push-type`, `apns-priority` (1, 5 or 10; background pushes must not be 10), `apns-id` (a UUID),
  `apns-expiration` (digits), `apns-collapse-id` (at most 64 bytes).
- The payload: at most 4096 bytes (413 PayloadTooLarge), a JSON object with an `aps` object.

Behaviours chosen by the device token's first characters (tokens are hex, so are the markers):

    dead...   410 Unregistered
    bad0...   400 BadDeviceToken
    a429N...  429 TooManyRequests for the first N requests to this token (N one hex digit), then 200
    a503N...  503 ServiceUnavailable for the first N requests to this token, then 200
    e403...   403 ExpiredProviderToken for the first request to this token: the token (JWT) it carried is
              expired from then on, everywhere; a newer JWT (another one, iat not earlier) is accepted
    eeee...   403 ExpiredProviderToken always: every JWT sent to this token becomes expired

Each request is one JSON line in the log file, written before the answer is sent: `kind` "request",
`seq`, `conn` (the TCP connection's number, from 1), `stream`, `time` (UNIX seconds, float, when the
request was complete), `method`, `path`, `token`, `headers` (lower-case names, without the pseudo-headers
and authorization), `jwt` (the compact token), `jwtHeader`/`jwtClaims` (decoded, or null), `kid`, `iss`,
`iat`, `alg`, `status`, `reason` (null for 200), `payload` (the parsed JSON, or null) and `payloadBytes`.
Connections are logged too, as `kind` "connection" with `conn` and `alpn`.
"""

import argparse
import asyncio
import base64
import json
import os
import re
import signal
import ssl
import sys
import threading
import time

try:
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
except ImportError as error:  # pragma: no cover - the harness turns this into a test failure
    print(
        f"apns_standin: missing Python package ({error}); run scripts/install-deps.sh, which installs h2 and "
        "cryptography into .build-tools/venv",
        file=sys.stderr,
        flush=True,
    )
    sys.exit(3)

MAX_PAYLOAD = 4096
MAX_COLLAPSE_ID = 64
TOKEN_UPDATE_INTERVAL = 20 * 60
TOKEN_LIFETIME = 60 * 60
FUTURE_SKEW = 5 * 60
PUSH_TYPE_SUFFIXES = {
    "alert": "",
    "background": "",
    "mdm": "",
    "widgets": "",
    "controls": "",
    "voip": ".voip",
    "complication": ".complication",
    "fileprovider": ".pushkit.fileprovider",
    "location": ".location-query",
    "liveactivity": ".push-type.liveactivity",
    "pushtotalk": ".voip-ptt",
}
UUID_PATTERN = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
HEX_PATTERN = re.compile(r"^[0-9a-fA-F]+$")


class Rejection(Exception):
    def __init__(self, status, reason):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def b64url_decode(text):
    if not re.fullmatch(r"[A-Za-z0-9_-]*", text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class KeyState:
    def __init__(self, team, public_key):
        self.team = team
        self.public_key = public_key
        self.last_new_iat = None  # iat of the last new token accepted for this kid
        self.exempt = False  # the next new token replaces an expired one
        self.expired_iat = None  # newest iat among this kid's expired tokens


class StandIn:
    def __init__(self, keys, topics, log_path):
        self.keys = keys
        self.topics = topics
        self.log = open(log_path, "a", encoding="utf-8")
        self.seq = 0
        self.connections = 0
        self.token_requests = {}  # device token -> requests so far
        self.seen_jwts = set()  # accepted as new (counted against the update interval)
        self.expired_jwts = set()

    def write(self, record):
        self.log.write(json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n")
        self.log.flush()

    def next_connection(self, alpn):
        self.connections += 1
        self.write({"kind": "connection", "conn": self.connections, "alpn": alpn, "time": time.time()})
        return self.connections

    # The provider token: its claims, or a Rejection.
    def verify_jwt(self, authorization, record):
        if authorization is None:
            raise Rejection(403, "MissingProviderToken")
        parts = authorization.split(" ", 1)
        if len(parts) != 2 or parts[0].lower() != "bearer":
            raise Rejection(403, "InvalidProviderToken")
        jwt = parts[1].strip()
        record["jwt"] = jwt
        pieces = jwt.split(".")
        if len(pieces) != 3:
            raise Rejection(403, "InvalidProviderToken")
        try:
            header = json.loads(b64url_decode(pieces[0]))
            claims = json.loads(b64url_decode(pieces[1]))
            signature = b64url_decode(pieces[2])
        except ValueError:
            raise Rejection(403, "InvalidProviderToken")
        record["jwtHeader"] = header
        record["jwtClaims"] = claims
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise Rejection(403, "InvalidProviderToken")
        record["alg"] = header.get("alg")
        record["kid"] = header.get("kid")
        record["iss"] = claims.get("iss")
        record["iat"] = claims.get("iat")
        if header.get("alg") != "ES256" or set(header) - {"alg", "kid", "typ"}:
            raise Rejection(403, "InvalidProviderToken")
        key = self.keys.get(header.get("kid"))
        if key is None:
            raise Rejection(403, "InvalidProviderToken")
        if len(signature) != 64:
            raise Rejection(403, "InvalidProviderToken")
        der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
        try:
            key.public_key.verify(der, (pieces[0] + "." + pieces[1]).encode("ascii"), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            raise Rejection(403, "InvalidProviderToken")
        iat = claims.get("iat")
        if claims.get("iss") != key.team or not isinstance(iat, int) or isinstance(iat, bool):
            raise Rejection(403, "InvalidProviderToken")
        if iat > time.time() + FUTURE_SKEW:
            raise Rejection(403, "InvalidProviderToken")
        return jwt, key, iat

    def expire(self, jwt, key, iat):
        self.expired_jwts.add(jwt)
        key.exempt = True
        key.expired_iat = iat if key.expired_iat is None else max(key.expired_iat, iat)

    def judge(self, method, path, headers, body, record):
        if method != "POST":
            raise Rejection(405, "MethodNotAllowed")
        match = re.fullmatch(r"/3/device/([^/?#]*)", path or "")
        if not match:
            raise Rejection(404, "BadPath")
        token = match.group(1)
        record["token"] = token
        count = self.token_requests.get(token, 0) + 1
        self.token_requests[token] = count

        jwt, key, iat = self.verify_jwt(headers.get("authorization"), record)
        if jwt in self.expired_jwts:
            raise Rejection(403, "ExpiredProviderToken")
        if time.time() - iat > TOKEN_LIFETIME:
            self.expire(jwt, key, iat)
            raise Rejection(403, "ExpiredProviderToken")
        if key.expired_iat is not None and iat < key.expired_iat:
            raise Rejection(403, "ExpiredProviderToken")
        if jwt not in self.seen_jwts:
            if key.last_new_iat is not None and iat - key.last_new_iat < TOKEN_UPDATE_INTERVAL and not key.exempt:
                raise Rejection(429, "TooManyProviderTokenUpdates")
            self.seen_jwts.add(jwt)
            key.last_new_iat = iat
            key.exempt = False
        lowered = token.lower()
        if lowered.startswith("eeee") or (lowered.startswith("e403") and count == 1):
            self.expire(jwt, key, iat)
            raise Rejection(403, "ExpiredProviderToken")

        topic = headers.get("apns-topic")
        push_type = headers.get("apns-push-type")
        if not topic:
            raise Rejection(400, "MissingTopic")
        if push_type not in PUSH_TYPE_SUFFIXES:
            raise Rejection(400, "InvalidPushType")
        if self.topics and topic not in {t + PUSH_TYPE_SUFFIXES[push_type] for t in self.topics}:
            raise Rejection(400, "TopicDisallowed")
        priority = headers.get("apns-priority")
        if priority is not None and priority not in ("1", "5", "10"):
            raise Rejection(400, "BadPriority")
        if push_type == "background" and priority == "10":
            raise Rejection(400, "BadPriority")
        apns_id = headers.get("apns-id")
        if apns_id is not None and not UUID_PATTERN.match(apns_id):
            raise Rejection(400, "BadMessageId")
        expiration = headers.get("apns-expiration")
        if expiration is not None and not expiration.isdigit():
            raise Rejection(400, "BadExpirationDate")
        collapse_id = headers.get("apns-collapse-id")
        if collapse_id is not None and len(collapse_id.encode("utf-8")) > MAX_COLLAPSE_ID:
            raise Rejection(400, "BadCollapseId")

        if not body:
            raise Rejection(400, "PayloadEmpty")
        if len(body) > MAX_PAYLOAD:
            raise Rejection(413, "PayloadTooLarge")
        try:
            payload = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise Rejection(400, "BadPayload")
        record["payload"] = payload
        if not isinstance(payload, dict) or not isinstance(payload.get("aps"), dict):
            raise Rejection(400, "BadPayload")

        if not token or not HEX_PATTERN.match(token) or len(token) % 2:
            raise Rejection(400, "BadDeviceToken")
        if lowered.startswith("dead"):
            raise Rejection(410, "Unregistered")
        if lowered.startswith("bad0"):
            raise Rejection(400, "BadDeviceToken")
        for marker, status, reason in (("a429", 429, "TooManyRequests"), ("a503", 503, "ServiceUnavailable")):
            if lowered.startswith(marker) and len(lowered) > 4 and count <= int(lowered[4], 16):
                raise Rejection(status, reason)
        return apns_id

    def handle(self, conn, stream, headers_list, body):
        pseudo = {}
        headers = {}
        for name, value in headers_list:
            if name.startswith(":"):
                pseudo[name] = value
            else:
                headers[name.lower()] = value
        self.seq += 1
        record = {
            "kind": "request",
            "seq": self.seq,
            "conn": conn,
            "stream": stream,
            "time": time.time(),
            "method": pseudo.get(":method"),
            "path": pseudo.get(":path"),
            "token": None,
            "headers": {k: v for k, v in headers.items() if k != "authorization"},
            "jwt": None,
            "jwtHeader": None,
            "jwtClaims": None,
            "alg": None,
            "kid": None,
            "iss": None,
            "iat": None,
            "payload": None,
            "payloadBytes": len(body),
        }
        apns_id = headers.get("apns-id")
        try:
            self.judge(pseudo.get(":method"), pseudo.get(":path"), headers, body, record)
            status, answer = 200, b""
            record["reason"] = None
        except Rejection as rejection:
            status = rejection.status
            record["reason"] = rejection.reason
            answer_object = {"reason": rejection.reason}
            if status == 410:
                answer_object["timestamp"] = int(time.time() * 1000)
            answer = json.dumps(answer_object).encode("utf-8")
        record["status"] = status
        self.write(record)
        response_headers = [(":status", str(status))]
        if apns_id and UUID_PATTERN.match(apns_id):
            response_headers.append(("apns-id", apns_id.upper()))
        if answer:
            response_headers.append(("content-type", "application/json; charset=utf-8"))
            response_headers.append(("content-length", str(len(answer))))
        return response_headers, answer


class H2Protocol(asyncio.Protocol):
    def __init__(self, standin):
        self.standin = standin
        self.h2 = h2.connection.H2Connection(
            config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        )
        self.streams = {}
        self.transport = None
        self.conn = 0

    def connection_made(self, transport):
        self.transport = transport
        ssl_object = transport.get_extra_info("ssl_object")
        alpn = ssl_object.selected_alpn_protocol() if ssl_object is not None else None
        self.conn = self.standin.next_connection(alpn)
        if alpn != "h2":
            transport.close()
            return
        self.h2.initiate_connection()
        self.flush()

    def flush(self):
        data = self.h2.data_to_send()
        if data and self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def data_received(self, data):
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.flush()
            self.transport.close()
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                self.streams[event.stream_id] = (event.headers, bytearray())
            elif isinstance(event, h2.events.DataReceived):
                if event.stream_id in self.streams:
                    self.streams[event.stream_id][1].extend(event.data)
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                entry = self.streams.pop(event.stream_id, None)
                if entry is not None:
                    self.respond(event.stream_id, entry[0], bytes(entry[1]))
            elif isinstance(event, h2.events.StreamReset):
                self.streams.pop(event.stream_id, None)
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.flush()
                self.transport.close()
                return
        self.flush()

    def respond(self, stream_id, headers, body):
        response_headers, answer = self.standin.handle(self.conn, stream_id, headers, body)
        try:
            self.h2.send_headers(stream_id, response_headers, end_stream=not answer)
            if answer:
                self.h2.send_data(stream_id, answer, end_stream=True)
        except h2.exceptions.H2Error:
            pass


def parse_key(spec):
    try:
        kid, team, path = spec.split(":", 2)
    except ValueError:
        raise SystemExit(f"apns_standin: --auth-key wants KID:TEAMID:PEMFILE, got {spec!r}")
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        public_key = serialization.load_pem_public_key(data)
    except ValueError:
        public_key = serialization.load_pem_private_key(data, password=None).public_key()
    if not isinstance(public_key, ec.EllipticCurvePublicKey) or public_key.curve.name != "secp256r1":
        raise SystemExit("apns_standin: the provider key must be a P-256 key")
    return kid, KeyState(team, public_key)


async def serve(arguments):
    keys = dict(parse_key(spec) for spec in arguments.auth_key)
    standin = StandIn(keys, set(arguments.topic or []), arguments.log)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(arguments.cert, arguments.key)
    context.set_alpn_protocols(["h2"])
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: H2Protocol(standin), "127.0.0.1", 0, ssl=context)
    print(server.sockets[0].getsockname()[1], flush=True)

    stopped = asyncio.Event()
    # A parent may start us with these blocked (the mask is inherited through exec): unblock them.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signal_number, stopped.set)

    def watch_stdin():
        # End of file on stdin: the process that started us is gone.
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except (OSError, ValueError):
            pass
        loop.call_soon_threadsafe(stopped.set)

    if not arguments.ignore_stdin:
        threading.Thread(target=watch_stdin, daemon=True).start()

    parent = os.getppid()

    async def watch_parent():
        while not stopped.is_set():
            if os.getppid() != parent:
                stopped.set()
            await asyncio.sleep(0.5)

    watcher = asyncio.ensure_future(watch_parent())
    await stopped.wait()
    watcher.cancel()
    server.close()
    standin.log.close()


def main():
    parser = argparse.ArgumentParser(description="An APNs stand-in speaking HTTP/2 over TLS.")
    parser.add_argument("--cert", required=True, help="server certificate chain, PEM")
    parser.add_argument("--key", required=True, help="server private key, PEM")
    parser.add_argument("--auth-key", action="append", required=True, help="KID:TEAMID:PEM (public or private)")
    parser.add_argument("--topic", action="append", help="an allowed apns-topic (bundle id); any when none")
    parser.add_argument("--log", required=True, help="file the JSON lines are appended to")
    parser.add_argument("--ignore-stdin", action="store_true", help="do not exit at end of file on stdin")
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
