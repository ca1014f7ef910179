"""Hostile inputs for issue 10 (hardening): crafted captures, segments and log dirs, and a
runner that puts kinspect under the memory and time bounds the issue sets."""
