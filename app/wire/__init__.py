"""The wire: every JSON shape contextgate reads or writes, named as the providers define them.

TypedDicts only (no code, no import from the rest of ``app``): the chat form every door shares
(chat.py), Anthropic's Messages blocks and stream events (anthropic.py), OpenAI's Responses
items and events (responses.py), and the chat stream (stream.py). They type plain dicts, so
what goes over the wire is exactly what the code builds; pydantic models at the doors still
validate what clients send.
"""
