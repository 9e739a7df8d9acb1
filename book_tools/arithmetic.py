"""Which processor's arithmetic the committed notebook outputs follow, and which cells depend on it.

Training numbers depend on the order in which floating-point sums are taken. The batch's
environment (`reproduce.NUMERICS_ENV`) pins that order on every Intel processor, but not across
vendors: Intel's MKL honours `MKL_CBWR=AVX2` on Intel processors only and takes its own
("AUTO") branch on others, so a GRU trained on an AMD EPYC ends its training loss at 0.021 where
an Intel Xeon ends it at 0.022, and every sampled program from there on may differ.

So the batch records the vendor it ran on (`STAMP_PATH`), and the cells whose outputs change
with the processor's arithmetic carry the tag `TAG`. The test command compares every cell
exactly on a processor of the recorded vendor. On another vendor it still runs every cell, so
every assertion in the chapters must hold, but it does not compare the tagged cells' outputs,
and says how many it left out (notebooks/conftest.py).

A chapter re-executed alone on a processor of another vendor is recorded apart, under
"chapters" (`made_on`): it starts from the committed checkpoints, as it does in the test command
(book_tools.nbcheck), so only its own tagged cells follow the other arithmetic. A chapter that
writes other checkpoints (chapters 4 and 9 train them) cannot be re-executed alone that way: the
chapters after it read its checkpoints (book_tools.reproduce refuses it).

Tagging is measured, not guessed: run the notebook checks on a processor of another vendor
(`python -m book_tools.nbcheck`), or on this one with MKL's other kernels
(`COURSE_MKL_CBWR=COMPATIBLE python -m book_tools.nbcheck`: a rough stand-in, it also reports
chapters 4 and 9's checkpoints as changed), and pass the JUnit reports to

    python -m book_tools.arithmetic --tag-from _build/test-reports/notebooks-*.xml

which tags exactly the cells whose outputs differed (a cell that raised is never tagged: that is
a failure to fix); --retag first removes every tag.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from book_tools import NOTEBOOKS_DIR, chapter_notebooks, write_notebook

STAMP_PATH = NOTEBOOKS_DIR / "outputs_made_on.json"
TAG = "cpu-arithmetic"
OUTPUTS_DIFFER = "Cell outputs differ"  # nbval's message for a cell that ran but printed something else
_CELL = re.compile(r"Cell (?P<index>\d+)$")


def cpuinfo_field(name: str) -> str | None:
    """A field of the first processor in Linux's /proc/cpuinfo ('vendor_id', 'model name'); None elsewhere."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.split(":", 1)[0].strip() == name:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_vendor() -> str:
    """'GenuineIntel', 'AuthenticAMD', ... as Linux reports it; the machine's architecture elsewhere."""
    return cpuinfo_field("vendor_id") or platform.machine() or "unknown"


