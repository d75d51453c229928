#!/usr/bin/env bash
# Creates the benchmark's realistic app in a running ActionHook through the admin API, and prints its
# ingest key (the only thing on stdout).
#
#   bench/setup-app.sh <base-url> <admin-token> [app-id]
#
# The app (default id "bench") gets 5 categories (event-invite, reply, TIMER_EXPIRED, TODO_CATEGORY,
# GENERAL) and 23 rules with mixed matches (actions, userInfo conditions eq/in/gt/prefix/exists,
# required text), handlers of every kind and follow-ups on some (webhooks without a url go to the
# app's endpoint https://hooks.example.com; a few APNs pushes). The benchmark's request, an
# event-invite "accept" from a standard organizer, is tried against 8 rules before "invite-accept"
# matches it: one webhook follow-up and the subject's decision.
set -euo pipefail

[[ $# -ge 2 ]] || {
    sed -n '2,4s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
    exit 2
}
base="$1"
admin="$2"
app="${3:-bench}"

api() {
    local method="$1" path="$2" body="$3" answer status
    answer="$(curl -sS -X "$method" -H "Authorization: Bearer $admin" -H "Content-Type: application/json" \
        -w '\n%{http_code}' --data-binary "$body" "$base$path")"
    status="${answer##*$'\n'}"
    answer="${answer%$'\n'*}"
    if [[ "$status" != 2* ]]; then
        echo "setup-app: $method $path answered $status: $answer" >&2
        exit 1
    fi
    printf '%s' "$answer"
}

created="$(api POST /v1/apps "{\"id\": \"$app\", \"name\": \"Benchmark Calendar\",
    \"webhook\": {\"url\": \"https://hooks.example.com\"}}")"
key="$(printf '%s' "$created" | python3 -c 'import json, sys; print(json.load(sys.stdin)["ingestKey"]["secret"])')"

category() { api PUT "/v1/apps/$app/categories/$1" "$2" >/dev/null; }
rule() { api POST "/v1/apps/$app/rules" "$1" >/dev/null; }

category event-invite '{"actions": [
    {"identifier": "accept", "title": "Accept"},
    {"identifier": "maybe", "title": "Maybe"},
    {"identifier": "decline", "title": "Decline", "options": ["destructive"]},
    {"identifier": "comment", "title": "Comment", "textInput": {"buttonTitle": "Send", "placeholder": "Add a note"}}],
  "options": ["customDismissAction"], "subjectKey": "eventId"}'
category reply '{"actions": [
    {"identifier": "reply", "title": "Reply", "textInput": {"buttonTitle": "Send", "placeholder": "Message"}},
    {"identifier": "mark-read", "title": "Mark as read"},
    {"identifier": "mute", "title": "Mute", "options": ["destructive"]}],
  "subjectKey": "threadId"}'
category TIMER_EXPIRED '{"actions": [
    {"identifier": "snooze", "title": "Snooze 5 min"},
    {"identifier": "stop", "title": "Stop", "options": ["destructive"]},
    {"identifier": "restart", "title": "Restart", "options": ["foreground"]}],
  "subjectKey": "timerId"}'
category TODO_CATEGORY '{"actions": [
    {"identifier": "complete", "title": "Complete"},
    {"identifier": "snooze", "title": "Remind me in an hour"},
    {"identifier": "later", "title": "Later"},
    {"identifier": "comment", "title": "Comment", "textInput": {"buttonTitle": "Add", "placeholder": "Note"}}],
  "subjectKey": "todoId"}'
category GENERAL '{"actions": [
    {"identifier": "open", "title": "Open", "options": ["foreground"]}],
  "options": ["customDismissAction"]}'

# event-invite: specific rules first (VIP organisers, recurring series, past events, large events).
rule '{"id": "invite-accept-vip", "priority": 10,
  "match": {"category": "event-invite", "action": "accept", "userInfo": [{"path": "organizer.tier", "op": "eq", "value": "vip"}]},
  "handler": {"type": "accept"},
  "followUps": [{"channel": "webhook", "body": {"event": "invite.accepted.vip", "eventId": "{{userInfo.eventId}}", "responseId": "{{response.id}}"}},
                {"channel": "apns", "payload": {"aps": {"alert": {"title": "See you there", "body": "{{userInfo.location}}"}}}}]}'
rule '{"id": "invite-accept-recurring", "priority": 20,
  "match": {"category": "event-invite", "action": ["accept"], "userInfo": [{"path": "recurring", "op": "eq", "value": true}]},
  "handler": {"type": "accept"},
  "followUps": [{"channel": "webhook", "body": {"event": "series.accepted", "eventId": "{{userInfo.eventId}}"}}]}'
rule '{"id": "invite-accept-past", "priority": 30,
  "match": {"category": "event-invite", "action": "accept", "userInfo": [{"path": "startsAt", "op": "prefix", "value": "2020-"}]},
  "handler": {"type": "record"}}'
rule '{"id": "invite-accept-large", "priority": 40,
  "match": {"category": "event-invite", "action": "accept", "userInfo": [{"path": "attendees", "op": "gt", "value": 500}]},
  "handler": {"type": "accept"},
  "followUps": [{"channel": "webhook", "delaySeconds": 60, "body": {"event": "large-event.accepted", "eventId": "{{userInfo.eventId}}"}}]}'
