"""JUnit XML: a test suite per file and a failing test case per diagnostic."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from itertools import groupby

from torchlint.output.context import OutputContext


def format_junit(context: OutputContext) -> str:
    total = len(context.diagnostics)
    root = ET.Element(
        "testsuites", name="torchlint", tests=str(max(total, 1)), failures=str(total), errors="0"
    )
    if not total:
        suite = ET.SubElement(root, "testsuite", name="torchlint", tests="1", failures="0")
        ET.SubElement(suite, "testcase", name="No errors found")
    for path, group in groupby(context.diagnostics, key=lambda d: d.path):
        items = list(group)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=path,
            tests=str(len(items)),
            failures=str(len(items)),
            errors="0",
        )
        for d in items:
            case = ET.SubElement(
                suite,
                "testcase",
                name=f"org.torchlint.{d.code}",
                classname=path.removesuffix(".py").replace("/", "."),
                file=path,
                line=str(d.line),
            )
            failure = ET.SubElement(case, "failure", message=d.message, type=d.code)
            failure.text = f"line {d.line}, col {d.column}, {d.code} {d.message}"
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"
