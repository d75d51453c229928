/*
 * The limit of this stack (figure P2b): a C ingest server on libmicrohttpd + libpq, written as a competent
 * C engineer would write it, that answers POST /v1/responses for the benchmark's app (bench/setup-app.sh)
 * as ActionHook does and stores exactly ActionHook's rows, with group commit.
 *
 * - HTTP: libmicrohttpd started exactly as bench/bare/bare.c and ActionHook (epoll with an internal
 *   thread pool, suspend/resume, the same timeout, limits, per-connection memory and backlog); the body
 *   is read whole (16 KiB at most, else 413).
 * - Authentication: `Authorization: Bearer <ingest key>`, looked up by its SHA-256 digest in a table
 *   loaded at start from `api_keys` (active keys of scope ingest), as ActionHook stores them.
 * - The body is parsed with json-c (strict, UTF-8 checked) and decoded like ActionHook's ingest: the iOS
 *   10+ and the iOS 8/9 shapes, `null` as absent, unknown members, types (400) and limits (422):
 *   actionIdentifier 1-256 characters, identifiers up to 256, userText up to 4,000, userInfo at most 32
 *   levels deep and 8,192 bytes as compact JSON, deviceToken even-length hex of 16-200 characters
 *   (lowercased), respondedAt RFC 3339 with an offset (kept to the millisecond, at most 300 s ahead of
 *   the clock), no U+0000; the category falls back to userInfo.aps.category. The Idempotency-Key header
 *   (1-255 visible ASCII characters), else the body's responseId, else a random UUID is the key.
 * - The request hash is ActionHook's: SHA-256 of the normalised request as canonical JSON (members
 *   sorted, compact, strings escaped as ActionHook escapes them), so a replay is told from a new body
 *   under the same key exactly as ActionHook tells it.
 * - The app's rules are in memory: the 9 rules of setup-app.sh that apply to the category event-invite
 *   (the VIP, recurring, past and large accept rules, accept, decline, comment with its text check, maybe,
 *   and the catch-all), tried in ActionHook's order (priority, then id), with their outcomes, subjects
 *   (userInfo.eventId) and follow-ups rendered from the same templates. A reply in a category the app
 *   does not have, or in one of its other categories with an action no rule of that category takes, goes
 *   to the catch-all (with that category's subject), as in ActionHook; the rules of the other categories
 *   (reply, TIMER_EXPIRED, TODO_CATEGORY, GENERAL: snoozes, text conditions) are not modelled and answer
 *   501. At start, the enabled rules of every app with an ingest key that apply to event-invite (its
 *   own and those without a category) must be exactly these (id and priority), and its subject key
 *   eventId, else the app's keys are not loaded; the other categories, their subject keys and the actions
 *   their rules take are read from the database.
 * - Group commit: a valid request is queued and its connection suspended; writer threads (2, as
 *   ActionHook's ACTIONHOOK_INGEST_WRITERS) each take everything queued, up to 128, a second writer only
 *   starting beside a busy one for 8 waiting requests (as ActionHook's batcher), and store the batch with
 *   ONE prepared statement (binary arrays unnested in a CTE: idempotency_keys, responses, followups, and
 *   the NOTIFY on actionhook_followups that tells the workers), which is its own transaction. Each
 *   request is answered (202 and ActionHook's answer, the one stored in responses.answer) only after the
 *   commit. Ids are UUIDv7 with the batch's time (responses are partitioned by id); a missing partition
 *   is made (actionhook_create_current_partitions) and the batch written again.
 * - A key already stored is skipped in the same statement (ON CONFLICT DO NOTHING, the response and
 *   follow-ups joined to the keys inserted); those requests are then looked up: the same normalised
 *   body gets the stored answer (200, Idempotent-Replayed), another body 422, a key whose row is gone
 *   409. A batch the server refuses as a whole is written again one request at a time.
 *
 * Not done (ActionHook does it; the benchmark's requests never need it): advisory locks per key and per
 * app (racing an app's deletion), looking up pending snoozes to cancel, replies bound to sent
 * notifications, rate limits, key revocation while running, reloading rules, expired idempotency keys
 * (the 24 h window), X-Request-Id. Times come from this machine's clock when the batch is written (the
 * ids, due_at and the answer's dueAt; ActionHook takes the database's clock at the transaction's start);
 * received_at and stored_at are now() in both. Lengths are counted in Unicode scalars (ActionHook counts
 * characters, which differs only for combining sequences), and blank text is ASCII white space, U+0085,
 * U+00A0, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F and U+3000.
 *
 *   reference [port] [threads] [conninfo]    defaults: 8093, 8, "" (libpq's environment)
 *
 * Environment: REFERENCE_WRITERS (2), REFERENCE_BATCH_MAX (128), REFERENCE_NOTIFY (1; 0 leaves the NOTIFY
 * out, for experiments). Runs until SIGINT or SIGTERM.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <libpq-fe.h>
#include <math.h>
#include <microhttpd.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define BODY_LIMIT (16 * 1024)
#define MAX_ACTION_LENGTH 256
#define MAX_IDENTIFIER_LENGTH 256
#define MAX_USER_TEXT_LENGTH 4000
#define MAX_USER_INFO_BYTES 8192
#define MAX_USER_INFO_DEPTH 32
#define MAX_BODY_DEPTH 64
#define CLOCK_SKEW_MS (300 * 1000LL)
#define MAX_FOLLOWUPS 2
#define PG_EPOCH_MS 946684800000LL /* 2000-01-01 in Unix milliseconds */

/* Array and element type OIDs (pg_type), for binary parameters. */
#define OID_BOOL 16
#define OID_BYTEA 17
#define OID_INT4 23
#define OID_TEXT 25
#define OID_JSON 114
#define OID_TIMESTAMPTZ 1184
#define OID_UUID 2950
#define OID_JSONB 3802
#define OID_JSON_ARRAY 199
#define OID_BYTEA_ARRAY 1001
#define OID_INT4_ARRAY 1007
#define OID_TEXT_ARRAY 1009
#define OID_TIMESTAMPTZ_ARRAY 1185
#define OID_UUID_ARRAY 2951
#define OID_JSONB_ARRAY 3807

/* --- Growable byte buffers ---------------------------------------------------------------------- */

struct buf {
    char *data;
    size_t len, cap;
};

static void buf_reserve(struct buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) cap *= 2;
    char *data = realloc(b->data, cap);
    if (data == NULL) {
        fprintf(stderr, "reference: out of memory\n");
        abort();
    }
    b->data = data;
    b->cap = cap;
}

