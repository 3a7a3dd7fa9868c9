"""Two threads, each inside its own PassContext, run passes at the same time and see only their own."""

from __future__ import annotations

import threading

from support import make_module

from parpass.instrument import PassTimingInstrument, pass_instrument
from parpass.ir import IRModule, relax
from parpass.transform import PassContext, PassInfo, Sequential, function_pass, register_config_option


def test_two_threads_each_see_only_their_own_context() -> None:
    register_config_option("test.thread_tag", str, default="none")
    barrier = threading.Barrier(2)
    results: dict[str, dict[str, object]] = {}
    errors: list[BaseException] = []

    @pass_instrument
    class Rec:
        def __init__(self) -> None:
            self.names: list[str] = []

        def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
            self.names.append(info.name)

    @function_pass(opt_level=1, name="Meet")
    def meet(func: relax.Function, mod: IRModule, ctx: PassContext) -> relax.Function:
        barrier.wait()  # both threads are inside a pass at this point
        tag = PassContext.current().config["test.thread_tag"]
        assert ctx is PassContext.current()
        barrier.wait()
        return func.with_attr("tag", tag)

    def worker(tag: str, opt_level: int) -> None:
        try:
            rec, timing = Rec(), PassTimingInstrument()
            ctx = PassContext(opt_level=opt_level, instruments=[rec, timing], config={"test.thread_tag": tag})
            with ctx:
                out = Sequential([meet], name=f"Seq-{tag}")(make_module())
                results[tag] = {
                    "current": PassContext.current() is ctx,
                    "opt_level": PassContext.current().opt_level,
                    "names": rec.names,
                    "attrs": out["f"].attrs,
                    "timed": [t.name for t in timing.timings],
                }
        except BaseException as err:  # surfaced in the main thread
            errors.append(err)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(tag, level)) for tag, level in (("t1", 1), ("t2", 3))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for tag, level in (("t1", 1), ("t2", 3)):
        r = results[tag]
        assert r["current"] is True and r["opt_level"] == level
        assert r["names"] == [f"Seq-{tag}", "Meet"]
        assert r["attrs"] == {"tag": tag}
        assert r["timed"] == [f"Seq-{tag}"]
    assert PassContext.current().config["test.thread_tag"] == "none"
