import triton
import triton.language as tl
import triton.language.core as tlc  # noqa: F401  (a second language module in this helper's globals)


@triton.jit
def cube(x):
    return x * x * x
