# The front door. `make help` lists the targets.
SHELL := bash
GO ?= go
RIG := $(GO) run ./cmd/rig

.DEFAULT_GOAL := help

help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  %-12s %s\n",$$1,$$2}'

# The Go suites run verbose into .rig/test.log, as many packages at a time
# as the machine has cores (go test's default -p): no test asserts on
# wall-clock time, and the integration suite passes beside the store suite's
# 100,000-record load and the simulator's sweep (it ran at one package at a
# time until issue 30 made its tests robust to a busy machine). The console shows every
# test's verdict (so it is plain which contract suites ran, on which store)
# and, when something fails, every failing test's own output, panics and
# build errors (scripts/failures.awk), whatever their text. ElasticMQ serves SQS;
# moto runs beside it for the queue contract suite alone (a few seconds), so
# the one suite shows how both emulators depart from SQS.
test: ## every test: Go suites on DynamoDB Local + ElasticMQ (queue contract on moto too), CDK assertions, the examples, cfn-lint, vet, and the deploy-and-run on MiniStack and on LocalStack (with the contract suites on LocalStack) (all installed and started for you)
	@mkdir -p .rig
	@set -o pipefail; SAS_RIG_SQS=elasticmq,moto $(RIG) exec -- $(GO) test -count=1 -race -v -timeout 30m ./... > .rig/test.log 2>&1; rc=$$?; \
		grep -E '^rig:|^\s*--- (PASS|FAIL|SKIP)|^(ok|FAIL|panic:)|^\s+[a-z_]+\.go:[0-9]+: (sweep over|loaded|[0-9]+ rounds)' .rig/test.log; \
		if [ $$rc -ne 0 ]; then echo; echo "== failures (full log: .rig/test.log) =="; awk -f scripts/failures.awk .rig/test.log | head -3000; exit $$rc; fi
	$(MAKE) test-infra
	$(MAKE) test-examples
	$(MAKE) vet
	$(MAKE) e2e
	$(MAKE) test-localstack

test-unit: ## tests that need no emulator (fast)
	SAS_NO_EMULATORS=1 $(GO) test -count=1 ./...
	cd examples/travel && $(GO) test -count=1 ./...
	cd examples/greet && $(GO) test -count=1 ./...
	cd examples/expense && $(GO) test -count=1 ./...
	cd examples/checkout && $(GO) test -count=1 ./...
	cd examples/expense-choice && $(GO) test -count=1 ./...
	cd examples/cancellation && $(GO) test -count=1 ./...
	cd examples/timer && $(GO) test -count=1 ./...
	cd examples/start-delay && $(GO) test -count=1 ./...
	cd examples/stock && $(GO) test -count=1 ./...
	cd examples/cron && $(GO) test -count=1 .

# Each example is a Go module of its own, which ./... here does not reach.
# Its test target builds the bootstraps its CDK synth test needs (the
# example's agents, and the SAS ones with `make build`) before testing.
test-examples: ## the examples' tests (examples/travel, examples/greet, the README's tutorial, examples/expense (a callback step), examples/checkout (a callback step whose agent hands out the token), examples/expense-choice (a choice), examples/cancellation (a cancel mid-run), examples/timer (a wait step), examples/start-delay (startAt), examples/stock (a fan-out over line items) and examples/cron (a schedule), each its own module), travel's and cron's CDK synth included
	$(MAKE) -C examples/travel test
	cd examples/greet && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd examples/expense && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd examples/checkout && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd examples/expense-choice && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd examples/cancellation && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd examples/timer && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd examples/start-delay && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd examples/stock && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd examples/cron && $(GO) vet ./... && $(SYNTH_ENV) $(GO) test -count=1 ./...

# staticcheck is pinned; the module proxy here serves v0.7.0 (2026.1).
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.7.0

