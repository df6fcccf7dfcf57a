#!/usr/bin/env bash
# Every measurement a lent GPU machine is for, in one command (docs/hardware_lottery.md, "On a GPU").
#
#   . .whl/setup.sh && bash bench/gpu.sh "$OUT"    # on the GPU machine (the recipe: ../shared/gpu/README.md)
#   QUICK=1 DEVICE=cpu bash bench/gpu.sh /tmp/gpu  # here: the same steps at tiny sizes, to check the script
#   STEPS="loop card" bash bench/gpu.sh "$OUT"     # some of the steps only (default: all of them)
#   BASE=.base STEPS="base loop" ...                # also the loop bench of another checkout (say, the commit
#                                                   # before a change, unpacked into .base), in the same run
#   PRECISIONS=fp32 ...                              # the loop bench's precisions (default: fp32 bf16)
#
# The steps, most wanted first, each with its own time limit (seconds) and log, so that one that fails or
# runs out of time does not stop the others:
#   data cache   bench.data_cache on dataset=listops_full, in the background on two CPU threads throughout
#   loop         bench.loop: the old and new training loops, 3 cases x fp32 and bf16 (examples/s)
#   anchor       bench.anchor --compile: tagnn's loop against plain PyTorch (nn.TransformerEncoder), eager and
#                compiled, batch 64 and 512, fp32 and bf16; the host time to make a batch (~100 s of compiling)
#   card         the card's command (model=gat graph=complete, 15 epochs) timed on the GPU, with its graphs
#                built (first run) and read from the cache (second run), then on the machine's CPU cores
#   lottery      bench.hardware_lottery end to end (layers, attention, memory, overheads, training)
#   scaling      bench.scaling (cost as n grows)
#   pretrained   bench.pretrained (MiniLM's shapes; random weights where the package is absent)
# Everything goes under OUT/work/; OUT/gpu.tgz holds it all and is rewritten after every step, so a command
# cut off by the device's limit still brings back what had finished. Copy work/results/ to
# bench/results/<machine>/ (nvidia-h100 on an H100) and take the card's table from work/card.md.
set -u
OUT=${1:?usage: bash bench/gpu.sh OUT}
DEVICE=${DEVICE:-cuda}
PY=${PYTHON:-python3}
W="$OUT/work"
mkdir -p "$W/results" "$W/logs" "$W/card"
export TAGNN_CACHE_DIR="$W/cache"  # the card's graphs; bench.data_cache uses a temporary folder of its own

if [ -n "${QUICK:-}" ]; then
    LOOP=(--epochs 1 --num-train 128 --cases gat_complete_64 transformer_complete_64)
    ANCHOR=(--epochs 1 --num-train 128 --batch-sizes 64)
    CARD="trainer.max_epochs=1 dataset.num_train=128"
    CACHE=(--dataset listops --runs 2)
    Q=(--quick)
else
    LOOP=(--epochs 2)
    ANCHOR=(--epochs 2)
    CARD=""
    CACHE=(--runs 3)
    Q=()
fi

pack() {  # everything so far into one file (the device returns a few files only)
    tar czf "$OUT/gpu.tgz.part" --exclude=cache -C "$W" . && mv "$OUT/gpu.tgz.part" "$OUT/gpu.tgz"
}

STEPS=${STEPS:-data_cache loop anchor card lottery scaling pretrained}
wanted() { [[ " $STEPS " == *" $1 "* ]]; }

step() {  # step NAME LIMIT COMMAND...: run it, log it, time it; a failure is logged, not fatal
    local name=$1 limit=$2
    shift 2
    wanted "${name%%_*}" || return 0
    local t0=$SECONDS
    echo "== $name (limit ${limit}s): $*"
    timeout "$limit" "$@" >"$W/logs/$name.log" 2>&1
    local rc=$?
    echo "$name rc=$rc $((SECONDS - t0))s" | tee -a "$W/logs/steps.txt"
    tail -n 4 "$W/logs/$name.log"
    pack
}

