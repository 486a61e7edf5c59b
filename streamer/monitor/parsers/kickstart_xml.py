"""Pegasus 4 XML kickstart records (`<invocation ...>`) -> monitord's flat invocation record.

The XML half of kickstart parsing (kickstart.py holds the YAML records, the
file splitting and the clustered-job lines); text in, record out.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

_XML_ATTRS = {  # element -> attributes monitord takes as text, under the attribute's name
    "invocation": ("hostname", "resource", "user", "hostaddr", "transformation", "derivation"),
    "mainjob": ("duration", "start"),
    "status": ("raw",),
    "regular": ("exitcode",),
}
_XML_MACHINE = {"ram": ("total",), "uname": ("system", "release", "machine")}


class _XMLRecord:
    """Expat handlers collecting what monitord's XML parser collects (attribute values stay text)."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {"invocation": True}
        self.outputs: dict[str, dict[str, str]] = {}
        self.in_main = self.in_machine = False
        self.stream: str | None = None  # "stdout" / "stderr" statcall being read
        self.in_data = self.in_cwd = self.in_args = self.in_signal = self.in_cpu = False
        self.final_lfn: str | None = None
        self.checksum: dict[str, str] = {}
        self.texts: dict[str, list[str]] = {"stdout": [], "stderr": [], "cwd": [], "arg": [], "action": [],
                                            "cpu": []}
        self.args: list[str] = []

    def start(self, name: str, attrs: dict[str, str]) -> None:
        name = name.rsplit(" ", 1)[-1].rsplit("}", 1)[-1]
        if name == "mainjob":
            self.in_main = True
        elif name == "machine":
            self.in_machine = True
        if name == "argument-vector":
            self.in_args = True
        elif name == "arg" and self.in_args:
            self.texts["arg"] = []
        elif name == "cwd":
            self.in_cwd = True
        elif name == "checksum":
            self.checksum = {k: attrs[k] for k in ("type", "value", "timing") if k in attrs}
        elif name == "cpu":
            self.keys["cpu"] = {"cpu_" + k: attrs[k] for k in ("count", "speed", "vendor") if k in attrs}
            self.in_cpu = True
        elif name == "data":
            self.in_data = True
        elif name == "file":
            if self.in_main and "name" in attrs:
                self.keys["name"] = attrs["name"]
        elif name in _XML_MACHINE:
            if self.in_machine:
                self.keys.update({k: attrs[k] for k in _XML_MACHINE[name] if k in attrs})
        elif name == "signalled":
            self.in_signal = True
            self.keys["signalled"] = {"action": "", **{k: attrs[k] for k in ("signal", "corefile") if k in attrs}}
        elif name == "statcall":
            ident = attrs.get("id")
            if ident in ("stdout", "stderr"):
                self.stream = ident
            elif ident == "final":
                self.final_lfn = attrs.get("lfn")
        elif name == "statinfo":
            if self.final_lfn is not None:
                self.outputs[self.final_lfn] = {k: attrs[k] for k in ("lfn", "size", "ctime", "user") if k in attrs}
        elif name == "usage":
            if self.in_main:
                for key in ("utime", "stime", "maxrss"):
                    try:
                        self.keys[key] = float(attrs[key])
                    except (KeyError, ValueError):
                        pass
        elif name in _XML_ATTRS:
            self.keys.update({k: attrs[k] for k in _XML_ATTRS[name] if k in attrs})

    def end(self, name: str) -> None:
        name = name.rsplit(" ", 1)[-1].rsplit("}", 1)[-1]
        if name == "argument-vector":
            self.in_args = False
        elif name == "arg" and self.in_args:
            self.args.append("".join(self.texts["arg"]))
        elif name == "cwd":
            self.in_cwd = False
        elif name == "mainjob":
            self.in_main = False
        elif name == "machine":
            self.in_machine = False
        elif name == "cpu":
            self.in_cpu = False
            model = "".join(self.texts["cpu"]).strip()
            if model:
                self.keys["cpu"]["cpu_model"] = model
        elif name == "signalled":
            self.in_signal = False
            self.keys["signalled"]["action"] = "".join(self.texts["action"])
        elif name == "statcall":
            self.stream = None
            if self.final_lfn is not None and self.final_lfn in self.outputs:
                for key, value in self.checksum.items():
                    self.outputs[self.final_lfn]["checksum." + key] = value
                self.checksum = {}
            self.final_lfn = None
        elif name == "data":
            self.in_data = False

    def text(self, data: str) -> None:
        if self.in_data and self.stream is not None:
            self.texts[self.stream].append(data)
        elif self.in_cwd:
            self.texts["cwd"].append(data)
        elif self.in_args:
            self.texts["arg"].append(data)
        elif self.in_signal:
            self.texts["action"].append(data)
        elif self.in_cpu:
            self.texts["cpu"].append(data)

    def record(self) -> dict[str, Any]:
        keys = self.keys
        keys["cwd"] = "".join(self.texts["cwd"])
        keys["argument-vector"] = " ".join(self.args)
        keys["stdout"] = "".join(self.texts["stdout"])
        keys["stderr"] = "".join(self.texts["stderr"])
        keys["outputs"] = self.outputs
        return keys


def from_xml(text: str) -> dict[str, Any]:
    """A Pegasus 4 XML invocation record -> monitord's flat record (values as text, usage as floats).

    Raises `ET.ParseError` (an `xml.parsers.expat.ExpatError`) on broken XML.
    """
    from xml.parsers import expat

    handler = _XMLRecord()
    parser = expat.ParserCreate()
    parser.StartElementHandler = handler.start
    parser.EndElementHandler = handler.end
    parser.CharacterDataHandler = handler.text
    try:
        parser.Parse(text, True)
    except expat.ExpatError as exc:
        raise ET.ParseError(str(exc)) from None
    return handler.record()