vet: ## go vet, gofmt and staticcheck (pinned)
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(STATICCHECK) ./...
	cd examples/travel && $(GO) vet ./... && $(STATICCHECK) ./...
	cd examples/greet && $(GO) vet ./... && $(STATICCHECK) ./...
	cd examples/expense && $(GO) vet ./... && $(STATICCHECK) ./...
	cd examples/checkout && $(GO) vet ./... && $(STATICCHECK) ./...
	cd examples/expense-choice && $(GO) vet ./... && $(STATICCHECK) ./...
	cd examples/cancellation && $(GO) vet ./... && $(STATICCHECK) ./...
	cd examples/timer && $(GO) vet ./... && $(STATICCHECK) ./...
	cd examples/start-delay && $(GO) vet ./... && $(STATICCHECK) ./...
	cd examples/stock && $(GO) vet ./... && $(STATICCHECK) ./...
	cd examples/cron && $(GO) vet ./... && $(STATICCHECK) ./...

# The dev server (docs/dev.md): the example's workflows and agents when
# examples/travel is there, else the reference workflows with the built-in
# HTTP agent. DEV_ARGS='-workflows FILE -agent NAME=DIR' runs yours. Built,
# then exec'd rather than `go run`: the server is then make's own child, and
# its exit status (0 on Ctrl-C) is what make sees.
DEV_ARGS ?=
dev: ## the whole system on local emulators with your workflows and agent programs, until Ctrl-C: exports for sasctl and the aws CLI, a line per order (docs/dev.md; DEV_ARGS='-workflows FILE -agent NAME=DIR')
	@mkdir -p .rig
	@$(GO) build -o .rig/sasdev ./cmd/sasdev
	@exec .rig/sasdev $(DEV_ARGS)

# The protocol simulator (docs/simulation.md): SEEDS seeds from FROM,
# without the race detector, each on its own fault mix (swarm testing);
# make test runs a smaller sweep of the same seeds. sim-deep is the sweep on
# demand: every seed issue 29 named, and more.
SEEDS ?= 10000
FROM ?= 1
sim: ## the seeded whole-protocol simulator over SEEDS seeds from FROM (default 10000 from 1); a failing seed prints the command that replays it
	$(GO) run ./cmd/sassim -seeds $(SEEDS) -from $(FROM)

DEEP_SEEDS ?= 70000
sim-deep: ## the simulator's deep sweep: seeds 1..DEEP_SEEDS (default 70000; about 7 times make sim's time), every failure reported
	$(GO) run ./cmd/sassim -seeds $(DEEP_SEEDS) -from 1 -keep 100 -trace 40

ORDERS ?= 300
MIN_PROCESSED ?= 0.97
run: ## the whole system end to end on local emulators, faults on, judged against the faults injected (ORDERS=300, MIN_PROCESSED=0.97)
	$(GO) run ./cmd/sasrun -orders $(ORDERS) -min-processed $(MIN_PROCESSED)

# --- Lambda build and infrastructure (infra/ is its own Go module) ---
# ARCH is the Lambda architecture: arm64 (what AWS runs) or x86_64 (emulators
# that run the bootstrap on an x86 host). Bootstraps land in
# dist/<GOARCH>/<function>/bootstrap, where the CDK app picks them up.
# Deploying to an endpoint (below), the default is the host's: MiniStack runs
# the bootstraps as host processes.
HOST_ARCH := $(if $(filter aarch64 arm64,$(shell uname -m)),arm64,x86_64)
ARCH ?= $(if $(ENDPOINT),$(HOST_ARCH),arm64)
LAMBDA_GOARCH_arm64 := arm64
LAMBDA_GOARCH_x86_64 := amd64
LAMBDA_GOARCH_amd64 := amd64
LAMBDA_GOARCH = $(or $(LAMBDA_GOARCH_$(ARCH)),$(error ARCH=$(ARCH): want arm64 or x86_64))
FUNCTIONS := scheduler agent supervisor
# Extra CDK arguments, e.g. CDK_ARGS='-c allowedReplyQueues=arn:aws:sqs:eu-west-1:123456789012:replies-*'
CDK_ARGS ?=
# No version check or notices (both go to the network). jsii warns on every
# start that Node 20 is past its support date; CDK still works on it, and
# docs/deploy.md asks for Node 22+ (the silence names only version 20).
CDK_ENV := CDK_DISABLE_VERSION_CHECK=1 JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20
# Synth needs no credentials: skip the instance-metadata probe, and skip
# aws-cdk-lib's built-in template validation (about 30 s of WASM per synth
# here) because lint-infra runs cfn-lint on the same template.
SYNTH_ENV := $(CDK_ENV) AWS_EC2_METADATA_DISABLED=true CDK_VALIDATION=false

