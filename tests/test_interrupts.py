"""Signals held back by :class:`headsim.interrupts.Deferred` until its block is done."""

from __future__ import annotations

import signal

import pytest

from headsim.interrupts import Deferred, Interrupted, raising


def _signal_self(signum: int) -> None:
    signal.raise_signal(signum)  # to this thread: its Python handler runs at the next bytecode, inside the block


def test_a_signal_in_a_deferred_block_is_raised_when_the_block_is_done():
    done = []
    with raising(), pytest.raises(Interrupted) as caught:
        with Deferred():
            _signal_self(signal.SIGTERM)
            _signal_self(signal.SIGINT)
            done.append("the block ran to its end")
    assert done == ["the block ran to its end"]
    assert caught.value.signum == signal.SIGTERM and caught.value.exit_code == 143  # the first signal, once


def test_the_handlers_outside_answer_the_deferred_signal():
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own: KeyboardInterrupt
    try:
        with pytest.raises(KeyboardInterrupt):
            with Deferred():
                _signal_self(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, saved)


def test_a_deferred_block_without_a_signal_changes_nothing():
    with raising():
        before = signal.getsignal(signal.SIGINT)
        with Deferred() as deferred:
            pass
        assert deferred.signum is None and signal.getsignal(signal.SIGINT) is before
