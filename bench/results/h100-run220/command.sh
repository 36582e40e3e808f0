#!/bin/bash
# run220: the Python client's tests with torch on the GPU again, at the
# commit after run219 (Chain.from_json bounds nesting itself; run219's one
# failure), against run219's kfused (no C++ change since 6b541db).
# Made here: .gpu/pysite by pip install --no-deps --target .gpu/pysite ./clients/python.
mkdir -p /tmp/k && xz -dc build/gpu-run219.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run219
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/device.txt
python3 --version | tee -a $OUT/device.txt
start=$SECONDS
KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$? $((SECONDS - start)) s" >> $OUT/python_tests.txt
tail -5 $OUT/python_tests.txt
