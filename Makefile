# SPACE -- one build for binaries, guest kernel and templates.
#   make        build everything `make run` needs (binaries, kernel, templates)
#   make run    ... then start spaced on loopback in the foreground
#   make test   build what the tests need and run the whole suite
#   make bench  build, install the benchmarks' packages, run bench/bench.py then
#               bench/lifecycle.py (BENCH=lifecycle or BENCH=bench runs one)
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
DAEMON_INC := -Isrc/daemon
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

COMMON_SRC := $(wildcard src/common/*.c)
DAEMON_SRC := $(wildcard src/daemon/*.c src/daemon/*/*.c)
AGENT_SRC  := $(wildcard src/agent/*.c)
CLI_SRC    := $(wildcard src/cli/*.c)
MEMCVT_SRC := $(wildcard src/memcvt/*.c)
UNIT_SRC   := $(wildcard tests/unit/test_*.c)

obj = $(patsubst src/%.c,$(BUILD)/obj/$(2)/%.o,$(1))
COMMON_OBJ := $(call obj,$(COMMON_SRC),dyn)
DAEMON_OBJ := $(call obj,$(DAEMON_SRC),dyn)
CLI_OBJ    := $(call obj,$(CLI_SRC),dyn)
MEMCVT_OBJ := $(call obj,$(MEMCVT_SRC),dyn)
AGENT_OBJ  := $(call obj,$(AGENT_SRC) $(COMMON_SRC),static)
# The unit tests link each component's objects except its entry point, built
# with ASan+UBSan, from one static archive per component (so internals are
# reachable from tests, and the linker takes only the objects a test needs).
SAN_LIBS   := $(BUILD)/san/libdaemon.a $(BUILD)/san/libagent.a $(BUILD)/san/libcli.a \
              $(BUILD)/san/libmemcvt.a $(BUILD)/san/libcommon.a
san_objs    = $(call obj,$(filter-out %/main.c,$(1)),san)
UNIT_BIN   := $(patsubst tests/unit/%.c,$(BUILD)/unit/%,$(UNIT_SRC))

DAEMON_LIBS := -levent -levent_openssl -ljansson -lsqlite3 -lssl -lcrypto -lseccomp
CLI_LIBS    := -lcurl -ljansson
BINS := $(BUILD)/bin/spaced $(BUILD)/bin/spacectl $(BUILD)/bin/space-agent $(BUILD)/bin/space-memcvt


.PHONY: all deps bench-deps layers bins kernel templates template-minimal template-base run test unit e2e bench clean
all: bins kernel templates

deps:
	@scripts/deps.sh

bench-deps:
	@scripts/deps.sh scripts/bench-deps.txt

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

$(BUILD)/bin/spaced: $(DAEMON_OBJ) $(COMMON_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(DAEMON_LIBS)
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

templates: template-minimal template-base
template-minimal: bins kernel
	@guest/templates/build.sh minimal $(BUILD)
template-base: bins kernel
	@guest/templates/build.sh base $(BUILD)

run: all
	@scripts/run.sh

$(BUILD)/san/libcommon.a: $(call san_objs,$(COMMON_SRC))
$(BUILD)/san/libdaemon.a: $(call san_objs,$(DAEMON_SRC))
$(BUILD)/san/libagent.a: $(call san_objs,$(AGENT_SRC))
$(BUILD)/san/libcli.a: $(call san_objs,$(CLI_SRC))
$(BUILD)/san/libmemcvt.a: $(call san_objs,$(MEMCVT_SRC))
$(BUILD)/san/%.a:
	@mkdir -p $(@D)
	@rm -f $@
	ar rcs $@ $^

# A test links the archive of the component its name says (test_agent_*,
# test_sse / test_cli*, test_memcvt*, test_proto, else the daemon) plus the common one.
unit_libs = $(if $(filter test_agent_%,$(1)),$(BUILD)/san/libagent.a,$(if $(filter test_sse test_cli%,$(1)),$(BUILD)/san/libcli.a,$(if $(filter test_memcvt%,$(1)),$(BUILD)/san/libmemcvt.a,$(if $(filter test_proto,$(1)),,$(BUILD)/san/libdaemon.a)))) $(BUILD)/san/libcommon.a
.SECONDEXPANSION:
$(BUILD)/unit/%: tests/unit/%.c $$(call unit_libs,$$*)
	@mkdir -p $(@D) $(BUILD)/unitdeps
	$(CC) $(CFLAGS) $(SAN) -O1 -Isrc -Isrc/daemon -Isrc/agent -Isrc/cli -MF $(BUILD)/unitdeps/$*.d -o $@ $< \
		-Wl,--start-group $(filter %.a,$^) -Wl,--end-group $(DAEMON_LIBS) $(CLI_LIBS)

unit: deps
	@$(MAKE) --no-print-directory $(UNIT_BIN)
	@tests/unit/run.sh $(UNIT_BIN)

test: all
	@$(MAKE) --no-print-directory $(UNIT_BIN)
	@tests/run.sh

BENCH ?= bench lifecycle
bench: all bench-deps
	@set -e; for b in $(BENCH); do python3 bench/$$b.py; done

clean:
	rm -rf $(BUILD)/obj $(BUILD)/bin $(BUILD)/unit $(BUILD)/unitdeps $(BUILD)/san

-include $(shell find $(BUILD)/obj $(BUILD)/unitdeps -name '*.d' 2>/dev/null)
