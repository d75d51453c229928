-- Identity verification: an app's mode and the keys its backend signs user tokens with (public keys, and
-- HS256 secrets ActionHook generated), as one JSON value read with the app's keys on every cache load.
-- NULL is identity off.
ALTER TABLE apps ADD COLUMN identity jsonb;

-- A reply's user. `user_verified`: the `sub` of the user token it came with, verified against the app's keys.
-- Otherwise the user the send reached the replying device as (the backend's word, not the reply's), or NULL.
-- Never a user the reply merely claimed.
ALTER TABLE responses
    ADD COLUMN user_id       text,
    ADD COLUMN user_verified boolean NOT NULL DEFAULT false;
