"""The standard operator set of the dataflow IR.

Importing this module registers every op below in :mod:`parpass.ir.op` (``parpass.ir``
imports it, so the ops are always there). Each op has a type rule
``infer_type(arg_types, attrs) -> Type`` on :mod:`parpass.ir.types` and an evaluation
rule ``evaluate(args, attrs)`` on numpy arrays. The evaluation rule always returns
exactly what the type rule promises (same dtype and shape; numpy's own promotion is
overridden by a cast), so constant folding and the reference interpreter agree with
InferType.

Typing conventions (simple and strict, like TVM Relax):

- Elementwise ops need operands of the same dtype and broadcast their shapes with
  numpy's rules. A :class:`PrimType` operand counts as a 0-d tensor; if every operand
  is a PrimType the result is a PrimType too.
- Arithmetic needs a numeric (non-bool) dtype; transcendental ops (``exp``, ``log``,
  ``sqrt``, ``tanh``, ``sigmoid``, ``power``, ``mean``) need a floating dtype.
- Integer ``divide`` is floor division; division by zero gives 0 for integers and
  inf/nan for floats (numpy's results, without warnings).
- Every type error is a ``TypeError`` naming the op and the argument types.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from parpass.ir.dtype import INT_DTYPE_NAMES, dtype_name
from parpass.ir.node import Attrs
from parpass.ir.op import register_op
from parpass.ir.types import PrimType, TensorType, TupleType, Type

Array = Any  # a numpy array (or a tuple of them for tuple-valued ops)
TypeFn = Callable[[str, Sequence[Type], Attrs], Type]
EvalFn = Callable[[Sequence[Array], Attrs], Array]

#: Dtypes the ops accept (numpy names).
DTYPES = ("bool", *INT_DTYPE_NAMES, "float16", "float32", "float64")
_FLOAT = frozenset({"float16", "float32", "float64"})
_NUMERIC = frozenset(DTYPES) - {"bool"}


# ---------------------------------------------------------------- helpers


def format_type(ty: object) -> str:
    """A short text form of a type for error messages (``Tensor((2, 3), float32)``)."""
    if isinstance(ty, TensorType):
        return f"Tensor({tuple(ty.shape)!r}, {ty.dtype})"
    if isinstance(ty, PrimType):
        return f"Prim({ty.dtype})"
    if isinstance(ty, TupleType):
        # Tuple types are shallow in practice; recursion depth is bounded by their nesting.
        return "Tuple[" + ", ".join(format_type(f) for f in ty.fields) + "]"
    return f"<not a type: {type(ty).__name__}>"


def _fail(op: str, arg_types: Sequence[Type], why: str) -> TypeError:
    shown = ", ".join(format_type(t) for t in arg_types)
    return TypeError(f"op {op!r}: {why}; argument types: ({shown})")


def _check_dtype_name(op: str, dtype: object, what: str = "dtype") -> str:
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise TypeError(f"op {op!r}: attribute {what!r} must be one of {', '.join(DTYPES)}; got {dtype!r}")
    return dtype


def _check_shape_attr(op: str, shape: object, allow_minus_one: bool = False) -> tuple[int, ...]:
    if isinstance(shape, (list, tuple)) and all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        dims = tuple(int(d) for d in shape)
        low = -1 if allow_minus_one else 0
        if all(d >= low for d in dims):
            return dims
    raise TypeError(f"op {op!r}: attribute 'shape' must be a list of non-negative ints; got {shape!r}")


def _tensor_like(op: str, arg_types: Sequence[Type], index: int) -> tuple[tuple[int, ...], str]:
    """Shape and dtype of argument ``index``; a PrimType is a 0-d tensor."""
    ty = arg_types[index]
    if isinstance(ty, TensorType):
        return tuple(ty.shape), ty.dtype
    if isinstance(ty, PrimType):
        return (), ty.dtype
    raise _fail(op, arg_types, f"argument {index} must be a tensor or scalar, got {format_type(ty)}")


def _tensor(op: str, arg_types: Sequence[Type], index: int) -> TensorType:
    ty = arg_types[index]
    if not isinstance(ty, TensorType):
        raise _fail(op, arg_types, f"argument {index} must be a tensor, got {format_type(ty)}")
    return ty


def _need(op: str, arg_types: Sequence[Type], dtype: str, allowed: frozenset[str], what: str) -> None:
    if dtype not in allowed:
        raise _fail(op, arg_types, f"needs {what} operands, got dtype {dtype}")


def broadcast_shapes(op: str, arg_types: Sequence[Type], shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """The numpy broadcast of ``shapes``; a TypeError naming ``op`` if they do not broadcast."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        for k, dim in enumerate(shape):
            pos = ndim - len(shape) + k
            if dim == out[pos] or dim == 1:
                continue
            if out[pos] == 1:
                out[pos] = dim
            else:
                raise _fail(op, arg_types, "shapes do not broadcast")
    return tuple(out)


