# Developer entry points; each target is a thin wrapper over scripts/ so CI and people run the same steps.
SHELL := /bin/bash
.DEFAULT_GOAL := help

SWIFT_FORMAT_PATHS := Sources Tests Package.swift
DEV_PG_DIR := .local/pg

.PHONY: help run test test-stress build format lint stop-db clean-db bench bench-migrate bench-delivery bench-client faults failover compose-check

help: ## List the targets
	@awk 'BEGIN { FS = ":.*## " } /^[a-z-]+:.*## / { printf "  make %-10s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

run: ## Install what is missing, build, start the local PostgreSQL (.local/pg) and serve on :8080
	bash scripts/run.sh

test: ## The whole suite with a throwaway PostgreSQL (CI runs it as test-stress does)
	bash scripts/test.sh

test-stress: ## The whole suite with two CPU hogs (stress-ng --cpu 2) beside `swift test`, as on a busy laptop
	ACTIONHOOK_TEST_STRESS=1 bash scripts/test.sh

build: ## Install what is missing and build (debug)
	bash scripts/install-deps.sh
	swift build

bench: ## Benchmark ActionHook against its references (quality.md P1-P5, P2b); see bench/RESULTS.md
	bash bench/run.sh

bench-migrate: ## Time `actionhook migrate` turning 5 million replies of the previous schema into partitions
	bash bench/migrate.sh

bench-delivery: ## Idle cost, webhook and APNs drains, backlog under ingest load, snooze lateness, with their references (P6-P8)
	bash bench/delivery.sh

bench-client: ## ActionHookKit's queue: forward at depth 1,000 vs 0, draining 1,000 replies on loopback (P9)
	cd Clients/swift && swift run -c release ActionHookKitBenchmark

faults: ## The reliability faults R1-R10 and the slow-client attack F3 at full size (bench/faults.sh)
	bash bench/faults.sh

failover: ## R14: failovers of a Patroni cluster (3 nodes, etcd) under load, two instances; figures in bench/RESULTS.md (bench/failover.sh)
	bash bench/failover.sh

compose-check: ## docker-compose up --build for real (podman), then health, one reply and its signed webhook; about 20 min, root
	bash scripts/compose-check.sh

format: ## Format the Swift sources and the console's JavaScript in place
	swift format -i -r $(SWIFT_FORMAT_PATHS)
	@test -x .build-tools/venv/bin/js-beautify || bash scripts/install-deps.sh --ci >/dev/null
	.build-tools/venv/bin/js-beautify $$(cat scripts/js-beautify.options) -r Sources/ActionHookConsole/Assets/*.js

lint: ## Formatting (swift format, js-beautify), the JavaScript linter (oxlint) and shellcheck; fails on any finding, as CI does
	bash scripts/check-format.sh
	bash scripts/check-javascript.sh
	bash scripts/check-shell.sh

stop-db: ## Stop the local PostgreSQL, keeping its data
	bash scripts/pg-local.sh stop $(DEV_PG_DIR)

clean-db: ## Stop the local PostgreSQL and delete its data
	bash scripts/pg-local.sh destroy $(DEV_PG_DIR)
