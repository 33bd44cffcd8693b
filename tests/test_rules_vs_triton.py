"""Ground truth for the KS5xx rules: each case is compiled by the installed Triton for an H100
target (no GPU needed), and the analysis must flag exactly the kernels Triton rejects."""
from __future__ import annotations

import importlib.util
import textwrap

import pytest

from kernelsight.analysis import analyze_source
from kernelsight.analysis.config import Config

triton = pytest.importorskip("triton")

HEAD = "import triton\nimport triton.language as tl\n\n"

# name -> (code the analysis must report or None, kernel source, signature)
CASES = {
    "arange_12": ("KS501", """
        @triton.jit
        def kern(x_ptr):
            x = tl.arange(0, 12)
            tl.store(x_ptr + x, x)
        """, {"x_ptr": "*i32"}),
    "arange_16": (None, """
        @triton.jit
        def kern(x_ptr):
            x = tl.arange(0, 16)
            tl.store(x_ptr + x, x)
        """, {"x_ptr": "*i32"}),
    "arange_runtime": ("KS502", """
        @triton.jit
        def kern(x_ptr, BLOCK):
            x = tl.arange(0, BLOCK)
            tl.store(x_ptr + x, x)
        """, {"x_ptr": "*i32", "BLOCK": "i32"}),
    "zeros_runtime": ("KS504", """
        @triton.jit
        def kern(x_ptr, N):
            x = tl.zeros((N,), dtype=tl.int32)
            tl.store(x_ptr, tl.sum(x, 0))
        """, {"x_ptr": "*i32", "N": "i32"}),
    "dot_k8_fp16": ("KS503", """
        @triton.jit
        def kern(a_ptr, b_ptr, c_ptr):
            a = tl.load(a_ptr + tl.arange(0, 16)[:, None] * 8 + tl.arange(0, 8)[None, :])
            b = tl.load(b_ptr + tl.arange(0, 8)[:, None] * 16 + tl.arange(0, 16)[None, :])
            c = tl.dot(a, b)
            tl.store(c_ptr + tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :], c)
        """, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"}),
    "dot_m8_n8_k16_fp16": (None, """
        @triton.jit
        def kern(a_ptr, b_ptr, c_ptr):
            a = tl.load(a_ptr + tl.arange(0, 8)[:, None] * 16 + tl.arange(0, 16)[None, :])
            b = tl.load(b_ptr + tl.arange(0, 16)[:, None] * 8 + tl.arange(0, 8)[None, :])
            c = tl.dot(a, b)
            tl.store(c_ptr + tl.arange(0, 8)[:, None] * 8 + tl.arange(0, 8)[None, :], c)
        """, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"}),
    "continue": ("KS505", """
        @triton.jit
        def kern(x_ptr, n):
            for t in range(4):
                if t >= n:
                    continue
                tl.store(x_ptr + t, t)
        """, {"x_ptr": "*i32", "n": "i32"}),
    "try": ("KS505", """
        @triton.jit
        def kern(x_ptr):
            try:
                tl.store(x_ptr, 1)
            except Exception:
                pass
        """, {"x_ptr": "*i32"}),
    "listcomp_range": ("KS505", """
        @triton.jit
        def kern(x_ptr):
            v = [i for i in range(4)]
            tl.store(x_ptr, v[0])
        """, {"x_ptr": "*i32"}),
    "raise_in_constexpr_branch": (None, """
        @triton.jit
        def kern(x_ptr, FLAG: tl.constexpr = 0):
            if FLAG == 1:
                raise ValueError("unsupported")
            tl.store(x_ptr, 1)
        """, {"x_ptr": "*i32", "FLAG": "constexpr"}),
    "program_id_3": ("KS507", """
        @triton.jit
        def kern(x_ptr):
            tl.store(x_ptr, tl.program_id(3))
        """, {"x_ptr": "*i32"}),
}


def _compile(tmp_path, name: str, src: str, signature: dict) -> Exception | None:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    path = tmp_path / f"case_{name}.py"
    path.write_text(HEAD + textwrap.dedent(src))
    spec = importlib.util.spec_from_file_location(f"case_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sig = {k: v for k, v in signature.items() if v != "constexpr"}
    constexprs = {(i,): 0 for i, (k, v) in enumerate(signature.items()) if v == "constexpr"}
    if constexprs:
        sig.update({k: "constexpr" for k, v in signature.items() if v == "constexpr"})
    try:
        triton.compile(ASTSource(module.kern, sig, constexprs=constexprs),
                       target=GPUTarget("cuda", 90, 32))
    except Exception as exc:  # Triton raises CompilationError and friends
        return exc
    return None


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_agrees_with_the_triton_compiler(tmp_path, name, monkeypatch):
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    code, src, signature = CASES[name]
    text = HEAD + textwrap.dedent(src)
    found = [f.code for f in analyze_source(text, "k.py", Config(fast_only=True)).report.findings
             if f.code.startswith("KS5")]
    error = _compile(tmp_path, name, src, signature)
    if code is None:
        assert found == [] and error is None, (found, error)
    else:
        assert found == [code], found
        assert error is not None, f"Triton {triton.__version__} compiled {name}"
