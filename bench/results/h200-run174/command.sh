#!/bin/bash
# run174: kfused end to end on the H200 with this stop's service changes:
# kfuse tune of a softmax (tuned: exit 0), the same again (a hit), the
# lookup metrics, SIGTERM with a background tune in flight
# (shutdown_jobs_cancelled, then stopped), and GpuTunerTest's tuner tests.
b=$PWD/build/gpu-bundle
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
export PATH=$b/bin:$PATH
t=$(mktemp -d)
kfuse chain softmax --dtype bf16 --width 4096 --rows-symbol rows --rows-hint 32768 -o $t/sm.json
kfuse chain rms_norm --dtype f32 --width 8192 --rows-symbol rows --rows-hint 16384 -o $t/rms.json
kfused --address=127.0.0.1:7420 --store=$t/k.db --metrics_address=127.0.0.1:9420 --worker=$b/bin/kfuse-worker \
  --log_format=json 2> $OUT/kfused.log &
kp=$!
for i in $(seq 100); do kfuse health >/dev/null 2>&1 && break; sleep 0.3; done
kfuse device | tee $OUT/device.txt
kfuse tune $t/sm.json > $OUT/tune1.txt 2>&1; echo "tune rc=$?" | tee -a $OUT/tune1.txt
kfuse tune $t/sm.json > $OUT/tune2.txt 2>&1; echo "tune again rc=$?" | tee -a $OUT/tune2.txt
for i in 1 2 3 4 5; do kfuse compile $t/sm.json > /dev/null; done
grep -E "^(key|cache|state)" $OUT/tune1.txt $OUT/tune2.txt
python3 -c "import urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:9420/metrics\").read().decode())" | grep -E "^kfuse_(lookups|jobs_running|tuning_seconds_count|store_errors)" | tee $OUT/metrics.txt
# A cold start with a short deadline: the heuristic now, tuning in the background; then stop.
kfuse --timeout 1 compile $t/rms.json > $OUT/cold.txt 2>&1; echo "cold rc=$?" >> $OUT/cold.txt
sleep 0.5; kill -TERM $kp; wait $kp; echo "kfused rc=$?"
python3 -c 'import json,sys
ev=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print([ (e["event"], e.get("message","")[:120]) for e in ev if e["event"] in ("serving","stopping","shutdown_jobs_cancelled","stopped","build")])' $OUT/kfused.log
timeout 150 $b/bin/kfuse_tuner_test --gtest_filter='RunnerGpu*:WorkerKernelsGpu*' > $OUT/tuner_test.log 2>&1; echo "tuner test rc=$?"; tail -3 $OUT/tuner_test.log
