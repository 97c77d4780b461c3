"""Hostile inputs shared by the unit and end-to-end tests of the input surface."""

from __future__ import annotations

# The classic "billion laughs": 9 levels of 9 references each, 9**9 (387 million) strings expanded.
ALIAS_BOMB = (
    "version: v1alpha1\n"
    + 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(
        f"{name}: &{name} [{','.join([f'*{prev}'] * 9)}]\n"
        for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
    )
)
