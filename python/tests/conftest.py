# SPDX-License-Identifier: MIT
"""pytest's results as TAP (--tap), which meson counts like the C suites'.

With --tap every test prints one TAP line on stdout when it ends, a
failure's report before it as comments, a file that cannot be collected a
"not ok" of its own, and the plan comes last; pytest's own report goes to
stderr.
"""

import sys

import pytest
from _pytest.terminal import TerminalReporter


def pytest_addoption(parser):
    parser.addoption("--tap", action="store_true", help="report as TAP on stdout")


class _Tap:
    def __init__(self):
        self.n = 0
        self.failed = {}

    def line(self, ok, name, directive=""):
        self.n += 1
        print(f"{'ok' if ok else 'not ok'} {self.n} - {name}{directive}", flush=True)

    @staticmethod
    def comment(text):
        for line in str(text).splitlines():
            print(f"# {line}", flush=True)

    def pytest_collectreport(self, report):
        if report.failed:
            self.comment(report.longrepr)
            self.line(False, f"collect {report.nodeid}")

    def pytest_runtest_logreport(self, report):
        if report.failed:
            self.comment(f"{report.nodeid} ({report.when}):")
            self.comment(report.longreprtext)
            self.failed[report.nodeid] = True
        if report.when == "call" and report.skipped or report.when == "setup" and report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
            self.line(True, report.nodeid, f" # SKIP {reason}")
            self.failed[report.nodeid] = None
        elif report.when == "teardown" and report.nodeid in self.failed:
            if self.failed.pop(report.nodeid) is not None:
                self.line(False, report.nodeid)
        elif report.when == "teardown":
            self.line(True, report.nodeid)

    def pytest_sessionfinish(self, session, exitstatus):
        print(f"1..{self.n}", flush=True)


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    if config.getoption("--tap"):
        config.pluginmanager.register(_Tap(), "rbln_tap")
        terminal = config.pluginmanager.get_plugin("terminalreporter")
        if terminal:
            config.pluginmanager.unregister(terminal)
            config.pluginmanager.register(TerminalReporter(config, sys.stderr),
                                          "terminalreporter")
