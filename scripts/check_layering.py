#!/usr/bin/env python3
"""Checks that every #include in the source tree follows the allowed-includes table in
docs/architecture.md: a folder includes only itself and the folders its row names, and a detail/
folder is included only from inside the folder that holds it.

usage: scripts/check_layering.py [REPO_ROOT]   (exit 0: every include allowed; 1: one line each)
"""
import os
import re
import sys

BEGIN, END = "<!-- allowed-includes:begin -->", "<!-- allowed-includes:end -->"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCES = (".cpp", ".hpp", ".cu", ".h")


def read_table(root):
    """{folder: set of folders it may include} from the table between the markers."""
    path = os.path.join(root, "docs", "architecture.md")
    text = open(path, encoding="utf-8").read()
    if BEGIN not in text or END not in text:
        sys.exit(f"{path}: no allowed-includes table between {BEGIN} and {END}")
    table = {}
    for line in text.split(BEGIN, 1)[1].split(END, 1)[0].splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or cells[0] in ("folder", "") or set(cells[0]) <= set("-: "):
            continue
        allowed = {c.strip().strip("`") for c in cells[1].split(",")} - {"", "nothing"}
        for folder in cells[0].split(","):
            table[folder.strip().strip("`")] = allowed
    return table


def folder_of(path, table):
    """The table's folder that holds `path` (the longest that is a prefix), or None."""
    best = None
    for folder in table:
        if (path + "/").startswith(folder + "/") and (best is None or len(folder) > len(best)):
            best = folder
    return best


def detail_owner(path):
    """For a path under some X/detail/, X; else None."""
    parts = path.split("/")
    return "/".join(parts[: parts.index("detail")]) if "detail" in parts else None


def violations(root, table):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not d.startswith("build"))
        for name in sorted(filenames):
            if not name.endswith(SOURCES):
                continue
            path = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
            here = folder_of(path, table)
            for number, line in enumerate(open(os.path.join(root, path), encoding="utf-8"), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = m.group(1)
                there = folder_of(target, table)
                if there is None:
                    continue  # not one of the project's folders (a system or library header)
                where = f"{path}:{number}: includes {target}"
                if here is None:
                    yield f"{where}, but {path} is in no folder of the table"
                    continue
                owner = detail_owner(target)
                if owner and not (path + "/").startswith(owner + "/"):
                    yield f"{where}: {owner}/detail/ is internal to {owner}/"
                elif there != here and there not in table[here] and "*" not in table[here]:
                    yield f"{where}: {here}/ may include only " + (
                        ", ".join(sorted(table[here])) or "itself")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    table = read_table(root)
    for folder, allowed in table.items():
        unknown = allowed - set(table) - {"*"}
        if unknown:
            sys.exit(f"docs/architecture.md: {folder} may include unknown folders {sorted(unknown)}")
    found = list(violations(root, table))
    for v in found:
        print(v)
    print(f"include layering: {len(found)} forbidden includes" if found else "include layering: ok")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
