#!/usr/bin/env python3
"""Writes actionhook-config.schema.json, the JSON Schema of `actionhook apply` files, from openapi.yaml.

The categories and rules of a file are exactly the API's: their schemas (and everything they refer to)
are copied from openapi.yaml's components, `#/components/schemas/X` becoming `#/$defs/X`. Run it after
changing those schemas; the Swift test suite checks that the committed file matches openapi.yaml.

    python3 scripts/gen-config-schema.py
"""
import json
import pathlib

import yaml

root = pathlib.Path(__file__).resolve().parent.parent
schemas = yaml.safe_load((root / "openapi.yaml").read_text(encoding="utf-8"))["components"]["schemas"]
prefix = "#/components/schemas/"


def rewrite(value, found):
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "$ref" and isinstance(item, str) and item.startswith(prefix):
                name = item[len(prefix):]
                found.append(name)
                out[key] = "#/$defs/" + name
            else:
                out[key] = rewrite(item, found)
        return out
    if isinstance(value, list):
        return [rewrite(item, found) for item in value]
    return value


defs = {}
pending = ["CategoryInput", "RuleCreate", "RetentionDays", "Slug", "IdentitySettings"]
while pending:
    name = pending.pop()
    if name in defs:
        continue
    found = []
    defs[name] = rewrite(schemas[name], found)
    pending.extend(found)

environment_reference = {
    "type": "string",
    "pattern": r"^\$\{ENV:[A-Za-z0-9_]+\}$",
    "description": "${ENV:NAME}: the value of the environment variable NAME when the file is applied.",
}
document = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ActionHook app configuration",
    "description": (
        "One app's settings that are not secret, categories and rules, for `actionhook apply -f FILE` "
        "(YAML or JSON). Categories and rules take the shapes of the admin API (openapi.yaml). Secrets are "
        "never written in the file: `webhook.secret` and `apns.privateKey` are ${ENV:NAME}. Settings left "
        "out are left as they are; `null` removes `webhook`, `apns`, `rateLimitPerSecond` or `retentionDays`, "
        "and turns `identity` off."
    ),
    "type": "object",
    "additionalProperties": False,
    "required": ["app"],
    "properties": {
        "$schema": {"type": "string"},
        "app": {"$ref": "#/$defs/Slug", "description": "The app's id; apply creates the app when it does not exist."},
        "name": {"type": "string", "minLength": 1, "maxLength": 200},
        "webhook": {
            "oneOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "url": {"type": "string", "format": "uri", "maxLength": 2048},
                        "secret": {"$ref": "#/$defs/EnvironmentReference"},
                    },
                },
            ]
        },
        "apns": {
            "oneOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "teamId": {"type": "string", "pattern": "^[A-Za-z0-9]{10}$"},
                        "keyId": {"type": "string", "pattern": "^[A-Za-z0-9]{10}$"},
                        "topic": {"type": "string", "minLength": 1, "maxLength": 255},
                        "environment": {"enum": ["sandbox", "production"]},
                        "privateKey": {"$ref": "#/$defs/EnvironmentReference"},
                    },
                },
            ]
        },
        "rateLimitPerSecond": {"type": ["integer", "null"], "minimum": 1, "maximum": 1000000},
        "retentionDays": {"$ref": "#/$defs/RetentionDays"},
        "identity": {
            "oneOf": [{"type": "null"}, {"$ref": "#/$defs/IdentitySettings"}],
            "description": (
                "User-token verification: the mode and the keys (kid, algorithm, publicKey). An HS256 key has no "
                "secret in the file: the server generates it and `apply` prints it once."
            ),
        },
        "categories": {
            "type": "array",
            "maxItems": 1000,
            "items": {"allOf": [{"$ref": "#/$defs/CategoryInput"}, {"required": ["identifier"]}]},
        },
        "rules": {"type": "array", "maxItems": 1000, "items": {"$ref": "#/$defs/RuleCreate"}},
    },
    "$defs": {"EnvironmentReference": environment_reference, **dict(sorted(defs.items()))},
}
(root / "actionhook-config.schema.json").write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
print("wrote actionhook-config.schema.json with", len(defs), "definitions from openapi.yaml")
