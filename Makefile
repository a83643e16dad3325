# The few commands people type. Everything real lives in CMake and scripts/.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=
CTEST_ARGS ?= -LE slow

.PHONY: all deps configure build run test test-all test-asan fuzz bench clean

all: build

deps:
	bash scripts/deps.sh

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS)

configure: deps $(BUILD_DIR)/CMakeCache.txt

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The default job: 1 server, 1 producer and 2 trainers on synthetic data.
run: build
	STRATA_BUILD_DIR=$(BUILD_DIR) bash jobs/train_default.sh

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure $(CTEST_ARGS)

test-all: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure

bench: build
	STRATA_BUILD_DIR=$(BUILD_DIR) bash bench/run_all.sh

clean:
	rm -rf $(BUILD_DIR)

# AddressSanitizer + UndefinedBehaviorSanitizer build in its own folder: the unit
# and MPI tests (not the end-to-end jobs). LeakSanitizer is off: Open MPI dlcloses its components before exit,
# so their exit-time allocations are reported from "<unknown module>" and cannot be
# suppressed by name; out-of-bounds, use-after-free and undefined behaviour all abort.
ASAN_BUILD_DIR ?= build-asan
test-asan: deps
	cmake -S . -B $(ASAN_BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_SANITIZE=address,undefined \
	  -DSTRATA_ENABLE_CUDA=OFF
	cmake --build $(ASAN_BUILD_DIR) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD_DIR) --output-on-failure -L 'unit|mpi|fuzz' -LE e2e --timeout 1200 $(CTEST_ARGS)

# libFuzzer targets (tests/fuzz) in a clang build of their own, with ASan and UBSan:
# each target runs its corpus, then FUZZ_RUNS new inputs (make fuzz FUZZ_RUNS=1000000
# for a long run; the default suite of the gcc build does not build them).
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_RUNS ?= 2000
fuzz: deps
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_FUZZ=ON \
	  -DSTRATA_SANITIZE=address,undefined,fuzzer-no-link -DSTRATA_ENABLE_CUDA=OFF -DSTRATA_FUZZ_RUNS=$(FUZZ_RUNS)
	cmake --build $(FUZZ_BUILD_DIR) -j $(JOBS) --target fuzz_deck fuzz_text_line fuzz_sequence_events \
	  fuzz_batch_wire fuzz_checkpoint fuzz_staging_message fuzz_trial_log
	ctest --test-dir $(FUZZ_BUILD_DIR) --output-on-failure -L fuzz --timeout 100000
