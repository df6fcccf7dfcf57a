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
# every run that had finished. At LIMIT the runs still training are stopped and each one's directory
# (checkpoints, metrics.csv, .hydra) is packed into $OUT/unfinished-K.tgz, runs of at most PACK_MB (14) a file,
# MAX_PACKS (4) files at most (the device returns 8 files of at most 16 MiB, 64 MiB in all: about 15 unfinished
# 4-layer runs; the others are named in experiment.log): unpacked into a checkout's multirun/ they go on from their last epoch
# there (trainer.resume=auto: tools.queue or make experiment ARGS=--missing), on the CPU or the next GPU.
#   for f in unfinished-*.tgz; do tar xzf "$f" -C .; done      # here, in the checkout that will finish them
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
pack_unfinished() {  # runs with a checkpoint and no results.json, into files of at most PACK_MB (the device returns
    # files of 16 MiB at most; a 4-layer Transformer's two checkpoints are about 3.6 MB and hardly compress)
    local k=0 size=0 batch=() limit=$(( ${PACK_MB:-14} * 1024 * 1024 ))
    while IFS= read -r -d '' ckpt; do
        local dir=${ckpt%/checkpoints/last.pt}
        [ -f "$dir/results.json" ] && continue
        local bytes
        bytes=$(du -sb "$dir" | cut -f1)
        if [ "$bytes" -gt "$limit" ]; then
            echo "warning: $dir is $bytes bytes, over PACK_MB; not packed" >>"$OUT/experiment.log"
            continue
        fi
        if [ "$((size + bytes))" -gt "$limit" ] && [ "${#batch[@]}" -gt 0 ]; then
            tar czf "$OUT/unfinished-$k.tgz" "${batch[@]}" && k=$((k + 1))
            batch=() size=0
        fi
        if [ "$k" -ge "${MAX_PACKS:-4}" ]; then  # the device brings back 8 files, 64 MiB in all
            echo "warning: $dir not packed: $k files of unfinished runs already (MAX_PACKS)" >>"$OUT/experiment.log"
            continue
        fi
        batch+=("$dir") size=$((size + bytes))
    done < <(find multirun -path '*/checkpoints/last.pt' -print0 2>/dev/null | sort -z)
    [ "${#batch[@]}" -gt 0 ] && tar czf "$OUT/unfinished-$k.tgz" "${batch[@]}" && k=$((k + 1))
    echo "unfinished runs packed into $k file(s)" >>"$OUT/experiment.log"
}
(trap 'kill $! 2>/dev/null; exit 0' TERM; while true; do sleep 20 & wait $!; pack loop; done) &
PACKER=$!
T0=$SECONDS
# timeout signals the whole process group, so the runs still training stop with tools.experiment; a checkpoint is
# written whole (a temporary file renamed) or not at all
timeout "$LIMIT" "$PY" -m tools.experiment "$NAME" "$@" --jobs "$JOBS" --no-then >"$OUT/experiment.log" 2>&1
echo "tools.experiment rc=$? after $((SECONDS - T0)) s" >>"$OUT/experiment.log"
sleep 2  # the stopped runs' last writes
kill "$PACKER" 2>/dev/null
wait "$PACKER" 2>/dev/null  # a pack in flight finishes first
pack last
pack_unfinished
tail -n 30 "$OUT/experiment.log"
