#!/usr/bin/env bash
# Every check of the GPU path in one run (about ten minutes on one GPU, plus a few for the 16
# BiRefNet processes of section 6), figures written into
# benchmarks/RESULTS.md (section <!-- gpu -->). Fails loudly: the first wrong result stops the
# script with a FAIL row and a non-zero exit. See docs/distributed.md, "GPU and NCCL review".
#
#   bash benchmarks/gpu.sh [OUT_DIR]        (from the repository root, after `make test`)
#
# 1. CUDA in one process (benchmarks/gpu_cuda.py): device and CUDA RNG state, peak memory per
#    device, host-device syncs per step (CUDA sync debug mode), fp16 + GradScaler overflow skip,
#    channels_last, torch.compile.
# 2. The seed's memory table: plain / checkpointing / amp (fp16) / amp+checkpointing.
# 3. Training runs of the demo: fp16 (GradScaler state saved), channels_last, torch.compile.
# 4. DDP: 2 processes x batch B == 1 process x 2B (sync_bn, SGD). NCCL needs one GPU per rank
#    (it refuses two ranks on one GPU), so with one GPU the two processes share it over gloo
#    (runtime.dist_backend=gloo, CUDA tensors) and the NCCL rows need a 2-GPU machine.
# 5. Evaluation exactness: `sodkit test` under torchrun == one process (metrics, PNG bytes).
# 6. BiRefNet Swin-L (benchmarks/birefnet_memory.py): a training step's peak memory at 1024 px
#    per batch size, plain / checkpointing / bf16 / both, and at 2048 px: does it fit in 24 GB.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-output/gpu_check}
PY=${PYTHON:-.venv/bin/python}
export CUBLAS_WORKSPACE_CONFIG=:4096:8  # deterministic cuBLAS for the exactness checks
export PYTHONPATH="$PWD/benchmarks${PYTHONPATH:+:$PYTHONPATH}"
rm -rf "$OUT" && mkdir -p "$OUT"
SUMMARY="$OUT/summary.md"
if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "gpu.sh: no CUDA device: nothing to check here" >&2
    exit 1
fi
GPUS=$("$PY" -c 'import torch; print(torch.cuda.device_count())')
if [ "$GPUS" -ge 2 ]; then BACKEND=nccl; else BACKEND=gloo; fi
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
trap 'echo "gpu.sh: FAILED at line $LINENO (see $OUT)" >&2' ERR

record() { tee -a "$SUMMARY"; }     # a check's row(s) into the summary, and on screen
check() { "$PY" benchmarks/gpu_checks.py "$@" | record; }  # pipefail: FAIL stops here
torchrun() { "$PY" -m torch.distributed.run --standalone --nproc_per_node=2 "$@"; }

{
    echo "### GPU path ($GPU_NAME x $GPUS, torch $("$PY" -c 'import torch; print(torch.__version__)'), $(date +%F))"
    echo
    echo "Command: \`bash benchmarks/gpu.sh\`; 2-process backend: $BACKEND."
    echo
    echo "| check | result | figure |"
    echo "|---|---|---|"
} > "$SUMMARY"

# 1. in-process CUDA checks
check cuda

# 2. memory table (each variant in a fresh process)
"$PY" -m sodkit bench memory configs/demo.yaml --steps 5 --json "$OUT/memory.json" \
    > "$OUT/memory.md"
# 3. training runs: the demo data, a few steps each
COMMON=(output_root="$OUT/runs" train.epochs=1 train.steps_per_epoch=20 train.log_every=5
        train.image_every=0 data.num_workers=4)
run_train() { "$PY" -m sodkit train configs/demo.yaml "${COMMON[@]}" "$@" > "$OUT/$1.log" 2>&1; }
run_train name=fp16 runtime.precision=fp16
check check-run "$OUT/runs/fp16" --scaler --cuda-rng 1 --label "train fp16 + GradScaler"
run_train name=nhwc runtime.channels_last=true
check check-run "$OUT/runs/nhwc" --label "train channels_last"
run_train name=compiled runtime.compile=true
check check-run "$OUT/runs/compiled" --label "train torch.compile"

