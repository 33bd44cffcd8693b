"""The registry of diagnostic codes: the one source of truth for titles, default severities,
explanations and wrong/right examples. docs/codes/KSxxx.md pages are generated from it
(``python -m kernelsight.analysis.codes docs/codes``) and a test keeps them in sync; hover and
SARIF rules read it too.

Families (from ../shared/spec/annotations.md): KS1xx bounds and overflow, KS2xx tag
invariants, KS3xx coverage/races/footprint, KS4xx numerics, KS5xx Triton language rules,
KS6xx performance, KS9xx annotation syntax and unsupported constructs.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from .model import Severity


@dataclass(frozen=True)
class Code:
    """One diagnostic code.

    Attributes:
        code: e.g. ``"KS101"``.
        name: a short kebab-case name, e.g. ``"out-of-bounds-access"`` (SARIF rule name).
        title: the one-line title.
        severity: the default severity (configurable per code).
        why: why it matters, one paragraph of markdown.
        wrong: a minimal wrong example (Triton code).
        right: the corrected example.
    """

    code: str
    name: str
    title: str
    severity: Severity
    why: str
    wrong: str
    right: str


_E, _W, _I = Severity.ERROR, Severity.WARNING, Severity.INFO

CODES: dict[str, Code] = {}


def _code(code: str, name: str, title: str, severity: Severity, why: str, wrong: str,
          right: str) -> None:
    CODES[code] = Code(code, name, title, severity, why.strip(), wrong.strip("\n"),
                       right.strip("\n"))


# --- KS1xx bounds and overflow -------------------------------------------------------------
_code("KS101", "out-of-bounds-access", "Access outside a declared tensor", _E, """
A `tl.load` or `tl.store` through a pointer declared with `#@ tensor` (or whose tensor a
launch site in the same file fixes completely: `y = torch.empty_like(x)` passed with
`x.numel()`, say) reaches a logical coordinate outside the tensor's dimensions for an element
that its mask lets through. On the GPU
this reads garbage or corrupts a neighbouring allocation; it rarely faults.""", """
#@ tensor X = x_ptr[n: N]
offs = pid * BLOCK + tl.arange(0, BLOCK)
x = tl.load(x_ptr + offs)            # the last program reads past N
""", """
#@ tensor X = x_ptr[n: N]
offs = pid * BLOCK + tl.arange(0, BLOCK)
x = tl.load(x_ptr + offs, mask=offs < N)
""")
_code("KS102", "outside-inferred-extent", "Access outside the extent its mask implies", _E, """
Without declarations, the analysis infers a 1-D extent from the masks used with a pointer
(`offs < n` means the pointer addresses `n` elements). An access whose offset can be negative,
or can reach past that extent, for an element the mask lets through touches memory the kernel
does not own.""", """
mask = offs < n
prev = tl.load(ptr + offs - 1, mask=mask)      # lane offs=0 reads ptr[-1]
""", """
mask = offs < n
prev = tl.load(ptr + offs - 1, mask=mask & (offs > 0), other=0)
""")
_code("KS103", "unmasked-access", "Unmasked access beside masked accesses of the same pointer",
      _E, """
Other accesses through this pointer are masked, which says the tile can run past the tensor,
but this one is not. The tail program reads or writes out of bounds. (An unmasked store
through *another* pointer is KS101 when that tensor's extent is known: from `#@ tensor`, or
from a launch site in the same file.)""", """
x = tl.load(x_ptr + offs, mask=offs < n)
tl.store(x_ptr + offs, x * 2)        # x_ptr is written for every lane
""", """
x = tl.load(x_ptr + offs, mask=offs < n)
tl.store(x_ptr + offs, x * 2, mask=offs < n)
""")
_code("KS104", "mask-not-applied", "A computed mask is not applied to the access it fits", _E, """
The kernel builds a bounds mask over exactly the offsets of this access, then performs the
access without it. Usually a forgotten `mask=` argument: the tail tiles write past the end of
the tensor.""", """
mask = (rm < M)[:, None] & (rn < N)[None, :]
tl.store(c_ptrs, acc)
""", """
mask = (rm < M)[:, None] & (rn < N)[None, :]
tl.store(c_ptrs, acc, mask=mask)
""")
_code("KS105", "load-under-where", "A load inside tl.where is not guarded by the where", _E, """
`tl.where(cond, a, tl.load(p))` evaluates both arms for every lane: the load executes even in
the lanes the `where` discards. If its offset leaves the tensor there, the kernel reads out of
bounds. Guard the load's own mask instead.""", """
prev = tl.load(ptr + offs - 1, mask=offs < n)
start = tl.where(offs == 0, 0, prev)
""", """
start = tl.load(ptr + offs - 1, mask=(offs < n) & (offs > 0), other=0)
""")
_code("KS106", "offset-not-decomposable", "An offset does not match the declared layout", _W,
      """
