"""Functions and Datasets pages in headless Chromium against a real job server.

Datasets: an upload with bad lines is refused with every bad line named (file:line), a good
one is listed and previewed. Functions: registered entities are listed, and a loaded reward
instance is tested from the page with a JSON input.
"""

from __future__ import annotations

import json

from console_harness import login, register_calc_functions, shot
from playwright.sync_api import expect


def test_dataset_upload_shows_bad_lines_then_uploads_and_previews(page, server):
    login(page, server)
    page.click("a.nav:has-text('Datasets')")
    bad = b'{"messages": [{"role": "user", "content": "1+1"}]}\n{oops\n[1, 2]\n'
    page.set_input_files(
        "#upload-file",
        files=[{"name": "bad.jsonl", "mimeType": "application/jsonl", "buffer": bad}],
    )
    page.click("#upload-btn")
    problems = page.locator("#upload-result .problems li")
    expect(problems).to_have_count(2)
    expect(problems.nth(0)).to_contain_text("bad.jsonl:2:")
    expect(problems.nth(1)).to_contain_text("bad.jsonl:3: a row must be a JSON object")
    assert server.call("GET", "/v1/files")["total"] == 0  # nothing reached the server
    shot(page, "datasets-errors")

    rows = [
        {
            "messages": [{"role": "user", "content": f"What is {i} + {i}?"}],
            "rollout_extra": {"solution": str(2 * i)},
        }
        for i in range(30)
    ]
    good = "".join(json.dumps(r) + "\n" for r in rows).encode()
    page.set_input_files(
        "#upload-file",
        files=[{"name": "good.jsonl", "mimeType": "application/jsonl", "buffer": good}],
    )
    page.click("#upload-btn")
    expect(page.locator("#upload-result .ok")).to_contain_text("(30 rows)")
    listed = page.locator("#file-list tr[data-file]")
    expect(listed).to_have_count(1)
    listed.locator("button:has-text('Preview')").click()
    expect(page.locator("#file-preview ol.preview li")).to_have_count(20)
    expect(page.locator("#file-preview")).to_contain_text("What is 0 + 0?")
    shot(page, "datasets")


def test_functions_listed_and_an_instance_tested_from_the_page(page, server, tmp_path):
    ids = register_calc_functions(server, tmp_path)
    inst = server.call("POST", f"/v1/functions/{ids['exact']}/load", json={})
    try:
        login(page, server)
        page.click("a.nav:has-text('Functions')")
        expect(page.locator("#function-list")).to_contain_text(ids["exact"])
        expect(page.locator("#function-list")).to_contain_text(ids["calc-rollout"])
        row = page.locator(f"#instance-list tr:has-text('{inst['instance_id']}')")
        row.locator("button:has-text('Test')").click()
        page.fill(
            "#test-input",
            json.dumps(
                {
                    "agent_output": {
                        "messages": [{"role": "assistant", "content": "### ANSWER: 4 ###"}]
                    },
                    "ground_truth": "4",
                }
            ),
        )
        page.click("#run-test")
        result = page.locator("#test-result")
        expect(result.locator(".badge")).to_have_text("SUCCESS", timeout=60_000)
        expect(result.locator("pre")).to_contain_text('"reward_score": 1,')
        shot(page, "functions")
        page.fill("#test-input", "{not json")
        page.click("#run-test")
        expect(result).to_contain_text("not valid JSON")
    finally:
        server.call("DELETE", f"/v1/instances/{inst['instance_id']}")
