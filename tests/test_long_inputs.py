"""Long inputs: attention captured in blocks of query rows equals the one-block capture (every
interface family of tests/test_architectures.py; 1e-5, the tolerance of the tap itself: a block's matrix
products round like any other shape's, and later layers inherit it), blocks arrive in order, cover every row."""

from __future__ import annotations

import pytest
import torch

from headsim.model.arch import ARCHS
from headsim.model.tap import Tap
from headsim.model.verify import random_batch, tiny_model
from headsim.models import from_pretrained_objects
from headsim.windows import check_seq_len

ROWS = sorted({a.model_types[0] for a in ARCHS})


@pytest.fixture(scope="module", params=ROWS)
def loaded(request):
    model, _ = tiny_model(request.param)
    return from_pretrained_objects(model, None, request.param)


def test_blocks_of_query_rows_equal_one_block(loaded):
    if not loaded.arch.interface:
        pytest.skip("attention read from output_attentions (one block)")
    ids, mask = random_batch(3, lengths=(23, 17, 9))
    whole = Tap(loaded, attention=True).run(ids, mask).layers
    tiled = Tap(loaded, attention=True, tile_rows=4).run(ids, mask).layers
    seen: dict[int, list] = {}

    def on_tile(layer, rows, probs):
        seen.setdefault(layer, []).append((rows, probs.clone()))

    streamed = Tap(loaded, attention=True, tile_rows=5).run(ids, mask, on_tile=on_tile).layers
    rows = mask.bool()[:, None, :, None].expand(-1, loaded.n_heads, -1, 23)
    for li, cap in whole.items():
        torch.testing.assert_close(tiled[li].attention[rows], cap.attention[rows], rtol=0, atol=1e-5)
        scale = float(cap.head_outputs.abs().max())
        torch.testing.assert_close(tiled[li].head_outputs, cap.head_outputs, rtol=0, atol=1e-5 * scale)
        assert streamed[li].attention is None
        assert [r.start for r, _ in seen[li]] == list(range(0, 23, 5))
        joined = torch.cat([p for _, p in seen[li]], dim=2)
        torch.testing.assert_close(joined[rows], cap.attention[rows], rtol=0, atol=1e-5)


def test_a_window_past_the_position_limit():
    """An error naming both numbers; a warning naming them for a rotary family, which then runs."""
    from headsim.errors import HeadsimError
    from headsim.extraction import extract

    bert = from_pretrained_objects(tiny_model("bert")[0], None, "bert")
    with pytest.raises(HeadsimError, match=r"^seq_len 80 is longer than this model's position limit of 64 tokens"):
        extract("Some text here. " * 40, bert, seq_len=80)
    llama = from_pretrained_objects(tiny_model("llama")[0], None, "llama")
    assert llama.extrapolates and not bert.extrapolates
    with pytest.warns(UserWarning, match="seq_len 80 is longer than this model's position limit of 64 tokens"):
        assert check_seq_len(80, llama.max_seq_len, llama.extrapolates) == 80
