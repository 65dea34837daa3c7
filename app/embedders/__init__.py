"""The embedders of memory retrieval and message recall: the embedded models, or one through
litellm."""
