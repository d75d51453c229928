#!/usr/bin/env python3
"""The signed-replies contender's devices and requests (bench/run.sh, `actionhook-signed`).

    signed_replies.py register BASE_URL ADMIN_TOKEN APP DEVICES KEYS_JSON
        Makes DEVICES P-256 keys, registers each device of APP with its public key (the backend's
        PUT /v1/apps/{app}/devices/{token}) and keeps the private keys in KEYS_JSON.
    signed_replies.py generate KEYS_JSON APP LINES FILES PREFIX
        Writes LINES signed requests split over FILES files PREFIX-1.txt … (one per wrk thread), each line
        `<ActionHook-Reply-Signature>\\t<body>`: the benchmark's event-invite "accept" (bench/lua/ingest.lua's
        body) from one of the devices, with its own responseId (its idempotency key) and respondedAt now,
        signed as a phone signs it (examples/identity/sign_reply.py). Signing happens here, before the run,
        as phones sign on their own CPUs: the run measures the server's verification only.
"""

import json
import multiprocessing
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "identity"))

from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402

import sign_reply  # noqa: E402


def register(base, admin, app, devices, keys_path):
    keys = {}
    for index in range(devices):
        token = ("%08x" % (0x5E000000 + index)) * 8
        private = ec.generate_private_key(ec.SECP256R1())
        body = json.dumps({"environment": "production", "publicKey": sign_reply.public_key_base64(private.public_key())})
        request = urllib.request.Request(
            f"{base}/v1/apps/{app}/devices/{token}", data=body.encode(), method="PUT",
            headers={"Authorization": f"Bearer {admin}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request) as answer:
            assert answer.status == 200, answer.status
        keys[token] = private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    with open(keys_path, "w", encoding="utf-8") as out:
        json.dump(keys, out)


BODY = ('{"actionIdentifier":"accept","categoryIdentifier":"event-invite",'
        '"notificationIdentifier":"invite-%d-%d",'
        '"userInfo":{"aps":{"alert":{"title":"Rooftop party","body":"Saturday 8pm at the Rooftop"},'
        '"category":"event-invite","mutable-content":1,"thread-id":"calendar"},'
        '"eventId":%d,"calendarId":"team-%d","location":"Rooftop","startsAt":"2026-11-28T20:00:00Z",'
        '"organizer":{"id":"u-%d","tier":"standard"},"recurring":false,"attendees":12},'
        '"deviceToken":"%s","responseId":"%s","respondedAt":"%s"}')


def write_file(job):
    keys_path, app, lines, path, seed = job
    with open(keys_path, encoding="utf-8") as handle:
        pems = json.load(handle)
    devices = [(token, serialization.load_pem_private_key(pem.encode(), password=None)) for token, pem in pems.items()]
    now = time.time()
    responded = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + ".%03dZ" % (int(now * 1000) % 1000)
    with open(path, "w", encoding="utf-8") as out:
        for counter in range(1, lines + 1):
            event = (counter * 7919) % 20000 + 1
            token, private = devices[(seed * 131 + counter) % len(devices)]
            response_id = f"{seed}-{counter}-{os.getpid()}-{int(now)}"
            body = BODY % (seed, event, event, event % 7, event % 97, token, response_id, responded)
            reply = json.loads(body)
            signature = sign_reply.signature_header(private, app, reply)
            out.write(signature + "\t" + body + "\n")


def generate(keys_path, app, lines, files, prefix):
    per_file = lines // files + 1
    jobs = [(keys_path, app, per_file, f"{prefix}-{index}.txt", index) for index in range(1, files + 1)]
    with multiprocessing.Pool(min(files, os.cpu_count() or 1)) as pool:
        pool.map(write_file, jobs)


if __name__ == "__main__":
    if sys.argv[1:2] == ["register"] and len(sys.argv) == 7:
        register(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6])
    elif sys.argv[1:2] == ["generate"] and len(sys.argv) == 7:
        generate(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    else:
        sys.exit(__doc__)
