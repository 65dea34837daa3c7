"""The operator commands of ``contextgate`` beyond serve/migrate: keys, conversations, doctor.

Each module holds one typer sub-application; ``app/cli.py`` registers them.
"""
