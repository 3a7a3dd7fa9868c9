"""IRModule: an ordered mapping from GlobalVar to functions (TVM's ``IRModule``).

The module is a mutable container of immutable functions. It may hold a
function as its encoded msgpack bytes and decode it only when it is read: the
parallel executor passes worker results through the parent this way, and
``load`` does the same, so untouched functions are never decoded.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from itertools import repeat
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Union, cast

import msgspec

from parpass.errors import ReadOnlyModuleError, not_found
from parpass.ir.node import AttrValue, BaseFunc, FrozenAttrs, GlobalVar, checked_value, frozen_attrs

FuncKey = Union[str, GlobalVar]
#: A function's class and attributes, which pick the passes that visit it.
_Head = tuple[type[BaseFunc], Mapping[str, AttrValue]]
#: How errors name a module attribute (``module attribute 'target': ...``).
_MODULE_ATTR = "module attribute"
#: What the constructor accepts: names or GlobalVars as keys (Any so that ``dict[str, Function]`` type-checks).
_FunctionsArg = Union[Mapping[Any, BaseFunc], Iterable[tuple[Any, BaseFunc]]]


class _SlotBase:
    """One function of a module: decoded, encoded, or both (decoding is cached).

    A slot may instead hold a ``loader`` that computes the function on first read.
    The encoded form may be a read-only buffer (a view of a file an executor's
    workers wrote) rather than ``bytes``; it becomes ``bytes`` when handed out.
    Two kinds: :class:`_Slot`, and :class:`_HeldSlot` for a function held as bytes
    with no loader, which the garbage collector does not track.
    """

    if not TYPE_CHECKING:  # no instance dict (type checkers take the annotations below for the attributes)
        __slots__ = ()

    func: BaseFunc | None
    data: bytes | memoryview | None
    loader: Callable[[], BaseFunc] | None
    digest: bytes | None  # of ``data`` (or of the encoding of ``func``), when someone computed it
    location: object  # where an executor keeps a copy of ``data`` (opaque here)
    head: _Head | None  # (class, attrs), once read

    def get(self, name: str = "") -> BaseFunc:
        """The function, decoded now if need be; bytes that do not decode raise IRFormatError naming ``name``."""
        if self.func is None:
            if self.loader is not None:
                self.func = self.loader()
                self.loader = None
            else:
                from parpass.ir.serialization import decode_function

                assert self.data is not None
                self.func = decode_function(self.data, f"@{name}" if name else "")
        return self.func

    def held_size(self) -> int | None:
        """The length of the encoded form if held (else None), without slicing it out of a larger buffer."""
        data = self.data
        return None if data is None else len(data)

    def shareable(self) -> _SlotBase:
        """This slot, fit to be shared by a copy of the module (a pending loader runs first)."""
        if self.loader is not None:
            self.get()
        return self

    def buffer(self) -> bytes | memoryview:
        """The encoded form, encoded now if need be (not copied when it is a view)."""
        if self.data is None:
            from parpass.ir.serialization import encode_function

            self.data = encode_function(self.get())  # get(): a slot may hold a pending loader
        return self.data

    def kind_and_attrs(self, name: str = "") -> _Head:
        """The class and attributes, read from the bytes if need be; cached (both are immutable)."""
        if self.head is None:
            if self.func is None and self.data is not None:
                from parpass.ir.peek import peek_function

                try:
                    self.head = peek_function(self.data)
                    return self.head
                except (msgspec.DecodeError, UnicodeDecodeError):
                    pass  # decoding it whole says what is wrong (IRFormatError naming ``name``)
            func = self.get(name)
            self.head = type(func), func.attrs
        return self.head

    def called_names(self, name: str = "") -> list[str]:
        """The names of the functions it refers to, read from the bytes where it holds no function decoded."""
        from parpass.ir.calls import called_names, called_names_encoded
        from parpass.ir.relax import Function

        if not issubclass(self.kind_and_attrs(name)[0], Function):
            return []  # a PrimFunc calls no module function
        if self.func is None and self.loader is None:
            data = self.data
            assert data is not None
            try:
                return called_names_encoded(data)
            except (msgspec.DecodeError, UnicodeDecodeError):
                pass  # decoding it whole says what is wrong
        return called_names(cast("Function", self.get(name)))

    def encoded(self) -> bytes:
        data = self.buffer()
        if not isinstance(data, bytes):
            data = self.data = bytes(data)  # the view's file may go: the bytes are the module's own from now on
        return data


class _Slot(_SlotBase):
    """A slot of any kind (see :class:`_SlotBase`)."""

    __slots__ = ("data", "digest", "func", "head", "loader", "location")

    def __init__(
        self,
        func: BaseFunc | None = None,
        data: bytes | memoryview | None = None,
        loader: Callable[[], BaseFunc] | None = None,
        digest: bytes | None = None,
        location: object = None,
        head: _Head | None = None,
    ) -> None:
        self.func = func
        self.data = data
        self.loader = loader
        self.digest = digest
        self.location = location
        self.head = head


class _HeldSlot(msgspec.Struct, _SlotBase, gc=False):
    """A function held as bytes, with no loader (an executor's merge makes thousands a wave): untracked by
    the garbage collector. Nothing it holds can lead back to it (IR, bytes or a view of a file, a digest,
    an opaque location, a class and plain attributes), so it is never part of a cycle.

    Its bytes may be a region of a larger buffer (``whole[start:start + size]``), sliced out when first read:
    a merge then makes no view per function. A ``whole`` that is no bytes (an executor's stand-in for bytes
    it fetches when sliced) stays after: it may know more of them (their digest, where they lie).
    """

    func: Any = None
    raw: Any = None  # the encoded form, once set or sliced out of ``whole``
    loader: Any = None
    digest: Any = None
    location: Any = None
    head: Any = None
    whole: Any = None
    start: int = 0
    size: int = 0

    @property
    def data(self) -> bytes | memoryview | None:
        raw: bytes | memoryview | None = self.raw
        if raw is None and self.whole is not None:
            whole = self.whole
            raw = self.raw = whole[self.start : self.start + self.size]
            if isinstance(whole, (bytes, memoryview)):  # a stand-in that knows more of its bytes is kept
                self.whole = None
        return raw

    @data.setter
    def data(self, value: bytes | memoryview | None) -> None:
        self.raw, self.whole = value, None

    def held_size(self) -> int | None:
        if self.raw is not None:
            return len(self.raw)
        return None if self.whole is None else self.size

    def encoded(self) -> bytes:
        data = self.buffer()
        if not isinstance(data, bytes):  # the same bytes, the module's own from now on (a stand-in ``whole`` stays)
            data = self.raw = bytes(data)
        return data


class ModuleColumns(NamedTuple):
    """A module's functions as columns, in module order (see :meth:`IRModule.columns`)."""

    names: list[str]
    #: ``(class, attributes)`` (see :meth:`IRModule.kind_and_attrs`)
    heads: list[_Head]
    #: the encoded size where the module holds the bytes, else None (see :meth:`IRModule.cached_size`)
    sizes: list[int | None]
    #: whether it is held decoded (see :meth:`IRModule.is_decoded`)
    decoded: list[bool]
    #: the content digest of its bytes, where someone recorded it (see :meth:`IRModule.record_digest`)
    digests: list[bytes | None]
    #: where an executor keeps a copy of its bytes (see :meth:`IRModule.record_location`)
    locations: list[object]


def _held_columns(slots: list[_SlotBase]) -> tuple[list[int | None], list[bool]]:
    """Each slot's encoded size if it holds the bytes (else None), and whether it holds the function decoded."""
    return [slot.held_size() for slot in slots], [slot.func is not None for slot in slots]


def _patched(
    columns: ModuleColumns,
    positions: Sequence[int],
    sizes: Sequence[int],
    digests: Sequence[bytes | None],
    locations: Sequence[object],
    heads: Sequence[_Head],
) -> ModuleColumns:
    """``columns`` with the functions at ``positions`` replaced by ones held only as bytes (new lists)."""
    out = ModuleColumns(
        columns.names,
        list(columns.heads),
        list(columns.sizes),
        list(columns.decoded),
        list(columns.digests),
        list(columns.locations),
    )
    columns_and_values: list[tuple[list[Any], Iterable[Any]]] = [
        (out.heads, heads),
        (out.sizes, sizes),
        (out.decoded, repeat(False)),
        (out.digests, digests),
        (out.locations, locations),
    ]
    for column, values in columns_and_values:
        deque(map(column.__setitem__, positions, values), maxlen=0)
    return out


def _at_positions(order: list[str], positions: Sequence[int], names: Sequence[str]) -> bool:
    """Whether ``names`` are the names at ``positions`` of ``order``."""
    if len(positions) != len(names) or min(positions, default=0) < 0:
        return False
    try:
        return list(map(order.__getitem__, positions)) == (names if isinstance(names, list) else list(names))
    except IndexError:
        return False


#: A handle on what a function of a module held at one time (see :meth:`IRModule.function_sources`).
FunctionSource = _SlotBase


def source_region(source: FunctionSource) -> object | None:
    """The buffer ``source``'s bytes are still to be sliced from (an executor's stand-in for bytes it has not
    fetched, say), or None: read without slicing it."""
    return source.whole if isinstance(source, _HeldSlot) else None


def source_function(source: FunctionSource, name: str) -> BaseFunc:
    """The function ``source`` holds, decoded from its bytes if need be (not cached in the slot, whose modules
    keep their columns); IRFormatError naming ``name`` for bytes that do not decode."""
    func = source.func
    if func is not None:
        return func
    if source.loader is not None:  # computed once, as for its module
        return source.get(name)
    from parpass.ir.serialization import decode_function

    data = source.data
    assert data is not None, "a slot holds a function, bytes or a loader"
    return decode_function(data, f"@{name}")


def _known_head(slot: _SlotBase | None) -> _Head | None:
    """The class and attributes ``slot`` holds without reading its bytes (None if it holds none)."""
    if slot is None:
        return None
    return slot.head if slot.head is not None or slot.func is None else (type(slot.func), slot.func.attrs)


class _FunctionsView(Mapping[GlobalVar, BaseFunc]):
    """Read-only, live view ``GlobalVar -> function`` of a module, in module order."""

    __slots__ = ("_mod",)

    def __init__(self, mod: IRModule) -> None:
        self._mod = mod

    def __getitem__(self, key: GlobalVar) -> BaseFunc:
        return self._mod[key]

    def __iter__(self) -> Iterator[GlobalVar]:
        return iter(self._mod)

    def __len__(self) -> int:
        return len(self._mod)

    def __contains__(self, key: object) -> bool:
        return key in self._mod

    def __repr__(self) -> str:
        return f"<functions of module: {', '.join(self._mod.names())}>"


def _name_of(key: object) -> str:
    if type(key) is str:  # the common case first: a name (a pass's loop looks up every function by it)
        return key
    if isinstance(key, GlobalVar):
        return key.name_hint
    if isinstance(key, str):
        return key
    raise TypeError(f"module keys are function names (str) or GlobalVar, got {type(key).__name__}: {key!r}")


class IRModule:
    """An ordered collection of named functions plus module attributes.

    ``IRModule({"main": f, GlobalVar("g"): g}, attrs={...})``. Functions are read
    with ``mod["main"]`` or ``mod[gv]``, set with ``mod["main"] = f``, and removed
    with ``del mod["main"]`` / :meth:`remove`. Iterating yields GlobalVars in
    module order (the order functions were first added).
    """

    __slots__ = ("__weakref__", "_attrs", "_columns", "_read_only", "_slots")

    def __init__(
        self,
        functions: _FunctionsArg | None = None,
        attrs: Mapping[str, AttrValue] | None = None,
    ) -> None:
        self._slots: dict[str, _SlotBase] = {}
        self._attrs: FrozenAttrs = frozen_attrs(attrs or {}, _MODULE_ATTR)
        self._read_only: str | None = None
        #: :meth:`columns` as last read or merged, until the module changes (see there)
        self._columns: ModuleColumns | None = None
        if functions is not None:
            items = functions.items() if isinstance(functions, Mapping) else functions
            for key, func in items:
                self[key] = func

    # ------------------------------------------------------------ reading

    def _slot(self, key: FuncKey) -> _SlotBase:
        slot = self._slots.get(key) if type(key) is str else None  # a name, the common case: one dict lookup
        if slot is None:
            name = _name_of(key)
            slot = self._slots.get(name)
            if slot is None:
                raise not_found("function", name, self._slots, where="in the module")
        return slot

    def __getitem__(self, key: FuncKey) -> BaseFunc:
        slot = self._slot(key)
        func = slot.func
        if func is None:
            self._columns = None  # its "decoded" column changes
            return slot.get(_name_of(key))
        return func

    def __contains__(self, key: object) -> bool:
        if isinstance(key, GlobalVar):
            return key.name_hint in self._slots
        return isinstance(key, str) and key in self._slots

    def __len__(self) -> int:
        return len(self._slots)

    def __iter__(self) -> Iterator[GlobalVar]:
        return (GlobalVar(name) for name in list(self._slots))

    def names(self) -> list[str]:
        """Function names in module order."""
        return list(self._slots)

    def items(self) -> Iterator[tuple[GlobalVar, BaseFunc]]:
        """``(GlobalVar, function)`` pairs in module order (decodes lazily held functions)."""
        self._columns = None  # the "decoded" column changes
        for name, slot in list(self._slots.items()):
            yield GlobalVar(name), slot.get(name)

    @property
    def functions(self) -> Mapping[GlobalVar, BaseFunc]:
        """A read-only live mapping ``GlobalVar -> function`` (TVM's ``mod.functions``)."""
        return _FunctionsView(self)

    def get_global_var(self, name: str) -> GlobalVar:
        """The GlobalVar of function ``name``; KeyError naming the closest names if absent."""
        self._slot(name)
        return GlobalVar(name)

    def get_global_vars(self) -> list[GlobalVar]:
        """All GlobalVars, in module order."""
        return [GlobalVar(name) for name in self._slots]

    @property
    def attrs(self) -> Mapping[str, AttrValue]:
        """Module attributes (read-only; use :meth:`with_attr`)."""
        return MappingProxyType(self._attrs)

    def get_attr(self, key: str, default: AttrValue = None) -> AttrValue:
        """Attribute ``key``, or ``default``."""
        return self._attrs.get(key, default)

    # ------------------------------------------------------------ changing

    def _check_writable(self) -> None:
        """Raise on a read-only module; called first by every change of the functions."""
        if self._read_only is not None:
            raise ReadOnlyModuleError(f"this IRModule is read-only: {self._read_only}")
        self._columns = None

    def __setitem__(self, key: FuncKey, func: BaseFunc) -> None:
        self._check_writable()
        name = _name_of(key)
        if not isinstance(func, BaseFunc):
            raise TypeError(f"module function {name!r} must be a Function or PrimFunc, got {type(func).__name__}")
        self._slots[name] = _Slot(func)

    def update_func(self, gv: FuncKey, func: BaseFunc) -> None:
        """Replace (or add) the function of ``gv`` (TVM's ``update_func``)."""
        self[gv] = func

    def update(self, other: IRModule | Mapping[FuncKey, BaseFunc]) -> None:
        """Add or replace every function of ``other`` (TVM's ``update``), keeping its encoded form."""
        self._check_writable()
        if isinstance(other, IRModule):
            for name, slot in other._slots.items():
                self._slots[name] = slot.shareable()
        else:
            for key, func in other.items():
                self[key] = func

    def __delitem__(self, key: FuncKey) -> None:
        self._check_writable()
        self._slot(key)
        del self._slots[_name_of(key)]

    def remove(self, key: FuncKey) -> None:
        """Remove function ``key``; KeyError naming the closest names if absent."""
        del self[key]

    def with_attr(self, key: str, value: AttrValue) -> IRModule:
        """A copy of this module with attribute ``key`` set to ``value``."""
        if not isinstance(key, str):
            raise TypeError(f"attribute keys must be str, got {type(key).__name__}: {key!r}")
        value = checked_value(value, f"{_MODULE_ATTR} {key!r}")
        new = self.copy()
        new._attrs = FrozenAttrs({**self._attrs, key: value}, _MODULE_ATTR)
        return new

    def without_attr(self, key: str) -> IRModule:
        """A copy of this module without attribute ``key``."""
        new = self.copy()
        new._attrs = frozen_attrs({k: v for k, v in self._attrs.items() if k != key}, _MODULE_ATTR)
        return new

    def copy(self) -> IRModule:
        """A shallow, writable copy: functions are immutable and shared."""
        new = IRModule.__new__(IRModule)
        if type(self) is IRModule and self._read_only is None:
            new._slots = dict(self._slots)  # only a module made by from_loader (or a view of one) holds loaders
        else:
            new._slots = {name: slot.shareable() for name, slot in self._slots.items()}
        new._attrs = self._attrs  # immutable all the way down: shared
        new._read_only = None
        new._columns = self._columns  # the same slots: the same columns (never changed in place)
        return new

    def read_only_view(self, reason: str = "it was handed out read-only") -> IRModule:
        """A view of this module that raises :class:`ReadOnlyModuleError` on any change.

        The view shares the function slots, so functions it decodes are decoded for both.
        """
        view = IRModule.__new__(IRModule)
        view._slots = self._slots
        view._attrs = self._attrs
        view._read_only = reason
        view._columns = None  # never kept: the view shares the table of a module that may change
        return view

    @property
    def is_read_only(self) -> bool:
        return self._read_only is not None

    def fingerprint(self) -> tuple[object, ...]:
        """A cheap identity snapshot: per function (module order) its name and the object held, then the attributes.

        The object is the function's slot, which copies of a module share and which
        is replaced whenever the function is set, so decoding a lazily held function
        does not change it. Nothing is decoded, encoded or compared deeply: compare
        two fingerprints element-wise with ``is`` (names and the final attribute
        tuple with ``==``). Equal fingerprints mean the same functions; different
        ones mean the module may have changed.
        """
        out: list[object] = []
        for name, slot in self._slots.items():
            out.append(name)
            out.append(slot)
        out.append(tuple(self._attrs.items()))
        return tuple(out)

    # ------------------------------------------------------------ encoded functions

    def encoded_function(self, key: FuncKey) -> bytes:
        """Function ``key`` as msgpack bytes; cached, so shipping it twice encodes it once."""
        return self._encoded_slot(key).encoded()

    def _encoded_slot(self, key: FuncKey) -> _SlotBase:
        """The slot of ``key``, which is about to be read as bytes (its "sizes" column changes if it holds none)."""
        slot = self._slot(key)
        if slot.data is None:
            self._columns = None
        return slot

    def set_encoded_function(self, key: FuncKey, data: bytes | memoryview, func: BaseFunc | None = None) -> None:
        """Set function ``key`` from msgpack bytes (or a read-only buffer of them), decoded only when first read.

        ``func``, if given, is the function ``data`` decodes to (already decoded by the caller).
        """
        self._check_writable()
        self._slots[_name_of(key)] = _Slot(func, data)

    def set_encoded_functions_in_order(
        self,
        names: Sequence[str],
        data: Sequence[bytes | memoryview],
        funcs: Sequence[BaseFunc | None] | None = None,
    ) -> None:
        """:meth:`set_encoded_function` for each of ``names`` in turn, with ``data[i]`` (and ``funcs[i]``, the
        function it decodes to, where the caller decoded it): what a reader of a whole module calls, at a
        fraction of the cost of one call per function (24,000 functions: 4 against 14 ms)."""
        self._check_writable()
        if not set(map(type, names)) <= {str}:
            bad = next(name for name in names if type(name) is not str)
            raise TypeError(f"function names are str, got {type(bad).__name__}: {bad!r}")
        if len(data) != len(names) or (funcs is not None and len(funcs) != len(names)):
            raise ValueError("set_encoded_functions_in_order: names, data and funcs differ in length")
        held = map(_HeldSlot, repeat(None) if funcs is None else funcs, data)
        self._slots.update(zip(names, held, strict=True))

    def set_encoded_functions(
        self,
        items: Iterable[tuple[str, bytes | memoryview, bytes | None, object, _Head | None]],
        same_head_as: IRModule | None = None,
    ) -> None:
        """:meth:`set_encoded_function` for many functions at once: ``items`` of ``(name, data, digest,
        location, head)``.

        ``digest`` is a content digest of ``data`` and ``location`` where an executor keeps a copy of it
        (both opaque here, returned by :meth:`encoded_entries`); ``head`` is the function's ``(class,
        attributes)``, which spares :meth:`kind_and_attrs` reading them from the bytes: None takes them from
        ``same_head_as`` (a module whose function of that name has the same ones), if given. What an executor
        merging a wave's results calls, once per wave rather than once per function.
        """
        self._check_writable()
        slots = self._slots
        before = same_head_as._slots if same_head_as is not None else {}
        for name, data, digest, location, head in items:
            if type(name) is not str:
                raise TypeError(f"function names are str, got {type(name).__name__}: {name!r}")
            if head is None:
                head = _known_head(before.get(name))
            elif type(head[1]) is not FrozenAttrs:  # a cached head refuses changes, as the function's attrs do
                head = (head[0], frozen_attrs(head[1]))
            slots[name] = _Slot(None, data, None, digest, location, head)

    def encoded_entries(self) -> list[tuple[str, bytes | memoryview, bytes | None, object]]:
        """Every function as ``(name, encoded form, digest or None, location or None)``, in module order.

        What an executor ships, read in one pass (a function held only decoded is
        encoded now; a view is not copied). Raises what encoding raises.
        """
        self._columns = None  # the "sizes" column may change
        return [(name, slot.buffer(), slot.digest, slot.location) for name, slot in self._slots.items()]

    def columns(self) -> ModuleColumns:
        """Every function's name, head, held size, whether it is held decoded, digest and location, in module
        order (see :class:`ModuleColumns`): what an executor reads once per wave. Nothing is encoded or decoded
        (a head may be read from the bytes).

        Kept until the module changes (a change of its functions, reading one that was held only as bytes,
        encoding one held only decoded, recording a digest or a location without its position), carried by
        :meth:`copy`, and patched by :meth:`set_encoded_columns`, :meth:`record_digests` and
        :meth:`record_locations` given the positions: so a pipeline's next wave reads a module the last one
        merged without walking it. The lists are shared: read them, never change them. Modules that share
        functions (a module and its copy) each keep their own: a function one of them decodes or digests may
        still show in the other's as it was (sizes, digests, locations and decoded flags only lag, from
        unknown to known; names and heads are always exact).
        """
        columns = self._columns
        if columns is None:
            slots = list(self._slots.values())
            names, heads = self.head_columns()
            columns = ModuleColumns(
                names, heads, *_held_columns(slots), [slot.digest for slot in slots], [slot.location for slot in slots]
            )
            if self._read_only is None:
                self._columns = columns
        return columns

    def head_columns(self) -> tuple[list[str], list[_Head]]:
        """Every function's name, and its ``(class, attributes)`` (see :meth:`kind_and_attrs`), in module order.

        :meth:`heads` as two lists: what an executor picking a wave's targets reads, once per wave.
        """
        slots = self._slots
        return list(slots), [slot.head or slot.kind_and_attrs(name) for name, slot in slots.items()]

    def encoded_columns(self) -> tuple[list[int], list[bytes | None], list[object]]:
        """:meth:`encoded_entries` as columns, less the bytes themselves: every function's encoded size, digest
        (or None) and location (or None), in module order. A function held only decoded is encoded now (its
        bytes are then held, for :meth:`encoded_buffer`); raises what encoding raises."""
        slots = list(self._slots.values())
        self._columns = None  # the "sizes" column may change
        sizes = [len(slot.data or slot.buffer()) for slot in slots]
        return sizes, [slot.digest for slot in slots], [slot.location for slot in slots]

    def held_columns(self) -> tuple[list[int | None], list[bool]]:
        """Every function's encoded size if the module holds its bytes (else None), and whether it is held
        decoded, in module order: :meth:`cached_size` and :meth:`is_decoded` for all at once (nothing is
        encoded or decoded)."""
        return _held_columns(list(self._slots.values()))

    def set_encoded_columns(
        self,
        names: Sequence[str],
        data: Sequence[bytes | memoryview],
        digests: Sequence[bytes | None],
        locations: Sequence[object],
        heads: Sequence[_Head],
        positions: Sequence[int] | None = None,
    ) -> None:
        """:meth:`set_encoded_functions` for functions this module has, as columns (one item of each per name),
        each with its head given: what an executor merging a wave calls, at a fraction of the cost per function.
        The heads are kept as given: their attributes must be :class:`~parpass.ir.node.FrozenAttrs`, as
        :meth:`kind_and_attrs` hands them out (freezing them here would cost each function what the executor
        pays once per distinct head).

        ``positions``, if given, are the functions' places in module order: the module's :meth:`columns`, if
        it holds them, are then patched rather than read again at the next wave. Raises KeyError, changing
        nothing, if a name is not a function of the module; given positions, ValueError if one is not its
        name's place.
        """
        self.set_encoded_regions(names, data, repeat(0), list(map(len, data)), digests, locations, heads, positions)

    def set_encoded_regions(
        self,
        names: Sequence[str],
        buffers: Iterable[bytes | memoryview],
        starts: Iterable[int],
        sizes: Sequence[int],
        digests: Sequence[bytes | None],
        locations: Sequence[object],
        heads: Sequence[_Head],
        positions: Sequence[int] | None = None,
    ) -> None:
        """:meth:`set_encoded_columns` with each function's bytes given as a region of a buffer (many share
        one): ``buffers[i][starts[i]:starts[i] + sizes[i]]``, sliced out only when first read."""
        before = self._columns
        self._check_writable()
        slots = self._slots
        if positions is not None:  # the names at these positions: functions of the module
            if not _at_positions(list(slots) if before is None else before.names, positions, names):
                raise ValueError("set_encoded_columns: positions are not those of the names in module order")
        elif missing := set(names).difference(slots):
            raise KeyError(f"set_encoded_columns replaces functions of the module; not in it: {sorted(missing)!r}")
        func = raw = loader = repeat(None)  # one endless iterator of None, read once per slot for each
        held = map(_HeldSlot, func, raw, loader, digests, locations, heads, buffers, starts, sizes)
        slots.update(zip(names, held, strict=True))
        if before is not None and positions is not None:
            self._columns = _patched(before, positions, sizes, digests, locations, heads)

    def record_digests(
        self, names: Sequence[str], digests: Sequence[bytes | None], positions: Sequence[int] | None = None
    ) -> None:
        """:meth:`record_digest` for many functions at once (None forgets one); ``positions``, if given, are
        their places in module order, and the module's :meth:`columns`, if it holds them, are then patched
        rather than dropped (ValueError, recording nothing, if a position is not its name's)."""
        self._record("digest", names, digests, positions)

    def record_locations(
        self, names: Sequence[str], locations: Sequence[object], positions: Sequence[int] | None = None
    ) -> None:
        """:meth:`record_location` for many functions at once; ``positions`` as for :meth:`record_digests`."""
        self._record("location", names, locations, positions)

    def _record(
        self, field: str, names: Sequence[str], values: Sequence[object], positions: Sequence[int] | None
    ) -> None:
        """Set slot attribute ``field`` (a cache: digest or location) of functions ``names``, patching the
        kept columns' column of it where ``positions`` say which functions those are."""
        if not names:
            return
        kept = self._columns
        if positions is not None and not _at_positions(
            list(self._slots) if kept is None else kept.names, positions, names
        ):
            raise ValueError(f"record_{field}s: positions are not those of the names in module order")
        slots = self._slots
        for name, value in zip(names, values, strict=True):
            setattr(slots[name], field, value)
        if kept is None or positions is None:
            self._columns = None
            return
        column = list(getattr(kept, f"{field}s"))
        deque(map(column.__setitem__, positions, values), maxlen=0)
        self._columns = kept._replace(**{f"{field}s": column})

    def function_sources(self, names: Sequence[str]) -> list[FunctionSource]:
        """What functions ``names`` hold now, decoded or as bytes, as handles that stay valid whatever becomes of
        this module: an executor that made new functions from them elsewhere can make them again (see
        :func:`source_function`, :func:`source_region`). Each must be a name of the module (KeyError)."""
        return list(map(self._slots.__getitem__, names))

    def encoded_buffer(self, key: FuncKey) -> bytes | memoryview:
        """Function ``key``'s encoded form as held: like :meth:`encoded_function`, but a view is not copied."""
        return self._encoded_slot(key).buffer()

    def record_location(self, key: FuncKey, location: object) -> None:
        """Record where an executor keeps a copy of function ``key``'s bytes (see :meth:`encoded_entries`)."""
        self._slot(key).location = location
        self._columns = None

    def digest(self, key: FuncKey) -> bytes | None:
        """The content digest recorded for function ``key``'s encoded bytes (see :meth:`record_digest`), or None."""
        return self._slot(key).digest

    def record_digest(self, key: FuncKey, digest: bytes) -> None:
        """Record ``digest`` as the content digest of function ``key``'s encoded bytes (a cache, like the bytes;
        an executor that keeps functions decoded elsewhere finds them by it again)."""
        self._slot(key).digest = digest
        self._columns = None

    def kind_and_attrs(self, key: FuncKey) -> tuple[type[BaseFunc], Mapping[str, AttrValue]]:
        """The class and the attributes of function ``key``, without decoding its body.

        Lets an executor pick the targets of a pass (kind, ``SkipOptimization``)
        from a module whose functions are still held as bytes.
        """
        return self._slot(key).kind_and_attrs(_name_of(key))

    def called_names(self, key: FuncKey) -> list[str]:
        """The names of the module functions that function ``key`` refers to, in first-reference order.

        As :func:`~parpass.ir.calls.called_names` gives them (``[]`` for a PrimFunc;
        a name need not be in the module), read from the bytes where the module
        holds the function encoded, so nothing is decoded: a module pass that walks
        the call graph after a parallel wave reads it as fast as from decoded IR.
        """
        return self._slot(key).called_names(_name_of(key))

    def heads(self) -> list[tuple[str, type[BaseFunc], Mapping[str, AttrValue]]]:
        """``(name, class, attributes)`` of every function, in module order (see :meth:`kind_and_attrs`)."""
        return [(name, *slot.kind_and_attrs(name)) for name, slot in self._slots.items()]

    @classmethod
    def from_loader(
        cls,
        names: Iterable[str],
        loader: Callable[[str], BaseFunc],
        attrs: Mapping[str, AttrValue] | None = None,
        *,
        read_only: str | None = None,
    ) -> IRModule:
        """A module whose function ``name`` is ``loader(name)``, computed on first read and cached.

        ``read_only``, if given, makes it a read-only module (the reason in the error on a write).
        """
        return _Deferred.make(list(names), lambda name: _Slot(loader=partial(loader, name)), attrs, read_only)

    @classmethod
    def from_encoded(
        cls,
        names: Iterable[str],
        data_of: Callable[[str], bytes],
        attrs: Mapping[str, AttrValue] | None = None,
        *,
        read_only: str | None = None,
    ) -> IRModule:
        """A module whose function ``name`` is encoded as ``data_of(name)`` (called on first use), decoded when read.

        ``read_only``, if given, makes it a read-only module (the reason in the error on a write).
        """
        return _Deferred.make(list(names), lambda name: _Slot(data=data_of(name)), attrs, read_only)

    def cached_size(self, key: FuncKey) -> int | None:
        """Length of function ``key``'s encoded bytes if the module holds them, else None (nothing is encoded)."""
        return self._slot(key).held_size()

    def held_function(self, key: FuncKey) -> BaseFunc | None:
        """Function ``key`` if held decoded, else None (nothing is decoded): for an executor's loop over a wave
        that times decoding apart."""
        return self._slot(key).func

    def is_decoded(self, key: FuncKey) -> bool:
        """Whether function ``key`` is held decoded (for tests of laziness)."""
        return self._slot(key).func is not None

    # ------------------------------------------------------------ text

    def script(self) -> str:
        """The module's text form."""
        from parpass.ir.printer import astext

        return astext(self)

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        return f"<IRModule with {len(self)} functions: {', '.join(self.names()[:8])}{', ...' if len(self) > 8 else ''}>"


class _Deferred(IRModule):
    """A module whose table of function slots is made when first used.

    The parallel executor's workers hand every pass a read-only view of the
    module as it was before that pass, one per stage of a fused chain, and most
    passes never look at it: building thousands of slots per view up front would
    cost more than the lookups ever do.
    """

    __slots__ = ("_pending",)
    _pending: tuple[list[str], Callable[[str], _SlotBase]]

    @classmethod
    def make(
        cls,
        names: list[str],
        slot_of: Callable[[str], _SlotBase],
        attrs: Mapping[str, AttrValue] | None,
        read_only: str | None,
    ) -> IRModule:
        mod = cls.__new__(cls)
        mod._attrs = frozen_attrs(attrs or {}, _MODULE_ATTR)
        mod._read_only = read_only
        mod._columns = None
        mod._pending = (names, slot_of)
        return mod

    def __getattr__(self, attr: str) -> Any:
        # Called only while the ``_slots`` slot is still unset.
        if attr != "_slots":
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {attr!r}")
        names, slot_of = self._pending
        self._slots = {name: slot_of(name) for name in names}
        return self._slots


def same_fingerprint(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """Whether two ``IRModule.fingerprint()``s hold the same function objects and equal attributes."""
    if len(a) != len(b) or a[-1] != b[-1]:
        return False
    return all(x is y or (type(x) is str and x == y) for x, y in zip(a[:-1], b[:-1], strict=True))
