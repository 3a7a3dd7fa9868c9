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
    assert "pass name: X" in str(a) and "opt_level: 1" in str(a) and "[A]" in str(a)
    assert repr(a) == "PassInfo(opt_level=1, name='X', required=['A'], traceable=False)"
