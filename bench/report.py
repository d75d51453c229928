#!/usr/bin/env python3
"""Turns bench/run.sh's raw measurements into the results JSON, the table and the verdict.

    report.py RAW_DIR [--out FILE] [--latest FILE] [--setting name=value ...] [--partial]
    report.py --median-rps RAW_DIR CONTENDER      prints one contender's median req/s

RAW_DIR holds, per contender NAME and phase (warmup, 1, 2, ...): NAME-PHASE.json (wrk, from
bench/lua/ingest.lua), NAME-PHASE.txt and NAME-PHASE.log.* (pgbench), NAME-PHASE.rss (VmRSS samples),
NAME-PHASE.cpu (CPU seconds of the server and of PostgreSQL in the run) and NAME-PHASE.backlog (follow-ups
made in the run and those not delivered at its end).
Exits 1 when a figure falls short of its goal (or is missing, unless --partial), else 0; the verdict
is the last line printed.
"""

import argparse
import datetime
import glob
import json
import os
import platform
import re
import statistics
import subprocess
import sys

GOALS = {
    "P1": ("ActionHook durable ingest / peer (Hummingbird+PostgresNIO), req/s", ">=", 4.0, "x"),
    "P2": ("ActionHook durable ingest / pgbench writing the same rows, one request per transaction, at 32 clients",
           ">=", 2.0, "x"),
    "P2b": ("ActionHook durable ingest / C reference on libmicrohttpd + libpq with group commit (same rows)", ">=",
            0.8, "x"),
    "P2-mixed": ("as P2, 1 reply in 4 with a follow-up (ActionHook mixed / pgbench-p2-mixed)", ">=", 2.0, "x"),
    "P2b-mixed": ("as P2b, 1 reply in 4 with a follow-up (ActionHook mixed / C reference mixed)", ">=", 0.8, "x"),
    "P11-ingest": ("ActionHook durable ingest with identity required (a verified user token per request, one user "
                   "per connection) / the same with identity off", ">=", 0.9, "x"),
    "P11-signed": ("ActionHook durable ingest with every reply signed by its device and verified / the same unsigned",
                   ">=", 0.8, "x"),
    "P13": ("the real mix: ActionHook with 1 reply in 4 making a webhook that its worker delivers meanwhile / "
            "replies making no follow-up, same server, runs alternating (the backlog flat)", ">=", 0.8, "x"),
    "P3": ("ActionHook validation-only (422 before the database) / bare C libmicrohttpd", ">=", 0.8, "x"),
    "P4-half": ("ActionHook p99 latency at half of peak load", "<=", 5.0, "ms"),
    "P4-peak": ("ActionHook p99 latency at peak load", "<=", 25.0, "ms"),
    "P5-peak": ("ActionHook peak RSS under load", "<=", 64.0, "MiB"),
    "P5-drift": ("ActionHook RSS drift over the soak at peak load (BENCH_SOAK seconds)", "<=", 5.0, "MiB"),
}

ORDER = [
    ("bare", "bare C libmicrohttpd, 202 without work"),
    ("pgbench-response", "pgbench: 1 response/transaction"),
    ("pgbench-response-followup", "pgbench: response + follow-up/transaction"),
    ("pgbench-p2", "pgbench: response + follow-up/transaction (P2 clients)"),
    ("pgbench-p2-mixed", "pgbench: response, 1 in 4 + follow-up (P2 clients)"),
    ("peer", "peer: Hummingbird 2 + PostgresNIO"),
    ("reference", "C reference: libmicrohttpd + libpq, group commit"),
    ("reference-mixed", "C reference, 1 reply in 4 with a follow-up"),
    ("actionhook", "ActionHook: durable ingest"),
    ("actionhook-identity", "ActionHook: durable ingest, identity required"),
    ("actionhook-signed", "ActionHook: durable ingest, every reply signed and verified"),
    ("actionhook-mixed", "ActionHook, 1 reply in 4 with a follow-up"),
    ("actionhook-plain", "ActionHook, worker on: replies with no follow-up"),
    ("actionhook-delivering", "ActionHook, worker on: 1 in 4 with a webhook, delivered"),
    ("actionhook-reject", "ActionHook: 422 before the database"),
    ("actionhook-unauthorized", "ActionHook: 401 without a key (HTTP layer)"),
    ("actionhook-half", "ActionHook: paced at half of peak"),
    ("actionhook-soak", "ActionHook: durable ingest, one long run (soak)"),
]

