#!/bin/bash
# Run HERE (the build machine) before the H200 run: builds what the GPU run
# needs and packs it, with the shared libraries the H200 image lacks, into
# BUILD/gpu-bundle/{bin,lib} (small enough to carry to the GPU machine).
#
#   bash bench/gpu/prepare.sh [BUILD_DIR]      # default: build
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
bundle_libs=/work/shared/gpu/bundle-libs
[ -x "$bundle_libs" ] || bundle_libs=../shared/gpu/bundle-libs
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$build" -j2 kfused kfuse kfuse-worker kfuse-fake-worker kfuse-plan-manifest kfuse_cross_test \
  kfuse_tuner_test kfuse_cuda_test kfuse_client_test
out=$build/gpu-bundle
rm -rf "$out"
mkdir -p "$out/bin"
for b in service/kfused clients/kfuse tuner/kfuse-worker tuner/kfuse-fake-worker bench/kfuse-plan-manifest \
    tests/kfuse_cross_test tuner/kfuse_tuner_test tuner/kfuse_cuda_test clients/kfuse_client_test; do
  strip -o "$out/bin/$(basename "$b")" "$build/$b"
done
"$bundle_libs" "$out/lib" "$out"/bin/*
du -sh "$out"