def checkpoints_digest(folder: Path | None = None) -> str:
    """SHA-256 over the checkpoint files (their paths and bytes): which checkpoints a chapter started from."""
    import hashlib

    from book_tools import checkpoint_files

    folder = folder or checkpoint_files.CHECKPOINTS
    digest = hashlib.sha256()
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(file.relative_to(folder).as_posix().encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()


def _apart_ok(entry) -> bool:
    return (isinstance(entry, dict) and set(entry) == {"vendor", "checkpoints"}
            and all(isinstance(v, str) for v in entry.values()))


def _read(path: Path) -> dict | None:
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    chapters = data.get("chapters", {}) if isinstance(data, dict) else None
    if (not isinstance(data, dict) or not isinstance(data.get("cpu_vendor"), str) or not isinstance(chapters, dict)
            or not all(isinstance(k, str) and _apart_ok(v) for k, v in chapters.items())):
        raise ValueError(f"{path} should hold {{\"cpu_vendor\": \"...\"}} and optionally {{\"chapters\": {{\"NN_name\": "
                         f"{{\"vendor\": \"...\", \"checkpoints\": \"SHA-256\"}}}}}}, written by the batch (python -m "
                         f"book_tools reproduce); it holds {data!r}. Delete it and re-run the batch.")
    return data


def read_stamp(path: Path = STAMP_PATH) -> str | None:
    """The vendor whose arithmetic the committed outputs follow; None if no batch recorded one."""
    data = _read(path)
    return None if data is None else data["cpu_vendor"]


def chapter_stamps(path: Path = STAMP_PATH) -> dict[str, dict]:
    """{chapter stem: {"vendor", "checkpoints"}} for the chapters re-executed alone on another vendor than the
    batch's, with the digest of the checkpoints they started from (checkpoints_digest)."""
    data = _read(path)
    return {} if data is None else dict(data.get("chapters", {}))


class StaleStamp(ValueError):
    """A chapter recorded apart started from other checkpoints than those here now."""


def made_on(chapter: str, path: Path = STAMP_PATH) -> str | None:
    """The vendor whose arithmetic one chapter's committed outputs follow (its stem: '06_ppo_and_gae'). Raises
    StaleStamp where the chapter was recorded apart from checkpoints that have changed since: its outputs no
    longer follow from the committed checkpoints on any vendor."""
    entry = chapter_stamps(path).get(chapter)
    if entry is None:
        return read_stamp(path)
    now = checkpoints_digest()
    if entry["checkpoints"] != now:
        raise StaleStamp(
            f"{chapter} was re-executed alone on {entry['vendor']} from other checkpoints than the committed ones "
            f"(notebooks/{path.name}, checkpoints {entry['checkpoints'][:12]}; now {now[:12]}): "
            f"a chapter before it wrote new ones. Re-execute it (python -m book_tools reproduce --only "
            f"{chapter[:2]}), or every chapter.")
    return entry["vendor"]


def _meaning() -> str:
    return (f"the chapters' outputs were computed with this vendor's floating-point kernels; on another vendor the "
            f"test command does not compare the cells tagged '{TAG}'. 'chapters' names those re-executed alone "
            f"since on another vendor, and the SHA-256 of the checkpoints they started from (made on cpu_vendor)")


def write_stamp(vendor: str, path: Path = STAMP_PATH,
                written_by: str = "python -m book_tools reproduce, every chapter") -> None:
    """Every chapter was executed on `vendor`: the stamp names no chapter apart."""
    path.write_text(json.dumps({"cpu_vendor": vendor, "written_by": written_by, "meaning": _meaning()},
                               indent=1) + "\n")


def stamp_chapter(chapter: str, vendor: str, apart: bool, path: Path = STAMP_PATH) -> None:
    """The chapter (its stem) was re-executed alone on `vendor`: record it apart, with the digest of the
    checkpoints it started from, where `apart` (it has tagged cells and `vendor` is not the batch's); otherwise
    drop any entry it had."""
    data = _read(path)
    if data is None:
        raise ValueError(f"{path} is missing: run the whole batch (python -m book_tools reproduce) first")
    chapters = {k: v for k, v in data.get("chapters", {}).items() if k != chapter}
    if apart and vendor != data["cpu_vendor"]:
        chapters[chapter] = {"vendor": vendor, "checkpoints": checkpoints_digest()}
    data = {k: v for k, v in data.items() if k != "chapters"} | ({"chapters": dict(sorted(chapters.items()))}
                                                                 if chapters else {})
    data["meaning"] = _meaning()
    path.write_text(json.dumps(data, indent=1) + "\n")


def cells_not_to_compare(items, vendor: str | None, here: str) -> list:
    """The nbval items (cells) whose outputs depend on the processor's arithmetic, when this
    processor's vendor is not `vendor`, the one the committed outputs were made on; [] otherwise."""
    if vendor is None or vendor == here:
        return []
    return [item for item in items
            if TAG in (getattr(getattr(item, "cell", None), "metadata", None) or {}).get("tags", [])]


def _code_cells(nb: dict) -> list[dict]:
    """A notebook's code cells, in order: nbval's "Cell N" is the N-th of them."""
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def tagged_cells(notebook: Path) -> list[int]:
    """Indices (among code cells, as nbval numbers them) of the notebook's cells tagged TAG."""
    cells = _code_cells(json.loads(notebook.read_text()))
    return [i for i, c in enumerate(cells) if TAG in c.get("metadata", {}).get("tags", [])]


def cells_whose_outputs_differed(junit: Path) -> dict[str, list[int]]:
    """{notebook file name: [code-cell index, ...]} for the cells of an nbval JUnit report that ran
    but printed other outputs. Cells that raised, timed out or were skipped are left out."""
    found: dict[str, set[int]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        failure = case.find("failure")
        if failure is None:
            continue
        text = (failure.get("message") or "") + (failure.text or "")
        # pytest writes the cell "notebooks/04_x.ipynb::Cell 20" as classname "notebooks.04_x.ipynb", name "Cell 20"
        classname, match = case.get("classname", ""), _CELL.match(case.get("name", ""))
        if not (match and classname.endswith(".ipynb")):
            continue
        notebook = classname.removesuffix(".ipynb").rsplit(".", 1)[-1] + ".ipynb"
        if OUTPUTS_DIFFER in text:
            found.setdefault(notebook, set()).add(int(match["index"]))
    return {nb: sorted(ix) for nb, ix in sorted(found.items())}


def untag(notebooks_dir: Path = NOTEBOOKS_DIR) -> int:
    """Remove TAG from every chapter's cells; return how many lost it. Outputs are untouched."""
    removed = 0
    for path in chapter_notebooks(notebooks_dir):
        nb = json.loads(path.read_text())
        tagged = [c for c in nb["cells"] if TAG in c.get("metadata", {}).get("tags", [])]
        for cell in tagged:
            cell["metadata"]["tags"].remove(TAG)
        if tagged:  # a notebook without the tag is left as it is
            write_notebook(path, nb)
            removed += len(tagged)
    return removed


def tag(cells: dict[str, list[int]], notebooks_dir: Path = NOTEBOOKS_DIR) -> int:
    """Add TAG to the given code cells; return how many cells gained it. Outputs are untouched."""
    added = 0
    for name, indices in cells.items():
        path = notebooks_dir / name
        if not path.exists():
            raise SystemExit(f"arithmetic: the report names {name}, which is not in {notebooks_dir}")
        nb = json.loads(path.read_text())
        code = _code_cells(nb)
        for i in indices:
            if i >= len(code):
                raise SystemExit(f"arithmetic: {name} has {len(code)} code cells, the report names cell {i}: "
                                 f"the report is from another version of the notebook; run the checks again")
            tags = code[i].setdefault("metadata", {}).setdefault("tags", [])
            if TAG not in tags:
                tags.append(TAG)
                added += 1
        write_notebook(path, nb)
    return added


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m book_tools.arithmetic", description=__doc__.split("\n\n")[0])
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--tag-from", nargs="+", type=Path, metavar="JUNIT",
                       help=f"tag '{TAG}' the cells whose outputs differed in these nbval JUnit reports")
    group.add_argument("--show", action="store_true", help="the recorded vendor and the tagged cells")
    p.add_argument("--retag", action="store_true",
                   help="with --tag-from: first remove every tag, so that cells which no longer differ lose theirs")
    args = p.parse_args(argv)
    if args.show:
        print(f"outputs made on: {read_stamp()}; this machine: {cpu_vendor()}")
        for chapter, entry in chapter_stamps().items():
            print(f"  {chapter} re-executed alone on {entry['vendor']}")
        for nb in chapter_notebooks(NOTEBOOKS_DIR):
            cells = tagged_cells(nb)
            print(f"{nb.name}: {len(cells)} cells tagged {TAG} {cells}")
        return 0
    if args.retag:
        print(f"arithmetic: {untag()} tags {TAG} removed")
    cells: dict[str, list[int]] = {}
    for report in args.tag_from:
        for name, indices in cells_whose_outputs_differed(report).items():
            cells[name] = sorted(set(cells.get(name, [])) | set(indices))
    print(f"arithmetic: {tag(cells)} cells newly tagged {TAG} in {len(cells)} notebooks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
