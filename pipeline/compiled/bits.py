"""Bit intrinsics for numba code: popcount, lowest and highest set bit of a uint64 (LLVM's
ctpop/cttz/ctlz, one instruction each on x86-64)."""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic


@intrinsic
def popcount(typingctx, x):
    """Number of set bits of a uint64 -> int64."""
    if x != types.uint64:
        return None

    def codegen(context, builder, sig, args):
        return builder.zext(builder.ctpop(args[0]), ir.IntType(64))
    return types.int64(types.uint64), codegen


@intrinsic
def lsb(typingctx, x):
    """Index of the lowest set bit of a non-zero uint64 -> int64 (64 for 0)."""
    if x != types.uint64:
        return None

    def codegen(context, builder, sig, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))
    return types.int64(types.uint64), codegen


@intrinsic
def msb(typingctx, x):
    """Index of the highest set bit of a non-zero uint64 -> int64 (-1 for 0)."""
    if x != types.uint64:
        return None

    def codegen(context, builder, sig, args):
        lz = builder.ctlz(args[0], ir.Constant(ir.IntType(1), 0))
        return builder.sub(ir.Constant(ir.IntType(64), 63), lz)
    return types.int64(types.uint64), codegen


def _host_bmi2() -> bool:
    """Whether numba compiles for a CPU with fast BMI2 (pdep/pext): numba's own target is the host
    (``NUMBA_CPU_NAME`` unset), the host has it, and not in microcode (AMD before Zen 3);
    ``NNUE_NO_BMI2=1`` says no (to test the other path; use a fresh ``NUMBA_CACHE_DIR`` then,
    numba's cache does not know the switch)."""
    import os

    import numba
    from llvmlite import binding

    if os.environ.get("NNUE_NO_BMI2") or numba.config.CPU_NAME:
        return False
    try:
        # AMD before Zen 3 (and its Bulldozer line) has BMI2 in microcode: pdep/pext take hundreds
        # of cycles there, the portable code is faster
        if binding.get_host_cpu_name() in ("znver1", "znver2") or binding.get_host_cpu_name().startswith("bdver"):
            return False
        return bool(binding.get_host_cpu_features().get("bmi2", False))
    except Exception:  # noqa: BLE001 - no feature map: take the portable path
        return False


#: the compiled code may use pdep/pext (:func:`pdep`, :func:`pext`); functions that do have a
#: portable twin, and the module binds one or the other at import
BMI2 = _host_bmi2()


def _bmi2(name):
    def fn(typingctx, x, m):
        if x != types.uint64 or m != types.uint64:
            return None

        def codegen(context, builder, sig, args):
            fnty = ir.FunctionType(ir.IntType(64), [ir.IntType(64), ir.IntType(64)])
            f = builder.module.declare_intrinsic(f"llvm.x86.bmi.{name}.64", fnty=fnty)
            return builder.call(f, args)
        return types.uint64(types.uint64, types.uint64), codegen
    fn.__name__ = name
    return intrinsic(fn)


# pdep(x, m): the low bits of x deposited at the set bits of m; pext(x, m): the bits of x at the set
# bits of m, gathered low. One instruction each; only where BMI2 is true.
pdep = _bmi2("pdep")
pext = _bmi2("pext")
