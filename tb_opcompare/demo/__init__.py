"""Small real training scripts for the demo and the tutorial (each imports its framework
only when run)."""

from __future__ import annotations

import argparse


def demo_arguments(doc: str, argv: list[str] | None, *, framework: str) -> argparse.Namespace:
    """The options every demo script takes; ``framework`` ("torch" or "tf") picks the
    words of ``--precision`` and ``--backend`` that it can run."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--steps", type=int, default=10, help="training steps (profiled: 3 .. 7)")
    parser.add_argument("--run-dir", help="default: $TB_OPCOMPARE_RUN_DIR")
    parser.add_argument(
        "--precision",
        choices=("fp32", "bf16"),
        default="fp32",
        help="bf16: "
        + (
            "autocast the forward pass and the loss to bfloat16"
            if framework == "torch"
            else "Keras's mixed_bfloat16 policy"
        ),
    )
    parser.add_argument(
        "--backend",
        choices=("eager", "compile") if framework == "torch" else ("eager", "xla"),
        default="eager",
        help="compile: torch.compile (Inductor)"
        if framework == "torch"
        else "xla: compile the train step with XLA (jit_compile=True)",
    )
    if framework == "torch":
        parser.add_argument(
            "--with-stack",
            action="store_true",
            help="record Python calls too (the nn.Module tree); traces grow several times",
        )
        parser.add_argument(
            "--with-flops",
            action="store_true",
            help="ask PyTorch for its FLOPs per matrix op and convolution (the roofline's work, where the "
            "trace keeps them; torch 2.11-2.13 do not, and the work is counted from the recorded shapes)",
        )
    return parser.parse_args(argv)
