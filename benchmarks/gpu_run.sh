#!/usr/bin/env bash
# The whole GPU benchmark in one device call (see benchmarks/README.md). Needs .gpukit/ (benchmarks/gpu_kit.py)
# carried along; writes its logs, JSON and profile under $OUT (or ./gpu-results when OUT is unset).
set -u
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpukit/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:src HEADSIM_MODEL=.gpukit/minilm PYTHONUNBUFFERED=1
KIT=(--corpus .gpukit/corpus.jsonl --tokenizer .gpukit/tokenizer)
{
  nvidia-smi; python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
  echo "== CUDA tests"; timeout 120 python3 -m pytest -q -p no:cacheprovider -rs tests/test_cuda.py
  echo "== BERT-base (random weights) bf16: bare vs headsim, naive, windowing, end to end, profile"
  timeout 200 python3 benchmarks/throughput.py --device cuda --dtype bf16 --windows 8192 "${KIT[@]}" --end-to-end 20000 \
    --profile "$OUT/profile-cuda.txt" --json "$OUT/throughput-cuda.json"
  echo "== pretrained MiniLM bf16: agreement with fp32"
  timeout 90 python3 benchmarks/throughput.py --device cuda --model .gpukit/minilm --dtype bf16 --windows 4096 --workers 0 \
    --corpus .gpukit/corpus.jsonl --json "$OUT/throughput-cuda-minilm.json"
  echo "== BERT-base bf16, fused (torch.compile) statistics"
  timeout 150 python3 benchmarks/throughput.py --device cuda --dtype bf16 --windows 8192 --fused --workers 0 "${KIT[@]}" \
    --json "$OUT/throughput-cuda-fused.json"
  echo "== BERT-base bf16, batch 1024"
  timeout 60 python3 benchmarks/throughput.py --device cuda --dtype bf16 --windows 8192 --batch-size 1024 --workers 0 "${KIT[@]}" \
    --json "$OUT/throughput-cuda-b1024.json"
} 2>&1 | grep -v "USDT:" | tee "$OUT/gpu-run.log"
