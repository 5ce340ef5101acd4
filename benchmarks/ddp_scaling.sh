#!/usr/bin/env bash
# Training throughput of `sodkit train` under torchrun with 1, 2, 4, 8 processes on one machine
# (weak scaling: the per-process batch stays, the global batch grows with the process count).
#
#   benchmarks/ddp_scaling.sh [key=value ...]                      # GPUs: 1 2 4 8 (as many as exist)
#   DEVICE=cpu COUNTS="1 2" benchmarks/ddp_scaling.sh [key=value ...]   # CPU, cores split evenly
#
# Environment: CONFIG (default configs/demo.yaml: the built-in data, nothing to download),
# COUNTS (default "1 2 4 8"), DEVICE (cuda or cpu; default cuda when nvidia-smi finds a GPU),
# STEPS (optimizer steps per run, default 40), OUT (default output/ddp_scaling).
# Default overrides make the demo a GPU-sized load (ResNet-50, 320 px, 16 images per GPU); later
# key=value arguments win. Prints, per process count, the global images/s (mean over the log
# windows after the first quarter of the steps: warm-up, cuDNN autotuning, worker start), the
# speed-up over the first count and the efficiency (speed-up / process-count ratio; meaningful on
# GPUs, where each process brings its own device). Each run's log: $OUT/n<N>/train.log.
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${CONFIG:-configs/demo.yaml}
COUNTS=${COUNTS:-"1 2 4 8"}
STEPS=${STEPS:-40}
OUT=${OUT:-output/ddp_scaling}
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
if [ -z "${DEVICE:-}" ]; then
  DEVICE=$(nvidia-smi -L >/dev/null 2>&1 && echo cuda || echo cpu)
fi
if [ "$DEVICE" = cuda ]; then
  AVAILABLE=$(nvidia-smi -L | wc -l)
  DEFAULTS=(model.backbone=resnet50 data.size=320 data.batch_size=16 data.num_workers=6)
else
  AVAILABLE=$(nproc)
  DEFAULTS=()
fi
mkdir -p "$OUT"
printf "%-10s %-13s %-10s %-9s %s\n" processes global_batch "images/s" speed-up efficiency
BASE=""; BASE_N=""
for n in $COUNTS; do
  if [ "$n" -gt "$AVAILABLE" ]; then
    echo "$n: skipped ($AVAILABLE ${DEVICE} devices/cores here)"; continue
  fi
  if [ "$DEVICE" = cpu ]; then
    threads=$(( AVAILABLE / n )); export OMP_NUM_THREADS=$(( threads > 0 ? threads : 1 ))
  fi
  # enough data for STEPS steps in one epoch at this process count is not guaranteed: repeat
  # epochs and cap the total with steps_per_epoch.
  "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node="$n" -m sodkit train "$CONFIG" \
    name="n$n" output_root="$OUT" data.test=[] train.image_every=0 train.log_every=5 \
    train.epochs=$(( (STEPS + 4) / 5 )) train.steps_per_epoch=5 train.checkpoint_every=1000 \
    runtime.sync_bn=true runtime.device="$DEVICE" "${DEFAULTS[@]}" "$@" --overwrite \
    > "$OUT/n$n.out" 2>&1 || { echo "$n: failed, see $OUT/n$n.out"; tail -n 20 "$OUT/n$n.out"; exit 1; }
  read -r batch rate < <("$PYTHON" - "$OUT/n$n/train.log" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
batch = re.search(r"global batch (\d+)", text).group(1)
rows = [(int(s), int(t), float(r)) for s, t, r in
        re.findall(r"step (\d+)/(\d+) .* ([\d.]+) img/s", text)]
kept = [r for s, t, r in rows if s > t // 4] or [r for _, _, r in rows]
print(batch, f"{sum(kept) / len(kept):.1f}")
PY
)
  BASE=${BASE:-$rate}; BASE_N=${BASE_N:-$n}
  read -r up eff < <(awk -v r="$rate" -v b="$BASE" -v n="$n" -v m="$BASE_N" \
    'BEGIN { printf "%.2fx %.0f%%\n", r / b, 100 * r * m / (b * n) }')
  printf "%-10s %-13s %-10s %-9s %s\n" "$n" "$batch" "$rate" "$up" "$eff"
done
