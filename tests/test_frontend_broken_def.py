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


BROKEN_BODY = '''import triton
import triton.language as tl


@triton.jit
def k(x_ptr, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid:

    offs = tl.arange(0, BLOCK)
'''


def test_kernel_syntax_error_message_gives_file_lines_only():
    report = analyze_source(BROKEN_BODY, "k.py", Config(fast_only=True)).report
    [f] = [f for f in report.findings if f.code == "KS910"]
    # Python says "after 'if' statement on line 3" of the snippet: the `if` is file line 8
    assert "'if' statement on line 8" in f.message and f.message.endswith("at line 10")


BROKEN_HOST = '''import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


def add(x):
    N = x.numel() +
    y = x.new_empty(N)
    add_kernel[(triton.cdiv(N, 128),)](x, y, N, BLOCK=128)
'''


def test_host_syntax_error_is_reported_and_the_kernel_is_still_analysed():
    report = analyze_source(BROKEN_HOST, "add.py").report
    [f] = [f for f in report.findings if f.code == "KS910"]
    assert (f.span.line, f.span.col) == (11, 19) and f.kernel is None
    assert "host code does not parse" in f.message and "line 12, column 20" in f.message
    assert [(k.name, k.status) for k in report.kernels] == [("add_kernel", "analysed")]
