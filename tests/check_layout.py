#!/usr/bin/env python3
"""Keeps the source tree's shape: the limits docs/dev/layout.md states hold for include/sparsepush.

  check_layout.py ROOT
  check_layout.py --self-test   (a made-up tree that breaks each rule once must fail with each message)

- Includes go down: a header in area A (its first directory under include/sparsepush, or its file
  name for a top-level header) includes only headers of A or of an area on a lower line of the
  floors block of docs/dev/layout.md (the fenced block after the line "<!-- floors -->", highest
  floor first, the areas of one floor separated by spaces). Every area must be on a floor.
- No header is over the line limit that the same page states ("<!-- max-header-lines: N -->").
- No header includes a project header after its code has begun (its implementation at the end):
  every #include "..." comes before the first line that opens a namespace.
Prints every violation with its file and line; exits 1 when there is one, 2 for a bad ROOT or page.
"""
import pathlib
import re
import sys


def floors_of(page: pathlib.Path):
    lines = page.read_text().splitlines()
    try:
        start = lines.index("<!-- floors -->")
    except ValueError:
        sys.exit(f"check_layout: {page} has no '<!-- floors -->' line")
    limit = None
    for line in lines:
        m = re.fullmatch(r"<!-- max-header-lines: (\d+) -->", line.strip())
        if m:
            limit = int(m.group(1))
    if limit is None:
        sys.exit(f"check_layout: {page} has no '<!-- max-header-lines: N -->' line")
    body, inside = [], False
    for line in lines[start + 1:]:
        if line.startswith("```"):
            if inside:
                break
            inside = True
            continue
        if inside and line.strip():
            body.append(line.split())
    if not body:
        sys.exit(f"check_layout: {page} has no fenced block after '<!-- floors -->'")
    level = {}
    for i, areas in enumerate(reversed(body)):  # the last line is floor 0
        for a in areas:
            level[a] = i
    return level, limit


def area_of(path: pathlib.Path, top: pathlib.Path) -> str:
    rel = path.relative_to(top)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def self_test() -> int:
    import contextlib, io, tempfile
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        (root / "docs" / "dev").mkdir(parents=True)
        (root / "docs" / "dev" / "layout.md").write_text(
            "<!-- floors -->\n```text\nhigh\nlow\n```\n<!-- max-header-lines: 10 -->\n")
        inc = root / "include" / "sparsepush"
        (inc / "low").mkdir(parents=True)
        (inc / "high").mkdir()
        (inc / "high" / "ok.hpp").write_text('#include "../low/up.hpp"\nnamespace x {}\n')
        (inc / "low" / "up.hpp").write_text('#include "../high/ok.hpp"\nnamespace x {}\n')
        (inc / "low" / "long.hpp").write_text("namespace x {}\n" + "//\n" * 10 + '#include "up.hpp"\n')
        (inc / "stray.hpp").write_text("namespace x {}\n")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = run(root)
    want = ["low/up.hpp:1: includes ../high/ok.hpp: area 'high' is not below 'low'",
            "low/long.hpp: 12 lines, over the limit of 10",
            "low/long.hpp:12: includes up.hpp after its code began at line 1",
            "stray.hpp: its area 'stray' is on no floor"]
    missing = [w for w in want if w not in out.getvalue()]
    if rc != 1 or missing or "sparsepush/high/ok.hpp" in out.getvalue():
        print(out.getvalue() + f"self-test failed: exit {rc}, missing {missing}")
        return 1
    print("check_layout self-test: each of the 4 violations was found, and the lawful include was not flagged")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    return run(pathlib.Path(sys.argv[1]))


def run(root: pathlib.Path) -> int:
    top = root / "include" / "sparsepush"
    page = root / "docs" / "dev" / "layout.md"
    if not top.is_dir() or not page.is_file():
        print(f"check_layout: {root} has no include/sparsepush or docs/dev/layout.md", file=sys.stderr)
        return 2
    level, limit = floors_of(page)
    bad = []
    headers = sorted(top.rglob("*.hpp"))
    for h in headers:
        name = h.relative_to(root)
        a = area_of(h, top)
        if a not in level:
            bad.append(f"{name}: its area '{a}' is on no floor of docs/dev/layout.md")
            continue
        text = h.read_text().splitlines()
        if len(text) > limit:
            bad.append(f"{name}: {len(text)} lines, over the limit of {limit} (split it along its concerns)")
        code_began = None
        for n, line in enumerate(text, 1):
            if code_began is None and re.match(r"\s*namespace\b", line):
                code_began = n
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m:
                continue
            if code_began is not None:
                bad.append(f"{name}:{n}: includes {m.group(1)} after its code began at line {code_began} "
                           "(an implementation included at the end)")
            target = (h.parent / m.group(1)).resolve()
            try:
                b = area_of(target, top.resolve())
            except ValueError:
                continue  # outside include/sparsepush
            if b != a and b in level and level[b] >= level[a]:
                bad.append(f"{name}:{n}: includes {m.group(1)}: area '{b}' is not below '{a}'")
    for line in bad:
        print(line)
    print(f"check_layout: {len(headers)} headers, {len(bad)} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
