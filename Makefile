# Makefile — the thin front door of xgr. Everything is built by Meson + Ninja under build*/;
# this file only names the jobs a newcomer runs. See README.md.
#
#   make deps     install the Debian packages the project needs (scripts/deps.sh)
#   make          build build/xgr and libxgr (warnings are errors)
#   make test     build and run every test, then the fuzzers for TEST_FUZZ_SECONDS each (default 20)
#   make asan     run the tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make tsan     run the concurrent stress tests under ThreadSanitizer
#   make bench    run the benchmarks (results: bench/RESULTS.md)
#   make demo     set everything up and run the examples
#   make fuzz     run the fuzzers for FUZZ_SECONDS each (default 30)
#   make soak     the long runs (suite 'soak', XGR_SOAK=1): crash soaks, the fault suite's 500 seeds

MESON      ?= meson
FUZZ_SECONDS ?= 30
TEST_FUZZ_SECONDS ?= 20
SETUP_OPTS  = --buildtype=debugoptimized -Dwerror=true

.PHONY: all deps build test unit asan tsan fuzz bench bench-peers demo soak clean

all: build

deps:
	@scripts/deps.sh

build/build.ninja:
	$(MESON) setup build $(SETUP_OPTS)

build: build/build.ninja
	ninja -C build

unit: build
	$(MESON) test -C build --print-errorlogs --no-suite fuzz

test: deps
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory tsan
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(TEST_FUZZ_SECONDS)

build-asan/build.ninja:
	$(MESON) setup build-asan $(SETUP_OPTS) -Db_sanitize=address,undefined -Db_lundef=false

asan: deps build-asan/build.ninja
	ninja -C build-asan
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  $(MESON) test -C build-asan --print-errorlogs --no-suite fuzz --no-suite tsan --timeout-multiplier 4

build-tsan/build.ninja:
	CC=clang $(MESON) setup build-tsan $(SETUP_OPTS) -Db_sanitize=thread -Db_lundef=false

tsan: build-tsan/build.ninja
	ninja -C build-tsan
	@if $(MESON) test -C build-tsan --list 2>/dev/null | grep -q 'tsan'; then \
	  TSAN_OPTIONS=halt_on_error=1 $(MESON) test -C build-tsan --print-errorlogs --suite tsan --timeout-multiplier 4; \
	else echo "tsan: no stress tests registered yet"; fi

build-fuzz/build.ninja:
	CC=clang $(MESON) setup build-fuzz $(SETUP_OPTS) -Dfuzz=true -Db_sanitize=address,undefined \
	  -Db_lundef=false -Dc_args=-fsanitize=fuzzer-no-link

fuzz: build-fuzz/build.ninja
	ninja -C build-fuzz
	XGR_FUZZ_SECONDS=$(FUZZ_SECONDS) $(MESON) test -C build-fuzz --print-errorlogs --suite fuzz --timeout-multiplier 10

bench: deps
	$(MESON) setup build-release --buildtype=release -Dtests=false 2>/dev/null || true
	ninja -C build-release
	bench/run.sh build-release

bench-peers: bench
	bench/peers/run.sh build-release

demo: deps build
	@scripts/demo.sh

soak: build
	XGR_SOAK=1 $(MESON) test -C build --print-errorlogs --suite soak --timeout-multiplier 100

clean:
	rm -rf build build-asan build-tsan build-fuzz build-release
