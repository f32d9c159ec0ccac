# gyre: `make serve` starts the three services, `make test` runs every check.
SHELL := /bin/bash
NPM_STAMP := node_modules/.installed
BIN := node_modules/.bin

.PHONY: lock install generate check-generated lint typecheck build serve test mock spec-diff clean

$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

install: $(NPM_STAMP)

generate: install
	$(BIN)/tsx scripts/generate.ts

check-generated: install
	$(BIN)/tsx scripts/generate.ts --check

lint: install
	NO_COLOR=1 $(BIN)/redocly lint --format=stylish

typecheck: install
	$(BIN)/tsc -p tsconfig.check.json

build: generate
	$(BIN)/tsc -p tsconfig.json

serve: build
	node dist/src/cli.js serve $(ARGS)

test: install lint check-generated typecheck
	@mkdir -p .tmp
	$(BIN)/vitest run --reporter=default --reporter=json --outputFile.json=.tmp/vitest.json; status=$$?; \
	node -e 'const r=require("./.tmp/vitest.json"); console.log(`tests: $${r.numPassedTests} passed, $${r.numFailedTests} failed, $${r.numPendingTests+r.numTodoTests} skipped`)'; \
	exit $$status

mock: install
	$(BIN)/tsx scripts/mock.ts

spec-diff: install
	$(BIN)/tsx scripts/spec-diff.ts $(if $(BASE),--base $(BASE),)

# After `npm install <pkg>`: keep the lock installable with `npm ci` on every platform.
lock:
	node scripts/lock-platform-packages.mjs

clean:
	rm -rf dist .tmp
