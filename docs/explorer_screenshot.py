"""Take ``docs/explorer.png``: the demo's explorer, filtered to Unstable, one fact open.

    fks demo   # writes fks_demo/runs/fks-demo-llama/explorer.html
    python docs/explorer_screenshot.py fks_demo/runs/fks-demo-llama/explorer.html fact_000006

Drives Debian's chromium through playwright (no browser download).
"""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def main() -> None:
    """Screenshot ``argv[1]`` with fact ``argv[2]`` open to ``argv[3]`` (default beside this)."""
    page_path, fact = Path(sys.argv[1]).resolve(), sys.argv[2]
    out = Path(sys.argv[3]) if len(sys.argv) > 3 else Path(__file__).with_name("explorer.png")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 820})
        page.goto(page_path.as_uri())
        page.wait_for_selector("body[data-ready='1']", state="attached")
        page.select_option("#f-group", "Unstable")
        page.click(f"#facts-body tr[data-fact='{fact}']")
        page.wait_for_selector(f"#detail h2:has-text('{fact}')")
        page.screenshot(path=str(out))
        browser.close()
    print(out, out.stat().st_size)


if __name__ == "__main__":
    main()
