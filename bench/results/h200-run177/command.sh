#!/bin/bash
# run177: (1) what a few-row launch costs outside its work (run176's
# script, below); (2) the Python client's tests on the GPU, with this
# stop's client changes (the Launcher's device check among them) and
# torch's CUDA tests, against the bundle's kfused; (3) whole-float
# constants (weak_float) on int32 tensors through kfuse.torch and a real
# kfused with the GPU, against eager torch on fresh random inputs.
b=$PWD/build/gpu-bundle
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
export PATH=$b/bin:$PATH
(cd .gpu/m64
for c in "" 100 0 ""; do
  echo "== carveout ${c:-default}"
  if [ -n "$c" ]; then export CARVEOUT=$c; else unset CARVEOUT; fi
  WMAX=1 MROWS=16 LIST=list16e.txt timeout 100 ./mmr
done 2>&1 | grep -v "^M " | sed 's/max err.*differ from the first kernel.s;//' > $OUT/launch.txt)
cat $OUT/launch.txt
python3 -c "import torch, google.protobuf, grpc; print('torch', torch.__version__, 'protobuf', google.protobuf.__version__, 'grpc', grpc.__version__, torch.cuda.get_device_name())"
KFUSED=$b/bin/kfused PYTHONPATH=$PWD/.gpu/pysite timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$?"; tail -15 $OUT/python_tests.txt
t=$(mktemp -d)
kfused --address=127.0.0.1:7420 --store=$t/k.db --worker=$b/bin/kfuse-worker 2> $OUT/kfused.log &
kp=$!
for i in $(seq 100); do kfuse health >/dev/null 2>&1 && break; sleep 0.3; done
PYTHONPATH=$PWD/.gpu/pysite timeout 200 python3 .gpu/wf.py 127.0.0.1:7420 2>&1 | tee $OUT/weak_float.txt
kill -TERM $kp; wait $kp
# Made here: .gpu/m64 is run175's harness with CARVEOUT (the function's
# preferred shared-memory carveout) and list16e.txt (s16, then the empty
# kernel empty_kernel.cu at 0, 33280 and 98304 bytes of dynamic shared
# memory); .gpu/pysite is the kfuse package as scripts/test-python installs
# it (stubs generated); build/gpu-bundle by bench/gpu/prepare.sh.
