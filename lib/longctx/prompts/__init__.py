"""Prompt templates as data files (``*.prompt``), formatted with ``str.format``."""

from importlib.resources import files


def load_prompt(name: str) -> str:
    path = files(__name__).joinpath(f"{name}.prompt")
    if not path.is_file():
        known = sorted(
            p.name[: -len(".prompt")]
            for p in files(__name__).iterdir()
            if p.name.endswith(".prompt")
        )
        raise KeyError(f"unknown prompt template '{name}'; known: {', '.join(known)}")
    return path.read_text(encoding="utf-8").rstrip("\n")
