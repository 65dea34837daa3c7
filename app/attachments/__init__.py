"""Stored documents: POST/GET/DELETE /v1/attachments, and their use as request artifacts."""
