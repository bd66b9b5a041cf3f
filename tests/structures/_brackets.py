"""A tiny bracketed-tree reader for tests (Penn-style ``(LABEL child ...)``, leaves are bare words)."""

from __future__ import annotations

Tree = list  # [label, child, ...]; a child is a Tree or a word (str)


def read_brackets(text: str) -> Tree:
    """Parse one bracketed tree; ``AssertionError`` when brackets do not balance."""
    stack: list[Tree] = []
    root: Tree | None = None
    atom = ""
    for ch in text + " ":
        if ch in "() " and atom:
            assert stack, f"word {atom!r} outside any bracket"
            stack[-1].append(atom)
            atom = ""
        if ch == "(":
            assert root is None, "text after the end of the tree"
            stack.append([])
        elif ch == ")":
            assert stack, "unbalanced ')'"
            node = stack.pop()
            if stack:
                stack[-1].append(node)
            else:
                root = node
        elif ch != " ":
            atom += ch
    assert not stack and root is not None, "unbalanced '('"
    return root


def preterminals(tree: Tree) -> list[tuple[str, str]]:
    """(tag, word) pairs, left to right."""
    label, children = tree[0], tree[1:]
    if len(children) == 1 and isinstance(children[0], str):
        return [(label, children[0])]
    out = []
    for child in children:
        assert isinstance(child, list), f"bare word {child!r} under phrase {label!r}"
        out.extend(preterminals(child))
    return out


def phrase_spans(tree: Tree, start: int = 0) -> list[tuple[str, int, int]]:
    """(label, start, end) of every phrase above the preterminals, half-open word spans."""
    out: list[tuple[str, int, int]] = []
    position = start
    for child in tree[1:]:
        if len(child) == 2 and isinstance(child[1], str):
            position += 1
        else:
            inner = phrase_spans(child, position)
            out.extend(inner)
            position = inner[-1][2]
    out.append((tree[0], start, position))
    return out
