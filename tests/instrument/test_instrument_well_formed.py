"""WellFormedInstrument takes TVM's keywords (``check_ty``, ``validate_before_transform``) with TVM's meaning.

TVM 0.27's ``tvm.relax.ir.instrument.WellFormedInstrument(check_ty=True,
validate_before_transform=True)`` checks the module after every pass, and before
it unless ``validate_before_transform`` is False; ``check_ty=False`` leaves out
the checks of type information.
"""

from __future__ import annotations

import pickle

import pytest

from parpass.errors import IRError
from parpass.instrument import WellFormedInstrument
from parpass.ir import IRModule, relax
from parpass.ir.node import GlobalVar, Op
from parpass.ir.types import TensorType
from parpass.ir.well_formed import well_formed
from parpass.transform import PassContext, PassInfo, function_pass

F32 = TensorType((4,), "float32")
I32 = TensorType((4,), "int32")
INFO = PassInfo(0, "P")


def _func(bindings: list[tuple[int, str, object, object]], ret: int, param_ty: TensorType = F32) -> relax.Function:
    """``f(x: param_ty)`` with ``bindings`` of ``(vid, name, value, annotated type)``, returning var ``ret``."""
    x = relax.Var(0, "x")
    out = []
    names = {0: x}
    for vid, name, value, ty in bindings:
        var = relax.Var(vid, name)
        names[vid] = var
        out.append(relax.Binding(var, value, ty))  # type: ignore[arg-type]
    return relax.Function((relax.Param(x, param_ty),), relax.SeqExpr(tuple(out), names[ret]))


def _x() -> relax.Var:
    return relax.Var(0, "x")


def ill_typed() -> IRModule:
    """``y: Tensor((4,), int32) = add(x, x)`` with ``x`` float32: only a type problem."""
    return IRModule({"f": _func([(1, "y", relax.Call(Op("add"), (_x(), _x())), I32)], 1)})


def ill_typed_call() -> IRModule:
    """``g`` passes a float32 tensor to ``h``'s int32 parameter: only a type problem."""
    h = _func([], 0, param_ty=I32)
    g = _func([(1, "y", relax.Call(GlobalVar("h"), (_x(),)), None)], 1)
    return IRModule({"g": g, "h": h})


def undefined_var() -> IRModule:
    """``y = add(x, q)`` with ``q`` never defined: a structural problem, whatever the types."""
    return IRModule({"f": _func([(1, "y", relax.Call(Op("add"), (_x(), relax.Var(9, "q"))), None)], 1)})


def test_tvm_keywords_are_accepted_with_tvm_defaults() -> None:
    inst = WellFormedInstrument()
    assert inst.check_ty is True and inst.validate_before_transform is True
    inst = WellFormedInstrument(check_ty=False, validate_before_transform=False)
    assert inst.check_ty is False and inst.validate_before_transform is False
    # TVM's positional order: (check_ty, validate_before_transform)
    inst = WellFormedInstrument(False, False)
    assert inst.check_ty is False and inst.validate_before_transform is False


def test_validate_before_transform_false_checks_only_after() -> None:
    bad = undefined_var()
    inst = WellFormedInstrument(validate_before_transform=False)
    inst.run_before_pass(bad, INFO)  # not checked
    with pytest.raises(IRError, match=r"after pass 'P' \(the pass produced ill-formed IR\)"):
        inst.run_after_pass(bad, INFO)
    with pytest.raises(IRError, match=r"before pass 'P' \(the pass was given ill-formed IR\)"):
        WellFormedInstrument(validate_before_transform=True).run_before_pass(bad, INFO)


def test_parpass_check_before_is_the_same_switch() -> None:
    assert WellFormedInstrument(check_before=False).validate_before_transform is False
    assert WellFormedInstrument(validate_before_transform=False).check_before is False
    assert WellFormedInstrument(check_before=True, validate_before_transform=True).check_before is True
    inst = WellFormedInstrument()
    inst.validate_before_transform = False  # an attribute in TVM: settable here too
    assert inst.check_before is False
    inst.run_before_pass(undefined_var(), INFO)
    with pytest.raises(TypeError, match=r"check_before=True and validate_before_transform=False disagree"):
        WellFormedInstrument(check_before=True, validate_before_transform=False)


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (ill_typed, "annotated type Tensor((4,), int32) differs from the inferred type Tensor((4,), float32)"),
        (ill_typed_call, "call of @h: argument 0 has type Tensor((4,), float32), parameter %x is Tensor((4,), int32)"),
    ],
)
def test_check_ty_false_leaves_out_the_type_checks(make, problem: str) -> None:  # type: ignore[no-untyped-def]
    bad = make()
    with pytest.raises(IRError, match=r"after pass 'P'") as info:
        WellFormedInstrument().run_after_pass(bad, INFO)
    assert problem in str(info.value)
    checker = WellFormedInstrument(check_ty=False)
    checker.run_before_pass(bad, INFO)
    checker.run_after_pass(bad, INFO)
    checker.check_ty = True  # set as TVM code may: results cached without the type checks are not reused
    with pytest.raises(IRError, match=r"after pass 'P'"):
        checker.run_after_pass(bad, INFO)
    assert well_formed(bad, check_types=False) == []
    assert any(problem in p for p in well_formed(bad))


def test_check_ty_false_still_checks_the_structure() -> None:
    with pytest.raises(IRError, match=r"%q \(vid 9\) is used before it is defined"):
        WellFormedInstrument(check_ty=False).run_after_pass(undefined_var(), INFO)


def test_options_survive_pickling_and_a_pass_context() -> None:
    inst = pickle.loads(pickle.dumps(WellFormedInstrument(False, False)))
    assert (inst.check_ty, inst.validate_before_transform, inst.check_after) == (False, False, True)

    @function_pass(opt_level=0, name="Identity")
    def identity(f: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
        return f

    with PassContext(instruments=[WellFormedInstrument(check_ty=False)]):
        identity(ill_typed())
    with pytest.raises(IRError, match="before pass 'Identity'"), PassContext(instruments=[WellFormedInstrument()]):
        identity(ill_typed())