# 4. DDP: 2 x B == 1 x 2B (deterministic kernels, SGD, sync_bn, no test set)
DDP=(configs/demo.yaml output_root="$OUT/runs" data.test=[] train.epochs=1
     train.steps_per_epoch=4 train.log_every=1 train.image_every=0
     runtime.sync_bn=true runtime.deterministic=true optim.name=sgd optim.lr=0.05
     data.num_workers=2 runtime.dist_backend="$BACKEND")
"$PY" -m sodkit train "${DDP[@]}" name=ddp1 data.batch_size=16 > "$OUT/ddp1.log" 2>&1
torchrun -m sodkit train "${DDP[@]}" name=ddp2 data.batch_size=8 > "$OUT/ddp2.log" 2>&1
check compare-weights "$OUT/runs/ddp1/checkpoints/last.pt" "$OUT/runs/ddp2/checkpoints/last.pt" \
    --atol 1e-3 --label "DDP ($BACKEND) 2 x 8 == 1 x 16, 4 SGD steps"
check check-run "$OUT/runs/ddp2" --cuda-rng 2 --label "DDP checkpoint: each rank's CUDA RNG"

# 5. evaluation under torchrun == one process (the fp16 run's checkpoint, fp32 evaluation)
CKPT="$OUT/runs/fp16/checkpoints/last.pt"
TEST=(configs/demo.yaml output_root="$OUT/runs" name=fp16 runtime.deterministic=true
      data.test_batch_size=1)
"$PY" -m sodkit test "${TEST[@]}" --checkpoint "$CKPT" --out "$OUT/eval1" > "$OUT/eval1.log" 2>&1
torchrun -m sodkit test "${TEST[@]}" runtime.dist_backend="$BACKEND" --checkpoint "$CKPT" \
    --out "$OUT/eval2" > "$OUT/eval2.log" 2>&1
check compare-eval "$OUT/eval1" "$OUT/eval2" --tol 1e-12 \
    --label "sodkit test, 2 processes ($BACKEND) == 1 process"

# 6. BiRefNet Swin-L at 1024 and 2048 px (the recipe when it exists; random weights)
BIREFNET_CFG=configs/dis5k_birefnet_swinl.yaml
[ -f "$BIREFNET_CFG" ] || BIREFNET_CFG=configs/demo.yaml
"$PY" benchmarks/birefnet_memory.py "$BIREFNET_CFG" --backbone swin_large_patch4_window12_384 \
    --run 1024:2 --run 1024:4 --run 1024:8 --run 2048:2 --json "$OUT/birefnet_memory.json" \
    > "$OUT/birefnet_memory.md" 2> "$OUT/birefnet_memory.log"
echo "| BiRefNet Swin-L memory | ok | $(tail -1 "$OUT/birefnet_memory.md") |" | record

if [ "$GPUS" -lt 2 ]; then
    echo "| NCCL with 2 ranks | not run | needs 2 GPUs (NCCL refuses 2 ranks on one GPU) |" | record
fi
{ echo; echo "Memory table (\`sodkit bench memory configs/demo.yaml --steps 5\`, amp = fp16):"
  echo; cat "$OUT/memory.md"
  echo; echo "BiRefNet Swin-L (\`python benchmarks/birefnet_memory.py $BIREFNET_CFG --run 1024:2"
  echo "--run 1024:4 --run 1024:8 --run 2048:2\`; step adds: max_memory_allocated during the"
  echo "step minus before; total: max_memory_allocated; fits 24 GB: total + 1.5 GiB <= 24 GiB):"
  echo; cat "$OUT/birefnet_memory.md"; } >> "$SUMMARY"
"$PY" benchmarks/gpu_checks.py write-results "$SUMMARY" benchmarks/RESULTS.md
echo "gpu.sh: all checks passed; benchmarks/RESULTS.md updated"
