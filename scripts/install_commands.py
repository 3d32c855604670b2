"""Write the console commands of pyproject.toml's [project.scripts] into a bin folder (default: the
folder of the Python that runs this), as pip writes them for an installed package.

scripts/setup.sh puts the checkout on the path with a .pth file instead of installing it (no build
step), so pip never writes these; this does, idempotently: a command whose file already holds the same
text is left as it is. Usage: python scripts/install_commands.py [BIN_DIR]
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TEMPLATE = """#!{python}
# Written by scripts/install_commands.py from pyproject.toml [project.scripts]: {name} = "{target}"
import sys

from {module} import {function}

if __name__ == "__main__":
    sys.exit({function}())
"""


def commands(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, str]:
    """name → "module:function", as pyproject.toml declares them."""
    return dict(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["scripts"])


def install(bin_dir: Path, python: str = sys.executable) -> list[Path]:
    """Each command as an executable file in ``bin_dir``; returns the files written or already current."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, target in commands().items():
        module, _, function = target.partition(":")
        text = TEMPLATE.format(python=python, name=name, target=target, module=module, function=function)
        path = bin_dir / name
        if not (path.is_file() and path.read_text(encoding="utf-8") == text and os.access(path, os.X_OK)):
            tmp = path.with_name(f".{name}.tmp{os.getpid()}")
            tmp.write_text(text, encoding="utf-8")
            tmp.chmod(0o755)
            os.replace(tmp, path)
        written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(sys.executable).parent
    install(target)
