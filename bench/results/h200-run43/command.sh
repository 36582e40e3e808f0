#!/bin/bash
# The whole matmul suite (matmul/2), the router softmax included, in one run.
cd "$(dirname "$0")/.."
SUITES=matmul SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=480 bash bench/gpu/run.sh build/gpu-bundle 2>&1 | grep -vE '^\{"case"' | tail -40