build: ## cross-compile the Lambda bootstraps (ARCH=arm64|x86_64)
	@for f in $(FUNCTIONS); do \
		echo "build dist/$(LAMBDA_GOARCH)/$$f/bootstrap"; \
		GOOS=linux GOARCH=$(LAMBDA_GOARCH) CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' \
			-o dist/$(LAMBDA_GOARCH)/$$f/bootstrap ./functions/$$f || exit 1; \
	done

# The CDK CLI is pinned in infra/package-lock.json; npm ci runs once per lock change.
infra/node_modules/.package-lock.json: infra/package-lock.json
	cd infra && npm ci --no-audit --no-fund

# Each synth starts from an empty cdk.out: CDK never prunes it, so old asset
# directories pile up and a stale validation-report.json (written only when
# there is something to report) would be shown again by the CLI.
synth: build infra/node_modules/.package-lock.json ## cdk synth to infra/cdk.out, offline (ARCH=, CDK_ARGS=)
	rm -rf infra/cdk.out
	cd infra && $(SYNTH_ENV) npx --no-install cdk synth --quiet --no-notices -c arch=$(ARCH) $(CDK_ARGS)

# ENDPOINT deploys to an emulator instead of AWS (MiniStack from make
# emulator: ENDPOINT=http://127.0.0.1:4566, or the AWS_ENDPOINT_URL its export
# lines set). Then the CLI gets dummy credentials and the emulator's account
# and region, never your AWS profile; the stack is synthesized once,
# bootstrapped (the emulator forgets it on every restart) and deployed
# without asking about IAM changes (nothing enforces them there). Its
# built-in agents may call http:// services (allowHttp=true): on AWS they
# call https:// only.
ENDPOINT ?= $(AWS_ENDPOINT_URL)
EMULATOR_ACCOUNT ?= 000000000000
EMULATOR_REGION ?= us-east-1
ifneq ($(ENDPOINT),)
deploy: export AWS_ENDPOINT_URL := $(ENDPOINT)
deploy: export AWS_ACCESS_KEY_ID := test
deploy: export AWS_SECRET_ACCESS_KEY := test
deploy: export AWS_SESSION_TOKEN :=
deploy: export AWS_PROFILE :=
deploy: export AWS_REGION := $(EMULATOR_REGION)
deploy: export AWS_DEFAULT_REGION := $(EMULATOR_REGION)
deploy: export AWS_CONFIG_FILE := /dev/null
deploy: export AWS_SHARED_CREDENTIALS_FILE := /dev/null
endif
# The stack outputs of the last deploy, which make env turns into SAS_* lines.
OUTPUTS := infra/outputs.json

deploy: build infra/node_modules/.package-lock.json ## build and cdk deploy to AWS with your credentials, or to ENDPOINT= (an emulator); writes infra/outputs.json and prints the SAS_* export lines (docs/deploy.md)
	rm -rf infra/cdk.out $(OUTPUTS)
ifeq ($(ENDPOINT),)
	cd infra && $(CDK_ENV) npx --no-install cdk deploy --no-notices --outputs-file outputs.json -c arch=$(ARCH) $(CDK_ARGS)
else
	@echo "deploy: to $(ENDPOINT) (account $(EMULATOR_ACCOUNT), $(EMULATOR_REGION)), not to AWS; ARCH=$(ARCH)"
	cd infra && $(SYNTH_ENV) npx --no-install cdk synth --quiet --no-notices -c arch=$(ARCH) -c allowHttp=true $(CDK_ARGS)
	cd infra && $(CDK_ENV) npx --no-install cdk bootstrap --no-notices --app cdk.out aws://$(EMULATOR_ACCOUNT)/$(EMULATOR_REGION)
	cd infra && $(CDK_ENV) npx --no-install cdk deploy --no-notices --app cdk.out --require-approval never --outputs-file outputs.json SasStack
