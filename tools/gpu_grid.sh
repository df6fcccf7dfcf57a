#!/usr/bin/env bash
# Train an experiment's runs all at once on a lent GPU machine, within one device command.
#
#   . .whl/setup.sh && bash tools/gpu_grid.sh aggregation                 # on the GPU machine (device tool;
#                                                                        #   recipe: ../shared/gpu/README.md)
#   JOBS=12 LIMIT=540 bash tools/gpu_grid.sh aggregation --shard 1/2      # half the grid (the other half: 2/2)
#   bash tools/gpu_grid.sh heads scale=small --missing                     # Hydra overrides before the options
#
# Then here: tar xzf grid.tgz -C /tmp/g && python -m tools.records /tmp/g/multirun/<E> <E> --at <commit it ran at>
# and draw the table once every run is recorded (make experiment E=<E> ARGS=--table-only).
#
# Each run is one process (tools.experiment --jobs: one CPU thread each, all on the one GPU); the data
# cache travels if carried (carry .cache/tagnn/listops: the listops_full splits are 34 MB). The finished
# run directories (results.json, metrics.csv, .hydra, train.log; no checkpoints) are packed into
# $OUT/grid.tgz every 20 s and at the end, so a command cut off by the device's limit still brings back
# every run that had finished. A run that did not finish is lost: size JOBS and the grid to the command.
# Measured on an H100 (docs/long_runs.md, "A whole grid at once on a lent GPU"): 24 full-scale ListOps runs
# at once reached 6-9 of their 10 epochs in 560 s (none finished). Fewer at once run faster each, by how
# much was not measured: give the slowest cells a command to themselves, or fewer JOBS.
set -u
OUT=${OUT:?set OUT (the device tool sets it)}
NAME=${1:?usage: bash tools/gpu_grid.sh EXPERIMENT [tools.experiment arguments]}
shift
JOBS=${JOBS:-12}
LIMIT=${LIMIT:-540}
PY=${PYTHON:-python3}
export OMP_NUM_THREADS=1
{ nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>&1; "$PY" -c "import torch; print('torch', torch.__version__)"; } >"$OUT/machine.txt"
pack() {  # finished runs only (a results.json in the directory) and the runs' logs, no checkpoints
    local part="$OUT/grid.tgz.$1"  # each packer its own temporary file: the last pack never meets a stray one
    find multirun \( -name results.json -printf '%h\0' \) -o \( -name .logs -printf '%p\0' \) 2>/dev/null |
        tar czf "$part" --exclude=checkpoints --exclude='*.pt' --null -T - 2>/dev/null
    mv "$part" "$OUT/grid.tgz"
}
(trap 'exit 0' TERM; while true; do sleep 20 & wait $!; pack loop; done) &
PACKER=$!
T0=$SECONDS
timeout "$LIMIT" "$PY" -m tools.experiment "$NAME" "$@" --jobs "$JOBS" --no-then >"$OUT/experiment.log" 2>&1
echo "tools.experiment rc=$? after $((SECONDS - T0)) s" >>"$OUT/experiment.log"
kill "$PACKER" 2>/dev/null
wait "$PACKER" 2>/dev/null  # a pack in flight finishes first
pack last
tail -n 30 "$OUT/experiment.log"
