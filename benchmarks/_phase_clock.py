"""The clocks of the phase profiles (``bear_phase_profile.py``, ``fd_son_phase_profile.py``,
``sketched_adagrad_phase_profile.py``), for use inside numba kernels.

``rdtsc()``: the CPU's cycle counter (``read_tsc()`` from Python) (``llvm.readcyclecounter``): ~12 ns a read on this machine's VM,
but wall time (a preempted thread's wait is counted too). ``clock_gettime(CLOCK_THREAD_CPUTIME_ID,
timespec)``: the calling thread's CPU time through libc (a ctypes function, callable from a kernel
with a 2-element int64 array's ``.ctypes`` as the timespec); a system call here, ~0.6-1 us a read.
"""
import ctypes

from llvmlite import ir
from numba import njit
from numba.core import cgutils, types
from numba.extending import intrinsic

CLOCK_THREAD_CPUTIME_ID = 3


@intrinsic
def rdtsc(typingctx):
    sig = types.int64()

    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(64), []),
                                            "llvm.readcyclecounter")
        return builder.call(fn, [])
    return sig, codegen


@njit
def read_tsc():
    """The cycle counter, called from Python (its rate against ``time.perf_counter``)."""
    return rdtsc()


clock_gettime = ctypes.CDLL(None).clock_gettime
clock_gettime.argtypes = [ctypes.c_int, ctypes.c_void_p]
clock_gettime.restype = ctypes.c_int
