"""Textual pass pipelines (like MLIR's and xDSL's): ``parse_pipeline(text)`` and printing back.

Grammar (``{ x }`` is zero or more, ``[ x ]`` optional; spaces are allowed
between tokens)::

    pipeline ::= [ element { "," element } ]
    element  ::= "seq" [ options ] "(" pipeline ")"     -- a nested Sequential
               | name [ options ]                       -- a registered pass
    options  ::= "{" [ option { [ "," ] option } ] "}"   -- separated by spaces (or commas)
    option   ::= key "=" value
    name     ::= /[A-Za-z_][A-Za-z0-9_.-]*/ | string    -- quote names that are not words (or are "seq")
    key      ::= /[A-Za-z_][A-Za-z0-9_-]*/              -- "-" is read as "_": max-step means max_step
    value    ::= string | word                          -- a word is any run of other characters
    string   ::= a JSON string ("..." with JSON escapes) | '...' (no escapes)

A word value means: ``true``/``false`` a bool, ``none`` None, an integer
literal an int, a float literal (``1.5``, ``1e-3``, ``inf``, ``nan``) a float,
anything else the string itself. A quoted value is always a string.

Example::

    FoldConstant,seq(EliminateCommonSubexpr,DeadCodeElimination),UnrollLoop{auto_max_step=16 explicit_unroll=false}

The options of a pass are keyword arguments of the factory it is registered
with (see :func:`~parpass.transform.register_pass`); they are checked against
the factory's signature (unknown names, and values that do not match the
parameter's annotation, or its default's type when it has none) before the
factory is called. ``seq`` takes the Sequential's ``name``, ``opt_level`` and
``traceable``.

:func:`parse_pipeline` returns a :class:`Pipeline` (a :class:`Sequential` whose
``str()`` is its spec), so ``parse_pipeline(str(p))`` builds the same pipeline
again; :func:`pipeline_spec` prints any pass or Sequential whose parts are
registered passes. Every error is a :class:`PipelineSpecError` (a
``ValueError``) that gives the column, shows the spec with a caret under the
offending place and, for an unknown pass or option, names the closest ones.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import re
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from parpass.errors import ParpassError, closest_names, format_names, suggestion
from parpass.transform import registry
from parpass.transform.config import type_name
from parpass.transform.pass_classes import changed_options
from parpass.transform.passes import Pass, Sequential

__all__ = ["Pipeline", "PipelineSpecError", "parse_pipeline", "pipeline_spec", "spec_value"]

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")
_INT_RE = re.compile(r"[-+]?[0-9]+")
_FLOAT_RE = re.compile(r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+(?=[eE]))(?:[eE][-+]?[0-9]+)?")
_SPECIAL_FLOATS = {"inf": math.inf, "+inf": math.inf, "-inf": -math.inf, "nan": math.nan}
#: The parameters an option can name (not ``*args``, ``**kwargs`` or positional-only ones).
_NAMED_PARAMETERS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
_WORD_STOP = frozenset(" \t\r\n{}(),=\"'")
_SEQ = "seq"
#: Options of ``seq{...}``: the Sequential's constructor arguments a spec can carry.
_SEQ_OPTIONS: dict[str, Any] = {"name": str, "opt_level": int, "traceable": bool}
_SEQ_DEFAULTS: dict[str, Any] = {"name": "sequential", "opt_level": 0, "traceable": False}


class PipelineSpecError(ParpassError, ValueError):
    """A pipeline spec that cannot be parsed or built; says where (column, caret) and what is wrong.

    ``reason`` is the message without the location, ``spec`` the text and
    ``offset`` the 0-based index in it; ``line`` and ``column`` are 1-based.
    """

    def __init__(self, reason: str, spec: str, offset: int) -> None:
        offset = max(0, min(offset, len(spec)))
        self.reason = reason
        self.spec = spec
        self.offset = offset
        start = spec.rfind("\n", 0, offset) + 1
        end = spec.find("\n", offset)
        self.line = spec.count("\n", 0, offset) + 1
        self.column = offset - start + 1
        self.source_line = spec[start : end if end >= 0 else len(spec)]
        where = f"line {self.line}, column {self.column}" if "\n" in spec else f"column {self.column}"
        super().__init__(f"pipeline spec, {where}: {reason}")

    @property
    def caret(self) -> str:
        """Two lines: the spec's line and a caret under the offending character."""
        pad = "".join("\t" if ch == "\t" else " " for ch in self.source_line[: self.column - 1])
        return f"  {self.source_line}\n  {pad}^"

    def __str__(self) -> str:
        return f"{self.args[0]}\n{self.caret}"


