"""A jit function whose `def` line is broken must not make the file look clean."""
from kernelsight.analysis import Config, analyze_source

BROKEN = '''import triton
import triton.language as tl

@triton.jit
def k(x_ptr, n)
    x = tl.load(x_ptr)

@triton.jit
def ok(x_ptr):
    tl.load(x_ptr)
'''


def test_broken_def_line_of_a_jit_function_is_reported_at_the_def():
    report = analyze_source(BROKEN, "k.py", Config(fast_only=True)).report
    [f] = [f for f in report.findings if f.code == "KS910"]
    assert (f.span.line, f.span.col) == (4, 0)
    assert "missing `:`" in f.message


def test_broken_def_does_not_stop_the_intact_kernel():
    report = analyze_source(BROKEN, "k.py").report
    assert [k.name for k in report.kernels] == ["ok"]


def test_broken_plain_function_is_not_a_kernel_finding():
    text = "def helper(x)\n    return x\n"
    assert analyze_source(text, "h.py", Config(fast_only=True)).report.findings == []