REFERENCE = {
    "peer": "pgbench-response-followup",
    "reference": "pgbench-p2",
    "reference-mixed": "pgbench-p2-mixed",
    "actionhook": "peer",
    "actionhook-reject": "bare",
    "actionhook-unauthorized": "bare",
    "actionhook-identity": "actionhook",
    "actionhook-signed": "actionhook",
    "actionhook-delivering": "actionhook-plain",
}


def phases(raw, name):
    found = set()
    for path in glob.glob(os.path.join(raw, f"{name}-*")):
        match = re.match(re.escape(name) + r"-(\d+)\.(json|txt)$", os.path.basename(path))
        if match:
            found.add(int(match.group(1)))
    return sorted(found)


def percentile(sorted_values, fraction):
    if not sorted_values:
        return None
    index = min(len(sorted_values) - 1, max(0, int(round(fraction * len(sorted_values) + 0.5)) - 1))
    return sorted_values[index]


def read_run(raw, name, phase):
    """One measured run: requests/s with the expected status, latencies (ms) and errors."""
    wrk = os.path.join(raw, f"{name}-{phase}.json")
    if os.path.exists(wrk):
        with open(wrk) as handle:
            data = json.load(handle)
        return {
            "rps": data["good_rps"],
            "all_rps": data["rps"],
            "p50_ms": data["p50_ms"],
            "p99_ms": data["p99_ms"],
            "max_ms": data["max_ms"],
            "requests": data["requests"],
            "errors": data["unexpected_status"] + data["socket_errors"],
            "statuses": data["statuses"],
            **read_cpu(raw, name, phase, data["requests"]),
            **read_backlog(raw, name, phase),
        }
    text_path = os.path.join(raw, f"{name}-{phase}.txt")
    with open(text_path) as handle:
        text = handle.read()
    tps = re.search(r"^tps = ([0-9.]+)", text, re.M)
    failed = re.search(r"number of failed transactions: (\d+)", text)
    processed = re.search(r"number of transactions actually processed: (\d+)", text)
    latencies = []
    for log in glob.glob(os.path.join(raw, f"{name}-{phase}.log.*")):
        with open(log) as handle:
            for line in handle:
                fields = line.split()
                if len(fields) >= 3:
                    latencies.append(int(fields[2]) / 1000.0)
    latencies.sort()
    return {
        "rps": float(tps.group(1)) if tps else 0.0,
        "p50_ms": percentile(latencies, 0.50),
        "p99_ms": percentile(latencies, 0.99),
        "max_ms": latencies[-1] if latencies else None,
        "requests": int(processed.group(1)) if processed else None,
        "errors": int(failed.group(1)) if failed else 0,
        "latency_samples": len(latencies),
    }


def read_cpu(raw, name, phase, requests):
    """The server's and PostgreSQL's CPU per request (µs) in one run, when it was recorded."""
    path = os.path.join(raw, f"{name}-{phase}.cpu")
    if not os.path.exists(path) or not requests:
        return {}
    with open(path) as handle:
        server, postgres = (float(field) for field in handle.read().split())
    return {"server_us_per_request": server * 1e6 / requests, "postgres_us_per_request": postgres * 1e6 / requests}


def read_backlog(raw, name, phase):
    """The follow-ups a run made and those not yet delivered at its end, when they were recorded."""
    path = os.path.join(raw, f"{name}-{phase}.backlog")
    if not os.path.exists(path):
        return {}
    with open(path) as handle:
        made, backlog = (int(field) for field in handle.read().split())
    return {"followups_made": made, "backlog": backlog}


