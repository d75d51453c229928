-- Devices registered under users: the backend registers each device of its users (a server key), and a
-- send names users beside device tokens. `devices` held only what APNs said of a token (dead); a
-- registered device is a row of it too, with its user, APNs environment and what the app reported.
--
-- status: `active` (registered, or only ever pushed to), `dead` (APNs said 410 or BadDeviceToken, with the
-- reason and `updated_at`; a registration after it revives the device) or `removed` (unregistered, or
-- pushed out by the user's newest devices past the bound).
ALTER TABLE devices DROP CONSTRAINT devices_status_check;
ALTER TABLE devices ADD CONSTRAINT devices_status_check CHECK (status IN ('active', 'dead', 'removed'));
ALTER TABLE devices
    ADD COLUMN user_id       text,
    ADD COLUMN platform      text CHECK (platform IN ('ios')),
    ADD COLUMN environment   text CHECK (environment IN ('sandbox', 'production')),
    ADD COLUMN locale        text,
    ADD COLUMN time_zone     text,
    ADD COLUMN app_version   text,
    ADD COLUMN os_version    text,
    ADD COLUMN model         text,
    -- When the device was last registered (a registration is also how the app says it was seen).
    ADD COLUMN registered_at timestamptz;
-- A user's devices, newest first: what a send to the user reads, in its transaction.
CREATE INDEX devices_user ON devices (app_id, user_id, registered_at DESC) WHERE user_id IS NOT NULL;
