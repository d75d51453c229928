# Developer entry points; each target is a thin wrapper over scripts/ so CI and people run the same steps.
SHELL := /bin/bash
.DEFAULT_GOAL := help

SWIFT_FORMAT_PATHS := Sources Tests Package.swift
DEV_PG_DIR := .local/pg

.PHONY: help run test build format lint stop-db clean-db bench bench-delivery faults compose-check

help: ## List the targets
	@awk 'BEGIN { FS = ":.*## " } /^[a-z-]+:.*## / { printf "  make %-10s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

run: ## Install what is missing, build, start the local PostgreSQL (.local/pg) and serve on :8080
	bash scripts/run.sh

test: ## The whole suite with a throwaway PostgreSQL, as CI runs it
	bash scripts/test.sh

build: ## Install what is missing and build (debug)
	bash scripts/install-deps.sh
	swift build

bench: ## Benchmark ActionHook against its references (quality.md P1-P5); see bench/RESULTS.md
	bash bench/run.sh

bench-delivery: ## Webhook and APNs drains, backlog under ingest load, snooze lateness, with their references (P6, P7)
	bash bench/delivery.sh

faults: ## The reliability faults R1-R10 and the slow-client attack F3 at full size (bench/faults.sh)
	bash bench/faults.sh

compose-check: ## docker-compose up --build for real (podman), then health, one reply and its signed webhook; about 20 min, root
	bash scripts/compose-check.sh

format: ## Format the Swift sources in place
	swift format -i -r $(SWIFT_FORMAT_PATHS)

lint: ## Check formatting; fails on any finding
	swift format lint -r -s $(SWIFT_FORMAT_PATHS)

stop-db: ## Stop the local PostgreSQL, keeping its data
	bash scripts/pg-local.sh stop $(DEV_PG_DIR)

clean-db: ## Stop the local PostgreSQL and delete its data
	bash scripts/pg-local.sh destroy $(DEV_PG_DIR)
