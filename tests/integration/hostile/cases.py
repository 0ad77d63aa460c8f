"""The hostile-input corpus: what a careless or hostile user feeds ``faithgate``.

Each ``Case`` is a small project (files written into an empty directory), a command line and
the exit codes the documentation promises for it: 0 success / pass, 1 gate failed or an example
could not be scored, 2 bad usage or input. ``changes`` lists the pre-existing files the command
is *meant* to change (a baseline it updates, a cache it moves aside); every other file that
existed before must be byte for byte the same afterwards. ``real`` cases run the installed
``python -m faithgate`` with real (model-free) metrics; the others run the same entry point
with the exact test metric ``gate_fake`` registered (``fgcli.py``), so the suite stays fast.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

FAKE = "gate_fake"
CONFIG = f'metrics = ["{FAKE}"]\noutputs = "outputs.jsonl"\ncache_dir = ".fg"\n'
CONFIG_T = CONFIG + f"[thresholds]\n{FAKE} = 0.5\n"


def jl(*rows: object, ensure_ascii: bool = True) -> str:
    return "".join(json.dumps(r, ensure_ascii=ensure_ascii) + "\n" for r in rows)


def row(i: object = "a", summary: str = "0.9 fine words.", **extra: object) -> dict:
    return {"id": i, "source": "The source text.", "summary": summary, **extra}


GOOD = jl(row("a"), row("b", "0.8 also fine."))
DEEP = 200_000
# More digits than Python reads into an int (sys.get_int_max_str_digits(), 4300): a bare
# ValueError from json.loads and tomllib.loads, once an internal error (exit 1).
HUGE = "9" * 5000
SLOW_OK = """
def summarize(source):
    return "0.9 " + source
