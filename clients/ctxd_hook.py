"""ctxd-hook: the thin hook client (being written)."""


def main() -> int:
    return 0
