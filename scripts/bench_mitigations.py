"""What the attention-based fixes cost: one and three passes of final-token attention plus
the answer, against answering the baseline prompt alone, on the same prompts through the
runner.

Every arm runs in one process on the same reader (its model loaded once, before any is
timed), each into a fresh results folder, so none reuses another's rows: the baseline
answers ``--prompts`` multi-document prompts of the mitigations chapter; each attention
sorting arm scores their final-token attention in the chapter's layers (once, or three
times, re-ordering between passes) and answers the re-ordered prompts. The ratio of seconds
per prompt is what a user pays for an attention arm over the baseline (the chapter's bar:
at most 2.5x).

    python scripts/bench_mitigations.py --prompts 8 --json data/bench/mitigations-cpu.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import torch

from longctx import __version__
from longctx.chapters.mitigations import design
from longctx.chapters.scales import read_scales, scale_of
from longctx.models import DEFAULT_MODEL
from longctx.reader import Reader
from longctx.replay import machine
from longctx.runner import Block, run
from longctx.tasks import multidoc_qa as qa


def timed(blocks: list[Block], reader: Reader, model) -> tuple[float, int]:
    """(seconds, rows made) for ``blocks`` answered into a fresh folder by ``model``."""
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        report = run(
            blocks,
            reader,
            folder,
            batch_size=4,
            progress=False,
            log=lambda m: None,
            load=lambda: model,
        )
        return time.perf_counter() - start, sum(b["generated"] for b in report.blocks)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--json", default=None, help="write the measurement here")
    args = ap.parse_args(argv)
    params = scale_of("mitigations", read_scales("mitigations"), "book", {})
    examples = design.examples(params)[: args.prompts]
    reader = Reader.of(args.model, "hf")
    model = reader.load()
    baseline = [Block("baseline", design.BASELINE, [qa.render(ex) for ex in examples])]
    timed(baseline, reader, model)  # warm the kernels on the same prompts, untimed
    base_s, base_rows = timed(baseline, reader, model)
    arms = {}
    # One pass is also Found in the Middle's cost per question (one attention read, then the
    # answer); its calibration is read once per reader, not per question.
    for arm in ("sort_1", "sort_3"):
        sorting = [design.attention_blocks({**params, "arms": [arm]}, examples, None)]
        seconds, rows = timed(sorting, reader, model)
        arms[arm] = {
            "seconds": round(seconds, 2),
            "rows": rows,
            "ratio": round(seconds / base_s, 2),
        }
    result = {
        "model": reader.model,
        "prompts": len(examples),
        "attention_layers": params["attention_layers"],
        "baseline_s": round(base_s, 2),
        "baseline_rows": base_rows,
        "arms": arms,
        **model.run_params(),
        "threads": torch.get_num_threads(),
        "cpu": machine()["cpu"],
        "date": time.strftime("%Y-%m-%d"),
        "longctx": __version__,
    }
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