rule '{"id": "invite-accept", "priority": 100,
  "match": {"category": "event-invite", "action": "accept"},
  "handler": {"type": "accept"},
  "followUps": [{"channel": "webhook", "body": {"event": "invite.accepted", "eventId": "{{userInfo.eventId}}",
                 "deviceToken": "{{deviceToken}}", "responseId": "{{response.id}}"}}]}'
rule '{"id": "invite-decline", "priority": 100,
  "match": {"category": "event-invite", "action": "decline"},
  "handler": {"type": "decline"},
  "followUps": [{"channel": "webhook", "body": {"event": "invite.declined", "eventId": "{{userInfo.eventId}}"}}]}'
rule '{"id": "invite-comment", "priority": 100,
  "match": {"category": "event-invite", "action": "comment"},
  "handler": {"type": "comment", "maxLength": 500},
  "followUps": [{"channel": "webhook", "body": {"event": "invite.comment", "text": "{{userText}}"}}]}'
rule '{"id": "invite-maybe", "priority": 110,
  "match": {"category": "event-invite", "action": "maybe"},
  "handler": {"type": "record"}}'

# reply
rule '{"id": "reply-priority", "priority": 50,
  "match": {"category": "reply", "action": "reply", "userInfo": [{"path": "priority", "op": "in", "value": ["high", "urgent"]}],
            "userText": {"required": true}},
  "handler": {"type": "comment"},
  "followUps": [{"channel": "webhook", "body": {"event": "reply.priority", "threadId": "{{userInfo.threadId}}", "text": "{{userText}}"}},
                {"channel": "apns", "pushType": "background", "priority": 5, "payload": {"aps": {"content-available": 1}}}]}'
rule '{"id": "reply-text", "priority": 100,
  "match": {"category": "reply", "action": "reply", "userText": {"required": true}},
  "handler": {"type": "comment", "maxLength": 4000},
  "followUps": [{"channel": "webhook", "body": {"event": "reply", "threadId": "{{userInfo.threadId}}", "text": "{{userText}}"}}]}'
rule '{"id": "reply-mark-read", "priority": 100,
  "match": {"category": "reply", "action": "mark-read"},
  "handler": {"type": "record"}}'
rule '{"id": "reply-mute", "priority": 100,
  "match": {"category": "reply", "action": "mute"},
  "handler": {"type": "record"},
  "followUps": [{"channel": "webhook", "body": {"event": "thread.muted", "threadId": "{{userInfo.threadId}}"}}]}'

# TIMER_EXPIRED
rule '{"id": "timer-snooze", "priority": 100,
  "match": {"category": "TIMER_EXPIRED", "action": "snooze"},
  "handler": {"type": "snooze", "delaySeconds": 300, "maxSnoozes": 3}}'
rule '{"id": "timer-stop", "priority": 100,
  "match": {"category": "TIMER_EXPIRED", "action": "stop"},
  "handler": {"type": "record"}}'
rule '{"id": "timer-restart", "priority": 100,
  "match": {"category": "TIMER_EXPIRED", "action": "restart", "userInfo": [{"path": "timerId", "op": "exists"}]},
  "handler": {"type": "record"},
  "followUps": [{"channel": "webhook", "body": {"event": "timer.restart", "timerId": "{{userInfo.timerId}}"}}]}'

# TODO_CATEGORY
rule '{"id": "todo-complete-shared", "priority": 60,
  "match": {"category": "TODO_CATEGORY", "action": "complete", "userInfo": [{"path": "list.shared", "op": "eq", "value": true}]},
  "handler": {"type": "accept"},
  "followUps": [{"channel": "webhook", "body": {"event": "todo.completed", "todoId": "{{userInfo.todoId}}", "shared": true}},
                {"channel": "apns", "deviceToken": "{{userInfo.list.ownerToken}}", "payload": {"aps": {"alert": "A shared to-do was completed"}}}]}'
rule '{"id": "todo-complete", "priority": 100,
  "match": {"category": "TODO_CATEGORY", "action": "complete"},
  "handler": {"type": "accept"},
  "followUps": [{"channel": "webhook", "body": {"event": "todo.completed", "todoId": "{{userInfo.todoId}}"}}]}'
rule '{"id": "todo-snooze", "priority": 100,
  "match": {"category": "TODO_CATEGORY", "action": "snooze"},
  "handler": {"type": "snooze", "delaySeconds": 3600, "maxSnoozes": 5}}'
rule '{"id": "todo-later", "priority": 100,
  "match": {"category": "TODO_CATEGORY", "action": "later"},
  "handler": {"type": "decline"}}'
rule '{"id": "todo-comment", "priority": 100,
  "match": {"category": "TODO_CATEGORY", "action": "comment"},
  "handler": {"type": "comment", "maxLength": 1000}}'

# GENERAL, and a catch-all that records whatever nothing else took.
rule '{"id": "general-open", "priority": 100,
  "match": {"category": "GENERAL", "action": ["open", "com.apple.UNNotificationDefaultActionIdentifier"]},
  "handler": {"type": "record"}}'
rule '{"id": "general-dismiss", "priority": 100,
  "match": {"category": "GENERAL", "action": "com.apple.UNNotificationDismissActionIdentifier"},
  "handler": {"type": "record"},
  "followUps": [{"channel": "webhook", "delaySeconds": 5, "body": {"event": "dismissed", "notification": "{{notificationIdentifier}}"}}]}'
rule '{"id": "catch-all", "priority": 1000, "match": {}, "handler": {"type": "record"}}'

printf '%s\n' "$key"
