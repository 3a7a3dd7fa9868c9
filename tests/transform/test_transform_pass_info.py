"""PassInfo: fields, read-only, validation, equality, pickling."""

from __future__ import annotations

import pickle

import pytest

from parpass.transform import PassInfo


def test_fields_and_defaults() -> None:
    info = PassInfo(2, "Fold")
    assert (info.opt_level, info.name, info.required, info.traceable) == (2, "Fold", (), False)
    info = PassInfo(1, "X", required=["A", "B"], traceable=True)
    assert info.required == ("A", "B")
    assert info.traceable is True


def test_read_only() -> None:
    info = PassInfo(2, "Fold")
    for field in ("opt_level", "name", "required", "traceable", "other"):
        with pytest.raises(AttributeError):
            setattr(info, field, 3)
    with pytest.raises(AttributeError):
        del info.name
    assert info.opt_level == 2


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((2, ""), {}, "non-empty str"),
        ((2, 3), {}, "non-empty str"),
        (("2", "X"), {}, "opt_level must be an int"),
        ((True, "X"), {}, "opt_level must be an int"),
        ((2, "X"), {"required": "AB"}, "bare string"),
        ((2, "X"), {"required": ["A", 3]}, r"required\[1\]"),
        ((2, "X"), {"required": {"A"}}, "list or tuple"),
        ((2, "X"), {"traceable": 1}, "traceable must be a bool"),
    ],
)
def test_validation(args: tuple, kwargs: dict, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        PassInfo(*args, **kwargs)


def test_equality_hash_pickle_text() -> None:
    a = PassInfo(1, "X", ["A"])
    b = PassInfo(1, "X", ("A",))
    assert a == b and hash(a) == hash(b)
    assert a != PassInfo(2, "X", ["A"])
    assert pickle.loads(pickle.dumps(a)) == a
    assert str(a) == 'transform.PassInfo(opt_level=1, name="X", required=("A",), traceable=False)'
    assert repr(a) == "PassInfo(opt_level=1, name='X', required=['A'], traceable=False)"


@pytest.mark.parametrize(
    ("info", "text"),
    [
        # what str() of tvm.transform.PassInfo prints in apache-tvm 0.27.0
        (PassInfo(1, "xyz"), 'transform.PassInfo(opt_level=1, name="xyz", required=(), traceable=False)'),
        (PassInfo(1, "xyz", []), 'transform.PassInfo(opt_level=1, name="xyz", required=(), traceable=False)'),
        (PassInfo(2, "abc", ["A"]), 'transform.PassInfo(opt_level=2, name="abc", required=("A",), traceable=False)'),
        (
            PassInfo(2, "abc", ["A", "B"], traceable=True),
            'transform.PassInfo(opt_level=2, name="abc", required=("A", "B"), traceable=True)',
        ),
    ],
)
def test_str_is_tvm_0_27_text(info: PassInfo, text: str) -> None:
    assert str(info) == text


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        # TVM 0.27's escapes, character by character (checked against apache-tvm 0.27.0)
        ('q"q', r"q\"q"),
        ("b\\s", r"b\\s"),
        ("a\nb\tc\rd", r"a\nb\tc\rd"),
        ("\x00\x01\x1f\x7f", r"\x00\x01\x1f\x7f"),
        ("'single'", "'single'"),
        ("caf\u00e9 \u4e2d", r"caf\u00e9 \u4e2d"),
        ("\x80\xff\uffff", r"\u0080\u00ff\uffff"),
        ("\U0001f600\U0010ffff", r"\U0001f600\U0010ffff"),
    ],
)
def test_str_escapes_names_as_tvm_does(name: str, shown: str) -> None:
    assert str(PassInfo(0, name)) == f'transform.PassInfo(opt_level=0, name="{shown}", required=(), traceable=False)'
    assert str(PassInfo(0, "X", [name])) == (
        f'transform.PassInfo(opt_level=0, name="X", required=("{shown}",), traceable=False)'
    )
