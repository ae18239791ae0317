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