endif
	@echo '# the stack'"'"'s variables, from $(OUTPUTS); eval "$$(make -s env)" sets them in your shell:'
	@$(GO) run ./cmd/sasctl -outputs $(OUTPUTS) env

env: ## print the SAS_* export lines of the last make deploy (infra/outputs.json), or of STACK=<name> from CloudFormation
	@$(GO) run ./cmd/sasctl $(if $(STACK),-stack $(STACK),-outputs $(OUTPUTS)) env

test-infra: ## CDK assertion tests (the app and the sascdk construct) and cfn-lint on the synthesized templates
	cd infra && $(SYNTH_ENV) $(GO) test -count=1 ./...
	$(MAKE) lint-infra

# The multi-agent template lint-infra checks besides the default one: the
# built-in HTTP agent three times (two with a priority lane) and the
# workflow file naming them, schedules and a tenant, through the app's own
# context keys.
MULTI_AGENT_ARGS := -c workflowsFile=../workflow/testdata/travel.json \
	-c agents='{"airline":{"url":"https://airline.example.com","concurrency":5,"priorityConcurrency":2},"hotels":{"url":"https://hotels.example.com"},"payments":{"url":"https://payments.example.com","priorityConcurrency":2}}' \
	-c schedules='[{"name":"nightly","expression":"cron(0 2 * * ? *)","timeZone":"Europe/Paris","flexibleWindowMinutes":15,"workflow":"trip","payload":{"amount":1},"overlap":"skip"},{"name":"hourly","expression":"rate(1 hour)","workflow":"trip"}]' \
	-c tenants='[{"name":"acme","senderIds":["AROAACMESUBMIT1"],"replyQueueArns":["arn:aws:sqs:eu-west-1:123456789012:acme-status"]}]'

