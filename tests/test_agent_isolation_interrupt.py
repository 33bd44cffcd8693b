"""A Ctrl-C in the parent while it watches a worker must not leave the worker running."""
from __future__ import annotations

import os

import pytest

from kernelsight.agent import isolation


def test_interrupt_while_watching_kills_the_worker(monkeypatch, tmp_path):
    seen = {}

    def interrupted_watch(proc, *args, **kwargs):
        seen["proc"] = proc
        raise KeyboardInterrupt

    monkeypatch.setattr(isolation, "_watch", interrupted_watch)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "PYTHONPATH")}
    with pytest.raises(KeyboardInterrupt):
        isolation.run_worker({"stages": ["static"]}, limits=isolation.Limits(), env=env,
                             use_rlimit_as=False, workdir=tmp_path)
    proc = seen["proc"]
    assert proc.poll() is not None, "the worker outlived the interrupted parent"
