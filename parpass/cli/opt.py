"""``parpass opt``: run a pass pipeline on a module file (LLVM ``opt`` / ``mlir-opt`` style)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from parpass.cli.common import (
    EXIT_OK,
    PassFailure,
    UsageError,
    add_common_options,
    add_config_options,
    bisect_limit,
    build_pipeline,
    check_output_path,
    check_parent_dir,
    check_pass_names,
    make_context,
    make_output_dir,
    opt_level,
    parse_config,
    pass_note,
    positive_int,
    read_module,
    split_names,
    write_module,
)
from parpass.instrument import (
    DumpIR,
    PassInstrument,
    PassTimingInstrument,
    PrintAfterChange,
    PrintIRAfter,
    PrintIRBefore,
    WellFormedInstrument,
)
from parpass.ir.module import IRModule
from parpass.transform import Pass, PassContext, PassInfo, walk_passes
from parpass.transform.bisect import BISECT_LIMIT
from parpass.transform.statistics import PASS_STATISTICS

_DESCRIPTION = """\
Run a pass pipeline on a module file and write the result: in the format the output's
extension names (.msgpack, .json, .ppir/.txt text), or as text to stdout. Without -p, runs
the default pipeline (parpass.passes.default_pipeline) of --opt-level.

Pipeline specs: comma-separated registered pass names, options in braces, nested
Sequentials as seq(...), e.g.
  -p 'InferType,FoldConstant,seq(EliminateCommonSubexpr,DeadCodeElimination),UnrollLoop{auto_max_step=16}'

IR printing, timing and dumps go to stderr (or DIR), so stdout stays the module.

examples:
  parpass opt model.msgpack -p FoldConstant,DeadCodeElimination -o out.msgpack
  parpass opt model.msgpack --time-passes --workers 2 -o out.msgpack
  parpass opt model.msgpack -p MyPass --load mypasses.py --reproducer crash.repro
  parpass opt model.msgpack --pass-statistics -o out.msgpack
  parpass opt model.msgpack --opt-bisect-limit 120 -o out.msgpack
  parpass opt model.msgpack --verify-each --workers 2 -o out.msgpack
