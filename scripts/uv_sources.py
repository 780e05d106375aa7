"""Print, one per line, the `uv pip install` options that give uv the package sources pip is configured with.

uv reads neither pip.conf nor PIP_* variables, so setup.sh hands it pip's sources: the index (`index-url`), the extra
indexes (`extra-index-url`) and the wheel folders (`find-links`), from every configuration file and the environment
(`pip config list`), plus TORCH_INDEX_URL when set.

    python scripts/uv_sources.py            # run with the interpreter whose pip configuration counts
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

# `pip config list` prints lines like  global.find-links='/opt/wheels'  or  :env:.extra-index-url='a b'.
_LINE = re.compile(r"^(?P<variant>[^.]*)\.(?P<key>[a-z-]+)='(?P<value>.*)'$")
_MULTI_VALUED = {"extra-index-url": "--extra-index-url", "find-links": "--find-links"}


def pip_configuration() -> list[tuple[str, str, str]]:
    """(variant, key, value) of every setting pip sees, in the order pip lists them."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                            check=False).stdout
    return [(match["variant"], match["key"], match["value"])
            for match in map(_LINE.match, listed.splitlines()) if match is not None]


def uv_options(settings: list[tuple[str, str, str]], torch_index: str | None) -> list[str]:
    """uv options for `settings`: every extra index and wheel folder from any source; the index from the environment
    when set there, else from the last configuration file that sets it."""
    options: list[str] = []
    seen: set[tuple[str, str]] = set()
    index_url = ""
    for variant, key, value in sorted(settings, key=lambda setting: setting[0] == ":env:"):
        if key == "index-url" and value:
            index_url = value
        elif key in _MULTI_VALUED:
            for item in value.split():
                if (key, item) not in seen:
                    seen.add((key, item))
                    options += [_MULTI_VALUED[key], item]
    if torch_index:
        options += ["--extra-index-url", torch_index]
    if index_url:
        options += ["--index-url", index_url]
    return options


def main() -> None:
    for option in uv_options(pip_configuration(), os.environ.get("TORCH_INDEX_URL") or None):
        print(option)


if __name__ == "__main__":
    main()
