-- wrk script for POST /v1/responses, shared by every HTTP contender (bare C, peer, C reference, ActionHook).
--
-- Settings come from the environment:
--   BENCH_MODE     ingest (default): a realistic event-invite "accept"; every request has its own
--                  Idempotency-Key (run nonce, thread id, counter) and its own mix of event and device.
--                  reject: a valid-JSON "comment" with blank userText, which ActionHook refuses with
--                  422 before the database.
--                  mixed: as ingest, but only every 4th answer is "accept" (one webhook follow-up with
--                  bench/setup-app.sh's rules); the others are "maybe" (recorded, no follow-up).
--                  maybe: every answer "maybe": durable ingest with no follow-up.
--                  snooze: a TIMER_EXPIRED "snooze", each under its own notificationIdentifier, all from
--                  the device BENCH_TOKEN and bound to the notification BENCH_NOTIFICATION that was sent
--                  to it (a rule with a snooze handler re-sends its push there when due).
--   BENCH_KEY      the ingest key sent as the bearer token
--   BENCH_USER_TOKENS  a file of user tokens, one per line (an app with identity `required`): each request
--                  carries one in ActionHook-User-Token, in turn, each thread starting at its own, so every
--                  user (as many as connections) keeps answering throughout the run
--   BENCH_SIGNED   a path prefix (an app whose devices registered keys): thread N sends, in order, the lines of
--                  PREFIX-N.txt that bench/signed_replies.py wrote, each a signed reply and its
--                  ActionHook-Reply-Signature; the reply's responseId is its idempotency key. Where a thread
--                  stopped is kept in PREFIX-N.pos, so the next run (a later phase) goes on from there
--   BENCH_EXPECT   the status every answer must have (default 202); others are counted as errors
--   BENCH_RATE     0 (default): closed loop, each connection sends as soon as it has its answer.
--                  N > 0: paced to N requests/s in all; each thread hands out send slots 1/(N/threads)
--                  apart through wrk's delay(), so at most the connections are in flight at once
--                  (latency is measured from the actual send, as wrk does: no coordinated-omission fix).
--   BENCH_THREADS  wrk's -t, to split BENCH_RATE between threads (default 1)
--   BENCH_NONCE    makes keys unique across runs (default: the time)
--   BENCH_OUT      file the summary JSON is written to (default: stdout only)
local ffi = require("ffi")
ffi.cdef [[
    typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
    int clock_gettime(int clock, bench_timespec *ts);
]]

local mode = os.getenv("BENCH_MODE") or "ingest"
local key = os.getenv("BENCH_KEY") or "ahk_missing"
local expect = tonumber(os.getenv("BENCH_EXPECT") or "202")
local rate = tonumber(os.getenv("BENCH_RATE") or "0")
local wrk_threads = tonumber(os.getenv("BENCH_THREADS") or "1")
local nonce = os.getenv("BENCH_NONCE") or tostring(os.time())
local out = os.getenv("BENCH_OUT")
local fixed_token = os.getenv("BENCH_TOKEN")
local user_tokens_file = os.getenv("BENCH_USER_TOKENS")
local signed_prefix = os.getenv("BENCH_SIGNED")

-- setup() runs in the main Lua state, once per thread; done() reads the threads back from here.
local threads = {}
local next_id = 1
function setup(thread)
    thread:set("id", next_id)
    next_id = next_id + 1
    table.insert(threads, thread)
end

-- Per-thread state below (each wrk thread has its own Lua state). Globals, so that done() can read
-- them with thread:get().
counter = 0
statuses = {}
unexpected = 0
local slot_ms = nil
local interval_ms = 0
local ts = ffi.new("bench_timespec")

local function now_ms()
    ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
    return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
end

user_tokens = {}
signed_lines = nil
signed_offset = 0

function init(args)
    if signed_prefix then
        signed_lines = assert(io.open(signed_prefix .. "-" .. id .. ".txt", "r"))
        local kept = io.open(signed_prefix .. "-" .. id .. ".pos", "r")
        if kept then
            signed_offset = tonumber(kept:read("*l")) or 0
            kept:close()
            signed_lines:seek("set", signed_offset)
        end
    end
    if rate > 0 then
        interval_ms = 1000 / (rate / wrk_threads)
    end
    if user_tokens_file then
        for line in io.lines(user_tokens_file) do
            if #line > 0 then
                table.insert(user_tokens, line)
            end
        end
    end
end

local headers = {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer " .. key,
}

local invite_body = [[{"actionIdentifier":"accept","categoryIdentifier":"event-invite",]]
    .. [["notificationIdentifier":"invite-%d-%d",]]
    .. [["userInfo":{"aps":{"alert":{"title":"Rooftop party","body":"Saturday 8pm at the Rooftop"},]]
    .. [["category":"event-invite","mutable-content":1,"thread-id":"calendar"},]]
    .. [["eventId":%d,"calendarId":"team-%d","location":"Rooftop","startsAt":"2026-11-28T20:00:00Z",]]
    .. [["organizer":{"id":"u-%d","tier":"standard"},"recurring":false,"attendees":12},]]
    .. [["deviceToken":"%s","respondedAt":"2026-11-20T10:00:00.000Z"}]]

local reject_body = [[{"actionIdentifier":"comment","categoryIdentifier":"event-invite",]]
    .. [["notificationIdentifier":"invite-%d-%d","userText":"   ",]]
    .. [["userInfo":{"aps":{"alert":{"title":"Rooftop party","body":"Saturday 8pm at the Rooftop"},]]
    .. [["category":"event-invite","mutable-content":1,"thread-id":"calendar"},]]
    .. [["eventId":%d,"calendarId":"team-%d","location":"Rooftop","startsAt":"2026-11-28T20:00:00Z",]]
    .. [["organizer":{"id":"u-%d","tier":"standard"},"recurring":false,"attendees":12},]]
    .. [["deviceToken":"%s","respondedAt":"2026-11-20T10:00:00.000Z"}]]

local maybe_body = invite_body:gsub('"actionIdentifier":"accept"', '"actionIdentifier":"maybe"')

local snooze_body = [[{"actionIdentifier":"snooze","categoryIdentifier":"TIMER_EXPIRED",]]
    .. [["notificationIdentifier":"timer-%d-%d",]]
    .. [["userInfo":{"aps":{"alert":{"title":"Tea","body":"Your 4 minutes are up"},"category":"TIMER_EXPIRED"},]]
    .. [["actionhook":{"n":"]] .. (os.getenv("BENCH_NOTIFICATION") or "") .. [[","d":0},]]
    .. [["timerId":"t-%d-%d","label":"Tea","minutes":%d},]]
    .. [["deviceToken":"%s","respondedAt":"2026-11-20T10:00:00.000Z"}]]

local template = mode == "reject" and reject_body or invite_body

function request()
    counter = counter + 1
    if signed_lines then
        -- A file that runs out is read again: its replies are then replays (200), counted as unexpected.
        local line = signed_lines:read("*l")
        if not line then
            signed_lines:seek("set", 0)
            line = signed_lines:read("*l")
        end
        signed_offset = signed_lines:seek()
        local tab = line:find("\t", 1, true)
        headers["Idempotency-Key"] = nil
        headers["ActionHook-Reply-Signature"] = line:sub(1, tab - 1)
        return wrk.format("POST", "/v1/responses", headers, line:sub(tab + 1))
    end
    -- 20,000 events per thread and 512 devices per thread: few collisions on a subject's decision
    -- row, and a bounded set of device tokens (as many phones answering many invitations).
    local event = (counter * 7919) % 20000 + 1
    local device = id * 4096 + counter % 512
    local token = string.rep(string.format("%08x", device), 8)
    headers["Idempotency-Key"] = nonce .. "-" .. id .. "-" .. counter
    if #user_tokens > 0 then
        headers["ActionHook-User-Token"] = user_tokens[(id * 7 + counter) % #user_tokens + 1]
    end
    local body
    if mode == "snooze" then
        body = string.format(snooze_body, id, counter, id, counter, counter % 10 + 1, fixed_token or token)
    elseif mode == "maybe" or (mode == "mixed" and counter % 4 ~= 0) then
        body = string.format(maybe_body, id, event, event, event % 7, event % 97, token)
    else
        body = string.format(template, id, event, event, event % 7, event % 97, token)
    end
    return wrk.format("POST", "/v1/responses", headers, body)
end

function delay()
    if interval_ms == 0 then
        return 0
    end
    local now = now_ms()
    if slot_ms == nil or slot_ms < now - 1000 then
        -- First request, or a stall longer than a second: restart the schedule from now rather than
        -- bursting to catch up.
        slot_ms = now
    end
    slot_ms = slot_ms + interval_ms
    local wait = slot_ms - now
    if wait < 1 then
        return 0
    end
    return math.floor(wait)
end

function response(status, resp_headers, body)
    statuses[status] = (statuses[status] or 0) + 1
    if status ~= expect then
        unexpected = unexpected + 1
    end
end

function done(summary, latency, requests)
    if signed_prefix then
        for _, thread in ipairs(threads) do
            local kept = assert(io.open(signed_prefix .. "-" .. thread:get("id") .. ".pos", "w"))
            kept:write(tostring(thread:get("signed_offset")) .. "\n")
            kept:close()
        end
    end
    local unexpected_total = 0
    local by_status = {}
    for _, thread in ipairs(threads) do
        unexpected_total = unexpected_total + (thread:get("unexpected") or 0)
        local thread_statuses = thread:get("statuses") or {}
        for status, count in pairs(thread_statuses) do
            by_status[status] = (by_status[status] or 0) + count
        end
    end
    local parts = {}
    for status, count in pairs(by_status) do
        table.insert(parts, string.format('"%d":%d', status, count))
    end
    local seconds = summary.duration / 1e6
    local errors = summary.errors
    local socket_errors = errors.connect + errors.read + errors.write + errors.timeout
    local json = string.format(
        '{"requests":%d,"duration_s":%.3f,"rps":%.1f,"good_rps":%.1f,"p50_ms":%.3f,"p90_ms":%.3f,' ..
        '"p99_ms":%.3f,"max_ms":%.3f,"mean_ms":%.3f,"unexpected_status":%d,"socket_errors":%d,' ..
        '"timeouts":%d,"statuses":{%s}}',
        summary.requests, seconds, summary.requests / seconds,
        (summary.requests - unexpected_total - socket_errors) / seconds,
        latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
        latency.max / 1000, latency.mean / 1000, unexpected_total, socket_errors, errors.timeout,
        table.concat(parts, ","))
    io.write("BENCH_RESULT " .. json .. "\n")
    if out then
        local file = assert(io.open(out, "w"))
        file:write(json .. "\n")
        file:close()
    end
end
