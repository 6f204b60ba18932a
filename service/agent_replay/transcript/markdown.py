"""Markdown transcripts, for terminals and tickets.

The transcript's own structure (its title, the runs table, a heading and a
rule per turn) is the only structure: a run's content must not be able to
forge a turn ("## User", a setext underline, a rule) or inject raw HTML.
Content text (model text, reasoning, errors, a tool's name and state) keeps
its inline Markdown (emphasis, code spans, links) but no block structure:
each line's first character is escaped when it could open a block, and every
backslash, `<` and image's `![` is escaped, so no line can be a heading, rule,
list, quote, fence, table, HTML or image. Names and one-line values are kept on one line.
Everything quoted as data (arguments, results, outputs) goes in fences
longer than any run of backticks inside it, and table cells escape pipes.
"""

from __future__ import annotations

import re

from agent_replay.transcript.blocks import Block
from agent_replay.transcript.document import Transcript
from agent_replay.transcript.views import RUN_COLUMNS, run_cells, views, when

_BACKTICKS = re.compile(r"`+")
_ASCII_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
# Punctuation that opens a block only in these shapes, and is common inline at a line's
# start otherwise (`code`, **bold**, _emphasis_, ~~struck~~): a fence, a list item, a rule.
_INLINE_FIRST = frozenset("`*_~")
_OPENS_BLOCK = re.compile(r"```|~~~|\*(?:[ \t]|$)|([*_])[ \t]*(?:\1[ \t]*){2,}$")
# An ordered list item's number (its delimiter follows).
_ORDERED = re.compile(r"\d{1,9}(?=[.)])")
_LINE_BREAK = re.compile(r"\r\n?|\n")


def _longest_backticks(text: str) -> int:
    return max((len(m) for m in _BACKTICKS.findall(text)), default=0)


def fence(text: str, info: str = "") -> str:
    marks = "`" * max(3, _longest_backticks(text) + 1)
    return f"{marks}{info}\n{text}\n{marks}"


def code_span(text: str) -> str:
    marks = "`" * (_longest_backticks(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{marks}{pad}{text}{pad}{marks}"


def _inline(text: str) -> str:
    """Text as inline Markdown: backslashes and `<` escaped (no HTML, no autolink), and
    no image (a rendered transcript would fetch its URL as soon as it is opened)."""
    return text.replace("\\", "\\\\").replace("<", "\\<").replace("![", "!\\[")


def one_line(text: str) -> str:
    """A name or value within a line of the transcript's own: its line breaks as spaces."""
    return _LINE_BREAK.sub(" ", text)


def _line(line: str) -> str:
    body = line.lstrip(" \t")
    indent = line[: len(line) - len(body)]
    escaped = _inline(body)
    first = body[:1]
    if first in _INLINE_FIRST:
        if _OPENS_BLOCK.match(body):
            escaped = "\\" + escaped
    elif first in _ASCII_PUNCTUATION and first not in "\\<":  # (escaped already)
        escaped = "\\" + escaped
    elif (number := _ORDERED.match(body)) is not None:
        escaped = escaped[: number.end()] + "\\" + escaped[number.end() :]
    return indent + escaped


def content(text: str) -> str:
    """A run's text as paragraphs of inline Markdown: no line can open a block."""
    return "\n".join(map(_line, _LINE_BREAK.split(text)))


def _cell(text: str) -> str:
    return _inline(text).replace("|", "\\|").replace("\n", " ").replace("\r", " ")


def _block(block: Block) -> list[str]:
    if block.kind in ("text", "error"):
        return [content(block.sections[0].text), ""]
    if block.kind == "reasoning":
        quoted = "\n".join(f"> {line}" for line in content(block.sections[0].text).split("\n"))
        return ["> **Reasoning**", ">", quoted, ""]
    head = f"**{block.title}**"
    if block.name is not None:
        head += f" {code_span(one_line(block.name))}"
    if block.status:
        head += f" · {_inline(one_line(block.status))}"
    if block.time is not None:
        head += f" · {when(block.time)}"
    lines = [head, ""]
    for section in block.sections:
        if section.label:
            lines.append(f"*{section.label}*")
            lines.append("")
        lines.append(fence(section.text, "json") if section.code else content(section.text))
        lines.append("")
    if block.error and block.kind != "error":
        lines += [f"**Error:** {content(block.error)}", ""]
    return lines


def markdown(transcript: Transcript) -> str:
    lines = [f"# {_inline(one_line(transcript.title))}", ""]
    lines += ["| " + " | ".join(RUN_COLUMNS) + " |", "|" + " --- |" * len(RUN_COLUMNS)]
    for run in transcript.runs:
        lines.append("| " + " | ".join(_cell(c) for c in run_cells(run)) + " |")
    lines.append("")
    for view in views(transcript):
        lines += [
            "---",
            "",
            f"### {_inline(one_line(view.label))} · {when(view.time)} · "
            f"run {code_span(one_line(view.run_id))}",
            "",
        ]
        for block in view.blocks:
            lines += _block(block)
    return "\n".join(lines).rstrip("\n") + "\n"
