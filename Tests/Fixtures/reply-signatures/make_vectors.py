#!/usr/bin/env python3
"""Writes vectors.json: replies, the exact bytes a device signs for each, and a signature by a fixed test
key, made with examples/identity/sign_reply.py (Python's `cryptography`, not the Swift code the vectors
test). The server's tests (ActionHookCoreTests) and ActionHookKit's read the same file.

    .build-tools/venv/bin/python Tests/Fixtures/reply-signatures/make_vectors.py
"""

import base64
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "examples", "identity"))

from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402

import sign_reply  # noqa: E402

# A key for these vectors alone: the scalar is fixed so the public key and fingerprint never change.
PRIVATE = ec.derive_private_key(0x1F2E3D4C5B6A79880102030405060708090A0B0C0D0E0F101112131415161718, ec.SECP256R1())

DEVICE = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
REPLIES = [
    ("a text reply", {
        "actionIdentifier": "comment", "userText": "Bin in 5 Min — 👍\tok",
        "userInfo": {"aps": {"category": "invite"}, "eventId": "42"},
        "deviceToken": DEVICE, "responseId": "r-0001", "respondedAt": "2026-11-28T10:40:46.123Z"}),
    ("a reply to a send", {
        "actionIdentifier": "accept",
        "userInfo": {"aps": {"category": "invite"}, "eventId": "42", "actionhook": {
            "n": "0193a1e8-2b7c-7a4e-9f10-0123456789ab", "d": 3, "exp": 1796000000}},
        "deviceToken": DEVICE, "responseId": "r-0002", "respondedAt": "2026-11-28T10:40:47.000Z"}),
    ("an empty text, an upper-case token, an offset and microseconds", {
        "actionIdentifier": "com.apple.UNNotificationDefaultActionIdentifier", "userText": "",
        "deviceToken": DEVICE.upper(), "responseId": "6F0C1D2E-AAAA-4BBB-8CCC-0123456789AB",
        "respondedAt": "2026-11-28T11:40:46.123999+01:00"}),
]


def main():
    public = PRIVATE.public_key()
    vectors = {
        "about": "Reply signatures (README: Signed replies). Made by make_vectors.py; do not edit by hand.",
        "privateKeyPEM": PRIVATE.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode(),
        "publicKey": sign_reply.public_key_base64(public),
        "publicKeyDER": base64.b64encode(public.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)).decode(),
        "fingerprint": sign_reply.fingerprint(public),
        "app": "calendar",
        "vectors": [],
    }
    for name, reply in REPLIES:
        message = sign_reply.canonical("calendar", reply)
        vectors["vectors"].append({
            "name": name, "reply": reply, "message": message.decode("utf-8"),
            "signature": base64.b64encode(sign_reply.sign(PRIVATE, message)).decode(),
            "header": None,
        })
        vectors["vectors"][-1]["header"] = "key=%s, sig=%s" % (
            vectors["fingerprint"], vectors["vectors"][-1]["signature"])
    with open(os.path.join(HERE, "vectors.json"), "w", encoding="utf-8") as out:
        json.dump(vectors, out, indent=2, ensure_ascii=False)
        out.write("\n")


if __name__ == "__main__":
    main()
