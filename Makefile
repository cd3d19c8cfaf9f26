# rightsize — build, demo, test, benchmark, lint.
#
#   make demo    build the tools and run the examples on this machine
#   make test    install what the tests need (under CI=true) and run them
#
# Everything the project needs is installed by scripts/deps.sh; nothing by hand.

GO          ?= go
SHELL       := /bin/bash
BIN         := $(CURDIR)/bin
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all build demo test test-short bench lint man deps clean

all: build

# The workqueue command (the worker above all) is built without cgo: it
# needs none, and a cgo binary's threads reserve glibc malloc arenas of
# address space, so that the worker failed to start under Grid Engine's
# h_vmem=1000M, which limits address space. Without cgo it needs about
# 0.7 GB of it (internal/workqueuecmd's TestWorkerUnderAddressSpaceLimit).
build:
	$(GO) build -buildvcs=auto -o $(BIN)/ ./cmd/...
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -o $(BIN)/ ./cmd/workqueue

# deps checks for the toolchain pieces the build needs (gcc for cgo) and,
# under CI=true, installs the real components the interop tests run against.
deps:
	./scripts/deps.sh

demo: deps build
	./examples/demo.sh

# The fuzz run is short: it guards the Work Queue message parser against
# regressions on every change; longer runs are for `go test -fuzz` by hand.
# The tests' results go through scripts/testsummary, which prints them as
# go test does and then lists the tests that were skipped, and why.
test: deps build
	set -o pipefail; $(GO) test -count=1 -timeout 20m -json ./... | $(GO) run ./scripts/testsummary
	$(GO) test -run='^$$' -fuzz=FuzzConn -fuzztime=20s ./workqueue/wire

test-short: build
	$(GO) test -short ./...

bench: deps build
	./bench/run.sh

# The manual pages, from the tools' own help (scripts/genman): man/*.1;
# read one with `man -l man/makeflow.1`. Each is dated by $SOURCE_DATE_EPOCH
# if set, else by the last commit of its command's code, so that making
# them again changes nothing unless the help did.
man:
	$(GO) run ./scripts/genman -dir man

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

clean:
	rm -rf $(BIN) man