"""


@dataclass
class Case:
    name: str
    args: list[str]
    files: dict[str, str | bytes] = field(default_factory=dict)
    codes: tuple[int, ...] = (2,)
    changes: tuple[str, ...] = ()
    real: bool = False
    # Extra checks: text that must appear on stderr / stdout.
    stderr_has: str | None = None
    no_commands: bool = False  # stdout must hold no GitHub workflow command
    symlinks: dict[str, str] = field(default_factory=dict)


def _project(outputs: str | bytes, config: str = CONFIG_T, **more: str | bytes) -> dict:
    return {"faithgate.toml": config, "outputs.jsonl": outputs, **more}


CASES: list[Case] = [
    # ---- the outputs file: structure --------------------------------------------------
    Case("empty outputs file", ["check"], _project(""), stderr_has="no records"),
    Case("blank lines only", ["check"], _project("\n \n\t\n"), stderr_has="no records"),
    Case("binary garbage", ["check"], _project(b"\xff\xfe\x00\x01garbage"), stderr_has="UTF-8"),
    Case("UTF-16 file", ["check"], _project(GOOD.encode("utf-16")), stderr_has="UTF-8"),
    Case("array per line", ["check"], _project("[1, 2]\n"), stderr_has="expected a JSON object"),
    Case("number per line", ["check"], _project("42\n"), stderr_has="expected a JSON object"),
    Case("truncated last line", ["check"], _project(GOOD + '{"id": "c", "sou')),
    Case("two objects on a line", ["check"], _project(GOOD.rstrip("\n") + ' {"id": 1}\n')),
    Case("deeply nested JSON", ["check"], _project("[" * DEEP + "]" * DEEP + "\n")),
    Case("deeply nested object", ["check"], _project('{"a":' * DEEP + "1" + "}" * DEEP)),
    Case(
        "integer of 5000 digits",
        ["check"],
        _project(f'{{"id": {HUGE}, "source": "s", "summary": "0.9 x."}}\n'),
        stderr_has="outputs.jsonl:1: invalid JSON (a number with more than 4300 digits)",
    ),
    Case(
        "field given twice",  # the last one won: the first summary was never scored
        ["check"],
        _project('{"id": "a", "source": "s", "summary": "0.1 x.", "summary": "0.9 y."}\n'),
        stderr_has="outputs.jsonl:1: field 'summary' given twice",
    ),
    Case("missing summary", ["check"], _project(jl({"id": "a", "source": "s"}))),
    Case("null summary", ["check"], _project(jl(row(summary=None)))),  # type: ignore[arg-type]
    Case("numeric summary", ["check"], _project(jl(row(summary=3)))),  # type: ignore[arg-type]
    # A summarizer's blank output is a failed example (exit 1), not bad input.
    Case(
        "blank summary",
        ["check"],
        _project(jl(row(summary=" \t\n "))),
        codes=(1,),
    ),
    Case("duplicate ids", ["check"], _project(jl(row("a"), row("a"))), stderr_has="duplicate"),
    Case("object as id", ["check"], _project(jl(row({"x": 1})))),
    Case("boolean id", ["check"], _project(jl(row(True)))),
    Case("empty id", ["check"], _project(jl(row("")))),
    Case("bad label", ["check"], _project(jl(row(label="maybe")))),
    Case("meta not an object", ["check"], _project(jl(row(meta=[1, 2])))),
    Case("meta false", ["check"], _project(jl(row(meta=False))), stderr_has="must be an object"),
    Case(
        "meta key also at the top level",  # the top-level pair_id replaced meta's, silently
        ["check"],
        _project(jl(row(meta={"pair_id": "x"}, pair_id="y"))),
        stderr_has="outputs.jsonl:1: field 'pair_id' is given both",
    ),
    Case("id of a zero-width space", ["check"], _project(jl(row("\u200b"))), stderr_has="empty"),
    Case(
        "CSV with an unclosed quote",  # lenient csv merged the later rows into one summary
        ["check"],
        {
            "faithgate.toml": CONFIG_T.replace("outputs.jsonl", "outputs.csv"),
            "outputs.csv": 'id,source,summary\na,s,"0.9 x.\nb,s,0.1 y.\n',
        },
        stderr_has="outputs.csv:2: invalid CSV (unexpected end of data)",
    ),
    # ---- the outputs file: text ---------------------------------------------------------
    Case(
        "lone surrogate in summary",
        ["check"],
        _project('{"id": "a", "source": "s", "summary": "0.9 x \\ud800."}\n'),
        stderr_has="lone surrogate",
    ),
    Case(
        "lone surrogate in meta",
        ["check"],
        _project('{"id": "a", "source": "s", "summary": "0.9 x.", "m": "\\udc80"}\n'),
        stderr_has="lone surrogate",
    ),
    Case(
        "NUL in source", ["check"], _project(jl(row() | {"source": "a\u0000b"})), stderr_has="NUL"
    ),
    Case(
        "raw U+2028 / U+0085 inside strings",
        ["check"],
        _project(jl(row(summary="0.9 one\u2028two\x85three."), ensure_ascii=False)),
        codes=(0,),
    ),
    Case("CRLF line endings", ["check"], _project(GOOD.replace("\n", "\r\n")), codes=(0,)),
    Case("UTF-8 BOM", ["check"], _project(b"\xef\xbb\xbf" + GOOD.encode()), codes=(0,)),
    Case(
        "workflow commands in ids",
        ["check"],
        _project(
            jl(
                row("x\n::error::forged", "0.1 low."),
                row("::warning::at line start", "0.1 low."),
                row("y\r::set-output name=a::b", "0.1 low."),
                row("z\u2028::error::sep", "0.1 low."),
            )
        ),
        codes=(1,),
        no_commands=True,
    ),
    Case(
        "ANSI escapes in ids and summaries",
        ["check"],
        _project(jl(row("\x1b[2J\x1b[31mred", "0.1 \x1b]0;title\x07 low."))),
        codes=(1,),
        no_commands=True,
    ),
    Case(
        "U+FFFE and U+FFFF with --junit",
        ["check", "--junit", "r.xml"],
        _project(jl(row("\ufffe", "0.9 odd \uffff text."), ensure_ascii=False)),
        codes=(0,),
    ),
    Case(
        "one summary of a million characters",
        ["check", "--no-cache"],
        _project(jl(row(summary="0.9 " + "word " * 200_000))),
        codes=(0,),
    ),
    Case(
        "five thousand rows",
        ["check", "--no-cache", "-q"],
        _project(jl(*(row(i) for i in range(5000)))),
        codes=(0,),
    ),
    # ---- CSV ------------------------------------------------------------------------------
    Case(
        "CSV with a NUL byte",
        ["check", "--outputs", "o.csv"],
        _project(GOOD, **{"o.csv": "id,source,summary\na,s\x00x,0.9 y.\n"}),
    ),
    Case(
        "CSV with only a header",
        ["check", "--outputs", "o.csv"],
        _project(GOOD, **{"o.csv": "id,source,summary\n"}),
    ),
    Case(
        "CSV with extra cells",
        ["check", "--outputs", "o.csv"],
        _project(GOOD, **{"o.csv": "id,source,summary\na,s,0.9 y.,extra\n"}),
    ),
    # ---- paths ----------------------------------------------------------------------------
    Case("outputs is a directory", ["check", "--outputs", "."], _project(GOOD)),
    Case("outputs does not exist", ["check", "--outputs", "nope.jsonl"], _project(GOOD)),
    Case("outputs is /dev/null", ["check", "--outputs", "/dev/null"], _project(GOOD)),
    Case(
        "json report over the outputs",
        ["check", "--json", "outputs.jsonl"],
        _project(GOOD),
        stderr_has="refusing",
    ),
    Case(
        "markdown report over the config via ..",
        ["check", "--markdown", "x/../faithgate.toml"],
        _project(GOOD, **{"x/keep": ""}),
        stderr_has="refusing",
    ),
    Case(
        "html report through a symlink to the outputs",
        ["check", "--html", "link.html"],
        _project(GOOD),
        symlinks={"link.html": "outputs.jsonl"},
        stderr_has="refusing",
    ),
    Case(
        "baseline update onto the outputs",
        ["check", "--baseline", "outputs.jsonl", "--update-baseline"],
        _project(GOOD),
        stderr_has="refusing",
    ),
    Case("report under a file", ["check", "--junit", "afile/r.xml"], _project(GOOD, afile="x")),
    # ---- configuration ----------------------------------------------------------------------
    Case(
        "invalid TOML", ["check"], _project(GOOD, config="metrics = [\n"), stderr_has="invalid TOML"
    ),
    Case(
        "deeply nested TOML",
        ["check"],
        _project(GOOD, config="a = " + "[" * DEEP + "]" * DEEP + "\n"),
    ),
    Case("config not UTF-8", ["check"], _project(GOOD, config=b"metrics = ['\xff']\n")),
    Case(
        "threshold of 5000 digits",
        ["check"],
        _project(GOOD, config=CONFIG + f"[thresholds]\n{FAKE} = {HUGE}\n"),
        stderr_has="invalid TOML (a number with more than 4300 digits)",
    ),
    Case(
        "config with a UTF-8 BOM",  # as Windows editors write it; JSONL and CSV took one
        ["check"],
        _project(GOOD, config=b"\xef\xbb\xbf" + CONFIG_T.encode()),
        codes=(0,),
    ),
    Case("unknown config key", ["check"], _project(GOOD, config=CONFIG + "colour = 1\n")),
    Case(
        "threshold as a string",
        ["check"],
        _project(GOOD, config=CONFIG + f'[thresholds]\n{FAKE} = "high"\n'),
    ),
    Case(
        "metrics is a number",
        ["check"],
        _project(GOOD, config='metrics = 3\noutputs = "outputs.jsonl"\n'),
    ),
    Case("unknown metric", ["check", "--metric", "nosuchmetric"], _project(GOOD)),
    Case(
        "-inf threshold in config",
        ["check"],
        _project(GOOD, config=CONFIG + f"[thresholds]\n{FAKE} = -inf\n"),
        stderr_has="finite",
    ),
    # ---- flags ----------------------------------------------------------------------------
    Case("threshold not a number", ["check", "--threshold", "abc"], _project(GOOD)),
    Case("threshold without a name", ["check", "--threshold", "=0.5"], _project(GOOD)),
    Case(
        "-inf threshold flag",
        ["check", "--threshold", f"{FAKE}=-inf"],
        _project(GOOD),
        stderr_has="finite",
    ),
    Case(
        "huge threshold overflows to inf",
        ["check", "--threshold", "1e999"],
        _project(GOOD),
        stderr_has="finite",
    ),
    Case("pass rate above 1", ["check", "--min-pass-rate", "2"], _project(GOOD)),
    Case("unknown flag", ["check", "--frobnicate"], _project(GOOD)),
    # ---- summarizer -------------------------------------------------------------------------
    Case(
        "summarizer module missing",
        ["check", "--summarizer", "nope:fn", "--data", "d.jsonl"],
        _project(GOOD, **{"d.jsonl": jl({"source": "s"})}),
    ),
    Case(
        "summarizer returns NUL bytes",
        ["check", "--summarizer", "summ:f", "--data", "d.jsonl"],
        _project(
            GOOD,
            **{"d.jsonl": jl({"source": "s"}), "summ.py": "def f(s):\n    return '0.9 \\x00'\n"},
        ),
        stderr_has="NUL",
    ),
    Case(
        "summarizer raises",
        ["check", "--summarizer", "summ:f", "--data", "d.jsonl"],
        _project(
            GOOD,
            **{
                "d.jsonl": jl({"source": "s"}),
                "summ.py": "def f(s):\n    raise RuntimeError('boom\\n::error::x')\n",
            },
        ),
    ),
    # ---- baseline ----------------------------------------------------------------------------
    Case(
        "baseline not JSON",
        ["check", "--baseline", "b.json"],
        _project(GOOD, **{"b.json": "not json"}),
    ),
    Case(
        "baseline deeply nested",
        ["check", "--baseline", "b.json"],
        _project(GOOD, **{"b.json": "[" * DEEP + "]" * DEEP}),
    ),
    Case(
        "baseline is a list", ["check", "--baseline", "b.json"], _project(GOOD, **{"b.json": "[]"})
    ),
    Case(
        "baseline with a 5000-digit number",
        ["check", "--baseline", "b.json"],
        _project(GOOD, **{"b.json": f'{{"metrics": ["{FAKE}"], "examples": [], "n": {HUGE}}}'}),
        stderr_has="b.json: not a faithgate result JSON (a number with more than 4300 digits)",
    ),
    Case(
        "baseline with wrong types",
        ["check", "--baseline", "b.json"],
        _project(
            GOOD,
            **{
                "b.json": json.dumps(
                    {
                        "metrics": [FAKE],
                        "examples": [
                            {
                                "id": "a",
                                "passed": True,
                                "scores": {FAKE: {"metric": FAKE, "value": "abc", "passed": True}},
                            }
                        ],
                    }
                )
            },
        ),
    ),
    Case(
        "baseline created on purpose",
        ["check", "--baseline", "b.json", "--update-baseline"],
        _project(GOOD),
        codes=(0,),
    ),
    Case(
        "baseline update refused by a failing gate",
        ["check", "--baseline", "b.json", "--update-baseline"],
        _project(
            jl(row(summary="0.1 low.")),
            **{"b.json": json.dumps({"metrics": [FAKE], "examples": []})},
        ),
        codes=(1,),
    ),
    # ---- score cache ------------------------------------------------------------------------
    Case(
        "score cache is not a database",
        ["check"],
        _project(GOOD, **{".fg/scores.sqlite": b"junk " * 400}),
        codes=(0,),
        changes=(".fg/scores.sqlite",),  # moved aside (kept as scores.sqlite.corrupt-*)
        stderr_has="not a SQLite database",
    ),
    Case(
        "cache dir is a file",
        ["check"],
        _project(GOOD, config=CONFIG.replace('".fg"', '"afile"'), afile="x"),
    ),
    # ---- other commands ----------------------------------------------------------------------
    Case(
        "calibrate writing over its data",
        ["calibrate", "--data", "l.jsonl", "--metric", FAKE, "--config", "l.jsonl"],
        {"l.jsonl": jl(row(label=1))},
        stderr_has="refusing",
    ),
    Case(
        "calibrate without labels",
        ["calibrate", "--data", "l.jsonl", "--metric", FAKE, "--dry-run"],
        {"l.jsonl": GOOD},
    ),
    Case(
        "perturb onto its input",
        ["perturb", "--input", "p.jsonl", "--output", "./p.jsonl"],
        {"p.jsonl": GOOD},
        stderr_has="refusing",
    ),
    # ---- real metrics, the installed entry point ---------------------------------------------
    Case(
        "score: source of NUL bytes",
        ["score", "--source", "nul.txt", "--summary", "a b", "--metric", "overlap"],
        {"nul.txt": b"\x00" * 100},
        real=True,
        stderr_has="NUL",
    ),
    Case(
        "score: source not UTF-8",
        ["score", "--source", "l1.txt", "--summary", "a b", "--metric", "overlap"],
        {"l1.txt": b"caf\xe9 au lait"},
        real=True,
        stderr_has="UTF-8",
    ),
    Case(
        "score: summary file missing",
        ["score", "--source", "s.txt", "--summary", "@nope.txt", "--metric", "overlap"],
        {"s.txt": "The cat sat."},
        real=True,
    ),
    Case(
        "score: non-UTF-8 bytes in --summary",
        [
            "score",
            "--source",
            "s.txt",
            "--summary",
            b"caf\xe9".decode("utf-8", "surrogateescape"),
            "--metric",
            "overlap",
        ],
        {"s.txt": "The cat sat."},
        real=True,
        stderr_has="the command-line argument caf\\xe9 is not valid UTF-8",
    ),
    Case(
        "score: --set value of 5000 digits",
        ["score", "--source", "s.txt", "--summary", "a b", "--metric", "overlap"]
        + ["--set", f"overlap.use_stemmer={HUGE}"],
        {"s.txt": "The cat sat."},
        real=True,
        stderr_has="--set overlap.use_stemmer: a number with more than 4300 digits",
    ),
    Case(
        "score: --set value nested 100,000 deep",
        ["score", "--source", "s.txt", "--summary", "a b", "--metric", "overlap"]
        + ["--set", "overlap.use_stemmer=" + "[" * 100_000],
        {"s.txt": "The cat sat."},
        real=True,
        stderr_has="--set overlap.use_stemmer: nested too deeply",
    ),
    Case(
        "score: Thai is refused plainly",
        ["score", "--source", "th.txt", "--summary", "ภาษาไทยง่าย", "--metric", "overlap"],
        {"th.txt": "ภาษาไทยง่ายนิดเดียว"},
        codes=(1,),
        real=True,
        stderr_has="Thai text is not supported",
    ),
    Case(
        "score: Chinese gets a score",
        ["score", "--source", "zh.txt", "--summary", "北京是中国的首都。", "--metric", "overlap"],
        {"zh.txt": "北京是中国的首都。今天天气很好。"},
        codes=(0,),
        real=True,
    ),
    Case(
        "check: -inf threshold on overlap",
        ["check", "--outputs", "o.jsonl", "--metric", "overlap", "--threshold", "overlap=-inf"],
        {"o.jsonl": jl(row())},
        real=True,
        stderr_has="finite",
    ),
    Case(
        "check: no criterion at all is refused, not passed",
        ["check", "--outputs", "o.jsonl", "--metric", "overlap", "--no-cache"],
        {"o.jsonl": jl(row())},
        codes=(2,),
        real=True,
        stderr_has="the gate has no criterion",
    ),
    Case(
        "check: ids forging commands, overlap",
        [
            "check",
            "--outputs",
            "o.jsonl",
            "--metric",
            "overlap",
            "--threshold",
            "0.1",
            "--no-cache",
        ],
        {"o.jsonl": jl(row("a\n::error::forged", "The source text."))},
        codes=(0,),
        real=True,
        no_commands=True,
    ),
]
