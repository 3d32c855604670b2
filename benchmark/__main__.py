"""``benchmark COMMAND …`` (and ``python -m benchmark COMMAND …``): one entry point for the harness's
commands, each the same as its own module (``benchmark run`` is ``python -m benchmark.run``). It stands
above every layer, and imports a command only when it is called."""

from __future__ import annotations

import importlib
import sys

#: command → ("module:function", what it does); the function takes argv and returns the exit status
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("benchmark.run:main", "run a suite (or --datasets ad hoc): the missing stages, then the tables"),
    "report": ("benchmark.report.report_cli:main", "rebuild every table, plot and page from results/ alone"),
    "export": ("benchmark.report.model_export:main", "each trained model of a suite as a SparseEncoder folder"),
    "norms": ("benchmark.model.head_diagnostics:main", "MLM-head diagnostics of backbones, before and after rescaling"),
    "perf": ("benchmark.perf.perf_cli:main", "speed against sentence-transformers and Pyserini, and its subcommands"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [
        "usage: benchmark [--help] [--version] COMMAND [ARGS …]",
        "",
        "The harness's commands; `benchmark COMMAND --help` shows each one's flags.",
        "",
        "commands:",
    ]
    lines += [
        f"  {name:{width}}  {what} (python -m {target.partition(':')[0]})" for name, (target, what) in COMMANDS.items()
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from benchmark import __version__

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    if args[0] == "--version":
        print(f"splade-rescale-benchmark {__version__}")
        return 0
    from benchmark.common.command_line import did_you_mean, invoked_as

    if args[0] not in COMMANDS:
        close = did_you_mean(args[0], COMMANDS)
        hint = f" (did you mean {close!r}?)" if close else ""
        print(
            f"benchmark: error: unknown command {args[0]!r}{hint}; valid: {', '.join(COMMANDS)}. Run benchmark --help "
            "for what each does",
            file=sys.stderr,
        )
        return 2
    module, _, function = COMMANDS[args[0]][0].partition(":")
    package = module.rsplit(".", 1)[0] if module.endswith("_cli") else module  # benchmark.report.report_cli
    with invoked_as(f"python -m {package}", f"benchmark {args[0]}"):
        result = getattr(importlib.import_module(module), function)(args[1:])
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
