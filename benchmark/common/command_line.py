"""What every command shares: the parser (help shows each flag's default, ``--version``), one spelling
of list flags (``--backbones a,b`` and ``--backbones a b`` alike), and the terminal's noise level."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable

#: set by ``--verbose``; child processes (the indexer, Ray workers) inherit it
VERBOSE_ENV = "BENCHMARK_VERBOSE"


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Appends ``(default: …)`` to every flag whose help does not state its default already."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            action.default not in (None, False, argparse.SUPPRESS)
            and "default" not in text
            and action.option_strings
            and action.nargs != 0
        ):
            text += " (default: %(default)s)"
        return text


def parser(prog: str, description: str | None) -> argparse.ArgumentParser:
    """An ArgumentParser with the shared formatter and ``--version``."""
    from benchmark import __version__

    p = argparse.ArgumentParser(prog=prog, description=description, formatter_class=HelpFormatter)
    p.add_argument("--version", action="version", version=f"splade-rescale-benchmark {__version__}")
    return p


def split_list(values: str | Iterable[str] | None) -> list[str] | None:
    """``"a,b"``, ``["a", "b"]`` and ``["a,b", "c"]`` → ``["a", "b", "c"]``; None or nothing → None."""
    if values is None:
        return None
    items = [values] if isinstance(values, str) else list(values)
    out = [part.strip() for item in items for part in item.split(",") if part.strip()]
    return out or None


def verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "") not in ("", "0")


def set_verbose(on: bool) -> None:
    """``--verbose``: the JVM's warnings and ir_datasets' [INFO] lines reach the terminal again."""
    if on:
        os.environ[VERBOSE_ENV] = "1"
    quiet_ir_datasets()


def quiet_ir_datasets() -> None:
    """ir_datasets logs each zip file opened and docstore built at INFO, through one logger that it
    creates on first use with level INFO: create it now and keep its warnings only (unless verbose)."""
    import logging

    if verbose():
        return
    try:
        from ir_datasets import log as ir_log
    except ImportError:
        return
    ir_log.Logger(None).logger().setLevel(logging.WARNING)
