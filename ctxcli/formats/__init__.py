"""Transcript formats: each reads records into the neutral model and writes them back."""
