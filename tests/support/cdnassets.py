"""The CDN files that pegasus-service 5.1.3's pages load (jQuery, Popper, Bootstrap, DataTables, Font Awesome,
Highcharts, the Stardos Stencil web font), rebuilt from the npm registry for a machine without internet.

`npm pack` fetches each package tarball once into a cache outside the repository (`$STREAMER_CACHE`, default
`~/.cache/streamer`, subfolder `cdn-npm/`); nothing fetched is committed. `assets()` maps each CDN URL the
templates name to (body, content type):

- jsdelivr serves npm files byte for byte, cdnjs's Font Awesome 5.15.4 is the npm package's `css/all.min.css`:
  `check_integrity` verifies them against the templates' SRI hashes (Chromium enforces them too);
- the DataTables builder bundle `v/bs4/dt-1.11.3/b-2.0.1/datatables.min.{js,css}` is the concatenation of the
  npm dist files of its parts (core, Bootstrap 4 styling, Buttons, Buttons' Bootstrap 4 styling);
- Highcharts 4.1.4 (code.highcharts.com) is not on npm: the nearest published 4.1 release, 4.1.9
  (`highcharts-release`), stands in for it;
- the Google Fonts stylesheet of Stardos Stencil is the @fontsource package's `@font-face`, its font files
  served under fonts.gstatic.com.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import tarfile
from pathlib import Path

PACKAGES = {
    "jquery": "jquery@3.5.1",
    "popper": "@popperjs/core@2.9.3",
    "bootstrap": "bootstrap@5.1.1",
    "dt": "datatables.net@1.11.3",
    "dt-bs4": "datatables.net-bs4@1.11.3",
    "buttons": "datatables.net-buttons@2.0.1",
    "buttons-bs4": "datatables.net-buttons-bs4@2.0.1",
    "fontawesome": "@fortawesome/fontawesome-free@5.15.4",
    "highcharts": "highcharts-release@4.1.9",
    "stardos": "@fontsource/stardos-stencil@5.0.8",
}
JSDELIVR = "https://cdn.jsdelivr.net/npm"
FONTAWESOME = "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/5.15.4"
DATATABLES = "https://cdn.datatables.net/v/bs4/dt-1.11.3/b-2.0.1/datatables.min"
HIGHCHARTS = "https://code.highcharts.com/4.1.4"
GSTATIC = "https://fonts.gstatic.com/s/stardosstencil"
TYPES = {".js": "application/javascript", ".css": "text/css", ".woff2": "font/woff2", ".woff": "font/woff",
         ".ttf": "font/ttf", ".eot": "application/vnd.ms-fontobject", ".svg": "image/svg+xml"}
# <script src=...> and <link href=...> of the templates (not <a href>): what the browser loads by itself
_LOADED = re.compile(r"<(?:script|link)\b[^>]*?\b(?:src|href)=[\"']((?:https?:)?//[^\"']+)[\"'][^>]*>", re.I)
_INTEGRITY = re.compile(r"\bintegrity=[\"']([^\"']+)[\"']")


class Unavailable(Exception):
    """npm, the registry or a package could not give the files."""


def cache_dir() -> Path:
    return Path(os.environ.get("STREAMER_CACHE", Path.home() / ".cache" / "streamer")) / "cdn-npm"


def _tarball(spec: str) -> Path:
    folder = cache_dir()
    name = spec.lstrip("@").replace("/", "-").replace("@", "-") + ".tgz"
    path = folder / name
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run(["npm", "pack", "--loglevel=error", spec], cwd=folder, capture_output=True, text=True,
                                  timeout=300)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise Unavailable(f"npm pack {spec}: {error}") from error
        if done.returncode != 0 or not path.is_file():
            raise Unavailable(f"npm pack {spec} failed: {done.stderr.strip()[-500:]}")
    return path


def _files(spec: str) -> dict[str, bytes]:
    """The package's files by path without the leading `package/`."""
    with tarfile.open(_tarball(spec)) as tar:
        return {member.name.split("/", 1)[1]: tar.extractfile(member).read()
                for member in tar.getmembers() if member.isfile()}


def _typed(url: str, body: bytes) -> tuple[bytes, str]:
    path = url.split("?", 1)[0]
    return body, TYPES.get(path[path.rfind("."):], "application/octet-stream")


def assets() -> dict[str, tuple[bytes, str]]:
    p = {key: _files(spec) for key, spec in PACKAGES.items()}
    out = {
        "https://code.jquery.com/jquery-3.5.1.min.js": p["jquery"]["dist/jquery.min.js"],
        f"{JSDELIVR}/@popperjs/core@2.9.3/dist/umd/popper.min.js": p["popper"]["dist/umd/popper.min.js"],
        f"{JSDELIVR}/bootstrap@5.1.1/dist/css/bootstrap.min.css": p["bootstrap"]["dist/css/bootstrap.min.css"],
        f"{JSDELIVR}/bootstrap@5.1.1/dist/js/bootstrap.min.js": p["bootstrap"]["dist/js/bootstrap.min.js"],
        f"{FONTAWESOME}/css/all.min.css": p["fontawesome"]["css/all.min.css"],
        f"{DATATABLES}.js": b"\n".join([p["dt"]["js/jquery.dataTables.min.js"],
                                        p["dt-bs4"]["js/dataTables.bootstrap4.min.js"],
                                        p["buttons"]["js/dataTables.buttons.min.js"],
                                        p["buttons-bs4"]["js/buttons.bootstrap4.min.js"]]),
        f"{DATATABLES}.css": b"\n".join([p["dt-bs4"]["css/dataTables.bootstrap4.min.css"],
                                         p["buttons-bs4"]["css/buttons.bootstrap4.min.css"]]),
        f"{HIGHCHARTS}/highcharts.js": p["highcharts"]["highcharts.js"],
        f"{HIGHCHARTS}/highcharts-more.js": p["highcharts"]["highcharts-more.js"],
        f"{HIGHCHARTS}/modules/exporting.js": p["highcharts"]["modules/exporting.js"],
        "https://fonts.googleapis.com/css?family=Stardos+Stencil":
            p["stardos"]["400.css"].replace(b"url(./files/", f"url({GSTATIC}/".encode()),
    }
    for path, body in p["fontawesome"].items():
        if path.startswith("webfonts/"):
            out[f"{FONTAWESOME}/{path}"] = body
    for path, body in p["stardos"].items():
        if path.startswith("files/"):
            out[f"{GSTATIC}/{path[len('files/'):]}"] = body
    return {url: _typed(url, body) for url, body in out.items()}


def template_assets(templates: Path) -> dict[str, str | None]:
    """Every off-site URL the templates make the browser load (`//host` read as https), with its SRI hash."""
    found: dict[str, str | None] = {}
    for template in sorted(templates.rglob("*.html")):
        for tag in _LOADED.finditer(template.read_text()):
            url = tag.group(1)
            url = "https:" + url if url.startswith("//") else url
            integrity = _INTEGRITY.search(tag.group(0))
            found[url] = integrity.group(1) if integrity else found.get(url)
    return found


def check_integrity(served: dict[str, tuple[bytes, str]], wanted: dict[str, str | None]) -> list[str]:
    """What is wrong: template URLs not served, or served with a body whose hash is not the template's."""
    problems = []
    for url, integrity in wanted.items():
        if url not in served:
            problems.append(f"not served: {url}")
        elif integrity:
            algorithm, _, expected = integrity.partition("-")
            actual = base64.b64encode(hashlib.new(algorithm, served[url][0]).digest()).decode()
            if actual != expected:
                problems.append(f"{url}: {algorithm} {actual}, the template expects {expected}")
    return problems
