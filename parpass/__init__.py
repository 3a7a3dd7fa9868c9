"""parpass: a TVM-style pass infrastructure whose function-level passes run on every core."""

from parpass.ir import IRModule

__version__ = "0.1.0"

__all__ = ["IRModule", "__version__"]
