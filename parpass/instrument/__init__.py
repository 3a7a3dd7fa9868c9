"""Pass instruments (TVM's ``tvm.instrument``): callbacks around every pass run in a PassContext."""

from parpass.instrument.base import PassInstrument, pass_instrument, same_fingerprint
from parpass.instrument.dump import DumpIR
from parpass.instrument.printing import (
    PassPrintingInstrument,
    PrintAfterAll,
    PrintAfterChange,
    PrintBeforeAll,
    PrintIRAfter,
    PrintIRBefore,
)
from parpass.instrument.timing import PassTiming, PassTimingInstrument, render_timing_report, render_timings
from parpass.instrument.well_formed import WellFormedInstrument

__all__ = [
    "DumpIR",
    "PassInstrument",
    "PassPrintingInstrument",
    "PassTiming",
    "PassTimingInstrument",
    "PrintAfterAll",
    "PrintAfterChange",
    "PrintBeforeAll",
    "PrintIRAfter",
    "PrintIRBefore",
    "WellFormedInstrument",
    "pass_instrument",
    "render_timing_report",
    "render_timings",
    "same_fingerprint",
]
