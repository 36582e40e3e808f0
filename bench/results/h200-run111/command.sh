#!/bin/bash
# run110's program with the f32 trials that followed from it (sources as in
# ../h200-run110/command.sh, plus):
#   python3 edit_f.py F0.cu F10.cu mk            # the quotient by Markstein's correction
#   python3 edit_roll.py F6.cu F7.cu 1; edit_roll.py F6.cu F8.cu 4; edit_roll.py F5.cu F9.cu 1
#   python3 edit_roll.py F6h.cu F7h.cu 1; edit_f.py F9.cu F12.cu mk
# and the SM clock logged by nvidia-smi every 20 ms through both programs
# (clocks.txt); LONG=1 first keeps the GPU busy for about 0.5 s. The
# "sampled outputs differ from F0's" column of this run is void: each kernel's
# run() instantiation kept its own copy of F0's rows (fixed since).
cd "$(dirname "$0")/.."
(nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 20 > $OUT/clocks.csv &)
cd .gpu/px && ./px > $OUT/px_reads.txt 2>&1; LONG=1 ./px > $OUT/px_long.txt 2>&1; pkill nvidia-smi
