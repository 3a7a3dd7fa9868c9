"""PLACEHOLDER (being written): the text form of IR."""
from __future__ import annotations


def astext(node: object) -> str:
    import msgspec

    from parpass.ir.module import IRModule

    if isinstance(node, IRModule):
        return "\n".join(f"@{n} = {astext(f)}" for n, f in zip(node.names(), node.functions.values()))
    return msgspec.json.encode(node).decode()
