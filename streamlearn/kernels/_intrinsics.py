"""LLVM intrinsics for numba kernels: ``_prefetch``, a software prefetch (``llvm.prefetch``).

Kernels whose per-feature state is larger than the caches read it at scattered places: FD-SON's
table (40 MB at ``-b 18``) when K is recomputed in key order, BEAR's / MISSION's sketch (42 MB on
20 Newsgroups ``--oaa 20``) at a minibatch's cells. Asking for the lines first overlaps their memory
latencies. A hint: nothing is read or written.
"""
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

__all__ = ["_prefetch"]


@intrinsic
def _prefetch(typingctx, arr, off):
    """``_prefetch(arr, i)``: ask the CPU to bring the cache line of ``arr``'s element ``i`` (flat, C
    order) towards the core (read, high temporal locality, data cache)."""
    sig = types.void(arr, off)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                            "llvm.prefetch.p0")
        builder.call(fn, [builder.bitcast(builder.gep(ary.data, [args[1]]), i8p), ir.Constant(i32, 0),
                          ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return sig, codegen
