#!/usr/bin/env python3
"""The console in a real browser: headless Chromium driven by selenium against a running service.

scripts/check-console.sh starts the service (worker on, loopback webhooks allowed, a one-retry
schedule) over a fresh database and runs this with:

  ACTIONHOOK_CONSOLE_BASE_URL      http://127.0.0.1:<port>
  ACTIONHOOK_CONSOLE_ADMIN_TOKEN   the service's admin token
  ACTIONHOOK_CONSOLE_SCREENSHOTS   where the screenshots go (.build/test-logs/console)

It fails (exit 1) on the first broken expectation and on any JavaScript error, CSP violation or
failed request the browser reports, except the 401s of the wrong-token sign-in it provokes.
"""

import base64
import hashlib
import hmac
import http.server
import json
import os
import re
import secrets
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "identity"))
import sign_reply  # noqa: E402  (the README's signer: how a phone signs a reply)

from cryptography.hazmat.primitives.asymmetric import ec
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

BASE = os.environ["ACTIONHOOK_CONSOLE_BASE_URL"].rstrip("/")
ADMIN = os.environ["ACTIONHOOK_CONSOLE_ADMIN_TOKEN"]
SHOTS = os.environ.get("ACTIONHOOK_CONSOLE_SCREENSHOTS", ".build/test-logs/console")
CHROMIUM = os.environ.get("ACTIONHOOK_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("ACTIONHOOK_CHROMEDRIVER", "/usr/bin/chromedriver")
WAIT = float(os.environ.get("ACTIONHOOK_CONSOLE_WAIT", "30"))

APP = "console-app"
DESKTOP = (1280, 900)
PHONE = (390, 844)
HOSTILE_TEXT = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script> javascript:window.__xss=3'
HOSTILE_INFO = {
    "aps": {
        "category": "event-invite",
        "alert": {"title": "<img src=x onerror=window.__xss=4>", "body": "<script>window.__xss=5</script>"},
    },
    "eventId": "<svg onload=window.__xss=6>",
    "link": "javascript:window.__xss=7",
    "html": "<b onmouseover=window.__xss=8>bold</b><iframe src=javascript:window.__xss=9></iframe>",
}
# What an app's backend writes into a send: the subject and a device's recipient label.
HOSTILE_SUBJECT = '<img src=x onerror="window.__xss=10"><script>window.__xss=11</script>'
HOSTILE_RECIPIENT = "<b onmouseover=window.__xss=12>alice</b>"
SENT_DEVICES = ("c1" * 32, "c2" * 32)
# Users registered by the app's backend: a hostile user id, and dana with a phone and an iPad she signs out of.
HOSTILE_USER = "<img src=x onerror=alert(1)>"
USER = "dana"
USER_DEVICES = ("d1" * 32, "d2" * 32)
HOSTILE_USER_DEVICE = "e1" * 32
# A user id that cannot be a path segment (the server decodes the path before routing it).
SLASH_USER = "team/erin"
SLASH_USER_DEVICE = "f1" * 32
IDENTITY_KID = "console-hs"
# The Notifications page's page size (PAGE_SIZE in notifications.js).
NOTIFICATION_PAGE = 50
# Runs before every page script (CDP scripts are not subject to the page's CSP): records errors,
# unhandled rejections, failed resource loads and CSP violations where the test can read them.
ERROR_LISTENER = """
window.__consoleErrors = [];
window.addEventListener('error', function (e) {
  window.__consoleErrors.push('error: ' + (e.message || (e.target && (e.target.tagName + ' ' + (e.target.src || e.target.href))) || e.type));
}, true);
window.addEventListener('unhandledrejection', function (e) { window.__consoleErrors.push('unhandled rejection: ' + String(e.reason)); });
document.addEventListener('securitypolicyviolation', function (e) {
  window.__consoleErrors.push('csp violation: ' + e.violatedDirective + ' ' + e.blockedURI);
});
"""


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


# --- the webhook receiver: fails the first deliveries, then accepts ----------------------------------
class Receiver:
    """Answers 500 to the first `failures` deliveries and 204 after; checks every signature."""

    def __init__(self, secret, failures):
        self.secret = secret
        self.failures = failures
        self.requests = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                valid = receiver.valid(self.headers, body)
                with receiver.lock:
                    index = len(receiver.requests)
                    status = 500 if index < receiver.failures else 204
                    receiver.requests.append({"id": self.headers.get("webhook-id"), "valid": valid, "status": status})
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/console"

    def valid(self, headers, body):
        key = base64.b64decode(self.secret[len("whsec_"):])
        message = f"{headers.get('webhook-id')}.{headers.get('webhook-timestamp')}.".encode() + body
        expected = base64.b64encode(hmac.new(key, message, hashlib.sha256).digest()).decode()
        entries = (headers.get("webhook-signature") or "").split(" ")
        return any(hmac.compare_digest(entry, "v1," + expected) for entry in entries)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


# --- the API, as the app and the operator's scripts call it ------------------------------------------
def api(method, path, body=None, token=ADMIN, expect=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(BASE + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            status, text = answer.status, answer.read()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read()
    parsed = json.loads(text) if text else None
    if expect is not None and status != expect:
        raise Failure(f"{method} {path} answered {status}, expected {expect}: {text[:300]!r}")
    return parsed


def seed(receiver):
    created = api("POST", "/v1/apps", {"id": APP, "name": "Console Calendar",
                                       "webhook": {"url": receiver.url, "secret": receiver.secret}}, expect=201)
    api("POST", "/v1/apps", {"id": "console-other", "name": "Other app"}, expect=201)
    api("PUT", f"/v1/apps/{APP}/categories/event-invite", {
        "actions": [
            {"identifier": "accept", "title": "Accept"},
            {"identifier": "decline", "title": "Decline", "options": ["destructive"]},
            {"identifier": "comment", "title": "Comment", "textInput": {"buttonTitle": "Send", "placeholder": "Add a note"}},
        ],
        "options": ["customDismissAction"], "subjectKey": "eventId"}, expect=201)
    for rule in (
        {"id": "record-rest", "priority": 900, "handler": {"type": "record"}},
        {"id": "invite-accept", "priority": 100, "match": {"category": "event-invite", "action": "accept"},
         "handler": {"type": "accept"},
         "followUps": [{"channel": "webhook", "body": {"event": "invite.accepted", "eventId": "{{userInfo.eventId}}"}}]},
        {"id": "invite-comment", "priority": 200, "match": {"category": "event-invite", "action": "comment"},
         "handler": {"type": "comment"}},
    ):
        api("POST", f"/v1/apps/{APP}/rules", rule, expect=201)
    return created["ingestKey"]["secret"]


def ingest(key, body):
    return api("POST", "/v1/responses", body, token=key, expect=202)


def send_and_answer(key):
    """Sends a notification to two devices with a server key, answers it from the first device and
    then from the second (superseded), and sends a page of others after it so that it is on the
    Notifications page's second page. The app has no APNs credentials: every push goes dead."""
    server = api("POST", f"/v1/apps/{APP}/keys", {"scope": "send"}, expect=201)
    check(server["scope"] == "send" and server["secret"].startswith("ahs_"), f"the server key: {server}")
    sent = api("POST", f"/v1/apps/{APP}/notifications", {
        "to": [{"deviceToken": SENT_DEVICES[0], "recipient": HOSTILE_RECIPIENT},
               {"deviceToken": SENT_DEVICES[1], "recipient": "bob"}],
        "category": "event-invite",
        "aps": {"alert": {"title": "Team dinner", "body": "Thursday at seven"}},
        "subject": HOSTILE_SUBJECT,
        "replaceOnAnswer": True,
        "onNoReply": [{"afterSeconds": 3600, "followUps": [{"type": "remind"}]}],
    }, token=server["secret"], expect=202)
    check(sent["status"] == "pending" and len(sent["devices"]) == 2, f"the send answered {sent}")

    def answer(position, recipient, action):
        return ingest(key, {
            "actionIdentifier": action, "deviceToken": SENT_DEVICES[position],
            "userInfo": {"aps": {"category": "event-invite", "alert": {"title": "Team dinner", "body": "Thursday at seven"}},
                         "actionhook": {"n": sent["id"], "d": position, "r": recipient, "exp": int(time.time()) + 86400}}})

    first = answer(0, HOSTILE_RECIPIENT, "decline")
    check(first["notificationId"] == sent["id"] and first["outcome"] == "recorded", f"the first answer: {first}")
    check(first["recipient"] == HOSTILE_RECIPIENT, f"the first answer's recipient: {first.get('recipient')!r}")
    second = answer(1, "bob", "accept")
    check(second["notificationId"] == sent["id"] and second["outcome"] == "superseded", f"the second answer: {second}")
    check(second["followUps"] == [], f"the superseded answer queued follow-ups: {second['followUps']}")
    for index in range(NOTIFICATION_PAGE):
        api("POST", f"/v1/apps/{APP}/notifications", {"to": ["c3" * 32], "aps": {"alert": "Stand-up in 5 minutes"},
                                                      "subject": f"standup-{index}"},
            token=server["secret"], expect=202)
    return sent, first, second


def user_token(secret, user):
    """A user token as the app's backend signs it: HS256 with the secret ActionHook generated for its key."""
    def part(value):
        raw = value if isinstance(value, bytes) else json.dumps(value, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    signing = part({"alg": "HS256", "typ": "JWT", "kid": IDENTITY_KID}) + "." + \
        part({"sub": user, "aud": APP, "exp": int(time.time()) + 3600})
    return signing + "." + part(hmac.new(secret.encode(), signing.encode(), hashlib.sha256).digest())


def reply_as(key, body, token=None, device_key=None):
    """A reply from the app, with the user token when it has one, signed by the device's key when given."""
    request = urllib.request.Request(BASE + "/v1/responses", data=json.dumps(body).encode(), method="POST")
    request.add_header("Authorization", f"Bearer {key}")
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("ActionHook-User-Token", token)
    if device_key:
        request.add_header("ActionHook-Reply-Signature", sign_reply.signature_header(device_key, APP, body))
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            status, text = answer.status, answer.read()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read()
    check(status == 202, f"a reply answered {status}: {text[:300]!r}")
    return json.loads(text)


def users_and_replies(key):
    """The app's backend registers dana's phone and iPad and a device of a user with a hostile id, with a
    server key; the app (identity optional, an HS256 key) signs dana out of her iPad. A send to dana is
    answered with her user token (verified) and signed by her phone's key; a send to the hostile user is
    answered without either (unverified: only the send says whose device it is). Returns dana's phone's key
    fingerprint with the two."""
    patched = api("PATCH", f"/v1/apps/{APP}", {"identity": {"mode": "optional",
                                                            "keys": [{"kid": IDENTITY_KID, "algorithm": "HS256"}]}}, expect=200)
    secret = patched["identitySecrets"][IDENTITY_KID]
    server = api("POST", f"/v1/apps/{APP}/keys", {"scope": "send"}, expect=201)["secret"]
    phone_key = ec.generate_private_key(ec.SECP256R1())
    phone = api("PUT", f"/v1/apps/{APP}/devices/{USER_DEVICES[0]}", {
        "user": USER, "environment": "sandbox", "appVersion": "2.1", "osVersion": "18.1", "model": "iPhone17,1",
        "publicKey": sign_reply.public_key_base64(phone_key.public_key())}, token=server, expect=200)
    fingerprint = sign_reply.fingerprint(phone_key.public_key())
    check(phone["publicKey"]["fingerprint"] == fingerprint, f"dana's phone's key: {phone.get('publicKey')}")
    api("PUT", f"/v1/apps/{APP}/devices/{USER_DEVICES[1]}", {"user": USER, "environment": "production", "model": "iPad16,3"},
        token=server, expect=200)
    registered = api("PUT", f"/v1/apps/{APP}/devices/{HOSTILE_USER_DEVICE}", {"user": HOSTILE_USER, "environment": "sandbox"},
                     token=server, expect=200)
    check(registered["user"] == HOSTILE_USER and registered["status"] == "active", f"the registration: {registered}")
    api("PUT", f"/v1/apps/{APP}/devices/{SLASH_USER_DEVICE}", {"user": SLASH_USER, "environment": "production"},
        token=server, expect=200)
    dana = user_token(secret, USER)
    request = urllib.request.Request(BASE + f"/v1/devices/{USER_DEVICES[1]}", method="DELETE")
    request.add_header("Authorization", f"Bearer {key}")
    request.add_header("ActionHook-User-Token", dana)
    with urllib.request.urlopen(request, timeout=10) as answer:
        check(answer.status == 204, f"the sign-out answered {answer.status}")
    shown = api("GET", f"/v1/apps/{APP}/users/{USER}", token=server, expect=200)
    check([(d["deviceToken"], d["status"], d["reason"]) for d in shown["devices"]]
          == [(USER_DEVICES[0], "active", None), (USER_DEVICES[1], "removed", "signedOut")], f"dana's devices: {shown}")

    def send_and_reply(user, device, token, device_key=None):
        sent = api("POST", f"/v1/apps/{APP}/notifications", {"to": [{"user": user}], "category": "event-invite",
                                                             "aps": {"alert": "Coming?"}, "subject": f"users-{device[:2]}"},
                   token=server, expect=202)
        check([d["deviceToken"] for d in sent["devices"]] == [device], f"the send to {user!r} reached {sent['devices']}")
        reply = reply_as(key, {"actionIdentifier": "accept", "deviceToken": device,
                               "responseId": secrets.token_hex(8),
                               "respondedAt": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
                               "userInfo": {"aps": {"category": "event-invite"}, "eventId": f"users-{device[:2]}",
                                            "actionhook": {"n": sent["id"], "d": 0}}}, token, device_key)
        return sent, reply

    verified = send_and_reply(USER, USER_DEVICES[0], dana, phone_key)
    check(verified[1]["user"] == {"id": USER, "verified": True}, f"dana's reply's user: {verified[1].get('user')}")
    check(verified[1]["signature"] == {"status": "valid", "key": fingerprint}, f"dana's reply's signature: {verified[1].get('signature')}")
    unverified = send_and_reply(HOSTILE_USER, HOSTILE_USER_DEVICE, None)
    check(unverified[1]["user"] == {"id": HOSTILE_USER, "verified": False}, f"the unverified reply's user: {unverified[1].get('user')}")
    return verified, unverified, fingerprint


# --- the browser ------------------------------------------------------------------------------------
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--no-first-run", "--disable-extensions", f"--window-size={DESKTOP[0]},{DESKTOP[1]}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": ERROR_LISTENER})
    return driver


class Console:
    def __init__(self, driver):
        self.driver = driver
        self.allowed_401 = False
        self.allowed_404 = False
        self.problems = []

    def wait(self, condition, what, timeout=WAIT):
        try:
            # The pages redraw lists as they poll, so an element found a moment ago may be gone: look again.
            return WebDriverWait(
                self.driver, timeout, poll_frequency=0.2, ignored_exceptions=[StaleElementReferenceException]
            ).until(lambda d: condition(d))
        except TimeoutException:
            self.shoot("timeout")
            raise Failure(f"timed out after {timeout:.0f}s waiting for {what}") from None

    def find(self, selector):
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def one(self, selector, what=None):
        return self.wait(lambda d: (d.find_elements(By.CSS_SELECTOR, selector) or [None])[0], what or selector)

    def click(self, selector, what=None):
        """Clicks the first match, looking again when a redraw replaced it between finding and clicking."""
        def attempt(d):
            found = d.find_elements(By.CSS_SELECTOR, selector)
            if not found:
                return False
            found[0].click()
            return True
        self.wait(attempt, what or selector)

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def go(self, page):
        self.js("location.hash = arguments[0]", page)
        self.one(f"#page-{page}", f"the {page} page")

    def shoot(self, name):
        os.makedirs(SHOTS, exist_ok=True)
        self.driver.save_screenshot(os.path.join(SHOTS, f"{name}.png"))

    def check_logs(self, step):
        """Fails on any error the browser logged or the page's listener recorded since the last call."""
        for entry in self.driver.get_log("browser"):
            if entry["level"] not in ("SEVERE", "ERROR"):
                continue
            message = entry.get("message", "")
            if self.allowed_401 and entry.get("source") == "network" and " 401 " in message:
                continue
            if self.allowed_404 and entry.get("source") == "network" and " 404 " in message:
                continue
            self.problems.append(f"{step}: browser log: {message}")
        recorded = self.js("var e = window.__consoleErrors || []; window.__consoleErrors = []; return e;")
        self.problems += [f"{step}: page: {message}" for message in recorded]
        check(not self.problems, "JavaScript errors:\n  " + "\n  ".join(self.problems))


def text_of(element):
    return element.get_attribute("textContent")


def check_inert(c, detail):
    """Hostile text on screen ran nothing and became no element (`detail`: where it is shown)."""
    # Give anything injected the time to run (an image's error handler, a timer) before looking.
    time.sleep(1.5)
    dom = c.js("""return {
        xss: typeof window.__xss,
        images: document.querySelectorAll('img').length,
        scripts: Array.from(document.scripts).map(function (s) { return s.src; }),
        frames: document.querySelectorAll('iframe, object, embed, svg svg').length,
        handlers: Array.from(document.querySelectorAll('*')).filter(function (el) {
            return Array.from(el.attributes).some(function (a) { return /^on/i.test(a.name); });
        }).length,
        jsLinks: document.querySelectorAll('[href^="javascript"], [src^="javascript"]').length,
        bold: document.querySelectorAll(arguments[0] + ' b').length
    };""", detail)
    check(dom["xss"] == "undefined", f"injected script ran: window.__xss is {dom['xss']}")
    check(dom["images"] == 0 and dom["frames"] == 0 and dom["bold"] == 0, f"hostile markup became elements: {dom}")
    check(dom["scripts"] == [BASE + "/console/app.js"], f"scripts in the page: {dom['scripts']}")
    check(dom["handlers"] == 0 and dom["jsLinks"] == 0, f"event handlers or javascript: links in the DOM: {dom}")


def run(driver, receiver, key):
    c = Console(driver)
    driver.get(BASE + "/console")

    # 1. A wrong token: an error, and no data at all.
    c.allowed_401 = True
    c.one("#token-input").send_keys("not-the-admin-token")
    c.click("#login-button")
    error = c.wait(lambda d: d.find_element(By.ID, "login-error").is_displayed() and d.find_element(By.ID, "login-error"),
                   "the sign-in error")
    check("refused" in error.text, f"the sign-in error says {error.text!r}")
    check(not c.find("#nav")[0].is_displayed(), "the navigation shows after a refused token")
    check(not c.find("#app-select option"), "apps are listed after a refused token")
    check(c.js("return document.getElementById('page').children.length") == 0, "a page rendered after a refused token")
    check(c.js("return sessionStorage.length") == 0, "a refused token stayed in sessionStorage")
    c.shoot("login-error-desktop")
    c.check_logs("wrong token")
    c.allowed_401 = False

    # 2. The right token: kept in sessionStorage only, never in the URL or a cookie.
    c.one("#token-input").send_keys(ADMIN)
    c.click("#login-button")
    c.one(f".app-card[data-app='{APP}']", "the overview's app card")
    check(ADMIN not in driver.current_url, "the token is in the URL")
    check(c.js("return document.cookie") == "", "the console set a cookie")
    check(c.js("return sessionStorage.getItem('actionhook.adminToken')") == ADMIN, "the token is not in sessionStorage")
    check(ADMIN not in c.js("return document.documentElement.outerHTML"), "the token is in the page")
    c.one(".app-card[data-app='console-other']", "the second app's card")
    Select(c.one("#app-select")).select_by_value(APP)
    c.check_logs("sign in")

    # 3. A reply posted through the ingest API appears in the feed without a reload.
    c.go("replies")
    c.one("#reply-feed tr", "the reply feed")
    c.js("window.__sameDocument = true")
    accepted = ingest(key, {"actionIdentifier": "accept", "deviceToken": "ab" * 32,
                            "userInfo": {"aps": {"category": "event-invite", "alert": {"title": "Team lunch", "body": "Friday at noon"}},
                                         "eventId": "42"}})
    followup = accepted["followUps"][0]["id"]
    c.one(f"#reply-feed tr[data-id='{accepted['id']}']", "the new reply in the feed")
    check(c.js("return window.__sameDocument === true"), "the page was reloaded")

    # 4. Its detail: the matched rule, and the follow-up's attempts as they happen (two failures → dead).
    c.click(f"#reply-feed tr[data-id='{accepted['id']}']")
    c.wait(lambda d: text_of(d.find_element(By.CSS_SELECTOR, "#reply-detail .matched-rule")) == "invite-accept"
           if d.find_elements(By.CSS_SELECTOR, "#reply-detail .matched-rule") else False, "the matched rule in the detail")
    c.wait(lambda d: len(d.find_elements(By.CSS_SELECTOR, f"#reply-detail .followup[data-id='{followup}'][data-status='dead'] tr.attempt")) == 2,
           "two failed attempts of a dead follow-up in the detail", timeout=60)
    results = [text_of(cell) for cell in c.find(f"#reply-detail .followup[data-id='{followup}'] tr.attempt td.result")]
    check(results == ["failed", "failed"], f"the attempts read {results}")
    c.shoot("replies-detail-dead-desktop")
    c.check_logs("reply detail")

    # 5. Retried from the follow-ups page, after a confirmation, and delivered.
    c.go("followups")
    Select(c.one("#followup-status")).select_by_value("dead")
    c.click(f".followup-row[data-id='{followup}'][data-status='dead'] button.retry", "the dead follow-up's retry button")
    check(len(receiver.requests) == 2, f"the receiver saw {len(receiver.requests)} requests before the retry was confirmed")
    c.click(f".followup-row[data-id='{followup}'] button.confirm", "the confirmation")
    Select(c.one("#followup-status")).select_by_value("")
    c.one(f".followup-row[data-id='{followup}'][data-status='delivered']", "the retried follow-up delivered")
    check([r["status"] for r in receiver.requests] == [500, 500, 204], f"the receiver answered {receiver.requests}")
    check(all(r["valid"] and r["id"] == followup for r in receiver.requests), f"deliveries: {receiver.requests}")
    c.go("replies")
    c.click(f"#reply-feed tr[data-id='{accepted['id']}']")
    c.one(f"#reply-detail .followup[data-id='{followup}'] tr.attempt.result-delivered", "the delivered attempt in the detail")
    c.check_logs("retry")

    # 6. The rules in evaluation order, and a dry run that shows the matching rule and stores nothing.
    c.go("rules")
    c.one("#rule-list li[data-id='record-rest']", "the rule list")
    order = [li.get_attribute("data-id") for li in c.find("#rule-list li")]
    check(order == ["invite-accept", "invite-comment", "record-rest"], f"the rules are listed as {order}")
    stored = len(api("GET", f"/v1/apps/{APP}/responses")["items"])
    body = c.one("#dryrun-body")
    c.js("arguments[0].value = arguments[1]", body, json.dumps(
        {"actionIdentifier": "accept", "userInfo": {"aps": {"category": "event-invite"}, "eventId": "7"}}))
    c.click("#dryrun-run")
    matched = c.one("#dryrun-result .matched-rule", "the dry run's matched rule")
    check(text_of(matched) == "invite-accept", f"the dry run matched {text_of(matched)!r}")
    check(len(api("GET", f"/v1/apps/{APP}/responses")["items"]) == stored, "the dry run stored a response")
    c.check_logs("rules")

    # 7. The category as the phone shows it.
    c.go("categories")
    preview = c.one(".phone-preview[data-id='event-invite']", "the category preview")
    titles = [text_of(b) for b in preview.find_elements(By.CSS_SELECTOR, "button.action")]
    check(titles == ["Accept", "Decline", "Comment"], f"the buttons read {titles}")
    decline = preview.find_element(By.CSS_SELECTOR, "button.action[data-id='decline']")
    check("destructive" in decline.get_attribute("class"), "Decline is not marked destructive")
    color = decline.value_of_css_property("color")
    red = [int(v) for v in re.findall(r"\d+", color)[:3]]
    check(red[0] > 200 and red[1] < 100 and red[2] < 100, f"the destructive button is {color}, not red")
    field = preview.find_element(By.CSS_SELECTOR, "input.text-input")
    check(field.get_attribute("placeholder") == "Add a note", "the text field's placeholder is wrong")
    check(text_of(preview.find_element(By.CSS_SELECTOR, ".notif-title")) == "Team lunch", "the title is not the latest alert's")
    c.check_logs("categories")

    # 8. Hostile reply text and userInfo are shown as text and run nothing.
    hostile = ingest(key, {"actionIdentifier": "comment", "userText": HOSTILE_TEXT, "userInfo": HOSTILE_INFO})
    c.go("replies")
    c.click(f"#reply-feed tr[data-id='{hostile['id']}']", "the hostile reply in the feed")
    shown = c.wait(lambda d: (d.find_elements(By.CSS_SELECTOR, "#reply-detail .user-text") or [None])[0]
                   if d.find_elements(By.CSS_SELECTOR, f"#reply-detail h2 code") and
                   text_of(d.find_element(By.CSS_SELECTOR, "#reply-detail h2 code")) == hostile["id"] else None,
                   "the hostile reply's detail")
    check(text_of(shown) == HOSTILE_TEXT, f"the reply text shows as {text_of(shown)!r}")
    info = text_of(c.one("#reply-detail .user-info"))
    check(json.loads(info) == HOSTILE_INFO, "userInfo is not shown as its JSON text")
    subject = c.find(f"#reply-feed tr[data-id='{hostile['id']}'] td")[3]
    check(text_of(subject) == HOSTILE_INFO["eventId"], f"the subject shows as {text_of(subject)!r}")
    c.go("categories")
    c.wait(lambda d: text_of(d.find_element(By.CSS_SELECTOR, ".phone-preview[data-id='event-invite'] .notif-title"))
           == HOSTILE_INFO["aps"]["alert"]["title"] if d.find_elements(By.CSS_SELECTOR, ".phone-preview .notif-title") else False,
           "the hostile alert title as text")
    c.go("replies")
    c.click(f"#reply-feed tr[data-id='{hostile['id']}']")
    c.one("#reply-detail .user-text")
    check_inert(c, "#reply-detail")
    c.check_logs("hostile reply")

    # 8b. The feed's filters: by outcome, then by subject.
    Select(c.one("#filter-outcome")).select_by_value("accepted")
    c.click("#reply-filters button[type='submit']")
    c.wait(lambda d: [r.get_attribute("data-id") for r in d.find_elements(By.CSS_SELECTOR, "#reply-feed tr[data-id]")]
           == [accepted["id"]], "only the accepted reply under the outcome filter")
    Select(c.one("#filter-outcome")).select_by_value("")
    c.one("#filter-subject").send_keys(HOSTILE_INFO["eventId"])
    c.click("#reply-filters button[type='submit']")
    c.wait(lambda d: [r.get_attribute("data-id") for r in d.find_elements(By.CSS_SELECTOR, "#reply-feed tr[data-id]")]
           == [hostile["id"]], "only the hostile reply under the subject filter")
    c.one("#filter-subject").clear()
    c.click("#reply-filters button[type='submit']")
    c.wait(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#reply-feed tr[data-id]")) == 2, "both replies without filters")
    c.check_logs("filters")

    # 8c. A notification sent to two devices and answered from both: the first answer wins, the second
    # is superseded; the list pages with "More"; the receipt shows every device's push, the winner,
    # the superseded reply, the cancelled no-reply step and the replacing push; the backend's subject
    # and recipient label stay text.
    sent, first, second = send_and_answer(key)
    c.go("notifications")
    rows = "#notification-list tr[data-id]"
    c.wait(lambda d: len(d.find_elements(By.CSS_SELECTOR, rows)) == NOTIFICATION_PAGE, "a full first page of notifications")
    check(not c.find(f"#notification-list tr[data-id='{sent['id']}']"), "the oldest notification is on the first page")
    c.click("#notification-more", "the More button")
    row = c.one(f"#notification-list tr[data-id='{sent['id']}'][data-status='answered']", "the answered notification on the second page")
    check(len(c.find(rows)) == NOTIFICATION_PAGE + 1, f"{len(c.find(rows))} notifications after More")
    c.wait(lambda d: not d.find_element(By.ID, "notification-more").is_displayed(), "More hidden after the last page")
    check(text_of(row.find_element(By.CSS_SELECTOR, "td.subject")) == HOSTILE_SUBJECT,
          f"the subject shows as {text_of(row.find_element(By.CSS_SELECTOR, 'td.subject'))!r}")
    check(text_of(row.find_element(By.CSS_SELECTOR, "td.state")) == "answered", "the row's status is not answered")
    check(text_of(row.find_element(By.CSS_SELECTOR, "td.devices")) == "2", "the row does not count 2 devices")
    c.click(f"#notification-list tr[data-id='{sent['id']}']")
    receipt = "#notification-detail"
    c.wait(lambda d: any(text_of(e) == sent["id"] for e in d.find_elements(By.CSS_SELECTOR, f"{receipt} h2 code")),
           "the notification's receipt")
    # The receipt is redrawn as its follow-ups change; once they are all settled it stays as it is. Without
    # APNs credentials every push goes dead, with the reason shown; the answer cancelled the step's reminders.
    c.wait(lambda d: [text_of(e) for e in d.find_elements(By.CSS_SELECTOR, f"{receipt} tr.receipt-device .reason")]
           == ["no_apns_credentials"] * 2, "both pushes dead for want of APNs credentials")
    c.one(f"{receipt} tr.receipt-followup[data-kind='replace'][data-status='dead']", "the replacing push to the other device")
    c.wait(lambda d: [e.get_attribute("data-status") for e in d.find_elements(By.CSS_SELECTOR, f"{receipt} .step tr.receipt-followup")]
           == ["cancelled"] * 2, "the step's reminders cancelled by the answer")
    c.one(f"{receipt} .step[data-index='0'][data-fired='false']", "the no-reply step, not fired")
    winner = c.one(f"{receipt} dl.answer[data-id='{first['id']}']", "the winning answer")
    check(text_of(winner.find_element(By.CSS_SELECTOR, ".action")) == "decline", "the winner's action")
    check(text_of(winner.find_element(By.CSS_SELECTOR, ".outcome")) == "recorded", "the winner's outcome")
    check(text_of(winner.find_element(By.CSS_SELECTOR, ".matched-rule")) == "record-rest", "the winner's rule")
    check(text_of(winner.find_element(By.CSS_SELECTOR, ".recipient")) == HOSTILE_RECIPIENT,
          f"the winner's recipient shows as {text_of(winner.find_element(By.CSS_SELECTOR, '.recipient'))!r}")
    check(re.fullmatch(r"\d+ ms|\d+\.\d s", text_of(winner.find_element(By.CSS_SELECTOR, ".latency"))),
          f"the winner's latency reads {text_of(winner.find_element(By.CSS_SELECTOR, '.latency'))!r}")
    loser = c.one(f"{receipt} table.superseded tr.receipt-reply[data-id='{second['id']}']", "the superseded reply")
    check(text_of(loser.find_element(By.CSS_SELECTOR, ".outcome")) == "superseded", "the superseded reply's outcome")
    check(text_of(loser.find_element(By.CSS_SELECTOR, ".recipient")) == "bob", "the superseded reply's recipient")
    check(text_of(c.one(f"{receipt} dl.summary .subject")) == HOSTILE_SUBJECT, "the receipt's subject is not the text sent")
    devices = c.find(f"{receipt} tr.receipt-device")
    check([d.get_attribute("data-token") for d in devices] == list(SENT_DEVICES), "the receipt's devices")
    check(text_of(devices[0].find_element(By.CSS_SELECTOR, ".recipient")) == HOSTILE_RECIPIENT, "the first device's recipient")
    shown = devices[0].find_element(By.CSS_SELECTOR, ".device .token")
    check(shown.get_attribute("title") == SENT_DEVICES[0] and len(text_of(shown)) < len(SENT_DEVICES[0]),
          f"the device token shows as {text_of(shown)!r}")
    check_inert(c, receipt)
    # The row clicked is at the foot of the second page: bring the receipt into view for the screenshot.
    c.js("arguments[0].scrollIntoView({block: 'start'})", c.one(receipt))
    c.shoot("notification-receipt-desktop")
    c.check_logs("notification receipt")

    # 8d. The Notifications page's filters: answered ones, then by subject.
    Select(c.one("#notification-status")).select_by_value("answered")
    c.click("#notification-filters button[type='submit']")
    c.wait(lambda d: [r.get_attribute("data-id") for r in d.find_elements(By.CSS_SELECTOR, rows)] == [sent["id"]],
           "only the answered notification under the status filter")
    Select(c.one("#notification-status")).select_by_value("")
    c.one("#notification-subject").send_keys(HOSTILE_SUBJECT)
    c.click("#notification-filters button[type='submit']")
    c.wait(lambda d: [r.get_attribute("data-id") for r in d.find_elements(By.CSS_SELECTOR, rows)] == [sent["id"]],
           "only the hostile notification under the subject filter")
    c.one("#notification-subject").clear()
    c.click("#notification-filters button[type='submit']")
    c.wait(lambda d: len(d.find_elements(By.CSS_SELECTOR, rows)) == NOTIFICATION_PAGE, "one page again without filters")
    c.check_logs("notification filters")

    # 8e. Users: devices registered by the backend, grouped by user; one user looked up with its devices
    # (statuses, the sign-out's reason) and replies; the hostile user id shown as text; each reply's user
    # marked verified or unverified here, in the replies and in the receipts.
    (dana_sent, dana_reply), (hostile_sent, hostile_reply), dana_key = users_and_replies(key)
    c.go("users")
    groups = "#device-groups .device-group"
    c.wait(lambda d: [g.get_attribute("data-user") for g in d.find_elements(By.CSS_SELECTOR, f"{groups}[data-anonymous='false']")]
           == sorted([USER, HOSTILE_USER, SLASH_USER]), "the devices grouped by user")
    hostile_group = c.one(f"{groups}[data-user='{HOSTILE_USER}']", "the hostile user's group")
    check(text_of(hostile_group.find_element(By.CSS_SELECTOR, ".user-id")) == HOSTILE_USER,
          f"the hostile user id shows as {text_of(hostile_group.find_element(By.CSS_SELECTOR, '.user-id'))!r}")
    dana_group = c.one(f"{groups}[data-user='{USER}']", "dana's group")
    check(sorted(r.get_attribute("data-token") for r in dana_group.find_elements(By.CSS_SELECTOR, "tr.device")) == list(USER_DEVICES),
          "dana's group does not list her two devices")
    c.one("#user-id").send_keys(USER)
    c.click("#user-lookup button[type='submit']")
    detail = "#user-detail"
    c.wait(lambda d: [e.get_attribute("data-token") for e in d.find_elements(By.CSS_SELECTOR, f"{detail} table.devices tr.device")]
           == list(USER_DEVICES) and text_of(d.find_element(By.CSS_SELECTOR, f"{detail} h2 code")) == USER, "dana's devices, active first")
    phone, tablet = c.find(f"{detail} table.devices tr.device")
    check(text_of(phone.find_element(By.CSS_SELECTOR, ".device-status")) == "active",
          f"the phone's status: {text_of(phone.find_element(By.CSS_SELECTOR, '.device-status'))!r}")
    check(text_of(tablet.find_element(By.CSS_SELECTOR, ".device-status")) == "removed signedOut",
          f"the signed-out iPad's status: {text_of(tablet.find_element(By.CSS_SELECTOR, '.device-status'))!r}")
    check([text_of(phone.find_element(By.CSS_SELECTOR, f".{name}"))
           for name in ("platform", "environment", "app-version", "os-version", "model")]
          == ["ios", "sandbox", "2.1", "18.1", "iPhone17,1"], "the phone's details")
    check(text_of(tablet.find_element(By.CSS_SELECTOR, ".environment")) == "production", "the iPad's environment")
    check(text_of(tablet.find_element(By.CSS_SELECTOR, ".app-version")) == "—", "the iPad's missing app version")
    check(all(text_of(row.find_element(By.CSS_SELECTOR, ".registered")) not in ("", "—") for row in (phone, tablet)),
          "a registration time is missing")
    token_shown = phone.find_element(By.CSS_SELECTOR, ".token")
    check(token_shown.get_attribute("title") == USER_DEVICES[0] and len(text_of(token_shown)) < len(USER_DEVICES[0]),
          "the phone's token is not shortened")
    check(text_of(c.one(f"{detail} .user-summary")) == "2 devices, 1 active.",
          f"the summary reads {text_of(c.one(f'{detail} .user-summary'))!r}")
    reply_row = c.one(f"{detail} tr.user-reply[data-id='{dana_reply['id']}']", "dana's reply on her page")
    check(len(c.find(f"{detail} tr.user-reply")) == 1, "another user's reply is on dana's page")
    mark = reply_row.find_element(By.CSS_SELECTOR, ".user-mark")
    check(mark.get_attribute("data-verified") == "true" and text_of(mark) == f"{USER} verified", f"dana's reply's user reads {text_of(mark)!r}")
    c.shoot("users-detail-desktop")
    # The hostile user, opened from its group: its id, device and unverified reply as text.
    c.click(f"{groups}[data-user='{HOSTILE_USER}'] button.open-user", "the hostile user's Open button")
    c.wait(lambda d: text_of(d.find_element(By.CSS_SELECTOR, f"{detail} h2 code")) == HOSTILE_USER
           and d.find_elements(By.CSS_SELECTOR, f"{detail} tr.user-reply[data-id='{hostile_reply['id']}']"), "the hostile user's page")
    check(c.one("#user-id").get_attribute("value") == HOSTILE_USER, "the lookup field does not hold the opened user")
    check([e.get_attribute("data-token") for e in c.find(f"{detail} table.devices tr.device")] == [HOSTILE_USER_DEVICE],
          "the hostile user's device")
    mark = c.one(f"{detail} tr.user-reply[data-id='{hostile_reply['id']}'] .user-mark")
    check(mark.get_attribute("data-verified") == "false" and text_of(mark) == f"{HOSTILE_USER} unverified",
          f"the hostile user's reply reads {text_of(mark)!r}")
    check_inert(c, "#page-users")
    # A user id with a slash, looked up through the devices list's query.
    c.click(f"{groups}[data-user='{SLASH_USER}'] button.open-user", "the Open button of the user with a slash")
    c.wait(lambda d: text_of(d.find_element(By.CSS_SELECTOR, f"{detail} h2 code")) == SLASH_USER
           and [e.get_attribute("data-token") for e in d.find_elements(By.CSS_SELECTOR, f"{detail} table.devices tr.device")]
           == [SLASH_USER_DEVICE], "the devices of the user with a slash")
    c.one(f"{detail} .no-replies", "no reply from the user with a slash")
    # A user with no device and no reply: said so, no error.
    c.allowed_404 = True
    c.one("#user-id").clear()
    c.one("#user-id").send_keys("nobody-here")
    c.click("#user-lookup button[type='submit']")
    c.one(f"{detail} .no-devices", "no device for an unknown user")
    c.one(f"{detail} .no-replies", "no reply for an unknown user")
    check(not c.find("#status.error") or not c.one("#status").is_displayed(), "an unknown user showed an error")
    c.check_logs("users")
    c.allowed_404 = False

    # The replies: filtered by user, each with its user and mark, in the feed and the detail.
    c.go("replies")
    c.one("#filter-user").send_keys(USER)
    c.click("#reply-filters button[type='submit']")
    c.wait(lambda d: [r.get_attribute("data-id") for r in d.find_elements(By.CSS_SELECTOR, "#reply-feed tr[data-id]")]
           == [dana_reply["id"]], "only dana's reply under the user filter")
    feed_mark = c.one(f"#reply-feed tr[data-id='{dana_reply['id']}'] .user-mark")
    check(feed_mark.get_attribute("data-verified") == "true" and text_of(feed_mark) == f"{USER} verified",
          f"the feed's mark reads {text_of(feed_mark)!r}")
    signed_mark = c.one(f"#reply-feed tr[data-id='{dana_reply['id']}'] .signature-mark")
    check(signed_mark.get_attribute("data-signature") == "valid" and text_of(signed_mark) == f"signed {dana_key[:8]}…",
          f"the feed's signature mark reads {text_of(signed_mark)!r}")
    c.one("#filter-user").clear()
    c.click("#reply-filters button[type='submit']")
    c.click(f"#reply-feed tr[data-id='{hostile_reply['id']}']", "the unverified reply in the feed")
    c.wait(lambda d: text_of(d.find_element(By.CSS_SELECTOR, "#reply-detail h2 code")) == hostile_reply["id"]
           if d.find_elements(By.CSS_SELECTOR, "#reply-detail h2 code") else False, "the unverified reply's detail")
    detail_mark = c.one("#reply-detail dd.user .user-mark")
    check(detail_mark.get_attribute("data-verified") == "false" and text_of(detail_mark) == f"{HOSTILE_USER} unverified",
          f"the detail's mark reads {text_of(detail_mark)!r}")
    unsigned = c.one("#reply-detail dd.signature .signature-mark")
    check(unsigned.get_attribute("data-signature") == "absent" and text_of(unsigned) == "—", "an unsigned reply shows a dash")
    anonymous = c.one(f"#reply-feed tr[data-id='{accepted['id']}'] .user-mark")
    check(anonymous.get_attribute("data-verified") == "none" and text_of(anonymous) == "—", "a reply without a user shows one")
    check_inert(c, "#page-replies")
    c.check_logs("replies by user")

    # The receipts: the answer's user, verified for dana, unverified for the hostile user.
    c.go("notifications")
    for user_sent, user_reply, user, verified in ((dana_sent, dana_reply, USER, "true"),
                                                  (hostile_sent, hostile_reply, HOSTILE_USER, "false")):
        c.click(f"#notification-list tr[data-id='{user_sent['id']}']", f"the send to {user!r}")
        answer = c.one(f"#notification-detail dl.answer[data-id='{user_reply['id']}']", f"the answer of the send to {user!r}")
        receipt_mark = answer.find_element(By.CSS_SELECTOR, "dd.user .user-mark")
        check(receipt_mark.get_attribute("data-verified") == verified
              and text_of(receipt_mark) == f"{user} {'verified' if verified == 'true' else 'unverified'}",
              f"the receipt's answer's user reads {text_of(receipt_mark)!r}")
        # The key that signed the answer: dana's phone's; the hostile user's answer was not signed.
        signature = answer.find_element(By.CSS_SELECTOR, "dd.signature .signature-mark")
        check(text_of(signature) == (f"signed {dana_key[:8]}…" if verified == "true" else "—")
              and (verified != "true" or signature.find_element(By.CSS_SELECTOR, ".key").get_attribute("title") == dana_key),
              f"the receipt's answer's signature reads {text_of(signature)!r}")
    check_inert(c, "#notification-detail")
    c.check_logs("receipts with users")

    # 9. Every page at desktop and phone width, fitting the phone's width.
    for width, height, label in (DESKTOP + ("desktop",), PHONE + ("phone",)):
        driver.set_window_size(width, height)
        for page, ready in (("overview", ".app-card"), ("replies", "#reply-feed tr[data-id]"),
                            ("notifications", "#notification-list tr[data-id]"),
                            ("users", "#device-groups .device-group"),
                            ("followups", ".followup-row"), ("rules", "#rule-list li[data-id]"),
                            ("categories", ".phone-preview")):
            c.go(page)
            c.one(ready, f"the {page} page's content at {label} width")
            if page == "replies":
                c.click(f"#reply-feed tr[data-id='{accepted['id']}']")
                c.one(f"#reply-detail .followup[data-id='{followup}']")
            if page == "users":
                c.one("#user-id").send_keys(USER)
                c.click("#user-lookup button[type='submit']")
                c.one(f"#user-detail tr.user-reply[data-id='{dana_reply['id']}']")
            if page == "notifications":
                c.click("#notification-more")
                c.click(f"#notification-list tr[data-id='{sent['id']}']")
                c.one(f"#notification-detail dl.answer[data-id='{first['id']}']")
            time.sleep(0.3)
            # Framed from the top of the page, as the others (clicking the row scrolled to the second page).
            c.js("window.scrollTo(0, 0)")
            c.shoot(f"{page}-{label}")
            if page == "notifications" and label == "phone":
                # Below the list at this width: the receipt on its own.
                c.js("arguments[0].scrollIntoView({block: 'start'})", c.one("#notification-detail"))
                c.shoot(f"notification-receipt-{label}")
            overflow = c.js("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
            check(overflow <= 1, f"the {page} page is {overflow}px wider than the {label} screen")
        c.check_logs(f"screenshots at {label} width")

    # 10. A token revoked or mistyped mid-session signs out instead of showing stale data.
    c.allowed_401 = True
    c.js("sessionStorage.setItem('actionhook.adminToken', 'revoked-token')")
    # Not c.go(): the page is gone again as soon as its first call is refused.
    c.js("location.hash = 'rules'")
    c.wait(lambda d: d.find_element(By.ID, "login").is_displayed(), "the sign-in form after a refused token")
    check(c.js("return document.getElementById('page').children.length") == 0, "data stayed on screen after the token was refused")
    c.check_logs("revoked token")
    return len(os.listdir(SHOTS))


def main():
    os.makedirs(SHOTS, exist_ok=True)
    for name in os.listdir(SHOTS):
        if name.endswith(".png"):
            os.remove(os.path.join(SHOTS, name))
    receiver = Receiver("whsec_" + base64.b64encode(secrets.token_bytes(32)).decode(), failures=2)
    driver = None
    try:
        key = seed(receiver)
        driver = browser()
        shots = run(driver, receiver, key)
    except Failure as failure:
        print(f"console-test: FAILED: {failure}", file=sys.stderr)
        return 1
    except WebDriverException as error:
        print(f"console-test: FAILED: the browser: {error.msg}", file=sys.stderr)
        if driver is not None:
            Console(driver).shoot("webdriver-error")
        return 1
    finally:
        if driver is not None:
            driver.quit()
        receiver.stop()
    print(f"console-test: OK: 14 scenarios, {shots} screenshots in {SHOTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
