#!/bin/bash
# run186: after the include_source job sharing (7786f2e) and fleet schema 2
# (fe4f5cc), the service-level GPU tests on the H200:
# (1) kfuse_cuda_test and kfuse_client_test (kfused tuning on the GPU);
# (2) the Python client's tests with torch on the GPU;
# (3) two concurrent `kfuse compile` of one chain against a real kfused,
#     the second asking for the sources: one build, the first answer without
#     sources (MISS), the second with them (JOINED).
# Made here: build/gpu-svc (bench/gpu/prepare.sh, then the cross, tuner and
# manifest binaries removed); .gpu/pysite (pip
# install --no-deps --target .gpu/pysite ./clients/python).
b=$PWD/build/gpu-svc  # build/gpu-bundle less the kernel suites, to fit the carry
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
export PATH=$b/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$b/bin/kfuse_cuda_test > $OUT/cuda_test.txt 2>&1; echo "cuda_test rc=$?"; tail -1 $OUT/cuda_test.txt
$b/bin/kfuse_client_test --gtest_filter='ClientTest.*' > $OUT/client_test.txt 2>&1; echo "client_test rc=$?"; tail -1 $OUT/client_test.txt
KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$?"; tail -4 $OUT/python_tests.txt

$b/bin/kfused --store=/tmp/run186.db --address=127.0.0.1:7600 --log_format=json > $OUT/kfused.log 2>&1 & kp=$!
for i in $(seq 1 100); do $b/bin/kfuse --server 127.0.0.1:7600 device > $OUT/device.txt 2>&1 && break; sleep 0.2; done
head -3 $OUT/device.txt
$b/bin/kfuse --server 127.0.0.1:7600 --json compile examples/gelu_bias_bf16.json > $OUT/first.json 2>&1 & p1=$!
sleep 0.3
$b/bin/kfuse --server 127.0.0.1:7600 --json compile examples/gelu_bias_bf16.json --source > $OUT/second.json 2>&1
wait $p1
echo "builds: $(grep -c '"event":"build"' $OUT/kfused.log)"
python3 - $OUT <<'PY'
import json, sys
for name in ("first", "second"):
    d = json.load(open(f"{sys.argv[1]}/{name}.json"))
    ks = d["plan"]["kernels"]
    print(name, d.get("cache"), d["plan"]["provenance"].get("state"),
          "sources:", [len(k.get("source", "")) for k in ks])
PY
kill $kp; wait $kp 2>/dev/null