{
    date -u
    $PY -c "import torch, dgl, os; print('torch', torch.__version__, '| cuda', torch.version.cuda, '| dgl', dgl.__version__, '| cpus', os.cpu_count())"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    git rev-parse HEAD 2>/dev/null || echo "commit: not a git checkout here (the copy has no .git)"
} >"$W/logs/machine.txt" 2>&1
cat "$W/logs/machine.txt"

# the data cache on the CPU, beside the rest (two threads of the machine's cores)
CACHE_PID=""
if wanted data_cache; then
    OMP_NUM_THREADS=2 timeout 420 $PY -m bench.data_cache "${CACHE[@]}" --out "$W/results" >"$W/logs/data_cache.log" 2>&1 &
    CACHE_PID=$!
fi

read -r -a PREC <<<"${PRECISIONS:-fp32 bf16}"
if [ -n "${BASE:-}" ]; then
    step base_loop 180 bash -c 'cd "$0" && "$@"' "$BASE" $PY -m bench.loop --device "$DEVICE" "${LOOP[@]}" --out "$W/base"
fi
step loop 180 $PY -m bench.loop --device "$DEVICE" --precisions "${PREC[@]}" "${LOOP[@]}" --out "$W/results"
AC=(--compile)
[ "$DEVICE" = cpu ] && AC=()  # compiling on the CPU takes minutes and speeds nothing up (issue 48)
step anchor 200 $PY -m bench.anchor --device "$DEVICE" ${AC[@]+"${AC[@]}"} --precisions "${PREC[@]}" "${ANCHOR[@]}" --out "$W/results"

card() {  # card NAME DEVICE: the card's command, its wall time (ns) in card/NAME.ns
    local t0
    t0=$(date +%s%N)
    # shellcheck disable=SC2086  # CARD is a list of overrides, split on purpose
    $PY train.py model=gat graph=complete device="$2" logger=none trainer.progress=false $CARD \
        hydra.run.dir="$W/card/$1" && echo $(($(date +%s%N) - t0)) >"$W/card/$1.ns"
}
export -f card
export W PY CARD
step card_gpu_built 90 bash -c 'card "$@"' card gpu_built "$DEVICE"
step card_gpu_cached 90 bash -c 'card "$@"' card gpu_cached "$DEVICE"
step card_cpu_cached 150 bash -c 'card "$@"' card cpu_cached cpu
wanted card && $PY - "$W" <<'EOF' >"$W/card.md" 2>&1
import re, sys
from pathlib import Path
w = Path(sys.argv[1])
rows = ["| run | wall (s) | test accuracy |", "|---|---|---|"]
walls = {}
for name in ("gpu_built", "gpu_cached", "cpu_cached"):
    wall = w / "card" / f"{name}.ns"
    log = "\n".join(p.read_text() for p in (w / "card" / name).glob("*.log")) if (w / "card" / name).exists() else ""
    acc = re.findall(r"test[^\n]*?acc\w*[=: ]+([0-9.]+)", log)
    if wall.exists():
        walls[name] = int(wall.read_text()) / 1e9
    rows.append(f"| {name} | {walls.get(name, float('nan')):.1f} | {acc[-1] if acc else '?'} |")
print("\n".join(rows))
if "gpu_cached" in walls and "cpu_cached" in walls:
    print(f"\nGPU wall / CPU wall (both reading the cache): {walls['gpu_cached'] / walls['cpu_cached']:.2f}")
EOF
wanted card && cat "$W/card.md"
pack

step lottery 200 $PY -m bench.hardware_lottery --device "$DEVICE" ${Q[@]+"${Q[@]}"} --out "$W/results"
step scaling 90 $PY -m bench.scaling --device "$DEVICE" ${Q[@]+"${Q[@]}"} --out "$W/results"
step pretrained 70 $PY -m bench.pretrained --device "$DEVICE" ${Q[@]+"${Q[@]}"} --out "$W/results"

if [ -n "$CACHE_PID" ]; then
    wait "$CACHE_PID"
    echo "data_cache rc=$? (background)" | tee -a "$W/logs/steps.txt"
    tail -n 6 "$W/logs/data_cache.log"
    pack
fi
echo "done: $OUT/gpu.tgz"