# ---------------------------------------------------------------------------------------------------------------------
# values


def _word_value(word: str) -> Any:
    """What an unquoted option value means (see the module docstring)."""
    if word == "true":
        return True
    if word == "false":
        return False
    if word == "none":
        return None
    if _INT_RE.fullmatch(word):
        return int(word)
    if _FLOAT_RE.fullmatch(word):
        return float(word)
    if word.lower() in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[word.lower()]
    return word


def spec_value(value: Any) -> str:
    """The spec text of an option value, such that parsing it gives ``value`` back."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        if value and _NAME_RE.fullmatch(value) and _word_value(value) == value:
            return value
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"a pipeline spec option value must be a bool, int, float, str or None, got {type(value).__name__}")


def _spec_name(name: str) -> str:
    return name if _NAME_RE.fullmatch(name) and name != _SEQ else json.dumps(name, ensure_ascii=False)


def _options_text(options: Sequence[tuple[str, Any]]) -> str:
    return "{" + " ".join(f"{key}={spec_value(value)}" for key, value in options) + "}" if options else ""


# ---------------------------------------------------------------------------------------------------------------------
# the Sequential that remembers its spec


class Pipeline(Sequential):
    """A :class:`Sequential` built from a pipeline spec; ``str()`` prints the spec back.

    ``specs`` holds the spec of each element (``passes[i]`` was built from
    ``specs[i]``). ``str(p)`` is the spec of the whole pipeline, so
    ``parse_pipeline(str(p))`` builds an equal pipeline; the TVM-style
    description of a Sequential is still :meth:`describe`.
    """

    def __init__(
        self,
        passes: Sequence[Pass],
        specs: Sequence[str] | None = None,
        opt_level: int = 0,
        name: str = "sequential",
        traceable: bool = False,
    ) -> None:
        super().__init__(list(passes), opt_level=opt_level, name=name, traceable=traceable)
        if specs is None:
            specs = [_element_spec(p) for p in self.passes]
        if len(specs) != len(self.passes):
            raise ValueError(f"Pipeline: {len(specs)} specs for {len(self.passes)} passes")
        self._specs: tuple[str, ...] = tuple(specs)

    @property
    def specs(self) -> tuple[str, ...]:
        """The spec of each pass of this pipeline, in order."""
        return self._specs

    def describe(self) -> str:
        """TVM's description of a Sequential (``Run Sequential pass: ... The passes will be executed are: [...]``)."""
        return Sequential.__str__(self)

    def __str__(self) -> str:
        return pipeline_spec(self)

    def __repr__(self) -> str:
        return f"<Pipeline {pipeline_spec(self)!r}>"


def _seq_options(p: Sequential) -> list[tuple[str, Any]]:
    info = p.info
    if info.required:
        raise ValueError(
            f"Sequential {info.name!r} has required passes {list(info.required)!r}, "
            "which a pipeline spec cannot express"
        )
    values = {"name": info.name, "opt_level": info.opt_level, "traceable": info.traceable}
    return [(key, values[key]) for key in _SEQ_OPTIONS if values[key] != _SEQ_DEFAULTS[key]]


def _element_spec(p: Pass) -> str:
    """The spec of ``p`` as one element of a pipeline (a Sequential becomes ``seq(...)``)."""
    stored = getattr(p, "_parpass_spec", None)
    if isinstance(stored, str):
        return stored
    if isinstance(p, Sequential):
        return f"{_SEQ}{_options_text(_seq_options(p))}({_body_spec(p)})"
    name = p.info.name
    if name not in registry.list_passes():
        raise ValueError(
            f"pass {name!r} ({type(p).__name__}) is not in the pass registry, so it has no pipeline spec; "
            "register its factory with @register_pass"
        )
    return _spec_name(name) + _options_text(changed_options(p))


def _body_spec(p: Sequential) -> str:
    if isinstance(p, Pipeline):
        return ",".join(p.specs)
    # Sequentials nest only as deep as a user wrote them; an explicit stack would buy nothing here.
    return ",".join(_element_spec(q) for q in p.passes)


