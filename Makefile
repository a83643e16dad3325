# The few commands people type. Everything real lives in CMake and scripts/.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=
CTEST_ARGS ?= -LE slow

.PHONY: all deps configure build run test test-all test-asan bench clean

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
# and MPI tests (tests/sanitizers/lsan.supp suppresses third-party runtimes' leaks).
ASAN_BUILD_DIR ?= build-asan
test-asan: deps
	cmake -S . -B $(ASAN_BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_SANITIZE=address,undefined \
	  -DSTRATA_ENABLE_CUDA=OFF
	cmake --build $(ASAN_BUILD_DIR) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitizers/lsan.supp:print_suppressions=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD_DIR) --output-on-failure -L 'unit|mpi' $(CTEST_ARGS)
