"""The messages between the parent and its resident workers, as typed msgspec structs.

Every message is one msgpack frame on the worker's own connection. The parent
sends :class:`RunChunk` (run the chain of a wave on some functions) and
:class:`Stop`; a worker answers each chunk with :class:`ChunkDone`, or with
:class:`WorkerFailure` when it could not run the wave at all (its passes did
not unpickle, say). What a pass emitted is carried as
:class:`~parpass.parallel.capture.Emission` lists; an exception a pass raised,
as :class:`TaskError`.
"""

from __future__ import annotations

from typing import Any, Union

import msgspec

from parpass.parallel.capture import Emission


class RunChunk(msgspec.Struct, tag="chunk", array_like=True):
    """Apply the chain of the wave in file ``wave`` to the functions ``indices`` (module order indices)."""

    wave: str
    indices: list[int]


class Stop(msgspec.Struct, tag="stop", array_like=True):
    """End the worker's serving loop (the worker process itself stays in its pool)."""


class FetchKept(msgspec.Struct, tag="fetch", array_like=True):
    """Encode the results this worker keeps under ``tokens`` into its store and say where they lie
    (:class:`Fetched`); those under ``drop`` are needed no more (see :attr:`ChunkDone.kept`)."""

    tokens: list[bytes]
    drop: list[bytes] = []


ToWorker = Union[RunChunk, Stop, FetchKept]


class Hello(msgspec.Struct, tag="hello", array_like=True):
    """The first frame of a worker: which crew seat it took, its process id, and the digests of the functions
    it holds resident already (what an earlier crew left it), so that the new crew sends them to it."""

    seat: int
    pid: int
    holds: list[bytes] = []


class TaskError(msgspec.Struct, array_like=True):
    """An exception raised by a pass on one function, as it crosses back to the parent."""

    stage: int
    index: int
    pickled: bytes | None  # the exception with its chain (see error_chain.py), when it pickles and unpickles
    type_name: str
    message: str
    traceback: str


class StageEmissions(msgspec.Struct, array_like=True):
    """What pass ``stage`` emitted while it ran on function ``index``."""

    stage: int
    index: int
    emissions: list[Emission]


class ChunkDone(msgspec.Struct, tag="done", array_like=True):
    """Everything one chunk sends back: results, captured output, errors, timings, cache use.

    A function of the chunk is in ``indices`` (changed), in ``same`` (unchanged), or has an error.
    """

    wave: str = ""  # the wave file it ran (a check that no answer of an earlier wave is taken for this one)
    store: str = ""  # the result store the changed functions' bytes were appended to
    #: the functions the chain changed (module order indices, in chunk order), and where their new bytes
    #: lie in ``store``, with the digest of those bytes: parallel arrays, one item per function (a struct
    #: per function costs the parent more to decode than the rest of the answer)
    indices: list[int] = []
    offsets: list[int] = []
    lengths: list[int] = []
    digests: list[bytes] = []
    #: the changed functions whose class or attributes changed (sparse; the others kept theirs), as parallel
    #: arrays: each one's place in ``indices``, and its new head as an index into ``heads``. The parent would
    #: otherwise read them from the bytes to pick the next wave's targets.
    head_at: list[int] = []
    head_of: list[int] = []
    #: the distinct new heads of the chunk, each sent once: whether it is a PrimFunc (else a Function), and its
    #: attributes (a pass that annotates every function gives them all the same few)
    heads: list[tuple[bool, dict[str, Any]]] = []
    #: whether every new head kept its function's class and ``SkipOptimization``: the targets of every pass
    #: that keeps the default rule (see FunctionLevelPass.visits) are then the same in the wave's result
    heads_keep_targets: bool = True
    #: the functions no pass changed, and the digest of the bytes they came in as
    same: list[int] = []
    same_digests: list[bytes] = []
    emissions: list[StageEmissions] = []
    errors: list[TaskError] = []
    seconds: float = 0.0
    #: the worker process's CPU seconds over the chunk (its wall ``seconds`` less its waits for a CPU, or for
    #: anything else; on a Dask worker its other threads' too): what the chunk cost the machine
    cpu_seconds: float = 0.0
    #: per stage of a fused chain: functions its module view had to compute by running earlier passes
    recomputed: list[int] = []
    #: per stage: wall and CPU seconds its pass calls took in this chunk, and of that wall time, how long the
    #: worker waited for a CPU (other programs held the cores; 0 where the system does not say)
    stage_wall: list[float] = []
    stage_cpu: list[float] = []
    stage_waited: list[float] = []
    #: per stage (when the context counts pass statistics): (pass, counter, count) of its pass calls here
    stage_counts: list[list[tuple[str, str, int]]] = []
    #: functions found resident (not decoded), and decoded from bytes
    hits: int = 0
    misses: int = 0
    #: changed functions whose input the parent sent without its digest, and that digest (computed here): the
    #: parent learns it, so that a module run again is known by it (and a worker holding it is sent less)
    learned: list[int] = []
    learned_digests: list[bytes] = []
    #: what the chain's analyses computed (see :class:`~parpass.transform.analysis.FunctionAnalysis`), as
    #: parallel arrays: each value's stage, its function (module order index) and its msgpack bytes
    value_stage: list[int] = []
    value_at: list[int] = []
    values: list[bytes] = []
    #: seconds of ``seconds`` spent on the chain's results: encoding the functions it changed, digesting and
    #: storing them (what lets them outlive this worker), keeping them resident
    result_seconds: float = 0.0
    #: positions in ``indices`` of the results this worker keeps decoded instead of storing them (the wave said
    #: ``keep``): their ``digests`` are tokens naming them here, their offsets and lengths 0
    kept: list[int] = []
    #: the chunk needed a function its wave left with the worker that made it: nothing of it counts
    lacked: bool = False


class Fetched(msgspec.Struct, tag="fetched", array_like=True):
    """The answer to :class:`FetchKept`: where each result lies in ``store`` and the digest of its bytes; ``lost``
    the tokens this worker does not hold (it is not the one that made them, or it was let go since)."""

    store: str = ""
    tokens: list[bytes] = []  # the results fetched, in the order of offsets, lengths and digests
    offsets: list[int] = []
    lengths: list[int] = []
    digests: list[bytes] = []
    lost: list[bytes] = []
    #: results that hold a value the IR cannot encode, with the error's text, and the error itself pickled with
    #: its chain (b"" where it does not pickle): the parent raises it as a wave would have (see TaskError)
    unencodable: list[tuple[bytes, str]] = []
    unencodable_errors: list[bytes] = []


class WorkerFailure(msgspec.Struct, tag="failure", array_like=True):
    """The worker could not run the chunk at all (not an error of a pass on a function)."""

    type_name: str
    message: str
    traceback: str


FromWorker = Union[Hello, ChunkDone, WorkerFailure, Fetched]

_encoder = msgspec.msgpack.Encoder()
_to_worker: msgspec.msgpack.Decoder[ToWorker] = msgspec.msgpack.Decoder(ToWorker)
_from_worker: msgspec.msgpack.Decoder[FromWorker] = msgspec.msgpack.Decoder(FromWorker)


def encode(message: ToWorker | FromWorker) -> bytes:
    return _encoder.encode(message)


def decode_to_worker(data: bytes) -> ToWorker:
    return _to_worker.decode(data)


def decode_from_worker(data: bytes) -> FromWorker:
    return _from_worker.decode(data)
