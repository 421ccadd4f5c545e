"""LambdaPACK: tiled algorithms as small loop programs whose task graphs are implicit.

>>> from tilegraph import lambdapack
>>> dag = lambdapack.library.cholesky.bind(N=4)
>>> dag.count(), dag.starters()
(20, [(0, (0,))])
>>> dag.children((0, (0,)))
[(1, (0, 1)), (1, (0, 2)), (1, (0, 3))]
"""

from tilegraph.lambdapack import library
from tilegraph.lambdapack.ir import ProgramError
from tilegraph.lambdapack.kernels import KERNELS, LPKernel, register_kernel
from tilegraph.lambdapack.program import DAG, Program, program

__all__ = ["DAG", "KERNELS", "LPKernel", "Program", "ProgramError", "library", "program",
           "register_kernel"]