static void buf_add(struct buf *b, const void *p, size_t n) {
    buf_reserve(b, n);
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

static void buf_addc(struct buf *b, char c) {
    buf_reserve(b, 1);
    b->data[b->len++] = c;
}

static void buf_adds(struct buf *b, const char *s) { buf_add(b, s, strlen(s)); }

static void buf_be32(struct buf *b, uint32_t v) {
    unsigned char bytes[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
                              (unsigned char)v};
    buf_add(b, bytes, 4);
}

static void buf_be64(struct buf *b, uint64_t v) {
    buf_be32(b, (uint32_t)(v >> 32));
    buf_be32(b, (uint32_t)v);
}

static void buf_free(struct buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* --- JSON text ---------------------------------------------------------------------------------- */

/* A JSON string literal escaped as ActionHook escapes it: `"` and `\`, control characters as \n, \r, \t
 * or \u00xx, U+2028 and U+2029 as \u2028 and \u2029; everything else as it is. */
static void json_string(struct buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    buf_addc(b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c != 0xE2) continue;
        if (c == 0xE2 && !(i + 2 < n && (unsigned char)s[i + 1] == 0x80 &&
                           ((unsigned char)s[i + 2] == 0xA8 || (unsigned char)s[i + 2] == 0xA9)))
            continue;
        buf_add(b, s + run, i - run);
        switch (c) {
        case '"': buf_adds(b, "\\\""); break;
        case '\\': buf_adds(b, "\\\\"); break;
        case '\n': buf_adds(b, "\\n"); break;
        case '\r': buf_adds(b, "\\r"); break;
        case '\t': buf_adds(b, "\\t"); break;
        case 0xE2:
            buf_adds(b, (unsigned char)s[i + 2] == 0xA8 ? "\\u2028" : "\\u2029");
            i += 2;
            break;
        default: {
            char escape[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            buf_add(b, escape, 6);
        }
        }
        run = i + 1;
    }
    buf_add(b, s + run, n - run);
    buf_addc(b, '"');
}

static void json_string_or_null(struct buf *b, const char *s, size_t n) {
    if (s == NULL)
        buf_adds(b, "null");
    else
        json_string(b, s, n);
}

/* A number as it was written: json-c keeps a parsed double's text; integers are printed back. */
static void json_number(struct buf *b, struct json_object *v) {
    if (json_object_get_type(v) == json_type_int) {
        char text[24];
        int64_t value = json_object_get_int64(v);
        int n = value == INT64_MAX ? snprintf(text, sizeof text, "%" PRIu64, json_object_get_uint64(v))
                                   : snprintf(text, sizeof text, "%" PRId64, value);
        buf_add(b, text, (size_t)n);
    } else {
        buf_adds(b, json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
    }
}

struct member {
    const char *key;
    struct json_object *value;
};

static int compare_members(const void *a, const void *b) {
    return strcmp(((const struct member *)a)->key, ((const struct member *)b)->key);
}

/* Compact JSON with object members sorted by name (ActionHook's canonical form); `depth` is the nesting
 * of the value written (a scalar is 0), `nul` is set when a string holds U+0000. */
static int json_canonical(struct buf *b, struct json_object *v, int *nul) {
    switch (json_object_get_type(v)) {
    case json_type_null: buf_adds(b, "null"); return 0;
    case json_type_boolean: buf_adds(b, json_object_get_boolean(v) ? "true" : "false"); return 0;
    case json_type_int:
    case json_type_double: json_number(b, v); return 0;
    case json_type_string: {
        const char *s = json_object_get_string(v);
        size_t n = (size_t)json_object_get_string_len(v);
        if (memchr(s, 0, n) != NULL) *nul = 1;
        json_string(b, s, n);
        return 0;
    }
    case json_type_array: {
        int depth = 0;
        size_t count = json_object_array_length(v);
        buf_addc(b, '[');
        for (size_t i = 0; i < count; i++) {
            if (i > 0) buf_addc(b, ',');
            int d = json_canonical(b, json_object_array_get_idx(v, i), nul);
            if (d > depth) depth = d;
        }
        buf_addc(b, ']');
        return depth + 1;
    }
    case json_type_object: {
        int depth = 0;
        size_t count = (size_t)json_object_object_length(v);
        struct member stack_members[32];
        struct member *members = count <= 32 ? stack_members : malloc(count * sizeof *members);
        size_t i = 0;
        json_object_object_foreach(v, key, value) members[i++] = (struct member){key, value};
        qsort(members, count, sizeof *members, compare_members);
        buf_addc(b, '{');
        for (i = 0; i < count; i++) {
            if (i > 0) buf_addc(b, ',');
            json_string(b, members[i].key, strlen(members[i].key));
            buf_addc(b, ':');
            int d = json_canonical(b, members[i].value, nul);
            if (d > depth) depth = d;
        }
        buf_addc(b, '}');
        if (members != stack_members) free(members);
        return depth + 1;
    }
    }
    return 0;
}

/* The value at a dot path (`organizer.tier`, `items.0.kind`) under `object`, or NULL (also for null). */
static struct json_object *json_path(struct json_object *object, const char *path) {
    struct json_object *v = object;
    char part[128];
    while (v != NULL && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        if (n >= sizeof part) return NULL;
        memcpy(part, path, n);
        part[n] = 0;
        if (json_object_is_type(v, json_type_object)) {
            v = json_object_object_get(v, part);
        } else if (json_object_is_type(v, json_type_array) && n > 0 && strspn(part, "0123456789") == n) {
            v = json_object_array_get_idx(v, (size_t)strtoul(part, NULL, 10));
        } else {
            return NULL;
        }
        path += n + (dot ? 1 : 0);
    }
    return v;
}

/* --- Text checks -------------------------------------------------------------------------------- */

/* Unicode scalars in valid UTF-8. */
static size_t scalar_count(const char *s, size_t n) {
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) count++;
    return count;
}

static int is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c == ' ' || (c >= 0x09 && c <= 0x0D)) {
            i++;
        } else if (c == 0xC2 && i + 1 < n && ((unsigned char)s[i + 1] == 0x85 || (unsigned char)s[i + 1] == 0xA0)) {
            i += 2;
        } else if (c == 0xE2 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 &&
                   (((unsigned char)s[i + 2] >= 0x80 && (unsigned char)s[i + 2] <= 0x8A) ||
                    (unsigned char)s[i + 2] == 0xA8 || (unsigned char)s[i + 2] == 0xA9 ||
                    (unsigned char)s[i + 2] == 0xAF)) {
            i += 3;
        } else if (c == 0xE2 && i + 2 < n && (unsigned char)s[i + 1] == 0x81 && (unsigned char)s[i + 2] == 0x9F) {
            i += 3;
        } else if (c == 0xE3 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 && (unsigned char)s[i + 2] == 0x80) {
            i += 3;
        } else {
            return 0;
        }
    }
    return 1;
}

/* --- Time and ids ------------------------------------------------------------------------------- */

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

static void put_digits(char *out, int value, int width) {
    for (int i = width - 1; i >= 0; i--, value /= 10) out[i] = (char)('0' + value % 10);
}

/* "YYYY-MM-DDTHH:MM:SS.mmmZ" (ActionHook's Timestamp.format), 24 characters and a NUL; years 0000-9999. */
static void format_ms(char out[25], int64_t ms) {
    int64_t seconds = floor_div(ms, 1000);
    time_t t = (time_t)seconds;
    struct tm tm;
    gmtime_r(&t, &tm);
    memcpy(out, "0000-00-00T00:00:00.000Z", 25);
    put_digits(out, tm.tm_year + 1900, 4);
    put_digits(out + 5, tm.tm_mon + 1, 2);
    put_digits(out + 8, tm.tm_mday, 2);
    put_digits(out + 11, tm.tm_hour, 2);
    put_digits(out + 14, tm.tm_min, 2);
    put_digits(out + 17, tm.tm_sec, 2);
    put_digits(out + 20, (int)(ms - seconds * 1000), 3);
}

static int digits(const char *s, size_t n, size_t *i, int width, int64_t *out) {
    if (*i + (size_t)width > n) return 0;
    int64_t value = 0;
    for (int k = 0; k < width; k++) {
        char c = s[*i + (size_t)k];
        if (c < '0' || c > '9') return 0;
        value = value * 10 + (c - '0');
    }
    *i += (size_t)width;
    *out = value;
    return 1;
}

/* An RFC 3339 date-time with an offset, to the millisecond (ActionHook's Timestamp.parse, then rounded). */
static int parse_timestamp(const char *s, size_t n, int64_t *ms_out) {
    static const int month_days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    size_t i = 0;
    int64_t year, month, day, hour, minute, second;
    if (!digits(s, n, &i, 4, &year) || i >= n || s[i++] != '-' || !digits(s, n, &i, 2, &month) || i >= n ||
        s[i++] != '-' || !digits(s, n, &i, 2, &day) || i >= n || (s[i] != 'T' && s[i] != 't'))
        return 0;
    i++;
    if (!digits(s, n, &i, 2, &hour) || i >= n || s[i++] != ':' || !digits(s, n, &i, 2, &minute) || i >= n ||
        s[i++] != ':' || !digits(s, n, &i, 2, &second))
        return 0;
    if (month < 1 || month > 12) return 0;
    int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    int dim = month_days[month - 1] + (month == 2 && leap);
    if (day < 1 || day > dim || hour > 23 || minute > 59 || second > 60) return 0;
    double fraction = 0;
    if (i < n && s[i] == '.') {
        size_t start = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == start || i - start > 60) return 0;
        char text[64] = "0.";
        memcpy(text + 2, s + start, i - start);
        text[2 + i - start] = 0;
        fraction = strtod(text, NULL);
    }
    int64_t offset = 0;
    if (i < n && (s[i] == 'Z' || s[i] == 'z')) {
        i++;
    } else {
        if (i >= n || (s[i] != '+' && s[i] != '-')) return 0;
        int64_t sign = s[i] == '-' ? -1 : 1, oh, om;
        i++;
        if (!digits(s, n, &i, 2, &oh) || i >= n || s[i++] != ':' || !digits(s, n, &i, 2, &om) || oh > 23 || om > 59)
            return 0;
        offset = sign * (oh * 3600 + om * 60);
    }
    if (i != n) return 0;
    int64_t seconds =
        days_from_civil(year, (int)month, (int)day) * 86400 + hour * 3600 + minute * 60 + second - offset;
    int64_t ms = (int64_t)llround(((double)seconds + fraction) * 1000);
    /* The UTC year must stay within 0000-9999 (its text must read back). */
    if (ms < -62167219200000LL || ms >= 253402300800000LL) return 0;
    *ms_out = ms;
    return 1;
}

static void uuid_text(char out[37], const unsigned char id[16]) {
    static const char hex[] = "0123456789abcdef";
    int k = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[k++] = '-';
        out[k++] = hex[id[i] >> 4];
        out[k++] = hex[id[i] & 15];
    }
    out[36] = 0;
}

/* A UUIDv7: 48 bits of Unix milliseconds, version 7, variant 10, the rest random. */
static void uuid_v7(unsigned char id[16], int64_t ms, const unsigned char random[16]) {
    memcpy(id, random, 16);
    for (int i = 0; i < 6; i++) id[i] = (unsigned char)((uint64_t)ms >> (40 - 8 * i));
    id[6] = (unsigned char)(0x70 | (id[6] & 0x0F));
    id[8] = (unsigned char)(0x80 | (id[8] & 0x3F));
}

static void random_bytes(void *out, size_t n) {
    unsigned char *p = out;
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            perror("reference: getrandom");
            abort();
        }
        p += got;
        n -= (size_t)got;
    }
}

/* --- The app: keys and rules -------------------------------------------------------------------- */

/* One of the app's categories other than event-invite: its subject key, and the actions its rules take
 * (not modelled: 501); a reply with another action goes to the catch-all. */
struct category {
    char id[65];
    char subject_key[65]; /* empty: none */
    char actions[1024];   /* separated by US (0x1f); "*" when a rule takes every action */
};

#define MAX_CATEGORIES 16

struct app_key {
    unsigned char digest[32];
    char app_id[65];
    struct category categories[MAX_CATEGORIES];
    int category_count;
};

static struct app_key *app_keys;
static size_t app_key_count;

enum rule {
    RULE_ACCEPT_VIP,
    RULE_ACCEPT_RECURRING,
    RULE_ACCEPT_PAST,
    RULE_ACCEPT_LARGE,
    RULE_ACCEPT,
    RULE_COMMENT,
    RULE_DECLINE,
    RULE_MAYBE,
    RULE_CATCH_ALL,
    RULE_COUNT
};

static const struct {
    const char *id;
    int priority;
    const char *outcome;
} rules[RULE_COUNT] = {
    {"invite-accept-vip", 10, "accepted"}, {"invite-accept-recurring", 20, "accepted"},
    {"invite-accept-past", 30, "recorded"}, {"invite-accept-large", 40, "accepted"},
    {"invite-accept", 100, "accepted"},     {"invite-comment", 100, "commented"},
    {"invite-decline", 100, "declined"},    {"invite-maybe", 110, "recorded"},
    {"catch-all", 1000, "recorded"},
};