lint-infra: synth ## go vet the CDK app and construct, and cfn-lint the default, a multi-agent (with schedules) and a nested-agent-stacks template (pinned, own venv)
	cd infra && $(GO) vet ./... && out=$$(gofmt -l *.go sascdk) && if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	cd infra && $(SYNTH_ENV) npx --no-install cdk synth --quiet --no-notices --output cdk.out/multi -c arch=$(ARCH) $(MULTI_AGENT_ARGS)
	cd infra && $(SYNTH_ENV) npx --no-install cdk synth --quiet --no-notices --output cdk.out/nested -c arch=$(ARCH) -c nestedAgentStacks=true $(MULTI_AGENT_ARGS)
	infra/scripts/cfn-lint.sh infra/cdk.out/*.template.json infra/cdk.out/multi/*.template.json infra/cdk.out/nested/*.template.json

# MiniStack runs the bootstraps as host processes: build for the host.
E2E_ARCH := $(HOST_ARCH)
# The agents of the e2e suite's scale test (TestManyAgents).
E2E_AGENTS ?= 30

# The emulator a newcomer deploys to by hand (docs/deploy.md): the same
# pinned MiniStack as make e2e, on a fixed port, until Ctrl-C.
EMULATOR_PORT ?= 4566
emulator: ## start MiniStack on 127.0.0.1:4566 (EMULATOR_PORT=), print its export lines, run until Ctrl-C (docs/deploy.md)
	$(RIG) ministack -port $(EMULATOR_PORT)
e2e: infra/node_modules/.package-lock.json ## deploy the stack and the travel example to MiniStack (installed, started and stopped for you) and run orders through both
	$(MAKE) build ARCH=$(E2E_ARCH)
	$(MAKE) -C examples/travel build ARCH=$(E2E_ARCH)
	SAS_E2E_AGENTS=$(E2E_AGENTS) $(CDK_ENV) $(GO) test -tags e2e -count=1 -v -timeout 20m ./e2e

# The scale check alone (docs/deploy.md, "A hundred agents"): E2E_AGENTS
# built-in agents, each with a priority lane and in a nested stack of its
# own, on MiniStack, one order through every one. make e2e runs it with 30
# (about 20 s); E2E_AGENTS=100 make e2e-scale for more.
e2e-scale: infra/node_modules/.package-lock.json ## deploy E2E_AGENTS (30) agents with lanes in nested stacks to MiniStack and run one order through every one (make e2e runs it too)
	$(MAKE) build ARCH=$(E2E_ARCH)
	SAS_E2E_AGENTS=$(E2E_AGENTS) $(CDK_ENV) $(GO) test -tags e2e -count=1 -v -timeout 20m -run 'TestManyAgents$$' ./e2e

# The same deploy-and-run suite on LocalStack (localstack-core from PyPI on
# the host, no Docker): its Lambda functions run as host processes through
# our executor (localstack/README.md), so the bootstraps are built for the
# host as for MiniStack.
e2e-localstack: infra/node_modules/.package-lock.json ## the e2e suite on LocalStack (installed, started and stopped for you; its Lambda functions run as host processes, localstack/README.md)
	$(MAKE) build ARCH=$(E2E_ARCH)
	$(MAKE) -C examples/travel build ARCH=$(E2E_ARCH)
	SAS_E2E_EMULATOR=localstack $(CDK_ENV) $(GO) test -tags e2e -count=1 -v -timeout 20m ./e2e

# The queue and store contract suites on LocalStack's SQS and DynamoDB (its
# DynamoDB is the rig's DynamoDB Local behind LocalStack's proxy). The
# sweep-cost test's big table is 10,000 records here: loading 100,000
# through the proxy takes over 4 minutes.
contract-localstack: ## the queue and store contract suites against LocalStack (started and stopped for you)
	SAS_STORE_CONTRACT_LARGE=10000 $(RIG) localstack -- $(GO) test -count=1 -v -timeout 15m -run 'TestQueueContract$$|TestContract$$' ./internal/sqsqueue ./internal/dynamostore

test-localstack: ## everything on LocalStack without Docker: e2e-localstack and contract-localstack (make test runs it)
	$(MAKE) e2e-localstack
	$(MAKE) contract-localstack

soak: ## the small chaos soak alone (every fault kind, 200 orders) with its verdict; make test runs it too
	$(RIG) exec -- $(GO) test -count=1 -run 'TestSoak$$' -v -timeout 10m ./internal/dev/suites/

bench: ## benchmarks on the local rig, among them the overload benchmark (goodput ÷ C, orders failed by waiting)
	$(RIG) exec -- $(GO) test -run '^$$' -bench . -benchtime 1x ./...

# The soak at scale: every fault kind at once. The wait is bounded (CHAOS_TIMEOUT);
# 10,000 orders take tens of minutes on a 2-core machine with moto.
CHAOS_ORDERS ?= $(ORDERS)
CHAOS_TIMEOUT ?= 60m
CHAOS_MIN_PROCESSED ?= 0.90
chaos: ## chaos soak: every fault kind at once (ORDERS=10000 works); fails on any lost order, double effect, illegal transition, alert or compensation mismatch, or unexplained failure
	$(GO) run ./cmd/sasrun -orders $(CHAOS_ORDERS) -multi 0.3 -branches 0.2 -transient 0.2 -permanent 0.02 -hang 0.05 -lost 0.02 -lost-mode drop \
		-kill-every 3s -duplicate 0.02 -kill-before-send 0.01 -supervisors 3 -clock-skew 300ms \
		-min-processed $(CHAOS_MIN_PROCESSED) -timeout $(CHAOS_TIMEOUT)

# A release (README, "Releasing"): every module tagged at VERSION, locally.
release: ## tag every module at VERSION=vX.Y.Z after checking the tree (clean, vet, unit tests); prints the push, pushes nothing
	@$(SYNTH_ENV) scripts/release.sh "$(VERSION)"

.PHONY: release e2e-scale dev soak help test test-unit test-examples vet run synth deploy bench chaos build test-infra lint-infra e2e e2e-localstack contract-localstack test-localstack emulator env sim sim-deep
