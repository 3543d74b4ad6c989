"""A request the server refuses: its status and one sentence saying why."""

from __future__ import annotations


class Problem(Exception):
    def __init__(self, status: int, sentence: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(sentence)
        self.status = status
        self.sentence = sentence
        self.headers = headers or {}
