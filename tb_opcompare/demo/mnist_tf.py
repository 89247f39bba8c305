"""An MNIST-shaped CNN trained with Keras on random data, profiled with
``tb_opcompare.recording.KerasProfiler``.

    python -m tb_opcompare.demo.mnist_tf --batch-size 16 --run-dir logs/mnist_cnn_cpu_bs16
    tb-opcompare record --logdir logs --model mnist_cnn --batch-sizes 1,16,64 -- \\
        python -m tb_opcompare.demo.mnist_tf --batch-size {batch_size}
    tb-opcompare record --logdir logs --model mnist_cnn --batch-sizes 1,16,64 \\
        --matrix precision=fp32,bf16 --matrix backend=eager,xla -- \\
        python -m tb_opcompare.demo.mnist_tf --batch-size {batch_size} --precision {precision} --backend {backend}
"""

from __future__ import annotations

import os

from tb_opcompare.demo import demo_arguments


def build_model():
    """Two convolutions, a pooling layer and two dense layers, for 28x28x1 inputs."""
    import tensorflow as tf

    return tf.keras.Sequential(
        [
            tf.keras.Input(shape=(28, 28, 1)),
            tf.keras.layers.Conv2D(16, 3, activation="relu"),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Conv2D(32, 3, activation="relu"),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(64, activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )


def main(argv: list[str] | None = None) -> None:
    args = demo_arguments(__doc__, argv, framework="tf")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    from tb_opcompare.recording.profilers import KerasProfiler

    tf.keras.utils.set_random_seed(0)
    if args.precision == "bf16":
        tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model = build_model()
    model.compile(
        optimizer="adam",
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=args.backend == "xla",
    )
    x = np.random.rand(args.batch_size * args.steps, 28, 28, 1).astype("float32")
    y = np.random.randint(0, 10, size=(args.batch_size * args.steps,))
    profiler = KerasProfiler(
        args.run_dir,
        model=os.environ.get("TB_OPCOMPARE_MODEL") or "mnist_cnn",
        batch_size=args.batch_size,
        first_step=3,
        steps=min(5, max(1, args.steps - 3)),
        precision=args.precision,
        compiler=args.backend,
    )
    model.fit(x, y, batch_size=args.batch_size, epochs=1, verbose=0, callbacks=[profiler])
    print(f"trained {args.steps} steps at batch size {args.batch_size}")


if __name__ == "__main__":
    main()
