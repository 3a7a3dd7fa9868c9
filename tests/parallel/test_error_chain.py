"""An exception crosses from a worker with the exceptions it was raised from (parpass.parallel.error_chain)."""

from __future__ import annotations

import copyreg
import pickle
import threading
from collections.abc import Iterator

import pytest

from parpass.parallel.error_chain import chain_of, pickled_alone, pickled_chain, unpickled_chain

pytestmark = pytest.mark.own_backend  # no workers: the chain's own round trip


class Locked(Exception):
    """Does not pickle (it holds a lock)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.lock = threading.Lock()


def _stand_in(err: BaseException) -> BaseException:
    return RuntimeError(f"{type(err).__name__}: {err}")


def _raised(make: object) -> BaseException:
    try:
        make()  # type: ignore[operator]
    except BaseException as err:
        return err
    raise AssertionError("nothing raised")


def _from_and_during() -> None:
    try:
        raise OSError("first")
    except OSError:
        try:
            raise KeyError("second")
        except KeyError as err:
            raise ValueError("third") from err


def test_cause_context_and_suppression_cross() -> None:
    err = _raised(_from_and_during)
    data = pickled_chain(err, _stand_in)
    assert data is not None
    back = unpickled_chain(data)
    assert [type(e) for e in chain_of(back)] == [ValueError, KeyError, OSError]
    assert back.__cause__ is back.__context__ and isinstance(back.__cause__, KeyError)
    assert back.__suppress_context__ and not back.__cause__.__suppress_context__
    assert isinstance(back.__cause__.__context__, OSError) and back.__cause__.__cause__ is None
    assert str(back.__cause__.__context__) == "first"
    assert pickle.loads(pickle.dumps(ValueError("x"))).__cause__ is None  # what plain pickling does


def test_a_link_that_does_not_pickle_crosses_as_a_stand_in_and_a_raised_one_does_not_cross() -> None:
    def locked_context() -> None:
        try:
            raise Locked("held")
        except Locked:
            raise ValueError("raised while handling")  # noqa: B904 (the context is the point)

    back = unpickled_chain(pickled_chain(_raised(locked_context), _stand_in) or b"")
    assert isinstance(back, ValueError) and type(back.__context__) is RuntimeError
    assert str(back.__context__) == "Locked: held"
    assert pickled_chain(Locked("raised"), _stand_in) is None


def test_a_cycle_of_contexts_is_walked_once() -> None:
    a, b = ValueError("a"), KeyError("b")
    a.__context__, b.__context__ = b, a
    assert chain_of(a) == [a, b]
    back = unpickled_chain(pickled_chain(a, _stand_in) or b"")
    assert back.__context__ is not None and back.__context__.__context__ is back


@pytest.fixture
def chain_pickling_reducer() -> Iterator[None]:
    """A copyreg reducer that pickles an exception with its context, as tblib's does (Dask's workers install
    it): a context that does not pickle then fails pickling the exception that has it."""

    def reduce(err: BaseException) -> object:
        return _rebuilt, (type(err), err.args, err.__context__)

    copyreg.pickle(ValueError, reduce)  # type: ignore[arg-type]
    try:
        yield
    finally:
        del copyreg.dispatch_table[ValueError]


def _rebuilt(cls: type[BaseException], args: tuple[object, ...], context: BaseException | None) -> BaseException:
    err = cls(*args)
    err.__context__ = context
    return err


@pytest.mark.usefixtures("chain_pickling_reducer")
def test_each_exception_is_pickled_as_its_class_reduces_it_whatever_copyreg_holds() -> None:
    err = ValueError("top")
    err.__context__ = Locked("held")
    with pytest.raises(TypeError):
        pickle.dumps(err)
    assert pickled_alone(err) is not None
    back = unpickled_chain(pickled_chain(err, _stand_in) or b"")
    assert str(back) == "top" and str(back.__context__) == "Locked: held"


def test_a_link_that_does_not_unpickle_here_is_left_out_and_the_raised_error_still_comes() -> None:
    err = _raised(_from_and_during)
    data = pickled_chain(err, _stand_in)
    assert data is not None
    blobs, links = pickle.loads(data)
    blobs[1] = b"not a pickle"  # the KeyError: a class this process cannot import, say
    back = unpickled_chain(pickle.dumps((blobs, links)))
    assert isinstance(back, ValueError) and back.__cause__ is None and back.__context__ is None
    assert back.__suppress_context__
