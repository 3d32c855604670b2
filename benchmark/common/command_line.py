"""What every command shares: the parser (help shows each flag's default, ``--version``), one spelling
of list flags (``--backbones a,b`` and ``--backbones a b`` alike), and the terminal's noise level."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import re
from collections.abc import Iterable, Iterator
from typing import NoReturn

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


#: (module prefix, command) while ``benchmark COMMAND`` runs: its parsers call themselves by that name
_INVOKED_AS: list[tuple[str, str]] = []


@contextlib.contextmanager
def invoked_as(module: str, command: str) -> Iterator[None]:
    """Within it, the parsers of ``module`` (``python -m benchmark.run …``) call themselves ``command``
    (``benchmark run …``): the name the user typed, in usage lines and errors."""
    _INVOKED_AS.append((module, command))
    try:
        yield
    finally:
        _INVOKED_AS.remove((module, command))


def did_you_mean(value: str, options: Iterable[str]) -> str | None:
    """The closest of ``options`` to ``value`` (a typo's likely intent), or None."""
    hint = difflib.get_close_matches(value, sorted(set(options)), n=1, cutoff=0.6)
    return hint[0] if hint else None


class Parser(argparse.ArgumentParser):
    """Errors in one line under the command's name, with the flag or choice a typo most likely meant
    (argparse prints the whole usage first, then the error, and suggests nothing)."""

    def flags(self) -> list[str]:
        return [o for a in self._actions if a.help != argparse.SUPPRESS for o in a.option_strings if o.startswith("--")]

    def hint(self, message: str) -> str:
        unrecognized = re.match(r"unrecognized arguments: (.*)", message)
        if unrecognized:
            for word in unrecognized.group(1).split():
                if not word.startswith("-"):
                    continue
                flag = word.split("=", 1)[0]
                flags = {f.lstrip("-"): f for f in self.flags()}  # the dashes would make every flag look alike
                close = did_you_mean(flag.lstrip("-"), flags)
                if close:
                    return f"unknown flag {flag} (did you mean {flags[close]}?)"
                return f"unknown flag {flag}"
            return message
        choice = re.match(r"(argument \S+): invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if choice:
            options = re.findall(r"'([^']*)'", choice.group(3)) or [o.strip() for o in choice.group(3).split(",")]
            close = did_you_mean(choice.group(2), options)
            valid = ", ".join(options)
            return (
                f"{choice.group(1)}: invalid choice {choice.group(2)!r}"
                + (f" (did you mean {close!r}?)" if close else "")
                + f"; valid: {valid}"
            )
        return message

    def error(self, message: str) -> NoReturn:
        line = " ".join(self.hint(message).split())
        self.exit(2, f"{self.prog}: error: {line}. Run {self.prog} --help for every flag\n")


def parser(prog: str, description: str | None) -> argparse.ArgumentParser:
    """An ArgumentParser with the shared formatter, ``--version`` and one-line errors; ``prog`` is the
    module's name (``python -m benchmark.run``), shown as ``benchmark run`` when called so."""
    from benchmark.common.version import __version__

    for module, command in _INVOKED_AS:
        if prog == module or prog.startswith(module + " "):
            prog = command + prog[len(module) :]
    p = Parser(prog=prog, description=description, formatter_class=HelpFormatter)
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