def pipeline_spec(p: Pass) -> str:
    """The pipeline spec of a pass or Sequential: ``parse_pipeline(pipeline_spec(p))`` builds it again.

    A Sequential with the default name, opt_level 0 and nothing required prints
    as its elements (``A,B``), other Sequentials as ``seq{...}(A,B)``. A pass
    built by :func:`parse_pipeline` prints with the options it was built with,
    and a pass written as a class with the options it holds that are not their
    defaults; any other pass prints as its name, which must be registered (a
    ValueError otherwise). Options given to a factory function directly in
    Python are not known, so they are not printed.
    """
    if not isinstance(p, Pass):
        raise TypeError(f"pipeline_spec expects a Pass, got {type(p).__name__}: {p!r}")
    if isinstance(p, Sequential) and not _seq_options(p):
        return _body_spec(p)
    return _element_spec(p)


# ---------------------------------------------------------------------------------------------------------------------
# option checking against a factory's signature


def _annotation(factory: Callable[..., Any], param: inspect.Parameter) -> Any:
    """The parameter's annotation as a type (resolving string annotations), or inspect.Parameter.empty."""
    ann = param.annotation
    if isinstance(ann, str):
        try:
            hints = typing.get_type_hints(factory)
        except Exception:  # an annotation that does not resolve: check the default's type instead
            return inspect.Parameter.empty
        return hints.get(param.name, inspect.Parameter.empty)
    return ann


