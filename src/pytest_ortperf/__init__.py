"""pytest-ortperf: performance regression testing of ONNX models on onnxruntime.

Importing this package is cheap: onnxruntime and pandas are imported only by the
functions that need them.
"""

from __future__ import annotations

__version__ = "0.1.0"