def _norm_axes(op: str, axis: object, ndim: int, arg_types: Sequence[Type]) -> tuple[int, ...]:
    """``axis`` (None, an int or a list of ints) as sorted non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    raw = [axis] if isinstance(axis, int) and not isinstance(axis, bool) else axis
    if not isinstance(raw, (list, tuple)) or not all(isinstance(a, int) and not isinstance(a, bool) for a in raw):
        raise TypeError(f"op {op!r}: attribute 'axis' must be None, an int or a list of ints; got {axis!r}")
    axes = []
    for a in raw:
        if not -ndim <= a < ndim:
            raise _fail(op, arg_types, f"axis {a} is out of range for a {ndim}-d tensor")
        axes.append(a % ndim)
    if len(set(axes)) != len(axes):
        raise _fail(op, arg_types, f"axis {axis!r} repeats an axis")
    return tuple(sorted(axes))


def _single_axis(op: str, attrs: Attrs, ndim: int, arg_types: Sequence[Type], default: int = 0) -> int:
    axis = attrs.get("axis", default)
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise TypeError(f"op {op!r}: attribute 'axis' must be an int; got {axis!r}")
    if not -ndim <= axis < ndim:
        raise _fail(op, arg_types, f"axis {axis} is out of range for a {ndim}-d tensor")
    return axis % ndim


def _result(shape: tuple[int, ...], dtype: str, all_prim: bool) -> Type:
    return PrimType(dtype) if all_prim and shape == () else TensorType(shape, dtype)


def type_of_value(value: Any) -> Type:
    """The type of a runtime value: an array's shape/dtype, or a TupleType of a tuple's fields."""
    if isinstance(value, tuple):
        return TupleType(tuple(type_of_value(v) for v in value))
    arr = np.asarray(value)
    return TensorType(tuple(int(d) for d in arr.shape), dtype_name(arr.dtype))


def _cast_to(value: Any, ty: Type) -> Any:
    """``value`` converted to exactly the dtype (and checked shape) ``ty`` promises."""
    if isinstance(ty, TupleType):
        return tuple(_cast_to(v, f) for v, f in zip(value, ty.fields, strict=True))
    shape = tuple(ty.shape) if isinstance(ty, TensorType) else ()
    arr = np.asarray(value)
    if dtype_name(arr.dtype) != ty.dtype:
        arr = arr.astype(ty.dtype)
    if arr.shape != shape:  # pragma: no cover - a bug in an evaluation rule, not bad input
        raise AssertionError(f"evaluation gave shape {arr.shape}, type rule promised {shape}")
    return arr


# ---------------------------------------------------------------- registration


def _register(
    name: str,
    num_inputs: int | None,
    type_fn: TypeFn,
    eval_fn: EvalFn,
    *,
    attrs: tuple[str, ...] = (),
    required: tuple[str, ...] = (),
    min_inputs: int = 0,
    pure: bool = True,
    doc: str = "",
) -> None:
    """Register ``name`` with a checked type rule and an evaluation rule that casts to it."""
    allowed = frozenset(attrs)

    def infer_type(arg_types: Sequence[Type], op_attrs: Attrs) -> Type:
        arg_types = tuple(arg_types)
        if num_inputs is not None and len(arg_types) != num_inputs:
            raise _fail(name, arg_types, f"takes {num_inputs} argument(s), got {len(arg_types)}")
        if num_inputs is None and len(arg_types) < min_inputs:
            raise _fail(name, arg_types, f"takes at least {min_inputs} argument(s), got {len(arg_types)}")
        unknown = sorted(k for k in op_attrs if k not in allowed)
        if unknown:
            known = ", ".join(sorted(allowed)) or "none"
            raise TypeError(f"op {name!r}: unknown attribute(s) {', '.join(unknown)}; known: {known}")
        missing = [k for k in required if k not in op_attrs]
        if missing:
            raise TypeError(f"op {name!r}: missing required attribute(s) {', '.join(missing)}")
        for index, ty in enumerate(arg_types):
            if isinstance(ty, (TensorType, PrimType)) and ty.dtype not in DTYPES:
                raise _fail(name, arg_types, f"argument {index} has unsupported dtype {ty.dtype!r}")
        return type_fn(name, arg_types, op_attrs)

    def evaluate(args: Sequence[Array], op_attrs: Attrs) -> Array:
        values = tuple(v if isinstance(v, tuple) else np.asarray(v) for v in args)
        ty = infer_type(tuple(type_of_value(v) for v in values), op_attrs)
        with np.errstate(all="ignore"):
            out = eval_fn(values, op_attrs)
        return _cast_to(out, ty)

    register_op(name, num_inputs=num_inputs, pure=pure, evaluate=evaluate, infer_type=infer_type, doc=doc)


# ---------------------------------------------------------------- elementwise


def _elementwise_type(allowed: frozenset[str], what: str, result_dtype: str | None = None) -> TypeFn:
    def rule(op: str, arg_types: Sequence[Type], attrs: Attrs) -> Type:
        shapes, dtypes = [], []
        for i in range(len(arg_types)):
            shape, dtype = _tensor_like(op, arg_types, i)
            shapes.append(shape)
            dtypes.append(dtype)
        if len(set(dtypes)) > 1:
            raise _fail(op, arg_types, f"operands must have the same dtype, got {', '.join(dtypes)}")
        _need(op, arg_types, dtypes[0], allowed, what)
        shape = broadcast_shapes(op, arg_types, shapes)
        all_prim = all(isinstance(t, PrimType) for t in arg_types)
        return _result(shape, result_dtype or dtypes[0], all_prim)

    return rule


def _divide(args: Sequence[Array], attrs: Attrs) -> Array:
    a, b = args
    if a.dtype.kind in "iu":
        return np.floor_divide(a, b)
    return np.true_divide(a, b)


def _sigmoid(args: Sequence[Array], attrs: Attrs) -> Array:
    x = args[0]
    return np.asarray(1.0, dtype=x.dtype) / (np.asarray(1.0, dtype=x.dtype) + np.exp(-x))


def _relu(args: Sequence[Array], attrs: Attrs) -> Array:
    x = args[0]
    return np.maximum(x, np.zeros((), dtype=x.dtype))


_BINARY: dict[str, tuple[Callable[..., Any], frozenset[str], str]] = {
    "add": (np.add, _NUMERIC, "numeric"),
    "subtract": (np.subtract, _NUMERIC, "numeric"),
    "multiply": (np.multiply, _NUMERIC, "numeric"),
    "maximum": (np.maximum, _NUMERIC, "numeric"),
    "minimum": (np.minimum, _NUMERIC, "numeric"),
    "power": (np.power, _FLOAT, "floating-point"),
}
for _name, (_fn, _allowed, _what) in _BINARY.items():
    _register(
        _name,
        2,
        _elementwise_type(_allowed, _what),
        (lambda fn: lambda args, attrs: fn(args[0], args[1]))(_fn),
        doc=f"Elementwise {_name} with numpy broadcasting; both operands of one {_what} dtype.",
    )
_register(
    "divide",
    2,
    _elementwise_type(_NUMERIC, "numeric"),
    _divide,
    doc="Elementwise division with broadcasting; floor division on integer dtypes.",
)

_COMPARE: dict[str, Callable[..., Any]] = {
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "equal": np.equal,
    "not_equal": np.not_equal,
}
for _name, _fn in _COMPARE.items():
    _register(
        _name,
        2,
        _elementwise_type(frozenset(DTYPES), "any", result_dtype="bool"),
        (lambda fn: lambda args, attrs: fn(args[0], args[1]))(_fn),
        doc=f"Elementwise {_name} with broadcasting; the result is bool.",
    )

_BOOL = frozenset({"bool"})
_register(
    "logical_and",
    2,
    _elementwise_type(_BOOL, "bool"),
    lambda args, attrs: np.logical_and(args[0], args[1]),
    doc="Elementwise logical and of bools.",
)
_register(
    "logical_or",
    2,
    _elementwise_type(_BOOL, "bool"),
    lambda args, attrs: np.logical_or(args[0], args[1]),
    doc="Elementwise logical or of bools.",
)
_register(
    "logical_not",
    1,
    _elementwise_type(_BOOL, "bool"),
    lambda args, attrs: np.logical_not(args[0]),
    doc="Elementwise logical not of bools.",
)

_UNARY: dict[str, tuple[Callable[[Sequence[Array], Attrs], Array], frozenset[str], str]] = {
    "negative": (lambda args, attrs: np.negative(args[0]), _NUMERIC, "numeric"),
    "abs": (lambda args, attrs: np.abs(args[0]), _NUMERIC, "numeric"),
    "relu": (_relu, _NUMERIC, "numeric"),
    "exp": (lambda args, attrs: np.exp(args[0]), _FLOAT, "floating-point"),
    "log": (lambda args, attrs: np.log(args[0]), _FLOAT, "floating-point"),
    "sqrt": (lambda args, attrs: np.sqrt(args[0]), _FLOAT, "floating-point"),
    "tanh": (lambda args, attrs: np.tanh(args[0]), _FLOAT, "floating-point"),
    "sigmoid": (_sigmoid, _FLOAT, "floating-point"),
}
for _name, (_efn, _allowed, _what) in _UNARY.items():
    _register(_name, 1, _elementwise_type(_allowed, _what), _efn, doc=f"Elementwise {_name} of a {_what} tensor.")


def _where_type(op: str, arg_types: Sequence[Type], attrs: Attrs) -> Type:
    shapes = []
    dtypes = []
    for i in range(3):
        shape, dtype = _tensor_like(op, arg_types, i)
        shapes.append(shape)
        dtypes.append(dtype)
    if dtypes[0] != "bool":
        raise _fail(op, arg_types, f"the condition must be bool, got {dtypes[0]}")
    if dtypes[1] != dtypes[2]:
        raise _fail(op, arg_types, f"both branches must have the same dtype, got {dtypes[1]} and {dtypes[2]}")
    shape = broadcast_shapes(op, arg_types, shapes)
    return _result(shape, dtypes[1], all(isinstance(t, PrimType) for t in arg_types))


_register(
    "where",
    3,
    _where_type,
    lambda args, attrs: np.where(args[0], args[1], args[2]),
    doc="where(cond, x, y): x where cond is true, else y; all three broadcast.",
)


def _astype_type(op: str, arg_types: Sequence[Type], attrs: Attrs) -> Type:
    shape, _ = _tensor_like(op, arg_types, 0)
    dtype = _check_dtype_name(op, attrs["dtype"])
    return _result(shape, dtype, isinstance(arg_types[0], PrimType))


_register(
    "astype",
    1,
    _astype_type,
    lambda args, attrs: args[0].astype(attrs["dtype"]),
    attrs=("dtype",),
    required=("dtype",),
    doc="Converts a tensor to attribute 'dtype'.",
)


# ---------------------------------------------------------------- linear algebra and layout


def _matmul_type(op: str, arg_types: Sequence[Type], attrs: Attrs) -> Type:
    a, b = _tensor(op, arg_types, 0), _tensor(op, arg_types, 1)
    if a.dtype != b.dtype:
        raise _fail(op, arg_types, f"operands must have the same dtype, got {a.dtype} and {b.dtype}")
    _need(op, arg_types, a.dtype, _NUMERIC, "numeric")
    if a.ndim == 0 or b.ndim == 0:
        raise _fail(op, arg_types, "operands must be at least 1-d")
    sa = tuple(a.shape) if a.ndim > 1 else (1, *a.shape)
    sb = tuple(b.shape) if b.ndim > 1 else (*b.shape, 1)
    if sa[-1] != sb[-2]:
        raise _fail(op, arg_types, f"contracted dimensions differ ({sa[-1]} vs {sb[-2]})")
    batch = broadcast_shapes(op, arg_types, [sa[:-2], sb[:-2]])
    out = [*batch]
    if a.ndim > 1:
        out.append(sa[-2])
    if b.ndim > 1:
        out.append(sb[-1])
    return TensorType(tuple(out), a.dtype)


_register(
    "matmul",
    2,
    _matmul_type,
    lambda args, attrs: np.matmul(args[0], args[1]),
    doc="Matrix product with numpy's matmul rules (1-d promotion, broadcast batch dims).",
)


def _transpose_axes(op: str, arg_types: Sequence[Type], attrs: Attrs) -> tuple[int, ...]:
    ty = _tensor(op, arg_types, 0)
    axes = attrs.get("axes")
    if axes is None:
        return tuple(reversed(range(ty.ndim)))
    if not isinstance(axes, (list, tuple)) or not all(isinstance(a, int) and not isinstance(a, bool) for a in axes):
        raise TypeError(f"op {op!r}: attribute 'axes' must be None or a list of ints; got {axes!r}")
    norm = [a % ty.ndim if -ty.ndim <= a < ty.ndim else -1 for a in axes] if ty.ndim else list(axes)
    if sorted(norm) != list(range(ty.ndim)):
        raise _fail(op, arg_types, f"axes {list(axes)!r} is not a permutation of the {ty.ndim} axes")
    return tuple(norm)


def _transpose_type(op: str, arg_types: Sequence[Type], attrs: Attrs) -> Type:
    ty = _tensor(op, arg_types, 0)
    axes = _transpose_axes(op, arg_types, attrs)
    return TensorType(tuple(ty.shape[a] for a in axes), ty.dtype)


_register(
    "transpose",
    1,
    _transpose_type,
    lambda args, attrs: np.transpose(args[0], attrs.get("axes")),
    attrs=("axes",),
    doc="Permutes the axes (attribute 'axes'; reversed when absent).",
)


def _reshape_target(op: str, arg_types: Sequence[Type], attrs: Attrs) -> tuple[int, ...]:
    ty = _tensor(op, arg_types, 0)
    dims = _check_shape_attr(op, attrs["shape"], allow_minus_one=True)
    size = 1
    for d in ty.shape:
        size *= d
    if dims.count(-1) > 1:
        raise TypeError(f"op {op!r}: attribute 'shape' may hold at most one -1; got {list(dims)!r}")
    known = 1
    for d in dims:
        if d != -1:
            known *= d
    if -1 in dims:
        if known == 0 or size % known:
            raise _fail(op, arg_types, f"cannot reshape {size} elements into {list(dims)!r}")
        dims = tuple(size // known if d == -1 else d for d in dims)
    elif known != size:
        raise _fail(op, arg_types, f"cannot reshape {size} elements into {list(dims)!r}")
    return dims


_register(
    "reshape",
    1,
    lambda op, arg_types, attrs: TensorType(_reshape_target(op, arg_types, attrs), _tensor(op, arg_types, 0).dtype),
    lambda args, attrs: np.reshape(args[0], tuple(attrs["shape"])),
    attrs=("shape",),
    required=("shape",),
    doc="Reshapes to attribute 'shape' (one entry may be -1).",
)


def _concat_type(op: str, arg_types: Sequence[Type], attrs: Attrs) -> Type:
    tys = [_tensor(op, arg_types, i) for i in range(len(arg_types))]
    first = tys[0]
    if first.ndim == 0:
        raise _fail(op, arg_types, "cannot concatenate 0-d tensors")
    axis = _single_axis(op, attrs, first.ndim, arg_types)
    total = 0
    for ty in tys:
        if ty.dtype != first.dtype:
            raise _fail(op, arg_types, "operands must have the same dtype")
        if ty.ndim != first.ndim or any(
            d != e for k, (d, e) in enumerate(zip(ty.shape, first.shape, strict=True)) if k != axis
        ):
            raise _fail(op, arg_types, f"shapes differ outside axis {axis}")
        total += ty.shape[axis]
    shape = list(first.shape)
    shape[axis] = total
    return TensorType(tuple(shape), first.dtype)


_register(
    "concat",
    None,
    _concat_type,
    lambda args, attrs: np.concatenate(args, axis=attrs.get("axis", 0)),
    attrs=("axis",),
    min_inputs=1,
    doc="Concatenates one or more tensors along attribute 'axis' (default 0).",
)


def _split_bounds(op: str, arg_types: Sequence[Type], attrs: Attrs) -> tuple[int, list[int]]:
    ty = _tensor(op, arg_types, 0)
    if ty.ndim == 0:
        raise _fail(op, arg_types, "cannot split a 0-d tensor")
    axis = _single_axis(op, attrs, ty.ndim, arg_types)
    length = ty.shape[axis]
    sections = attrs["sections"]
    if isinstance(sections, int) and not isinstance(sections, bool):
        if sections <= 0 or length % sections:
            raise _fail(op, arg_types, f"axis {axis} of length {length} does not split into {sections} equal parts")
        step = length // sections
        return axis, [step * k for k in range(sections + 1)]
    if isinstance(sections, (list, tuple)) and all(isinstance(s, int) and not isinstance(s, bool) for s in sections):
        points = [0, *sections, length]
        if any(p < 0 or p > length for p in sections) or any(a > b for a, b in itertools.pairwise(points)):
            raise _fail(op, arg_types, f"split points {list(sections)!r} are not ascending within 0..{length}")
        return axis, points
    raise TypeError(f"op {op!r}: attribute 'sections' must be an int or a list of ints; got {sections!r}")


def _split_type(op: str, arg_types: Sequence[Type], attrs: Attrs) -> Type:
    ty = _tensor(op, arg_types, 0)
    axis, points = _split_bounds(op, arg_types, attrs)
    fields = []
    for lo, hi in itertools.pairwise(points):
        shape = list(ty.shape)
        shape[axis] = hi - lo
        fields.append(TensorType(tuple(shape), ty.dtype))
    return TupleType(tuple(fields))


def _split_eval(args: Sequence[Array], attrs: Attrs) -> Array:
    sections = attrs["sections"]
    parts = np.split(args[0], sections if isinstance(sections, int) else list(sections), axis=attrs.get("axis", 0))
    return tuple(parts)


_register(
    "split",
    1,
    _split_type,
    _split_eval,
    attrs=("sections", "axis"),
    required=("sections",),
    doc="Splits along 'axis' into 'sections' equal parts (an int) or at the given indices; returns a tuple.",
)


# ---------------------------------------------------------------- reductions


def _reduce_type(allowed: frozenset[str], what: str) -> TypeFn:
    def rule(op: str, arg_types: Sequence[Type], attrs: Attrs) -> Type:
        ty = _tensor(op, arg_types, 0)
        _need(op, arg_types, ty.dtype, allowed, what)
        axes = _norm_axes(op, attrs.get("axis"), ty.ndim, arg_types)
        keepdims = attrs.get("keepdims", False)
        if not isinstance(keepdims, bool):
            raise TypeError(f"op {op!r}: attribute 'keepdims' must be a bool; got {keepdims!r}")
        if any(ty.shape[a] == 0 for a in axes) and op in ("max", "min"):
            raise _fail(op, arg_types, "cannot reduce over an empty axis")
        if keepdims:
            shape = tuple(1 if k in axes else d for k, d in enumerate(ty.shape))
        else:
            shape = tuple(d for k, d in enumerate(ty.shape) if k not in axes)
        return TensorType(shape, ty.dtype)

    return rule


def _reducer(fn: Callable[..., Any]) -> EvalFn:
    def run(args: Sequence[Array], attrs: Attrs) -> Array:
        axis = attrs.get("axis")
        if isinstance(axis, list):
            axis = tuple(axis)
        return fn(args[0], axis=axis, keepdims=attrs.get("keepdims", False))

    return run


for _name, _fn, _allowed, _what in (
    ("sum", np.sum, _NUMERIC, "numeric"),
    ("mean", np.mean, _FLOAT, "floating-point"),
    ("max", np.max, _NUMERIC, "numeric"),
    ("min", np.min, _NUMERIC, "numeric"),
):
    _register(
        _name,
        1,
        _reduce_type(_allowed, _what),
        _reducer(_fn),
        attrs=("axis", "keepdims"),
        doc=f"{_name} over attribute 'axis' (None: all axes), keeping reduced axes as 1 if 'keepdims'.",
    )


# ---------------------------------------------------------------- creation


def _creation_type(op: str, arg_types: Sequence[Type], attrs: Attrs) -> Type:
    shape = _check_shape_attr(op, attrs["shape"])
    dtype = _check_dtype_name(op, attrs.get("dtype", "float32"))
    if op == "full":
        value = attrs["value"]
        if not isinstance(value, (int, float)):
            raise TypeError(f"op {op!r}: attribute 'value' must be a number; got {value!r}")
    return TensorType(shape, dtype)


_register(
    "zeros",
    0,
    _creation_type,
    lambda args, attrs: np.zeros(tuple(attrs["shape"]), dtype=attrs.get("dtype", "float32")),
    attrs=("shape", "dtype"),
    required=("shape",),
    doc="A tensor of zeros of attribute 'shape' and 'dtype' (default float32).",
)
_register(
    "ones",
    0,
    _creation_type,
    lambda args, attrs: np.ones(tuple(attrs["shape"]), dtype=attrs.get("dtype", "float32")),
    attrs=("shape", "dtype"),
    required=("shape",),
    doc="A tensor of ones of attribute 'shape' and 'dtype' (default float32).",
)
_register(
    "full",
    0,
    _creation_type,
    lambda args, attrs: np.full(tuple(attrs["shape"]), attrs["value"], dtype=attrs.get("dtype", "float32")),
    attrs=("shape", "dtype", "value"),
    required=("shape", "value"),
    doc="A tensor of attribute 'shape' and 'dtype' filled with 'value'.",
)


# ---------------------------------------------------------------- stateful


def _random_type(op: str, arg_types: Sequence[Type], attrs: Attrs) -> Type:
    shape = _check_shape_attr(op, attrs["shape"])
    dtype = _check_dtype_name(op, attrs.get("dtype", "float32"))
    if dtype not in _FLOAT:
        raise TypeError(f"op {op!r}: attribute 'dtype' must be a floating dtype; got {dtype!r}")
    seed = attrs.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise TypeError(f"op {op!r}: attribute 'seed' must be a non-negative int; got {seed!r}")
    return TensorType(shape, dtype)


def _random_eval(args: Sequence[Array], attrs: Attrs) -> Array:
    rng = np.random.default_rng(attrs.get("seed", 0))  # PCG64: the same stream on every platform
    return rng.uniform(0.0, 1.0, size=tuple(attrs["shape"]))


_register(
    "random_uniform",
    0,
    _random_type,
    _random_eval,
    attrs=("shape", "dtype", "seed"),
    required=("shape",),
    pure=False,
    doc="Uniform samples in [0, 1) of 'shape' from a generator seeded with 'seed'. Stateful: never folded.",
)


def _print_type(op: str, arg_types: Sequence[Type], attrs: Attrs) -> Type:
    message = attrs.get("message", "")
    if not isinstance(message, str):
        raise TypeError(f"op {op!r}: attribute 'message' must be a str; got {message!r}")
    return arg_types[0]


def _print_eval(args: Sequence[Array], attrs: Attrs) -> Array:
    print(f"{attrs.get('message', '')}{args[0]}", file=sys.stdout)
    return args[0]


_register(
    "print",
    1,
    _print_type,
    _print_eval,
    attrs=("message",),
    pure=False,
    doc="Prints 'message' and its argument to stdout and returns the argument. Stateful: never folded or removed.",
)

#: Names of the ops this module registers, in registration order.
BUILTIN_OPS: tuple[str, ...] = (
    *_BINARY,
    "divide",
    *_COMPARE,
    "logical_and",
    "logical_or",
    "logical_not",
    *_UNARY,
    "where",
    "astype",
    "matmul",
    "transpose",
    "reshape",
    "concat",
    "split",
    "sum",
    "mean",
    "max",
    "min",
    "zeros",
    "ones",
    "full",
    "random_uniform",
    "print",
)

__all__ = ["BUILTIN_OPS", "DTYPES", "broadcast_shapes", "format_type", "type_of_value"]