/* What the event-invite rules of setup-app.sh look like in the database (id@priority, in order). */
static const char expected_rules[] =
    "invite-accept-vip@10 invite-accept-recurring@20 invite-accept-past@30 invite-accept-large@40 invite-accept@100 "
    "invite-comment@100 invite-decline@100 invite-maybe@110 catch-all@1000";

/* --- Requests ----------------------------------------------------------------------------------- */

enum state { STATE_READING, STATE_QUEUED, STATE_ANSWERED };

struct request {
    enum state state;
    struct request *next; /* in the queue */
    struct MHD_Connection *connection;
    struct buf body;
    int overflowed;

    /* The answer, set by whoever answers (the HTTP thread, or a writer before resuming). */
    unsigned int status;
    char *answer;
    size_t answer_len;
    int problem;  /* application/problem+json */
    int replayed; /* Idempotent-Replayed: true */

    /* The decoded request (strings point into `root`, freed after the write). */
    const struct app_key *app;
    struct json_object *root;
    char key[256];
    const char *action, *category, *notification, *user_text, *response_id;
    size_t action_len, category_len, notification_len, user_text_len, response_id_len;
    struct json_object *user_info;
    char token[201];
    int has_token;
    int64_t responded_ms;
    int has_responded;
    struct buf canonical; /* the normalised request; userInfo is [user_info_at, +user_info_len) */
    size_t user_info_at, user_info_len;
    unsigned char hash[32];
    enum rule rule;
    const char *subject;
    size_t subject_len;
    char subject_number[32];
};

struct problem {
    unsigned int status;
    const char *title;
    const char *pointer;
    const char *detail;
};

static void set_answer(struct request *rq, unsigned int status, struct buf *text, int problem) {
    free(rq->answer);
    rq->status = status;
    rq->answer = text->data;
    rq->answer_len = text->len;
    rq->problem = problem;
    text->data = NULL;
    text->len = text->cap = 0;
}

static void set_problem(struct request *rq, const struct problem *p) {
    struct buf b = {0};
    buf_adds(&b, "{\"title\":");
    json_string(&b, p->title, strlen(p->title));
    char status[32];
    snprintf(status, sizeof status, ",\"status\":%u", p->status);
    buf_adds(&b, status);
    if (p->pointer != NULL) {
        buf_adds(&b, ",\"errors\":[{\"pointer\":");
        json_string(&b, p->pointer, strlen(p->pointer));
        buf_adds(&b, ",\"detail\":");
        json_string(&b, p->detail, strlen(p->detail));
        buf_adds(&b, "}]");
    } else if (p->detail != NULL) {
        buf_adds(&b, ",\"detail\":");
        json_string(&b, p->detail, strlen(p->detail));
    }
    buf_addc(&b, '}');
    set_answer(rq, p->status, &b, 1);
}

#define FAIL(status_, title_, pointer_, detail_)                                                                  \
    do {                                                                                                          \
        *problem = (struct problem){(status_), (title_), (pointer_), (detail_)};                                   \
        return 0;                                                                                                 \
    } while (0)

static const struct app_key *find_key(const char *authorization) {
    if (authorization == NULL || strncasecmp(authorization, "Bearer ", 7) != 0) return NULL;
    const char *token = authorization + 7;
    while (*token == ' ') token++;
    if (strncmp(token, "ahk_", 4) != 0) return NULL;
    unsigned char digest[32];
    SHA256((const unsigned char *)token, strlen(token), digest);
    for (size_t i = 0; i < app_key_count; i++)
        if (memcmp(app_keys[i].digest, digest, 32) == 0) return &app_keys[i];
    return NULL;
}

static int is_json_media_type(const char *value) {
    if (value == NULL) return 0;
    const char *end = strchr(value, ';');
    if (end == NULL) end = value + strlen(value);
    while (*value == ' ' || *value == '\t') value++;
    while (end > value && (end[-1] == ' ' || end[-1] == '\t')) end--;
    size_t n = (size_t)(end - value);
    return (n == 16 && strncasecmp(value, "application/json", 16) == 0) ||
           (n > 5 && strncasecmp(end - 5, "+json", 5) == 0);
}

/* Member `name` of `object` as a string: 1 and the string, 0 when absent or null, -1 (400) for another type. */
static int member_string(struct json_object *object, const char *name, const char **out, size_t *len) {
    struct json_object *v = NULL;
    *out = NULL;
    *len = 0;
    if (!json_object_object_get_ex(object, name, &v) || v == NULL) return 0;
    if (!json_object_is_type(v, json_type_string)) return -1;
    *out = json_object_get_string(v);
    *len = (size_t)json_object_get_string_len(v);
    return 1;
}

static const struct category *other_category(const struct app_key *app, const char *id, size_t len) {
    for (int i = 0; i < app->category_count; i++)
        if (strlen(app->categories[i].id) == len && memcmp(app->categories[i].id, id, len) == 0)
            return &app->categories[i];
    return NULL;
}

/* Whether a rule of `category` takes `action`. */
static int category_takes(const struct category *category, const char *action, size_t len) {
    for (const char *a = category->actions; *a;) {
        const char *end = strchr(a, 0x1f);
        size_t n = end ? (size_t)(end - a) : strlen(a);
        if ((n == 1 && *a == '*') || (n == len && memcmp(a, action, len) == 0)) return 1;
        a += n + (end ? 1 : 0);
    }
    return 0;
}

/* The subject: userInfo[key] (a member of that name, else a dot path), a non-empty string as it is, a
 * number as its literal. */
static void find_subject(struct request *rq, const char *key) {
    rq->subject = NULL;
    struct json_object *subject = rq->user_info ? json_object_object_get(rq->user_info, key) : NULL;
    if (subject == NULL) subject = json_path(rq->user_info, key);
    if (subject != NULL && json_object_is_type(subject, json_type_string) && json_object_get_string_len(subject) > 0) {
        rq->subject = json_object_get_string(subject);
        rq->subject_len = (size_t)json_object_get_string_len(subject);
    } else if (subject != NULL &&
               (json_object_is_type(subject, json_type_int) || json_object_is_type(subject, json_type_double))) {
        struct buf b = {0};
        json_number(&b, subject);
        if (b.len < sizeof rq->subject_number) {
            memcpy(rq->subject_number, b.data, b.len);
            rq->subject_number[b.len] = 0;
            rq->subject = rq->subject_number;
            rq->subject_len = b.len;
        }
        buf_free(&b);
    }
}

static int string_equals(struct json_object *v, const char *text) {
    return v != NULL && json_object_is_type(v, json_type_string) && strcmp(json_object_get_string(v), text) == 0;
}

/* The first matching rule of the app's event-invite rules (priority, then id), with its handler's checks. */
static int decide(struct request *rq, struct problem *problem) {
    int invite = rq->category != NULL && rq->category_len == 12 && memcmp(rq->category, "event-invite", 12) == 0;
    rq->subject = NULL;
    if (!invite) {
        const struct category *category =
            rq->category != NULL ? other_category(rq->app, rq->category, rq->category_len) : NULL;
        if (category != NULL && category_takes(category, rq->action, rq->action_len))
            FAIL(501, "Not Implemented", NULL,
                 "The reference server models the rules of the category event-invite only.");
        /* Nothing but the catch-all matches; the subject is the category's, if the app has it. */
        if (category != NULL && category->subject_key[0] != 0) find_subject(rq, category->subject_key);
        rq->rule = RULE_CATCH_ALL;
        return 1;
    }
    find_subject(rq, "eventId");
#define ACTION_IS(text) (rq->action_len == sizeof(text) - 1 && memcmp(rq->action, text, sizeof(text) - 1) == 0)
    if (ACTION_IS("accept")) {
        struct json_object *v;
        if (string_equals(json_path(rq->user_info, "organizer.tier"), "vip")) {
            rq->rule = RULE_ACCEPT_VIP;
        } else if ((v = json_path(rq->user_info, "recurring")) != NULL && json_object_is_type(v, json_type_boolean) &&
                   json_object_get_boolean(v)) {
            rq->rule = RULE_ACCEPT_RECURRING;
        } else if ((v = json_path(rq->user_info, "startsAt")) != NULL && json_object_is_type(v, json_type_string) &&
                   strncmp(json_object_get_string(v), "2020-", 5) == 0) {
            rq->rule = RULE_ACCEPT_PAST;
        } else if ((v = json_path(rq->user_info, "attendees")) != NULL &&
                   (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)) &&
                   json_object_get_double(v) > 500) {
            rq->rule = RULE_ACCEPT_LARGE;
        } else {
            rq->rule = RULE_ACCEPT;
        }
    } else if (ACTION_IS("comment")) {
        rq->rule = RULE_COMMENT;
        if (rq->user_text == NULL || is_blank(rq->user_text, rq->user_text_len))
            FAIL(422, "Unprocessable Content", "/userText", "must not be empty for this action");
        if (scalar_count(rq->user_text, rq->user_text_len) > 500)
            FAIL(422, "Unprocessable Content", "/userText", "must be at most 500 characters");
    } else if (ACTION_IS("decline")) {
        rq->rule = RULE_DECLINE;
    } else if (ACTION_IS("maybe")) {
        rq->rule = RULE_MAYBE;
    } else {
        rq->rule = RULE_CATCH_ALL;
    }
#undef ACTION_IS
    return 1;
}

static __thread struct json_tokener *tokener;

