"""The bad-input corpus: every entry gets a 4xx naming where, and /health stays quick."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from .conftest import zip_bytes

DEEP = 100_000
BOMB = "\n".join(
    ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    + [f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]"
       for p, c in zip("abcde", "bcdef", strict=True)]
    + ["training: {resources: {x: *f}}"])  # 10^6 values; `resources` takes any mapping
CODE = ("from rltune.sdk import AbstractRewardProcessor\n"
        "class R(AbstractRewardProcessor):\n    async def process(self, data):\n        return 1\n")


def _job(yaml_text: str) -> tuple[str, str, dict]:
    return ("POST", "/v1/jobs", {"json": {"config_yaml": yaml_text}})


def _file(content: bytes) -> tuple[str, str, dict]:
    return ("POST", "/v1/files", {"params": {"filename": "t.jsonl"}, "content": content})


def _zip(entries: dict[str, str]) -> tuple[str, str, dict]:
    return ("POST", "/v1/functions", {"params": {"classpath": "r.py:R", "type": "reward"},
                                      "content": zip_bytes(entries)})


ROW = b'{"messages": [{"role": "user", "content": "hi"}]}'
CORPUS = {  # name: (request, expected status, expected start of error.where)
    "yaml-alias-bomb": (_job(BOMB), 422, "config_yaml:"),
    "yaml-deep-flow": (_job("model: [" + "[" * DEEP), 422, "config_yaml:1"),
    "yaml-deep-block": (_job("".join(" " * i + "a:\n" for i in range(200))), 422,
                        "config_yaml"),
    "yaml-duplicate-key": (_job("model: nano\nmodel: tiny\n"), 422, "config_yaml:2"),
    "yaml-too-large": (_job("# " + "x" * 1_000_000), 422, "body.config_yaml"),
    "json-body-too-large": (_job("# " + "x" * 1_100_000), 413, "request body"),
    "yaml-control-character": (_job("\x1c"), 422, "config_yaml"),  # found by schemathesis
    "yaml-not-a-mapping": (_job("- 1\n- 2\n"), 422, ""),
    "json-config-deep": (("POST", "/v1/jobs", {"json": {"config": (d := {})}}), 422, "config"),
    "json-body-100k-deep": (("POST", "/v1/jobs", {
        "content": b'{"config": ' + b"[" * DEEP + b"]" * DEEP + b"}",
        "headers": {"Content-Type": "application/json"}}), 400, "/v1/jobs"),
    "json-body-not-utf8": (("POST", "/v1/jobs", {
        "content": b'{"config_yaml": "\xff\xfe model"}',
        "headers": {"Content-Type": "application/json"}}), 400, "/v1/jobs"),
    "jsonl-row-100k-deep": (_file(b'{"a": ' + b"[" * DEEP + b"]" * DEEP + b"}\n"), 422,
                            "t.jsonl:1"),
    "jsonl-row-deep": (_file(b'{"messages": ' + b"[" * 100 + b"]" * 100 + b"}\n"), 422,
                       "t.jsonl:1"),
    "jsonl-oversized-line": (_file(ROW + b"\n" + b'{"x": "' + b"y" * 2_100_000 + b'"}\n'), 422,
                             "t.jsonl:2"),
    "jsonl-not-utf8": (_file(ROW + b"\n\xff\xfe\xfd\n"), 422, "t.jsonl"),
    "zip-file-and-folder": (_zip({"r.py": CODE, "a": "x", "a/b.py": "y"}), 400, "a"),
    "zip-folder-then-file": (_zip({"r.py": CODE, "pkg/m.py": "y", "pkg": "x"}), 400, "pkg"),
    "zip-name-twice": (_zip({"r.py": CODE, "dup.py": "1", "./dup.py": "2"}), 400, "./dup.py"),
    "zip-not-a-zip": (("POST", "/v1/functions", {"params": {"classpath": "r.py:R"},
                                                  "content": b"PK\x03\x04garbage"}), 400, ""),
}
#: Words the message must hold (the refusal names the real problem, not a later symptom).
WORDS = {"yaml-alias-bomb": "expands to more than", "yaml-deep-flow": "nested",
         "yaml-deep-block": "nested", "yaml-duplicate-key": "given twice",
         "json-config-deep": "nested", "jsonl-row-100k-deep": "nested",
         "jsonl-row-deep": "nested", "jsonl-oversized-line": "the limit",
         "zip-file-and-folder": "folder", "zip-name-twice": "twice"}
_node = d
for _ in range(100):  # a config object nested 100 levels (JSON parses it; the config refuses)
    _node["x"] = {}
    _node = _node["x"]


@pytest.fixture(scope="module")
def health_watch(server):
    """Poll /health every 0.2 s while the corpus runs; collects each answer's latency."""
    latencies: list[float] = []
    stop = threading.Event()

    def poll() -> None:
        with httpx.Client(base_url=server.url, timeout=10) as c:
            while not stop.is_set():
                t0 = time.perf_counter()
                c.get("/health").raise_for_status()
                latencies.append(time.perf_counter() - t0)
                stop.wait(0.2)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    yield latencies
    stop.set()
    thread.join(timeout=15)


@pytest.mark.parametrize("name", list(CORPUS))
def test_bad_input_is_a_4xx_naming_where(name, server, health_watch):
    (method, path, kwargs), status, where = CORPUS[name]
    with server.client() as c:
        r = c.request(method, path, **kwargs)
    assert r.status_code == status, (name, r.status_code, r.text[:500])
    err = r.json()["error"]
    assert err["message"] and err["where"] is not None, err
    assert err["where"].startswith(where), (name, err)
    assert WORDS.get(name, "") in err["message"], (name, err)


def test_health_answered_within_a_second_during_the_corpus(health_watch):
    assert len(health_watch) >= 3, health_watch
    assert max(health_watch) < 1.0, sorted(health_watch)[-5:]
