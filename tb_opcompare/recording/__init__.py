"""Recording profiles Op Compare reads best: in-process helpers for Keras, TensorFlow,
PyTorch and ONNX Runtime (``profilers``) and ``tb-opcompare record``'s subprocess runner
(``runner``).

    from tb_opcompare.recording import KerasProfiler, onnxruntime_profile, tf_profile, torch_profile

Importing them imports no framework: each helper imports its own when called.
"""

from tb_opcompare.recording.profilers import KerasProfiler, onnxruntime_profile, tf_profile, torch_profile

__all__ = ["KerasProfiler", "onnxruntime_profile", "tf_profile", "torch_profile"]
