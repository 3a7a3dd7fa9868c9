"""The reference interpreter: what a parpass program means.

It is slow and simple on purpose. A pass preserves meaning exactly when the
interpreter gives the same outputs before and after it, so the interpreter is
the specification that :func:`assert_same_meaning` checks passes against.
Every walk here uses explicit stacks, so deep IR (a 5,000-deep expression nest,
long call chains) never hits Python's recursion limit.

Dataflow functions (:class:`~parpass.ir.Function`)
    :func:`run_function` takes numpy arrays (tuples of them for tuple-typed
    parameters; numbers or 0-d arrays for ``PrimType`` parameters), checks them
    against the parameter types and returns numpy arrays (or tuples of them).
    Bindings run in order; a ``Call`` of an :class:`~parpass.ir.Op` uses the op
    registry's ``evaluate`` rule (stateful ops too: ``random_uniform`` with its
    ``seed`` attribute is deterministic); a ``Call`` of a ``GlobalVar`` runs that
    function of the module; ``If`` needs a boolean scalar condition and runs only
    the branch taken; bindings made inside a branch are gone after it.

    Calling a :class:`~parpass.ir.PrimFunc` from a ``Function`` follows TVM's
    destination-passing ``call_tir`` convention: the call's ``k`` arguments fill
    the first ``k`` parameters (a tensor for a ``Buffer``, a scalar for a scalar
    ``Var``), every remaining parameter must be a ``Buffer`` and is an output,
    allocated zeroed with its declared shape and dtype. The call's value is the
    output array, or a tuple of them when there are several. Inputs are copied,
    so a PrimFunc that writes to an input buffer does not change the caller's
    value.

Loop-level functions (:class:`~parpass.ir.PrimFunc`)
    :func:`run_prim_func` takes the arguments positionally: a numpy array for a
    ``Buffer`` parameter (dtype and shape checked), a number for a scalar
    parameter. Buffers are updated in place and returned. The semantics are
    TVM TIR's:

    - every ``For`` kind runs ``loop_var`` over ``[min, min + extent)`` serially;
    - a buffer is flat memory; an access's element offset is
      ``sum(index_k * stride_k)`` with the accessing ``Buffer`` node's
      ``strides``, or its row-major strides when ``strides`` is empty. So a
      flattened (1-D) view of a buffer, with the same ``vid``, reads the same
      memory. An offset outside the memory is an error;
    - a ``Ramp`` or ``Broadcast`` is a vector (a 1-D numpy array of its lanes),
      and a load or store whose index is a vector is a vector access;
    - scalars are numpy scalars of their dtype, so integer arithmetic wraps
      like C and float arithmetic runs in the dtype's precision; ``FloorDiv``
      and ``FloorMod`` round toward negative infinity (on floats
      ``floor(a / b)`` and ``a - floor(a / b) * b``, as TVM defines them);
      division by zero, of any dtype, raises :class:`DivisionByZeroError`;
    - both operands of a binary operator must have the same dtype (lanes
      included), conditions must be ``bool``;
    - ``Select`` evaluates both values; ``Evaluate`` evaluates its expression;
    - ``Allocate`` gives fresh zeroed memory for the duration of its body;
    - intrinsic ``Call``s by name: the set :data:`~parpass.ir.well_formed.INTRINSICS`
      (exp, exp2, log, log2, log10, sqrt, rsqrt, tanh, sin, cos, fabs, abs,
      floor, ceil, round (half to even), trunc, sigmoid, pow); each argument must
      have the call's dtype and the result is computed in that dtype. Any other
      name is an error.

The package, one concept a module:

- :mod:`.errors`: the errors, and the function lookup;
- :mod:`.values`: runtime values of Functions (checked against types, copied, keyed for memoizing);
- :mod:`.dataflow`: the Function machine (:func:`run_function`, :func:`run`);
- :mod:`.prim_values`, :mod:`.prim_exprs`, :mod:`.prim_machine`, :mod:`.prim_run`: the PrimFunc machine's
  values, expressions and memory, statements, and arguments (:func:`run_prim_func`);
- :mod:`.inputs`: :func:`random_inputs`;
- :mod:`.meaning`: reference runs and comparisons (:func:`assert_same_meaning`).
"""

from parpass.testing.interpreter.dataflow import run, run_function
from parpass.testing.interpreter.errors import ArgumentError, DivisionByZeroError, InterpreterError
from parpass.testing.interpreter.inputs import random_inputs
from parpass.testing.interpreter.meaning import Reference, assert_same_meaning, meaning_difference, reference_run
from parpass.testing.interpreter.prim_run import run_prim_func

__all__ = [
    "ArgumentError",
    "DivisionByZeroError",
    "InterpreterError",
    "Reference",
    "assert_same_meaning",
    "meaning_difference",
    "random_inputs",
    "reference_run",
    "run",
    "run_function",
    "run_prim_func",
]
