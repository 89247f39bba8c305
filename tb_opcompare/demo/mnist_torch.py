"""An MNIST-shaped CNN trained with PyTorch on random data, profiled with
``tb_opcompare.record.torch_profile``.

    python -m tb_opcompare.demo.mnist_torch --batch-size 16 --run-dir logs/mnist_cnn_torch_cpu_bs16
    tb-opcompare record --logdir logs --model mnist_cnn_torch --batch-sizes 1,16,64 -- \\
        python -m tb_opcompare.demo.mnist_torch --batch-size {batch_size}
"""

from __future__ import annotations

import os

from tb_opcompare.demo import demo_arguments


def main(argv: list[str] | None = None) -> None:
    args = demo_arguments(__doc__, argv, precision=True)
    import torch
    from torch import nn

    from tb_opcompare.record import torch_profile

    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3), nn.ReLU(), nn.Flatten(),
        nn.Linear(32 * 11 * 11, 64), nn.ReLU(), nn.Linear(64, 10),
    ).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    active = min(5, max(1, args.steps - 3))
    # bf16 as users run it: autocast around forward and loss, fp32 weights and optimizer
    autocast = torch.autocast(device, dtype=torch.bfloat16, enabled=args.precision == "bf16")
    with torch_profile(args.run_dir, model=os.environ.get("TB_OPCOMPARE_MODEL") or "mnist_cnn_torch",
                       batch_size=args.batch_size, wait=1, warmup=2, active=active, precision=args.precision,
                       with_stack=args.with_stack) as profiler:
        for _ in range(args.steps):
            x = torch.randn(args.batch_size, 1, 28, 28, device=device)
            y = torch.randint(0, 10, (args.batch_size,), device=device)
            optimizer.zero_grad()
            with autocast:
                loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            profiler.step()
    print(f"trained {args.steps} steps at batch size {args.batch_size}")


if __name__ == "__main__":
    main()
