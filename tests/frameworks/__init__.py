"""Recordings of real agent frameworks against a scripted local model server."""