def read_rss(raw, name, measured):
    """Peak over every phase, and drift from the start of the first measured run to the end of the last."""
    def samples(phase):
        path = os.path.join(raw, f"{name}-{phase}.rss")
        if not os.path.exists(path):
            return []
        with open(path) as handle:
            return [int(line.split()[1]) / 1024.0 for line in handle if len(line.split()) == 2]

    every = samples("warmup") + [value for phase in measured for value in samples(phase)]
    if not every:
        return None
    first = samples(measured[0]) if measured else []
    last = samples(measured[-1]) if measured else []
    drift = None
    if first and last:
        window = max(1, min(10, len(first) // 4, len(last) // 4))
        drift = statistics.median(last[-window:]) - statistics.median(first[:window])
    return {"peak_mib": max(every), "drift_mib": drift, "samples": len(every)}


def contender(raw, name):
    measured = phases(raw, name)
    if not measured:
        return None
    run_list = [read_run(raw, name, phase) for phase in measured]

    def median(key):
        values = [run[key] for run in run_list if run.get(key) is not None]
        return statistics.median(values) if values else None

    result = {
        "runs": run_list,
        "rps": median("rps"),
        "p50_ms": median("p50_ms"),
        "p99_ms": median("p99_ms"),
        "errors": sum(run["errors"] or 0 for run in run_list),
        "server_us_per_request": median("server_us_per_request"),
        "postgres_us_per_request": median("postgres_us_per_request"),
        "backlog": max((run["backlog"] for run in run_list if "backlog" in run), default=None),
        "rss": read_rss(raw, name, measured),
    }
    rate_file = os.path.join(raw, f"{name}.rate")
    if os.path.exists(rate_file):
        with open(rate_file) as handle:
            result["target_rps"] = float(handle.read().strip())
    return result


def machine():
    info = {"kernel": platform.release(), "cores": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as handle:
            model = re.search(r"^model name\s*:\s*(.+)$", handle.read(), re.M)
            info["cpu"] = model.group(1) if model else None
        with open("/proc/meminfo") as handle:
            total = re.search(r"^MemTotal:\s*(\d+)", handle.read(), re.M)
            info["memory_gib"] = round(int(total.group(1)) / 1024 / 1024, 1) if total else None
        info["load_average_at_end"] = os.getloadavg()
    except OSError:
        pass
    for key, command in (("swift", ["swift", "--version"]), ("wrk", ["wrk", "--version"])):
        try:
            out = subprocess.run(command, capture_output=True, text=True, timeout=20)
            info[key] = (out.stdout + out.stderr).strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            info[key] = None
    return info


def figure(key, value):
    _, op, goal, _ = GOALS[key]
    if value is None:
        return {"value": None, "goal": goal, "op": op, "pass": None}
    passed = value >= goal if op == ">=" else value <= goal
    return {"value": round(value, 4), "goal": goal, "op": op, "pass": passed}


def fmt(value, digits=1, suffix=""):
    if value is None:
        return "-"
    return f"{value:,.{digits}f}{suffix}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("raw")
    parser.add_argument("name", nargs="?")
    parser.add_argument("--median-rps", action="store_true")
    parser.add_argument("--out")
    parser.add_argument("--latest")
    parser.add_argument("--setting", action="append", default=[])
    parser.add_argument("--partial", action="store_true")
    args = parser.parse_args()

    if args.median_rps:
        result = contender(args.raw, args.name)
        print(f"{result['rps']:.1f}" if result else "0")
        return 0

    # The peer's pool sweep (peer-poolN), smallest pool first, just before "peer" (a copy of the best).
    pools = sorted({int(m.group(1)) for path in glob.glob(os.path.join(args.raw, "peer-pool*-*"))
                    if (m := re.match(r"peer-pool(\d+)-", os.path.basename(path)))})
    order = []
    for name, label in ORDER:
        if name == "peer":
            order += [(f"peer-pool{pool}", f"peer, pool {pool}") for pool in pools]
            best = None
            if os.path.exists(os.path.join(args.raw, "peer.pool")):
                with open(os.path.join(args.raw, "peer.pool")) as handle:
                    best = handle.read().strip()
            label = f"{label} (best: pool {best})" if best else label
        order.append((name, label))

    results = {name: contender(args.raw, name) for name, _ in order}
    results = {name: value for name, value in results.items() if value is not None}

    def get(name, key):
        return results.get(name, {}).get(key)

    def ratio(a, b):
        x, y = get(a, "rps"), get(b, "rps")
        return x / y if x is not None and y else None

    # Drift is read over the soak (one long run); without one, over the durable runs.
    rss = (results.get("actionhook-soak") or results.get("actionhook") or {}).get("rss") or {}
    rss_all = [results[name]["rss"] for name in ("actionhook", "actionhook-reject", "actionhook-half", "actionhook-soak")
               if name in results and results[name]["rss"]]
    figures = {
        "P1": figure("P1", ratio("actionhook", "peer")),
        "P2": figure("P2", ratio("actionhook", "pgbench-p2")),
        "P2b": figure("P2b", ratio("actionhook", "reference")),
        "P2-mixed": figure("P2-mixed", ratio("actionhook-mixed", "pgbench-p2-mixed")),
        "P2b-mixed": figure("P2b-mixed", ratio("actionhook-mixed", "reference-mixed")),
        "P11-ingest": figure("P11-ingest", ratio("actionhook-identity", "actionhook")),
        "P11-signed": figure("P11-signed", ratio("actionhook-signed", "actionhook")),
        "P13": figure("P13", ratio("actionhook-delivering", "actionhook-plain")),
        "P3": figure("P3", ratio("actionhook-reject", "bare")),
        "P4-half": figure("P4-half", get("actionhook-half", "p99_ms")),
        "P4-peak": figure("P4-peak", get("actionhook", "p99_ms")),
        "P5-peak": figure("P5-peak", max((r["peak_mib"] for r in rss_all), default=None)),
        "P5-drift": figure("P5-drift", rss.get("drift_mib")),
    }

    settings = dict(item.split("=", 1) for item in args.setting)
    # The share of the CPU other processes used in the second before each contender started.
    busy = {}
    busy_path = os.path.join(args.raw, "busy.txt")
    if os.path.exists(busy_path):
        with open(busy_path) as handle:
            for line in handle:
                fields = line.split()
                if len(fields) == 2:
                    busy[fields[0]] = float(fields[1])
    document = {
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "settings": settings,
        "machine": machine(),
        "contenders": results,
        "cpu_busy_percent_before_start": busy,
        "figures": figures,
    }

    # The table.
    lines = []
    header = (f"{'contender':<48} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'peak RSS':>9} {'errors':>7} "
              f"{'srv µs':>7} {'pg µs':>7}  vs reference")
    lines.append(header)
    lines.append("-" * len(header))
    for name, label in order:
        if name not in results:
            continue
        result = results[name]
        peak = result["rss"]["peak_mib"] if result["rss"] else None
        note = ""
        if name.startswith("peer-pool") and ratio(name, "peer") is not None:
            note = f"{ratio(name, 'peer'):.2f}x the best pool"
        if name in REFERENCE and ratio(name, REFERENCE[name]) is not None:
            note = f"{ratio(name, REFERENCE[name]):.2f}x {REFERENCE[name]}"
        if name == "actionhook" and ratio("actionhook", "pgbench-p2") is not None:
            note += f", {ratio('actionhook', 'pgbench-p2'):.2f}x pgbench-p2"
        if name == "actionhook" and ratio("actionhook", "reference") is not None:
            note += f", {ratio('actionhook', 'reference'):.2f}x reference"
        if name == "actionhook-mixed":
            note = ", ".join(f"{ratio(name, other):.2f}x {other}" for other in ("pgbench-p2-mixed", "reference-mixed")
                             if ratio(name, other) is not None)
        if "target_rps" in result:
            note = f"target {result['target_rps']:,.0f} req/s"
        if name == "actionhook-soak" and result["rss"] and result["rss"]["drift_mib"] is not None:
            note = f"RSS drift {result['rss']['drift_mib']:+.1f} MiB"
        if result.get("backlog") is not None:
            note += f", backlog at most {result['backlog']:,}"
        lines.append(
            f"{label:<48} {fmt(result['rps'], 0):>10} {fmt(result['p50_ms'], 2):>8} {fmt(result['p99_ms'], 2):>8} "
            f"{fmt(peak, 1, ' MiB'):>9} {result['errors']:>7} {fmt(result['server_us_per_request'], 0):>7} "
            f"{fmt(result['postgres_us_per_request'], 0):>7}  {note}")
    busiest = max(busy.items(), key=lambda item: item[1], default=None)
    if busiest and busiest[1] > 25:
        lines.append(f"note: other processes used {busiest[1]:.0f} % of the CPU just before {busiest[0]} started, "
                     "so absolute figures are low and noisy")
    lines.append("")
    failing = []
    for key, (text, op, goal, unit) in GOALS.items():
        entry = figures[key]
        if entry["pass"] is None:
            verdict = "n/a" if args.partial else "MISSING"
            if not args.partial:
                failing.append(key)
        else:
            verdict = "PASS" if entry["pass"] else "FAIL"
            if not entry["pass"]:
                failing.append(key)
        value = "-" if entry["value"] is None else f"{entry['value']:.2f}{unit}"
        target = f"{op} {goal:g}{unit}"
        lines.append(f"{key:<9} {value:>10}  goal {target:<9} {verdict:<7} {text}")
    print("\n".join(lines))

    document["verdict"] = "FAIL" if failing else "PASS"
    document["failing"] = failing
    for path in (args.out, args.latest):
        if path:
            with open(path, "w") as handle:
                json.dump(document, handle, indent=2)
                handle.write("\n")

    summary = " ".join(
        f"{key}={fmt(figures[key]['value'], 2)}"
        for key in ("P1", "P2", "P2b", "P2-mixed", "P2b-mixed", "P11-ingest", "P11-signed", "P13", "P3", "P4-half", "P4-peak", "P5-peak", "P5-drift"))
    if failing:
        print(f"bench: FAIL ({', '.join(failing)}) {summary}")
        return 1
    print(f"bench: PASS {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
