"""The report in a real browser (headless Chromium): the script runs without console errors, graphs and
charts are in the rendered DOM, injected markup stays text, and the page actually paints."""

from __future__ import annotations

import re
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from memtrace_opt.report import render_report
from tests.test_report_support import build_toy_run

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [pytest.mark.browser, pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium")]


def chromium(url: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium on ``url`` with console messages logged to stderr."""
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *args, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)


def console_lines(stderr: str) -> list[str]:
    """What the page logged (console calls, uncaught errors, refused scripts); the report logs nothing."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and unfiltered RGB rows of an 8-bit, non-interlaced RGB/RGBA PNG (what Chromium writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, []
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0
        elif kind == b"IDAT":
            idat.append(body)
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(b"".join(idat)), w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        _unfilter(f, line, prev, bpp)
        rows.append(bytes(line[i] for i in range(stride) if i % bpp < 3) if bpp == 4 else bytes(line))
        prev = line
    return w, h, rows


def _unfilter(f: int, line: bytearray, prev: bytearray, bpp: int) -> None:
    if f == 2:
        line[:] = bytes((a + b) & 255 for a, b in zip(line, prev))
        return
    for x in range(len(line)):
        a = line[x - bpp] if x >= bpp else 0
        if f == 1:
            line[x] = (line[x] + a) & 255
        elif f == 3:
            line[x] = (line[x] + (a + prev[x]) // 2) & 255
        elif f == 4:
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return render_report(build_toy_run(tmp_path_factory.mktemp("browser") / "run"))


def test_rendered_dom_has_graphs_charts_and_no_errors(report: Path, tmp_path: Path) -> None:
    done = chromium(report.as_uri(), tmp_path / "profile", "--dump-dom")
    dom = done.stdout
    assert done.returncode == 0 and "</html>" in dom
    assert console_lines(done.stderr) == []
    assert "3 of 3 shown" in dom  # the page script ran (a CSP hash mismatch would have blocked it)
    assert len(re.findall(r'<svg class="slice"', dom)) == 3
    assert len(re.findall(r'<svg class="chart bars"', dom)) == 4 + 1  # errors: 4; benchmark cases: 1
    assert len(re.findall(r'<svg class="chart line"', dom)) == 1
    assert len(re.findall(r'<svg class="timeline"', dom)) >= 3
    assert len(re.findall(r'<g class="node operation[^"]*blamed', dom)) == 3
    assert "<img" not in dom and "onerror=" not in dom.replace("onerror=alert(1)&gt;", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom


def test_screenshot_is_painted(report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    done = chromium(report.as_uri(), tmp_path / "profile", "--window-size=900,1300", f"--screenshot={shot}",
                    "--hide-scrollbars")
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    assert console_lines(done.stderr) == []
    w, h, rows = png_pixels(shot)
    assert (w, h) == (900, 1300)
    pixels = [row[i:i + 3] for row in rows for i in range(0, len(row), 3)]
    non_white = sum(1 for p in pixels if min(p) < 235)
    red = sum(1 for r, g, b in pixels if r > 180 and g < 90 and b < 90)  # the first card's blamed op, drawn
    assert non_white > 0.05 * w * h
    assert red > 30
