#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs rdma-core's pyverbs tests and prints one line per test: "test id: outcome".

    run_suite.py TESTS_DIR --dev DEVICE --gid INDEX

TESTS_DIR is a copy of Debian's /usr/share/doc/rdma-core/tests with its .gz files
unpacked. Outcomes: pass, skip, fail, error, xfail (expected failure), xpass. Each line is
printed when its test ends, so a run that is killed keeps what it did. The reasons of
failures and skips go to stderr.
"""
import os
import sys
import traceback
import unittest
from importlib.machinery import SourceFileLoader


class LineResult(unittest.TestResult):
    def _line(self, test, outcome, err=None):
        print(f'{test.id()}: {outcome}', flush=True)
        if err:
            sys.stderr.write(f'--- {test.id()}: {outcome}\n')
            sys.stderr.write(''.join(traceback.format_exception(*err)))

    def addSuccess(self, test):
        super().addSuccess(test)
        self._line(test, 'pass')

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._line(test, 'skip')
        sys.stderr.write(f'--- {test.id()}: skip: {reason}\n')

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._line(test, 'fail', err)

    def addError(self, test, err):
        super().addError(test, err)
        self._line(test, 'error', err)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._line(test, 'xfail')

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._line(test, 'xpass')

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err:
            self._line(subtest, 'fail', err)


def main():
    tests_dir = os.path.abspath(sys.argv[1])
    # The suite's own argument parser reads sys.argv: --dev, --gid, ...
    sys.argv = [sys.argv[0]] + sys.argv[2:]
    sys.path.insert(0, tests_dir)
    from args_parser import parser
    parser.parse_args()
    tests = SourceFileLoader('tests', os.path.join(tests_dir, '__init__.py')).load_module()
    suite = unittest.defaultTestLoader.loadTestsFromModule(tests)
    suite.run(LineResult())


if __name__ == '__main__':
    main()
