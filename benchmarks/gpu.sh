#!/usr/bin/env bash
# The seed's GPU memory table, measured by sodkit on a CUDA machine (prepared; see RESULTS.md).
#
#   bash benchmarks/gpu.sh [OUT_DIR]        (from the repository root, after `make test`)
#
# Rows: plain / checkpointing / amp (fp16 + GradScaler) / amp+checkpointing, each in a fresh
# process (`sodkit bench memory`), for the demo config and a DUTS-sized one (FPN + ResNet-50,
# 320 x 320, batch 16); with 2 or more GPUs also 2-process DDP rows (torchrun), one figure per
# GPU. Printed like the seed's table: peak MiB allocated by PyTorch during a step (absolute,
# `max_memory_allocated`), and the step's own share above what was resident before it.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-output/gpu_bench}
PY=${PYTHON:-.venv/bin/python}
mkdir -p "$OUT"
if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "no CUDA device: nothing to measure here (see benchmarks/RESULTS.md)" >&2
    exit 1
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpus.txt"
GPUS=$("$PY" -c 'import torch; print(torch.cuda.device_count())')
DUTS=(configs/duts_fpn_r50.yaml model.pretrained=null data.size=320 data.batch_size=16
      model.backbone=resnet50)

"$PY" -m sodkit bench memory configs/demo.yaml --steps 5 --json "$OUT/demo.json"
"$PY" -m sodkit bench memory "${DUTS[@]}" --steps 5 --json "$OUT/duts_r50.json"

if [ "$GPUS" -ge 2 ]; then
    for variant in "plain:off:fp32" "amp:off:fp16" "amp+checkpointing:all:fp16"; do
        IFS=: read -r name ckpt precision <<< "$variant"
        "$PY" -m torch.distributed.run --standalone --nproc_per_node=2 -m sodkit.engine.bench \
            "${DUTS[@]}" model.checkpointing="$ckpt" runtime.precision="$precision" --steps 5 \
            > "$OUT/ddp_${name}.jsonl"
    done
fi

"$PY" - "$OUT" <<'PYEOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
print("\n| config | variant | peak MiB (absolute) | step MiB (above resident) | saved MiB | step s |")
print("|---|---|---:|---:|---:|---:|")
for name in ("demo", "duts_r50"):
    for row in json.loads((out / f"{name}.json").read_text()):
        print(f"| {name} | {row['variant']} | {row['peak_total_mb']:.0f} | {row['peak_mb']:.0f} "
              f"| {row['saved_mb']:.0f} | {row['step_s']:.3f} |")
for path in sorted(out.glob("ddp_*.jsonl")):
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]
    rows.sort(key=lambda r: r["rank"])
    peaks = " + ".join(f"{r['peak_total_mb']:.0f}" for r in rows)
    steps = " + ".join(f"{r['peak_mb']:.0f}" for r in rows)
    print(f"| duts_r50 | DDP x2 {path.stem[4:]} | {peaks} | {steps} | "
          f"{rows[0]['saved_mb']:.0f} | {rows[0]['step_s']:.3f} |")
PYEOF
