# The two commands a new user needs:
#   make run    the main job: a short load ladder against the built-in local stack
#   make test   every test (real mosquitto, PostgreSQL, NATS and WebAssembly plugins)
# Both install what is missing first (scripts/setup.sh): `make run` only
# what a run needs (mosquitto, PostgreSQL, the wasm target), `make test` the rest.

CARGO_TARGET_DIR ?= $(CURDIR)/target
export CARGO_TARGET_DIR
RUN_ARGS ?= --steps 1k,2.5k --warmup 10s --soak 30s
# `make run` builds only what a run against the built-in local stack needs:
# no storage study, NATS client, Docker API or Haystack test server (a
# quicker first build; a command left out says so). Every other target, and
# `cargo build --release -p scalebench`, builds every command. The two
# builds share every dependency (host/build-pins).
RUN_BUILD = --release -p scalebench --no-default-features

.PHONY: setup setup-run run print-run-build test fuzz bench bench-smoke lint

setup:
	./scripts/setup.sh

setup-run:
	./scripts/setup.sh --run

run: setup-run
	cargo run $(RUN_BUILD) -- run --target baler --model plant-shaped $(RUN_ARGS)

print-run-build:
	@echo $(RUN_BUILD)

# The suite runs under cargo-nextest (.config/nextest.toml says what may
# overlap). Seven tests at once load the host by themselves, so the
# live-safety host-load rule is off for the suite (its rule has a unit test,
# live_safety::tests); the live URL rule stays on. The Docker images are
# built once before it, not by the first
# tests that need them, and the historian binary the stack tests start is
# built once here, not by each of their processes at once. The ten slowest
# tests are printed at the end.
NEXTEST_JUNIT = $(CURDIR)/target/nextest/default/junit.xml
# `make run`'s own binary, built first, kept aside and run by
# tests/make_run.rs; the suite's build after it puts the full binary back
# in target/release/ (the Docker images are made from that one).
RUN_BUILD_BIN = $(CARGO_TARGET_DIR)/run-build/scalebench
test: setup
	./scripts/dockerd.sh start
	cargo build $(RUN_BUILD)
	mkdir -p $(dir $(RUN_BUILD_BIN)) && cp $(CARGO_TARGET_DIR)/release/scalebench $(RUN_BUILD_BIN)
	cargo nextest run --release --workspace --no-run
	cargo build --release -p reference-historian
	./scripts/docker-images.sh $(CARGO_TARGET_DIR)/release/scalebench
	rm -f $(NEXTEST_JUNIT)
	SCALEBENCH_RUN_BUILD_BIN=$(RUN_BUILD_BIN) SCALEBENCH_LIVE_LOAD_FACTOR=inf cargo nextest run --release --workspace --no-fail-fast; rc=$$?; \
	  python3 scripts/slowest.py $(NEXTEST_JUNIT) 10; exit $$rc
	cd plugins && CARGO_TARGET_DIR=$(CARGO_TARGET_DIR)/plugins-native cargo test --release

# The fuzz targets of every parser that reads outside input (each also
# runs a few cases in `make test`), with FUZZ_CASES generated inputs each:
# a few seconds per target. Seeds and past findings: fuzz/corpus/. The
# host's targets are built with the whole workspace, as `make test` built
# them (`-p` alone would resolve features anew and rebuild the dependencies).
FUZZ_CASES ?= 20000
fuzz:
	SCALEBENCH_FUZZ_CASES=$(FUZZ_CASES) cargo test --release --workspace --test fuzz
	cd plugins && SCALEBENCH_FUZZ_CASES=$(FUZZ_CASES) CARGO_TARGET_DIR=$(CARGO_TARGET_DIR)/plugins-native cargo test --release --workspace --test fuzz

# Every benchmark in a short mode (a few minutes); figures in results/bench/.
bench: setup
	cargo build --release -p scalebench
	./scripts/bench.sh short

# Every benchmark at tiny sizes (seconds each): CI runs it so a benchmark
# that breaks fails the build. Its records go to a scratch directory.
bench-smoke:
	cargo build --release -p scalebench
	BENCH_DIR=$$(mktemp -d) ./scripts/bench.sh smoke

# The gates CI runs before the tests: formatting and clippy in both
# workspaces (the host's and the plugins'), no import cycle in the host
# crates, no module importing up a layer, no core module importing the command line, and no terminal output
# outside the command layer and the progress view (the rest is logs).
lint:
	python3 scripts/import-graph.py host/scalebench host/engine host/report host/results --layers docs/architecture.md
	python3 scripts/module-list.py host/scalebench/src host/engine/src host/report/src host/results/src --check docs/architecture.md
	python3 scripts/print-lint.py host/scalebench/src host/engine/src host/report/src host/results/src
	python3 scripts/long-functions.py host/scalebench/src host/engine/src host/report/src host/results/src
	python3 scripts/nextest-config.py .config/nextest.toml
	! grep -rn 'crate::cli' host/scalebench/src | grep -v 'src/commands/\|src/cli.rs\|src/lib.rs'
	cargo fmt --all --check
	cd plugins && cargo fmt --all --check
	cargo clippy --release --workspace --all-targets -- -D warnings
	cargo clippy $(RUN_BUILD) -- -D warnings
	cd plugins && CARGO_TARGET_DIR=$(CARGO_TARGET_DIR)/plugins-native cargo clippy --release --workspace --all-targets -- -D warnings
