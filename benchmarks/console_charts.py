"""The console's charts (``charts.js``, on the vendored uPlot) against a bare uPlot in headless
Chromium: milliseconds to build, attach and draw one chart, the median of ``--repeats`` draws
each. ``metric``: a job's Metrics chart of one curve (``lineChart``: smoothing, hover, step
range, alert markers); ``overlay``: the Compare chart of ``series`` curves (``overlayChart``);
``bare``: ``new uPlot`` with the same data and no options of ours. A draw is timed from building
the element to its canvas being drawn: the console's charts draw once laid out (from a
ResizeObserver, at the next rendering step), so theirs includes that wait; a bare uPlot draws in
a microtask.

    .venv/bin/python benchmarks/console_charts.py --repeats 15
"""

from __future__ import annotations

import argparse
import functools
import http.server
import threading

from rltune.console import STATIC_DIR

JS = """async ([series, points, repeats]) => {
  const charts = await import('/charts.js');
  const uPlot = (await import('/vendor/uplot/uPlot.esm.js')).default;
  const data = Array.from({length: series}, (_, s) =>
    Array.from({length: points}, (_, i) => [i + 1, Math.sin(i / 7 + s) + s]));
  const host = document.body;
  const med = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const ch = new MessageChannel();
  const yieldTask = () => new Promise((ok) => {
      ch.port1.onmessage = () => ok(); ch.port2.postMessage(0); });
  // build, attach, yield until the plot exists (a canvas in the element), let uPlot's
  // microtask draw it, force layout
  const time = async (fn) => { const out = []; for (let r = 0; r < repeats; r++) {
      const t0 = performance.now(); const [el, close] = fn(); host.append(el);
      while (!el.querySelector('canvas')) await yieldTask();
      await new Promise((ok) => queueMicrotask(ok)); el.getBoundingClientRect();
      out.push(performance.now() - t0); close(); el.remove(); } return med(out); };
  const wide = (el) => { el.style.width = '460px'; return el; };
  const metricMs = await time(() => { const c = wide(charts.lineChart({title: 't',
      points: data[0], smoothing: 0.6, markers: [{step: 2, code: 'P9', title: 'x'}]}));
      return [c, () => c.destroy?.()]; });
  const jobs = data.map((_, i) => ({job_id: 'j' + i}));
  const byJob = Object.fromEntries(data.map((p, i) => ['j' + i, {series: {m: p}, alerts: []}]));
  const overlayMs = await time(() => { const o = charts.overlayChart('m', jobs, byJob);
      return [wide(o.card), o.destroy]; });
  const aligned = [data[0].map((p) => p[0]), ...data.map((p) => p.map((q) => q[1]))];
  const bareMs = await time(() => { const div = document.createElement('div');
      const u = new uPlot({width: 460, height: 220, scales: {x: {time: false}},
                 series: [{}, ...data.map((_, i) => ({label: 's' + i, stroke: '#36c'}))]},
                aligned, div); return [div, () => u.destroy()]; });
  return [metricMs, overlayMs, bareMs];
}"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    handler = functools.partial(_Quiet, directory=str(STATIC_DIR / "assets"))
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{srv.server_port}/")
        print("| curves x steps | metric chart ms (1 curve) | overlay chart ms | bare uPlot ms |")
        print("|---|---|---|---|")
        for series, points in ((1, 20), (1, 300), (4, 300), (4, 2000), (8, 5000)):
            metric_ms, overlay_ms, bare_ms = page.evaluate(JS, [series, points, args.repeats])
            print(f"| {series} x {points} | {metric_ms:.1f} | {overlay_ms:.1f} | {bare_ms:.1f} |")
        browser.close()
    srv.shutdown()


if __name__ == "__main__":
    main()
