#!/usr/bin/env python3
"""Checks README.md and docs/ against the repository: the README within its line budget, every
relative link and every repository path named in backticks present, and the counts the pages give
of things a script can count (shipped workloads, fuzz targets, oracle-fuzz cases) equal to the
counts in the tree. Prints one line per problem and exits 1 if there is any.

usage: scripts/check_docs.py [REPO_ROOT]
"""
import glob
import os
import re
import sys

README_LINE_BUDGET = 200
# Top-level folders whose paths the pages name; a backticked path under one of them must exist.
REPO_FOLDERS = ("backends", "bench", "core", "docs", "fuzz", "proptests", "python", "scripts", "sim",
                "tools", "workloads", ".ci", ".github", ".clusterfuzzlite")
# Words a page uses as placeholders inside a path (`workloads/NAME.pickle.gz`, `BUILD/allocsim`).
PLACEHOLDER = re.compile(r"[A-Z]{2,}|\.\.\.|[{}<>$]")

LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`")


def pages(root):
    return [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))


def check_links(root, page, text, problems):
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        if not os.path.exists(os.path.normpath(os.path.join(os.path.dirname(page), path))):
            problems.append(f"{os.path.relpath(page, root)}: link to {target}, which does not exist")


def check_paths(root, page, text, problems):
    for code in CODE.findall(text):
        for word in code.split():
            word = word.strip(",;:()").split(":", 1)[0]
            if not word.startswith(tuple(f + "/" for f in REPO_FOLDERS)) or PLACEHOLDER.search(word):
                continue
            if not glob.glob(os.path.join(root, word)):
                problems.append(f"{os.path.relpath(page, root)}: `{word}` does not exist")


def counted(root):
    """What a page may count, and how many there are."""
    fuzz_cmake = open(os.path.join(root, "fuzz", "CMakeLists.txt")).read()
    targets = re.search(r"set\(fuzz_targets([^)]*)\)", fuzz_cmake).group(1).split()
    oracle = os.path.join(root, "workloads", "oracle_fuzz")
    return {
        # "The 26 traces in `workloads/`", "each of the 26 shipped workloads"
        r"(\d+) (?:traces in `workloads/`|shipped workloads)":
            len(glob.glob(os.path.join(root, "workloads", "*.pickle.gz"))),
        r"(\d+) (?:libFuzzer |fuzz )targets": len(targets),
        r"(\d+) shrunk cases": len(glob.glob(os.path.join(oracle, "cases", "*.pickle.gz"))),
    }


def check_counts(root, page, text, problems):
    for pattern, actual in counted(root).items():
        for match in re.finditer(pattern, text):
            if int(match.group(1)) != actual:
                problems.append(f"{os.path.relpath(page, root)}: says \"{match.group(0)}\", "
                                f"there are {actual}")


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    problems = []
    readme_lines = open(os.path.join(root, "README.md")).read().count("\n")
    if readme_lines > README_LINE_BUDGET:
        problems.append(f"README.md: {readme_lines} lines, over its budget of {README_LINE_BUDGET}")
    for page in pages(root):
        text = open(page).read()
        check_links(root, page, text, problems)
        check_paths(root, page, text, problems)
        check_counts(root, page, text, problems)
    for problem in problems:
        print(problem)
    print(f"{len(pages(root))} pages checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
