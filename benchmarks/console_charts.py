"""The console's own SVG line chart (``chart.js``) against uPlot (vendored) in headless
Chromium: milliseconds to build and lay out one chart of ``series`` curves x ``points`` steps,
the median of ``--repeats`` draws each (building the element, attaching it, uPlot's canvas
drawing and the layout; the browser's later paint of the SVG is not counted, which favours the
own chart), for the sizes a job page and the Compare page draw.

    .venv/bin/python benchmarks/console_charts.py --repeats 15
"""

from __future__ import annotations

import argparse
import functools
import http.server
import threading

from rltune.console import STATIC_DIR

JS = """async ([series, points, repeats]) => {
  const own = await import('/chart.js');
  const uPlot = (await import('/vendor/uplot/uPlot.esm.js')).default;
  const data = Array.from({length: series}, (_, s) =>
    Array.from({length: points}, (_, i) => [i + 1, Math.sin(i / 7 + s) + s]));
  const host = document.body;
  const med = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  // build, attach, let queued microtasks run (uPlot draws its canvas in one), force layout
  const time = async (fn) => { const out = []; for (let r = 0; r < repeats; r++) {
      const t0 = performance.now(); const el = fn(); host.append(el);
      await new Promise((ok) => queueMicrotask(ok)); el.getBoundingClientRect();
      out.push(performance.now() - t0); el.remove(); } return med(out); };
  const ownMs = await time(() => own.lineChart({
      title: 't', series: data.map((p, i) => ({name: 's' + i, points: p})), smoothing: 0.6}));
  const steps = data[0].map((p) => p[0]);
  const aligned = [steps, ...data.map((p) => p.map((q) => q[1]))];
  const uMs = await time(() => { const div = document.createElement('div');
      new uPlot({width: 460, height: 220, scales: {x: {time: false}},
                 series: [{}, ...data.map((_, i) => ({label: 's' + i, stroke: '#36c'}))]},
                aligned, div); return div; });
  return [ownMs, uMs];
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
        print("| curves x steps | own SVG chart ms | uPlot ms | own / uPlot |")
        print("|---|---|---|---|")
        for series, points in ((1, 20), (1, 300), (4, 300), (4, 2000), (8, 5000)):
            own_ms, u_ms = page.evaluate(JS, [series, points, args.repeats])
            print(f"| {series} x {points} | {own_ms:.1f} | {u_ms:.1f} | {own_ms / u_ms:.1f} |")
        browser.close()
    srv.shutdown()


if __name__ == "__main__":
    main()
