#!/usr/bin/env python3
"""Sign an ActionHook reply as a device does: the canonical bytes, the signature, the header.

ActionHookKit signs every reply on the phone with the device's key (Secure Enclave where there is one).
This is the same encoding for a client on another platform, and what the server's and the package's
test vectors are made with. The device registers the public half first (`publicKey` in
PUT /v1/devices/{deviceToken}); its private half never leaves the device.

    pip install cryptography
    python3 sign_reply.py --app calendar --key device-p256.pem reply.json

Prints the header to send with the reply's JSON body: ActionHook-Reply-Signature: key=…, sig=…
"""

import argparse
import base64
import datetime
import hashlib
import json
import re
import sys

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

VERSION = "actionhook-reply-v1"


def responded_at_utc(text):
    """`respondedAt` as ActionHook stores it: UTC, to the millisecond (truncated), with a Z."""
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (moment.microsecond // 1000)


UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def notification_key(reply):
    """`userInfo.actionhook` as ActionHook reads it: `n` a UUID and `d` a whole number from 0 to 2^20 − 1,
    else no key at all (both lines empty)."""
    key = (reply.get("userInfo") or {}).get("actionhook")
    if not isinstance(key, dict):
        return {}
    n, d = key.get("n"), key.get("d")
    if isinstance(n, str) and UUID.match(n) and isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 1 << 20:
        return {"n": n, "d": d}
    return {}


def canonical(app_id, reply):
    """The bytes a device signs for `reply` (the JSON body it sends) of ActionHook app `app_id`."""
    key = notification_key(reply)
    text = reply.get("userText")
    fields = [
        ("app", app_id),
        ("responseId", reply["responseId"]),
        ("action", reply["actionIdentifier"]),
        ("text", "" if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()),
        ("respondedAt", responded_at_utc(reply["respondedAt"])),
        ("device", reply["deviceToken"].lower()),
        ("notification", key.get("n", "").lower()),
        ("position", str(key["d"]) if "d" in key else ""),
    ]
    for name, value in fields:
        if "\n" in value:
            raise ValueError(name + " must not hold a line feed")
    return "\n".join([VERSION] + [name + "=" + value for name, value in fields]).encode("utf-8")


def fingerprint(public_key):
    """The key's fingerprint: hex of the first 16 bytes of SHA-256 over its X9.63 (uncompressed) form."""
    x963 = public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return hashlib.sha256(x963).digest()[:16].hex()


def public_key_base64(public_key):
    """The `publicKey` member of the device's registration: base64 of the X9.63 form (65 bytes)."""
    x963 = public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return base64.b64encode(x963).decode("ascii")


def sign(private_key, message):
    """ECDSA P-256 over SHA-256 of `message`, as the raw 64 bytes r‖s (CryptoKit's rawRepresentation)."""
    # Deterministic (RFC 6979): the same key and bytes give the same signature, so the vectors never churn.
    r, s = decode_dss_signature(private_key.sign(message, ec.ECDSA(hashes.SHA256(), deterministic_signing=True)))
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def signature_header(private_key, app_id, reply):
    """The ActionHook-Reply-Signature header's value for `reply`."""
    signature = sign(private_key, canonical(app_id, reply))
    return "key=%s, sig=%s" % (fingerprint(private_key.public_key()), base64.b64encode(signature).decode("ascii"))


def main(argv):
    parser = argparse.ArgumentParser(description="Sign an ActionHook reply.")
    parser.add_argument("--app", required=True, help="the ActionHook app id")
    parser.add_argument("--key", required=True, help="file with the device's PEM P-256 private key")
    parser.add_argument("reply", help="file with the reply's JSON body")
    args = parser.parse_args(argv)
    with open(args.key, "rb") as handle:
        private_key = serialization.load_pem_private_key(handle.read(), password=None)
    with open(args.reply, encoding="utf-8") as handle:
        reply = json.load(handle)
    print("ActionHook-Reply-Signature: " + signature_header(private_key, args.app, reply))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
