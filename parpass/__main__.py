"""``python -m parpass``: the ``parpass`` command."""

from parpass.cli.main import run

if __name__ == "__main__":
    run()
