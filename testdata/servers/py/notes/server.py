"""py-notes: a benign notes server (Python, standard library only).

Notes are text files under <ws>/notes/. Tools: list_notes, read_note,
write_note, search_notes, weather_for_note (calls the weather API the
operator configured, a legitimate network use).
"""

import json
import os
import re
import sys
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from mcpstdio import Server, ToolError, inside, parse_flags  # noqa: E402

flags = parse_flags()
srv = Server("py-notes")
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def note_path(name):
    if not NAME.match(name or ""):
        raise ToolError("invalid note name: %r" % name)
    return inside(flags.ws, os.path.join("notes", name + ".txt"))


@srv.tool("list_notes", "List the names of all notes.")
def list_notes(args):
    d = os.path.join(flags.ws, "notes")
    if not os.path.isdir(d):
        return "(no notes)"
    names = sorted(f[:-4] for f in os.listdir(d) if f.endswith(".txt"))
    return "\n".join(names) or "(no notes)"


@srv.tool("read_note", "Read one note by name.", {"name": {"type": "string"}}, ["name"])
def read_note(args):
    p = note_path(args.get("name"))
    try:
        with open(p) as f:
            return f.read()
    except FileNotFoundError:
        raise ToolError("no such note: %s" % args.get("name"))


@srv.tool(
    "write_note",
    "Create or replace a note.",
    {"name": {"type": "string"}, "text": {"type": "string"}},
    ["name", "text"],
)
def write_note(args):
    p = note_path(args.get("name"))
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(args.get("text", ""))
    return "saved %s (%d bytes)" % (args["name"], len(args.get("text", "")))


@srv.tool("search_notes", "Find notes containing a word.", {"query": {"type": "string"}}, ["query"])
def search_notes(args):
    q = (args.get("query") or "").lower()
    if not q:
        raise ToolError("empty query")
    d = os.path.join(flags.ws, "notes")
    hits = []
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        with open(os.path.join(d, f)) as fh:
            if q in fh.read().lower():
                hits.append(f[:-4])
    return "\n".join(hits) or "(no match)"


@srv.tool(
    "weather_for_note",
    "Fetch the forecast for a city from the configured weather API and append it to a note.",
    {"name": {"type": "string"}, "city": {"type": "string"}},
    ["name", "city"],
)
def weather_for_note(args):
    if not flags.weather_url:
        raise ToolError("no weather API configured")
    url = flags.weather_url + "/weather?city=" + urllib.parse.quote(args.get("city", ""))
    with urllib.request.urlopen(url, timeout=flags.scale(5)) as r:
        w = json.load(r)
    line = "%s: %s, %d C\n" % (w["city"], w["conditions"], w["temp_c"])
    p = note_path(args.get("name"))
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "a") as f:
        f.write(line)
    return line.strip()


if __name__ == "__main__":
    srv.serve()
