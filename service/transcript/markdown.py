"""Markdown transcripts, for terminals and tickets.

Model text is Markdown already and is kept as written; everything quoted
as data (arguments, results, outputs) goes in fences longer than any run of
backticks inside it, and table cells escape pipes, so no content can break
the layout around it.
"""

from __future__ import annotations

import re

from service.transcript.blocks import Block
from service.transcript.document import Transcript
from service.transcript.views import RUN_COLUMNS, run_cells, views, when

_BACKTICKS = re.compile(r"`+")


def _longest_backticks(text: str) -> int:
    return max((len(m) for m in _BACKTICKS.findall(text)), default=0)


def fence(text: str, info: str = "") -> str:
    marks = "`" * max(3, _longest_backticks(text) + 1)
    return f"{marks}{info}\n{text}\n{marks}"


def code_span(text: str) -> str:
    marks = "`" * (_longest_backticks(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{marks}{pad}{text}{pad}{marks}"


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _block(block: Block) -> list[str]:
    if block.kind in ("text", "error"):
        return [block.sections[0].text, ""]
    if block.kind == "reasoning":
        quoted = "\n".join(f"> {line}" for line in block.sections[0].text.split("\n"))
        return ["> **Reasoning**", ">", quoted, ""]
    head = f"**{block.title}**"
    if block.name is not None:
        head += f" {code_span(block.name)}"
    if block.status:
        head += f" · {block.status}"
    if block.time is not None:
        head += f" · {when(block.time)}"
    lines = [head, ""]
    for section in block.sections:
        if section.label:
            lines.append(f"*{section.label}*")
            lines.append("")
        lines.append(fence(section.text, "json") if section.code else section.text)
        lines.append("")
    if block.error and block.kind != "error":
        lines += [f"**Error:** {block.error}", ""]
    return lines


def markdown(transcript: Transcript) -> str:
    lines = [f"# {transcript.title}", ""]
    lines += ["| " + " | ".join(RUN_COLUMNS) + " |", "|" + " --- |" * len(RUN_COLUMNS)]
    for run in transcript.runs:
        lines.append("| " + " | ".join(_cell(c) for c in run_cells(run)) + " |")
    lines.append("")
    for view in views(transcript):
        lines += [
            "---",
            "",
            f"### {view.label} · {when(view.time)} · run {code_span(view.run_id)}",
            "",
        ]
        for block in view.blocks:
            lines += _block(block)
    return "\n".join(lines).rstrip("\n") + "\n"
