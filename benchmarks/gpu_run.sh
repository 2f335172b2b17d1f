#!/usr/bin/env bash
# The whole GPU benchmark in one device call (see benchmarks/README.md). Needs .gpukit/ (benchmarks/gpu_kit.py)
# carried along; writes its logs, JSON and profile under $OUT (or ./gpu-results when OUT is unset).
set -u
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpukit/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:src HEADSIM_MODEL=.gpukit/minilm PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore::SyntaxWarning
KIT=(--corpus .gpukit/corpus.jsonl --tokenizer .gpukit/tokenizer)
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import torch, transformers, triton; print('torch', torch.__version__, 'transformers', transformers.__version__, 'triton', triton.__version__)"
  echo "== CUDA tests"; timeout 120 python3 -m pytest -q -p no:cacheprovider -rs tests/test_kernels.py tests/test_cuda.py
  echo "== BERT-base (random weights) bf16: bare vs headsim (Triton kernels) at 2048 and 1024, 4096 windows per batch; naive; profile"
  timeout 200 python3 benchmarks/throughput.py --device cuda --dtype bf16 --windows 8192 --batch-size 2048,1024,4096 \
    --naive-windows 4 --workers 0 "${KIT[@]}" --profile "$OUT/profile-cuda.txt" --json "$OUT/throughput-cuda.json"
  echo "== end to end, 20,000 windows, pySBD then Punkt sentences"
  timeout 100 python3 benchmarks/throughput.py --device cuda --dtype bf16 "${KIT[@]}" --end-to-end 20000 --end-to-end-only \
    --json "$OUT/end-to-end-pysbd.json"
  timeout 70 python3 benchmarks/throughput.py --device cuda --dtype bf16 "${KIT[@]}" --end-to-end 20000 --end-to-end-only \
    --sentences punkt --json "$OUT/end-to-end-punkt.json"
} 2>&1 | grep -v "USDT:" | tee "$OUT/gpu-run.log"
