#!/usr/bin/env bash
# The whole GPU benchmark in device calls of under 10 minutes each (see benchmarks/README.md). Needs .gpukit/
# (benchmarks/gpu_kit.py) carried along; writes its logs, JSON and profile under $OUT (or ./gpu-results).
#   bash benchmarks/gpu_run.sh kernels    # CUDA tests, kernel resources + launch sweep, BERT-base bf16 bare vs headsim, naive, profile (≈ 8 min)
#   bash benchmarks/gpu_run.sh pipeline   # windowing scaling on the machine's CPUs, 20,000 windows around the model and end to end (≈ 6 min)
#   bash benchmarks/gpu_run.sh            # both (longer than one call allows: run them as two calls)
set -u
OUT=${OUT:-gpu-results}
PART=${1:-all}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpukit/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:src HEADSIM_MODEL=.gpukit/minilm PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore::SyntaxWarning
KIT=(--corpus .gpukit/corpus.jsonl --tokenizer .gpukit/tokenizer)
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import os, torch, transformers, triton; from headsim.workpool import available_cpus; \
print('torch', torch.__version__, 'transformers', transformers.__version__, 'triton', triton.__version__, \
'| CPUs: os.cpu_count', os.cpu_count(), 'usable', available_cpus())"
  if [ "$PART" = all ] || [ "$PART" = kernels ]; then
    echo "== CUDA tests"; timeout 140 python3 -m pytest -q -p no:cacheprovider -rs tests/test_kernels.py tests/test_backends.py tests/test_cuda.py
    echo "== kernel resources (static, this machine's Triton) and launch sweep, against the kernels before Launch"
    timeout 45 python3 benchmarks/kernel_resources.py --launch 32,4,2 --launch 16,4,2 --launch 16,8,2 --launch 32,4,2,triangle --launch 16,4,2,triangle \
      --baseline .gpukit/baseline_triton_kernels.py --json "$OUT/kernel-resources.json"
    timeout 120 python3 benchmarks/kernel_sweep.py --windows 2048 --stages 1,2 --baseline .gpukit/baseline_triton_kernels.py \
      --json "$OUT/kernel-sweep.json"
    LAUNCH=(); [ -s "$OUT/kernel-sweep.json" ] && LAUNCH=(--launch "$OUT/kernel-sweep.json")
    echo "== BERT-base (random weights) bf16: bare vs headsim (Triton kernels, the sweep's fastest launches) at 2048, 256, 1024 and 4096 windows per batch (the host no longer waits per layer: small batches show it); naive; profile"
    timeout 220 python3 benchmarks/throughput.py --device cuda --dtype bf16 --windows 8192 --batch-size 2048,256,1024,4096 \
      --naive-windows 4 --workers 0 "${KIT[@]}" "${LAUNCH[@]}" --profile "$OUT/profile-cuda.txt" --json "$OUT/throughput-cuda.json"
  fi
  if [ "$PART" = all ] || [ "$PART" = pipeline ]; then
    echo "== worker pool tests"; timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_workpool.py
    echo "== windowing alone on this machine's CPUs: Punkt, then pySBD, by number of worker processes"
    timeout 90 python3 benchmarks/throughput.py --device cuda "${KIT[@]}" --windows 20000 --sentences punkt \
      --windowing-only 0,4,8,15 --json "$OUT/windowing-punkt.json"
    timeout 90 python3 benchmarks/throughput.py --device cuda "${KIT[@]}" --windows 6000 --sentences pysbd \
      --windowing-only 4,8,15 --json "$OUT/windowing-pysbd.json"
    echo "== around the model: 20,000 windows end to end with the model step skipped (Punkt)"
    timeout 40 python3 benchmarks/throughput.py --device cuda --dtype bf16 "${KIT[@]}" --end-to-end 20000 --end-to-end-only \
      --around-model --sentences punkt --json "$OUT/around-model-punkt.json"
    echo "== end to end, 20,000 windows, Punkt then pySBD sentences"
    timeout 60 python3 benchmarks/throughput.py --device cuda --dtype bf16 "${KIT[@]}" --end-to-end 20000 --end-to-end-only \
      --sentences punkt --json "$OUT/end-to-end-punkt.json"
    timeout 100 python3 benchmarks/throughput.py --device cuda --dtype bf16 "${KIT[@]}" --end-to-end 20000 --end-to-end-only \
      --json "$OUT/end-to-end-pysbd.json"
  fi
} 2>&1 | grep -v "USDT:" | tee "$OUT/gpu-run-$PART.log"