def _type_text(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__name__
    return type_name(tp)  # ranges as ``int >= 0``


def _check_value(factory: Callable[..., Any], param: inspect.Parameter, value: Any) -> str | None:
    """Why ``value`` does not suit ``param`` (None if it does)."""
    tp = _annotation(factory, param)
    if tp is inspect.Parameter.empty or tp is Any:
        default = param.default
        if default is inspect.Parameter.empty or default is None:
            return None
        tp = type(default)
    try:
        msgspec.convert(value, tp, strict=True)
    except (msgspec.ValidationError, TypeError):
        return f"expects {_type_text(tp)}, got {type(value).__name__} {spec_value(value)}"
    return None


@dataclass
class _Option:
    key: str
    value: Any
    key_pos: int
    value_pos: int


def _blamed_position(message: str, options: list[_Option], default: int) -> int:
    """Where a factory's error points: at the option its message names, so the caret is under the culprit.

    A factory that takes ``**kwargs`` (``UnrollLoop``) checks its options itself;
    its error names the option (``no field 'auto_max_stpe'``, ``field
    'auto_max_step' expects int``). An unknown name points at the key, a bad
    value at the value; a message naming no option points at the pass name.
    """
    named = [(message.find(f"'{opt.key}'"), i) for i, opt in enumerate(options) if f"'{opt.key}'" in message]
    if not named:
        return default
    opt = options[min(named)[1]]  # the first one named: later ones may be suggestions ("closest: ...")
    unknown = any(word in message for word in ("no field", "no option", "unknown"))
    return opt.key_pos if unknown else opt.value_pos


@dataclass
class _Frame:
    """A ``seq(...)`` being parsed (the outermost frame is the whole pipeline)."""

    start: int
    options: list[_Option]
    passes: list[Pass] = field(default_factory=list)
    specs: list[str] = field(default_factory=list)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, reason: str, pos: int | None = None) -> PipelineSpecError:
        return PipelineSpecError(reason, self.text, self.pos if pos is None else pos)

    def skip_ws(self) -> None:
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        self.pos = pos

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def describe_here(self) -> str:
        ch = self.peek()
        return "the end of the spec" if not ch else repr(ch)

    def string(self) -> str:
        """A quoted string at ``pos``: JSON with escapes in double quotes, verbatim in single quotes."""
        text, start = self.text, self.pos
        quote = text[start]
        if quote == "'":
            end = text.find("'", start + 1)
            if end < 0:
                raise self.error("unterminated string (missing the closing ')", start)
            self.pos = end + 1
            return text[start + 1 : end]
        pos = start + 1
        while pos < len(text) and text[pos] != '"':
            pos += 2 if text[pos] == "\\" else 1
        if pos >= len(text):
            raise self.error('unterminated string (missing the closing ")', start)
        try:
            value = json.loads(text[start : pos + 1])
        except json.JSONDecodeError as err:
            raise self.error(f"bad string literal: {err.msg}", start + err.pos) from None
        self.pos = pos + 1
        return str(value)

    def name(self) -> tuple[str, bool]:
        """A pass name (``quoted`` tells whether it was a string literal)."""
        if self.peek() in ('"', "'"):
            return self.string(), True
        m = _NAME_RE.match(self.text, self.pos)
        if m is None:
            raise self.error(f"expected a pass name or 'seq(', found {self.describe_here()}")
        self.pos = m.end()
        return m.group(), False

    def options(self) -> list[_Option]:
        """``{key=value ...}`` at ``pos`` (which holds the ``{``)."""
        opening = self.pos
        self.pos += 1
        out: list[_Option] = []
        seen: set[str] = set()
        while True:
            self.skip_ws()
            if self.peek() == ",":
                if not out:
                    raise self.error("expected an option (key=value) after '{'")
                self.pos += 1
                self.skip_ws()
            ch = self.peek()
            if ch == "}":
                self.pos += 1
                return out
            if not ch:
                raise self.error("missing '}' to close the options opened here", opening)
            out.append(self.option(seen))

    def option(self, seen: set[str]) -> _Option:
        """One ``key=value`` at ``pos``; ``seen`` holds the keys given before it in the same braces."""
        m = _KEY_RE.match(self.text, self.pos)
        if m is None:
            raise self.error(f"expected an option name or '}}', found {self.describe_here()}")
        key_pos = self.pos
        key = m.group().replace("-", "_")
        if key in seen:
            raise self.error(f"option {key!r} given twice", key_pos)
        seen.add(key)
        self.pos = m.end()
        self.skip_ws()
        if self.peek() != "=":
            raise self.error(f"expected '=' after option {key!r}, found {self.describe_here()}")
        self.pos += 1
        self.skip_ws()
        value_pos = self.pos
        return _Option(key, self.value(key), key_pos, value_pos)

    def value(self, key: str) -> Any:
        """An option's value at ``pos``: a quoted string, or a word (a number, a bool, or a bare string)."""
        if self.peek() in ('"', "'"):
            return self.string()
        end = self.pos
        while end < len(self.text) and self.text[end] not in _WORD_STOP:
            end += 1
        if end == self.pos:
            raise self.error(f"expected a value for option {key!r}, found {self.describe_here()}")
        word = self.text[self.pos : end]
        self.pos = end
        return _word_value(word)

    # ------------------------------------------------------------ building

    def build_pass(self, name: str, name_pos: int, options: list[_Option]) -> tuple[Pass, str]:
        factory = registry.get_pass_factory(name)
        if factory is None:
            hint = suggestion(name, registry.list_passes(), registry.PASS_LISTING)
            raise self.error(f"unknown pass {name!r}; {hint}", name_pos)
        kwargs = self.pass_options(name, factory, options) if options else {}
        try:
            p = factory(**kwargs)
        except Exception as err:
            what = "rejected its options" if kwargs else "could not be built"
            pos = _blamed_position(str(err), options, name_pos)
            raise self.error(f"pass {name!r} {what}: {type(err).__name__}: {err}", pos) from err
        if not isinstance(p, Pass):
            raise self.error(f"the factory of pass {name!r} returned {type(p).__name__}, not a Pass", name_pos)
        spec = _spec_name(name) + _options_text([(o.key, o.value) for o in options])
        if options or p.info.name != name:
            # So that pipeline_spec(p) alone knows the options it was built with; a pass class with
            # __slots__ refuses the attribute, and then only the enclosing Pipeline knows.
            with contextlib.suppress(AttributeError):
                p._parpass_spec = spec  # type: ignore[attr-defined]  # optional; pipeline_spec() reads it with getattr
        return p, spec

    def pass_options(self, name: str, factory: Callable[..., Pass], options: list[_Option]) -> dict[str, Any]:
        """``options`` as the factory's keyword arguments, each checked against its parameter."""
        try:
            sig: inspect.Signature | None = inspect.signature(factory)
        except (TypeError, ValueError):
            sig = None
        params = dict(sig.parameters) if sig is not None else {}
        open_kwargs = sig is None or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        accepted = {k: p for k, p in params.items() if p.kind in _NAMED_PARAMETERS}
        kwargs: dict[str, Any] = {}
        for opt in options:
            param = accepted.get(opt.key)
            if param is not None:
                problem = _check_value(factory, param, opt.value)
                if problem is not None:
                    raise self.error(f"option {opt.key!r} of pass {name!r} {problem}", opt.value_pos)
            elif not open_kwargs:
                if not accepted:
                    raise self.error(f"pass {name!r} takes no options", opt.key_pos)
                near = closest_names(opt.key, accepted, limit=3)
                raise self.error(
                    f"pass {name!r} has no option {opt.key!r}; closest: {format_names(near)} "
                    f"(options: {', '.join(accepted)})",
                    opt.key_pos,
                )
            kwargs[opt.key] = opt.value
        return kwargs

    def build_seq(self, frame: _Frame) -> Pipeline:
        values = dict(_SEQ_DEFAULTS)
        for opt in frame.options:
            tp = _SEQ_OPTIONS.get(opt.key)
            if tp is None:
                near = closest_names(opt.key, _SEQ_OPTIONS, limit=3)
                raise self.error(f"'seq' has no option {opt.key!r}; closest: {format_names(near)}", opt.key_pos)
            if type(opt.value) is not tp:
                raise self.error(
                    f"option {opt.key!r} of 'seq' expects {tp.__name__}, got {type(opt.value).__name__} "
                    f"{spec_value(opt.value)}",
                    opt.value_pos,
                )
            values[opt.key] = opt.value
        if values["opt_level"] < 0:
            raise self.error(f"option 'opt_level' of 'seq' must be >= 0, got {values['opt_level']}", frame.start)
        return Pipeline(frame.passes, frame.specs, values["opt_level"], values["name"], values["traceable"])

    # ------------------------------------------------------------ the pipeline

    def parse(self) -> Pipeline:
        """The whole spec; nested ``seq(...)`` are parsed with an explicit stack of frames."""
        stack: list[_Frame] = [_Frame(0, [])]
        self.skip_ws()
        expect_element = self.peek() not in ("", ")")
        while True:
            self.skip_ws()
            if expect_element:
                expect_element = self.element(stack)
                continue
            ch = self.peek()
            if ch == ",":
                self.pos += 1
                self.skip_ws()
                if self.peek() in ("", ")", ","):
                    raise self.error(f"expected a pass name after ',', found {self.describe_here()}")
                expect_element = True
            elif ch == ")":
                self.close_seq(stack)
            elif not ch:
                if len(stack) > 1:
                    raise self.error("missing ')' to close this 'seq('", stack[-1].start)
                return Pipeline(stack[0].passes, stack[0].specs)
            else:
                raise self.error(f"expected ',' or the end of the pipeline, found {self.describe_here()}")

    def element(self, stack: list[_Frame]) -> bool:
        """A pass (added to the innermost frame) or the opening of a ``seq(``; whether an element comes next."""
        start = self.pos
        name, quoted = self.name()
        self.skip_ws()
        options = self.options() if self.peek() == "{" else []
        if name == _SEQ and not quoted:
            self.skip_ws()
            if self.peek() != "(":
                raise self.error(
                    f"expected '(' after 'seq', found {self.describe_here()} "
                    "(a pass named 'seq' must be quoted: \"seq\")"
                )
            self.pos += 1
            stack.append(_Frame(start, options))
            self.skip_ws()
            return self.peek() != ")"
        p, spec = self.build_pass(name, start, options)
        stack[-1].passes.append(p)
        stack[-1].specs.append(spec)
        return False

    def close_seq(self, stack: list[_Frame]) -> None:
        """The ``)`` at ``pos``: the innermost ``seq(`` built and added to the frame around it."""
        if len(stack) == 1:
            raise self.error("unmatched ')'")
        frame = stack.pop()
        self.pos += 1
        seq = self.build_seq(frame)
        stack[-1].passes.append(seq)
        stack[-1].specs.append(_element_spec(seq))


def parse_pipeline(text: str) -> Pipeline:
    """The :class:`Pipeline` (a Sequential) that ``text`` describes; see the module docstring for the grammar.

    Each pass is built from the pass registry (``import parpass.passes`` registers
    the standard ones), its options given to its factory as keyword arguments.
    An empty spec is an empty pipeline. Raises :class:`PipelineSpecError`.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_pipeline expects a str, got {type(text).__name__}: {text!r}")
    return _Parser(text).parse()
