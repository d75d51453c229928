#!/usr/bin/env python3
"""Mint an ActionHook user token: what your backend hands its signed-in user's app.

The app sends the token with every reply and device registration (header ActionHook-User-Token);
ActionHook verifies it with the public key (or HS256 secret) registered in the app's `identity`
and records the user as verified. Keep the private key on your backend; never ship it in the app.

    pip install "PyJWT[crypto]"
    python3 mint_user_token.py --app calendar --user alice --kid backend-2026-11 --key es256-private.pem

Prints the token. `--algorithm HS256 --key-text SECRET` signs with the secret ActionHook generated.
"""

import argparse
import sys
import time

import jwt  # PyJWT


def mint_user_token(app_id, user_id, kid, key, algorithm="ES256", lifetime_seconds=3600, now=None):
    """A user token for `user_id` of ActionHook app `app_id`, signed with `key` under `kid`.

    `key` is a PEM private key (ES256: P-256; RS256: 2048 bits or more) or, for HS256, the secret.
    Keep the lifetime short: an hour is plenty, the app asks for a new token when it nears expiry.
    """
    issued = int(now if now is not None else time.time())
    claims = {
        "sub": user_id,  # the user id, 1 to 64 characters: the `user` sends and replies name
        "aud": app_id,  # the ActionHook app: a token for one app is refused by every other
        "iat": issued,
        "exp": issued + lifetime_seconds,
    }
    return jwt.encode(claims, key, algorithm=algorithm, headers={"kid": kid})


def main(argv):
    parser = argparse.ArgumentParser(description="Mint an ActionHook user token.")
    parser.add_argument("--app", required=True, help="the ActionHook app id (the token's audience)")
    parser.add_argument("--user", required=True, help="the signed-in user's id")
    parser.add_argument("--kid", required=True, help="the key id registered in the app's identity keys")
    parser.add_argument("--algorithm", default="ES256", choices=["ES256", "RS256", "HS256"])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--key", help="file with the PEM private key (ES256, RS256)")
    source.add_argument("--key-text", help="the HS256 secret ActionHook showed when the key was added")
    parser.add_argument("--lifetime", type=int, default=3600, help="seconds until the token expires")
    args = parser.parse_args(argv)
    if args.key is not None:
        with open(args.key, encoding="utf-8") as handle:
            key = handle.read()
    else:
        key = args.key_text
    print(mint_user_token(args.app, args.user, args.kid, key, args.algorithm, args.lifetime))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
