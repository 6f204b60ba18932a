"""One self-contained HTML file: inline CSS, no scripts, no external resources.

Every piece of content is escaped (`html.escape`, quotes included) and shown
as text (`white-space: pre-wrap`), never interpreted as markup. Reasoning is
collapsed in native `<details>`. Each role has its own border colour, which
also lets the screenshot test find the turns.
"""

from __future__ import annotations

from html import escape

from agent_replay.transcript.blocks import Block
from agent_replay.transcript.document import Transcript
from agent_replay.transcript.views import RUN_COLUMNS, TurnView, run_cells, views, when

CSS = """
*{box-sizing:border-box}
body{margin:0;background:#ffffff;color:#111827;font:15px/1.5 system-ui,sans-serif}
main{max-width:960px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 12px}
table.runs{border-collapse:collapse;margin:0 0 24px;font-size:13px}
table.runs th,table.runs td{border:1px solid #d1d5db;padding:4px 8px;text-align:left}
article.turn{margin:0 0 20px;padding:10px 14px;border-left:8px solid #9ca3af;background:#fafafa}
article.user{border-left-color:#2563eb}
article.assistant{border-left-color:#16a34a}
article.system{border-left-color:#6b7280}
article.run-error{border-left-color:#dc2626}
article header{font-size:13px;color:#4b5563;margin:0 0 6px}
article header .role{font-weight:700;color:#111827;margin-right:8px}
article header .run{margin-left:8px;font-family:ui-monospace,monospace}
.text{white-space:pre-wrap;margin:4px 0}
details.reasoning{margin:6px 0}
details.reasoning>summary{background:#fde68a;padding:2px 8px;cursor:pointer;width:max-content}
.reasoning-body{background:#a855f7;color:#ffffff;white-space:pre-wrap;padding:6px 8px}
.block{margin:8px 0;padding:8px 10px;background:#f1f5f9;border:1px solid #e2e8f0}
.block .head{font-size:13px}
.block .head .title{font-weight:600}
.block .status{margin-left:6px;color:#475569}
.block time{margin-left:6px;color:#64748b}
.label{font-size:12px;color:#475569;margin-top:6px}
pre{margin:4px 0;padding:8px;background:#0f172a;color:#e2e8f0;overflow-x:auto;white-space:pre-wrap}
.error{color:#991b1b;background:#fee2e2;padding:4px 8px;margin-top:6px;white-space:pre-wrap}
"""


def _time(moment_text: str, iso: str | None) -> str:
    if iso is None:
        return f"<time>{escape(moment_text)}</time>"
    return f'<time datetime="{escape(iso)}">{escape(moment_text)}</time>'


def _block(block: Block) -> str:
    if block.kind == "text":
        return f'<div class="text">{escape(block.sections[0].text)}</div>'
    if block.kind == "reasoning":
        body = escape(block.sections[0].text)
        return (
            '<details class="reasoning"><summary>Reasoning</summary>'
            f'<div class="reasoning-body">{body}</div></details>'
        )
    if block.kind == "error":
        return f'<div class="error">{escape(block.sections[0].text)}</div>'
    head = f'<span class="title">{escape(block.title)}</span>'
    if block.name is not None:
        head += f" <code>{escape(block.name)}</code>"
    if block.status:
        head += f' <span class="status">{escape(block.status)}</span>'
    if block.time is not None:
        head += " " + _time(when(block.time), block.time.isoformat())
    out = [f'<div class="block {escape(block.kind)}"><div class="head">{head}</div>']
    for section in block.sections:
        if section.label:
            out.append(f'<div class="label">{escape(section.label)}</div>')
        tag = "pre" if section.code else 'div class="text"'
        out.append(f"<{tag}>{escape(section.text)}</{tag.split()[0]}>")
    if block.error:
        out.append(f'<div class="error">{escape(block.error)}</div>')
    out.append("</div>")
    return "".join(out)


def _turn(view: TurnView) -> str:
    iso = None if view.time is None else view.time.isoformat()
    header = (
        f'<header><span class="role">{escape(view.label)}</span>'
        f"{_time(when(view.time), iso)}"
        f'<span class="run">run {escape(view.run_id)}</span></header>'
    )
    body = "\n".join(_block(block) for block in view.blocks)
    role = view.role if view.role in ("user", "assistant", "system", "run-error") else "other"
    return f'<article class="turn {role}">{header}\n{body}\n</article>'


def _runs_table(transcript: Transcript) -> str:
    rows = ["<tr>" + "".join(f"<th>{c}</th>" for c in RUN_COLUMNS) + "</tr>"]
    for run in transcript.runs:
        rows.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in run_cells(run)) + "</tr>")
    return '<table class="runs">' + "".join(rows) + "</table>"


def html(transcript: Transcript) -> str:
    title = escape(transcript.title)
    turns = "\n".join(_turn(view) for view in views(transcript))
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{title}</title><style>{CSS}</style></head>\n"
        f"<body><main><h1>{title}</h1>\n{_runs_table(transcript)}\n{turns}\n</main></body></html>\n"
    )