"""


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "opt",
        help="run a pass pipeline on a module file",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("input", metavar="INPUT", help="module file (.msgpack, .json, or the text format)")
    parser.add_argument("-o", "--output", metavar="OUTPUT", help="output file (default: text to stdout)")
    add_pipeline_options(parser)
    parser.add_argument(
        "--time-passes",
        action="store_true",
        help="print the wall and CPU time of every pass on stderr, as a tree (a function-level pass's "
        "summed over the worker processes that ran it); the pipeline still runs fused",
    )
    parser.add_argument(
        "--pass-statistics",
        action="store_true",
        help="count the statistics passes declare (config parpass.pass_statistics) and print their totals per "
        "pass on stderr at the end, as MLIR's --mlir-pass-statistics list view (the same at any worker count)",
    )
    parser.add_argument(
        "--opt-bisect-limit",
        type=bisect_limit,
        metavar="N",
        help="number every pass application (a module pass once, a function-level pass once per function, in "
        "module order), skip those numbered above N, and print each decision on stderr as LLVM does "
        "(config parpass.bisect_limit; -1 numbers nothing)",
    )
    parser.add_argument(
        "--print-ir-before", action="append", default=[], metavar="NAMES", help="print the IR before these passes"
    )
    parser.add_argument(
        "--print-ir-after", action="append", default=[], metavar="NAMES", help="print the IR after these passes"
    )
    parser.add_argument("--print-ir-after-all", action="store_true", help="print the IR after every pass")
    parser.add_argument(
        "--print-ir-after-change", action="store_true", help="print the IR after every pass that changed it"
    )
    parser.add_argument("--dump-ir", metavar="DIR", help="write the IR after every pass to DIR/NNN_<pass>.txt")
    parser.add_argument(
        "--verify-each",
        action="store_true",
        help="check that the IR is well-formed before and after every pass (WellFormedInstrument, as LLVM's "
        "-verify-each) and stop at the first pass given or returning ill-formed IR; the pipeline runs pass by "
        "pass, and the functions each pass changed are checked in the worker processes",
    )
    parser.add_argument(
        "--reproducer",
        metavar="FILE",
        help="on a failure, write a crash reproducer to FILE (re-run it with 'parpass reproduce FILE'); "
        "function-level passes then run in worker processes (unless --workers 1 or --config parpass.parallel=...), "
        "so that a pass that kills its process is reported too",
    )
    add_common_options(parser)
    parser.set_defaults(func=run)


def add_pipeline_options(parser: argparse.ArgumentParser) -> None:
    """The options that say which pipeline runs and under what context (``opt`` and ``bisect`` take them)."""
    parser.add_argument(
        "-p", "--passes", metavar="SPEC", help="pipeline spec (default: the default pipeline of --opt-level)"
    )
    parser.add_argument(
        "-O",
        "--opt-level",
        type=opt_level,
        default=2,
        metavar="N",
        help="PassContext opt_level, 0 to 3: a Sequential skips passes above it (default 2)",
    )
    parser.add_argument(
        "--disabled-pass", action="append", default=[], metavar="NAMES", help="passes to skip (comma list)"
    )
    parser.add_argument(
        "--required-pass",
        action="append",
        default=[],
        metavar="NAMES",
        help="passes to run whatever their opt_level (comma list)",
    )
    add_config_options(parser)
    parser.add_argument(
        "--workers", type=positive_int, metavar="N", help="worker processes (config parpass.num_workers); 1: in-process"
    )


def pipeline_settings(args: argparse.Namespace) -> tuple[Pass, list[str], list[str], dict[str, Any]]:
    """The pipeline, the required and disabled pass names, and the config the pipeline options ask for."""
    pipeline = requested_pipeline(args)
    config = parse_config(args.config)
    if args.workers is not None:
        config["parpass.num_workers"] = args.workers
    disabled = check_pass_names(split_names(args.disabled_pass), "--disabled-pass", pipeline)
    required = check_pass_names(split_names(args.required_pass), "--required-pass", pipeline)
    return pipeline, required, disabled, config


class FailureRecorder(PassInstrument):
    """Remembers the innermost pass that raised and the module it was given (for an in-process reproducer)."""

    def __init__(self) -> None:
        self.failed: tuple[IRModule, PassInfo, BaseException] | None = None

    def enter_pass_ctx(self) -> None:
        self.failed = None

    def on_pass_error(self, mod: IRModule, info: PassInfo, error: BaseException) -> None:
        if self.failed is None:
            self.failed = (mod.copy(), info, error)


def requested_pipeline(args: argparse.Namespace) -> Pass:
    """The pipeline of ``-p``, else the default pipeline of ``--opt-level``."""
    if args.passes is not None:
        return build_pipeline(args.passes, "-p")
    try:
        from parpass.passes import default_pipeline
    except ImportError as err:
        raise UsageError(f"the standard passes cannot be imported ({err}); give a pipeline with -p") from err
    try:
        return default_pipeline(args.opt_level)
    except (KeyError, ValueError) as err:
        raise UsageError(f"the default pipeline cannot be built: {str(err).splitlines()[0]}") from err


def _find_pass(root: Pass, info: PassInfo) -> Pass | None:
    return next((p for p in walk_passes(root) if p.info is info), None)


def _stat(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def write_inprocess_reproducer(
    path: str,
    pipeline: Pass,
    input_mod: IRModule,
    ctx: PassContext,
    recorder: FailureRecorder,
    error: BaseException,
    message: str,
) -> None:
    """A reproducer for a failure in the parent process: the failing pass and the module it was given.

    When the failing pass is not found (a pass built inside another one), the
    whole pipeline and the input module go in instead.
    """
    from parpass.parallel.reproducer import write_reproducer
    from parpass.transform import get_pass, list_passes

    mod, passes, functions = input_mod, [pipeline], []
    if recorder.failed is not None:
        failed_mod, info, _ = recorder.failed
        p = _find_pass(pipeline, info)
        if p is None and info.name in list_passes():
            p = get_pass(info.name)
        if p is not None:
            mod, passes = failed_mod, [p]
            _, func = pass_note(error)
            from parpass.transform.passes import FunctionLevelPass

            if func is not None and isinstance(p, FunctionLevelPass) and func in failed_mod:
                functions = [func]
    write_reproducer(path, mod, passes, ctx.snapshot(), functions, message)


def run(args: argparse.Namespace) -> int:
    pipeline, required, disabled, config, (before, after) = _settings(args)
    mod = read_module(args.input, config)
    if args.dump_ir:
        make_output_dir(args.dump_ir, "--dump-ir")  # after the input is read: a bad input leaves no directory
    timing = PassTimingInstrument() if args.time_passes else None
    recorder = FailureRecorder() if args.reproducer else None
    instruments = _instruments(args, before, after, timing, recorder)
    ctx = make_context(args.opt_level, required, disabled, instruments, config)
    repro_before = _stat(args.reproducer) if args.reproducer else None
    start = time.perf_counter()
    try:
        with ctx:
            out = pipeline(mod)
    except Exception as err:
        failure = PassFailure(err)
        if args.reproducer:
            _report_reproducer(args.reproducer, repro_before, pipeline, mod, ctx, recorder, err, str(failure))
        raise failure from err
    finally:
        if timing is not None:
            # Wall and CPU of every pass (a function-level pass's summed over the workers that ran it).
            sys.stderr.write(timing.render_report(total_wall=time.perf_counter() - start))
        if args.pass_statistics:
            sys.stderr.write(ctx.pass_statistics.render())
    write_module(out, args.output)
    return EXIT_OK


def _settings(
    args: argparse.Namespace,
) -> tuple[Pass, list[str], list[str], dict[str, Any], tuple[list[str], list[str]]]:
    """The pipeline, required and disabled passes, config, and the passes to print the IR before and after,
    as the options give them; every option checked before any work."""
    pipeline, required, disabled, config = pipeline_settings(args)
    if args.pass_statistics:
        config[PASS_STATISTICS] = True
    if args.opt_bisect_limit is not None:
        config[BISECT_LIMIT] = args.opt_bisect_limit
    if args.reproducer:
        config["parpass.reproducer"] = os.path.abspath(args.reproducer)
        # A pass that kills its process (a segfault, os._exit) can only be reported from outside it.
        config.setdefault("parpass.parallel", "always")
    before = check_pass_names(split_names(args.print_ir_before), "--print-ir-before", pipeline)
    after = check_pass_names(split_names(args.print_ir_after), "--print-ir-after", pipeline)
    check_output_path(args.output)
    if args.reproducer:
        check_parent_dir(args.reproducer, "--reproducer")
    return pipeline, required, disabled, config, (before, after)


def _instruments(
    args: argparse.Namespace,
    before: list[str],
    after: list[str],
    timing: PassTimingInstrument | None,
    recorder: FailureRecorder | None,
) -> list[PassInstrument]:
    """The instruments the options ask for, in a fixed order (timing first: it times the others' work too)."""
    wanted: list[PassInstrument | None] = [
        timing,
        PrintIRBefore(passes=before, file=sys.stderr) if before else None,
        PrintIRAfter(passes=after, file=sys.stderr) if after else None,
        PrintIRAfter(file=sys.stderr) if args.print_ir_after_all else None,
        PrintAfterChange(file=sys.stderr) if args.print_ir_after_change else None,
        DumpIR(args.dump_ir) if args.dump_ir else None,
        WellFormedInstrument() if args.verify_each else None,
        recorder,
    ]
    return [inst for inst in wanted if inst is not None]


def _report_reproducer(
    path: str,
    before: tuple[int, int, int] | None,
    pipeline: Pass,
    mod: IRModule,
    ctx: PassContext,
    recorder: FailureRecorder | None,
    err: Exception,
    message: str,
) -> None:
    """Write the in-process reproducer unless the executor wrote one, and say where it is."""
    if recorder is not None and _stat(path) == before:
        try:
            write_inprocess_reproducer(path, pipeline, mod, ctx, recorder, err, message)
        except Exception as repro_err:  # the failure matters more than its reproducer
            print(f"parpass: warning: could not write the reproducer: {repro_err}", file=sys.stderr)
    if _stat(path) != before:
        print(f"parpass: wrote the reproducer {path} (run: parpass reproduce {path})", file=sys.stderr)
