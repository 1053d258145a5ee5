"""Shared analyses that several rules build on (value kinds, loops, device moves, ...)."""
