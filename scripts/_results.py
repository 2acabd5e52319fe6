"""Benchmark results with provenance: ``benchmarks/results/<name>.json`` (the numbers) and ``<name>.md`` (the
same, rendered), both with the commit, date, machine, package versions, exact command and wall time.

The documentation's benchmark pages include the Markdown files (``docs/benchmarks.md``), so a table there is
always the one a script wrote. ``--smoke`` runs write into a temporary folder instead (``results_dir``).
"""

from __future__ import annotations

import io
import json
import sys
import time
from contextlib import contextmanager, redirect_stdout
from pathlib import Path

from _provenance import run_provenance

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
_STARTED = time.perf_counter()  # the script's start: wall time of the whole run, imports included


def markdown_table(header: list[str], rows: list[list], align: str | None = None) -> str:
    """A Markdown table; ``align`` is one letter per column (``l`` or ``r``; default: first left, rest right)."""
    align = align or "l" + "r" * (len(header) - 1)
    rule = ["---" if a == "l" else "---:" for a in align]
    lines = [header, rule, *[[str(cell) for cell in row] for row in rows]]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


def provenance_markdown(provenance: dict) -> str:
    machine = provenance["machine"]
    gpu = machine.get("gpu") or "no GPU"
    versions = ", ".join(f"{name} {version}" for name, version in provenance["packages"].items() if version)
    commit = provenance["commit"][:12] + ("+dirty" if provenance["commit"].endswith("+dirty") else "")
    return (
        f"`{provenance['command']}`\n\n"
        f"Measured {provenance['date']} at commit `{commit}` on {machine['cpu']} "
        f"({machine['cores']} cores, {machine['torch_threads']} torch threads, {gpu}); {versions}; "
        f"wall time {provenance['wall_seconds'] / 60:.1f} min."
    )


def write_results(
    name: str,
    title: str,
    sections: list[str],
    data: dict,
    result: dict[str, float],
    results_dir: str | Path = RESULTS,
    packages: tuple[str, ...] = ("torch", "e3nn", "lightning", "ase", "numpy", "sciml"),
    print_result: bool = True,
) -> tuple[Path, Path]:
    """Write ``<name>.json`` and ``<name>.md`` into ``results_dir`` and print the ``RESULT`` line last.

    Args:
        name: file stem, e.g. ``presets``. title: the Markdown heading.
        sections: Markdown blocks (tables, notes) in order. data: everything measured (JSON-serialisable).
        result: the ``RESULT key=value ...`` pairs (keys say what they measure, with units).
        print_result: print the ``RESULT`` line last (off when the script printed it already).
    """
    folder = Path(results_dir)
    folder.mkdir(parents=True, exist_ok=True)
    provenance = {**run_provenance(packages), "wall_seconds": round(time.perf_counter() - _STARTED, 1)}
    line = "RESULT " + " ".join(
        f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}" for key, value in result.items()
    )
    record = {"name": name, "title": title, "provenance": provenance, "results": data, "result": result}
    json_path, markdown_path = folder / f"{name}.json", folder / f"{name}.md"
    json_path.write_text(json.dumps(record, indent=1, default=str) + "\n")
    body = [f"# {title}", provenance_markdown(provenance), *sections] + ([f"`{line}`"] if result else [])
    markdown_path.write_text("\n\n".join(body) + "\n")
    print(f"wrote {json_path} and {markdown_path}", file=sys.stderr)
    if print_result:
        print(line, flush=True)
    return json_path, markdown_path


class _Tee(io.TextIOBase):
    """Writes to the real stdout and keeps a copy."""

    def __init__(self, stream) -> None:
        self.stream, self.copy = stream, io.StringIO()

    def write(self, text: str) -> int:
        self.stream.write(text)
        self.copy.write(text)
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


def parse_tables(text: str) -> list[dict]:
    """The Markdown tables printed in ``text``: ``[{"caption", "header", "rows", "printed"}]``: ``rows`` with
    numbers as floats, ``printed`` the cells as printed (what the Markdown file shows)."""

    def cell(value: str):
        value = value.strip()
        try:
            return float(value.rstrip("x").replace(" ", "")) if value not in ("", "-", "–") else None
        except ValueError:
            return value

    tables, lines = [], text.splitlines()
    k = 0
    while k < len(lines):
        if lines[k].startswith("|") and k + 1 < len(lines) and set(lines[k + 1].replace("|", "").strip()) <= set("-: "):
            header = [c.strip() for c in lines[k].strip("|").split("|")]
            caption = lines[k - 1].strip() if k and not lines[k - 1].startswith("|") else ""
            k += 2
            rows, printed = [], []
            while k < len(lines) and lines[k].startswith("|"):
                printed.append([c.strip() for c in lines[k].strip().strip("|").split("|")])
                rows.append([cell(c) for c in printed[-1]])
                k += 1
            tables.append({"caption": caption, "header": header, "rows": rows, "printed": printed})
        else:
            k += 1
    return tables


def parse_result(text: str) -> dict[str, float]:
    """The last ``RESULT key=value ...`` line of ``text`` as a dict (values as floats where they parse)."""
    lines = [line for line in text.splitlines() if line.startswith("RESULT ")]
    if not lines:
        return {}
    pairs = (item.split("=", 1) for item in lines[-1].split()[1:])
    result = {}
    for key, value in pairs:
        try:
            result[key] = float(value)
        except ValueError:
            result[key] = value
    return result


@contextmanager
def recorded(name: str, title: str, results_dir: str | Path = RESULTS, notes: str = ""):
    """Run the block with stdout copied; then write ``<name>.json`` / ``<name>.md`` from the Markdown tables and
    the ``RESULT`` line it printed (captions: the line above each table), with provenance. Nothing is written if
    the block raises."""
    tee = _Tee(sys.stdout)
    with redirect_stdout(tee):
        yield
    text = tee.copy.getvalue()
    tables, result = parse_tables(text), parse_result(text)
    sections = [
        (f"{t['caption']}\n\n" if t["caption"] else "") + markdown_table(t["header"], t.pop("printed")) for t in tables
    ]
    write_results(name, title, sections + ([notes] if notes else []), {"tables": tables}, result, results_dir,
                  print_result=False)  # fmt: skip


def add_result_arguments(parser) -> None:
    """``--smoke`` (seconds: tiny sizes, same code path) and ``--results`` (where the results files go)."""
    parser.add_argument("--smoke", action="store_true", help="tiny sizes and one repeat: checks the script runs")
    parser.add_argument("--results", default=str(RESULTS), help="folder of the results files (.json and .md)")
