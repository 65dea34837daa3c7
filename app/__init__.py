"""contextgate: an OpenAI-compatible proxy that owns conversation state and manages context.

Importing the package makes token counting and litellm's cost map work offline: tiktoken is
pointed at the encodings litellm ships and litellm at its bundled cost map, unless the
environment already says otherwise. This must happen before litellm is first imported.
"""

from app.core.offline import configure_offline

configure_offline()

__version__ = "0.1.0"
