"""Human-readable transcripts of runs and threads: Markdown for terminals and
tickets, one self-contained HTML file for sharing, JSON for tools.

`document` builds a `Transcript` (turns with times) from an export archive,
so the same code serves a file with no database and a run read from one;
`blocks` says what each UIMessage part shows; `markdown`, `html` and
`jsonfmt` only lay blocks out.
"""

from agent_replay.transcript.document import Transcript, Turn, from_archive
from agent_replay.transcript.render import FORMATS, render

__all__ = ["FORMATS", "Transcript", "Turn", "from_archive", "render"]
