"""The Audit tab in headless Chromium against a real job server: the workspace's
state-changing calls, newest first, with their outcome, and no secret on the page."""

from __future__ import annotations

from console_harness import login, shot
from playwright.sync_api import expect


def test_audit_tab_lists_state_changing_calls(page, server):
    up = server.call("POST", "/v1/files", params={"filename": "audit.jsonl"},
                     content=b'{"messages": [{"role": "user", "content": "hi"}]}\n')
    key = server.call("POST", "/v1/keys", json={"name": "audited"})
    res = server.http.delete("/v1/jobs/ft-missing")
    assert res.status_code == 404
    login(page, server)
    page.click("a.nav:has-text('Audit')")
    rows = page.locator("#audit-list tr[data-audit]")
    expect(rows.first).to_contain_text("DELETE /v1/jobs/{job_id}")
    expect(rows.first).to_contain_text("not_found")
    expect(rows.first).to_contain_text("ft-missing")
    expect(page.locator("#audit-list")).to_contain_text(key["key_id"])
    expect(page.locator("#audit-list")).to_contain_text(up["file_id"])
    expect(page.locator("#audit-pager")).to_contain_text("record(s), page 1 of 1")
    text = page.locator("#audit-list").inner_text()
    assert key["api_key"] not in text and server.key not in text
    shot(page, "audit")
