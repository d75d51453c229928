-- The APNs provider token of each signing key, shared by every instance. APNs accepts a token for an
-- hour and answers 429 TooManyProviderTokenUpdates to a new token for a key within 20 minutes of the
-- last one; instances that each signed their own token refused each other's (with three instances on
-- one APNs stand-in, 70 of 100 pushes). Now one instance signs, stores the token here, and the others
-- read it; each keeps it in memory and comes back only when it is stale (40 minutes old) or APNs refused
-- it (403 ExpiredProviderToken or InvalidProviderToken).
--
-- A refresh takes the key's advisory lock (class 2, `hashtext(current_schema() || chr(31) || team_id
-- || chr(31) || key_id)`, for the transaction), reads the row again and replaces it only when it is
-- still stale, or still the refused token: an instance that waited for the lock uses the token the
-- first one wrote, so a key gets one new token however many instances noticed.
--
-- Not an app's table (no app_id): every app holding the same key shares its token, as APNs counts
-- updates per key. The key is part of the primary key (a digest of its public half): an app that names
-- another team's key id with a private key of its own gets a row of its own, and never that team's
-- token. The token is a credential, as the apps' private keys it is signed with are.
CREATE TABLE apns_provider_tokens (
    team_id    text NOT NULL,
    key_id     text NOT NULL,
    -- SHA-256 of the public key (X9.63 form): names the private key without revealing it.
    key_digest bytea NOT NULL,
    -- The compact JWT, and its `iat` (UNIX seconds, by the clock of the instance that signed it).
    token      text NOT NULL,
    issued_at  bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, key_id, key_digest)
);
