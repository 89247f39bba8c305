"""An MNIST-shaped CNN trained with PyTorch on random data, profiled with
``tb_opcompare.recording.torch_profile``.

    python -m tb_opcompare.demo.mnist_torch --batch-size 16 --run-dir logs/mnist_cnn_torch_cpu_bs16
    tb-opcompare record --logdir logs --model mnist_cnn_torch --batch-sizes 1,16,64 -- \\
        python -m tb_opcompare.demo.mnist_torch --batch-size {batch_size}
    tb-opcompare record --logdir logs --model mnist_cnn_torch --batch-sizes 1,16,64 \\
        --matrix precision=fp32,bf16 --matrix backend=eager,compile -- \\
        python -m tb_opcompare.demo.mnist_torch --batch-size {batch_size} --precision {precision} --backend {backend}
"""

from __future__ import annotations

import os

from tb_opcompare.demo import demo_arguments

INPUT_SHAPE = (1, 28, 28)


def build_cnn():
    """Two convolutions, a pooling layer, two dense layers, for [N, 1, 28, 28] inputs."""
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(1, 16, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(32 * 11 * 11, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )


def train_profiled(
    model,
    optimizer,
    input_shape: tuple[int, ...],
    *,
    run_dir: str | None,
    model_name: str,
    batch_size: int,
    steps: int,
    precision: str = "fp32",
    with_stack: bool = False,
    with_flops: bool = False,
    step_model=None,
) -> None:
    """``steps`` training steps on random data (10 classes) under ``torch_profile``, which
    profiles steps 3 .. 7. ``step_model`` (e.g. ``torch.compile(model)``) runs the forward
    pass where given. bf16 as users run it: autocast around forward and loss, fp32
    weights and optimizer."""
    import torch
    from torch import nn

    from tb_opcompare.recording.profilers import torch_profile

    device = next(model.parameters()).device.type
    loss_fn = nn.CrossEntropyLoss()
    autocast = torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16")
    with torch_profile(
        run_dir,
        model=model_name,
        batch_size=batch_size,
        wait=1,
        warmup=2,
        active=min(5, max(1, steps - 3)),
        precision=precision,
        with_stack=with_stack,
        with_flops=with_flops,
        compiler="torch.compile" if step_model is not None else "eager",
    ) as profiler:
        for _ in range(steps):
            x = torch.randn(batch_size, *input_shape, device=device)
            y = torch.randint(0, 10, (batch_size,), device=device)
            optimizer.zero_grad()
            with autocast:
                loss = loss_fn((step_model or model)(x), y)
            loss.backward()
            optimizer.step()
            profiler.step()


def main(argv: list[str] | None = None) -> None:
    args = demo_arguments(__doc__, argv, framework="torch")
    import torch

    torch.manual_seed(0)
    model = build_cnn().to("cuda" if torch.cuda.is_available() else "cpu")
    # compiled during the unprofiled first steps (wait + warm-up), as a user's warm-up would
    step_model = torch.compile(model) if args.backend == "compile" else None
    train_profiled(
        model,
        torch.optim.Adam(model.parameters()),
        INPUT_SHAPE,
        run_dir=args.run_dir,
        model_name=os.environ.get("TB_OPCOMPARE_MODEL") or "mnist_cnn_torch",
        batch_size=args.batch_size,
        steps=args.steps,
        precision=args.precision,
        with_stack=args.with_stack,
        with_flops=args.with_flops,
        step_model=step_model,
    )
    print(f"trained {args.steps} steps at batch size {args.batch_size}")


if __name__ == "__main__":
    main()