The offset added to a declared pointer cannot be written as a sum of coordinates times the
declared strides, so its elements have no logical coordinates. Usually a stride is missing or
belongs to another dimension.""", """
#@ tensor A = a_ptr[m: M, k: K] strides(stride_am, stride_ak)
a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_am)
""", """
#@ tensor A = a_ptr[m: M, k: K] strides(stride_am, stride_ak)
a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak)
""")
_code("KS107", "foreign-stride", "A stride of one tensor addresses another", _W, """
At the launch site this stride argument is taken from a different tensor than the pointer it is
multiplied into. It works only while both tensors happen to share a layout.""", """
kernel[grid](x, y, x.stride(0), ...)
tl.store(y_ptr + row * x_row_stride + cols, v)
""", """
kernel[grid](x, y, x.stride(0), y.stride(0), ...)
tl.store(y_ptr + row * y_row_stride + cols, v)
""")
_code("KS110", "int32-offset-overflow", "int32 offset can overflow", _W, """
`tl.program_id`, `tl.arange` and integer arguments are 32-bit. An offset such as
`row * row_stride` passes 2^31 - 1 once the tensor holds more than 2^31 elements and wraps
negative: an illegal memory access or silent corruption. Widen to int64 before the
multiplication. The analysis uses the `assume`d sizes or the configured maximum
(`max-elements`, default 2^34 elements). A warning by default: the failure needs a tensor of
more than 2^31 elements (4 GiB of fp16), which many kernels never see, while tutorial-style
code has it everywhere; make it an error with `severity = { KS110 = "error" }` where such
tensors are processed, or declare the real sizes with `#@ assume`.""", """
row = tl.program_id(0)
x = tl.load(x_ptr + row * row_stride + cols, mask=mask)
""", """
row = tl.program_id(0).to(tl.int64)
x = tl.load(x_ptr + row * row_stride + cols, mask=mask)
""")

# --- KS2xx tag invariants ------------------------------------------------------------------
_code("KS201", "dot-contraction-mismatch", "tl.dot contracts unequal coordinates", _E, """
At `tl.dot(a, b)` the contracted axis of `a` and of `b` must carry the same logical coordinate
for every element (`a.k == b.k`). A pointer advanced by the wrong stride or block size pairs
`A[m, k]` with `B[k', n]`: the product is wrong for every output.""", """
a_ptrs += BLOCK_K * stride_ak
b_ptrs += BLOCK_N * stride_bk      # should advance by BLOCK_K
""", """
a_ptrs += BLOCK_K * stride_ak
b_ptrs += BLOCK_K * stride_bk
""")
_code("KS202", "mixed-coordinates", "Elementwise operation mixes unequal coordinates", _E, """
Two tiles combined elementwise carry the same dimension name with different coordinates (row r
combined with statistics of row r'). Typically a broadcast on the wrong axis or a reduction
along the wrong axis.""", """
m = tl.max(x, axis=0)          # per column
y = x - m[:, None]             # used as per row
""", """
m = tl.max(x, axis=1)
y = x - m[:, None]
""")
_code("KS203", "store-misaligned", "Stored value does not carry the coordinates it is stored at",
      _E, """
The value written at `OUT[i, j]` must have been computed from data tagged `i` and `j`. A
transposed or shifted store writes correct numbers to the wrong place.""", """
tl.store(c_ptr + rn[:, None] * stride_cm + rm[None, :] * stride_cn, acc)
""", """
tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc)
""")
_code("KS204", "assert-failed", "A #@ assert does not hold", _E, """
The relational constraint written with `#@ assert` is false for some program, element or loop
iteration; the counterexample shows one.""", """
#@ assert a.k == b.k
acc += tl.dot(a, b)
""", """
#@ assert a.k == b.k    # holds once both pointers advance by BLOCK_K
acc += tl.dot(a, b)
""")
_code("KS205", "partner-not-rescaled", "A partner of a running maximum is not rescaled", _E, """
With `#@ partners m_i: acc, l_i`, every loop iteration that updates `m_i` must rescale `acc` and
`l_i` by a factor computed from the old and the new `m_i` (online softmax). Forgetting one gives
a wrong normalisation whenever the maximum changes.""", """
alpha = tl.exp(m_i - m_new)
l_i = l_i * alpha + tl.sum(p, 1)
acc = acc + tl.dot(p, v)            # acc is not rescaled by alpha
m_i = m_new
""", """
alpha = tl.exp(m_i - m_new)
l_i = l_i * alpha + tl.sum(p, 1)
acc = acc * alpha[:, None] + tl.dot(p, v)
m_i = m_new
""")

# --- KS3xx coverage, races, footprint -----------------------------------------------------
_code("KS301", "elements-never-written", "Some output elements are never written", _E, """
Across the whole grid, some element of an output tensor named in `computes` (or inferred from
the launch site) is written by no program: the grid is too short, a block is skipped, or the
store is masked too tightly. The output keeps whatever memory held before.""", """
#@ grid (N // BLOCK,)
""", """
#@ grid (cdiv(N, BLOCK),)
""")
_code("KS302", "write-race", "Two programs write the same element", _E, """
Two different programs of the grid store to the same output element, so the result depends on
scheduling. Overlapping tiles, or a store address that ignores a program id axis.""", """
offs = pid * (BLOCK // 2) + tl.arange(0, BLOCK)     # tiles overlap
tl.store(y_ptr + offs, y, mask=offs < n)
""", """
offs = pid * BLOCK + tl.arange(0, BLOCK)
tl.store(y_ptr + offs, y, mask=offs < n)
""")
_code("KS303", "footprint-incomplete", "A written element does not read all of its inputs", _E,
      """
`#@ computes C[m, n] from A[m, :], B[:, n]` says every written element depends on whole rows or
columns. A reduction loop that stops one block early, or a `BLOCK` smaller than the row, leaves
some inputs unread: the result is silently partial.""", """
for k in range(0, K - BLOCK_K, BLOCK_K):   # stops one block early
""", """
for k in range(0, K, BLOCK_K):
""")
_code("KS304", "footprint-foreign", "A written element reads inputs outside its footprint", _E,
      """
An element of the output reads input elements that `computes` does not name for it, e.g. an MoE
block that loads another expert's weights, or a row combined with another row.""", """
off_experts = tl.load(expert_ids_ptr + pid_n)
""", """
off_experts = tl.load(expert_ids_ptr + pid_m)
""")
_code("KS305", "grid-floor-division", "Grid sized by floor division", _W, """
The launch grid divides a size by the block size with `//`, so when the size is not a multiple
of the block the last partial block gets no program and its elements are never written.""",
      """
grid = (n // BLOCK,)
""", """
grid = (triton.cdiv(n, BLOCK),)
""")
_code("KS306", "store-ignores-axis", "A store ignores a program id axis", _E, """
The kernel splits work along a program id axis (other accesses depend on it), but this store's
address does not: every program along that axis writes the same elements (a race) and the
other elements of the output are never written.""", """
offs_v = i_v * BV + tl.arange(0, BV)
tl.store(o_ptr + i_b * V + tl.arange(0, BV), o)
""", """
offs_v = i_v * BV + tl.arange(0, BV)
tl.store(o_ptr + i_b * V + offs_v, o, mask=offs_v < V)
""")

# --- KS4xx numerics -----------------------------------------------------------------------
_code("KS401", "non-neutral-other", "Masked lanes are not neutral for the reduction", _E, """
A masked `tl.load` fills the masked-off lanes with `other`. When those lanes flow into a
reduction, `other` must be the reduction's identity: `-inf` for `tl.max` and logsumexp, `+inf`
for `tl.min`, 0 for `tl.sum`, 1 for a product. Otherwise the padding of the last tile changes
the result. (Without `other=` the lanes are undefined: see KS403.) When the data is known to be
non-negative (counts, absolute values written by an earlier kernel), 0 is neutral for
`tl.max`: declare the tensor and state it with `#@ assume X[i] >= 0`.""", """
x = tl.load(p + offs, mask=offs < n, other=0.0)
m = tl.max(x, axis=0)
""", """
x = tl.load(p + offs, mask=offs < n, other=float("-inf"))
m = tl.max(x, axis=0)
""")
_code("KS402", "low-precision-accumulator", "Accumulation across a loop in low precision", _W, """
A loop-carried accumulator in fp16 or bf16 loses about 3 significant bits per doubling of the
trip count; sums over long rows or large K drift. Accumulate in fp32 and convert once at the
store.""", """
acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)
for k in range(0, K, BLOCK_K):
    acc += tl.dot(a, b).to(tl.float16)
""", """
acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
for k in range(0, K, BLOCK_K):
    acc += tl.dot(a, b)
""")

_code("KS403", "undefined-masked-lanes", "Undefined masked-off lanes are observed", _E, """
A masked `tl.load` without `other=` leaves the masked-off lanes undefined: they hold whatever
the registers held (the CPU interpreter happens to give 0, a GPU need not). Elementwise math on
them is harmless as long as the result is stored under the same mask. It is a bug when they
reach something that reads them: a reduction over the masked axis (`tl.sum`, `tl.max`,
`tl.min`, `tl.argmax`), the contracted axis of a `tl.dot`, or a store whose mask lets them
through. Pass the reduction's identity as `other=`, or select them away with
`tl.where(mask, x, 0.0)`.""", """
x = tl.load(p + offs, mask=offs < n)
s = tl.sum(x, axis=0)                # masked lanes are undefined
""", """
x = tl.load(p + offs, mask=offs < n, other=0.0)
s = tl.sum(x, axis=0)
""")

# --- KS5xx Triton language rules ----------------------------------------------------------
_code("KS501", "arange-not-power-of-two", "tl.arange range is not a power of two", _E, """
Triton requires `tl.arange(start, end)` to span a power-of-two number of elements; other sizes
fail at compile time.""", """
offs = tl.arange(0, 100)
""", """
offs = tl.arange(0, 128)
mask = offs < 100
""")
_code("KS502", "arange-not-constexpr", "tl.arange bound is not a compile-time constant", _E, """
The bounds of `tl.arange` must be `tl.constexpr`: a runtime argument fails to compile.""", """
def k(x_ptr, BLOCK):
    offs = tl.arange(0, BLOCK)
""", """
def k(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
""")
_code("KS503", "dot-too-small", "tl.dot operand dimension below 16", _E, """
`tl.dot` has a minimum tile size: the contracted dimension K must be at least 16 for 16-bit
operands (8 for fp32, 32 for 8-bit types) on NVIDIA GPUs, and Triton before 3.2 also needed
M and N of at least 16. Smaller tiles fail to compile.""", """
acc = tl.dot(a, b)     # a is [16, 8]
""", """
acc = tl.dot(a, b)     # a is [16, 16]
""")
_code("KS504", "shape-not-constexpr", "Parameter used as a shape is not tl.constexpr", _E, """
A parameter used as a tile shape (in `tl.zeros`, `tl.full`, `tl.reshape`, `tl.arange`, ...)
must be annotated `tl.constexpr`.""", """
def k(x_ptr, BLOCK_M):
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
""", """
def k(x_ptr, BLOCK_M: tl.constexpr):
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
""")
_code("KS505", "unsupported-python", "Python construct that Triton rejects in a jit function",
      _E, """
Triton compiles a subset of Python: `try`/`except`, `with`, `lambda`, comprehensions,
generators, `yield`, `global`/`nonlocal`, `del`, recursion and calls to arbitrary Python
functions fail to compile inside `@triton.jit`.""", """
vals = [tl.load(p + i) for i in range(4)]
""", """
for i in tl.static_range(4):
    v = tl.load(p + i)
""")
_code("KS506", "python-print", "print() inside a jit function", _W, """
Inside `@triton.jit` the name `print` is rebound to `tl.device_print`, which prints once per
program and lane at run time, not the Python `print` the line suggests; values known while
compiling need `tl.static_print`. Write the device function by name so the intent is
explicit.""", """
print("x", x)
""", """
tl.device_print("x", x)
""")
_code("KS507", "program-id-axis", "tl.program_id axis must be 0, 1 or 2", _E, """
A grid has at most three axes.""", """
pid = tl.program_id(3)
""", """
pid = tl.program_id(2)
""")
_code("KS508", "api-not-in-installed-triton", "API not available in the installed Triton", _W,
      """
Block pointers (`tl.make_block_ptr`, `tl.advance`) were removed in Triton 3.9, and tensor
descriptors (`tl.make_tensor_descriptor`) need a recent Triton. The analysis reads the installed
Triton's version (without importing it) and names the API it accepts.""", """
p = tl.make_block_ptr(base, shape, strides, offsets, block_shape, order)   # Triton >= 3.9
""", """
d = tl.make_tensor_descriptor(base, shape, strides, block_shape)
""")

# --- KS6xx performance --------------------------------------------------------------------
_code("KS601", "fp32-dot-inputs", "tl.dot on fp32 tiles", _I, """
`tl.dot` on fp32 operands runs in tf32 (or in much slower IEEE fp32 with
`input_precision="ieee"`); loading fp16/bf16 data halves the bytes moved and doubles the
matrix throughput when the accuracy allows.""", """
a = tl.load(a_ptrs).to(tl.float32)
acc += tl.dot(a, b)
""", """
a = tl.load(a_ptrs)            # fp16 operands, fp32 accumulator
acc += tl.dot(a, b)
""")

# --- KS9xx annotations and unsupported constructs -----------------------------------------
_code("KS901", "malformed-directive", "Malformed #@ directive", _E, """
The directive does not follow the grammar in the annotation contract; the message says what was
expected where.""", """
#@ tensor A = a_ptr[m M, k: K]
""", """
#@ tensor A = a_ptr[m: M, k: K]
""")
_code("KS902", "unknown-pointer", "Unknown pointer argument in a tensor declaration", _E, """
`#@ tensor NAME = PTR[...]` must name a parameter of the kernel as `PTR`.""", """
#@ tensor A = aptr[m: M]
def k(a_ptr, M): ...
""", """
#@ tensor A = a_ptr[m: M]
def k(a_ptr, M): ...
""")
_code("KS903", "unknown-name", "Unknown dimension, tensor or value in a directive", _E, """
An `assert`, `computes`, `tag` or `partners` directive names a tensor, a dimension or a value
the kernel does not declare or define.""", """
#@ tensor A = a_ptr[m: M, k: K]
#@ assert a.j == 0
""", """
#@ tensor A = a_ptr[m: M, k: K]
#@ assert a.k == 0
""")
_code("KS904", "grid-too-many-axes", "Grid with more than 3 axes", _E, """
A Triton launch grid has at most three axes.""", """
#@ grid (A, B, C, D)
""", """
#@ grid (A * B, C, D)
""")
_code("KS905", "duplicate-tensor", "Tensor declared twice", _E, """
Each logical tensor name may be declared once per kernel.""", """
#@ tensor A = a_ptr[m: M]
#@ tensor A = b_ptr[m: M]
""", """
#@ tensor A = a_ptr[m: M]
#@ tensor B = b_ptr[m: M]
""")
_code("KS906", "unknown-directive", "Unknown #@ directive", _E, """
The word after `#@` is not one of `tensor`, `grid`, `assume`, `computes`, `assert`, `tag`,
`partners`, `bench`.""", """
#@ tensr A = a_ptr[m: M]
""", """
#@ tensor A = a_ptr[m: M]
""")
_code("KS907", "stray-directive", "#@ directive outside a kernel", _W, """
Directives belong inside a `@triton.jit` function or on the lines directly above it; this one is
attached to no kernel and has no effect.""", """
#@ grid (N,)
x = 1
""", """
#@ grid (N,)
@triton.jit
def k(...): ...
""")
_code("KS910", "kernel-syntax-error", "Kernel not analysed: syntax error", _E, """
The kernel's definition does not parse; other kernels in the file are still analysed. Also
reported, once, for the first syntax error in the host code of a file with kernels: the
launch sites in code that does not parse are not read, so what the analysis infers from them
(tensor sizes, the grid) is missing until it parses.""", """
def k(x_ptr, N:
""", """
def k(x_ptr, N):
""")
_code("KS911", "analysis-budget", "Kernel not fully analysed: budget exhausted", _I, """
The analysis of this kernel exceeded its time or size budget: `kernel-budget-ms` of CPU time
for the front end and the language rules (then the kernel is not analysed at all) and again
for the invariant engine (then what was proved before the budget ran out stands and nothing
past it is reported), or a size limit (a tile of more than 2^22 elements, expressions nested
too deep). The rest of the file is analysed. Raise `kernel-budget-ms` or
`solver-timeout-ms`, or split the kernel, to analyse further.""", """
offs = tl.arange(0, 1 << 30)   # a tile of 2^30 elements
""", """
offs = tl.arange(0, BLOCK)     # BLOCK a constexpr of a realistic size
""")
_code("KS912", "directive-unsupported", "Directive not supported here", _I, """
The directive is well-formed but uses a construct the analysis does not model yet; it is
ignored, and the kernel is analysed without it.""", """
#@ computes C[m, n] from A[f(m), :]
""", """
#@ computes C[m, n] from A[m, :]
""")


def get(code: str) -> Code:
    """Return the registered code.

    Raises:
        KeyError: with the unknown code in the message.
    """
    try:
        return CODES[code]
    except KeyError:
        raise KeyError(f"unknown diagnostic code {code!r}") from None


def render_markdown(c: Code) -> str:
    """The docs page of one code (docs/codes/KSxxx.md), as markdown."""
    return (f"# {c.code} {c.title}\n\n"
            f"Name: `{c.name}` · default severity: {c.severity.label}\n\n"
            f"## Why it matters\n\n{c.why}\n\n"
            f"## Wrong\n\n```python\n{c.wrong}\n```\n\n"
            f"## Right\n\n```python\n{c.right}\n```\n\n"
            f"## Silence it\n\nOn one line: `# noqa: {c.code}`. Everywhere: "
            f"`ignore = [\"{c.code}\"]` under `[tool.kernelsight]` in pyproject.toml.\n")


def write_docs(folder: Path) -> list[Path]:
    """Write one page per code into ``folder`` (created if missing); return the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for c in CODES.values():
        p = folder / f"{c.code}.md"
        p.write_text(render_markdown(c), encoding="utf-8")
        written.append(p)
    index = ["# Diagnostic codes\n", "| code | name | title | default severity |",
             "|---|---|---|---|"]
    index += [f"| [{c.code}]({c.code}.md) | `{c.name}` | {c.title} | {c.severity.label} |"
              for c in CODES.values()]
    (folder / "README.md").write_text("\n".join(index) + "\n", encoding="utf-8")
    return written


if __name__ == "__main__":  # python -m kernelsight.analysis.codes docs/codes
    out = write_docs(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/codes"))
    print(f"wrote {len(out)} pages")
