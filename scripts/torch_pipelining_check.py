#!/usr/bin/env python3
"""Run pipewright's PyTorch pipelining CSVs through PyTorch's own schedule runtime
(torch.distributed.pipelining's _PipelineScheduleRuntime, the class torchtitan's
`pipeline_parallel_schedule_csv` uses), on CPU processes over gloo, and check every stage's
gradients against unpipelined training of the same model.

  python3 scripts/torch_pipelining_check.py [--form compute_only|compute_comms] A.csv B.csv ...

All CSVs must have the same number of rows (ranks). Each stage is Linear(d, d) + tanh; the loss is
the mean squared error per microbatch, averaged over microbatches (PyTorch's scale_grads=True).
Prints one line per CSV: PASS or FAIL, ranks, stages, microbatches, the largest relative
gradient error. Exit 0 when every CSV passes.
"""
import argparse
import csv
import datetime
import json
import os
import re
import sys
import tempfile
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

TOKEN = re.compile(r"^(\d+)(F|I|B|W|UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)(\d*)$")


def read_layout(path):
    """Rows (ranks), stage -> rank map and microbatch count from the CSV's compute tokens."""
    stage_rank, mbs, rows = {}, set(), 0
    with open(path, newline="") as f:
        for rank, row in enumerate(csv.reader(f)):
            rows = rank + 1
            for cell in row:
                cell = cell.strip()
                if not cell:
                    continue
                subs = cell[1:cell.index(")")].split(";") if cell.startswith("(") else [cell]
                for s in subs:
                    m = TOKEN.match(s.strip())
                    if not m:
                        raise SystemExit(f"{path}: unknown token {s!r}")
                    stage, kind, mb = int(m.group(1)), m.group(2), m.group(3)
                    if kind in ("F", "I", "B", "W"):
                        stage_rank.setdefault(stage, rank)
                        if stage_rank[stage] != rank:
                            raise SystemExit(f"{path}: stage {stage} on ranks "
                                             f"{stage_rank[stage]} and {rank}")
                        mbs.add(int(mb))
    return rows, stage_rank, max(mbs) + 1


def make_blocks(num_stages, dim):
    torch.manual_seed(1234)
    return [nn.Sequential(nn.Linear(dim, dim), nn.Tanh()) for _ in range(num_stages)]


def worker(rank, world, paths, form, dim, mb_size, outdir, infer_shapes):
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=20))
    out = open(os.path.join(outdir, f"rank{rank}.jsonl"), "w")

    def put(*r):
        out.write(json.dumps(r) + "\n")
        out.flush()

    try:
        for path in paths:
            try:
                rows, stage_rank, m = read_layout(path)
                num_stages = len(stage_rank)
                blocks = make_blocks(num_stages, dim)
                ref = make_blocks(num_stages, dim)
                torch.manual_seed(99)
                x = torch.randn(m * mb_size, dim)
                y = torch.randn(m * mb_size, dim)
                mine = sorted(s for s, r in stage_rank.items() if r == rank)
                # shapes given, so no stage infers them over the wire (V placements put two
                # neighbouring stages on one rank)
                shape = torch.empty(mb_size, dim)
                try:
                    if infer_shapes:
                        raise TypeError
                    stages = [PipelineStage(blocks[s], s, num_stages, torch.device("cpu"),
                                            input_args=(shape,), output_args=shape)
                              for s in mine]
                except TypeError:  # PyTorch infers the shapes over the wire
                    stages = [PipelineStage(blocks[s], s, num_stages, torch.device("cpu"))
                              for s in mine]
                loss_fn = nn.functional.mse_loss
                sched = _PipelineScheduleRuntime(stages, m, loss_fn=loss_fn)
                # The runtime maps stage s to rank s mod p (PipelineScheduleMulti's default;
                # only ZBVZeroBubble and DualPipeV use a V): give it and its stages the CSV's own
                # placement before the CSV's sends and receives are lowered, so a V order talks
                # to the ranks that hold its stages.
                mapping = dict(stage_rank)
                if mapping != {s: s % world for s in mapping}:
                    sched.stage_index_to_group_rank = mapping
                    for st in stages:
                        st.stage_index_to_group_rank = mapping
                sched._load_csv(path, format=form)
                args = (x,) if 0 in mine else ()
                target = y if num_stages - 1 in mine else None
                losses = [] if target is not None else None
                sched.step(*args, target=target, losses=losses)
                # unpipelined reference: the mean over microbatches of each one's loss
                total = 0
                for xb, yb in zip(x.chunk(m), y.chunk(m)):
                    h = xb
                    for b in ref:
                        h = b(h)
                    total = total + loss_fn(h, yb)
                (total / m).backward()
                worst = 0.0
                for s in mine:
                    for p, q in zip(blocks[s].parameters(), ref[s].parameters()):
                        if p.grad is None:
                            raise RuntimeError(f"stage {s}: a parameter has no gradient")
                        err = ((p.grad - q.grad).norm() / q.grad.norm().clamp_min(1e-30)).item()
                        worst = max(worst, err)
                put(path, rank, worst, None, rows, num_stages, m)
            except Exception:
                put(path, rank, None, traceback.format_exc()[-3000:], 0, 0, 0)
            dist.barrier()
    finally:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--form", default="compute_only", choices=["compute_only", "compute_comms"])
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--mb-size", type=int, default=2)
    ap.add_argument("--tolerance", type=float, default=1e-5)
    ap.add_argument("--infer-shapes", action="store_true",
                    help="let PyTorch infer the stages' shapes instead of passing them")
    a = ap.parse_args()
    worlds = {read_layout(p)[0] for p in a.csv}
    if len(worlds) != 1:
        raise SystemExit("all CSVs must have the same number of ranks")
    world = worlds.pop()
    os.environ["MASTER_PORT"] = str(29500 + os.getpid() % 1000)
    outdir = tempfile.mkdtemp(prefix="pw-pipelining-")
    try:
        mp.spawn(worker, args=(world, a.csv, a.form, a.dim, a.mb_size, outdir, a.infer_shapes), nprocs=world)
    except Exception as e:  # a rank that died: its results are missing below
        print(f"a rank failed: {str(e).strip().splitlines()[-1] if str(e).strip() else e}")
    by_path = {}
    for r in range(world):
        f = os.path.join(outdir, f"rank{r}.jsonl")
        if not os.path.exists(f):
            continue
        for line in open(f):
            path, rank, worst, err, rows, stages, m = json.loads(line)
            by_path.setdefault(path, []).append((rank, worst, err, rows, stages, m))
    ok = True
    print(f"torch {torch.__version__}, _PipelineScheduleRuntime, format={a.form}, gloo on CPU"
          f"{', shapes inferred' if a.infer_shapes else ''}")
    for path in a.csv:
        rs = by_path.get(path, [])
        errs = [e for _, _, e, *_ in rs if e]
        if errs or len(rs) != world:
            ok = False
            print(f"FAIL {path}: {len(rs)} of {world} ranks reported")
            for rank, _, e, *_ in sorted(rs):  # every rank's own failure
                if e:
                    print(f"rank {rank}: " + "\n  ".join(e.rstrip().splitlines()[-6:]))
            continue
        worst = max(w for _, w, *_ in rs)
        _, _, _, rows, stages, m = rs[0]
        verdict = "PASS" if worst <= a.tolerance else "FAIL"
        ok &= verdict == "PASS"
        print(f"{verdict} {os.path.basename(path)}: {rows} ranks, {stages} stages, {m} microbatches,"
              f" max relative gradient error {worst:.2e} (tolerance {a.tolerance:g})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