/* Everything decided before the database: key, body, limits, rule. 0 with `problem` set when refused. */
static int decode(struct request *rq, struct MHD_Connection *connection, struct problem *problem) {
    rq->app = find_key(MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Authorization"));
    if (rq->app == NULL) FAIL(401, "Unauthorized", NULL, "A valid ingest key is required.");
    if (!is_json_media_type(MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Content-Type")))
        FAIL(415, "Unsupported Media Type", NULL, "The body must be application/json.");

    if (tokener == NULL) {
        tokener = json_tokener_new_ex(MAX_BODY_DEPTH);
        json_tokener_set_flags(tokener, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    }
    json_tokener_reset(tokener);
    rq->root = json_tokener_parse_ex(tokener, rq->body.data ? rq->body.data : "", (int)rq->body.len);
    size_t end = rq->root != NULL ? json_tokener_get_parse_end(tokener) : 0;
    while (end < rq->body.len && strchr(" \t\r\n", rq->body.data[end]) != NULL && rq->body.data[end] != 0) end++;
    if (rq->root == NULL || json_tokener_get_error(tokener) != json_tokener_success || end != rq->body.len) {
        json_object_put(rq->root);
        rq->root = NULL;
        FAIL(400, "Bad Request", NULL, "The body is not valid JSON.");
    }
    if (!json_object_is_type(rq->root, json_type_object)) FAIL(400, "Bad Request", "", "must be an object");
    struct json_object *root = rq->root;

    int legacy = json_object_object_get_ex(root, "identifier", NULL) ||
                 json_object_object_get_ex(root, "responseInfo", NULL);
    int current = json_object_object_get_ex(root, "actionIdentifier", NULL) ||
                  json_object_object_get_ex(root, "userText", NULL);
    const char *action_pointer = legacy ? "/identifier" : "/actionIdentifier";
    const char *text_pointer = "/userText";
    int invalid_types = 0;
    const char *type_pointer = NULL;
#define STRING(name, field, pointer)                                                                              \
    if (member_string(root, name, &rq->field, &rq->field##_len) < 0 && !invalid_types++) type_pointer = pointer
    if (legacy) {
        STRING("identifier", action, "/identifier");
        struct json_object *info = NULL;
        if (json_object_object_get_ex(root, "responseInfo", &info) && info != NULL) {
            if (!json_object_is_type(info, json_type_object)) {
                if (!invalid_types++) type_pointer = "/responseInfo";
            } else {
                json_object_object_foreach(info, name, value) {
                    (void)value;
                    if (strcmp(name, "UIUserNotificationActionResponseTypedTextKey") != 0)
                        FAIL(422, "Unprocessable Content", "/responseInfo", "has an unknown member");
                }
                text_pointer = "/responseInfo/UIUserNotificationActionResponseTypedTextKey";
                if (member_string(info, "UIUserNotificationActionResponseTypedTextKey", &rq->user_text,
                                  &rq->user_text_len) < 0 &&
                    !invalid_types++)
                    type_pointer = text_pointer;
            }
        }
    } else {
        STRING("actionIdentifier", action, "/actionIdentifier");
        STRING("userText", user_text, "/userText");
    }
    STRING("categoryIdentifier", category, "/categoryIdentifier");
    STRING("notificationIdentifier", notification, "/notificationIdentifier");
    STRING("responseId", response_id, "/responseId");
    const char *token = NULL, *responded = NULL;
    size_t token_len = 0, responded_len = 0;
    if (member_string(root, "deviceToken", &token, &token_len) < 0 && !invalid_types++) type_pointer = "/deviceToken";
    if (member_string(root, "respondedAt", &responded, &responded_len) < 0 && !invalid_types++)
        type_pointer = "/respondedAt";
#undef STRING
    rq->user_info = NULL;
    struct json_object *user_info = NULL;
    if (json_object_object_get_ex(root, "userInfo", &user_info) && user_info != NULL) {
        if (!json_object_is_type(user_info, json_type_object)) {
            if (!invalid_types++) type_pointer = "/userInfo";
        } else {
            rq->user_info = user_info;
        }
    }
    if (invalid_types) FAIL(400, "Bad Request", type_pointer, "has the wrong type");

    if (legacy && current)
        FAIL(400, "Bad Request", "/identifier", "must not be combined with actionIdentifier or userText");
    /* Broken rules (422): the first one found. */
    json_object_object_foreach(root, name, value) {
        (void)value;
        static const char *const known[] = {"actionIdentifier", "userText", "categoryIdentifier",
                                            "notificationIdentifier", "userInfo", "deviceToken",
                                            "responseId", "respondedAt", "identifier", "responseInfo"};
        int found = 0;
        for (size_t k = 0; k < sizeof known / sizeof *known; k++) found |= strcmp(name, known[k]) == 0;
        if (!found) FAIL(422, "Unprocessable Content", "/", "has an unknown member");
    }
    if (rq->action == NULL) FAIL(422, "Unprocessable Content", action_pointer, "is required");
    size_t action_chars = scalar_count(rq->action, rq->action_len);
    if (action_chars < 1) FAIL(422, "Unprocessable Content", action_pointer, "must not be empty");
    if (action_chars > MAX_ACTION_LENGTH)
        FAIL(422, "Unprocessable Content", action_pointer, "must be at most 256 characters");
    if (rq->user_text != NULL && scalar_count(rq->user_text, rq->user_text_len) > MAX_USER_TEXT_LENGTH)
        FAIL(422, "Unprocessable Content", text_pointer, "must be at most 4000 characters");

    /* The normalised request, canonical: its hash, and userInfo's depth, size and U+0000. */
    int nul = 0;
    struct buf *c = &rq->canonical;
    c->len = 0;
    /* userInfo canonical (its size as compact JSON is the same), into a buffer of the thread. */
    static __thread struct buf info;
    info.len = 0;
    int depth = 1;
    if (rq->user_info != NULL)
        depth = json_canonical(&info, rq->user_info, &nul);
    else
        buf_adds(&info, "{}");
    if (depth > MAX_USER_INFO_DEPTH)
        FAIL(422, "Unprocessable Content", "/userInfo", "must nest at most 32 levels deep");
    if (info.len > MAX_USER_INFO_BYTES)
        FAIL(422, "Unprocessable Content", "/userInfo", "must be at most 8192 bytes as compact JSON");

    if (rq->category == NULL && !json_object_object_get_ex(root, "categoryIdentifier", NULL)) {
        struct json_object *aps_category = json_path(rq->user_info, "aps.category");
        if (aps_category != NULL && json_object_is_type(aps_category, json_type_string) &&
            json_object_get_string_len(aps_category) > 0) {
            rq->category = json_object_get_string(aps_category);
            rq->category_len = (size_t)json_object_get_string_len(aps_category);
        }
    }
    if (rq->category != NULL && scalar_count(rq->category, rq->category_len) < 1)
        FAIL(422, "Unprocessable Content", "/categoryIdentifier", "must not be empty");
    if (rq->category != NULL && scalar_count(rq->category, rq->category_len) > MAX_IDENTIFIER_LENGTH)
        FAIL(422, "Unprocessable Content", "/categoryIdentifier", "must be at most 256 characters");
    if (rq->notification != NULL && (rq->notification_len == 0 ||
                                     scalar_count(rq->notification, rq->notification_len) > MAX_IDENTIFIER_LENGTH))
        FAIL(422, "Unprocessable Content", "/notificationIdentifier", "must be 1 to 256 characters");
    if (rq->response_id != NULL &&
        (rq->response_id_len == 0 || scalar_count(rq->response_id, rq->response_id_len) > MAX_IDENTIFIER_LENGTH))
        FAIL(422, "Unprocessable Content", "/responseId", "must be 1 to 256 characters");

    rq->has_token = token != NULL;
    if (token != NULL) {
        if (token_len < 16 || token_len > 200 || token_len % 2 != 0 ||
            strspn(token, "0123456789abcdefABCDEF") != token_len)
            FAIL(422, "Unprocessable Content", "/deviceToken",
                 "must be hexadecimal with an even length of 16 to 200 characters");
        for (size_t i = 0; i < token_len; i++) rq->token[i] = (char)tolower((unsigned char)token[i]);
        rq->token[token_len] = 0;
    }
    rq->has_responded = responded != NULL;
    if (responded != NULL && !parse_timestamp(responded, responded_len, &rq->responded_ms))
        FAIL(422, "Unprocessable Content", "/respondedAt", "must be an RFC 3339 date-time with a time-zone offset");

    const char *strings[] = {rq->action, rq->user_text, rq->category, rq->notification, rq->response_id};
    const size_t lengths[] = {rq->action_len, rq->user_text_len, rq->category_len, rq->notification_len,
                              rq->response_id_len};
    for (size_t i = 0; i < 5; i++)
        if (strings[i] != NULL && memchr(strings[i], 0, lengths[i]) != NULL) nul = 1;
    if (nul) FAIL(422, "Unprocessable Content", "/", "must not contain the character U+0000");

    char responded_text[25];
    if (rq->has_responded) format_ms(responded_text, rq->responded_ms);
    buf_adds(c, "{\"actionIdentifier\":");
    json_string(c, rq->action, rq->action_len);
    buf_adds(c, ",\"categoryIdentifier\":");
    json_string_or_null(c, rq->category, rq->category_len);
    buf_adds(c, ",\"deviceToken\":");
    json_string_or_null(c, rq->has_token ? rq->token : NULL, token_len);
    buf_adds(c, ",\"notificationIdentifier\":");
    json_string_or_null(c, rq->notification, rq->notification_len);
    buf_adds(c, ",\"respondedAt\":");
    json_string_or_null(c, rq->has_responded ? responded_text : NULL, 24);
    buf_adds(c, ",\"responseId\":");
    json_string_or_null(c, rq->response_id, rq->response_id_len);
    buf_adds(c, ",\"userInfo\":");
    rq->user_info_at = c->len;
    rq->user_info_len = info.len;
    buf_add(c, info.data, info.len);
    buf_adds(c, ",\"userText\":");
    json_string_or_null(c, rq->user_text, rq->user_text_len);
    buf_addc(c, '}');
    SHA256((const unsigned char *)c->data, c->len, rq->hash);

    if (rq->has_responded && rq->responded_ms - now_ms() > CLOCK_SKEW_MS)
        FAIL(422, "Unprocessable Content", "/respondedAt",
             "must not be later than the server's clock by more than 300 seconds");

    /* The idempotency key: the header, else responseId, else a fresh one (no deduplication). */
    const char *header = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Idempotency-Key");
    if (header != NULL) {
        size_t n = strlen(header);
        int visible = n >= 1 && n <= 255;
        for (size_t i = 0; visible && i < n; i++) visible = header[i] >= 0x21 && header[i] <= 0x7E;
        if (!visible)
            FAIL(400, "Bad Request", NULL, "The Idempotency-Key header must be 1 to 255 visible ASCII characters.");
        memcpy(rq->key, header, n + 1);
    } else if (rq->response_id != NULL && rq->response_id_len < sizeof rq->key) {
        memcpy(rq->key, rq->response_id, rq->response_id_len);
        rq->key[rq->response_id_len] = 0;
    } else {
        unsigned char id[16];
        random_bytes(id, 16);
        id[6] = (unsigned char)(0x40 | (id[6] & 0x0F));
        id[8] = (unsigned char)(0x80 | (id[8] & 0x3F));
        uuid_text(rq->key, id);
    }
    return decide(rq, problem);
}

/* --- Group commit ------------------------------------------------------------------------------- */

static int writer_count = 2;
static int batch_max = 128;
static int concurrent_minimum = 8;
static int notify_followups = 1;
static const char *conninfo = "";

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_ready = PTHREAD_COND_INITIALIZER;
static struct request *queue_head, *queue_tail;
static int queue_length, busy_writers, writers_stopping;

static atomic_int suspended_requests;
static atomic_int stopping;

static void enqueue(struct request *rq) {
    pthread_mutex_lock(&queue_lock);
    rq->next = NULL;
    if (queue_tail)
        queue_tail->next = rq;
    else
        queue_head = rq;
    queue_tail = rq;
    queue_length++;
    pthread_cond_signal(&queue_ready);
    pthread_mutex_unlock(&queue_lock);
}

/* A binary one-dimensional array parameter, built element by element. */
struct array {
    struct buf b;
    uint32_t element;
    int count;
};

static void array_begin(struct array *a, uint32_t element) {
    a->b.len = 0;
    a->count = 0;
    a->element = element;
    buf_be32(&a->b, 1); /* dimensions */
    buf_be32(&a->b, 0); /* has nulls (ignored by the server) */
    buf_be32(&a->b, element);
    buf_be32(&a->b, 0); /* length, set at the end */
    buf_be32(&a->b, 1); /* lower bound */
}

static void array_add(struct array *a, const void *p, size_t n) {
    buf_be32(&a->b, (uint32_t)n);
    buf_add(&a->b, p, n);
    a->count++;
}

static void array_null(struct array *a) {
    buf_be32(&a->b, 0xFFFFFFFFu);
    a->count++;
}

static void array_text(struct array *a, const char *s, size_t n) {
    if (s == NULL)
        array_null(a);
    else
        array_add(a, s, n);
}

static void array_be64(struct array *a, int64_t v) {
    buf_be32(&a->b, 8);
    buf_be64(&a->b, (uint64_t)v);
    a->count++;
}

static void array_timestamp(struct array *a, int64_t unix_ms) { array_be64(a, (unix_ms - PG_EPOCH_MS) * 1000); }

static void array_end(struct array *a) {
    if (a->count == 0) {
        /* An empty array has no dimensions. */
        a->b.len = 12;
        a->b.data[0] = a->b.data[1] = a->b.data[2] = a->b.data[3] = 0;
        return;
    }
    uint32_t n = (uint32_t)a->count;
    unsigned char *p = (unsigned char *)a->b.data + 12;
    p[0] = (unsigned char)(n >> 24);
    p[1] = (unsigned char)(n >> 16);
    p[2] = (unsigned char)(n >> 8);
    p[3] = (unsigned char)n;
}

enum {
    P_APP, P_ID, P_KEY, P_HASH, P_ACTION, P_CATEGORY, P_NOTIFICATION, P_USER_TEXT, P_USER_INFO, P_TOKEN,
    P_CLIENT_ID, P_RESPONDED, P_OUTCOME, P_RULE, P_SUBJECT, P_ANSWER,
    P_F_ID, P_F_RESPONSE, P_F_ORDINAL, P_F_CHANNEL, P_F_TOKEN, P_F_PAYLOAD, P_F_DUE,
    P_COUNT
};

static const uint32_t parameter_elements[P_COUNT] = {
    OID_TEXT, OID_UUID, OID_TEXT, OID_BYTEA, OID_TEXT, OID_TEXT, OID_TEXT, OID_TEXT, OID_JSONB, OID_TEXT,
    OID_TEXT, OID_TIMESTAMPTZ, OID_TEXT, OID_TEXT, OID_TEXT, OID_JSON,
    OID_UUID, OID_UUID, OID_INT4, OID_TEXT, OID_TEXT, OID_JSONB, OID_TIMESTAMPTZ,
};

static const Oid parameter_types[P_COUNT] = {
    OID_TEXT_ARRAY, OID_UUID_ARRAY, OID_TEXT_ARRAY, OID_BYTEA_ARRAY, OID_TEXT_ARRAY, OID_TEXT_ARRAY,
    OID_TEXT_ARRAY, OID_TEXT_ARRAY, OID_JSONB_ARRAY, OID_TEXT_ARRAY, OID_TEXT_ARRAY, OID_TIMESTAMPTZ_ARRAY,
    OID_TEXT_ARRAY, OID_TEXT_ARRAY, OID_TEXT_ARRAY, OID_JSON_ARRAY,
    OID_UUID_ARRAY, OID_UUID_ARRAY, OID_INT4_ARRAY, OID_TEXT_ARRAY, OID_TEXT_ARRAY, OID_JSONB_ARRAY,
    OID_TIMESTAMPTZ_ARRAY,
};

/* One statement per batch: the keys (a key stored within the window is skipped), the responses and follow-ups of
 * the keys inserted, and the workers told which apps have new follow-ups. Returns the responses stored. */
static const char ingest_sql_head[] =
    "WITH r AS MATERIALIZED (\n"
    "    SELECT * FROM unnest($1::text[], $2::uuid[], $3::text[], $4::bytea[], $5::text[], $6::text[], $7::text[],\n"
    "        $8::text[], $9::jsonb[], $10::text[], $11::text[], $12::timestamptz[], $13::text[], $14::text[],\n"
    "        $15::text[], $16::json[])\n"
    "        AS r(app_id, id, idempotency_key, request_hash, action_identifier, category_identifier,\n"
    "            notification_identifier, user_text, user_info, device_token, client_response_id, responded_at,\n"
    "            outcome, rule_id, subject, answer)\n"
    "),\n"
    "keys AS (\n"
    "    INSERT INTO idempotency_keys (app_id, key, response_id, request_hash, stored_at)\n"
    "    SELECT r.app_id, r.idempotency_key, r.id, r.request_hash, now() FROM r\n"
    "    WHERE NOT EXISTS (SELECT 1 FROM idempotency_keys i WHERE i.app_id = r.app_id AND i.key = r.idempotency_key\n"
    "        AND i.stored_at >= now() - interval '24 hours')\n"
    "    RETURNING response_id\n"
    "),\n"
    "stored AS (\n"
    "    INSERT INTO responses (app_id, id, idempotency_key, request_hash, action_identifier, category_identifier,\n"
    "        notification_identifier, user_text, user_info, device_token, client_response_id, responded_at,\n"
    "        received_at, outcome, rule_id, subject, answer, notification_id, recipient)\n"
    "    SELECT r.app_id, r.id, r.idempotency_key, r.request_hash, r.action_identifier, r.category_identifier,\n"
    "        r.notification_identifier, r.user_text, r.user_info, r.device_token, r.client_response_id,\n"
    "        r.responded_at, now(), r.outcome, r.rule_id, r.subject, r.answer, NULL, NULL\n"
    "    FROM r JOIN keys k ON k.response_id = r.id\n"
    "),\n"
    "f AS (\n"
    "    INSERT INTO followups (app_id, id, response_id, ordinal, channel, is_snooze, notification_identifier,\n"
    "        device_token, payload, due_at, status, kind, notification_id, finished_at)\n"
    "    SELECT r.app_id, f.id, f.response_id, f.ordinal, f.channel, false, r.notification_identifier,\n"
    "        f.device_token, f.payload, f.due_at, 'pending', 'rule', NULL, NULL\n"
    "    FROM unnest($17::uuid[], $18::uuid[], $19::int4[], $20::text[], $21::text[], $22::jsonb[],\n"
    "        $23::timestamptz[]) AS f(id, response_id, ordinal, channel, device_token, payload, due_at)\n"
    "    JOIN keys k ON k.response_id = f.response_id JOIN r ON r.id = f.response_id\n"
    "    RETURNING app_id\n"
    ")\n";
static const char ingest_sql_notify[] =
    ", notified AS (\n"
    "    SELECT count(*) AS apps FROM (\n"
    "        SELECT pg_notify('actionhook_followups', a.app_id) FROM (SELECT DISTINCT app_id FROM f) AS a) AS n\n"
    ")\n"
    "SELECT k.response_id FROM keys k, notified";
static const char ingest_sql_plain[] = "SELECT k.response_id FROM keys k";

/* The stored key rows of requests whose key was already stored: their request hash and answer. */
static const char replay_sql[] =
    "SELECT k.position::int4, i.request_hash, r.answer::text\n"
    "FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(app_id, key, position)\n"
    "JOIN idempotency_keys i ON i.app_id = k.app_id AND i.key = k.key AND i.stored_at >= now() - interval '24 hours'\n"
    "LEFT JOIN responses r ON r.app_id = i.app_id AND r.id = i.response_id";

struct writer {
    pthread_t thread;
    int index;
    PGconn *connection;
    struct array parameters[P_COUNT];
    struct buf scratch;
};

static int writer_connect(struct writer *w) {
    if (w->connection != NULL) PQfinish(w->connection);
    w->connection = PQconnectdb(conninfo);
    if (PQstatus(w->connection) != CONNECTION_OK) {
        fprintf(stderr, "reference: writer %d cannot connect: %s", w->index, PQerrorMessage(w->connection));
        return 0;
    }
    /* The plan settings ActionHook's ingest transaction makes (IngestStatements.planSettingsExpression): the
     * statement is prepared once while the tables are empty, and left to statistics its generic plan then
     * scanned idempotency_keys whole for each key (this server slowed run by run: 1,978 -> 1,409 -> 993 req/s). */
    PGresult *settings = PQexec(w->connection,
        "SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off; SET enable_hashjoin = off; "
        "SET enable_mergejoin = off");
    if (PQresultStatus(settings) != PGRES_COMMAND_OK) {
        fprintf(stderr, "reference: writer %d cannot set its plan settings: %s", w->index,
            PQresultErrorMessage(settings));
        PQclear(settings);
        return 0;
    }
    PQclear(settings);
    size_t head = strlen(ingest_sql_head);
    const char *tail = notify_followups ? ingest_sql_notify : ingest_sql_plain;
    char *sql = malloc(head + strlen(tail) + 1);
    memcpy(sql, ingest_sql_head, head);
    strcpy(sql + head, tail);
    PGresult *result = PQprepare(w->connection, "ingest", sql, P_COUNT, parameter_types);
    free(sql);
    int ok = PQresultStatus(result) == PGRES_COMMAND_OK;
    if (!ok) fprintf(stderr, "reference: preparing the ingest statement: %s", PQresultErrorMessage(result));
    PQclear(result);
    static const Oid replay_types[2] = {OID_TEXT_ARRAY, OID_TEXT_ARRAY};
    result = PQprepare(w->connection, "replay", replay_sql, 2, replay_types);
    if (ok && PQresultStatus(result) != PGRES_COMMAND_OK) {
        fprintf(stderr, "reference: preparing the replay statement: %s", PQresultErrorMessage(result));
        ok = 0;
    }
    PQclear(result);
    return ok;
}

static void answer_text(struct request *rq, unsigned int status, const char *text, int problem) {
    struct buf b = {0};
    buf_adds(&b, text);
    set_answer(rq, status, &b, problem);
}

/* A follow-up planned for a stored response. */
struct planned {
    unsigned char id[16];
    int ordinal;
    const char *channel;
    int delay_seconds;
    const char *token; /* APNs only */
    int64_t due_ms;
};

static void user_info_value(struct buf *b, struct request *rq, const char *path) {
    struct json_object *v = json_path(rq->user_info, path);
    int nul = 0;
    if (v == NULL)
        buf_adds(b, "null");
    else
        json_canonical(b, v, &nul);
}

/* The rule's follow-ups for a response (ActionHook's RuleEngine.plan with setup-app.sh's templates); each
 * payload is written as a jsonb array element into `payloads`. */
static int plan_followups(struct request *rq, const char *response_id, struct planned out[MAX_FOLLOWUPS],
                          struct array *payloads, struct buf *scratch) {
    int count = 0;
    const char *token = rq->has_token ? rq->token : NULL;
    size_t token_len = rq->has_token ? strlen(rq->token) : 0;
#define WEBHOOK(delay)                                                                                            \
    do {                                                                                                          \
        out[count] = (struct planned){.ordinal = count, .channel = "webhook", .delay_seconds = (delay)};           \
        scratch->len = 0;                                                                                         \
        buf_addc(scratch, 1); /* jsonb version */                                                                 \
        buf_adds(scratch, "{\"url\":null,\"body\":{");                                                            \
    } while (0)
#define END_PAYLOAD(closing)                                                                                      \
    do {                                                                                                          \
        buf_adds(scratch, closing);                                                                               \
        array_add(payloads, scratch->data, scratch->len);                                                         \
        count++;                                                                                                  \
    } while (0)
    switch (rq->rule) {
    case RULE_ACCEPT_VIP:
        WEBHOOK(0);
        buf_adds(scratch, "\"event\":\"invite.accepted.vip\",\"eventId\":");
        user_info_value(scratch, rq, "eventId");
        buf_adds(scratch, ",\"responseId\":\"");
        buf_adds(scratch, response_id);
        END_PAYLOAD("\"}}");
        out[count] = (struct planned){.ordinal = count, .channel = "apns", .token = token ? token : ""};
        scratch->len = 0;
        buf_addc(scratch, 1);
        buf_adds(scratch, "{\"deviceToken\":");
        json_string(scratch, token ? token : "", token_len);
        buf_adds(scratch, ",\"pushType\":\"alert\",\"payload\":");
        buf_adds(scratch, "{\"aps\":{\"alert\":{\"title\":\"See you there\",\"body\":");
        user_info_value(scratch, rq, "location");
        END_PAYLOAD("}}}}");
        break;
    case RULE_ACCEPT_RECURRING:
        WEBHOOK(0);
        buf_adds(scratch, "\"event\":\"series.accepted\",\"eventId\":");
        user_info_value(scratch, rq, "eventId");
        END_PAYLOAD("}}");
        break;
    case RULE_ACCEPT_LARGE:
        WEBHOOK(60);
        buf_adds(scratch, "\"event\":\"large-event.accepted\",\"eventId\":");
        user_info_value(scratch, rq, "eventId");
        END_PAYLOAD("}}");
        break;
    case RULE_ACCEPT:
        WEBHOOK(0);
        buf_adds(scratch, "\"event\":\"invite.accepted\",\"eventId\":");
        user_info_value(scratch, rq, "eventId");
        buf_adds(scratch, ",\"deviceToken\":");
        json_string_or_null(scratch, token, token_len);
        buf_adds(scratch, ",\"responseId\":\"");
        buf_adds(scratch, response_id);
        END_PAYLOAD("\"}}");
        break;
    case RULE_DECLINE:
        WEBHOOK(0);
        buf_adds(scratch, "\"event\":\"invite.declined\",\"eventId\":");
        user_info_value(scratch, rq, "eventId");
        END_PAYLOAD("}}");
        break;
    case RULE_COMMENT:
        WEBHOOK(0);
        buf_adds(scratch, "\"event\":\"invite.comment\",\"text\":");
        json_string_or_null(scratch, rq->user_text, rq->user_text_len);
        END_PAYLOAD("}}");
        break;
    default: break;
    }
#undef WEBHOOK
#undef END_PAYLOAD
    return count;
}

static void release(struct request *rq) {
    json_object_put(rq->root);
    rq->root = NULL;
    buf_free(&rq->canonical);
}

/* Hands the answer to the connection's thread. */
static void resume(struct request *rq) {
    release(rq);
    MHD_resume_connection(rq->connection);
}

static int is_missing_partition(PGresult *result) {
    const char *state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
    const char *message = PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY);
    return state != NULL && strcmp(state, "23514") == 0 && message != NULL && strstr(message, "no partition") != NULL;
}

/* Writes `items` with one statement and answers each; a batch the server refuses is written again one
 * request at a time. */
static void write_items(struct writer *w, struct request **items, int n) {
    if (PQstatus(w->connection) != CONNECTION_OK && !writer_connect(w)) {
        for (int i = 0; i < n; i++) {
            answer_text(items[i], 503, "{\"title\":\"Service Unavailable\",\"status\":503}", 1);
            resume(items[i]);
        }
        return;
    }
    int64_t received_ms = now_ms();
    unsigned char random[128 * (1 + MAX_FOLLOWUPS) * 16];
    unsigned char *ids = n <= 128 ? random : malloc((size_t)n * (1 + MAX_FOLLOWUPS) * 16);
    random_bytes(ids, (size_t)n * (1 + MAX_FOLLOWUPS) * 16);

    for (int p = 0; p < P_COUNT; p++) array_begin(&w->parameters[p], parameter_elements[p]);
    struct array *a = w->parameters;
    unsigned char (*response_ids)[16] = malloc((size_t)n * 16);
    struct buf answer = {0};
    for (int i = 0; i < n; i++) {
        struct request *rq = items[i];
        unsigned char *id = response_ids[i];
        uuid_v7(id, received_ms, ids + (size_t)i * (1 + MAX_FOLLOWUPS) * 16);
        char id_text[37];
        uuid_text(id_text, id);

        struct planned planned[MAX_FOLLOWUPS];
        int followups = plan_followups(rq, id_text, planned, &a[P_F_PAYLOAD], &w->scratch);
        answer.len = 0;
        buf_adds(&answer, "{\"id\":\"");
        buf_adds(&answer, id_text);
        buf_adds(&answer, "\",\"outcome\":\"");
        buf_adds(&answer, rules[rq->rule].outcome);
        buf_adds(&answer, "\",\"ruleId\":\"");
        buf_adds(&answer, rules[rq->rule].id);
        buf_adds(&answer, "\",\"subject\":");
        json_string_or_null(&answer, rq->subject, rq->subject_len);
        buf_adds(&answer, ",\"followUps\":[");
        for (int k = 0; k < followups; k++) {
            struct planned *f = &planned[k];
            /* Follow-up ids are stamped when they are made, as ActionHook's. */
            uuid_v7(f->id, now_ms(), ids + ((size_t)i * (1 + MAX_FOLLOWUPS) + 1 + (size_t)k) * 16);
            f->due_ms = received_ms + f->delay_seconds * 1000LL;
            char followup_id[37], due[25];
            uuid_text(followup_id, f->id);
            format_ms(due, f->due_ms);
            buf_adds(&answer, k > 0 ? ",{\"id\":\"" : "{\"id\":\"");
            buf_adds(&answer, followup_id);
            buf_adds(&answer, "\",\"channel\":\"");
            buf_adds(&answer, f->channel);
            buf_adds(&answer, "\",\"dueAt\":\"");
            buf_adds(&answer, due);
            buf_adds(&answer, "\"}");
            array_add(&a[P_F_ID], f->id, 16);
            array_add(&a[P_F_RESPONSE], id, 16);
            uint32_t ordinal = (uint32_t)f->ordinal;
            unsigned char be[4] = {(unsigned char)(ordinal >> 24), (unsigned char)(ordinal >> 16),
                                   (unsigned char)(ordinal >> 8), (unsigned char)ordinal};
            array_add(&a[P_F_ORDINAL], be, 4);
            array_text(&a[P_F_CHANNEL], f->channel, strlen(f->channel));
            array_text(&a[P_F_TOKEN], f->token, f->token ? strlen(f->token) : 0);
            array_timestamp(&a[P_F_DUE], f->due_ms);
        }
        buf_adds(&answer, "]}");

        array_text(&a[P_APP], rq->app->app_id, strlen(rq->app->app_id));
        array_add(&a[P_ID], id, 16);
        array_text(&a[P_KEY], rq->key, strlen(rq->key));
        array_add(&a[P_HASH], rq->hash, 32);
        array_text(&a[P_ACTION], rq->action, rq->action_len);
        array_text(&a[P_CATEGORY], rq->category, rq->category_len);
        array_text(&a[P_NOTIFICATION], rq->notification, rq->notification_len);
        array_text(&a[P_USER_TEXT], rq->user_text, rq->user_text_len);
        w->scratch.len = 0;
        buf_addc(&w->scratch, 1);
        buf_add(&w->scratch, rq->canonical.data + rq->user_info_at, rq->user_info_len);
        array_add(&a[P_USER_INFO], w->scratch.data, w->scratch.len);
        array_text(&a[P_TOKEN], rq->has_token ? rq->token : NULL, rq->has_token ? strlen(rq->token) : 0);
        array_text(&a[P_CLIENT_ID], rq->response_id, rq->response_id_len);
        if (rq->has_responded)
            array_timestamp(&a[P_RESPONDED], rq->responded_ms);
        else
            array_null(&a[P_RESPONDED]);
        array_text(&a[P_OUTCOME], rules[rq->rule].outcome, strlen(rules[rq->rule].outcome));
        array_text(&a[P_RULE], rules[rq->rule].id, strlen(rules[rq->rule].id));
        array_text(&a[P_SUBJECT], rq->subject, rq->subject_len);
        array_add(&a[P_ANSWER], answer.data, answer.len);
        /* The answer given after the commit is the one stored. */
        free(rq->answer);
        rq->answer = malloc(answer.len);
        memcpy(rq->answer, answer.data, answer.len);
        rq->answer_len = answer.len;
    }
    buf_free(&answer);
    if (ids != random) free(ids);

    const char *values[P_COUNT];
    int lengths[P_COUNT], formats[P_COUNT];
    for (int p = 0; p < P_COUNT; p++) {
        array_end(&a[p]);
        values[p] = a[p].b.data;
        lengths[p] = (int)a[p].b.len;
        formats[p] = 1;
    }
    PGresult *result = PQexecPrepared(w->connection, "ingest", P_COUNT, values, lengths, formats, 1);
    if (PQresultStatus(result) != PGRES_TUPLES_OK && is_missing_partition(result)) {
        PQclear(result);
        PQclear(PQexec(w->connection, "SELECT actionhook_create_current_partitions()"));
        result = PQexecPrepared(w->connection, "ingest", P_COUNT, values, lengths, formats, 1);
    }
    if (PQresultStatus(result) != PGRES_TUPLES_OK) {
        int server_refused = PQstatus(w->connection) == CONNECTION_OK;
        fprintf(stderr, "reference: batch of %d: %s", n, PQresultErrorMessage(result));
        PQclear(result);
        free(response_ids);
        if (server_refused && n > 1) {
            for (int i = 0; i < n; i++) write_items(w, &items[i], 1);
            return;
        }
        for (int i = 0; i < n; i++) {
            answer_text(items[i], server_refused ? 500 : 503,
                        server_refused ? "{\"title\":\"Internal Server Error\",\"status\":500}"
                                       : "{\"title\":\"Service Unavailable\",\"status\":503}",
                        1);
            resume(items[i]);
        }
        return;
    }

    /* Stored: the response ids returned. The others had their key stored before. */
    int rows = PQntuples(result);
    char *stored = calloc((size_t)n, 1);
    if (rows == n) {
        memset(stored, 1, (size_t)n);
    } else {
        for (int r = 0; r < rows; r++) {
            const char *id = PQgetvalue(result, r, 0);
            for (int i = 0; i < n; i++)
                if (!stored[i] && memcmp(response_ids[i], id, 16) == 0) {
                    stored[i] = 1;
                    break;
                }
        }
    }
    PQclear(result);
    free(response_ids);

    if (rows < n) {
        /* Replays: the same normalised body gets the stored answer, another body 422. */
        struct array apps = {0}, keys = {0};
        array_begin(&apps, OID_TEXT);
        array_begin(&keys, OID_TEXT);
        int *positions = malloc((size_t)n * sizeof *positions), count = 0;
        for (int i = 0; i < n; i++) {
            if (stored[i]) continue;
            positions[count++] = i;
            array_text(&apps, items[i]->app->app_id, strlen(items[i]->app->app_id));
            array_text(&keys, items[i]->key, strlen(items[i]->key));
            free(items[i]->answer);
            items[i]->answer = NULL;
        }
        array_end(&apps);
        array_end(&keys);
        const char *replay_values[2] = {apps.b.data, keys.b.data};
        int replay_lengths[2] = {(int)apps.b.len, (int)keys.b.len}, replay_formats[2] = {1, 1};
        result = PQexecPrepared(w->connection, "replay", 2, replay_values, replay_lengths, replay_formats, 1);
        if (PQresultStatus(result) == PGRES_TUPLES_OK) {
            for (int r = 0; r < PQntuples(result); r++) {
                const unsigned char *p = (const unsigned char *)PQgetvalue(result, r, 0);
                int position = (int)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
                if (position < 1 || position > count) continue;
                struct request *rq = items[positions[position - 1]];
                if (PQgetlength(result, r, 1) != 32 || memcmp(PQgetvalue(result, r, 1), rq->hash, 32) != 0) {
                    answer_text(rq, 422,
                                "{\"title\":\"Idempotency Key Reused\",\"status\":422,\"detail\":\"This idempotency "
                                "key was already used with a different body.\"}",
                                1);
                } else if (!PQgetisnull(result, r, 2)) {
                    struct buf b = {0};
                    buf_add(&b, PQgetvalue(result, r, 2), (size_t)PQgetlength(result, r, 2));
                    set_answer(rq, 200, &b, 0);
                    rq->replayed = 1;
                }
            }
        } else {
            fprintf(stderr, "reference: replay lookup: %s", PQresultErrorMessage(result));
        }
        PQclear(result);
        for (int k = 0; k < count; k++) {
            struct request *rq = items[positions[k]];
            if (rq->answer == NULL)
                answer_text(rq, 409,
                            "{\"title\":\"Conflict\",\"status\":409,\"detail\":\"A request with this idempotency key "
                            "is being processed; retry it.\"}",
                            1);
        }
        free(positions);
        buf_free(&apps.b);
        buf_free(&keys.b);
    }
    for (int i = 0; i < n; i++) {
        if (stored[i]) {
            items[i]->status = 202;
            items[i]->problem = 0;
        }
        resume(items[i]);
    }
    free(stored);
}

static void *writer_main(void *argument) {
    struct writer *w = argument;
    struct request **batch = malloc((size_t)batch_max * sizeof *batch);
    pthread_mutex_lock(&queue_lock);
    for (;;) {
        /* A writer starts beside a busy one only for a batch worth it (as ActionHook's batcher). */
        while (!(queue_length > 0 && (busy_writers == 0 || queue_length >= concurrent_minimum)) &&
               !(writers_stopping && queue_length == 0))
            pthread_cond_wait(&queue_ready, &queue_lock);
        if (queue_length == 0) break;
        int n = 0;
        while (queue_head != NULL && n < batch_max) {
            batch[n++] = queue_head;
            queue_head = queue_head->next;
        }
        if (queue_head == NULL) queue_tail = NULL;
        queue_length -= n;
        busy_writers++;
        pthread_mutex_unlock(&queue_lock);
        write_items(w, batch, n);
        pthread_mutex_lock(&queue_lock);
        busy_writers--;
        /* Whatever waits while this writer was busy is taken by it next, or by an idle one. */
        if (queue_length > 0) pthread_cond_signal(&queue_ready);
    }
    pthread_mutex_unlock(&queue_lock);
    free(batch);
    return NULL;
}

/* --- HTTP --------------------------------------------------------------------------------------- */

static enum MHD_Result send_answer(struct MHD_Connection *connection, struct request *rq) {
    struct MHD_Response *response = MHD_create_response_from_buffer(rq->answer_len, rq->answer, MHD_RESPMEM_MUST_FREE);
    if (response == NULL) return MHD_NO;
    rq->answer = NULL;
    MHD_add_response_header(response, "Content-Type", rq->problem ? "application/problem+json" : "application/json");
    if (rq->replayed) MHD_add_response_header(response, "Idempotent-Replayed", "true");
    enum MHD_Result result = MHD_queue_response(connection, rq->status, response);
    MHD_destroy_response(response);
    return result;
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *connection, const char *url,
                                      const char *method, const char *version, const char *upload_data,
                                      size_t *upload_data_size, void **con_cls) {
    (void)cls;
    (void)version;
    struct request *rq = *con_cls;
    if (rq == NULL) {
        /* First call: headers only. */
        rq = calloc(1, sizeof *rq);
        if (rq == NULL) return MHD_NO;
        *con_cls = rq;
        return MHD_YES;
    }
    if (rq->state == STATE_QUEUED) {
        /* Resumed after the commit (or the failure) of its batch. */
        rq->state = STATE_ANSWERED;
        return send_answer(connection, rq);
    }
    if (*upload_data_size > 0) {
        if (!rq->overflowed) {
            if (rq->body.len + *upload_data_size > BODY_LIMIT) {
                rq->overflowed = 1;
                buf_free(&rq->body);
            } else {
                buf_add(&rq->body, upload_data, *upload_data_size);
            }
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    rq->state = STATE_ANSWERED;
    struct problem problem = {0};
    if (rq->overflowed) {
        problem = (struct problem){413, "Content Too Large", NULL, "The body is larger than 16384 bytes."};
    } else if (strcmp(url, "/v1/responses") != 0) {
        problem = (struct problem){404, "Not Found", NULL, NULL};
    } else if (strcmp(method, "POST") != 0) {
        problem = (struct problem){405, "Method Not Allowed", NULL, NULL};
    } else if (decode(rq, connection, &problem)) {
        atomic_fetch_add(&suspended_requests, 1);
        if (!atomic_load(&stopping)) {
            rq->state = STATE_QUEUED;
            rq->connection = connection;
            /* Suspended before any writer can see it: a writer resumes it after the commit. */
            MHD_suspend_connection(connection);
            enqueue(rq);
            return MHD_YES;
        }
        atomic_fetch_sub(&suspended_requests, 1);
        problem = (struct problem){503, "Service Unavailable", NULL,
                                   "The server is shutting down; retry the request."};
    }
    release(rq);
    set_problem(rq, &problem);
    return send_answer(connection, rq);
}

static void completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                      enum MHD_RequestTerminationCode code) {
    (void)cls;
    (void)connection;
    (void)code;
    struct request *rq = *con_cls;
    if (rq == NULL) return;
    if (rq->connection != NULL) atomic_fetch_sub(&suspended_requests, 1);
    release(rq);
    buf_free(&rq->body);
    free(rq->answer);
    free(rq);
    *con_cls = NULL;
}

/* --- Start -------------------------------------------------------------------------------------- */

/* The app's categories other than event-invite, with the actions their rules take. */
static int load_categories(PGconn *connection, struct app_key *key) {
    const char *parameters[1] = {key->app_id};
    PGresult *result = PQexecParams(
        connection,
        "SELECT c.id, coalesce(c.definition->>'subjectKey', ''),\n"
        "    (SELECT coalesce(string_agg(coalesce(a.action, '*'), chr(31)), '') FROM rules r\n"
        "     LEFT JOIN LATERAL jsonb_array_elements_text(CASE jsonb_typeof(r.definition->'match'->'action')\n"
        "         WHEN 'array' THEN r.definition->'match'->'action'\n"
        "         WHEN 'string' THEN jsonb_build_array(r.definition->'match'->'action') END) AS a(action) ON true\n"
        "     WHERE r.app_id = c.app_id AND r.enabled AND r.definition->'match'->>'category' = c.id)\n"
        "FROM categories c WHERE c.app_id = $1 AND c.id <> 'event-invite'",
        1, NULL, parameters, NULL, NULL, 0);
    int ok = PQresultStatus(result) == PGRES_TUPLES_OK && PQntuples(result) <= MAX_CATEGORIES;
    for (int r = 0; ok && r < PQntuples(result); r++) {
        struct category *category = &key->categories[key->category_count++];
        if (strlen(PQgetvalue(result, r, 0)) >= sizeof category->id ||
            strlen(PQgetvalue(result, r, 1)) >= sizeof category->subject_key ||
            strlen(PQgetvalue(result, r, 2)) >= sizeof category->actions) {
            ok = 0;
            break;
        }
        strcpy(category->id, PQgetvalue(result, r, 0));
        strcpy(category->subject_key, PQgetvalue(result, r, 1));
        strcpy(category->actions, PQgetvalue(result, r, 2));
    }
    PQclear(result);
    return ok;
}

/* The active ingest keys of apps whose event-invite rules are the ones modelled here. */
static int load_keys(void) {
    PGconn *connection = PQconnectdb(conninfo);
    if (PQstatus(connection) != CONNECTION_OK) {
        fprintf(stderr, "reference: cannot connect: %s", PQerrorMessage(connection));
        PQfinish(connection);
        return 0;
    }
    PGresult *result = PQexec(
        connection,
        "SELECT k.app_id, encode(k.secret_hash, 'hex'),\n"
        "    (SELECT string_agg(r.id || '@' || r.priority, ' ' ORDER BY r.priority, r.id) FROM rules r\n"
        "     WHERE r.app_id = k.app_id AND r.enabled\n"
        "       AND coalesce(r.definition->'match'->>'category', 'event-invite') = 'event-invite'),\n"
        "    (SELECT c.definition->>'subjectKey' FROM categories c\n"
        "     WHERE c.app_id = k.app_id AND c.id = 'event-invite')\n"
        "FROM api_keys k WHERE k.revoked_at IS NULL AND k.scope = 'ingest'");
    if (PQresultStatus(result) != PGRES_TUPLES_OK) {
        fprintf(stderr, "reference: loading the keys: %s", PQresultErrorMessage(result));
        PQclear(result);
        PQfinish(connection);
        return 0;
    }
    int rows = PQntuples(result);
    app_keys = calloc((size_t)rows + 1, sizeof *app_keys);
    for (int r = 0; r < rows; r++) {
        const char *app = PQgetvalue(result, r, 0);
        if (strcmp(PQgetvalue(result, r, 2), expected_rules) != 0 ||
            strcmp(PQgetvalue(result, r, 3), "eventId") != 0 || strlen(app) >= sizeof app_keys->app_id) {
            fprintf(stderr,
                    "reference: app '%s' is not the benchmark's app (event-invite rules: %s); its key is not loaded\n",
                    app, PQgetvalue(result, r, 2));
            continue;
        }
        struct app_key *key = &app_keys[app_key_count++];
        strcpy(key->app_id, app);
        const char *hex = PQgetvalue(result, r, 1);
        for (int i = 0; i < 32; i++) {
            unsigned int byte;
            sscanf(hex + 2 * i, "%2x", &byte);
            key->digest[i] = (unsigned char)byte;
        }
        if (!load_categories(connection, key)) {
            app_key_count--;
            fprintf(stderr, "reference: app '%s' has categories the reference cannot hold; its key is not loaded\n",
                    app);
        }
    }
    PQclear(result);
    PQfinish(connection);
    fprintf(stderr, "reference: %zu ingest key(s) loaded\n", app_key_count);
    return app_key_count > 0;
}

static int environment_integer(const char *name, int fallback, int low, int high) {
    const char *text = getenv(name);
    if (text == NULL || *text == 0) return fallback;
    int value = atoi(text);
    if (value < low || value > high) {
        fprintf(stderr, "reference: %s must be %d to %d\n", name, low, high);
        exit(2);
    }
    return value;
}

int main(int argc, char **argv) {
    unsigned int port = argc > 1 ? (unsigned int)atoi(argv[1]) : 8093;
    unsigned int threads = argc > 2 ? (unsigned int)atoi(argv[2]) : 8;
    conninfo = argc > 3 ? argv[3] : "";
    writer_count = environment_integer("REFERENCE_WRITERS", 2, 1, 64);
    batch_max = environment_integer("REFERENCE_BATCH_MAX", 128, 1, 10000);
    concurrent_minimum = batch_max < 8 ? batch_max : 8;
    notify_followups = environment_integer("REFERENCE_NOTIFY", 1, 0, 1);
    signal(SIGPIPE, SIG_IGN);
    /* SIGINT and SIGTERM are blocked in every thread (they inherit the mask) and taken by sigwait here. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);

    if (!load_keys()) return 1;
    struct writer *writers = calloc((size_t)writer_count, sizeof *writers);
    for (int i = 0; i < writer_count; i++) {
        writers[i].index = i;
        if (!writer_connect(&writers[i])) return 1;
    }
    for (int i = 0; i < writer_count; i++) pthread_create(&writers[i].thread, NULL, writer_main, &writers[i]);

    struct MHD_Daemon *daemon = MHD_start_daemon(
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, (uint16_t)port, NULL, NULL,
        access_handler, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
        MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_TIMEOUT, 10u,
        MHD_OPTION_CONNECTION_LIMIT, 1000u,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(32 * 1024),
        MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
        MHD_OPTION_END);
    if (daemon == NULL) {
        fprintf(stderr, "reference: libmicrohttpd could not start on port %u\n", port);
        return 1;
    }
    fprintf(stderr, "reference: listening on port %u with %u threads, %d writers, batches of up to %d%s\n", port,
            threads, writer_count, batch_max, notify_followups ? "" : ", no NOTIFY");
    int signal_number;
    sigwait(&stop_signals, &signal_number);

    /* No new connections; every queued request is written and answered before the daemon stops (it must
     * not stop with a connection suspended). */
    atomic_store(&stopping, 1);
    MHD_socket listen_socket = MHD_quiesce_daemon(daemon);
    for (int waited = 0; atomic_load(&suspended_requests) > 0 && waited < 1000; waited++) usleep(10000);
    pthread_mutex_lock(&queue_lock);
    writers_stopping = 1;
    pthread_cond_broadcast(&queue_ready);
    pthread_mutex_unlock(&queue_lock);
    for (int i = 0; i < writer_count; i++) {
        pthread_join(writers[i].thread, NULL);
        PQfinish(writers[i].connection);
        for (int p = 0; p < P_COUNT; p++) buf_free(&writers[i].parameters[p].b);
        buf_free(&writers[i].scratch);
    }
    MHD_stop_daemon(daemon);
    if (listen_socket != MHD_INVALID_SOCKET) close(listen_socket);
    free(writers);
    free(app_keys);
    return 0;
}
