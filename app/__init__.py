"""contextgate: an OpenAI-compatible proxy that owns conversation state and manages context.

Importing the package makes token counting and litellm's cost map work offline: tiktoken is
pointed at the encodings litellm ships and litellm at its bundled cost map, unless the
environment already says otherwise. This must happen before litellm is first imported.

numpy's BLAS gets one thread unless ``OPENBLAS_NUM_THREADS`` says otherwise (set before numpy is
first imported): a similarity search is one 10,000 x 256 matrix-vector product, 0.3 ms on one
thread but 8 ms when OpenBLAS splits it over cores that are busy (bench/README.md).
"""

import os

from app.core.offline import configure_offline

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
configure_offline()

__version__ = "0.1.0"
